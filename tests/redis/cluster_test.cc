// Cluster mode (redis-cluster://) against a real Redis Cluster: three
// primaries and three replicas started here on free loopback ports, joined
// and resharded with redis-cli as an operator would (tests/redis/
// redis_cluster.h), with cluster-node-timeout 1000 ms so that a failover fits
// in a test.
//
// The breakers run on ManualClocks; resharding and failover run on real
// time, so these tests wait with bounded polls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/circuit_scripts.h"
#include "fusebox/redis/keyspace.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/redis/redis_cluster.h"
#include "tests/redis/redis_server.h"
#include "tests/redis/trip.h"

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::PollUntil;
using testing::RedisCluster;
using testing::Trip;
using testing::Warm;

constexpr Duration kOpen = milliseconds(300);

class RedisClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = RedisCluster::Start();
    ASSERT_TRUE(c.has_value()) << c.error();
    cluster_ = std::move(*c);
  }

  std::unique_ptr<Connection> Connect() {
    auto conn = Connection::Connect(cluster_->options());
    EXPECT_TRUE(conn.has_value()) << conn.error();
    return conn ? std::move(*conn) : nullptr;
  }

  // A circuit id whose keys the primary on `port` serves.
  std::string CircuitOn(int port, int from = 0) {
    for (int i = from; i < from + 10000; ++i) {
      std::string circuit = "meta:read:" + std::to_string(17841400000000000LL + i) + ":quota";
      if (cluster_->OwnerPort(KeySlot(scripts_.keyspace().Keys(circuit).open)) == port) {
        return circuit;
      }
    }
    ADD_FAILURE() << "no circuit found on " << port;
    return "";
  }

  // The ports of the primaries, as node 0 sees them.
  std::vector<int> PrimaryPorts() {
    std::set<int> ports;
    for (std::uint16_t slot = 0; slot < 16384; slot += 512) ports.insert(cluster_->OwnerPort(slot));
    return {ports.begin(), ports.end()};
  }

  // Keys directly on the node at `port` (no routing).
  std::int64_t DbSize(int port) {
    auto r = cluster_->ByPort(port)->Admin({"DBSIZE"});
    return r && r->is_integer() ? r->integer : -1;
  }

  SharedStateOptions Options(std::string_view query = "") {
    auto connection =
        ParseRedisUrl(cluster_->Url("?connect_timeout=300ms&timeout=200ms" + std::string(query)));
    EXPECT_TRUE(connection.has_value()) << connection.error();
    SharedStateOptions o;
    if (connection) o.connection = *connection;
    o.heartbeat = milliseconds(200);
    o.min_grace = seconds(30);
    o.down_for = milliseconds(500);
    return o;
  }

  std::shared_ptr<RedisSharedState> Store(std::string_view query = "") {
    auto s = RedisSharedState::Create(Options(query));
    EXPECT_TRUE(s.has_value()) << s.error();
    if (!s) return nullptr;
    auto store = *s;
    EXPECT_TRUE(PollUntil([&] { return store->healthy(); }, seconds(5))) << "never subscribed";
    return store;
  }

  std::unique_ptr<CircuitBreaker> Breaker(std::shared_ptr<SharedState> store,
                                          std::string_view circuit, Duration open = kOpen) {
    return testing::FleetBreaker(std::move(store), circuit, open, clock_);
  }

  // The circuit as the cluster holds it, read through a routed connection.
  ReadResult::State StateOf(std::string_view circuit) {
    auto conn = Connect();
    if (conn == nullptr) return ReadResult::State::kClosed;
    auto r = scripts_.Read(*conn, circuit);
    return r ? r->state : ReadResult::State::kClosed;
  }

  // Every breaker of `fleet` tries at once after the recovery time: exactly
  // one probes, and its success closes them all.
  void OneProbeClosesTheFleet(std::vector<CircuitBreaker*> fleet, std::string_view circuit) {
    testing::OneProbeClosesTheFleet(std::move(fleet), clock_, kOpen, [&] {
      return StateOf(circuit) == ReadResult::State::kHalfOpen;
    });
  }

  fusebox::testing::ManualClock clock_;
  std::unique_ptr<RedisCluster> cluster_;
  CircuitScripts scripts_;
};

