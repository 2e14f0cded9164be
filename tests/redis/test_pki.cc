#include "tests/redis/test_pki.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace fusebox::redis::testing {
namespace {

constexpr const char* kCaConfig = R"([ ca ]
default_ca = test_ca
[ test_ca ]
database = index.txt
new_certs_dir = .
certificate = ca.crt
private_key = ca.key
serial = serial
default_md = sha256
policy = policy_any
unique_subject = no
email_in_dn = no
[ policy_any ]
commonName = supplied
[ localhost ]
basicConstraints = CA:FALSE
subjectAltName = DNS:localhost,IP:127.0.0.1
[ wronghost ]
basicConstraints = CA:FALSE
subjectAltName = DNS:wrong.example
[ client ]
basicConstraints = CA:FALSE
extendedKeyUsage = clientAuth
)";

constexpr const char* kEcKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestPki::~TestPki() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Status TestPki::Run(const std::string& command) const {
  const std::string line = "cd '" + dir_ + "' && " + command + " >>openssl.log 2>&1";
  if (std::system(line.c_str()) == 0) return Status();
  std::ifstream in(dir_ + "/openssl.log");
  std::stringstream log;
  log << in.rdbuf();
  return Status::Internal("test PKI: `" + command + "` failed (is openssl installed?):\n" +
                          log.str());
}

Result<std::unique_ptr<TestPki>> TestPki::Create() {
  char tmpl[] = "/tmp/fusebox-pki-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return Status::Internal(std::string("mkdtemp: ") + std::strerror(errno));
  }
  std::unique_ptr<TestPki> pki(new TestPki(tmpl));
  {
    std::ofstream(pki->dir_ + "/ca.cnf") << kCaConfig;
    std::ofstream(pki->dir_ + "/index.txt") << "";
    std::ofstream(pki->dir_ + "/serial") << "01\n";
  }
  const std::string k(kEcKey);
  const std::string sign = "openssl ca -batch -notext -config ca.cnf ";
  const std::vector<std::string> steps = {
      // The trusted CA and another one, trusted by nobody.
      "openssl req -x509 " + k + " -keyout ca.key -out ca.crt -days 2 -subj '/CN=fusebox test CA'",
      "openssl req -x509 " + k +
          " -keyout other.key -out other.crt -days 2 -subj '/CN=fusebox untrusted CA'",
      // One server key, one request per certificate.
      "openssl req -new " + k + " -keyout server.key -out server.csr -subj '/CN=localhost'",
      sign + "-in server.csr -out good.crt -days 2 -extensions localhost",
      sign + "-in server.csr -out wronghost.crt -days 2 -extensions wronghost",
      sign +
          "-in server.csr -out expired.crt -extensions localhost "
          "-startdate 20200101000000Z -enddate 20200201000000Z",
      sign +
          "-in server.csr -out future.crt -extensions localhost "
          "-startdate 20990101000000Z -enddate 20990201000000Z",
      "openssl x509 -req -in server.csr -CA other.crt -CAkey other.key -CAcreateserial "
      "-out unknownca.crt -days 2 -extfile ca.cnf -extensions localhost",
      "openssl req -new " + k + " -keyout client.key -out client.csr -subj '/CN=fusebox client'",
      sign + "-in client.csr -out client.crt -days 2 -extensions client",
  };
  for (const std::string& step : steps) {
    if (Status s = pki->Run(step); !s.ok()) return s;
  }
  return pki;
}

}  // namespace fusebox::redis::testing
