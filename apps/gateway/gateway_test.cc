// The gateway over real loopback HTTP: the gateway in-process (its breakers
// and snapshots on a ManualClock), FakeUpstream as the upstream (its latency
// on a second ManualClock, so a test can hold a response in flight), and a
// real HTTP client. One test per row of the client contract
// (docs/gateway.md), plus single-flight, metrics, readiness, the admin API
// with its audit log, and SIGTERM draining of the real `fusebox` binary.
// About 1,100 lines on purpose: one fixture and its helpers serve every row of
// the contract, and each row is a short test; splitting by row would copy the
// fixture.
#include "apps/gateway/gateway.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/gateway/config.h"
#include "apps/gateway/dashboard_stats.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/handler.h"
#include "apps/gateway/http_client.h"
#include "fusebox/stale_cache.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Json = nlohmann::json;

constexpr char kToken[] = "s3cret-admin-token";

std::string ConfigYaml(const std::string& upstream_url, const std::string& audit_path) {
  return R"(listen: 127.0.0.1:0
instance: gw-test
workers: 8
admin:
  token_env: GW_TEST_TOKEN
  audit_log: )" +
         audit_path + R"(
upstreams:
  - name: graph
    base_url: )" +
         upstream_url + R"(/v19.0
    request_timeout: 10s
routes:
  - name: insights
    method: GET
    path: /v1/{provider}/accounts/{account}/insights
    upstream: graph
    upstream_path: /{account}/insights
    workload: read
    provider: "{provider}"
    subject: "{account}"
    classifier: meta
    cache:
      fresh_for: 60s
      max_stale: 1h
  - name: media
    method: GET
    path: /v1/{provider}/accounts/{account}/media
    upstream: graph
    upstream_path: /{account}/media
    workload: read
    provider: "{provider}"
    subject: "{account}"
    classifier: http
  - name: publish
    method: POST
    path: /v1/{provider}/accounts/{account}/media_publish
    upstream: graph
    upstream_path: /{account}/media_publish
    workload: publish
    provider: "{provider}"
    subject: "{account}"
    classifier: meta
)";
}

GetEnv TestEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    if (name == "GW_TEST_TOKEN") return std::string(kToken);
    return std::nullopt;
  };
}

// A gateway started from the configuration `yaml` (called `file` in errors),
// on `clock`, logging to `log`; null, with the test failed, if it cannot start.
std::unique_ptr<Gateway> StartGateway(std::string_view yaml, std::string_view file,
                                      testing::ManualClock& clock, std::ostream& log) {
  Result<GatewayConfig> config = ParseGatewayConfig(yaml, file, TestEnv());
  if (!config) {
    ADD_FAILURE() << config.error();
    return nullptr;
  }
  auto gw = Gateway::Create({.config = *config, .clock = &clock, .log = &log});
  if (!gw) {
    ADD_FAILURE() << gw.error();
    return nullptr;
  }
  return std::move(gw).value();
}

FakeResponse Ok(std::string body) { return FakeResponse{.status = 200, .body = std::move(body)}; }

#ifdef FUSEBOX_GATEWAY_WITH_REDIS
// fleet.tls reaches the Redis connection, and wins over the URL key by key:
// the gateway refuses to start on a TLS file it cannot read, whichever of
// the two named it, and on TLS settings for a plain redis:// URL. (Redis
// itself need not be up: the gateway starts failing open.)
TEST(GatewayFleetTls, FleetTlsWinsOverTheUrlAndIsChecked) {
  auto create = [](const std::string& url, const std::string& fleet) {
    // (The admin block needs an audit log path to parse; it is dropped below.)
    const std::string yaml = ConfigYaml("http://127.0.0.1:1", "/dev/null") + "redis: \"" + url +
                             "\"\n" + (fleet.empty() ? "" : "fleet:\n  tls:\n" + fleet);
    Result<GatewayConfig> config = ParseGatewayConfig(yaml, "test.yaml", TestEnv());
    EXPECT_TRUE(config.has_value()) << config.error();
    if (!config) return config.error();
    config->admin.reset();
    testing::ManualClock clock;
    std::ostringstream log;
    auto gw = Gateway::Create({.config = *config, .clock = &clock, .log = &log});
    return gw ? Status() : gw.error();
  };
  const std::string readable = "/etc/hostname";
  EXPECT_TRUE(create("rediss://127.0.0.1:1/0?ca_file=" + readable, "").ok());
  const Status wins = create("rediss://127.0.0.1:1/0?ca_file=" + readable,
                             "    ca_file: /nonexistent/fleet-ca.pem\n");
  EXPECT_THAT(std::string(wins.message()), HasSubstr("'/nonexistent/fleet-ca.pem' cannot be read"));
  EXPECT_TRUE(create("rediss://127.0.0.1:1/0?ca_file=/nonexistent/url-ca.pem",
                     "    ca_file: " + readable + "\n")
                  .ok())
      << "fleet.tls.ca_file replaces the URL's";
  const Status plain = create("redis://127.0.0.1:1/0", "    insecure_skip_verify: true\n");
  EXPECT_THAT(std::string(plain.message()), HasSubstr("insecure_skip_verify is a TLS setting"));
}
#endif

class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto up = FakeUpstream::Start({.clock = &upstream_clock_});
    ASSERT_TRUE(up.has_value()) << up.error();
    upstream_ = std::move(*up);
    audit_path_ = ::testing::TempDir() + "gw_audit_" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl";
    std::remove(audit_path_.c_str());
    Result<GatewayConfig> config =
        ParseGatewayConfig(ConfigYaml(upstream_->url(), audit_path_), "test.yaml", TestEnv());
    ASSERT_TRUE(config.has_value()) << config.error();
    auto gw = Gateway::Create({.config = *config, .clock = &clock_, .log = &log_});
    ASSERT_TRUE(gw.has_value()) << gw.error();
    gateway_ = std::move(*gw);
    address_ = gateway_->address();
  }

  void TearDown() override {
    if (gateway_) gateway_->Shutdown();
  }

  HttpReply Get(const std::string& target,
                std::vector<std::pair<std::string, std::string>> headers = {}) {
    Result<HttpReply> r = HttpFetch(address_, "GET", target, {.headers = std::move(headers)});
    EXPECT_TRUE(r.has_value()) << r.error();
    return r.has_value() ? *r : HttpReply{};
  }
  HttpReply Post(const std::string& target, std::string body,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
    Result<HttpReply> r = HttpFetch(address_, "POST", target,
                                    {.headers = std::move(headers), .body = std::move(body)});
    EXPECT_TRUE(r.has_value()) << r.error();
    return r.has_value() ? *r : HttpReply{};
  }
  static Json Body(const HttpReply& r) { return Json::parse(r.body, nullptr, false); }
  std::int64_t InsightsCalls() { return upstream_->Calls("GET", "/v19.0/*/insights"); }

  testing::ManualClock clock_;
  testing::ManualClock upstream_clock_;
  std::ostringstream log_;
  std::unique_ptr<FakeUpstream> upstream_;
  std::unique_ptr<Gateway> gateway_;
  std::string address_;
  std::string audit_path_;
};

constexpr char kInsights[] = "/v1/instagram/accounts/178/insights";

