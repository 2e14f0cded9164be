// End to end, everything real over loopback: a real redis-server (the
// harness of tests/redis), the fake Graph API (apps/gateway/fake_upstream.h)
// and two gateway instances (apps/gateway/gateway.h) sharing circuits and
// snapshots through that Redis, the way two API pods share them in seed
// 000's diagram. Every assertion that the upstream was *not* called counts
// the fake's calls, as the seed's tests do with
// `expect(nextAction).not.toHaveBeenCalled()`.
//
// Time: both gateways' breakers run on one ManualClock, and the fake's
// latency on another, so a probe can be held in flight as long as a test
// needs. What Redis times itself (an OPEN's PX, a snapshot's age) is real
// time; the tests wait for it with the harness' bounded PollUntil, never with
// a fixed sleep.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "apps/gateway/config.h"
#include "apps/gateway/fake_upstream.h"
#include "apps/gateway/gateway.h"
#include "apps/gateway/http_client.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/gateway/e2e_support.h"
#include "tests/redis/redis_server.h"

namespace fusebox::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Json = nlohmann::json;
using redis::testing::PollUntil;
using redis::testing::RedisServer;

constexpr char kToken[] = "e2e-admin-token";

// Generous: CI machines are loaded (a 5 s poll once failed there).
constexpr Duration kPatience = std::chrono::seconds(30);

// The four reads of seed 000's account screen, as the gateway's routes.
std::string GatewayYaml(const std::string& instance, const std::string& upstream_url,
                        const std::string& redis_url, const std::string& audit_log) {
  std::string yaml = "listen: 127.0.0.1:0\ninstance: " + instance + "\nio_threads: 1\nworkers: 8\n";
  if (!redis_url.empty()) yaml += "redis: " + redis_url + "\n";
  yaml += "admin:\n  token_env: FUSEBOX_E2E_TOKEN\n  audit_log: " + audit_log + "\n";
  yaml += "upstreams:\n  - name: graph\n    base_url: " + upstream_url +
          "/v19.0\n    request_timeout: 5s\n";
  yaml += "routes:\n";
  struct R {
    const char* name;
    const char* suffix;
    const char* cache;
  };
  for (const R& r :
       {R{"posts", "/media", "{fresh_for: 0s, max_stale: 1h}"},
        R{"insights", "/insights", "{fresh_for: 1h, max_stale: 24h}"},
        R{"comments", "/comments", nullptr}, R{"stats", "", "{fresh_for: 0s, max_stale: 1h}"},
        R{"reach", "/reach", "{fresh_for: 0s, max_stale: 1h}"}}) {
    yaml += std::string("  - name: ") + r.name + "\n    method: GET\n" +
            "    path: /v1/{provider}/accounts/{account}" + r.suffix + "\n" +
            "    upstream: graph\n    upstream_path: /{account}" + r.suffix + "\n" +
            "    workload: read\n    provider: \"{provider}\"\n    subject: \"{account}\"\n" +
            "    classifier: meta\n";
    // A route with the issue's 1 s deadline, for the Redis-pause test.
    if (std::string(r.name) == "reach") yaml += "    timeout: 1s\n";
    if (r.cache != nullptr) yaml += std::string("    cache: ") + r.cache + "\n";
  }
  return yaml;
}

