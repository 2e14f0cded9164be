// Sentinel mode (redis-sentinel://) against real servers: a primary, one
// replica and three sentinels, all started here on free loopback ports, with
// Sentinel's timings small (down-after 500 ms, failover-timeout 2 s) so that a
// failover fits in a test.
//
// The breakers run on ManualClocks as in shared_state_test.cc; the failovers
// run on real time, so these tests wait with bounded polls, and the one wall
// time bound asserted (calls while no primary is known) has a wide margin.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/circuit_scripts.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/redis/snapshot_store.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/redis/redis_server.h"
#include "tests/redis/trip.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::PollUntil;
using testing::RedisSentinelConfig;
using testing::RedisServer;
using testing::Trip;
using testing::Warm;

constexpr std::string_view kCircuit = "meta:read:17841400000000000:quota";
constexpr Duration kOpen = milliseconds(300);

class RedisSentinelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    primary_ = StartServer({});
    ASSERT_NE(primary_, nullptr);
    replica_ = StartServer({.replica_of = primary_->port()});
    ASSERT_NE(replica_, nullptr);
    ASSERT_TRUE(PollUntil([&] { return InfoHas(*replica_, "master_link_status:up"); }, seconds(10)))
        << "the replica never synced";
    // Started after the replica is attached: a sentinel finds replicas in the
    // primary's INFO, which it asks at once and then every 10 s.
    for (int i = 0; i < 3; ++i) {
      sentinels_.push_back(
          StartServer({.sentinel = RedisSentinelConfig{.primary_port = primary_->port()}}));
      ASSERT_NE(sentinels_.back(), nullptr);
    }
    // Each knows the replica and the two others (hello messages, every 2 s):
    // a failover needs both.
    ASSERT_TRUE(PollUntil(
        [&] {
          for (auto& s : sentinels_) {
            if (ArraySize(*s, {"SENTINEL", "replicas", "mymaster"}) != 1) return false;
            if (ArraySize(*s, {"SENTINEL", "sentinels", "mymaster"}) != 2) return false;
          }
          return true;
        },
        seconds(15)))
        << "the sentinels never found each other and the replica";
  }

  std::unique_ptr<RedisServer> StartServer(testing::RedisServerOptions o) {
    auto server = RedisServer::Start(std::move(o));
    EXPECT_TRUE(server.has_value()) << server.error();
    return server ? std::move(*server) : nullptr;
  }

  static bool InfoHas(RedisServer& s, std::string_view text) {
    auto r = s.Admin({"INFO", "replication"});
    return r && r->is_string() && r->str.find(text) != std::string::npos;
  }

  static std::int64_t ArraySize(RedisServer& s, std::initializer_list<std::string_view> args) {
    auto r = s.Admin(args);
    return r && r->is_array() ? static_cast<std::int64_t>(r->elements.size()) : -1;
  }

  // Where sentinel `i` says the primary is (its port), or 0.
  int NamedPrimaryPort(std::size_t i) {
    auto r = sentinels_[i]->Admin({"SENTINEL", "get-master-addr-by-name", "mymaster"});
    if (!r || !r->is_array() || r->elements.size() != 2) return 0;
    return std::atoi(r->elements[1].str.c_str());
  }

  RedisServer& ByPort(int port) { return port == primary_->port() ? *primary_ : *replica_; }

  // The sentinels' URL, led by `dead` (a port nothing listens on) when set,
  // its query extended by `query` ("&wait_replicas=1...").
  std::string Url(int dead = 0, std::string_view query = "") {
    std::string url = "redis-sentinel://";
    if (dead != 0) url += "127.0.0.1:" + std::to_string(dead) + ",";
    for (std::size_t i = 0; i < sentinels_.size(); ++i) {
      url +=
          (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(sentinels_[i]->port());
    }
    return url + "/mymaster?connect_timeout=300ms&timeout=200ms" + std::string(query);
  }

  SharedStateOptions Options(int dead = 0, std::string_view query = "") {
    auto connection = ParseRedisUrl(Url(dead, query));
    EXPECT_TRUE(connection.has_value()) << connection.error();
    SharedStateOptions o;
    if (connection) o.connection = *connection;
    o.heartbeat = milliseconds(200);
    o.min_grace = seconds(30);
    o.down_for = milliseconds(500);
    return o;
  }

  std::shared_ptr<RedisSharedState> Store(int dead = 0) { return Store(Options(dead)); }
  std::shared_ptr<RedisSharedState> Store(SharedStateOptions options) {
    auto s = RedisSharedState::Create(std::move(options));
    EXPECT_TRUE(s.has_value()) << s.error();
    if (!s) return nullptr;
    auto store = *s;
    EXPECT_TRUE(PollUntil([&] { return store->healthy(); }, seconds(5))) << "never subscribed";
    return store;
  }

  std::unique_ptr<CircuitBreaker> Breaker(std::shared_ptr<SharedState> store,
                                          std::string_view circuit = kCircuit,
                                          Duration open = kOpen) {
    return testing::FleetBreaker(std::move(store), circuit, open, clock_);
  }

  // The circuit as the server at `port` holds it.
  ReadResult::State StateOn(int port, std::string_view circuit = kCircuit) {
    auto conn = ByPort(port).Connect();
    if (!conn) return ReadResult::State::kClosed;
    auto r = scripts_.Read(**conn, circuit);
    return r ? r->state : ReadResult::State::kClosed;
  }

  // Subscribers of the fleet's channel on the server at `port`.
  std::int64_t Subscribers(int port) {
    auto r = ByPort(port).Admin({"PUBSUB", "NUMSUB", scripts_.keyspace().channel()});
    if (!r || !r->is_array() || r->elements.size() != 2) return -1;
    return r->elements[1].integer;
  }

  // Every breaker of `fleet` tries at once after the recovery time: exactly
  // one probes, and its success closes them all.
  void OneProbeClosesTheFleet(std::vector<CircuitBreaker*> fleet, int primary_port) {
    testing::OneProbeClosesTheFleet(std::move(fleet), clock_, kOpen, [&] {
      return StateOn(primary_port) == ReadResult::State::kHalfOpen;
    });
  }

  fusebox::testing::ManualClock clock_;
  std::unique_ptr<RedisServer> primary_;
  std::unique_ptr<RedisServer> replica_;
  std::vector<std::unique_ptr<RedisServer>> sentinels_;
  CircuitScripts scripts_;
};