TEST_F(GatewayTest, FreshSnapshotIsServedWithoutCallingTheUpstream) {
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok(R"({"reach":42})")}}).ok());
  HttpReply first = Get(kInsights);
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.Header("Cache-Status"), "fusebox; fwd=miss; fwd-status=200; stored");
  EXPECT_EQ(Body(first), Json::parse(R"({"data":{"reach":42},"stale":false,"age_seconds":0})"));
  EXPECT_EQ(first.Header("X-Fusebox-Circuit"), "provider:instagram:read:178");
  EXPECT_EQ(first.Header("X-Fusebox-Instance"), "gw-test");

  clock_.Advance(std::chrono::seconds(60));  // exactly fresh_for: still fresh
  HttpReply second = Get(kInsights);
  EXPECT_EQ(second.status, 200);
  EXPECT_EQ(second.Header("Cache-Status"), "fusebox; hit; ttl=0");
  EXPECT_EQ(second.Header("Age"), "60");
  EXPECT_EQ(Body(second)["stale"], false);
  EXPECT_EQ(Body(second)["age_seconds"], 60);
  EXPECT_EQ(InsightsCalls(), 1);
}

TEST_F(GatewayTest, RateLimitWithoutSnapshotIs429WithRetryAfterThenFailsFast) {
  ASSERT_TRUE(
      upstream_
          ->SetRoute(
              {"GET",
               "/v19.0/*/insights",
               {{.status = 400,
                 .headers = {{"Retry-After", "30"}},
                 .body = R"({"error":{"code":4,"message":"Application request limit reached"}})"}}})
          .ok());
  HttpReply r = Get(kInsights);
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.Header("Retry-After"), "30");
  EXPECT_FALSE(r.HasHeader("Cache-Status"));
  Json e = Body(r)["error"];
  EXPECT_EQ(e["code"], "CONN_008");
  EXPECT_EQ(e["circuit_open"], false);
  EXPECT_EQ(e["upstream_status"], 400);

  // Another route of the same account and workload: the quota circuit is
  // open, the upstream is not called.
  clock_.Advance(std::chrono::seconds(10));
  HttpReply again = Get("/v1/instagram/accounts/178/media");
  EXPECT_EQ(again.status, 429);
  EXPECT_EQ(again.Header("Retry-After"), "20");
  EXPECT_EQ(Body(again)["error"]["circuit_open"], true);
  EXPECT_EQ(upstream_->TotalCalls(), 1);

  // Another account is not affected.
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/media", {Ok("{}")}}).ok());
  EXPECT_EQ(Get("/v1/instagram/accounts/999/media").status, 200);
}

// A gateway of its own for a test that needs another configuration: the
// test file's ConfigYaml plus `extra` (a breakers section, say), in front of
// a FakeUpstream answering `route`, both on ManualClocks.
class OwnGateway {
 public:
  void Start(FakeRoute route, const std::string& extra, const std::string& name) {
    auto up = FakeUpstream::Start({.clock = &upstream_clock});
    ASSERT_TRUE(up.has_value()) << up.error();
    upstream = std::move(*up);
    ASSERT_TRUE(upstream->SetRoute(std::move(route)).ok());
    const std::string audit = ::testing::TempDir() + "gw_audit_" + name + ".jsonl";
    gateway = StartGateway(ConfigYaml(upstream->url(), audit) + extra, name + ".yaml", clock, log);
    ASSERT_NE(gateway, nullptr);
  }
  ~OwnGateway() {
    if (gateway) gateway->Shutdown();
  }
  HttpReply Get(const std::string& target) {
    Result<HttpReply> r = HttpFetch(gateway->address(), "GET", target);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r.has_value() ? *r : HttpReply{};
  }
  HttpReply GetMedia(const std::string& account) {
    return Get("/v1/instagram/accounts/" + account + "/media");
  }
  static Json Body(const HttpReply& r) { return Json::parse(r.body, nullptr, false); }

  testing::ManualClock clock;
  testing::ManualClock upstream_clock;
  std::ostringstream log;
  std::unique_ptr<FakeUpstream> upstream;
  std::unique_ptr<Gateway> gateway;  // after upstream: shut down first
};

// breakers.max_breakers_hard bounds the registry when nothing can be
// dropped: an upstream rate-limits every account (every quota circuit OPEN),
// and beyond the ceiling a new account shares the quota template's overflow
// breaker, which the first 429 opens; later new accounts then fail fast
// without an upstream call instead of growing the registry.
TEST(GatewayRegistryCeiling, NewAccountsBeyondTheCeilingShareAnOverflowBreaker) {
  OwnGateway g;
  ASSERT_NO_FATAL_FAILURE(
      g.Start({"GET", "/v19.0/*/media", {{.status = 429, .headers = {{"Retry-After", "600"}}}}},
              "breakers:\n  max_breakers: 2\n  max_breakers_hard: 4\n", "ceiling"));
  const auto get = [&](int account) { return g.GetMedia(std::to_string(account)); };
  // The first accounts get breakers of their own (two each), OPEN; the
  // first whose quota call goes through the overflow breaker opens it.
  for (int account = 1; account <= 4; ++account) EXPECT_EQ(get(account).status, 429) << account;
  const std::int64_t calls = g.upstream->TotalCalls();
  EXPECT_LE(calls, 4);
  for (int account = 5; account <= 20; ++account) {
    HttpReply r = get(account);
    EXPECT_EQ(r.status, 429) << account;
    EXPECT_EQ(OwnGateway::Body(r)["error"]["circuit_open"], true) << account;
  }
  EXPECT_EQ(g.upstream->TotalCalls(), calls)
      << "new accounts beyond the ceiling called the upstream";
  auto& registry = g.gateway->registry();
  EXPECT_LE(registry.size(), 4u);
  EXPECT_GE(registry.stats().overflowed, 16u);
  bool overflow_open = false;
  registry.ForEach([&](const std::string& name, CircuitBreaker& b) {
    if (name == "overflow:meta.provider.quota") overflow_open = b.state() == State::kOpen;
  });
  EXPECT_TRUE(overflow_open);
}

TEST_F(GatewayTest, RateLimitServesTheStaleSnapshotMarkedPerRfc9211) {
  ASSERT_TRUE(upstream_
                  ->SetRoute({"GET",
                              "/v19.0/*/insights",
                              {Ok(R"({"reach":42})"),
                               {.status = 429, .headers = {{"Retry-After", "120"}}}}})
                  .ok());
  ASSERT_EQ(Get(kInsights).status, 200);
  clock_.Advance(std::chrono::seconds(65));  // past fresh_for (60 s)

  HttpReply stale = Get(kInsights);
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(stale.Header("Cache-Status"),
            "fusebox; fwd=stale; fwd-status=429; ttl=-5; detail=stale-if-error");
  EXPECT_EQ(stale.Header("Age"), "65");
  EXPECT_EQ(Body(stale), Json::parse(R"({"data":{"reach":42},"stale":true,"age_seconds":65,
      "stale_reason":{"code":"CONN_008","retry_after_seconds":120}})"));
  EXPECT_EQ(InsightsCalls(), 2);

  // The quota circuit is now open: the snapshot is served without calling.
  clock_.Advance(std::chrono::seconds(5));
  HttpReply hit = Get(kInsights);
  EXPECT_EQ(hit.status, 200);
  EXPECT_EQ(hit.Header("Cache-Status"), "fusebox; hit; ttl=-10; detail=circuit-open");
  EXPECT_EQ(hit.Header("Age"), "70");
  EXPECT_EQ(Body(hit)["stale"], true);
  EXPECT_EQ(Body(hit)["stale_reason"]["retry_after_seconds"], 115);
  EXPECT_EQ(InsightsCalls(), 2);

  // After the wait, exactly one probe; it succeeds and refreshes.
  upstream_->Reset();
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok(R"({"reach":43})")}}).ok());
  // (The breaker's OPEN includes its deadline; the first instant after it
  // admits the probe.)
  clock_.Advance(std::chrono::seconds(115) + std::chrono::nanoseconds(1));
  HttpReply fresh = Get(kInsights);
  EXPECT_EQ(fresh.status, 200) << fresh.body;
  EXPECT_EQ(fresh.Header("Cache-Status"), "fusebox; fwd=miss; fwd-status=200; stored");
  EXPECT_EQ(Body(fresh)["data"]["reach"], 43);
  EXPECT_EQ(Body(fresh)["stale"], false);
  EXPECT_EQ(InsightsCalls(), 1);
}

