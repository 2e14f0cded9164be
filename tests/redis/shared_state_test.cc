// RedisSharedState against a real redis-server: breakers of several
// "instances" (each its own RedisSharedState, hence its own connections)
// sharing one circuit, T2-T11 of the shared-state notes end to end, and one
// test with separate processes.
//
// The breakers run on ManualClocks; Redis' TTLs run on the server's real
// clock, so the OPEN times here are a few hundred milliseconds and a test
// that must get past one waits on Redis (PollUntil reading the circuit), then
// advances the breakers' clock.
#include "fusebox/redis/shared_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <latch>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/circuit_scripts.h"
#include "fusebox/testing/manual_clock.h"
#include "tests/redis/redis_server.h"
#include "tests/redis/trip.h"

extern char** environ;

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::PollUntil;
using testing::Pttl;
using testing::RedisServer;
using testing::Trip;

constexpr std::string_view kCircuit = "meta:read:17841400000000000:quota";
constexpr Duration kOpen = milliseconds(300);

class RedisSharedStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = RedisServer::Start();
    ASSERT_TRUE(server.has_value()) << server.error();
    server_ = std::move(*server);
    auto conn = server_->Connect();
    ASSERT_TRUE(conn.has_value()) << conn.error();
    raw_ = std::move(*conn);
  }

  SharedStateOptions Options() {
    SharedStateOptions o;
    o.connection.port = server_->port();
    o.connection.connect_timeout = milliseconds(200);
    o.connection.command_timeout = milliseconds(200);
    o.heartbeat = milliseconds(200);
    o.min_grace = seconds(30);
    o.down_for = seconds(1);
    return o;
  }

  std::shared_ptr<RedisSharedState> Store(SharedStateOptions o) {
    auto s = RedisSharedState::Create(std::move(o));
    EXPECT_TRUE(s.has_value()) << s.error();
    if (!s) return nullptr;
    auto store = *s;
    EXPECT_TRUE(PollUntil([&] { return store->healthy(); })) << "never subscribed";
    return store;
  }
  std::shared_ptr<RedisSharedState> Store() { return Store(Options()); }

  CircuitBreakerConfig Config(std::shared_ptr<SharedState> store) {
    CircuitBreakerConfig c;
    c.sliding_window_size = 4;
    c.minimum_number_of_calls = 4;
    c.permitted_number_of_calls_in_half_open_state = 1;
    c.wait_duration_in_open_state = kOpen;
    c.shared_state = std::move(store);
    c.shared_probe_lease = seconds(5);
    return c;
  }

  std::unique_ptr<CircuitBreaker> Breaker(std::shared_ptr<SharedState> store, Clock& clock) {
    return *CircuitBreaker::Create(std::string(kCircuit), Config(std::move(store)), clock);
  }
  std::unique_ptr<CircuitBreaker> Breaker(std::shared_ptr<SharedState> store) {
    return Breaker(std::move(store), clock_);
  }

  // One call, so that a new breaker reads the fleet (and then trusts pushes).
  static void Warm(CircuitBreaker& b) {
    auto p = b.TryAcquire();
    if (p) p->Success(milliseconds(1));
  }

  ReadResult::State FleetState() {
    auto r = scripts_.Read(*raw_, kCircuit);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r ? r->state : ReadResult::State::kClosed;
  }

  // Waits on Redis until the OPEN time is over, then moves the breakers'
  // clock past their own wait.
  void WaitForRecovery() {
    ASSERT_TRUE(PollUntil([&] { return FleetState() == ReadResult::State::kHalfOpen; }));
    clock_.Advance(kOpen + milliseconds(1));
  }

  // Every command the server ran, as INFO commandstats counts them (commands
  // run inside scripts included), but the harness' INFO and the subscribers'
  // heartbeat PINGs.
  std::int64_t ServerCommands() {
    auto calls = server_->CommandCalls();
    EXPECT_TRUE(calls.has_value()) << calls.error();
    if (!calls) return -1;  // never a count a test expects
    std::int64_t n = 0;
    for (const auto& [command, count] : *calls) {
      if (command != "info" && command != "ping") n += count;
    }
    return n;
  }

  fusebox::testing::ManualClock clock_;
  std::unique_ptr<RedisServer> server_;
  std::unique_ptr<Connection> raw_;
  CircuitScripts scripts_;
};

