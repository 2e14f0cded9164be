// Promises of docs/gateway.md that a client or an operator relies on and that
// no other test pinned (the sweep of docs/testing.md): the code of every
// error the gateway makes itself and that such errors carry no Cache-Status,
// the default request limits, the Cache-Status of an uncached GET and of a
// write, the default instance name, and which request headers reach the
// upstream. Over real loopback HTTP: a gateway in-process, FakeUpstream or a
// one-shot raw upstream that records the request it gets.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include "apps/gateway/config.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/gateway.h"
#include "apps/gateway/http_client.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/testing/status_macros.h"

namespace fusebox::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;

constexpr char kToken[] = "contract-admin-token";

// A cached read, an uncached read and a write on one account, with `extra`
// (top-level keys) before the upstreams. No `limits:`: the defaults apply.
std::string ContractYaml(const std::string& upstream_url, const std::string& extra) {
  return "listen: 127.0.0.1:0\nio_threads: 1\nworkers: 2\n" + extra +
         "upstreams:\n  - name: graph\n    base_url: " + upstream_url + "/v19.0\n" + R"(routes:
  - {name: insights, method: GET, path: "/v1/{provider}/accounts/{account}/insights",
     upstream: graph, upstream_path: "/{account}/insights", workload: read,
     provider: "{provider}", subject: "{account}", cache: {fresh_for: 60s, max_stale: 1h}}
  - {name: media, method: GET, path: "/v1/{provider}/accounts/{account}/media",
     upstream: graph, upstream_path: "/{account}/media", workload: read,
     provider: "{provider}", subject: "{account}"}
  - {name: publish, method: POST, path: "/v1/{provider}/accounts/{account}/media_publish",
     upstream: graph, upstream_path: "/{account}/media_publish", workload: read,
     provider: "{provider}", subject: "{account}"}
)";
}

// `request` written on a new connection to `address`, and everything read
// back until the gateway closes it (or 10 s pass: "<timeout>" is appended).
std::string RawExchange(const std::string& address, std::string_view request) {
  const std::size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
  inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{.tv_sec = 10, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
    close(fd);
    return "<connect failed>";
  }
  while (!request.empty()) {
    const ssize_t n = send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    if (n <= 0) break;
    request.remove_prefix(static_cast<std::size_t>(n));
  }
  std::string out;
  char chunk[16384];
  for (;;) {
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n == 0) break;
    if (n < 0) {
      out += "<timeout>";
      break;
    }
    out.append(chunk, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

// The JSON body of a raw response (after the head), or null.
Json RawBody(const std::string& response) {
  const std::size_t at = response.find("\r\n\r\n");
  if (at == std::string::npos) return Json();
  return Json::parse(response.substr(at + 4), nullptr, false);
}

class GatewayContract : public ::testing::Test {
 protected:
  void SetUp() override {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(upstream_, FakeUpstream::Start({.clock = &upstream_clock_}));
    FUSEBOX_ASSERT_OK(
        upstream_->SetRoutes({{"GET", "/v19.0/*/insights", {{.body = R"({"reach":1})"}}},
                              {"GET", "/v19.0/*/media", {{.body = R"({"data":[]})"}}},
                              {"POST", "/v19.0/*/media_publish", {{.body = R"({"id":"1"})"}}}}));
    audit_path_ = ::testing::TempDir() + "gw_contract_audit_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
    std::remove(audit_path_.c_str());
  }

  void Start(const std::string& extra) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(
        GatewayConfig config,
        ParseGatewayConfig(ContractYaml(upstream_->url(), extra), "contract.yaml",
                           [](std::string_view name) -> std::optional<std::string> {
                             if (name == "GW_CONTRACT_TOKEN") return std::string(kToken);
                             return std::nullopt;
                           }));
    FUSEBOX_ASSERT_OK_AND_ASSIGN(
        gateway_, Gateway::Create({.config = config, .clock = &clock_, .log = &log_}));
  }

  std::string Admin() const {
    return "admin:\n  token_env: GW_CONTRACT_TOKEN\n  audit_log: " + audit_path_ + "\n";
  }

  void TearDown() override {
    if (gateway_) gateway_->Shutdown();
  }

  // A fetch through the gateway; a transport failure fails the test.
  void Fetch(std::string_view method, const std::string& target, HttpReply* out,
             HttpFetchOptions options = {}) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(*out, HttpFetch(gateway_->address(), method, target, options));
  }

  static Json Error(const HttpReply& r) {
    return Json::parse(r.body, nullptr, false).value("error", Json::object());
  }

  testing::ManualClock clock_;
  testing::ManualClock upstream_clock_;
  std::ostringstream log_;
  std::string audit_path_;
  std::unique_ptr<FakeUpstream> upstream_;
  std::unique_ptr<Gateway> gateway_;
};