// RFC 9211: ttl is the freshness lifetime minus the age, negative once stale,
// and Age says the same in whole seconds: 0.4 s past a 60 s lifetime is
// Age 61 and ttl=-1 (it was Age 60 and ttl=0, a stale answer that looked
// fresh). A fresh copy 59.6 s old is Age 59, ttl=1.
TEST_F(GatewayTest, CacheStatusTtlAndAgeAgreeOnAStaleAnswer) {
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok("[1]"), {.drop = true}}}).ok());
  ASSERT_EQ(Get(kInsights).status, 200);
  clock_.Advance(std::chrono::milliseconds(59600));
  HttpReply fresh = Get(kInsights);
  EXPECT_EQ(fresh.Header("Cache-Status"), "fusebox; hit; ttl=1");
  EXPECT_EQ(fresh.Header("Age"), "59");
  clock_.Advance(std::chrono::milliseconds(800));  // 60.4 s: stale
  HttpReply stale = Get(kInsights);
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(stale.Header("Cache-Status"), "fusebox; fwd=stale; ttl=-1; detail=stale-if-error");
  EXPECT_EQ(stale.Header("Age"), "61");
  EXPECT_EQ(Body(stale)["age_seconds"], 61);
}

// An operator's force-open answers as itself: 503 CIRCUIT_FORCED_OPEN with
// the override's reason, actor and expiry, not "the transient circuit is
// open" (502 CONN_003).
TEST_F(GatewayTest, AForcedOpenKeyAnswersAsForcedOpen) {
  const std::vector<std::pair<std::string, std::string>> auth = {
      {"Authorization", std::string("Bearer ") + kToken}};
  ASSERT_EQ(Post("/admin/circuits/provider:instagram:read:321/force-open",
                 R"({"reason":"incident 7","actor":"dana","expires_in":"90s"})", auth)
                .status,
            200);
  clock_.Advance(std::chrono::seconds(30));
  HttpReply r = Get("/v1/instagram/accounts/321/media");
  EXPECT_EQ(r.status, 503) << r.body;
  const Json e = Body(r)["error"];
  EXPECT_EQ(e["code"], "CIRCUIT_FORCED_OPEN");
  EXPECT_EQ(e["reason"], "incident 7");
  EXPECT_EQ(e["actor"], "dana");
  EXPECT_EQ(e["expires_in_ms"], 60000);
  EXPECT_EQ(e["circuit_open"], true);
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("incident 7"));
  EXPECT_EQ(r.Header("Retry-After"), "60");
  EXPECT_EQ(upstream_->TotalCalls(), 0);
}

TEST_F(GatewayTest, TransientFailureIs502OrStale) {
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/media", {{.status = 503}}}).ok());
  HttpReply r = Get("/v1/instagram/accounts/178/media");
  EXPECT_EQ(r.status, 502);
  EXPECT_EQ(Body(r)["error"]["code"], "CONN_003");
  EXPECT_EQ(Body(r)["error"]["upstream_status"], 503);

  // On the gateway a 503 stays transient whatever its Retry-After (the
  // quota circuit is for 429s): fusebox::http's 503 rule is turned off.
  ASSERT_TRUE(
      upstream_
          ->SetRoute(
              {"GET", "/v19.0/*/media", {{.status = 503, .headers = {{"Retry-After", "30"}}}}})
          .ok());
  HttpReply with_retry_after = Get("/v1/instagram/accounts/179/media");
  EXPECT_EQ(with_retry_after.status, 502) << with_retry_after.body;
  EXPECT_EQ(Body(with_retry_after)["error"]["code"], "CONN_003");

  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok("[1]"), {.drop = true}}}).ok());
  ASSERT_EQ(Get(kInsights).status, 200);
  clock_.Advance(std::chrono::seconds(61));
  HttpReply stale = Get(kInsights);
  EXPECT_EQ(stale.status, 200);
  // No answer from the upstream: no fwd-status.
  EXPECT_EQ(stale.Header("Cache-Status"), "fusebox; fwd=stale; ttl=-1; detail=stale-if-error");
  EXPECT_EQ(Body(stale)["stale_reason"]["code"], "CONN_003");
}

// max_stale includes its limit: a snapshot exactly max_stale old still hides
// a failure; one a second older never does.
TEST_F(GatewayTest, AStaleSnapshotIsServedUpToMaxStaleAndNeverAfter) {
  ASSERT_TRUE(
      upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok(R"({"reach":1})"), {.status = 503}}})
          .ok());
  ASSERT_EQ(Get(kInsights).status, 200);
  clock_.Advance(std::chrono::hours(1));  // exactly max_stale
  HttpReply stale = Get(kInsights);
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(stale.Header("Age"), "3600");
  EXPECT_EQ(Body(stale)["stale"], true);
  clock_.Advance(std::chrono::seconds(1));
  HttpReply too_old = Get(kInsights);
  EXPECT_EQ(too_old.status, 502);
  EXPECT_FALSE(too_old.HasHeader("Cache-Status"));
}

TEST_F(GatewayTest, AuthorizationAndInvalidAreNeverHiddenBehindAStaleSnapshot) {
  ASSERT_TRUE(
      upstream_
          ->SetRoute(
              {"GET",
               "/v19.0/*/insights",
               {Ok("{}"),
                {.status = 400,
                 .body = R"({"error":{"code":190,"error_subcode":463,"type":"OAuthException"}})"},
                {.status = 400, .body = R"({"error":{"code":100}})"}}})
          .ok());
  ASSERT_EQ(Get(kInsights).status, 200);
  clock_.Advance(std::chrono::seconds(61));
  HttpReply auth = Get(kInsights);
  EXPECT_EQ(auth.status, 401);
  EXPECT_EQ(Body(auth)["error"]["code"], "CONN_009");
  EXPECT_FALSE(auth.HasHeader("Cache-Status"));
  HttpReply invalid = Get(kInsights);
  EXPECT_EQ(invalid.status, 400);
  EXPECT_EQ(Body(invalid)["error"]["code"], "CONN_010");
}