TEST_F(RedisClusterTest, EachKeyGoesToThePrimaryOfItsSlot) {
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const std::vector<int> primaries = PrimaryPorts();
  ASSERT_EQ(primaries.size(), 3u);
  for (int i = 0; i < 300; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto r = conn->Command({"SET", key, "v" + std::to_string(i)});
    ASSERT_TRUE(r.has_value()) << r.error();
    ASSERT_TRUE(r->is_status()) << r->ToString();
  }
  // Each key is on the primary that serves its slot, and each primary holds
  // some: nothing went to the node the map came from by default.
  std::int64_t total = 0;
  for (int port : primaries) {
    const std::int64_t n = DbSize(port);
    EXPECT_GT(n, 50) << "primary " << port;
    total += n;
  }
  EXPECT_EQ(total, 300);
  for (int i = 0; i < 300; i += 7) {
    auto r = conn->Command({"GET", "k" + std::to_string(i)});
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r->str, "v" + std::to_string(i));
  }
  EXPECT_EQ(conn->cluster_redirects(), 0) << "the map was right: no redirect";

  // SCAN walks every primary.
  std::set<std::string> seen;
  std::string cursor = "0";
  int steps = 0;
  do {
    auto r = conn->Command({"SCAN", cursor, "COUNT", "50"});
    ASSERT_TRUE(r.has_value()) << r.error();
    ASSERT_TRUE(r->is_array() && r->elements.size() == 2) << r->ToString();
    cursor = r->elements[0].str;
    for (const Reply& k : r->elements[1].elements) seen.insert(k.str);
    ASSERT_LT(++steps, 200);
  } while (cursor != "0");
  EXPECT_EQ(seen.size(), 300u);

  // A pipeline's keys must share a slot.
  auto cross = conn->Pipeline({{"GET", "k1"}, {"GET", "k2"}});
  ASSERT_FALSE(cross.has_value());
  EXPECT_EQ(cross.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(cross.error().message()),
              ::testing::HasSubstr("different cluster slots"));
  auto tagged = conn->Pipeline({{"SET", "{t}a", "1"}, {"GET", "{t}a"}});
  ASSERT_TRUE(tagged.has_value()) << tagged.error();
  EXPECT_EQ((*tagged)[1].str, "1");

  // A redis:// connection to one node is told why it is refused a key.
  auto plain = cluster_->nodes()[0]->Connect();
  ASSERT_TRUE(plain.has_value()) << plain.error();
  int i = 0;
  while (cluster_->OwnerPort(KeySlot("k" + std::to_string(i))) == cluster_->nodes()[0]->port()) ++i;
  auto moved = (*plain)->Command({"GET", "k" + std::to_string(i)});
  ASSERT_TRUE(moved.has_value()) << moved.error();
  EXPECT_THAT(std::string((*plain)->ErrorReplyStatus("GET", *moved).message()),
              ::testing::HasSubstr("a Redis Cluster node: connect with redis-cluster://"));
}

TEST_F(RedisClusterTest, AReshardIsFollowedThroughMoved) {
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const std::vector<int> primaries = PrimaryPorts();
  ASSERT_EQ(primaries.size(), 3u);
  // Keys in the lowest slots of the first primary: the ones a reshard moves.
  const int from = cluster_->OwnerPort(0), to = primaries[0] == from ? primaries[1] : primaries[0];
  std::vector<std::string> moved;
  for (int i = 0; moved.size() < 20 && i < 100000; ++i) {
    std::string key = "m" + std::to_string(i);
    if (KeySlot(key) < 200 && cluster_->OwnerPort(KeySlot(key)) == from) moved.push_back(key);
  }
  ASSERT_EQ(moved.size(), 20u);
  for (const std::string& k : moved) ASSERT_TRUE(conn->Command({"SET", k, k}).has_value());
  ASSERT_TRUE(cluster_->Reshard(from, to, 1000).ok()) << cluster_->tool_output();
  ASSERT_TRUE(cluster_->WaitConverged(seconds(10)).ok());
  ASSERT_EQ(cluster_->OwnerPort(KeySlot(moved[0])), to);
  // The connection's map is stale: every key is still found, and written.
  for (const std::string& k : moved) {
    auto r = conn->Command({"GET", k});
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(r->str, k);
  }
  EXPECT_GE(conn->cluster_redirects(), 1);
  EXPECT_LE(conn->cluster_redirects(), 2) << "one MOVED, then the map is read again";
  auto w = conn->Command({"SET", moved[0], "new"});
  ASSERT_TRUE(w.has_value() && w->is_status()) << (w ? w->ToString() : w.error().ToString());
  auto direct = cluster_->ByPort(to)->Admin({"GET", moved[0]});
  ASSERT_TRUE(direct.has_value());
  EXPECT_EQ(direct->str, "new");
}