const char kPosts[] = R"({"data":[{"id":"18011111111111111","caption":"first post"}]})";
const char kInsights[] = R"({"data":[{"name":"impressions","values":[{"value":1200}]}]})";
const char kComments[] = R"({"data":[{"id":"17900000000000001","text":"nice!"}]})";
const char kRateLimited[] =
    R"({"error":{"message":"(#4) Application request limit reached","type":"OAuthException","code":4}})";
const char kExpiredToken[] =
    R"({"error":{"message":"Error validating access token","type":"OAuthException","code":190}})";

class GatewayE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error().message();
    redis_ = std::move(*server);
    auto upstream = FakeUpstream::Start({.threads = 2, .clock = &upstream_clock_});
    ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
    upstream_ = std::move(*upstream);
    Healthy();
    dir_ = std::filesystem::temp_directory_path() /
           ("fusebox-e2e-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    a_ = StartGateway("gw-a");
    b_ = StartGateway("gw-b");
    ASSERT_NE(a_, nullptr);
    ASSERT_NE(b_, nullptr);
    // Both subscribed to the fleet's pushes before a test acts: one
    // published before B listens would reach B only through a read.
    for (Gateway* gw : {a_.get(), b_.get()}) {
      ASSERT_TRUE(PollUntil([&] { return SharedStateUp(*gw) == 1; }, kPatience))
          << gw->address() << " never connected to Redis:\n"
          << log_buf_.str();
    }
  }

  // fusebox_shared_state_up{name="redis"} of `gw`'s /metrics (-1: absent).
  static long long SharedStateUp(Gateway& gw);

  void TearDown() override {
    if (redis_) (void)redis_->Resume();  // A test may have SIGSTOPped it.
    if (a_) a_->Shutdown();
    if (b_) b_->Shutdown();
    a_.reset();
    b_.reset();
    if (upstream_) upstream_->Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::unique_ptr<Gateway> StartGateway(const std::string& instance, bool with_redis = true,
                                        std::string redis_url = "", std::ostream* log = nullptr) {
    if (with_redis && redis_url.empty()) {
      redis_url = "redis://127.0.0.1:" + std::to_string(redis_->port()) + "/0";
    }
    const std::string yaml = GatewayYaml(instance, upstream_->url(), redis_url,
                                         (dir_ / (instance + "-audit.jsonl")).string());
    Result<GatewayConfig> config =
        ParseGatewayConfig(yaml, instance + ".yaml", [](std::string_view name) {
          return name == "FUSEBOX_E2E_TOKEN" ? std::optional<std::string>(kToken) : std::nullopt;
        });
    EXPECT_TRUE(config.has_value()) << config.error().message() << "\n" << yaml;
    if (!config) return nullptr;
    Result<std::unique_ptr<Gateway>> gw = Gateway::Create(
        {.config = std::move(*config), .clock = &clock_, .log = log != nullptr ? log : &log_});
    EXPECT_TRUE(gw.has_value()) << gw.error().message();
    return gw ? std::move(*gw) : nullptr;
  }

  // Every route healthy: 200 with a Meta-like body.
  void Healthy() {
    ASSERT_TRUE(upstream_
                    ->SetRoutes({{"GET", "/v19.0/*/media", {{.body = kPosts}}},
                                 {"GET", "/v19.0/*/insights", {{.body = kInsights}}},
                                 {"GET", "/v19.0/*/comments", {{.body = kComments}}},
                                 {"GET", "/v19.0/*/reach", {{.body = R"({"reach":1})"}}},
                                 {"GET", "/v19.0/*", {{.body = R"({"id":"178"})"}}}})
                    .ok());
  }

  // Account stats answer Meta's code-4 rate limit with Retry-After, once,
  // then `after`.
  void StatsRateLimitedOnce(int retry_after_s, FakeResponse after = {.body = R"({"id":"178"})"}) {
    ASSERT_TRUE(upstream_
                    ->SetRoute({"GET",
                                "/v19.0/*",
                                {{.status = 429,
                                  .headers = {{"Retry-After", std::to_string(retry_after_s)}},
                                  .body = kRateLimited},
                                 std::move(after)}})
                    .ok());
  }

  static HttpReply Get(Gateway& gw, const std::string& target) { return e2e::Get(gw, target); }

  static HttpReply Admin(Gateway& gw, const std::string& method, const std::string& target,
                         const std::string& body = "") {
    return e2e::Admin(gw, kToken, method, target, body);
  }

  // The state of breaker `name` as `gw` reports it ("" when absent).
  static std::string StateOf(Gateway& gw, const std::string& name) {
    HttpReply r = Admin(gw, "GET", "/admin/circuits");
    if (r.status != 200) return "admin answered " + std::to_string(r.status);
    const Json all = Json::parse(r.body);
    for (const Json& c : all["circuits"]) {
      if (c["name"] == name) return c["state"].get<std::string>();
    }
    return "";
  }

  std::int64_t Calls() const { return upstream_->TotalCalls(); }

  // The Redis key of breaker `name`'s OPEN (tests/redis keyspace).
  std::int64_t OpenPttl(const std::string& name) {
    return RedisPttl("fusebox:v1:{" + name + "}:open");
  }
  // Redis' own clock in microseconds (TIME).
  std::int64_t RedisMicros() {
    Result<redis::Reply> r = redis_->Admin({"TIME"});
    if (!r || r->elements.size() != 2) return -1;
    return std::stoll(r->elements[0].str) * 1'000'000 + std::stoll(r->elements[1].str);
  }
  // Snapshot ages are Redis PTTL arithmetic (ms): waits, on Redis' clock, until
  // snapshots written now are older than fresh_for 0s.
  void AgeSnapshots() {
    const std::int64_t start = RedisMicros();
    ASSERT_TRUE(PollUntil([&] { return RedisMicros() >= start + 2000; }));
  }

  std::int64_t RedisPttl(const std::string& key) { return e2e::RedisPttl(*redis_, key); }

  // The audit log lines of `instance` whose "action" is `action`.
  std::vector<Json> AuditLines(const std::string& instance, const std::string& action) {
    std::vector<Json> out;
    std::ifstream in(dir_ / (instance + "-audit.jsonl"));
    for (std::string line; std::getline(in, line);) {
      const Json j = Json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("action", "") == action) out.push_back(j);
    }
    return out;
  }

  testing::ManualClock clock_;
  testing::ManualClock upstream_clock_;
  e2e::LockedLog log_buf_;
  std::ostream log_{&log_buf_};
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<FakeUpstream> upstream_;
  std::filesystem::path dir_;
  std::unique_ptr<Gateway> a_;
  std::unique_ptr<Gateway> b_;
};