TEST_F(GatewayTest, WritesAreNeverCachedNorServedStale) {
  ASSERT_TRUE(
      upstream_
          ->SetRoute({"POST", "/v19.0/*/media_publish", {Ok(R"({"id":"1"})"), {.status = 503}}})
          .ok());
  const std::string target = "/v1/threads/178/media_publish";
  EXPECT_EQ(Post("/v1/threads/accounts/178/media_publish", "{}").status, 200);
  HttpReply failed = Post("/v1/threads/accounts/178/media_publish", "{}");
  EXPECT_EQ(failed.status, 502);
  EXPECT_EQ(Body(failed)["error"]["code"], "CONN_003");
  EXPECT_EQ(upstream_->Calls("POST", "/v19.0/*/media_publish"), 2);
  (void)target;
}

TEST_F(GatewayTest, WriteSuccessIsMarkedAsForwardedForTheMethod) {
  ASSERT_TRUE(
      upstream_->SetRoute({"POST", "/v19.0/*/media_publish", {{.status = 201, .body = "{}"}}})
          .ok());
  HttpReply r = Post("/v1/threads/accounts/178/media_publish", R"({"caption":"x"})");
  EXPECT_EQ(r.status, 201);
  EXPECT_EQ(r.Header("Cache-Status"), "fusebox; fwd=method");
  EXPECT_EQ(r.Header("X-Fusebox-Circuit"), "provider:threads:publish:178");
}

// A status that cannot carry a body (RFC 9110 sections 15.3.5, 15.4.5) is
// passed on without the envelope, and the gateway goes on serving.
TEST_F(GatewayTest, AnUpstream204IsPassedOnWithoutABody) {
  ASSERT_TRUE(
      upstream_
          ->SetRoute({"POST", "/v19.0/*/media_publish", {{.status = 204}, Ok(R"({"id":"2"})")}})
          .ok());
  HttpReply none = Post("/v1/threads/accounts/178/media_publish", "{}");
  EXPECT_EQ(none.status, 204);
  EXPECT_EQ(none.body, "");
  EXPECT_EQ(none.Header("Cache-Status"), "fusebox; fwd=method");
  HttpReply next = Post("/v1/threads/accounts/178/media_publish", "{}");
  EXPECT_EQ(next.status, 200);
  EXPECT_EQ(Body(next)["data"]["id"], "2");
}

TEST_F(GatewayTest, IdenticalConcurrentMissesMakeOneUpstreamCall) {
  ASSERT_TRUE(upstream_
                  ->SetRoute({"GET",
                              "/v19.0/*/insights",
                              {{.status = 200, .body = "{}", .latency = std::chrono::seconds(1)}}})
                  .ok());
  constexpr int kClients = 5;
  std::vector<std::future<HttpReply>> replies;
  for (int i = 0; i < kClients; ++i) {
    replies.push_back(std::async(std::launch::async, [this] { return Get(kInsights); }));
  }
  // The leader's call is held by the upstream's clock until every other
  // request waits on it.
  gateway_->AwaitSingleFlightWaitersForTesting(SnapshotKey("gw:insights:/178/insights", {}),
                                               kClients - 1);
  while (replies[0].wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    upstream_clock_.Advance(std::chrono::seconds(1));
    std::this_thread::yield();
  }
  int collapsed = 0;
  for (auto& f : replies) {
    HttpReply r = f.get();
    EXPECT_EQ(r.status, 200);
    if (r.Header("Cache-Status").find("collapsed") != std::string::npos) ++collapsed;
  }
  EXPECT_EQ(collapsed, kClients - 1);
  EXPECT_EQ(InsightsCalls(), 1);
  EXPECT_THAT(Get("/metrics").body, HasSubstr("fusebox_gateway_single_flight_merged_total 4\n"));
}

TEST_F(GatewayTest, FreshHitsAndFailFastsDoNotWaitForBusyWorkers) {
  // A snapshot of account 178's insights, then its quota circuit opened by
  // a 429 on its media; every later media call is held by the upstream.
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok(R"({"reach":42})")}}).ok());
  ASSERT_TRUE(upstream_
                  ->SetRoute({"GET",
                              "/v19.0/*/media",
                              {{.status = 429, .headers = {{"Retry-After", "600"}}},
                               {.status = 200, .body = "{}", .latency = std::chrono::seconds(1)}}})
                  .ok());
  ASSERT_EQ(Get(kInsights).status, 200);
  ASSERT_EQ(Get("/v1/instagram/accounts/178/media").status, 429);

  // Every worker (8) waits on the upstream.
  std::vector<std::future<HttpReply>> held;
  for (int i = 0; i < 8; ++i) {
    held.push_back(std::async(std::launch::async, [this, i] {
      return Get("/v1/instagram/accounts/" + std::to_string(1000 + i) + "/media");
    }));
  }
  while (upstream_->Calls("GET", "/v19.0/*/media") < 1 + 8) std::this_thread::yield();

  // Answered on the I/O threads meanwhile, as a worker would answer them.
  HttpReply hit = Get(kInsights);
  EXPECT_EQ(hit.status, 200);
  EXPECT_EQ(hit.Header("Cache-Status"), "fusebox; hit; ttl=60");
  EXPECT_EQ(Body(hit)["data"]["reach"], 42);
  HttpReply refused = Get("/v1/instagram/accounts/178/media");
  EXPECT_EQ(refused.status, 429);
  EXPECT_EQ(refused.Header("Retry-After"), "600");
  EXPECT_EQ(refused.Header("X-Fusebox-Circuit"), "provider:instagram:read:178");
  EXPECT_EQ(Body(refused)["error"]["circuit_open"], true);
  EXPECT_EQ(Get("/v1/instagram/accounts/178/nothing").status, 404);
  for (auto& f : held) {
    EXPECT_NE(f.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  }
  EXPECT_THAT(Get("/metrics").body,
              HasSubstr("fusebox_gateway_requests_total{route=\"media\",result=\"rejected\"} 1\n"));

  while (std::any_of(held.begin(), held.end(), [](auto& f) {
    return f.wait_for(std::chrono::seconds(0)) != std::future_status::ready;
  })) {
    upstream_clock_.Advance(std::chrono::seconds(1));
    std::this_thread::yield();
  }
  for (auto& f : held) EXPECT_EQ(f.get().status, 200);
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/media"), 1 + 8);
}

TEST_F(GatewayTest, MetricsFoldAccountIdsOutOfLabels) {
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok("{}")}}).ok());
  ASSERT_EQ(Get("/v1/instagram/accounts/17841400008460056/insights").status, 200);
  HttpReply m = Get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.Header("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(m.body, HasSubstr("name=\"provider:instagram:read:*:quota\""));
  EXPECT_THAT(m.body, HasSubstr("name=\"provider:instagram:read:*:transient\""));
  EXPECT_THAT(m.body, Not(HasSubstr("17841400008460056")));
  EXPECT_THAT(m.body,
              HasSubstr("fusebox_gateway_requests_total{route=\"insights\",result=\"miss\"} 1\n"));
  EXPECT_THAT(
      m.body,
      HasSubstr("fusebox_gateway_upstream_requests_total{upstream=\"graph\",status=\"2xx\"} 1\n"));
}

TEST_F(GatewayTest, HealthAndReadiness) {
  HttpReply h = Get("/healthz");
  EXPECT_EQ(h.status, 200);
  HttpReply ready = Get("/readyz");
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(Body(ready), Json::parse(R"({"ready":true,"degraded":false,"redis":"none"})"));
  EXPECT_THAT(Get("/metrics").body, HasSubstr("\nfusebox_gateway_degraded 0\n"));
}