TEST_F(RedisSharedStateTest, ATripReachesEveryInstanceWithinAPushAndCallsCostNoCommand) {
  auto a = Store(), b = Store(), c = Store();
  auto ba = Breaker(a), bb = Breaker(b), bc = Breaker(c);
  for (auto* x : {ba.get(), bb.get(), bc.get()}) Warm(*x);  // one read each
  for (auto* s : {a.get(), b.get(), c.get()}) s->Flush();
  auto round_trips = [&] {
    return a->stats().commands + b->stats().commands + c->stats().commands;
  };
  const std::int64_t trips_before = round_trips();
  const auto t0 = std::chrono::steady_clock::now();
  Trip(*ba);
  ASSERT_TRUE(
      PollUntil([&] { return bb->state() == State::kOpen && bc->state() == State::kOpen; }));
  const auto took = std::chrono::steady_clock::now() - t0;
  // Generous: sanitizers on a loaded two-core box. Without a push nothing
  // would ever tell B and C (neither is called), so the poll itself pins it.
  EXPECT_LT(took, seconds(1)) << "T5: a push on loopback";
  a->Flush();
  EXPECT_EQ(round_trips() - trips_before, 1) << "one round trip in all: the trip script";
  // T7: OPEN circuits are decided from memory.
  const std::int64_t before = ServerCommands();
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(ba->TryAcquire().has_value());
    EXPECT_FALSE(bb->TryAcquire().has_value());
    EXPECT_FALSE(bc->TryAcquire().has_value());
  }
  EXPECT_EQ(ServerCommands() - before, 0);
  auto r = bb->TryAcquire();
  ASSERT_FALSE(r.has_value());
  // The pushed remaining time, on b's own clock.
  EXPECT_LE(*r.error().retry_at(), clock_.Now() + kOpen);
  EXPECT_GT(*r.error().retry_at(), clock_.Now() + kOpen - milliseconds(100));
}

TEST_F(RedisSharedStateTest, AClosedCircuitCostsOneReadPerBreakerThenNone) {
  auto a = Store();
  const std::int64_t before = ServerCommands();
  const std::int64_t round_trips = a->stats().commands;
  auto ba = Breaker(a);
  Warm(*ba);
  a->Flush();
  // One read, by the store right after the breaker subscribed or by its first
  // call: PTTL open, PTTL trip, HMGET override, PTTL override, pipelined.
  EXPECT_EQ(ServerCommands() - before, 4);
  for (int i = 0; i < 10000; ++i) Warm(*ba);
  EXPECT_EQ(ServerCommands() - before, 4);
  EXPECT_EQ(a->stats().commands - round_trips, 1);
}

TEST_F(RedisSharedStateTest, ExactlyOneInstanceProbesAndItsSuccessClosesTheFleet) {
  std::vector<std::shared_ptr<RedisSharedState>> stores;
  std::vector<std::unique_ptr<CircuitBreaker>> fleet;
  for (int i = 0; i < 4; ++i) {
    stores.push_back(Store());
    fleet.push_back(Breaker(stores.back()));
    Warm(*fleet.back());
  }
  Trip(*fleet[0]);
  ASSERT_TRUE(PollUntil([&] { return fleet[3]->state() == State::kOpen; }));
  WaitForRecovery();
  // T2: every instance, from its own thread, at once.
  std::latch start(4);
  std::vector<std::optional<Permit>> permits(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      for (int k = 0; k < 20; ++k) {
        auto p = fleet[i]->TryAcquire();
        if (p) {
          permits[i].emplace(std::move(*p));
          return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  int probes = 0;
  int prober = -1;
  for (int i = 0; i < 4; ++i) {
    if (permits[i]) {
      ++probes;
      prober = i;
    }
  }
  ASSERT_EQ(probes, 1);
  const auto t0 = std::chrono::steady_clock::now();
  permits[prober]->Success(milliseconds(3));
  ASSERT_TRUE(PollUntil([&] {
    for (auto& b : fleet)
      if (b->state() != State::kClosed) return false;
    return true;
  }));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, seconds(1)) << "T5 (generous: sanitizers, load)";
  EXPECT_EQ(FleetState(), ReadResult::State::kClosed);
  std::int64_t granted = 0;
  for (auto& s : stores) granted += s->stats().leases_granted;
  EXPECT_EQ(granted, 1);
}

// OPEN includes its deadline with a shared state too (as Resilience4j's
// OpenState, and as a local breaker): a call at the deadline is refused
// without asking the fleet for the probe lease; the first instant after it
// takes the lease and probes. Redis has long let the probe go (its TTL runs
// on the server's clock), so only the breaker's own test keeps the deadline.
TEST_F(RedisSharedStateTest, TheFleetsProbeStartsStrictlyAfterTheOpenDeadline) {
  auto a = Store();
  auto ba = Breaker(a);
  Warm(*ba);
  const TimePoint tripped = clock_.Now();
  Trip(*ba);
  a->Flush();
  ASSERT_TRUE(PollUntil([&] { return FleetState() == ReadResult::State::kHalfOpen; }));
  clock_.Advance(kOpen);  // at the deadline, not past it
  ASSERT_EQ(clock_.Now(), tripped + kOpen);
  const std::optional<Status> rejected = ba->TryReject();
  ASSERT_TRUE(rejected.has_value()) << "TryReject let a call through at the deadline";
  EXPECT_EQ(rejected->retry_at(), tripped + kOpen);
  auto at = ba->TryAcquire();
  ASSERT_FALSE(at.has_value()) << "probed at the deadline";
  EXPECT_EQ(at.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(ba->state(), State::kOpen);
  EXPECT_EQ(a->stats().leases_granted, 0) << "asked the fleet for the lease at the deadline";
  EXPECT_EQ(FleetState(), ReadResult::State::kHalfOpen);

  clock_.Advance(Duration(1));
  EXPECT_EQ(ba->TryReject(), std::nullopt);
  auto probe = ba->TryAcquire();
  ASSERT_TRUE(probe.has_value()) << probe.error();
  EXPECT_EQ(ba->state(), State::kHalfOpen);
  EXPECT_EQ(a->stats().leases_granted, 1);
  probe->Success(milliseconds(1));
  EXPECT_EQ(ba->state(), State::kClosed);
}

TEST_F(RedisSharedStateTest, AFailedProbeReopensEveryInstance) {
  auto a = Store(), b = Store();
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }));
  WaitForRecovery();
  auto probe = bb->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  EXPECT_FALSE(ba->TryAcquire().has_value());  // busy
  probe->Failure(milliseconds(1));
  b->Flush();
  EXPECT_EQ(FleetState(), ReadResult::State::kOpen);
  // a was rejected as "busy" and rechecks within a second; the push reopens it
  // for the new OPEN, from now.
  ASSERT_TRUE(PollUntil([&] {
    auto r = ba->TryAcquire();
    return !r && *r.error().retry_at() > clock_.Now() + kOpen - milliseconds(100);
  }));
}