const std::string kQuota = "provider:instagram:read:178:quota";
const std::string kStats = "/v1/instagram/accounts/178";
const std::string kPostsPath = "/v1/instagram/accounts/178/media";
const std::string kInsightsPath = "/v1/instagram/accounts/178/insights";
const std::string kCommentsPath = "/v1/instagram/accounts/178/comments";

// `threads` clients each sending `per_thread` GETs of `target` to the
// gateways in turn; returns how many were not a fresh hit (200 and
// "Cache-Status: fusebox; hit").
int HammerFreshKey(const std::vector<Gateway*>& gateways, const std::string& target, int threads,
                   int per_thread) {
  std::atomic<int> not_fresh{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < threads; ++t) {
    clients.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        Gateway& gw = *gateways[static_cast<std::size_t>(t + i) % gateways.size()];
        Result<HttpReply> r = HttpFetch(gw.address(), "GET", target);
        if (!r || r->status != 200 || !r->Header("Cache-Status").starts_with("fusebox; hit")) {
          not_fresh.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& c : clients) c.join();
  return not_fresh.load();
}

// The value of the /metrics sample `sample` (name and labels), or -1.
long long MetricValue(Gateway& gw, const std::string& sample) {
  Result<HttpReply> r = HttpFetch(gw.address(), "GET", "/metrics");
  if (!r) return -1;
  const std::size_t at = r->body.find("\n" + sample + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(r->body.substr(at + sample.size() + 2));
}

long long GatewayE2eTest::SharedStateUp(Gateway& gw) {
  return MetricValue(gw, R"(fusebox_shared_state_up{name="redis"})");
}

// Issue 13 point 2: a snapshot fresh for an hour is served without calling
// the upstream, however many clients ask at once. The snapshot store's Redis
// pool used to refuse when busy and the refusal was taken for a miss: 16
// connections made thousands of upstream calls.
TEST_F(GatewayE2eTest, AFreshKeyUnderLoadNeverCallsTheUpstreamAgainWithRedis) {
  ASSERT_EQ(Get(*a_, kInsightsPath).status, 200);
  ASSERT_EQ(Calls(), 1);
  EXPECT_EQ(HammerFreshKey({a_.get(), b_.get()}, kInsightsPath, 16, 40), 0);
  EXPECT_EQ(Calls(), 1) << "a fresh snapshot must not be fetched again";
  for (Gateway* gw : {a_.get(), b_.get()}) {
    EXPECT_EQ(MetricValue(*gw, R"(fusebox_gateway_snapshot_lookups_total{result="unavailable"})"),
              0);
    EXPECT_GT(MetricValue(*gw, R"(fusebox_gateway_snapshot_lookups_total{result="fresh"})"), 0);
  }
  // B had it from Redis (once per request that found its own tier empty).
  EXPECT_GE(MetricValue(*b_, R"(fusebox_gateway_snapshot_tier_reads_total{result="redis_hit"})"),
            1);
}

TEST_F(GatewayE2eTest, AFreshKeyUnderLoadNeverCallsTheUpstreamAgainWithoutRedis) {
  std::unique_ptr<Gateway> alone = StartGateway("gw-alone", /*with_redis=*/false);
  ASSERT_NE(alone, nullptr);
  ASSERT_EQ(Get(*alone, kInsightsPath).status, 200);
  ASSERT_EQ(Calls(), 1);
  EXPECT_EQ(HammerFreshKey({alone.get()}, kInsightsPath, 16, 40), 0);
  EXPECT_EQ(Calls(), 1);
  alone->Shutdown();
}

// Redis stopped (SIGSTOP: connections stay up, nothing answers): what each
// instance holds is still served fresh, without Redis and without the
// upstream.
TEST_F(GatewayE2eTest, AFreshKeyUnderLoadIsServedFromTheLocalTierWhileRedisIsStopped) {
  ASSERT_EQ(Get(*a_, kInsightsPath).status, 200);
  ASSERT_EQ(Get(*b_, kInsightsPath).status, 200);  // From Redis.
  ASSERT_EQ(Calls(), 1);
  ASSERT_TRUE(redis_->Suspend().ok());
  EXPECT_EQ(HammerFreshKey({a_.get(), b_.get()}, kInsightsPath, 16, 40), 0);
  EXPECT_EQ(Calls(), 1);
  ASSERT_TRUE(redis_->Resume().ok());
}

// The request's deadline (the route's 1 s) bounds what is done for it, Redis
// included: with Redis stopped and an upstream that does not answer, B (which
// has no copy of its own) answers within the deadline, not after Redis'
// timeouts plus a full upstream timeout.
TEST_F(GatewayE2eTest, ARouteDeadlineBoundsTheAnswerWhileRedisIsStopped) {
  const std::string reach = "/v1/instagram/accounts/178/reach";
  ASSERT_EQ(Get(*a_, reach).status, 200);  // A snapshot in Redis and in A.
  ASSERT_TRUE(upstream_
                  ->SetRoute({"GET",
                              "/v19.0/*/reach",
                              {{.body = R"({"reach":1})", .latency = std::chrono::hours(1)}}})
                  .ok());
  ASSERT_TRUE(redis_->Suspend().ok());
  for (Gateway* gw : {b_.get(), a_.get()}) {
    const auto t0 = std::chrono::steady_clock::now();
    HttpReply r = Get(*gw, reach);
    const auto took = std::chrono::steady_clock::now() - t0;
    // A serves its own copy stale; B has none and gets the upstream's timeout.
    EXPECT_TRUE(r.status == 200 || r.status == 502 || r.status == 504) << r.status << r.body;
    EXPECT_LT(took, std::chrono::milliseconds(1150))
        << gw->address() << " answered after "
        << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
  }
  ASSERT_TRUE(redis_->Resume().ok());
}

// Seed 000's diagram, pod A then pod B: A's 429 opens the account's quota
// circuit for the whole fleet; B fails fast without calling Meta.
TEST_F(GatewayE2eTest, RateLimitOnOneInstanceFailsFastOnTheOther) {
  StatsRateLimitedOnce(30);
  HttpReply limited = Get(*a_, kStats);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.Header("Retry-After"), "30");
  EXPECT_EQ(limited.Header("X-Fusebox-Instance"), "gw-a");
  EXPECT_EQ(limited.Header("X-Fusebox-Circuit"), "provider:instagram:read:178");
  Json error = Json::parse(limited.body)["error"];
  EXPECT_EQ(error["code"], "CONN_008");
  EXPECT_EQ(error["upstream_status"], 429);
  EXPECT_EQ(Calls(), 1);

  // A's trip reaches Redis (sent by a background thread: a bounded wait, no
  // fixed sleep). B has no breaker for this account yet: it makes one on its
  // first request, which reads the fleet's state.
  ASSERT_TRUE(PollUntil([&] { return OpenPttl(kQuota) > 0; })) << OpenPttl(kQuota);
  HttpReply fast = Get(*b_, kCommentsPath);
  EXPECT_EQ(fast.status, 429);
  EXPECT_EQ(fast.Header("X-Fusebox-Instance"), "gw-b");
  EXPECT_FALSE(fast.Header("Retry-After").empty());
  Json fast_error = Json::parse(fast.body)["error"];
  EXPECT_EQ(fast_error["code"], "CONN_008");
  EXPECT_EQ(fast_error["circuit_open"], true);
  EXPECT_FALSE(fast_error.contains("upstream_status"));
  EXPECT_EQ(Calls(), 1) << "B must not call the upstream while the account's circuit is open";
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/comments"), 0);

  // A is closed for nobody else: another account still reaches Meta.
  EXPECT_EQ(Get(*b_, "/v1/instagram/accounts/999/comments").status, 200);
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/comments"), 1);
}

// The second half of the diagram: B serves the last good posts marked stale
// (RFC 9211), and fresh insights from the cache without the circuit.
TEST_F(GatewayE2eTest, StaleSnapshotWhileOpenAndFreshHitWithoutTheCircuit) {
  ASSERT_EQ(Get(*a_, kPostsPath).status, 200);     // posts snapshot (fresh_for 0)
  ASSERT_EQ(Get(*a_, kInsightsPath).status, 200);  // insights snapshot (fresh for 1h)
  ASSERT_EQ(Calls(), 2);
  AgeSnapshots();

  StatsRateLimitedOnce(60);
  ASSERT_EQ(Get(*a_, kStats).status, 429) << "no stats snapshot yet: the 429 shows";
  ASSERT_EQ(Calls(), 3);
  ASSERT_TRUE(PollUntil([&] { return OpenPttl(kQuota) > 0; })) << OpenPttl(kQuota);

  HttpReply stale = Get(*b_, kPostsPath);
  EXPECT_EQ(stale.status, 200);
  EXPECT_EQ(stale.Header("X-Fusebox-Instance"), "gw-b");
  EXPECT_THAT(stale.Header("Cache-Status"), StartsWith("fusebox; hit; ttl="));
  EXPECT_THAT(stale.Header("Cache-Status"), HasSubstr("detail=circuit-open"));
  EXPECT_TRUE(stale.HasHeader("Age"));
  Json envelope = Json::parse(stale.body);
  EXPECT_EQ(envelope["stale"], true);
  EXPECT_EQ(envelope["data"], Json::parse(kPosts));
  EXPECT_EQ(envelope["stale_reason"]["code"], "CONN_008");
  EXPECT_EQ(Calls(), 3) << "the stale answer must not call the upstream";

  HttpReply fresh = Get(*b_, kInsightsPath);
  EXPECT_EQ(fresh.status, 200);
  EXPECT_THAT(fresh.Header("Cache-Status"), StartsWith("fusebox; hit"));
  EXPECT_THAT(fresh.Header("Cache-Status"), Not(HasSubstr("circuit-open")));
  EXPECT_EQ(Json::parse(fresh.body)["stale"], false);
  EXPECT_EQ(Json::parse(fresh.body)["data"], Json::parse(kInsights));
  EXPECT_EQ(Calls(), 3);

  // Comments have no snapshot: fail fast, nothing to hide it behind.
  EXPECT_EQ(Get(*b_, kCommentsPath).status, 429);
  EXPECT_EQ(Calls(), 3);
}

// After Retry-After, the fleet sends exactly one recovery probe: the probe is
// held in flight at the upstream while both instances are asked again.
TEST_F(GatewayE2eTest, ExactlyOneProbeReachesTheUpstreamAfterTheWait) {
  StatsRateLimitedOnce(1, {.body = R"({"id":"178"})", .latency = std::chrono::seconds(1)});
  ASSERT_EQ(Get(*a_, kStats).status, 429);
  ASSERT_TRUE(PollUntil([&] { return OpenPttl(kQuota) > 0; })) << OpenPttl(kQuota);
  ASSERT_EQ(Calls(), 1);

  // The OPEN runs out in Redis (its PX, timed by Redis) and in each breaker
  // (on the manual clock).
  ASSERT_TRUE(PollUntil([&] { return OpenPttl(kQuota) == -2; }, std::chrono::seconds(5)))
      << "PTTL " << OpenPttl(kQuota);
  clock_.Advance(std::chrono::seconds(2));

  HttpReply probe_answer;
  std::thread probe([&] { probe_answer = Get(*a_, kStats); });
  // The probe has reached the upstream, which holds it (latency on its clock).
  ASSERT_TRUE(PollUntil([&] { return upstream_clock_.PendingTimers() == 1; }));
  ASSERT_EQ(Calls(), 2);
  // Meanwhile both instances refuse to send a second one.
  for (Gateway* gw : {b_.get(), a_.get(), b_.get()}) {
    HttpReply refused = Get(*gw, kCommentsPath);
    EXPECT_EQ(refused.status, 429) << gw->address() << ": " << refused.body;
    EXPECT_EQ(Json::parse(refused.body)["error"]["circuit_open"], true);
  }
  EXPECT_EQ(Calls(), 2) << "one probe for the whole fleet";
  upstream_clock_.Advance(std::chrono::seconds(1));
  probe.join();
  EXPECT_EQ(probe_answer.status, 200) << probe_answer.body;

  // The probe closed the circuit everywhere: both call the upstream again.
  ASSERT_TRUE(PollUntil([&] { return StateOf(*b_, kQuota) == "closed"; })) << StateOf(*b_, kQuota);
  EXPECT_EQ(Get(*b_, kCommentsPath).status, 200);
  EXPECT_EQ(Get(*a_, kCommentsPath).status, 200);
  EXPECT_EQ(Calls(), 4);
}

// A 401 (code 190) is never hidden behind a stale snapshot, and trips nothing.
TEST_F(GatewayE2eTest, UnauthorizedIsNeverStale) {
  ASSERT_EQ(Get(*a_, kPostsPath).status, 200);
  AgeSnapshots();
  ASSERT_TRUE(
      upstream_->SetRoute({"GET", "/v19.0/*/media", {{.status = 401, .body = kExpiredToken}}})
          .ok());
  for (Gateway* gw : {a_.get(), b_.get(), a_.get()}) {
    HttpReply r = Get(*gw, kPostsPath);
    EXPECT_EQ(r.status, 401) << r.body;
    EXPECT_EQ(Json::parse(r.body)["error"]["code"], "CONN_009");
    EXPECT_FALSE(Json::parse(r.body).contains("stale"));
  }
  // (SetRoute restarted the route's count.)
  EXPECT_EQ(upstream_->Calls("GET", "/v19.0/*/media"), 3) << "every 401 came from the upstream";
  EXPECT_EQ(StateOf(*a_, kQuota), "closed") << Admin(*a_, "GET", "/admin/circuits").body;
}

// An operator forces a circuit open on A; B obeys without being told
// directly, then both obey the release.
TEST_F(GatewayE2eTest, AdminOverrideOnOneInstanceReachesTheOther) {
  const std::string key = "provider:instagram:read:555";
  HttpReply forced = Admin(*a_, "POST", "/admin/circuits/" + key + "/force-open",
                           R"({"reason": "incident 42", "actor": "alice", "expires_in": "10m"})");
  ASSERT_EQ(forced.status, 200) << forced.body;
  // The override reaches Redis, and its push makes B's two breakers for the
  // account (B never served it): a bounded wait, generous for a loaded CI.
  // (This test once failed in CI: B's quota breaker, made by a request before
  // B's subscriber was up, never read the fleet; now every new breaker reads
  // it, and B hears the push.)
  ASSERT_TRUE(PollUntil([&] { return RedisPttl("fusebox:v1:{" + key + ":quota}:override") > 0; },
                        kPatience))
      << "no override in Redis for " << key;
  for (const char* circuit : {":transient", ":quota"}) {
    EXPECT_TRUE(PollUntil([&] { return StateOf(*b_, key + circuit) == "forced_open"; }, kPatience))
        << circuit << ": B's view: " << Admin(*b_, "GET", "/admin/circuits").body;
  }
  HttpReply refused_first = Get(*b_, "/v1/instagram/accounts/555/comments");
  EXPECT_GE(refused_first.status, 429) << refused_first.body;
  HttpReply refused = Get(*b_, "/v1/instagram/accounts/555/comments");
  EXPECT_GE(refused.status, 429) << refused.body;
  EXPECT_EQ(Json::parse(refused.body)["error"]["circuit_open"], true);
  EXPECT_EQ(Calls(), 0);

  HttpReply released = Admin(*a_, "POST", "/admin/circuits/" + key + "/reset", "{}");
  ASSERT_EQ(released.status, 200) << released.body;
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string s = StateOf(*b_, key + ":quota");
        return s == "closed" || s.empty();
      },
      kPatience))
      << StateOf(*b_, key + ":quota");
  EXPECT_EQ(Get(*b_, "/v1/instagram/accounts/555/comments").status, 200);
  EXPECT_EQ(Calls(), 1);
}