TEST_F(GatewayTest, BadRequestsGetClearErrors) {
  EXPECT_EQ(Get("/nowhere").status, 404);
  EXPECT_EQ(Body(Get("/nowhere"))["error"]["code"], "NOT_FOUND");
  HttpReply wrong_method = Post(kInsights, "");
  EXPECT_EQ(wrong_method.status, 405);
  HttpReply big = Get(kInsights, {{"X-Big", std::string(10000, 'x')}});
  EXPECT_EQ(big.status, 431);
  EXPECT_EQ(upstream_->TotalCalls(), 0);
}

TEST_F(GatewayTest, AdminApiNeedsTheBearerToken) {
  HttpReply none = Get("/admin/circuits");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.Header("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Get("/admin/circuits", {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(
      Get("/admin/circuits", {{"Authorization", std::string("Bearer ") + kToken + "x"}}).status,
      401);
  HttpReply ok = Get("/admin/circuits", {{"Authorization", std::string("Bearer ") + kToken}});
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(Body(ok)["instance"], "gw-test");
  EXPECT_THAT(log_.str(), Not(HasSubstr(kToken)));
}

TEST_F(GatewayTest, AdminForceOpenStopsCallsAndIsAudited) {
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/media", {Ok("{}")}}).ok());
  const std::vector<std::pair<std::string, std::string>> auth = {
      {"Authorization", std::string("Bearer ") + kToken}};
  HttpReply bad = Post("/admin/circuits/provider:instagram:read:178/force-open", "{}", auth);
  EXPECT_EQ(bad.status, 400);

  HttpReply forced = Post("/admin/circuits/provider:instagram:read:178/force-open",
                          R"({"reason":"incident 42","actor":"alice","expires_in":"10m"})", auth);
  ASSERT_EQ(forced.status, 200) << forced.body;
  Json circuits = Body(forced)["circuits"];
  ASSERT_EQ(circuits.size(), 2u);
  for (const Json& c : circuits) {
    EXPECT_EQ(c["state"], "forced_open");
    EXPECT_EQ(c["override"]["actor"], "alice");
    EXPECT_EQ(c["override"]["expires_in_ms"], 600000);
  }
  // The answer is, byte for byte, the changed breakers' rows of
  // /admin/circuits, in its order (by name: quota before transient).
  const Json all = Body(Get("/admin/circuits", auth));
  Json listed = Json::array();
  for (const Json& c : all["circuits"]) {
    if (c["key"] == "provider:instagram:read:178") listed.push_back(c);
  }
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0]["circuit"], "quota");
  EXPECT_EQ(forced.body, Json({{"circuits", listed}}).dump());
  HttpReply refused = Get("/v1/instagram/accounts/178/media");
  EXPECT_EQ(refused.status, 503) << "forced open by an operator: not a transient 502";
  EXPECT_EQ(Body(refused)["error"]["code"], "CIRCUIT_FORCED_OPEN");
  EXPECT_EQ(Body(refused)["error"]["circuit_open"], true);
  EXPECT_EQ(upstream_->TotalCalls(), 0);

  HttpReply reset = Post("/admin/circuits/provider:instagram:read:178:transient/reset",
                         R"({"reason":"fixed","actor":"bob"})", auth);
  EXPECT_EQ(reset.status, 200);
  EXPECT_EQ(Body(reset)["circuits"][0]["state"], "closed");

  std::ifstream audit(audit_path_);
  std::vector<Json> lines;
  for (std::string line; std::getline(audit, line);) lines.push_back(Json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["action"], "force_open");
  EXPECT_EQ(lines[0]["actor"], "alice");
  EXPECT_EQ(lines[0]["reason"], "incident 42");
  EXPECT_EQ(lines[0]["expires_in_ms"], 600000);
  EXPECT_EQ(lines[2]["action"], "reset");
  EXPECT_EQ(lines[2]["breaker"], "provider:instagram:read:178:transient");
  EXPECT_EQ(Post("/admin/circuits/nope/force-open", R"({"reason":"r","actor":"a"})", auth).status,
            404);
}

// The answer is read from the changed breakers themselves, not picked by
// name out of every circuit written as JSON and parsed back: a name that is
// not UTF-8 (written with U+FFFD in JSON) is still reported.
TEST_F(GatewayTest, AdminAnswerReportsABreakerWhoseNameIsNotUtf8) {
  const std::vector<std::pair<std::string, std::string>> auth = {
      {"Authorization", std::string("Bearer ") + kToken}};
  HttpReply forced = Post("/admin/circuits/provider:instagram:read:%FF/force-open",
                          R"({"reason":"drill","actor":"carol"})", auth);
  ASSERT_EQ(forced.status, 200) << forced.body;
  Json circuits = Body(forced)["circuits"];
  ASSERT_EQ(circuits.size(), 2u) << forced.body;
  EXPECT_EQ(circuits[0]["name"], "provider:instagram:read:\xEF\xBF\xBD:quota");
  EXPECT_EQ(circuits[0]["state"], "forced_open");
  EXPECT_EQ(circuits[1]["name"], "provider:instagram:read:\xEF\xBF\xBD:transient");
}

TEST_F(GatewayTest, DashboardIsSelfContained) {
  HttpReply page = Get("/dashboard");
  EXPECT_EQ(page.status, 200);
  EXPECT_THAT(page.Header("Content-Type"), HasSubstr("text/html"));
  EXPECT_THAT(page.body, HasSubstr("id=\"groups\""));
  EXPECT_THAT(page.body, HasSubstr("EventSource(\"/dashboard/events\""));
  EXPECT_THAT(page.body, Not(HasSubstr("http://")));
  EXPECT_THAT(page.body, Not(HasSubstr("https://")));
}