TEST_F(RedisSentinelTest, AConnectionFindsThePrimaryPastADeadAndAStaleSentinel) {
  auto dead = testing::FreeLoopbackPort();
  ASSERT_TRUE(dead.has_value()) << dead.error();
  // A sentinel whose answer is stale: it names the replica as "mymaster".
  auto stale =
      StartServer({.sentinel = RedisSentinelConfig{.primary_port = replica_->port(), .quorum = 3}});
  ASSERT_NE(stale, nullptr);
  auto options = *ParseRedisUrl("redis-sentinel://127.0.0.1:" + std::to_string(*dead) +
                                ",127.0.0.1:" + std::to_string(stale->port()) + ",127.0.0.1:" +
                                std::to_string(sentinels_[0]->port()) + "/mymaster/2");
  auto conn = Connection::Connect(options);
  ASSERT_TRUE(conn.has_value()) << conn.error();
  EXPECT_EQ((*conn)->options().port, primary_->port());
  auto set = (*conn)->Command({"SET", "k", "v"});
  ASSERT_TRUE(set.has_value()) << set.error();
  EXPECT_TRUE(set->is_status()) << set->ToString();
  // db 2 was selected on the primary.
  auto moved = primary_->Admin({"SELECT", "2"});
  ASSERT_TRUE(moved.has_value());
  auto got = primary_->Admin({"GET", "k"});
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->str, "v");
  (void)primary_->Admin({"SELECT", "0"});

  // With no sentinel that names a primary, a clear error, within the
  // connect timeout.
  auto lost = ParseRedisUrl("redis-sentinel://127.0.0.1:" + std::to_string(*dead) +
                            ",127.0.0.1:" + std::to_string(stale->port()) + "/mymaster");
  auto none = Connection::Connect(*lost);
  ASSERT_FALSE(none.has_value());
  EXPECT_EQ(none.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(none.error().message()),
              ::testing::HasSubstr("no sentinel named a reachable primary"));
  EXPECT_THAT(std::string(none.error().message()), ::testing::HasSubstr("not the primary"));

  // The primary demoted under the connection (no sentinel involved, so no
  // CLIENT KILL): its READONLY breaks the connection, and the reconnect
  // refuses the demoted server the sentinels still name.
  auto demoted = primary_->Admin({"REPLICAOF", "127.0.0.1", std::to_string(*dead)});
  ASSERT_TRUE(demoted.has_value() && demoted->is_status()) << demoted->ToString();
  auto refused = (*conn)->Command({"SET", "k", "w"});
  ASSERT_TRUE(refused.has_value()) << refused.error();
  EXPECT_TRUE(refused->IsErrorCode("READONLY")) << refused->ToString();
  EXPECT_TRUE((*conn)->broken());
  const Status again = (*conn)->Reconnect();
  EXPECT_EQ(again.code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(again.message()), ::testing::HasSubstr("not the primary"));
}