TEST_F(RedisClusterTest, AMigratingSlotIsFollowedThroughAsk) {
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const std::string key = "{ask-me}k";
  const std::uint16_t slot = KeySlot(key);
  const int from = cluster_->OwnerPort(slot);
  int to = 0;
  for (int port : PrimaryPorts())
    if (port != from) to = port;
  auto from_id = cluster_->NodeId(from), to_id = cluster_->NodeId(to);
  ASSERT_TRUE(from_id.has_value() && to_id.has_value());
  // The steps redis-cli runs for each slot of a reshard, stopped halfway:
  // the slot is migrating, and a key the old owner does not hold is asked of
  // the new one.
  const std::string s = std::to_string(slot);
  auto imp = cluster_->ByPort(to)->Admin({"CLUSTER", "SETSLOT", s, "IMPORTING", *from_id});
  ASSERT_TRUE(imp.has_value() && imp->is_status()) << (imp ? imp->ToString() : "");
  auto mig = cluster_->ByPort(from)->Admin({"CLUSTER", "SETSLOT", s, "MIGRATING", *to_id});
  ASSERT_TRUE(mig.has_value() && mig->is_status()) << (mig ? mig->ToString() : "");
  auto set = conn->Command({"SET", key, "asked"});
  ASSERT_TRUE(set.has_value()) << set.error();
  EXPECT_TRUE(set->is_status()) << set->ToString();
  EXPECT_EQ(conn->cluster_redirects(), 1);
  EXPECT_EQ(DbSize(from), 0) << "nothing was written on the migrating node";
  // It landed on the importing node; the map still names the old owner, so
  // the next command asks again.
  auto got = conn->Command({"GET", key});
  ASSERT_TRUE(got.has_value()) << got.error();
  EXPECT_EQ(got->str, "asked");
  EXPECT_EQ(conn->cluster_redirects(), 2) << "ASK does not change the map";
  // A script of several keys none of which has moved yet is asked of the
  // new owner too, which answers TRYAGAIN until the slot is whole: a
  // transient error, which the stores treat as Redis being unavailable.
  auto trip = scripts_.Trip(*conn, "ask-me", seconds(60), seconds(30), "test");
  ASSERT_FALSE(trip.has_value());
  EXPECT_EQ(trip.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(trip.error().message()), ::testing::HasSubstr("TRYAGAIN"));
  EXPECT_FALSE(conn->broken());
  // Finish the migration: MOVED from then on, and the script runs.
  for (int port : PrimaryPorts()) {
    (void)cluster_->ByPort(port)->Admin({"CLUSTER", "SETSLOT", s, "NODE", *to_id});
  }
  auto after = conn->Command({"GET", key});
  ASSERT_TRUE(after.has_value()) << after.error();
  EXPECT_EQ(after->str, "asked");
  trip = scripts_.Trip(*conn, "ask-me", seconds(60), seconds(30), "test");
  ASSERT_TRUE(trip.has_value()) << trip.error();
  auto open = cluster_->ByPort(to)->Admin({"EXISTS", scripts_.keyspace().Keys("ask-me").open});
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->integer, 1);
}

TEST_F(RedisClusterTest, ASingleServerOrNoReachableSeedIsAClearError) {
  auto plain = testing::RedisServer::Start();
  ASSERT_TRUE(plain.has_value()) << plain.error();
  auto o =
      ParseRedisUrl("redis-cluster://:s3cret-pw@127.0.0.1:" + std::to_string((*plain)->port()) +
                    "?connect_timeout=300ms");
  ASSERT_TRUE(o.has_value()) << o.error();
  o->password.clear();  // The plain server has none.
  auto c = Connection::Connect(*o);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kUnavailable);
  EXPECT_THAT(std::string(c.error().message()), ::testing::HasSubstr("not a cluster node"));

  auto dead = testing::FreeLoopbackPort();
  ASSERT_TRUE(dead.has_value());
  auto none = ParseRedisUrl("redis-cluster://:s3cret-pw@127.0.0.1:" + std::to_string(*dead) +
                            "?connect_timeout=300ms");
  ASSERT_TRUE(none.has_value());
  auto refused = Connection::Connect(*none);
  ASSERT_FALSE(refused.has_value());
  EXPECT_THAT(std::string(refused.error().message()),
              ::testing::HasSubstr("no node gave a slot map"));
  EXPECT_THAT(std::string(refused.error().message()),
              ::testing::Not(::testing::HasSubstr("s3cret")));
}

TEST_F(RedisClusterTest, TripsOnEveryPrimaryReachTheFleetWithOneProbePerRecovery) {
  auto a = Store(), b = Store();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  // A circuit on each primary: each trip's event is published on its
  // primary and reaches subscribers on whichever node they are.
  for (int port : PrimaryPorts()) {
    const std::string circuit = CircuitOn(port);
    auto ba = Breaker(a, circuit), bb = Breaker(b, circuit);
    Warm(*ba);
    Warm(*bb);
    a->Flush();
    b->Flush();
    Trip(*ba);
    ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; })) << "primary " << port;
    auto direct = cluster_->ByPort(port)->Admin({"EXISTS", scripts_.keyspace().Keys(circuit).open});
    ASSERT_TRUE(direct.has_value());
    EXPECT_EQ(direct->integer, 1) << "the OPEN is on the primary of its slot";
    OneProbeClosesTheFleet({ba.get(), bb.get()}, circuit);
  }
  // The fleet listing walks every primary.
  const std::string on_last = CircuitOn(PrimaryPorts().back(), 500);
  a->Trip(on_last, seconds(60), "test");
  a->Flush();
  auto listing = a->ListFleet(100, seconds(2));
  ASSERT_TRUE(listing.has_value()) << listing.error();
  bool found = false;
  for (const auto& c : listing->circuits) found = found || c.circuit == on_last;
  EXPECT_TRUE(found);
  EXPECT_EQ(a->stats().errors, 0);
}