// A raw client connection, for what HttpFetch cannot do: a request that
// never ends, a stream that stays open.
class RawConnection {
 public:
  explicit RawConnection(const std::string& address) : socket_(ioc_) {
    const std::size_t colon = address.rfind(':');
    boost::asio::ip::tcp::resolver resolver(ioc_);
    boost::asio::connect(socket_,
                         resolver.resolve(address.substr(0, colon), address.substr(colon + 1)));
  }
  void Send(std::string_view text) { boost::asio::write(socket_, boost::asio::buffer(text)); }
  // Reads up to and including `delimiter`.
  std::string ReadUntil(std::string_view delimiter) {
    boost::system::error_code ec;
    const std::size_t n = boost::asio::read_until(socket_, buffer_, std::string(delimiter), ec);
    if (ec) return "<" + ec.message() + ">";
    std::string out(boost::asio::buffers_begin(buffer_.data()),
                    boost::asio::buffers_begin(buffer_.data()) + static_cast<std::ptrdiff_t>(n));
    buffer_.consume(n);
    return out;
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::ip::tcp::socket socket_;
  boost::asio::streambuf buffer_;
};

TEST_F(GatewayTest, DashboardEventsStreamASnapshotThenTransitions) {
  RawConnection sse(address_);
  sse.Send("GET /dashboard/events HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(sse.ReadUntil("\r\n\r\n"), HasSubstr("Content-Type: text/event-stream"));
  const std::string first = sse.ReadUntil("\n\n");
  EXPECT_THAT(first, ::testing::StartsWith("event: snapshot\ndata: {\"instance\":\"gw-test\""));

  const std::vector<std::pair<std::string, std::string>> auth = {
      {"Authorization", std::string("Bearer ") + kToken}};
  ASSERT_EQ(Post("/admin/circuits/provider:threads:read:9/force-open",
                 R"({"reason":"drill","actor":"carol"})", auth)
                .status,
            200);
  // The transitions are pushed at once (snapshots every second may come in
  // between; skip them).
  int transitions = 0;
  for (int i = 0; i < 10 && transitions < 2; ++i) {
    const std::string event = sse.ReadUntil("\n\n");
    if (event.rfind("event: transition\n", 0) != 0) continue;
    EXPECT_THAT(event, HasSubstr("\"to\":\"forced_open\""));
    EXPECT_THAT(event, HasSubstr("provider:threads:read:9:"));
    ++transitions;
  }
  EXPECT_EQ(transitions, 2);
}

// The page's cost is bounded: kMaxDashboardStreams streams at most; one more
// is a 503 naming why, and a closed stream frees its slot.
TEST_F(GatewayTest, DashboardStreamsBeyondTheCapAreRefused) {
  std::vector<std::unique_ptr<RawConnection>> open;
  for (std::size_t i = 0; i < kMaxDashboardStreams; ++i) {
    open.push_back(std::make_unique<RawConnection>(address_));
    open.back()->Send("GET /dashboard/events?top=3 HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_THAT(open.back()->ReadUntil("\r\n\r\n"), HasSubstr("200 OK")) << "stream " << i;
  }
  HttpReply refused = Get("/dashboard/events");
  EXPECT_EQ(refused.status, 503);
  EXPECT_THAT(refused.body, HasSubstr("TOO_MANY_STREAMS"));
  EXPECT_THAT(refused.body, HasSubstr("at most 16"));
  EXPECT_EQ(Get("/dashboard/events?top=x").status, 400) << "a bad filter is named first";
  open.pop_back();
  // The gateway sees the close on its own time: a bounded poll.
  bool reopened = false;
  for (int i = 0; i < 200 && !reopened; ++i) {
    RawConnection again(address_);
    again.Send("GET /dashboard/events HTTP/1.1\r\nHost: x\r\n\r\n");
    reopened = again.ReadUntil("\r\n").find("200 OK") != std::string::npos;
  }
  EXPECT_TRUE(reopened);
}

// --- Promises of docs/gateway.md and docs/configuration.md, one per test -----

// An open transient circuit's 502 tells the client when to come back, as a
// 429 does: Retry-After and retry_after_seconds count down the OPEN wait.
TEST_F(GatewayTest, TheOpenTransientCircuits502CarriesRetryAfter) {
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/media", {{.status = 503}}}).ok());
  constexpr char kMedia[] = "/v1/instagram/accounts/555/media";
  // Three 5xx of three calls (> 50 %, minimum 3): the circuit opens for 30 s.
  for (int i = 0; i < 3; ++i) {
    HttpReply r = Get(kMedia);
    EXPECT_EQ(r.status, 502);
    EXPECT_EQ(Body(r)["error"]["circuit_open"], false);
    EXPECT_FALSE(r.HasHeader("Retry-After")) << "the upstream's own 5xx promises no time";
    EXPECT_FALSE(Body(r)["error"].contains("retry_after_seconds"));
  }
  HttpReply open = Get(kMedia);
  EXPECT_EQ(open.status, 502);
  EXPECT_EQ(Body(open)["error"]["code"], "CONN_003");
  EXPECT_EQ(Body(open)["error"]["circuit_open"], true);
  EXPECT_EQ(open.Header("Retry-After"), "30");
  EXPECT_EQ(Body(open)["error"]["retry_after_seconds"], 30);
  clock_.Advance(std::chrono::seconds(10));
  HttpReply later = Get(kMedia);
  EXPECT_EQ(later.status, 502);
  EXPECT_EQ(later.Header("Retry-After"), "20");
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/media"), 3);
}

// The generic `http` classifier is Meta's rule order without Meta's codes:
// a body that Meta's rules read as a rate limit or an authorization failure
// is, on an `http` route, an invalid request (400) that opens no circuit;
// only the HTTP status decides.
TEST_F(GatewayTest, TheHttpClassifierNeverAppliesMetasBodyCodes) {
  ASSERT_TRUE(
      upstream_
          ->SetRoute(
              {"GET",
               "/v19.0/*/media",
               {{.status = 400,
                 .headers = {{"Retry-After", "30"}},
                 .body = R"({"error":{"code":4,"message":"Application request limit reached"}})"},
                {.status = 400, .body = R"({"error":{"code":190}})"},
                {.status = 400, .body = R"({"error":{"code":250}})"},
                {.status = 400, .body = R"({"error":{"code":1,"error_subcode":463}})"},
                {.status = 429}}})
          .ok());
  constexpr char kMedia[] = "/v1/instagram/accounts/556/media";
  for (int i = 0; i < 4; ++i) {
    HttpReply r = Get(kMedia);
    EXPECT_EQ(r.status, 400) << "response " << i << ": " << r.body;
    EXPECT_EQ(Body(r)["error"]["code"], "CONN_010") << "response " << i;
    EXPECT_FALSE(r.HasHeader("Retry-After")) << "response " << i;
  }
  // Nothing opened: the status 429 still reaches the upstream and is a rate limit.
  HttpReply limited = Get(kMedia);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(Body(limited)["error"]["circuit_open"], false);
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/media"), 5);
}

// breakers.quota.default_wait (gateway.yaml) is the wait of a rate limit that
// says nothing of its own, end to end: the client's Retry-After, and the
// quota circuit's OPEN time before the next upstream call.
TEST(GatewayQuotaConfig, DefaultWaitIsTheWaitOfARateLimitWithoutRetryAfter) {
  OwnGateway g;
  ASSERT_NO_FATAL_FAILURE(g.Start({"GET", "/v19.0/*/media", {{.status = 429}, Ok("{}")}},
                                  "breakers:\n  quota:\n    default_wait: 7s\n", "default_wait"));
  HttpReply first = g.GetMedia("7");
  EXPECT_EQ(first.status, 429);
  EXPECT_EQ(first.Header("Retry-After"), "7");
  EXPECT_EQ(OwnGateway::Body(first)["error"]["retry_after_seconds"], 7);
  g.clock.Advance(std::chrono::seconds(7));  // OPEN includes its deadline
  HttpReply open = g.GetMedia("7");
  EXPECT_EQ(open.status, 429);
  EXPECT_EQ(OwnGateway::Body(open)["error"]["circuit_open"], true);
  EXPECT_EQ(open.Header("Retry-After"), "1");
  EXPECT_EQ(g.upstream->TotalCalls(), 1);
  g.clock.Advance(std::chrono::nanoseconds(1));
  EXPECT_EQ(g.GetMedia("7").status, 200) << "the probe after 7 s";
  EXPECT_EQ(g.upstream->TotalCalls(), 2);
}

// breakers.transient (gateway.yaml) changes when the transient circuit opens
// and for how long: minimum_calls 2, failure_rate 50 (strictly more than
// 50 % trips), open_for 7s.
TEST(GatewayTransientConfig, MinimumCallsFailureRateAndOpenForChangeBehaviour) {
  OwnGateway g;
  ASSERT_NO_FATAL_FAILURE(g.Start(
      {"GET",
       "/v19.0/*/media",
       {{.status = 503}, {.status = 503}, Ok("{}"), {.status = 503}, {.status = 503}}},
      "breakers:\n  transient:\n    minimum_calls: 2\n    failure_rate: 50\n    open_for: 7s\n",
      "transient"));
  const auto circuit_open = [&](const std::string& account) {
    return OwnGateway::Body(g.GetMedia(account))["error"]["circuit_open"];
  };
  // Two failures of two calls: minimum_calls reached at 100 %, OPEN for 7 s.
  EXPECT_EQ(g.GetMedia("a").status, 502);
  EXPECT_EQ(g.GetMedia("a").status, 502);
  HttpReply open = g.GetMedia("a");
  EXPECT_EQ(OwnGateway::Body(open)["error"]["circuit_open"], true);
  EXPECT_EQ(open.Header("Retry-After"), "7");
  EXPECT_EQ(g.upstream->TotalCalls(), 2);
  // One failure of two calls is 50 %: not more than failure_rate, no trip.
  EXPECT_EQ(g.GetMedia("b").status, 200);
  EXPECT_EQ(circuit_open("b"), false);
  EXPECT_EQ(g.upstream->TotalCalls(), 4);
  EXPECT_EQ(circuit_open("b"), false);  // 2 of 3: OPEN now
  EXPECT_EQ(circuit_open("b"), true);
  EXPECT_EQ(g.upstream->TotalCalls(), 5);
  // Account a's wait ends after 7 s.
  g.clock.Advance(std::chrono::seconds(7) + std::chrono::nanoseconds(1));
  EXPECT_EQ(circuit_open("a"), false);  // the probe reached the upstream
  EXPECT_EQ(g.upstream->TotalCalls(), 6);
}

// fusebox_gateway_upstream_requests_total counts every upstream answer by
// its status class, the bounds of each class included (docs/gateway.md,
// metrics).
TEST_F(GatewayTest, UpstreamRepliesAreCountedByStatusClass) {
  ASSERT_TRUE(upstream_
                  ->SetRoute({"GET",
                              "/v19.0/*/media",
                              {{.status = 400},
                               {.status = 499},
                               {.status = 500},
                               {.status = 599},
                               {.status = 302},
                               {.status = 399},
                               Ok("{}")}})
                  .ok());
  for (int i = 0; i < 7; ++i) (void)Get("/v1/instagram/accounts/557/media");
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/media"), 7) << "no circuit may open here";
  const std::string m = Get("/metrics").body;
  const auto count = [&](std::string_view status_class) {
    const std::string series =
        "fusebox_gateway_upstream_requests_total{upstream=\"graph\",status=\"" +
        std::string(status_class) + "\"} ";
    const std::size_t at = m.find(series);
    if (at == std::string::npos) return std::string("(absent)");
    return m.substr(at + series.size(), m.find('\n', at) - at - series.size());
  };
  EXPECT_EQ(count("2xx"), "1");
  EXPECT_EQ(count("3xx"), "2");
  EXPECT_EQ(count("4xx"), "2");
  EXPECT_EQ(count("5xx"), "2");
  EXPECT_EQ(count("error"), "0");
}

// breakers.quota.max_wait caps what an upstream's Retry-After may ask for.
TEST(GatewayQuotaConfig, MaxWaitCapsTheUpstreamsRetryAfter) {
  OwnGateway g;
  ASSERT_NO_FATAL_FAILURE(
      g.Start({"GET", "/v19.0/*/media", {{.status = 429, .headers = {{"Retry-After", "86400"}}}}},
              "breakers:\n  quota:\n    max_wait: 5m\n", "max_wait"));
  HttpReply r = g.GetMedia("8");
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.Header("Retry-After"), "300");
}

// --- The handler and a snapshot store that cannot answer ----------------------

std::string Header(const HttpResponse& r, std::string_view name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

// A remote snapshot tier that cannot answer, as a Redis that is down, paused
// or whose pool is exhausted: every Get and Put fails with `failure`.
class UnansweringRemote final : public SnapshotStore {
 public:
  Result<std::optional<Snapshot>> Get(std::string_view) override {
    ++gets;
    return failure;
  }
  Status Put(std::string_view, std::string) override { return failure; }
  Status Erase(std::string_view) override { return failure; }
  std::atomic<int> gets{0};
  Status failure = Status::Unavailable("redis 127.0.0.1:6379: every connection busy");
};

// A Handler as the gateway builds one with Redis (a store that may block, in
// tiers), against the fake upstream, without a server in front.
class HandlerStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto up = FakeUpstream::Start({.clock = &upstream_clock_});
    ASSERT_TRUE(up.has_value()) << up.error();
    upstream_ = std::move(*up);
    ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {Ok(R"({"data":[1]})")}}).ok());
    Result<GatewayConfig> config = ParseGatewayConfig(
        ConfigYaml(upstream_->url(), ::testing::TempDir() + "gw_handler_audit.jsonl"), "test.yaml",
        TestEnv());
    ASSERT_TRUE(config.has_value()) << config.error();
    config_ = std::move(*config);
    registry_ = std::move(*Registry::Create({.clock = &clock_}));
    handler_ = std::make_unique<Handler>(Handler::Deps{.config = &config_,
                                                       .registry = registry_.get(),
                                                       .store = tiered_.get(),
                                                       .metrics = &metrics_,
                                                       .instance = "gw-handler",
                                                       .store_may_block = true,
                                                       .circuits_may_block = true,
                                                       .loops = {}});
  }

  static HttpRequest Request(std::string target) {
    HttpRequest r;
    r.method = "GET";
    r.target = std::move(target);
    return r;
  }
  std::int64_t Calls() { return upstream_->Calls("GET", "/v19.0/*/insights"); }

  testing::ManualClock clock_;
  testing::ManualClock upstream_clock_;
  std::unique_ptr<FakeUpstream> upstream_;
  GatewayConfig config_;
  std::unique_ptr<Registry> registry_;
  MetricsCollector metrics_;
  std::unique_ptr<MemorySnapshotStore> local_ =
      *MemorySnapshotStore::Create({.clock = &clock_, .max_entries = 16});
  UnansweringRemote remote_;
  std::unique_ptr<TieredSnapshotStore> tiered_ = *TieredSnapshotStore::Create(
      {.local = local_.get(), .remote = &remote_, .local_fresh_for = std::chrono::seconds(60)});
  std::unique_ptr<Handler> handler_;
};