TEST_F(RedisSentinelTest, TheStoreDiscoversThePrimaryThroughTheSentinels) {
  auto dead = testing::FreeLoopbackPort();
  ASSERT_TRUE(dead.has_value()) << dead.error();
  auto a = Store(*dead), b = Store(*dead);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(Subscribers(primary_->port()), 2);
  EXPECT_EQ(Subscribers(replica_->port()), 0);
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }));
  EXPECT_EQ(StateOn(primary_->port()), ReadResult::State::kOpen);
  OneProbeClosesTheFleet({ba.get(), bb.get()}, primary_->port());
}

TEST_F(RedisSentinelTest, AForcedFailoverIsFollowedAndKeepsAReplicatedOpen) {
  auto a = Store(), b = Store();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // An OPEN written before the failover, long enough to outlive it.
  constexpr std::string_view kBefore = "meta:read:17841400000000001:quota";
  auto before = Breaker(a, kBefore, seconds(60));
  Warm(*before);
  Trip(*before);
  a->Flush();
  ASSERT_EQ(StateOn(primary_->port(), kBefore), ReadResult::State::kOpen);
  // Acknowledged by the replica too (a trip only the old primary held would
  // be lost, as documented).
  auto wait = primary_->Admin({"WAIT", "1", "1000"});
  ASSERT_TRUE(wait.has_value() && wait->is_integer() && wait->integer == 1)
      << (wait ? wait->ToString() : wait.error().ToString());

  const std::int64_t followed = a->stats().failovers;
  auto forced = sentinels_[0]->Admin({"SENTINEL", "FAILOVER", "mymaster"});
  ASSERT_TRUE(forced.has_value() && forced->is_status()) << (forced ? forced->ToString() : "");
  const int new_port = replica_->port();
  ASSERT_TRUE(PollUntil([&] { return NamedPrimaryPort(0) == new_port; }, seconds(10)));
  // Both stores move: their subscribers are on the new primary.
  ASSERT_TRUE(PollUntil(
      [&] {
        return Subscribers(new_port) == 2 && a->healthy() && b->healthy() &&
               a->stats().failovers > followed;
      },
      seconds(10)))
      << "subscribers on the new primary: " << Subscribers(new_port);
  // The OPEN from before is there: a new instance's breaker finds it.
  auto c = Store();
  ASSERT_NE(c, nullptr);
  auto late = Breaker(c, kBefore, seconds(60));
  ASSERT_TRUE(PollUntil([&] {
    Warm(*late);
    return late->state() == State::kOpen;
  }));
  // A trip after the failover reaches the other instances, through the new
  // primary, and its recovery has one probe.
  auto ba = Breaker(a), bb = Breaker(b), bc = Breaker(c);
  for (auto* x : {ba.get(), bb.get(), bc.get()}) Warm(*x);
  for (auto* s : {a.get(), b.get(), c.get()}) s->Flush();
  Trip(*ba);
  ASSERT_TRUE(
      PollUntil([&] { return bb->state() == State::kOpen && bc->state() == State::kOpen; }));
  EXPECT_EQ(StateOn(new_port), ReadResult::State::kOpen);
  OneProbeClosesTheFleet({ba.get(), bb.get(), bc.get()}, new_port);
}