TEST_F(RedisSharedStateTest, ACrashedHolderDelaysTheNextProbeOnlyUntilItsLeaseEnds) {
  auto a = Store();
  auto ba = Breaker(a);
  Warm(*ba);
  Trip(*ba);
  a->Flush();
  WaitForRecovery();
  // An instance that took the lease and died (T3).
  auto lease = scripts_.Acquire(*raw_, kCircuit, NewToken(), milliseconds(300));
  ASSERT_TRUE(lease.has_value()) << lease.error();
  ASSERT_EQ(lease->outcome, AcquireResult::Outcome::kProbe);
  EXPECT_FALSE(ba->TryAcquire().has_value());
  ASSERT_TRUE(PollUntil(
      [&] { return Pttl(*raw_, "fusebox:v1:{" + std::string(kCircuit) + "}:lease") == -2; }));
  clock_.Advance(seconds(1));  // a's recheck after "busy"
  auto p = ba->TryAcquire();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(ba->state(), State::kHalfOpen);
  p->Success(milliseconds(1));
  a->Flush();
  EXPECT_EQ(FleetState(), ReadResult::State::kClosed);
}

TEST_F(RedisSharedStateTest, ATripDuringAProbeFencesTheProbersClose) {
  auto a = Store(), b = Store();
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }));
  WaitForRecovery();
  auto probe = ba->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  // b learns of a rate limit from a call admitted earlier (T4).
  {
    auto late = scripts_.Trip(*raw_, kCircuit, seconds(60), seconds(60), "retry_after_hint");
    ASSERT_TRUE(late.has_value());
  }
  ASSERT_TRUE(PollUntil([&] { return ba->state() == State::kOpen; }));
  probe->Success(milliseconds(1));
  a->Flush();
  EXPECT_EQ(FleetState(), ReadResult::State::kOpen);
  EXPECT_GT(Pttl(*raw_, "fusebox:v1:{" + std::string(kCircuit) + "}:open"), 50'000);
}

TEST_F(RedisSharedStateTest, AnInstanceThatMissedAPushLearnsAfterItsSubscriberReconnects) {
  auto a = Store();
  auto ba = Breaker(a);
  Warm(*ba);
  const auto subscribes = a->stats().subscribes;
  // T6: the subscriber's connection dies just before a trip elsewhere.
  ASSERT_TRUE(server_->KillPubSubClients().has_value());
  ASSERT_TRUE(scripts_.Trip(*raw_, kCircuit, seconds(60), seconds(60), "elsewhere").has_value());
  ASSERT_TRUE(PollUntil([&] { return !ba->TryAcquire().has_value(); }));
  EXPECT_EQ(ba->state(), State::kOpen);
  EXPECT_GT(a->stats().subscribes, subscribes);
}