// With wait_replicas, a burst of trips on circuits of two primaries costs
// one WAIT on each of them (WAIT counts a connection's writes to the node it
// is sent to), none on the third, and each trip is counted acknowledged.
TEST_F(RedisClusterTest, ABurstOfTripsWaitsOncePerPrimaryWritten) {
  auto a = Store("&wait_replicas=1&wait_timeout=2s");
  ASSERT_NE(a, nullptr);
  const std::vector<int> primaries = PrimaryPorts();
  ASSERT_EQ(primaries.size(), 3u);
  auto waits = [&](int port) {
    auto calls = cluster_->ByPort(port)->CommandCalls();
    EXPECT_TRUE(calls.has_value()) << calls.error();
    return calls ? (*calls)["wait"] : -1;
  };
  auto held = std::make_shared<testing::HeldWorker>();
  const SharedState::SubscriptionId id = a->Subscribe("other", held);
  held->AwaitHeld();
  for (int i = 0; i < 3; ++i) {
    a->Trip(CircuitOn(primaries[0], i * 100), seconds(60), "burst");
    a->Trip(CircuitOn(primaries[1], i * 100), seconds(60), "burst");
  }
  held->Release();
  a->Flush();
  a->Unsubscribe(id);
  EXPECT_EQ(waits(primaries[0]), 1);
  EXPECT_EQ(waits(primaries[1]), 1);
  EXPECT_EQ(waits(primaries[2]), 0);
  EXPECT_EQ(a->stats().replica_acks, 6);
  EXPECT_EQ(a->stats().replica_ack_shortfalls, 0);
}

TEST_F(RedisClusterTest, AKilledPrimaryCostsBoundedCallsAndAnAcknowledgedOpenSurvives) {
  auto a = Store("&wait_replicas=1&wait_timeout=1s"), b = Store();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const int victim = PrimaryPorts().front();
  const std::string kept = CircuitOn(victim);
  const std::string after = CircuitOn(victim, 1000);
  auto kb = Breaker(a, kept, seconds(60));
  Warm(*kb);
  a->Flush();
  Trip(*kb);
  ASSERT_TRUE(PollUntil([&] { return a->stats().replica_acks == 1; }, seconds(3)));
  const auto killed_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(cluster_->ByPort(victim)->Kill().ok());
  // Calls keep going, on every circuit: none waits beyond the timeouts.
  auto ba = Breaker(a, after), bb = Breaker(b, after);
  auto worst = std::chrono::steady_clock::duration::zero();
  std::optional<std::chrono::steady_clock::duration> converged;
  const bool done = PollUntil(
      [&] {
        auto fresh = Breaker(b, after);
        const auto t0 = std::chrono::steady_clock::now();
        auto p = fresh->TryAcquire();
        worst = std::max(worst, std::chrono::steady_clock::now() - t0);
        if (p) p->Success(milliseconds(1));
        if (!converged &&
            cluster_->OwnerPort(KeySlot(scripts_.keyspace().Keys(after).open),
                                victim == cluster_->nodes()[0]->port() ? 1 : 0) != victim) {
          converged = std::chrono::steady_clock::now() - killed_at;
        }
        return converged.has_value();
      },
      seconds(20));
  ASSERT_TRUE(done) << "no replica took over";
  EXPECT_LT(worst, milliseconds(1500));
  // The acknowledged OPEN is on the promoted replica.
  EXPECT_TRUE(PollUntil([&] { return StateOf(kept) == ReadResult::State::kOpen; }, seconds(10)))
      << "the acknowledged OPEN was lost";
  // The fleet works again on the moved slots: a trip reaches b, one probe.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(PollUntil(
      [&] {
        Warm(*ba);
        Warm(*bb);
        a->Flush();
        return a->healthy() && b->healthy();
      },
      seconds(10)));
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }, seconds(10)));
  const auto recovered = std::chrono::steady_clock::now() - t0;
  OneProbeClosesTheFleet({ba.get(), bb.get()}, after);
  std::printf(
      "cluster: primary killed -> replica serving its slots in %lld ms; slowest call meanwhile "
      "%lld ms; trip propagated %lld ms after that\n",
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(*converged).count()),
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(worst).count()),
      static_cast<long long>(std::chrono::duration_cast<milliseconds>(recovered).count()));
}

}  // namespace
}  // namespace fusebox::redis