// docs/gateway.md, "Client contract": the gateway's own errors use their
// documented codes (a client branches on them) and carry no Cache-Status
// (RFC 9211 section 2); the admin API's 401 names its scheme.
TEST_F(GatewayContract, ErrorsTheGatewayMakesCarryTheirCodeAndNoCacheStatus) {
  ASSERT_NO_FATAL_FAILURE(Start(Admin()));
  struct Case {
    const char* method;
    const char* target;
    int status;
    const char* code;
  };
  for (const Case& c :
       {Case{"GET", "/v2/nothing/here", 404, "NOT_FOUND"},
        Case{"DELETE", "/v1/instagram/accounts/178/insights", 405, "METHOD_NOT_ALLOWED"},
        Case{"GET", "/admin/circuits", 401, "UNAUTHORIZED"}}) {
    HttpReply r;
    ASSERT_NO_FATAL_FAILURE(Fetch(c.method, c.target, &r));
    EXPECT_EQ(r.status, c.status) << c.method << " " << c.target;
    EXPECT_EQ(Error(r).value("code", ""), c.code) << c.method << " " << c.target;
    EXPECT_FALSE(r.HasHeader("Cache-Status")) << c.method << " " << c.target;
  }
  HttpReply unauthorized;
  ASSERT_NO_FATAL_FAILURE(Fetch("GET", "/admin/circuits", &unauthorized,
                                {.headers = {{"Authorization", "Bearer wrong-token"}}}));
  EXPECT_EQ(unauthorized.status, 401);
  EXPECT_EQ(unauthorized.Header("WWW-Authenticate"), "Bearer");
  HttpReply authorized;
  ASSERT_NO_FATAL_FAILURE(Fetch("GET", "/admin/circuits", &authorized,
                                {.headers = {{"Authorization", std::string("Bearer ") + kToken}}}));
  EXPECT_EQ(authorized.status, 200);
  EXPECT_EQ(upstream_->TotalCalls(), 0);
}

// docs/gateway.md, "Limits", with no `limits:` section: a header section over
// 8 KiB is 431 HEADERS_TOO_LARGE, a body over 1 MiB is 413 PAYLOAD_TOO_LARGE
// (from Content-Length, before any of it is read), an expectation other than
// 100-continue is 417 EXPECTATION_FAILED; each closes the connection and
// carries no Cache-Status. Just under each default the request goes through.
TEST_F(GatewayContract, TheDefaultRequestLimitsAnswerWithTheirCodesAndClose) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  const std::string media = "/v1/instagram/accounts/178/media";
  const std::string publish = "/v1/instagram/accounts/178/media_publish";
  auto expect_refused = [](const std::string& response, const char* status, const char* code) {
    EXPECT_THAT(response, StartsWith(std::string("HTTP/1.1 ") + status)) << code;
    EXPECT_THAT(response, HasSubstr("Connection: close")) << code;
    EXPECT_THAT(response, Not(HasSubstr("Cache-Status"))) << code;
    EXPECT_EQ(RawBody(response).value("error", Json::object()).value("code", ""), code);
  };
  // The request line and the header section count together: 8192 bytes in all
  // (64 bytes either side of it, not the last byte: that is Beast's to count).
  const std::string head = "GET " + media + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  const std::string filler = "X-Filler: ";
  const std::size_t fits = 8192 - head.size() - filler.size() - 2 /* CRLF */ - 2 /* end */;
  const std::string ok =
      RawExchange(gateway_->address(), head + filler + std::string(fits - 64, 'a') + "\r\n\r\n");
  EXPECT_THAT(ok, StartsWith("HTTP/1.1 200")) << ok.substr(0, 200);
  // Over it, refused however the bytes arrive: whole in one write (Beast's
  // header_limit alone would let a section that ends within one read pass),
  // and in a header section that goes on and on without an end.
  expect_refused(
      RawExchange(gateway_->address(), head + filler + std::string(fits + 64, 'a') + "\r\n\r\n"),
      "431", "HEADERS_TOO_LARGE");
  expect_refused(RawExchange(gateway_->address(), head + filler + std::string(fits + 64, 'a')),
                 "431", "HEADERS_TOO_LARGE");

  const std::string post = "POST " + publish + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n";
  expect_refused(RawExchange(gateway_->address(), post + "Content-Length: 1048577\r\n\r\n"), "413",
                 "PAYLOAD_TOO_LARGE");
  const std::string at_limit = RawExchange(
      gateway_->address(), post + "Content-Length: 1048576\r\n\r\n" + std::string(1048576, 'a'));
  EXPECT_THAT(at_limit, StartsWith("HTTP/1.1 200")) << at_limit.substr(0, 200);

  expect_refused(RawExchange(gateway_->address(), head + "Expect: 200-ok\r\n\r\n"), "417",
                 "EXPECTATION_FAILED");
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/media"), 1);
  EXPECT_EQ(upstream_->Calls("POST", "/v19.0/*/media_publish"), 1);
}