// A store that cannot answer is not a miss: the key goes to the upstream once
// (counted as "unavailable", not "miss"), and from then on this process'
// copy answers, on the I/O thread, without the store and without the upstream.
TEST_F(HandlerStoreTest, AnUnansweringStoreIsNotAMissAndTheLocalTierServes) {
  HttpResponse first = handler_->Handle(Request(kInsights));
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(Calls(), 1);
  EXPECT_EQ(handler_->snapshot_lookups(Handler::kSnapshotUnavailable), 1u);
  EXPECT_EQ(handler_->snapshot_lookups(Handler::kSnapshotMiss), 0u);
  const int gets = remote_.gets.load();
  for (int i = 0; i < 50; ++i) {
    std::optional<HttpResponse> now = handler_->TryAnswerNow(Request(kInsights));
    ASSERT_TRUE(now.has_value()) << "a fresh local copy must not need a worker";
    EXPECT_EQ(now->status, 200);
    EXPECT_EQ(Header(*now, "Cache-Status").substr(0, 12), "fusebox; hit");
  }
  EXPECT_EQ(Calls(), 1);
  EXPECT_EQ(remote_.gets.load(), gets) << "a fresh local hit must not ask the remote store";
}

// Past fresh_for, with the store still unanswering: the local copy is what
// the stale-if-error path falls back to when the upstream fails.
TEST_F(HandlerStoreTest, AnUnansweringStoreStillLeavesTheLocalCopyForStaleIfError) {
  ASSERT_EQ(handler_->Handle(Request(kInsights)).status, 200);
  clock_.Advance(std::chrono::minutes(5));
  ASSERT_TRUE(upstream_->SetRoute({"GET", "/v19.0/*/insights", {{.status = 503}}}).ok());
  remote_.failure = Status(StatusCode::kTimeout, "redis: out of the caller's time");
  EXPECT_FALSE(handler_->TryAnswerNow(Request(kInsights)).has_value());
  HttpResponse r = handler_->Handle(Request(kInsights));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr("\"stale\":true"));
  EXPECT_EQ(handler_->upstream_calls(), 2u);
  EXPECT_EQ(handler_->snapshot_lookups(Handler::kSnapshotExpired), 1u);
}