// Issue 16, the fleet, point 1: an override set on A is applied, listed and
// audited on B within the push delay, though B never serves that account.
TEST_F(GatewayE2eTest, AnOverrideOnAIsListedAndAuditedOnBWithoutARequest) {
  const std::string name = "provider:instagram:read:556:quota";
  HttpReply forced = Admin(*a_, "POST", "/admin/circuits/" + name + "/force-open",
                           R"({"reason": "incident 43", "actor": "bob", "expires_in": "10m"})");
  ASSERT_EQ(forced.status, 200) << forced.body;
  ASSERT_TRUE(PollUntil([&] { return StateOf(*b_, name) == "forced_open"; }, kPatience))
      << "B's view: " << Admin(*b_, "GET", "/admin/circuits").body;
  ASSERT_TRUE(PollUntil([&] { return AuditLines("gw-b", "force_open").size() == 1; }, kPatience));
  const Json line = AuditLines("gw-b", "force_open")[0];
  EXPECT_EQ(line["breaker"], name);
  EXPECT_EQ(line["actor"], "bob");
  EXPECT_EQ(line["reason"], "incident 43");
  EXPECT_EQ(Calls(), 0);
  EXPECT_EQ(MetricValue(*b_, R"(fusebox_gateway_fleet_overrides_adopted_total{result="created"})"),
            1);
  // Only the named breaker: the account's transient one was not made.
  EXPECT_EQ(StateOf(*b_, "provider:instagram:read:556:transient"), "");
}