TEST_F(RedisSentinelTest, TheSnapshotStoreFollowsAForcedFailoverWhenAnnounced) {
  auto connection = ParseRedisUrl(Url());
  ASSERT_TRUE(connection.has_value()) << connection.error();
  auto store = RedisSnapshotStore::Create({.connection = *connection});
  ASSERT_TRUE(store.has_value()) << store.error();
  ASSERT_TRUE((*store)->Put("k", "before").ok());
  ASSERT_TRUE(PollUntil([&] { return (*store)->stats().failovers == 1; }))
      << "the first primary is followed too";
  auto forced = sentinels_[0]->Admin({"SENTINEL", "FAILOVER", "mymaster"});
  ASSERT_TRUE(forced.has_value() && forced->is_status()) << (forced ? forced->ToString() : "");
  // Announced by the sentinels while the old primary still takes writes
  // (Sentinel demotes it seconds later): the store moves at the
  // announcement, so a write made now is on the new primary, not on the old
  // one whose resync would erase it.
  ASSERT_TRUE(PollUntil([&] { return (*store)->stats().failovers == 2; }, seconds(10)));
  ASSERT_TRUE((*store)->Put("k", "after").ok());
  // (The harness' own connection to the promoted server may have been
  // dropped by the role change: asked again until it answers.)
  std::string on_new;
  ASSERT_TRUE(PollUntil([&] {
    auto r = replica_->Admin({"GET", "fusebox:v1:snap:k"});
    if (r && r->is_string()) on_new = r->str;
    return r.has_value() && !r->is_error();
  }));
  EXPECT_EQ(on_new, "after");
  auto read = (*store)->Get("k");
  ASSERT_TRUE(read.has_value() && read->has_value()) << (read ? "" : read.error().ToString());
  EXPECT_EQ((**read).value, "after");
}

TEST_F(RedisSentinelTest, AKilledPrimaryCostsBoundedCallsAndTheStoreConverges) {
  auto a = Store(), b = Store();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  const int new_port = replica_->port();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(primary_->Kill().ok());
  // While no primary is known, a stale breaker asks the store on each call;
  // none may wait beyond the configured timeouts (connect 300 ms for the
  // whole discovery, command 200 ms), whatever the sentinels say meanwhile.
  auto worst = std::chrono::steady_clock::duration::zero();
  std::optional<std::chrono::steady_clock::duration> converged;
  const bool done = PollUntil(
      [&] {
        auto fresh = Breaker(b);
        const auto t0 = std::chrono::steady_clock::now();
        auto p = fresh->TryAcquire();
        worst = std::max(worst, std::chrono::steady_clock::now() - t0);
        if (p) p->Success(milliseconds(1));
        if (!converged && Subscribers(new_port) == 2 && a->healthy() && b->healthy()) {
          converged = std::chrono::steady_clock::now() - killed_at;
        }
        return converged.has_value();
      },
      seconds(20));
  ASSERT_TRUE(done) << "the stores never moved to the new primary";
  // Generous (sanitizers, a loaded two-core box): 300 + 200 ms configured.
  EXPECT_LT(worst, milliseconds(1500));
  std::printf(
      "sentinel: primary killed -> both stores subscribed on the new primary in %lld ms; "
      "slowest call meanwhile %lld ms\n",
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(*converged).count()),
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(worst).count()));
  // The fleet works on the new primary: a trip reaches b, one probe closes.
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }));
  EXPECT_EQ(StateOn(new_port), ReadResult::State::kOpen);
  OneProbeClosesTheFleet({ba.get(), bb.get()}, new_port);
}

// --- Acknowledgement of trips by replicas (wait_replicas) -----------------------

// Trips `b` and returns how long the call that tripped it took.
std::chrono::steady_clock::duration TimedTrip(CircuitBreaker& b) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 4 && b.state() == State::kClosed; ++i) {
    auto p = b.TryAcquire();
    if (p) p->Failure(milliseconds(1));
  }
  return std::chrono::steady_clock::now() - t0;
}

long long Ms(std::chrono::steady_clock::duration d) {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(d).count()) /
         1000;
}