TEST_F(RedisSharedStateTest, AStoppedRedisCostsNoWaitingAndTheBreakersGoOnLocally) {
  auto a = Store(), b = Store();
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  ASSERT_TRUE(server_->Stop().ok());
  // T8: a's own rate limit still opens a, at once.
  {
    auto p = ba->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Record(Outcome::OpenFor(seconds(60)));
  }
  EXPECT_EQ(ba->state(), State::kOpen);
  EXPECT_EQ(bb->state(), State::kClosed);  // nobody to tell it
  // Stale breakers ask the store on every call while it is down; the store's
  // own breaker answers without I/O once it has seen failure_threshold
  // failures, so no call waits more than one connect timeout.
  auto fresh = Breaker(b);
  auto worst = std::chrono::steady_clock::duration::zero();
  for (int i = 0; i < 200; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto p = fresh->TryAcquire();
    worst = std::max(worst, std::chrono::steady_clock::now() - t0);
    ASSERT_TRUE(p.has_value());
    p->Success(milliseconds(1));
  }
  EXPECT_LT(worst, milliseconds(400));
  EXPECT_GE(b->stats().refused, 190);
  // No reconnect storm: a handful of connect attempts, not one per call.
  EXPECT_LE(b->stats().errors, 10);
  EXPECT_GE(b->stats().down_periods, 1);
  EXPECT_FALSE(b->healthy());
}

TEST_F(RedisSharedStateTest, APausedRedisCostsAtMostOneTimeoutPerCallThenNone) {
  auto a = Store();
  ASSERT_TRUE(server_->Pause(seconds(3)).ok());
  auto fresh = Breaker(a);  // stale, and the store cannot read it now
  auto worst = std::chrono::steady_clock::duration::zero();
  for (int i = 0; i < 50; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto p = fresh->TryAcquire();
    worst = std::max(worst, std::chrono::steady_clock::now() - t0);
    ASSERT_TRUE(p.has_value());  // fail-open
    p->Success(milliseconds(1));
  }
  EXPECT_LT(worst, milliseconds(500));  // one command timeout (200 ms) and change
  EXPECT_GE(a->stats().refused, 45);
}

// A request's deadline (SharedStateDeadline) bounds what a breaker spends on
// the fleet for it: with Redis stopped (SIGSTOP) and a store timeout of 3 s,
// the call that ends an OPEN asks for the probe lease for 150 ms, not 3 s,
// and then decides locally (fail-open: it probes).
TEST_F(RedisSharedStateTest, ARequestDeadlineBoundsTheProbeLeaseAsk) {
  SharedStateOptions o = Options();
  o.connection.command_timeout = seconds(3);
  auto a = Store(o);
  auto b = Breaker(a);
  Warm(*b);
  Trip(*b);
  WaitForRecovery();
  ASSERT_TRUE(server_->Suspend().ok());
  const auto t0 = std::chrono::steady_clock::now();
  Result<Permit> p = [&] {
    const SharedStateDeadline bound(SystemClock().Now() + milliseconds(150));
    return b->TryAcquire();
  }();
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(server_->Resume().ok());
  EXPECT_LT(took, seconds(2)) << "asked for the store's whole 3 s timeout";
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_EQ(b->state(), State::kHalfOpen);
  p->Success(milliseconds(1));
}

// A deadline already passed costs no I/O at all: the store answers
// "unavailable" without sending, and a Read() is an error, not a wait.
TEST_F(RedisSharedStateTest, APassedDeadlineSendsNothing) {
  auto a = Store();
  const std::int64_t before = a->stats().commands;
  const SharedStateDeadline bound(SystemClock().Now() - milliseconds(1));
  EXPECT_LE(SharedStateBudget(), Duration::zero());
  EXPECT_EQ(a->AcquireProbe(kCircuit, seconds(1)).verdict, ProbeLease::Verdict::kUnavailable);
  EXPECT_FALSE(a->Read(kCircuit).has_value());
  EXPECT_EQ(a->stats().commands, before);
}

// A new breaker's first read is made by the store's own thread; a call that
// finds it in flight waits for its answer, within the call's deadline: with
// Redis stopped and a 3 s store timeout, 150 ms.
TEST_F(RedisSharedStateTest, ARequestDeadlineBoundsTheWaitForAnotherThreadsRead) {
  SharedStateOptions o = Options();
  o.connection.command_timeout = seconds(3);
  auto a = Store(o);
  ASSERT_TRUE(server_->Suspend().ok());
  auto fresh = Breaker(a);  // its refresh is now stuck on the stopped Redis
  const auto t0 = std::chrono::steady_clock::now();
  Result<Permit> p = [&] {
    const SharedStateDeadline bound(SystemClock().Now() + milliseconds(150));
    return fresh->TryAcquire();
  }();
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(server_->Resume().ok());
  EXPECT_LT(took, seconds(2)) << "waited for the store's whole 3 s timeout";
  ASSERT_TRUE(p.has_value()) << p.error();  // decided on the local view
  p->Success(milliseconds(1));
}

