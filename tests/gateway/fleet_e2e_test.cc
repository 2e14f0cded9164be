// End to end, the fleet an operator runs (issue 16, "The fleet", points 4 to
// 7): two in-process gateway instances sharing a real redis-server, the fake
// Graph API, everything over loopback, as in gateway_e2e_test.cc.
//
//   - its Redis settings (fleet.*, the URL's ?timeout=) change what the
//     gateway does, not only what it parses;
//   - /readyz stays 200 and says "degraded" while Redis is down, unless
//     strict_ready; an idle instance leaves "degraded" once Redis answers
//     again (CLIENT PAUSE ... WRITE: PINGs still answered);
//   - /admin/circuits?scope=fleet lists what Redis holds, not only this
//     instance's breakers, bounded;
//   - a forced-open key answers 503 CIRCUIT_FORCED_OPEN on every instance.
//
// Waits are the harness' bounded PollUntil with generous bounds (the machine
// may be loaded), never fixed sleeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
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
using Json = nlohmann::json;
using redis::testing::PollUntil;
using redis::testing::RedisServer;

constexpr char kToken[] = "fleet-admin-token";
constexpr auto kLong = std::chrono::seconds(30);

const char kRateLimited[] =
    R"({"error":{"message":"(#4) Application request limit reached","type":"OAuthException","code":4}})";

// Three routes of seed 000's account screen; `extra` is appended (fleet:,
// strict_ready:).
std::string FleetYaml(const std::string& instance, const std::string& upstream_url,
                      const std::string& redis_url, const std::string& audit_log,
                      const std::string& extra) {
  std::string yaml = "listen: 127.0.0.1:0\ninstance: " + instance + "\nio_threads: 1\nworkers: 8\n";
  yaml += "redis: \"" + redis_url + "\"\n";
  yaml += "admin:\n  token_env: FUSEBOX_FLEET_TOKEN\n  audit_log: " + audit_log + "\n";
  yaml += "upstreams:\n  - name: graph\n    base_url: " + upstream_url +
          "/v19.0\n    request_timeout: 5s\n";
  yaml += "routes:\n";
  struct R {
    const char* name;
    const char* suffix;
    const char* cache;
  };
  for (const R& r : {R{"stats", "", "{fresh_for: 0s, max_stale: 1h}"},
                     R{"insights", "/insights", "{fresh_for: 1h, max_stale: 24h}"},
                     R{"comments", "/comments", nullptr}}) {
    yaml += std::string("  - name: ") + r.name + "\n    method: GET\n" +
            "    path: /v1/{provider}/accounts/{account}" + r.suffix + "\n" +
            "    upstream: graph\n    upstream_path: /{account}" + r.suffix + "\n" +
            "    workload: read\n    provider: \"{provider}\"\n    subject: \"{account}\"\n" +
            "    classifier: meta\n";
    if (r.cache != nullptr) yaml += std::string("    cache: ") + r.cache + "\n";
  }
  return yaml + extra;
}

class FleetE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error().message();
    redis_ = std::move(*server);
    auto upstream = FakeUpstream::Start({.threads = 2, .clock = &upstream_clock_});
    ASSERT_TRUE(upstream.has_value()) << upstream.error().message();
    upstream_ = std::move(*upstream);
    ASSERT_TRUE(upstream_
                    ->SetRoutes({{"GET", "/v19.0/*/insights", {{.body = R"({"reach":1})"}}},
                                 {"GET", "/v19.0/*/comments", {{.body = R"({"data":[]})"}}},
                                 {"GET", "/v19.0/*", {{.body = R"({"id":"178"})"}}}})
                    .ok());
    dir_ = std::filesystem::temp_directory_path() /
           ("fusebox-fleet-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }

  void TearDown() override {
    if (redis_) (void)redis_->Resume();
    for (std::unique_ptr<Gateway>* gw : {&a_, &b_}) {
      if (*gw) (*gw)->Shutdown();
      gw->reset();
    }
    if (upstream_) upstream_->Stop();
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::string RedisUrl(const std::string& query = "") const {
    return "redis://127.0.0.1:" + std::to_string(redis_->port()) + "/0" + query;
  }

  std::unique_ptr<Gateway> Start(const std::string& instance, const std::string& extra,
                                 const std::string& redis_url = "") {
    const std::string yaml =
        FleetYaml(instance, upstream_->url(), redis_url.empty() ? RedisUrl() : redis_url,
                  (dir_ / (instance + "-audit.jsonl")).string(), extra);
    Result<GatewayConfig> config =
        ParseGatewayConfig(yaml, instance + ".yaml", [](std::string_view name) {
          return name == "FUSEBOX_FLEET_TOKEN" ? std::optional<std::string>(kToken) : std::nullopt;
        });
    EXPECT_TRUE(config.has_value()) << config.error().message() << "\n" << yaml;
    if (!config) return nullptr;
    Result<std::unique_ptr<Gateway>> gw =
        Gateway::Create({.config = std::move(*config), .clock = &clock_, .log = &log_});
    EXPECT_TRUE(gw.has_value()) << gw.error().message();
    return gw ? std::move(*gw) : nullptr;
  }

  static HttpReply Get(Gateway& gw, const std::string& target) { return e2e::Get(gw, target); }

  static HttpReply Admin(Gateway& gw, const std::string& method, const std::string& target,
                         const std::string& body = "") {
    return e2e::Admin(gw, kToken, method, target, body);
  }

  // /readyz as (status, body); the body is always an object (empty when the
  // answer was not one), so that value() never throws.
  static std::pair<int, Json> Ready(Gateway& gw) {
    Result<HttpReply> r = HttpFetch(gw.address(), "GET", "/readyz");
    if (!r) return {0, Json::object()};
    Json body = Json::parse(r->body, nullptr, false);
    if (!body.is_object()) body = Json::object();
    return {r->status, body};
  }

  // The value of the /metrics sample `sample`, or -1.
  static long long MetricValue(Gateway& gw, const std::string& sample) {
    Result<HttpReply> r = HttpFetch(gw.address(), "GET", "/metrics");
    if (!r) return -1;
    const std::size_t at = r->body.find("\n" + sample + " ");
    if (at == std::string::npos) return -1;
    return std::stoll(r->body.substr(at + sample.size() + 2));
  }

  // The fleet listing's row of `name` in `gw`'s view (null when absent).
  static Json FleetRow(Gateway& gw, const std::string& name) {
    HttpReply r = Admin(gw, "GET", "/admin/circuits?scope=fleet");
    if (r.status != 200) return Json();
    const Json all = Json::parse(r.body, nullptr, false);
    if (!all.is_object() || !all.contains("circuits")) return Json();
    for (const Json& c : all["circuits"]) {
      if (c["name"] == name) return c;
    }
    return Json();
  }

  std::int64_t RedisPttl(const std::string& key) { return e2e::RedisPttl(*redis_, key); }

  testing::ManualClock clock_;
  testing::ManualClock upstream_clock_;
  // Both instances write here (and the test reads): under a lock.
  e2e::LockedLog log_buf_;
  std::ostream log_{&log_buf_};
  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<FakeUpstream> upstream_;
  std::filesystem::path dir_;
  std::unique_ptr<Gateway> a_;
  std::unique_ptr<Gateway> b_;
};

const std::string kStats = "/v1/instagram/accounts/178";

// Point 5: Redis gone, both instances still serve (fail-open); the default
// one stays in its load balancer and says degraded, the strict one leaves.
// Before: /readyz answered 503 on every instance, emptying the fleet.
TEST_F(FleetE2eTest, ReadyzStaysReadyAndSaysDegradedWhileRedisIsDownUnlessStrict) {
  const std::string quick = "fleet:\n  heartbeat: 100ms\n  command_timeout: 100ms\n";
  a_ = Start("gw-a", quick);
  b_ = Start("gw-b", quick + "strict_ready: true\n");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  for (Gateway* gw : {a_.get(), b_.get()}) {
    ASSERT_TRUE(
        PollUntil([&] { return Ready(*gw).second.value("degraded", true) == false; }, kLong))
        << Ready(*gw).second.dump();
    EXPECT_EQ(Ready(*gw).first, 200);
    EXPECT_EQ(MetricValue(*gw, "fusebox_gateway_degraded"), 0);
  }
  ASSERT_TRUE(redis_->Kill().ok());
  ASSERT_TRUE(PollUntil([&] { return Ready(*a_).second.value("degraded", false); }, kLong));
  const auto [a_status, a_body] = Ready(*a_);
  EXPECT_EQ(a_status, 200) << a_body.dump();
  EXPECT_EQ(a_body["ready"], true);
  EXPECT_EQ(a_body["redis"], "fail-open");
  EXPECT_EQ(MetricValue(*a_, "fusebox_gateway_degraded"), 1);
  ASSERT_TRUE(PollUntil([&] { return Ready(*b_).first == 503; }, kLong)) << Ready(*b_).second;
  EXPECT_EQ(Ready(*b_).second["degraded"], true);
  // Both still serve.
  for (Gateway* gw : {a_.get(), b_.get()}) EXPECT_EQ(Get(*gw, kStats).status, 200);

  ASSERT_TRUE(redis_->Restart().ok());
  for (Gateway* gw : {a_.get(), b_.get()}) {
    EXPECT_TRUE(PollUntil(
        [&] {
          return Ready(*gw).first == 200 && Ready(*gw).second.value("degraded", true) == false;
        },
        kLong))
        << Ready(*gw).second.dump();
  }
}

// Point 5's known bug: Redis paused for writes, three commands fail, the
// store's own breaker opens; an idle instance then stayed degraded for good
// because nothing asked that breaker again. Now the subscriber's heartbeat
// PING goes through it once its wait has passed, and closes it.
TEST_F(FleetE2eTest, AnIdleInstanceLeavesDegradedAfterABriefWritePause) {
  // down_for 3 s: long enough for the poll below to see the degraded state.
  const std::string settings =
      "fleet:\n  heartbeat: 100ms\n  command_timeout: 100ms\n  down_for: 3s\n";
  a_ = Start("gw-a", settings);
  b_ = Start("gw-b", settings);
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  ASSERT_TRUE(PollUntil([&] { return Ready(*a_).second.value("degraded", true) == false; }, kLong));
  // The breakers made (and read) first: a successful read between the
  // failed writes would start their count again.
  const std::string key = "/admin/circuits/provider:instagram:read:900/";
  const std::string body = R"({"reason": "drill", "actor": "ops", "expires_in": "10m"})";
  ASSERT_EQ(Admin(*a_, "POST", key + "force-open", body).status, 200);
  ASSERT_TRUE(PollUntil(
      [&] { return RedisPttl("fusebox:v1:{provider:instagram:read:900:quota}:override") > 0; },
      kLong));
  ASSERT_TRUE(redis_->Admin({"CLIENT", "PAUSE", "1500", "WRITE"}).has_value());
  // Four overrides in a row (two breakers, two changes): four scripts that
  // write, each timing out.
  ASSERT_EQ(Admin(*a_, "POST", key + "force-closed", body).status, 200);
  ASSERT_EQ(Admin(*a_, "POST", key + "force-open", body).status, 200);
  ASSERT_TRUE(PollUntil([&] { return Ready(*a_).second.value("degraded", false); }, kLong))
      << "the store's breaker should open after three failed writes";
  EXPECT_EQ(Ready(*a_).first, 200) << "degraded, still ready";
  // Nothing more is sent to A: it is idle. Its heartbeat alone must bring it
  // back once the pause and down_for have passed.
  EXPECT_TRUE(PollUntil([&] { return Ready(*a_).second.value("degraded", true) == false; }, kLong))
      << Ready(*a_).second.dump();
  EXPECT_EQ(MetricValue(*a_, "fusebox_gateway_degraded"), 0);
}

// Point 7: set on A, a force-open answers on both instances as a forced-open
// circuit, naming the override (before: 502 CONN_003, "the transient circuit
// is open").
TEST_F(FleetE2eTest, AForcedOpenKeyAnswersAsForcedOpenOnEveryInstance) {
  a_ = Start("gw-a", "");
  b_ = Start("gw-b", "");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  const std::string key = "provider:instagram:read:555";
  ASSERT_EQ(Admin(*a_, "POST", "/admin/circuits/" + key + "/force-open",
                  R"({"reason": "incident 42", "actor": "alice", "expires_in": "10m"})")
                .status,
            200);
  ASSERT_TRUE(PollUntil(
      [&] { return RedisPttl("fusebox:v1:{" + key + ":transient}:override") > 0; }, kLong));
  for (Gateway* gw : {a_.get(), b_.get()}) {
    HttpReply r;
    EXPECT_TRUE(PollUntil(
        [&] {
          r = Get(*gw, "/v1/instagram/accounts/555/comments");
          return r.status == 503;
        },
        kLong))
        << r.status << " " << r.body;
    const Json e = Json::parse(r.body)["error"];
    EXPECT_EQ(e["code"], "CIRCUIT_FORCED_OPEN") << r.body;
    EXPECT_EQ(e["reason"], "incident 42");
    EXPECT_EQ(e["actor"], "alice");
    EXPECT_GT(e["expires_in_ms"].get<long long>(), 0);
    EXPECT_LE(e["expires_in_ms"].get<long long>(), 600000);
    EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("incident 42"));
    EXPECT_FALSE(r.Header("Retry-After").empty());
  }
  EXPECT_EQ(upstream_->TotalCalls(), 0);
}

// Point 6: B lists what Redis holds (A's override, A's OPEN quota circuit)
// though it never made those breakers, with time left, actor and reason, and
// whether it has the breaker. Before: ?scope=fleet was ignored and B listed
// only its own breakers.
TEST_F(FleetE2eTest, TheFleetScopeListsEveryOpenCircuitAndOverrideKnownToRedis) {
  a_ = Start("gw-a", "");
  b_ = Start("gw-b", "");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  const std::string forced = "provider:instagram:read:555";
  ASSERT_EQ(Admin(*a_, "POST", "/admin/circuits/" + forced + "/force-open",
                  R"({"reason": "incident 42", "actor": "alice", "expires_in": "10m"})")
                .status,
            200);
  ASSERT_TRUE(
      upstream_
          ->SetRoute({"GET",
                      "/v19.0/*",
                      {{.status = 429, .headers = {{"Retry-After", "60"}}, .body = kRateLimited}}})
          .ok());
  ASSERT_EQ(Get(*a_, kStats).status, 429);
  const std::string quota = "provider:instagram:read:178:quota";
  ASSERT_TRUE(PollUntil([&] { return RedisPttl("fusebox:v1:{" + quota + "}:open") > 0; }, kLong));

  Json open_row;
  ASSERT_TRUE(PollUntil([&] { return !(open_row = FleetRow(*b_, quota)).is_null(); }, kLong))
      << Admin(*b_, "GET", "/admin/circuits?scope=fleet").body;
  EXPECT_EQ(open_row["state"], "open");
  EXPECT_GT(open_row["remaining_ms"].get<long long>(), 0);
  EXPECT_LE(open_row["remaining_ms"].get<long long>(), 60000);
  EXPECT_EQ(open_row["here"], false) << "B never served account 178";
  EXPECT_EQ(FleetRow(*a_, quota)["here"], true);

  Json forced_row;
  ASSERT_TRUE(PollUntil(
      [&] { return !(forced_row = FleetRow(*b_, forced + ":transient")).is_null(); }, kLong));
  EXPECT_EQ(forced_row["override"]["state"], "FORCED_OPEN");
  EXPECT_EQ(forced_row["override"]["actor"], "alice");
  EXPECT_EQ(forced_row["override"]["reason"], "incident 42");
  EXPECT_GT(forced_row["override"]["expires_in_ms"].get<long long>(), 0);
  EXPECT_LE(forced_row["override"]["expires_in_ms"].get<long long>(), 600000);
  EXPECT_FALSE(FleetRow(*b_, forced + ":quota").is_null());

  const Json whole = Json::parse(Admin(*b_, "GET", "/admin/circuits?scope=fleet").body);
  EXPECT_EQ(whole["scope"], "fleet");
  EXPECT_EQ(whole["truncated"], false);
  EXPECT_EQ(whole["circuits"].size(), 3u) << whole.dump();
  // The instance scope is still this instance's breakers only.
  EXPECT_THAT(Admin(*b_, "GET", "/admin/circuits").body, ::testing::Not(HasSubstr(quota)));
  EXPECT_EQ(Admin(*b_, "GET", "/admin/circuits?scope=galaxy").status, 400);
}

// Point 6's bound: at most Handler::kMaxFleetEntries circuits, and it says
// when there were more.
TEST_F(FleetE2eTest, TheFleetScopeIsCappedAndSaysSo) {
  a_ = Start("gw-a", "");
  ASSERT_NE(a_, nullptr);
  for (int i = 0; i < 1010; ++i) {
    ASSERT_TRUE(
        redis_
            ->Admin({"HSET", "fusebox:v1:{provider:x:read:" + std::to_string(i) + "}:override",
                     "kind", "FORCED_OPEN", "actor", "6f7073", "reason", "6472696c6c"})
            .has_value());
  }
  const HttpReply r = Admin(*a_, "GET", "/admin/circuits?scope=fleet");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = Json::parse(r.body);
  EXPECT_EQ(j["circuits"].size(), 1000u);
  EXPECT_EQ(j["truncated"], true);
  EXPECT_EQ(j["max_entries"], 1000);
  EXPECT_EQ(j["circuits"][0]["override"]["actor"], "ops");
  EXPECT_EQ(j["circuits"][0]["override"]["expires_in_ms"], nullptr) << "until lifted";
}

// Issue 20, point 1: each instance publishes its own figures to one Redis
// hash; every instance lists them all (the dashboard's table comes from
// this same listing), an entry older than three heartbeats is not listed
// and is deleted, what another instance wrote is passed on only as a string
// id and numbers, and an instance that stops goes from the list.
TEST_F(FleetE2eTest, EveryInstanceListsEachInstancesHeartbeat) {
  a_ = Start("gw-a", "");
  b_ = Start("gw-b", "");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  ASSERT_EQ(Get(*a_, kStats).status, 200);
  const std::string key = "fusebox:v1:{instances}";
  const std::string hostile = R"x(<img src=x onerror="alert(1)">)x";
  // Written as another instance would, stamped with the server's time; its
  // figures are not numbers where they should be.
  ASSERT_TRUE(redis_
                  ->Admin({"EVAL",
                           "local t = redis.call('TIME') "
                           "redis.call('HSET', KEYS[1], ARGV[1], '{\"at_ms\":' .. "
                           "string.format('%d', t[1] * 1000) .. ',\"figures\":' .. ARGV[2] .. '}')",
                           "1", key, hostile,
                           R"({"calls_per_s":"<b>9</b>","open_circuits":3,"extra":[1]})"})
                  .has_value());
  ASSERT_TRUE(redis_->Admin({"HSET", key, "gone", R"({"at_ms":1000,"figures":{}})"}).has_value());

  Json listed;
  const auto ids = [&](Gateway& gw) {
    const HttpReply r = Admin(gw, "GET", "/admin/circuits?scope=fleet");
    listed = Json::parse(r.body, nullptr, false);
    std::vector<std::string> out;
    if (!listed.is_object() || !listed.contains("instances")) return out;
    for (const Json& i : listed["instances"].value("instances", Json::array())) {
      out.push_back(i.value("id", ""));
    }
    return out;
  };
  const std::vector<std::string> all = {hostile, "gw-a", "gw-b"};
  ASSERT_TRUE(PollUntil([&] { return ids(*b_) == all; }, kLong)) << listed.dump();
  const Json& rows = listed["instances"]["instances"];
  EXPECT_EQ(rows[0]["calls_per_s"], nullptr) << "a string is not a rate";
  EXPECT_EQ(rows[0]["open_circuits"], 3);
  EXPECT_FALSE(rows[0].contains("extra"));
  EXPECT_EQ(rows[2]["self"], true);
  EXPECT_EQ(rows[1]["self"], false);
  EXPECT_GE(rows[1]["circuits"].get<long long>(), 1) << "gw-a made the circuits of account 178";
  EXPECT_LT(rows[1]["age_ms"].get<long long>(), 6000);
  EXPECT_EQ(listed["instances"]["heartbeat_ms"], 2000);
  // A's call is in its next heartbeat's rate (10 s: 0.1 a second).
  ASSERT_TRUE(PollUntil(
      [&] {
        ids(*b_);
        const Json& r = listed["instances"]["instances"];
        return r.size() == 3 && r[1]["calls_per_s"].is_number() &&
               r[1]["calls_per_s"].get<double>() >= 0.1;
      },
      kLong))
      << listed.dump();
  EXPECT_EQ(redis_->Admin({"HEXISTS", key, "gone"})->integer, 0) << "stale entries are deleted";
  // One key for the fleet: one Redis Cluster slot.
  EXPECT_GT(RedisPttl(key), 0);
  EXPECT_LE(RedisPttl(key), 6000);

  // A stops: gone from B's list after three heartbeats.
  a_->Shutdown();
  a_.reset();
  EXPECT_TRUE(PollUntil(
      [&] {
        const std::vector<std::string> now = ids(*b_);
        return std::find(now.begin(), now.end(), "gw-a") == now.end() &&
               std::find(now.begin(), now.end(), "gw-b") != now.end();
      },
      kLong))
      << listed.dump();
}

// Point 4: pool_size sizes the Redis pools (8 workers would make 8).
TEST_F(FleetE2eTest, PoolSizeSizesTheRedisPool) {
  a_ = Start("gw-a", "fleet:\n  pool_size: 3\n");
  b_ = Start("gw-b", "");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  EXPECT_EQ(MetricValue(*a_, R"(fusebox_gateway_snapshot_redis_pool_connections{state="size"})"),
            3);
  EXPECT_EQ(MetricValue(*b_, R"(fusebox_gateway_snapshot_redis_pool_connections{state="size"})"),
            8);
}

// Point 4: the probe lease lasts fleet.probe_lease in Redis (the default is
// 30 s here); the probe is held in flight at the upstream meanwhile.
TEST_F(FleetE2eTest, TheProbeLeaseLastsFleetProbeLease) {
  a_ = Start("gw-a", "fleet:\n  probe_lease: 9s\n");
  b_ = Start("gw-b", "fleet:\n  probe_lease: 9s\n");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  ASSERT_TRUE(
      upstream_
          ->SetRoute({"GET",
                      "/v19.0/*",
                      {{.status = 429, .headers = {{"Retry-After", "1"}}, .body = kRateLimited},
                       {.body = R"({"id":"178"})", .latency = std::chrono::seconds(1)}}})
          .ok());
  ASSERT_EQ(Get(*a_, kStats).status, 429);
  const std::string quota = "provider:instagram:read:178:quota";
  ASSERT_TRUE(PollUntil([&] { return RedisPttl("fusebox:v1:{" + quota + "}:open") > 0; }, kLong));
  ASSERT_TRUE(PollUntil([&] { return RedisPttl("fusebox:v1:{" + quota + "}:open") == -2; }, kLong));
  clock_.Advance(std::chrono::seconds(2));
  std::thread probe([&] { (void)Get(*a_, kStats); });
  ASSERT_TRUE(PollUntil([&] { return upstream_clock_.PendingTimers() == 1; }, kLong));
  const std::int64_t lease = RedisPttl("fusebox:v1:{" + quota + "}:lease");
  EXPECT_GT(lease, 0);
  EXPECT_LE(lease, 9000) << "the lease is fleet.probe_lease, not the 30 s default";
  upstream_clock_.Advance(std::chrono::seconds(1));
  probe.join();
}

// Point 4: the command timeout, from the URL's ?timeout= (A: 100 ms) or from
// fleet.command_timeout (B: 5 s). Redis paused for 1 s: A's snapshot read
// fails (counted as an error), B's waits the pause out and succeeds.
TEST_F(FleetE2eTest, TheCommandTimeoutComesFromTheUrlOrTheFleetBlock) {
  a_ = Start("gw-a", "fleet:\n  command_timeout: 5s\n", RedisUrl("?timeout=100ms"));
  b_ = Start("gw-b", "fleet:\n  command_timeout: 5s\n");
  ASSERT_NE(a_, nullptr);
  ASSERT_NE(b_, nullptr);
  const std::string errors = R"(fusebox_gateway_snapshot_redis_commands_total{result="error"})";
  ASSERT_EQ(MetricValue(*a_, errors), 0);
  ASSERT_EQ(MetricValue(*b_, errors), 0);
  for (Gateway* gw : {a_.get(), b_.get()}) {
    ASSERT_TRUE(redis_->Pause(std::chrono::seconds(1)).ok());
    EXPECT_EQ(Get(*gw, "/v1/instagram/accounts/178/insights").status, 200);
    // The pause over before the next instance's turn.
    ASSERT_TRUE(PollUntil([&] { return redis_->Admin({"PING"}).has_value(); }, kLong));
  }
  EXPECT_GE(MetricValue(*a_, errors), 1) << "?timeout=100ms wins over fleet.command_timeout";
  EXPECT_EQ(MetricValue(*b_, errors), 0) << "5 s outlasts the 1 s pause";
}

}  // namespace
}  // namespace fusebox::gateway