// Point 1: an override that ends before B would have served the account is
// still B's record: applied when pushed, and its expiry audited on B too.
TEST_F(GatewayE2eTest, AnOverrideThatExpiresUnservedIsStillAuditedOnB) {
  const std::string name = "provider:instagram:read:557:quota";
  HttpReply forced = Admin(*a_, "POST", "/admin/circuits/" + name + "/force-open",
                           R"({"reason": "short", "actor": "carol", "expires_in": "2s"})");
  ASSERT_EQ(forced.status, 200) << forced.body;
  ASSERT_TRUE(PollUntil([&] { return AuditLines("gw-b", "force_open").size() == 1; }, kPatience))
      << "B never recorded the override";
  // Its expiry, on the breakers' clock.
  clock_.Advance(std::chrono::seconds(3));
  for (const char* gw : {"gw-a", "gw-b"}) {
    ASSERT_TRUE(
        PollUntil([&] { return AuditLines(gw, "override_expired").size() == 1; }, kPatience))
        << gw;
    EXPECT_EQ(AuditLines(gw, "override_expired")[0]["override_actor"], "carol") << gw;
  }
  // (No state asserted after it: the breakers' clock is manual, while Redis
  // times the override's PX in real time, so a read may still find it there.)
}

// Point 2: 100 accounts forced open on A while both instances serve them:
// each audit log holds exactly one force_open line per account, every time.
// B makes a breaker either for a request (and reads the override from Redis
// at once, on the store's thread) or for the push; its observers must hear
// the transition either way, and only once.
TEST_F(GatewayE2eTest, AHundredOverridesUnderLoadAreEachAuditedOnceOnEveryInstance) {
  constexpr int kAccounts = 100;
  auto name = [](int i) {
    return "provider:instagram:read:" + std::to_string(7000 + i) + ":quota";
  };
  std::atomic<bool> done{false};
  std::vector<std::thread> traffic;
  for (int t = 0; t < 4; ++t) {
    traffic.emplace_back([&, t] {
      for (int i = t; !done.load(); i = (i + 7) % kAccounts) {
        Gateway& gw = (i + t) % 2 == 0 ? *a_ : *b_;
        (void)HttpFetch(gw.address(), "GET",
                        "/v1/instagram/accounts/" + std::to_string(7000 + i) + "/comments");
      }
    });
  }
  for (int i = 0; i < kAccounts; ++i) {
    HttpReply forced = Admin(*a_, "POST", "/admin/circuits/" + name(i) + "/force-open",
                             R"({"reason": "bulk", "actor": "ops", "expires_in": "10m"})");
    ASSERT_EQ(forced.status, 200) << forced.body;
  }
  // A sentinel after them: pushes arrive in order, so once B audited it,
  // every push of the hundred (and any duplicate they could cause) is in.
  const std::string sentinel = "provider:instagram:read:6999:quota";
  ASSERT_EQ(Admin(*a_, "POST", "/admin/circuits/" + sentinel + "/force-open",
                  R"({"reason": "sentinel", "actor": "ops"})")
                .status,
            200);
  for (const char* gw : {"gw-a", "gw-b"}) {
    ASSERT_TRUE(PollUntil(
        [&] {
          for (const Json& l : AuditLines(gw, "force_open")) {
            if (l["breaker"] == sentinel) return true;
          }
          return false;
        },
        kPatience))
        << gw;
  }
  done.store(true);
  for (std::thread& t : traffic) t.join();
  for (const char* gw : {"gw-a", "gw-b"}) {
    std::map<std::string, int> per_breaker;
    for (const Json& l : AuditLines(gw, "force_open")) {
      ++per_breaker[l["breaker"].get<std::string>()];
    }
    per_breaker.erase(sentinel);
    EXPECT_EQ(per_breaker.size(), static_cast<std::size_t>(kAccounts)) << gw;
    for (int i = 0; i < kAccounts; ++i) {
      EXPECT_EQ(per_breaker[name(i)], 1) << gw << " " << name(i);
    }
  }
}