// On the I/O thread (TryAnswerNow, the local copy) a snapshot exactly
// fresh_for old is still fresh; a millisecond later it needs a worker.
TEST_F(HandlerStoreTest, ASnapshotExactlyFreshForOldIsFreshOnTheIoThread) {
  ASSERT_EQ(handler_->Handle(Request(kInsights)).status, 200);
  clock_.Advance(std::chrono::seconds(60));
  std::optional<HttpResponse> now = handler_->TryAnswerNow(Request(kInsights));
  ASSERT_TRUE(now.has_value()) << "exactly fresh_for old is fresh";
  EXPECT_EQ(Header(*now, "Cache-Status"), "fusebox; hit; ttl=0");
  clock_.Advance(std::chrono::milliseconds(1));
  EXPECT_FALSE(handler_->TryAnswerNow(Request(kInsights)).has_value());
  EXPECT_EQ(Calls(), 1);
}

// With a store that may block, a request goes to a worker (Handle, not
// TryAnswerNow): a snapshot exactly fresh_for old is still fresh there too.
TEST_F(HandlerStoreTest, ASnapshotExactlyFreshForOldIsFreshOnTheWorkerPath) {
  ASSERT_EQ(handler_->Handle(Request(kInsights)).status, 200);
  clock_.Advance(std::chrono::seconds(60));
  HttpResponse r = handler_->Handle(Request(kInsights));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Header(r, "Cache-Status"), "fusebox; hit; ttl=0");
  EXPECT_EQ(Calls(), 1);
}

TEST(GatewaySlowClient, AnIncompleteRequestGets408AfterTheReadTimeout) {
  testing::ManualClock clock;
  std::ostringstream log;
  std::unique_ptr<Gateway> gw = StartGateway(R"(listen: 127.0.0.1:0
limits:
  read_timeout: 200ms
upstreams: []
routes: []
)",
                                             "slow.yaml", clock, log);
  ASSERT_NE(gw, nullptr);
  RawConnection slow(gw->address());
  slow.Send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ");  // never finished
  // Meanwhile the server serves others.
  Result<HttpReply> ok = HttpFetch(gw->address(), "GET", "/healthz");
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->status, 200);
  const std::string response = slow.ReadUntil("\r\n\r\n");
  EXPECT_THAT(response, ::testing::StartsWith("HTTP/1.1 408"));
  EXPECT_THAT(response, HasSubstr("Connection: close"));
}

TEST(GatewaySlowClient, PipelinedRequestsAreAnsweredInOrderThenAnIdleConnectionCloses) {
  testing::ManualClock clock;
  std::ostringstream log;
  std::unique_ptr<Gateway> gw = StartGateway(R"(listen: 127.0.0.1:0
io_threads: 2
limits:
  idle_timeout: 100ms
upstreams: []
routes: []
)",
                                             "idle.yaml", clock, log);
  ASSERT_NE(gw, nullptr);
  RawConnection client(gw->address());
  // Both requests in one segment: the second waits in the buffer.
  client.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(client.ReadUntil("\r\n\r\n"), ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(client.ReadUntil("}"), R"({"status":"ok"})");
  const std::string second = client.ReadUntil("\r\n\r\n");
  EXPECT_THAT(second, ::testing::StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(second, ::testing::Not(HasSubstr("Connection: close")));
  EXPECT_EQ(client.ReadUntil("}"), R"({"ready":true,"degraded":false,"redis":"none"})");
  // Then nothing: the keep-alive connection is closed after idle_timeout.
  EXPECT_EQ(client.ReadUntil("\r\n"), "<End of file>");
}

// --- The real binary: SIGTERM drains in-flight requests, exit 0 -------------

TEST(GatewayProcess, SigtermFinishesInFlightRequestsAndExitsZero) {
  testing::ManualClock upstream_clock;
  auto up = FakeUpstream::Start({.clock = &upstream_clock});
  ASSERT_TRUE(up.has_value());
  ASSERT_TRUE((*up)
                  ->SetRoute({"GET",
                              "/v19.0/*/media",
                              {{.status = 200, .body = "{}", .latency = std::chrono::seconds(1)}}})
                  .ok());
  const std::string dir = ::testing::TempDir();
  const std::string config_path = dir + "gw_sigterm.yaml";
  {
    std::ofstream f(config_path);
    f << R"(listen: 127.0.0.1:0
upstreams:
  - name: graph
    base_url: )"
      << (*up)->url() << R"(/v19.0
routes:
  - name: media
    method: GET
    path: /v1/{provider}/accounts/{account}/media
    upstream: graph
    upstream_path: /{account}/media
    workload: read
    provider: "{provider}"
    subject: "{account}"
)";
  }
  int out_pipe[2];
  ASSERT_EQ(pipe(out_pipe), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    close(out_pipe[0]);
    execl(FUSEBOX_CLI, FUSEBOX_CLI, "gateway", "--config", config_path.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out_pipe[1]);
  FILE* out = fdopen(out_pipe[0], "r");
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof(line), out), nullptr);
  const std::string listening = line;
  const std::string prefix = "fusebox gateway: listening on ";
  ASSERT_EQ(listening.substr(0, prefix.size()), prefix);
  const std::string address = listening.substr(prefix.size(), listening.size() - prefix.size() - 1);

  auto reply = std::async(std::launch::async, [&] {
    return HttpFetch(address, "GET", "/v1/instagram/accounts/178/media");
  });
  while ((*up)->TotalCalls() < 1) std::this_thread::yield();
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  // The in-flight request is still answered once the upstream replies. The
  // fake may take its clock's time just after counting the call, so the
  // clock moves until the reply comes.
  while (reply.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    upstream_clock.Advance(std::chrono::seconds(1));
    std::this_thread::yield();
  }
  Result<HttpReply> r = reply.get();
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->status, 200);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // And it no longer listens.
  EXPECT_FALSE(HttpFetch(address, "GET", "/healthz").has_value());
  fclose(out);
}

}  // namespace
}  // namespace fusebox::gateway