// docs/gateway.md, "Client contract": an uncached GET is `fwd=bypass`, a write
// `fwd=method`; every proxied answer names the instance and the circuit key.
TEST_F(GatewayContract, AnUncachedGetIsBypassAWriteIsMethodAndBothNameInstanceAndCircuit) {
  ASSERT_NO_FATAL_FAILURE(Start("instance: gw-contract\n"));
  HttpReply get;
  ASSERT_NO_FATAL_FAILURE(Fetch("GET", "/v1/instagram/accounts/178/media", &get));
  EXPECT_EQ(get.status, 200);
  EXPECT_EQ(get.Header("Cache-Status"), "fusebox; fwd=bypass");
  HttpReply post;
  ASSERT_NO_FATAL_FAILURE(Fetch("POST", "/v1/instagram/accounts/178/media_publish", &post));
  EXPECT_EQ(post.status, 200);
  EXPECT_EQ(post.Header("Cache-Status"), "fusebox; fwd=method");
  for (const HttpReply* r : {&get, &post}) {
    EXPECT_EQ(r->Header("X-Fusebox-Instance"), "gw-contract");
    EXPECT_EQ(r->Header("X-Fusebox-Circuit"), "provider:instagram:read:178");
  }
}

// docs/gateway.md, "Configuration": `instance` defaults to HOST:PORT, the
// address actually listened on (the real port when the configured one is 0).
TEST_F(GatewayContract, TheInstanceNameDefaultsToTheAddressListenedOn) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  HttpReply r;
  ASSERT_NO_FATAL_FAILURE(Fetch("GET", "/v1/instagram/accounts/178/media", &r));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.Header("X-Fusebox-Instance"), gateway_->address());
  EXPECT_NE(gateway_->address(), "127.0.0.1:0");
}

// docs/gateway.md, "Metrics": every family an operator's dashboard or alert
// names is exposed without Redis (the snapshot tier's and the Redis pool's
// are added with Redis); a second call reuses the keep-alive connection, so
// connections_opened_total stays at 1, and nothing is in flight at rest.
TEST_F(GatewayContract, MetricsExposeEveryDocumentedFamilyAndKeepAliveReuse) {
  ASSERT_NO_FATAL_FAILURE(Start(""));
  for (int i = 0; i < 2; ++i) {
    HttpReply r;
    ASSERT_NO_FATAL_FAILURE(Fetch("GET", "/v1/instagram/accounts/178/media", &r));
    ASSERT_EQ(r.status, 200);
  }
  HttpReply metrics;
  ASSERT_NO_FATAL_FAILURE(Fetch("GET", "/metrics", &metrics));
  ASSERT_EQ(metrics.status, 200);
  for (const char* family :
       {"fusebox_gateway_requests_total", "fusebox_gateway_upstream_requests_total",
        "fusebox_gateway_single_flight_merged_total", "fusebox_gateway_snapshot_lookups_total",
        "fusebox_gateway_in_flight_requests", "fusebox_gateway_upstream_in_flight_requests",
        "fusebox_gateway_upstream_connections_opened_total",
        "fusebox_gateway_upstream_replies_too_large_total",
        "fusebox_gateway_upstream_calls_out_of_time_total", "fusebox_gateway_accept_errors_total",
        "fusebox_gateway_accept_pauses_total", "fusebox_gateway_connections",
        "fusebox_gateway_internal_errors_total"}) {
    EXPECT_THAT(metrics.body, HasSubstr(std::string("\n# TYPE ") + family + " ")) << family;
  }
  EXPECT_THAT(
      metrics.body,
      HasSubstr("\nfusebox_gateway_upstream_connections_opened_total{upstream=\"graph\"} 1\n"));
  EXPECT_THAT(metrics.body,
              HasSubstr("\nfusebox_gateway_upstream_in_flight_requests{upstream=\"graph\"} 0\n"));
  EXPECT_THAT(
      metrics.body,
      HasSubstr(
          "\nfusebox_gateway_upstream_requests_total{upstream=\"graph\",status=\"2xx\"} 2\n"));
}

