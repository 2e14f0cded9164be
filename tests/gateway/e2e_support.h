// tests/gateway/e2e_support.h: what the end-to-end gateway tests
// (gateway_e2e_test.cc, fleet_e2e_test.cc) share: a log that two gateways
// and the test may use at once, and the requests every test makes.
#ifndef FUSEBOX_TESTS_GATEWAY_E2E_SUPPORT_H_
#define FUSEBOX_TESTS_GATEWAY_E2E_SUPPORT_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <mutex>
#include <streambuf>
#include <string>

#include "apps/gateway/gateway.h"
#include "apps/gateway/http_client.h"
#include "tests/redis/redis_server.h"

namespace fusebox::gateway::e2e {

// A stream buffer under a lock. Each gateway serialises its own writes, but
// two gateways in one test write to one log from their own threads (and the
// test reads it meanwhile): a plain std::ostringstream would race.
class LockedLog final : public std::streambuf {
 public:
  std::string str() const {
    std::lock_guard<std::mutex> lock(mu_);
    return text_;
  }

 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      std::lock_guard<std::mutex> lock(mu_);
      text_ += static_cast<char>(c);
    }
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::lock_guard<std::mutex> lock(mu_);
    text_.append(s, static_cast<std::size_t>(n));
    return n;
  }

 private:
  mutable std::mutex mu_;
  std::string text_;
};

// GET `target` from `gw`; a failed exchange fails the test and answers an
// empty reply (status 0).
inline HttpReply Get(Gateway& gw, const std::string& target) {
  Result<HttpReply> reply = HttpFetch(gw.address(), "GET", target);
  EXPECT_TRUE(reply.has_value()) << reply.error().message();
  return reply ? *reply : HttpReply{};
}

// An admin request with the bearer `token` and a JSON body.
inline HttpReply Admin(Gateway& gw, const std::string& token, const std::string& method,
                       const std::string& target, const std::string& body = "") {
  Result<HttpReply> reply = HttpFetch(
      gw.address(), method, target,
      {.headers = {{"Authorization", "Bearer " + token}, {"Content-Type", "application/json"}},
       .body = body});
  EXPECT_TRUE(reply.has_value()) << reply.error().message();
  return reply ? *reply : HttpReply{};
}

// PTTL of `key` on `server`; -3 when no connection could be made.
inline std::int64_t RedisPttl(redis::testing::RedisServer& server, const std::string& key) {
  auto conn = server.Connect();
  if (!conn) return -3;
  return redis::testing::Pttl(**conn, key);
}

}  // namespace fusebox::gateway::e2e

#endif  // FUSEBOX_TESTS_GATEWAY_E2E_SUPPORT_H_