// Point 3: the store's health is on /metrics, and its loss and recovery,
// with the resync that follows, are logged as JSON lines.
TEST_F(GatewayE2eTest, RedisLossAndRecoveryAreOnMetricsAndInTheLog) {
  for (const char* family : {"fusebox_shared_state_up{name=\"redis\"}",
                             "fusebox_shared_state_errors_total{name=\"redis\"}",
                             "fusebox_shared_state_fail_open_periods_total{name=\"redis\"}",
                             "fusebox_shared_state_lease_contention_total{name=\"redis\"}",
                             "fusebox_shared_state_resyncs_total{name=\"redis\"}"}) {
    EXPECT_GE(MetricValue(*a_, family), 0) << family;
  }
  const std::string metrics = Get(*a_, "/metrics").body;
  EXPECT_THAT(metrics, HasSubstr("\nfusebox_shared_state_staleness_seconds{name=\"redis\"} "));
  EXPECT_THAT(log_buf_.str(), HasSubstr(R"("event":"redis_connected")"));
  const long long resyncs = MetricValue(*a_, R"(fusebox_shared_state_resyncs_total{name="redis"})");
  EXPECT_GE(resyncs, 1);

  ASSERT_TRUE(redis_->Kill().ok());
  // A request that needs the store fails open and counts the errors.
  EXPECT_EQ(Get(*a_, "/v1/instagram/accounts/901/comments").status, 200);
  ASSERT_TRUE(PollUntil([&] { return SharedStateUp(*a_) == 0; }, kPatience));
  ASSERT_TRUE(
      PollUntil([&] { return log_buf_.str().find(R"("event":"redis_lost")") != std::string::npos; },
                kPatience))
      << log_buf_.str();
  EXPECT_GT(MetricValue(*a_, R"(fusebox_shared_state_errors_total{name="redis"})"), 0);
  ASSERT_TRUE(PollUntil(
      [&] {
        return MetricValue(*a_, R"(fusebox_shared_state_fail_open_periods_total{name="redis"})") >
               0;
      },
      kPatience));

  ASSERT_TRUE(redis_->Restart().ok());
  ASSERT_TRUE(PollUntil([&] { return SharedStateUp(*a_) == 1; }, kPatience)) << log_buf_.str();
  ASSERT_TRUE(PollUntil(
      [&] { return log_buf_.str().find(R"("recovered":true)") != std::string::npos; }, kPatience))
      << log_buf_.str();
  EXPECT_GT(MetricValue(*a_, R"(fusebox_shared_state_resyncs_total{name="redis"})"), resyncs);
  EXPECT_THAT(log_buf_.str(), HasSubstr(R"("event":"redis_resync")"));
}