// An upstream that accepts one connection, records the request head it reads
// and answers 200 `{}` with Connection: close.
class RecordingUpstream {
 public:
  RecordingUpstream() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = 0;
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd_, 4) != 0) {
      return;
    }
    socklen_t len = sizeof(sa);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RecordingUpstream() {
    shutdown(fd_, SHUT_RDWR);  // unblocks accept() if nothing came
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  RecordingUpstream(const RecordingUpstream&) = delete;
  RecordingUpstream& operator=(const RecordingUpstream&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // The request head, once read (bounded wait: "<none>" after 10 s).
  std::string Head() {
    auto f = head_.get_future();
    if (f.wait_for(std::chrono::seconds(10)) != std::future_status::ready) return "<none>";
    return f.get();
  }

 private:
  void Serve() {
    const int c = accept(fd_, nullptr, nullptr);
    if (c < 0) {
      head_.set_value("<none>");
      return;
    }
    timeval tv{.tv_sec = 10, .tv_usec = 0};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string in;
    char chunk[4096];
    while (in.find("\r\n\r\n") == std::string::npos) {
      const ssize_t n = recv(c, chunk, sizeof(chunk), 0);
      if (n <= 0) break;
      in.append(chunk, static_cast<std::size_t>(n));
    }
    head_.set_value(in.substr(0, in.find("\r\n\r\n") + 2));
    const std::string reply =
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        "Connection: close\r\n\r\n{}";
    send(c, reply.data(), reply.size(), MSG_NOSIGNAL);
    close(c);
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::promise<std::string> head_;
};

// docs/gateway.md, "Requests sent upstream": hop-by-hop headers and Host are
// not forwarded (Host is the upstream's), Authorization and the others are;
// the gateway never logs a header.
TEST(GatewayForwarding, HopByHopHeadersAreDroppedHostIsTheUpstreamsAndTheRestGoAsIs) {
  RecordingUpstream upstream;
  ASSERT_GT(upstream.port(), 0);
  testing::ManualClock clock;
  std::ostringstream log;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(GatewayConfig config,
                               ParseGatewayConfig(ContractYaml(upstream.url(), ""), "forward.yaml",
                                                  [](std::string_view) { return std::nullopt; }));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto gateway,
                               Gateway::Create({.config = config, .clock = &clock, .log = &log}));
  const std::string response =
      RawExchange(gateway->address(),
                  "GET /v1/instagram/accounts/178/media?fields=id HTTP/1.1\r\n"
                  "Host: gateway.example\r\n"
                  "Authorization: Bearer user-token-123\r\n"
                  "X-Request-Id: abc-1\r\n"
                  "Keep-Alive: timeout=5\r\n"
                  "TE: trailers\r\n"
                  "Trailer: X-Checksum\r\n"
                  "Proxy-Authorization: Basic cHJveHk6cHc=\r\n"
                  "Proxy-Connection: keep-alive\r\n"
                  "Connection: close\r\n\r\n");
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200")) << response.substr(0, 200);
  const std::string head = upstream.Head();
  EXPECT_THAT(head, StartsWith("GET /v19.0/178/media?fields=id HTTP/1.1\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nAuthorization: Bearer user-token-123\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nX-Request-Id: abc-1\r\n"));
  EXPECT_THAT(head, HasSubstr("\r\nHost: 127.0.0.1:" + std::to_string(upstream.port()) + "\r\n"));
  for (const char* dropped : {"gateway.example", "Keep-Alive:", "TE:", "Trailer:",
                              "Proxy-Authorization:", "Proxy-Connection:"}) {
    EXPECT_THAT(head, Not(HasSubstr(dropped))) << head;
  }
  gateway->Shutdown();
  EXPECT_THAT(log.str(), Not(HasSubstr("user-token-123")));
  EXPECT_THAT(log.str(), Not(HasSubstr("fields=id")));
}

}  // namespace
}  // namespace fusebox::gateway