TEST(SharedStateDeadlineTest, ScopesNestAndAnInnerOneOnlyShortens) {
  EXPECT_EQ(SharedStateBudget(), Duration::max());
  {
    const SharedStateDeadline outer(SystemClock().Now() + seconds(10));
    EXPECT_GT(SharedStateBudget(), seconds(9));
    {
      const SharedStateDeadline longer(SystemClock().Now() + seconds(100));
      EXPECT_LE(SharedStateBudget(), seconds(10));
      const SharedStateDeadline shorter(SystemClock().Now() + seconds(1));
      EXPECT_LE(SharedStateBudget(), seconds(1));
    }
    EXPECT_GT(SharedStateBudget(), seconds(9));
    // Another thread has its own: none.
    Duration other = Duration::zero();
    std::thread([&] { other = SharedStateBudget(); }).join();
    EXPECT_EQ(other, Duration::max());
  }
  EXPECT_EQ(SharedStateBudget(), Duration::max());
}

TEST_F(RedisSharedStateTest, AfterARestartALocalOpenIsReplayedButNeverShortensALongerOne) {
  auto a = Store();
  auto ba = Breaker(a);
  Warm(*ba);
  ASSERT_TRUE(server_->Stop().ok());
  {
    auto p = ba->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Record(Outcome::OpenFor(seconds(120)));  // only local: Redis is down
  }
  ASSERT_TRUE(server_->Restart().ok());
  auto conn = server_->Connect();
  ASSERT_TRUE(conn.has_value());
  raw_ = std::move(*conn);
  const std::string open_key = "fusebox:v1:{" + std::string(kCircuit) + "}:open";
  // T9: once a's subscriber is back, a replays what remains of its OPEN.
  ASSERT_TRUE(PollUntil([&] { return Pttl(*raw_, open_key) > 100'000; }, seconds(10)));
  EXPECT_LE(Pttl(*raw_, open_key), 120'000);
  // A longer OPEN set meanwhile is not shortened by another replay.
  ASSERT_TRUE(scripts_.Trip(*raw_, kCircuit, seconds(600), seconds(60), "longer").has_value());
  ASSERT_TRUE(server_->KillPubSubClients().has_value());  // forces a resync
  ASSERT_TRUE(PollUntil([&] { return a->stats().subscribes >= 3; }, seconds(10)));
  a->Flush();
  EXPECT_GT(Pttl(*raw_, open_key), 590'000);
}

// A trip or override that waited in the queue (behind a WAIT on a replica
// that is gone, a reconnect) keeps its end where the breaker put it: it is
// sent with what is left, or not at all once nothing is, so that a late
// replay cannot reopen a circuit whose probe already runs elsewhere.
TEST_F(RedisSharedStateTest, AnOpOutlivedByItsQueueWaitIsSentWithWhatIsLeftOrNotAtAll) {
  fusebox::testing::ManualClock store_clock;
  SharedStateOptions o = Options();
  o.clock = &store_clock;
  o.min_grace = Duration::zero();
  auto a = Store(std::move(o));
  ASSERT_NE(a, nullptr);
  const std::string lapsed = std::string(kCircuit) + ":lapsed";
  const std::string kept = std::string(kCircuit) + ":kept";
  const std::string forced = std::string(kCircuit) + ":forced";
  const std::string forced_lapsed = std::string(kCircuit) + ":forced-lapsed";
  auto held = std::make_shared<testing::HeldWorker>();
  const SharedState::SubscriptionId id = a->Subscribe("other", held);
  held->AwaitHeld();
  a->Trip(lapsed, seconds(2), "queued");
  a->Trip(kept, seconds(60), "queued");
  a->PublishOverride(forced, {SharedOverride::Kind::kForcedOpen, seconds(60), "r", "ops"});
  a->PublishOverride(forced_lapsed, {SharedOverride::Kind::kForcedOpen, seconds(2), "r", "ops"});
  store_clock.Advance(seconds(20));  // the time they spent queued
  held->Release();
  a->Flush();
  a->Unsubscribe(id);
  const auto keys = [&](const std::string& c) { return scripts_.keyspace().Keys(c); };
  EXPECT_EQ(Pttl(*raw_, keys(lapsed).open), -2) << "an OPEN over before it was sent";
  EXPECT_EQ(Pttl(*raw_, keys(forced_lapsed).overrides), -2)
      << "an override over before it was sent";
  // What was left: 40 s of each, not the 60 s they were queued with.
  EXPECT_GT(Pttl(*raw_, keys(kept).open), 39'000);
  EXPECT_LE(Pttl(*raw_, keys(kept).open), 40'000);
  EXPECT_GT(Pttl(*raw_, keys(forced).overrides), 39'000);
  EXPECT_LE(Pttl(*raw_, keys(forced).overrides), 40'000);
  EXPECT_EQ(a->stats().expired_in_queue, 2);
  EXPECT_EQ(a->health().expired_in_queue, 2);
  EXPECT_EQ(a->stats().dropped, 0);
}

// With wait_replicas, the trips and overrides sent while the queue was
// full share one WAIT (here it falls short: the server has no replica), so
// that a burst does not hold the queue one wait_timeout per op.
TEST_F(RedisSharedStateTest, ABurstOfTripsSharesOneWait) {
  SharedStateOptions o = Options();
  o.connection.wait_replicas = 1;
  o.connection.wait_timeout = milliseconds(100);
  o.connection.warn = [](std::string_view, std::string_view) {};
  auto a = Store(std::move(o));
  ASSERT_NE(a, nullptr);
  auto held = std::make_shared<testing::HeldWorker>();
  const SharedState::SubscriptionId id = a->Subscribe("other", held);
  held->AwaitHeld();
  for (int i = 0; i < 5; ++i)
    a->Trip(std::string(kCircuit) + ":" + std::to_string(i), seconds(60), "burst");
  a->PublishOverride(kCircuit, {SharedOverride::Kind::kForcedOpen, seconds(60), "r", "ops"});
  held->Release();
  a->Flush();
  a->Unsubscribe(id);
  auto calls = server_->CommandCalls();
  ASSERT_TRUE(calls.has_value()) << calls.error();
  EXPECT_EQ((*calls)["wait"], 1);
  EXPECT_EQ(a->stats().replica_ack_shortfalls, 6) << "each op counted";
  EXPECT_EQ(a->stats().replica_acks, 0);
  // A trip on its own, once the queue is empty, has its own WAIT.
  a->Trip(kCircuit, seconds(60), "alone");
  a->Flush();
  calls = server_->CommandCalls();
  ASSERT_TRUE(calls.has_value()) << calls.error();
  EXPECT_EQ((*calls)["wait"], 2);
  EXPECT_EQ(a->stats().replica_ack_shortfalls, 7);
}

// The server dropped the store's idle worker connection (its `timeout`,
// CLIENT KILL, a restart): the next op fails on it without an answer and is
// sent again on a new connection rather than dropped. A command that timed
// out is not sent again (the server may still run it).
TEST_F(RedisSharedStateTest, AnOpOnAConnectionTheServerDroppedIsSentOnANewOne) {
  auto a = Store();
  ASSERT_NE(a, nullptr);
  const std::string first = std::string(kCircuit) + ":first";
  a->Trip(first, seconds(60), "warm");  // the worker connects
  a->Flush();
  const auto keys = [&](const std::string& c) { return scripts_.keyspace().Keys(c); };
  ASSERT_GT(Pttl(*raw_, keys(first).open), 0);
  Result<std::int64_t> killed = server_->KillNormalClients();
  ASSERT_TRUE(killed.has_value()) << killed.error();
  ASSERT_GE(*killed, 2) << "the worker's and the test's own connection";
  auto conn = server_->Connect();
  ASSERT_TRUE(conn.has_value()) << conn.error();
  raw_ = std::move(*conn);

  a->Trip(kCircuit, seconds(60), "after the kill");
  a->PublishOverride(first, {SharedOverride::Kind::kForcedOpen, seconds(60), "r", "ops"});
  a->Flush();
  EXPECT_GT(Pttl(*raw_, keys(std::string(kCircuit)).open), 0)
      << "the trip was lost with the connection";
  EXPECT_GT(Pttl(*raw_, keys(first).overrides), 0);
  EXPECT_EQ(a->stats().resent, 1) << "only the first op met the dropped connection";
  EXPECT_EQ(a->stats().dropped, 0);
  EXPECT_EQ(a->health().resent, 1) << "what the gateway's metrics read";

  // A stopped (not closed) server: the trip times out and is not resent.
  ASSERT_TRUE(server_->Suspend().ok());
  a->Trip(std::string(kCircuit) + ":slow", seconds(60), "suspended");
  a->Flush();
  ASSERT_TRUE(server_->Resume().ok());
  EXPECT_EQ(a->stats().resent, 1);
  EXPECT_EQ(a->stats().dropped, 1);
}

TEST_F(RedisSharedStateTest, AScriptCacheFlushCostsOneEvalAndNothingFails) {
  auto a = Store(), b = Store();
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  ASSERT_TRUE(server_->ScriptFlush().ok());  // T10
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }));
  EXPECT_EQ(a->stats().errors, 0);
}

TEST_F(RedisSharedStateTest, InstancesWithClocksHoursApartMakeTheSameDecisions) {
  // T11: b's clock is an hour ahead of a's; only durations cross Redis.
  fusebox::testing::ManualClock ahead(fusebox::testing::ManualClock::Options{
      .start = fusebox::testing::ManualClock::kEpoch + std::chrono::hours(1)});
  auto a = Store(), b = Store();
  auto ba = Breaker(a, clock_), bb = Breaker(b, ahead);
  Warm(*ba);
  Warm(*bb);
  Trip(*ba);
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kOpen; }));
  auto ra = ba->TryAcquire(), rb = bb->TryAcquire();
  ASSERT_FALSE(ra.has_value());
  ASSERT_FALSE(rb.has_value());
  const Duration left_a = *ra.error().retry_at() - clock_.Now();
  const Duration left_b = *rb.error().retry_at() - ahead.Now();
  EXPECT_LE(left_b, left_a);
  EXPECT_GT(left_b, left_a - milliseconds(100));
}

TEST_F(RedisSharedStateTest, AnUnprobedRecoveryExpiresAndTheNextCallPasses) {
  SharedStateOptions o = Options();
  o.min_grace = milliseconds(200);
  auto a = Store(o);
  auto ba = Breaker(a);
  Warm(*ba);
  Trip(*ba);
  a->Flush();
  // T12: OPEN 300 ms, then max(300 ms, 200 ms) of grace with no probe.
  ASSERT_TRUE(PollUntil([&] { return FleetState() == ReadResult::State::kClosed; }));
  clock_.Advance(kOpen + milliseconds(1));
  auto p = ba->TryAcquire();
  ASSERT_TRUE(p.has_value());
  p->Success(milliseconds(1));
  EXPECT_EQ(ba->state(), State::kClosed);
}

TEST_F(RedisSharedStateTest, BadOptionsAreRefusedByName) {
  SharedStateOptions o = Options();
  o.heartbeat = Duration::zero();
  auto s = RedisSharedState::Create(o);
  ASSERT_FALSE(s.has_value());
  EXPECT_THAT(std::string(s.error().message()), ::testing::HasSubstr("heartbeat"));
  o = Options();
  o.prefix = "a{b";
  EXPECT_FALSE(RedisSharedState::Create(o).has_value());
}

// Separate processes: each child (tests/redis/probe_child.cc) is an instance
// with its own store and breaker that calls twice and says whether it got the
// probe. Exactly one of them may.
TEST_F(RedisSharedStateTest, SeparateProcessesShareOneProbe) {
  ASSERT_TRUE(scripts_.Trip(*raw_, kCircuit, milliseconds(200), seconds(30), "test").has_value());
  ASSERT_TRUE(PollUntil([&] { return FleetState() == ReadResult::State::kHalfOpen; }));
  constexpr int kChildren = 4;
  std::vector<pid_t> pids;
  std::vector<int> fds;
  const std::string port = std::to_string(server_->port());
  for (int i = 0; i < kChildren; ++i) {
    int pipefd[2];
    ASSERT_EQ(pipe(pipefd), 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, pipefd[0]);
    std::string exe = FUSEBOX_REDIS_PROBE_CHILD;
    std::string circuit(kCircuit);
    char* argv[] = {exe.data(), const_cast<char*>(port.c_str()), circuit.data(), nullptr};
    pid_t pid;
    ASSERT_EQ(posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    close(pipefd[1]);
    pids.push_back(pid);
    fds.push_back(pipefd[0]);
  }
  int probes = 0, busy = 0;
  for (int i = 0; i < kChildren; ++i) {
    std::string out;
    char buf[64];
    ssize_t n;
    while ((n = read(fds[i], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    close(fds[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
    if (out.find("probe") != std::string::npos) ++probes;
    if (out.find("rejected") != std::string::npos) ++busy;
  }
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(busy, kChildren - 1);
}

}  // namespace
}  // namespace fusebox::redis

namespace fusebox::redis {
namespace {

// Operator overrides through Redis: what an operator does on one instance
// (or through one gateway) every instance does.
TEST_F(RedisSharedStateTest, AnOverrideReachesEveryInstanceAndANewOneFindsIt) {
  auto a = Store(), b = Store();
  auto ba = Breaker(a), bb = Breaker(b);
  Warm(*ba);
  Warm(*bb);
  ba->ForceOpen({.reason = "incident 42", .actor = "kim", .expires_after = seconds(600)});
  ASSERT_TRUE(PollUntil([&] { return bb->state() == State::kForcedOpen; }));
  auto info = bb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason, "incident 42");
  EXPECT_EQ(info->actor, "kim");
  ASSERT_TRUE(info->expires_at.has_value());
  EXPECT_GT(*info->expires_at, clock_.Now() + seconds(590));
  // A breaker created later (another instance starting) reads it.
  auto c = Store();
  auto bc = Breaker(c);
  EXPECT_FALSE(bc->TryAcquire().has_value());
  EXPECT_EQ(bc->state(), State::kForcedOpen);
  // Lifted on b, lifted everywhere.
  bb->Reset("resolved", "kim");
  ASSERT_TRUE(
      PollUntil([&] { return ba->state() == State::kClosed && bc->state() == State::kClosed; }));
  b->Flush();
  EXPECT_EQ(Pttl(*raw_, "fusebox:v1:{" + std::string(kCircuit) + "}:override"), -2);
}

// docs/distributed.md: the defaults an operator relies on, and that they reach
// the store's own breaker: 3 failed commands in a row stop all traffic for 5 s;
// PING after 1 s of silence; connect 500 ms, command 250 ms; a probe lease of
// 30 s.
TEST_F(RedisSharedStateTest, TheDocumentedDefaultsReachTheStoresBreaker) {
  const SharedStateOptions defaults;
  EXPECT_EQ(defaults.failure_threshold, 3);
  EXPECT_EQ(defaults.down_for, seconds(5));
  EXPECT_EQ(defaults.heartbeat, seconds(1));
  EXPECT_EQ(ConnectionOptions{}.connect_timeout, milliseconds(500));
  EXPECT_EQ(ConnectionOptions{}.command_timeout, milliseconds(250));
  EXPECT_EQ(CircuitBreakerConfig{}.shared_probe_lease, seconds(30));
  SharedStateOptions o;
  o.connection.port = server_->port();
  auto store = Store(o);
  ASSERT_NE(store, nullptr);
  const CircuitBreakerConfig& c = store->store_breaker().config();
  EXPECT_EQ(c.consecutive_failure_threshold, 3);
  EXPECT_EQ(c.wait_duration_in_open_state, seconds(5));
}

// docs/distributed.md: ListFleet answers at most `max` circuits and never more
// than kMaxFleetCircuits (1,000), saying `truncated` when a bound came first;
// each circuit is read (OPEN, with its time left).
TEST_F(RedisSharedStateTest, ListFleetIsBoundedByItsCapsAndSaysSo) {
  auto store = Store();
  ASSERT_NE(store, nullptr);
  for (std::string_view c : {"a:1", "b:2", "c:3"}) {
    ASSERT_TRUE(scripts_.Trip(*raw_, c, seconds(60), seconds(60), "test").has_value());
  }
  Result<FleetListing> all = store->ListFleet(10, seconds(30));
  ASSERT_TRUE(all.has_value()) << all.error();
  EXPECT_FALSE(all->truncated);
  ASSERT_EQ(all->circuits.size(), 3u);
  for (const FleetCircuit& c : all->circuits) {
    EXPECT_EQ(c.view.state, ReadResult::State::kOpen) << c.circuit;
    EXPECT_GT(c.view.remaining, seconds(30)) << c.circuit;
  }
  Result<FleetListing> two = store->ListFleet(2, seconds(30));
  ASSERT_TRUE(two.has_value()) << two.error();
  EXPECT_TRUE(two->truncated);
  EXPECT_EQ(two->circuits.size(), 2u);
  // 1,001 more circuits: 1,000 whatever `max` asks for.
  const std::string_view bulk[] = {"EVAL",
                                   "for i = 1, 1001 do "
                                   "  local k = 'fusebox:v1:{bulk:' .. i .. '}' "
                                   "  redis.call('SET', k .. ':open', '1', 'PX', 60000) "
                                   "  redis.call('HSET', k .. ':trip', 'gen', '1') "
                                   "  redis.call('PEXPIRE', k .. ':trip', 120000) "
                                   "end return 1",
                                   "0"};
  Result<Reply> made = raw_->Command(bulk);
  ASSERT_TRUE(made.has_value()) << made.error();
  ASSERT_FALSE(made->is_error()) << made->str;
  Result<FleetListing> capped = store->ListFleet(5000, seconds(60));
  ASSERT_TRUE(capped.has_value()) << capped.error();
  EXPECT_TRUE(capped->truncated);
  EXPECT_EQ(capped->circuits.size(), RedisSharedState::kMaxFleetCircuits);
  EXPECT_EQ(capped->circuits.size(), 1000u);
}

}  // namespace
}  // namespace fusebox::redis