// Point 3: every circuit transition is a JSON line on the log.
TEST_F(GatewayE2eTest, ACircuitTransitionIsAJsonLineOnTheLog) {
  StatsRateLimitedOnce(30);
  ASSERT_EQ(Get(*a_, kStats).status, 429);
  ASSERT_TRUE(PollUntil(
      [&] {
        const std::string log = log_buf_.str();
        return log.find(kQuota) != std::string::npos &&
               log.find(R"("to":"open")") != std::string::npos;
      },
      kPatience))
      << log_buf_.str();
}

// Point 3: a wrong Redis password is logged (and counted), never silently
// retried; the password itself never reaches the log.
TEST_F(GatewayE2eTest, AWrongRedisPasswordIsLoggedWithoutThePassword) {
  auto locked = RedisServer::Start({.password = "the-right-one"});
  ASSERT_TRUE(locked.has_value()) << locked.error().message();
  e2e::LockedLog buf;
  std::ostream log(&buf);
  std::unique_ptr<Gateway> gw = StartGateway(
      "gw-auth", true,
      "redis://:s3cret-wrong@127.0.0.1:" + std::to_string((*locked)->port()) + "/0", &log);
  ASSERT_NE(gw, nullptr);
  ASSERT_TRUE(PollUntil(
      [&] { return buf.str().find(R"("event":"redis_auth_failed")") != std::string::npos; },
      kPatience))
      << buf.str();
  EXPECT_EQ(SharedStateUp(*gw), 0);
  // Requests are still served (fail-open).
  EXPECT_EQ(Get(*gw, "/v1/instagram/accounts/902/comments").status, 200);
  gw->Shutdown();
  EXPECT_THAT(buf.str(), Not(HasSubstr("s3cret-wrong")));
  EXPECT_THAT(buf.str(), HasSubstr("WRONGPASS"));
}