TEST_F(RedisSentinelTest, TripsAndOverridesAreAcknowledgedByTheReplica) {
  auto plain = Store();
  auto acked = Store(Options(0, "&wait_replicas=1&wait_timeout=2s"));
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(acked, nullptr);
  // What the WAIT costs the store's thread: a trip sent and flushed, with
  // and without it (after a first trip each, so that scripts are loaded).
  auto flushed_trip = [&](RedisSharedState& store, std::string_view circuit) {
    store.Trip(circuit, seconds(60), "test");
    const auto t0 = std::chrono::steady_clock::now();
    store.Flush();
    return std::chrono::steady_clock::now() - t0;
  };
  (void)flushed_trip(*plain, "warm:plain");
  (void)flushed_trip(*acked, "warm:acked");
  const auto without = flushed_trip(*plain, "timed:plain");
  const auto with = flushed_trip(*acked, "timed:acked");
  EXPECT_EQ(plain->stats().replica_acks + plain->stats().replica_ack_shortfalls, 0)
      << "no WAIT without wait_replicas";
  EXPECT_EQ(acked->stats().replica_acks, 2);

  auto b = Breaker(acked);
  Warm(*b);
  acked->Flush();
  const auto call = TimedTrip(*b);
  ASSERT_EQ(b->state(), State::kOpen);
  ASSERT_TRUE(PollUntil([&] { return acked->stats().replica_acks == 3; }));
  acked->PublishOverride(kCircuit, {.kind = SharedOverride::Kind::kForcedOpen, .reason = "test"});
  ASSERT_TRUE(PollUntil([&] { return acked->stats().replica_acks == 4; }));
  EXPECT_EQ(acked->stats().replica_ack_shortfalls, 0);
  std::printf(
      "wait_replicas=1: trip sent + flushed in %lld us with WAIT, %lld us without; the call that "
      "tripped took %lld us\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(with).count()),
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::microseconds>(without).count()),
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(call).count()));
}

TEST_F(RedisSentinelTest, AReplicaThatDoesNotAcknowledgeCostsTheCallerNothing) {
  std::mutex mu;
  std::vector<std::string> warnings;
  SharedStateOptions o = Options(0, "&wait_replicas=1&wait_timeout=2s");
  o.connection.warn = [&](std::string_view event, std::string_view message) {
    std::lock_guard<std::mutex> lock(mu);
    warnings.push_back(std::string(event) + ": " + std::string(message));
  };
  auto store = Store(std::move(o));
  ASSERT_NE(store, nullptr);
  auto b = Breaker(store, kCircuit, seconds(60));
  Warm(*b);
  store->Flush();
  // A stopped replica acknowledges nothing: each WAIT runs its 2 s out.
  ASSERT_TRUE(replica_->Suspend().ok());
  const auto call = TimedTrip(*b);
  ASSERT_EQ(b->state(), State::kOpen);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(PollUntil([&] { return store->stats().replica_ack_shortfalls == 1; }));
  const auto counted = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(replica_->Resume().ok());
  EXPECT_EQ(store->stats().replica_acks, 0);
  // The caller did not wait for the WAIT (2 s); generous for sanitizers.
  EXPECT_LT(call, milliseconds(200));
  EXPECT_GE(counted + call, milliseconds(1900)) << "counted before the timeout";
  // The trip itself reached the primary at once, and a short answer is not
  // a failure of Redis: the store stays healthy.
  EXPECT_EQ(StateOn(primary_->port()), ReadResult::State::kOpen);
  EXPECT_TRUE(store->healthy());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("redis_replica_ack_short: redis 127.0.0.1:"));
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("0 of 1 replicas acknowledged within 2000 ms"));
  std::printf(
      "stopped replica: the call that tripped took %lld us; shortfall counted %lld ms later\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::microseconds>(call).count()),
      Ms(counted));
}

TEST_F(RedisSentinelTest, AnAcknowledgedTripSurvivesTheKillOfThePrimary) {
  auto store = Store(Options(0, "&wait_replicas=1&wait_timeout=1s"));
  ASSERT_NE(store, nullptr);
  auto b = Breaker(store, kCircuit, seconds(60));
  Warm(*b);
  store->Flush();
  Trip(*b);
  // Killed as soon as the replica's acknowledgement is counted: the trip had
  // no other time to reach it.
  ASSERT_TRUE(PollUntil([&] { return store->stats().replica_acks == 1; }, seconds(3)));
  ASSERT_TRUE(primary_->Kill().ok());
  const int new_port = replica_->port();
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(PollUntil([&] { return NamedPrimaryPort(0) == new_port; }, seconds(10)))
      << "no failover";
  const auto failover = std::chrono::steady_clock::now() - killed_at;
  EXPECT_EQ(StateOn(new_port), ReadResult::State::kOpen) << "the acknowledged OPEN was lost";
  // A new instance, through the sentinels, finds it too.
  auto c = Store();
  ASSERT_NE(c, nullptr);
  auto late = Breaker(c, kCircuit, seconds(60));
  ASSERT_TRUE(PollUntil([&] {
    Warm(*late);
    return late->state() == State::kOpen;
  }));
  std::printf(
      "acknowledged trip, primary killed: OPEN on the new primary after a %lld ms failover\n",
      Ms(failover));
}

}  // namespace
}  // namespace fusebox::redis
