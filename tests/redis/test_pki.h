// A throwaway PKI for the TLS tests, made with the openssl command-line tool
// in a temp directory: a CA the tests trust, certificates for the server
// (valid for localhost and 127.0.0.1, for another name, expired, not yet
// valid, from a CA nobody trusts) and a client certificate for mutual TLS.
// All server certificates share one key. EC P-256, so making it is quick.
//
// Test-only. Not thread-safe.
#ifndef FUSEBOX_TESTS_REDIS_TEST_PKI_H_
#define FUSEBOX_TESTS_REDIS_TEST_PKI_H_

#include <memory>
#include <string>

#include "fusebox/result.h"

namespace fusebox::redis::testing {

class TestPki {
 public:
  // Fails with openssl's output when a step fails (or openssl is missing).
  static Result<std::unique_ptr<TestPki>> Create();
  // Removes the directory.
  ~TestPki();
  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;

  const std::string& dir() const { return dir_; }
  std::string ca_cert() const { return dir_ + "/ca.crt"; }
  std::string server_key() const { return dir_ + "/server.key"; }
  // SAN DNS:localhost, IP:127.0.0.1.
  std::string good_cert() const { return dir_ + "/good.crt"; }
  // SAN DNS:wrong.example only.
  std::string wrong_host_cert() const { return dir_ + "/wronghost.crt"; }
  // Valid for localhost, but January 2020 only.
  std::string expired_cert() const { return dir_ + "/expired.crt"; }
  // Valid for localhost, but from 2099 only.
  std::string future_cert() const { return dir_ + "/future.crt"; }
  // Valid for localhost, from a second CA that is not trusted.
  std::string unknown_ca_cert() const { return dir_ + "/unknownca.crt"; }
  std::string client_cert() const { return dir_ + "/client.crt"; }
  std::string client_key() const { return dir_ + "/client.key"; }

 private:
  explicit TestPki(std::string dir) : dir_(std::move(dir)) {}
  // Runs `command` (a shell line) in dir_, its output to dir_/openssl.log.
  Status Run(const std::string& command) const;

  std::string dir_;
};

}  // namespace fusebox::redis::testing

#endif  // FUSEBOX_TESTS_REDIS_TEST_PKI_H_