// Redis dies mid-test: both instances go on with their local breakers; no
// request fails because of Redis.
TEST_F(GatewayE2eTest, RedisKilledMidTestBothGoOnLocally) {
  ASSERT_EQ(Get(*a_, kPostsPath).status, 200);
  ASSERT_EQ(Get(*b_, kInsightsPath).status, 200);
  ASSERT_TRUE(redis_->Kill().ok());

  // Healthy reads keep working on both, before and after the shared state
  // notices.
  for (int round = 0; round < 5; ++round) {
    for (Gateway* gw : {a_.get(), b_.get()}) {
      for (const std::string& path : {kPostsPath, kInsightsPath, kCommentsPath, kStats}) {
        HttpReply r = Get(*gw, path);
        EXPECT_EQ(r.status, 200) << gw->address() << " " << path << ": " << r.body;
      }
    }
  }
  // A rate limit still opens the local breaker, on each instance that sees it.
  const std::int64_t before = Calls();
  StatsRateLimitedOnce(60,
                       {.status = 429, .headers = {{"Retry-After", "60"}}, .body = kRateLimited});
  // The snapshots lived in Redis too: the 429 shows as is, or as a stale
  // answer if the gateway kept a copy; never as a 5xx.
  auto rate_limited = [](const HttpReply& r) {
    if (r.status == 429) return Json::parse(r.body)["error"]["code"] == "CONN_008";
    return r.status == 200 && Json::parse(r.body)["stale"] == true;
  };
  EXPECT_EQ(Get(*a_, kCommentsPath).status, 200) << "comments are still healthy";
  HttpReply first = Get(*a_, kStats);
  EXPECT_TRUE(rate_limited(first)) << first.status << " " << first.body;
  EXPECT_EQ(Calls(), before + 2);
  HttpReply fast = Get(*a_, kCommentsPath);
  EXPECT_EQ(fast.status, 429) << fast.body;
  EXPECT_EQ(Json::parse(fast.body)["error"]["circuit_open"], true);
  EXPECT_EQ(Calls(), before + 2) << "A's local breaker fails fast without Redis";
  HttpReply b_first = Get(*b_, kStats);
  EXPECT_TRUE(rate_limited(b_first)) << "B learns on its own: " << b_first.body;
  EXPECT_EQ(Calls(), before + 3);
  EXPECT_EQ(Get(*b_, kCommentsPath).status, 429);
  EXPECT_EQ(Calls(), before + 3);
}

}  // namespace
}  // namespace fusebox::gateway
