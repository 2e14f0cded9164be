// A breaker with a SharedState: several breakers of one name on one
// InProcessSharedState behave as instances of a fleet (seed 000). The Redis
// store runs the same rules; tests/redis checks it against a real server.
#include "fusebox/shared_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/audit_log.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/testing/in_process_shared_state.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::InProcessSharedState;
using testing::ManualClock;

constexpr std::string_view kCircuit = "meta:read:17841400000000000:quota";

class Recorder : public CircuitBreakerListener {
 public:
  void OnTransition(const TransitionEvent& e) override {
    transitions.push_back({e.from, e.to, e.reason});
  }
  struct T {
    State from, to;
    TransitionReason reason;
  };
  std::vector<T> transitions;
};

class SharedStateTest : public ::testing::Test {
 protected:
  SharedStateTest() : fleet_(std::make_shared<InProcessSharedState>(clock_)) {}

  CircuitBreakerConfig Config() {
    CircuitBreakerConfig c;
    c.failure_rate_threshold = 50;
    c.sliding_window_size = 4;
    c.minimum_number_of_calls = 4;
    c.permitted_number_of_calls_in_half_open_state = 1;
    c.wait_duration_in_open_state = seconds(30);
    c.shared_state = fleet_;
    c.shared_probe_lease = seconds(10);
    return c;
  }

  std::unique_ptr<CircuitBreaker> Instance(CircuitBreakerConfig c) {
    return *CircuitBreaker::Create(std::string(kCircuit), std::move(c), clock_);
  }
  std::unique_ptr<CircuitBreaker> Instance() { return Instance(Config()); }

  // Fails calls until `b` opens (at most a window's worth).
  static void Trip(CircuitBreaker& b) {
    for (int i = 0; i < 4 && b.state() == State::kClosed; ++i) {
      auto p = b.TryAcquire();
      ASSERT_TRUE(p.has_value());
      p->Failure(milliseconds(1));
    }
    ASSERT_EQ(b.state(), State::kOpen);
  }

  // One instance tripped the circuit; `late`, made after it, missed the push
  // and has not read the fleet's view yet (its TryAcquire() would).
  struct LateInstance {
    std::unique_ptr<CircuitBreaker> tripper;
    std::unique_ptr<CircuitBreaker> late;
    InProcessSharedState::Counters before;  // the store's counters once both exist
  };
  LateInstance TrippedThenLate() {
    LateInstance f{Instance(), nullptr, {}};
    Trip(*f.tripper);
    f.late = Instance();
    f.before = fleet_->counters();
    return f;
  }

  ManualClock clock_;
  std::shared_ptr<InProcessSharedState> fleet_;
};

TEST_F(SharedStateTest, ALocalTripOpensEveryInstanceWithoutACallToThem) {
  auto a = Instance();
  auto b = Instance();
  auto recorder = std::make_shared<Recorder>();
  b->AddListener(recorder);
  Trip(*a);
  EXPECT_EQ(b->state(), State::kOpen);
  ASSERT_EQ(recorder->transitions.size(), 1u);
  EXPECT_EQ(recorder->transitions[0].reason, TransitionReason::kSharedOpen);
  EXPECT_EQ(TransitionReasonName(TransitionReason::kSharedOpen), "shared_open");
  auto rejected = b->TryAcquire();
  ASSERT_FALSE(rejected.has_value());
  EXPECT_EQ(rejected.error().code(), StatusCode::kCircuitOpen);
  ASSERT_TRUE(rejected.error().retry_at().has_value());
  EXPECT_EQ(*rejected.error().retry_at(), clock_.Now() + seconds(30));
  EXPECT_EQ(fleet_->trip_reason(kCircuit), "failure_rate_exceeded");
  EXPECT_EQ(fleet_->counters().trips, 1);
}

TEST_F(SharedStateTest, ExactlyOneProbeInTheFleetThenItsSuccessClosesEveryone) {
  std::vector<std::unique_ptr<CircuitBreaker>> fleet;
  for (int i = 0; i < 5; ++i) fleet.push_back(Instance());
  Trip(*fleet[0]);
  // One nanosecond before the end of the wait, everyone is still OPEN.
  clock_.Advance(seconds(30) - std::chrono::nanoseconds(1));
  for (auto& b : fleet) EXPECT_FALSE(b->TryAcquire().has_value());
  clock_.Advance(std::chrono::nanoseconds(2));
  int probes = 0;
  std::optional<Permit> probe;
  for (int round = 0; round < 3; ++round) {
    for (auto& b : fleet) {
      auto p = b->TryAcquire();
      if (p.has_value()) {
        ++probes;
        probe.emplace(std::move(*p));
      } else {
        EXPECT_EQ(p.error().code(), StatusCode::kCircuitOpen);
      }
    }
  }
  EXPECT_EQ(probes, 1);
  EXPECT_EQ(fleet_->counters().probes_granted, 1);
  probe->Success(milliseconds(5));
  for (auto& b : fleet) EXPECT_EQ(b->state(), State::kClosed);
  EXPECT_EQ(fleet_->counters().closes, 1);
  auto view = fleet_->Read(kCircuit);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->kind, SharedCircuitView::Kind::kClosed);
}

TEST_F(SharedStateTest, AFailedProbeReopensTheFleetForANewWait) {
  auto a = Instance();
  auto b = Instance();
  Trip(*a);
  clock_.Advance(seconds(31));
  auto probe = b->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(b->state(), State::kHalfOpen);
  EXPECT_FALSE(a->TryAcquire().has_value());  // busy: b probes
  probe->Failure(milliseconds(1));
  EXPECT_EQ(b->state(), State::kOpen);
  EXPECT_EQ(a->state(), State::kOpen);
  auto r = a->TryAcquire();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(*r.error().retry_at(), clock_.Now() + seconds(30));
  EXPECT_EQ(fleet_->trip_reason(kCircuit), "probes_failed");
}

TEST_F(SharedStateTest, ALongerHintIsKeptWhenAShorterTripFollows) {
  auto a = Instance();
  auto b = Instance();
  {
    auto p = a->TryAcquire();
    p->Record(Outcome::OpenFor(seconds(120)));
  }
  EXPECT_EQ(b->state(), State::kOpen);
  // b's own (shorter) trip cannot shorten the fleet's OPEN.
  fleet_->Trip(kCircuit, seconds(10), "failure_rate_exceeded");
  EXPECT_EQ(fleet_->counters().trips_kept, 1);
  auto view = fleet_->Read(kCircuit);
  EXPECT_EQ(view->kind, SharedCircuitView::Kind::kOpen);
  EXPECT_EQ(view->open_remaining, seconds(120));
  clock_.Advance(seconds(60));
  EXPECT_FALSE(b->TryAcquire().has_value());
  EXPECT_FALSE(a->TryAcquire().has_value());
}

TEST_F(SharedStateTest, AnOpenHintExtendsTheFleetsOpen) {
  auto a = Instance();
  auto b = Instance();
  Trip(*a);
  clock_.Advance(seconds(10));
  {
    // A late call of b (admitted before the trip) brings a Retry-After.
    fleet_->Trip(kCircuit, seconds(90), "retry_after_hint");
  }
  auto r = a->TryAcquire();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(*r.error().retry_at(), clock_.Now() + seconds(90));
}

TEST_F(SharedStateTest, ACrashedLeaseHolderBlocksProbesOnlyUntilItsLeaseEnds) {
  auto a = Instance();
  auto b = Instance();
  Trip(*a);
  clock_.Advance(seconds(31));
  // An instance that takes the lease and dies without a word.
  ProbeLease crashed = fleet_->AcquireProbe(kCircuit, seconds(10));
  ASSERT_EQ(crashed.verdict, ProbeLease::Verdict::kProbe);
  EXPECT_FALSE(a->TryAcquire().has_value());
  EXPECT_FALSE(b->TryAcquire().has_value());
  clock_.Advance(seconds(10));
  std::vector<Permit> probes;
  for (auto* x : {a.get(), b.get(), a.get(), b.get()}) {
    auto p = x->TryAcquire();
    if (p.has_value()) probes.push_back(std::move(*p));
  }
  ASSERT_EQ(probes.size(), 1u);
  probes[0].Success(milliseconds(1));
  EXPECT_EQ(a->state(), State::kClosed);
  EXPECT_EQ(b->state(), State::kClosed);
}

TEST_F(SharedStateTest, ATripDuringAProbeFencesIt) {
  auto a = Instance();
  auto b = Instance();
  Trip(*a);
  clock_.Advance(seconds(31));
  auto probe = a->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  // Meanwhile b learns of a rate limit from a call admitted earlier.
  fleet_->Trip(kCircuit, seconds(60), "retry_after_hint");
  EXPECT_EQ(a->state(), State::kOpen);
  probe->Success(milliseconds(1));  // Too late: recorded into the new OPEN.
  EXPECT_EQ(a->state(), State::kOpen);
  EXPECT_EQ(b->state(), State::kOpen);
  EXPECT_EQ(fleet_->Read(kCircuit)->kind, SharedCircuitView::Kind::kOpen);
  EXPECT_EQ(fleet_->counters().closes, 0);
}

TEST_F(SharedStateTest, ADestroyedHolderGivesItsLeaseBack) {
  auto a = Instance();
  auto b = Instance();
  Trip(*a);
  clock_.Advance(seconds(31));
  {
    auto probe = a->TryAcquire();
    ASSERT_TRUE(probe.has_value());
    probe->Ignore();
  }
  a.reset();  // Evicted, or its instance shuts down, in HALF_OPEN.
  EXPECT_EQ(fleet_->counters().releases, 1);
  clock_.Advance(seconds(2));  // b's recheck after "busy"
  auto p = b->TryAcquire();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(b->state(), State::kHalfOpen);
}

TEST_F(SharedStateTest, ANewInstanceLearnsOfAnOpenOnItsFirstCallWithOneRead) {
  auto a = Instance();
  Trip(*a);
  const auto reads_before = fleet_->counters().reads;
  auto late = Instance();  // Created after the trip: missed the push.
  EXPECT_EQ(late->state(), State::kClosed);
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(late->TryAcquire().has_value());
  EXPECT_EQ(late->state(), State::kOpen);
  EXPECT_EQ(fleet_->counters().reads - reads_before, 1);
}

TEST_F(SharedStateTest, TryRejectNeverAsksTheStore) {
  auto [a, late, before] = TrippedThenLate();
  EXPECT_EQ(late->TryReject(), std::nullopt);
  EXPECT_EQ(fleet_->counters().reads, before.reads);
  // Once read, it refuses by itself for the rest of the wait.
  EXPECT_FALSE(late->TryAcquire().has_value());
  ASSERT_TRUE(a->TryReject().has_value());
  ASSERT_TRUE(late->TryReject().has_value());
  // The wait is over: ending OPEN takes the fleet's lease, so not here.
  clock_.Advance(seconds(30) + std::chrono::nanoseconds(1));
  EXPECT_EQ(a->TryReject(), std::nullopt);
  EXPECT_EQ(late->TryReject(), std::nullopt);
  EXPECT_EQ(fleet_->counters().reads, before.reads + 1);
  EXPECT_EQ(fleet_->counters().probes_granted, before.probes_granted);
  EXPECT_EQ(a->state(), State::kOpen);
}

// The event loop's admission: every decision TryAcquire() makes from memory,
// and nullopt, with nothing changed or counted, where TryAcquire() would ask
// the store; the caller then asks on a thread that may block.
TEST_F(SharedStateTest, TryAcquireWithoutBlockingLeavesEveryStoreCallToTryAcquire) {
  auto [a, late, before] = TrippedThenLate();
  EXPECT_EQ(late->TryAcquireWithoutBlocking(), std::nullopt);
  EXPECT_EQ(fleet_->counters().reads, before.reads);
  EXPECT_EQ(late->state(), State::kClosed);
  EXPECT_EQ(late->metrics().not_permitted_calls, 0);

  // Read once (the blocking call): from then on it decides by itself.
  EXPECT_FALSE(late->TryAcquire().has_value());
  const std::optional<Result<Permit>> rejected = late->TryAcquireWithoutBlocking();
  ASSERT_TRUE(rejected.has_value());
  ASSERT_FALSE(rejected->has_value());
  EXPECT_EQ(rejected->error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(rejected->error().retry_at(), clock_.Now() + seconds(30));
  EXPECT_EQ(late->metrics().not_permitted_calls, 2);
  EXPECT_EQ(fleet_->counters().reads, before.reads + 1);

  // The wait is over: the call that ends OPEN asks for the fleet's lease.
  clock_.Advance(seconds(30) + std::chrono::nanoseconds(1));
  EXPECT_EQ(a->TryAcquireWithoutBlocking(), std::nullopt);
  EXPECT_EQ(a->state(), State::kOpen);
  EXPECT_EQ(fleet_->counters().probes_granted, before.probes_granted);
  Result<Permit> probe = a->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  EXPECT_EQ(fleet_->counters().probes_granted, before.probes_granted + 1);
  // HALF_OPEN with its one probe out: decided from memory again.
  const std::optional<Result<Permit>> full = a->TryAcquireWithoutBlocking();
  ASSERT_TRUE(full.has_value());
  EXPECT_FALSE(full->has_value());
  probe->Success(milliseconds(1));
  EXPECT_EQ(a->state(), State::kClosed);
  const std::optional<Result<Permit>> closed = a->TryAcquireWithoutBlocking();
  ASSERT_TRUE(closed.has_value());
  EXPECT_TRUE(closed->has_value());
}

TEST(CircuitBreakerWithoutSharedState, TryAcquireWithoutBlockingIsTryAcquire) {
  ManualClock clock;
  CircuitBreakerConfig c;
  c.sliding_window_size = 2;
  c.minimum_number_of_calls = 2;
  c.permitted_number_of_calls_in_half_open_state = 1;
  c.wait_duration_in_open_state = seconds(5);
  auto cb = *CircuitBreaker::Create("local", c, clock);
  for (int i = 0; i < 2; ++i) {
    std::optional<Result<Permit>> p = cb->TryAcquireWithoutBlocking();
    ASSERT_TRUE(p.has_value() && p->has_value());
    (*p)->Failure(milliseconds(1));
  }
  ASSERT_EQ(cb->state(), State::kOpen);
  std::optional<Result<Permit>> open = cb->TryAcquireWithoutBlocking();
  ASSERT_TRUE(open.has_value());
  EXPECT_EQ(open->error().reason(), "open");
  clock.Advance(seconds(5) + std::chrono::nanoseconds(1));
  // Without a store, the call that ends OPEN is decided here: the probe.
  std::optional<Result<Permit>> probe = cb->TryAcquireWithoutBlocking();
  ASSERT_TRUE(probe.has_value());
  ASSERT_TRUE(probe->has_value());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
}

TEST_F(SharedStateTest, AClosedCircuitCostsOneReadThenNone) {
  auto a = Instance();
  for (int i = 0; i < 1000; ++i) {
    auto p = a->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Success(milliseconds(1));
  }
  EXPECT_EQ(fleet_->counters().reads, 1);
  EXPECT_EQ(fleet_->counters().trips, 0);
}

TEST_F(SharedStateTest, ANewInstanceDuringRecoveryCompetesForTheSingleProbe) {
  auto a = Instance();
  Trip(*a);
  clock_.Advance(seconds(31));
  auto probe = a->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  auto late = Instance();
  EXPECT_FALSE(late->TryAcquire().has_value());  // reads "recovering", then busy
  EXPECT_EQ(late->state(), State::kOpen);
  probe->Success(milliseconds(1));
  EXPECT_EQ(late->state(), State::kClosed);
}

TEST_F(SharedStateTest, AnUnprobedRecoveryExpiresAfterItsGrace) {
  auto a = Instance();
  Trip(*a);
  // OPEN 30 s, then the marker lives max(30 s, 60 s) more.
  clock_.Advance(seconds(30 + 60) - milliseconds(1));
  EXPECT_EQ(fleet_->Read(kCircuit)->kind, SharedCircuitView::Kind::kRecovering);
  clock_.Advance(milliseconds(1));
  EXPECT_EQ(fleet_->Read(kCircuit)->kind, SharedCircuitView::Kind::kClosed);
  // a is still OPEN locally; nothing to recover in the fleet, so it probes
  // as a local breaker would.
  auto p = a->TryAcquire();
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(a->state(), State::kHalfOpen);
  p->Success(milliseconds(1));
  EXPECT_EQ(a->state(), State::kClosed);
}

TEST_F(SharedStateTest, AnUnavailableStoreLeavesEveryInstanceALocalBreaker) {
  auto a = Instance();
  auto b = Instance();
  fleet_->SetAvailable(false);
  Trip(*a);  // Still opens locally.
  EXPECT_EQ(b->state(), State::kClosed);
  auto pb = b->TryAcquire();  // b never heard of it: it decides alone.
  ASSERT_TRUE(pb.has_value());
  pb->Success(milliseconds(1));
  clock_.Advance(seconds(31));
  // Each instance probes on its own (fail-open): the lease cannot be asked.
  auto pa = a->TryAcquire();
  ASSERT_TRUE(pa.has_value());
  EXPECT_EQ(a->state(), State::kHalfOpen);
  pa->Success(milliseconds(1));
  EXPECT_EQ(a->state(), State::kClosed);
  EXPECT_GT(fleet_->counters().unavailable, 0);
}

TEST_F(SharedStateTest, AReadThatFailedIsAskedAgainOnTheNextCall) {
  auto a = Instance();
  Trip(*a);
  fleet_->SetAvailable(false);
  auto late = Instance();
  {
    auto p = late->TryAcquire();  // The store cannot say: decided locally.
    ASSERT_TRUE(p.has_value());
    p->Success(milliseconds(1));
  }
  fleet_->SetAvailable(true);
  EXPECT_FALSE(late->TryAcquire().has_value());
  EXPECT_EQ(late->state(), State::kOpen);
}

TEST_F(SharedStateTest, AfterAReconnectALocalOpenIsReplayedAndOthersReRead) {
  auto a = Instance();
  auto b = Instance();
  fleet_->SetAvailable(false);
  Trip(*a);  // The fleet never heard of it.
  clock_.Advance(seconds(5));
  fleet_->SetAvailable(true);
  EXPECT_EQ(b->state(), State::kClosed);
  fleet_->Resync();
  // a replayed its OPEN with what remained of it; b was told and follows.
  auto view = fleet_->Read(kCircuit);
  ASSERT_EQ(view->kind, SharedCircuitView::Kind::kOpen);
  EXPECT_EQ(view->open_remaining, seconds(25));
  EXPECT_EQ(b->state(), State::kOpen);
  EXPECT_EQ(fleet_->trip_reason(kCircuit), "replay");
}

// An instance that waits for another's probe holds an OPEN only in the
// sense that it asks again later: a reconnect meanwhile must not replay that
// wait as a trip, which would fence the probe and keep the fleet OPEN.
TEST_F(SharedStateTest, AResyncWhileAnotherInstanceProbesLeavesTheProbeAlone) {
  auto a = Instance();
  auto b = Instance();
  Trip(*a);
  clock_.Advance(seconds(30) + std::chrono::nanoseconds(1));
  auto probe = a->TryAcquire();
  ASSERT_TRUE(probe.has_value());
  EXPECT_FALSE(b->TryAcquire().has_value()) << "a probes: b waits";
  fleet_->Resync();
  probe->Success(milliseconds(5));
  EXPECT_EQ(b->state(), State::kClosed);
  EXPECT_EQ(fleet_->counters().closes, 1);
  EXPECT_EQ(fleet_->counters().closes_lost, 0);
  // The wait ended with it: an OPEN of b's own the fleet missed is replayed.
  fleet_->SetAvailable(false);
  Trip(*b);
  fleet_->SetAvailable(true);
  fleet_->Resync();
  auto view = fleet_->Read(kCircuit);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->kind, SharedCircuitView::Kind::kOpen);
  EXPECT_EQ(fleet_->trip_reason(kCircuit), "replay");
}

TEST_F(SharedStateTest, AnInstanceThatMissedATripLearnsItAfterTheReconnect) {
  auto a = Instance();
  auto b = Instance();
  {
    auto p = b->TryAcquire();  // b's first call: one read, CLOSED.
    p->Success(milliseconds(1));
  }
  fleet_->SetPushes(false);  // b's subscription is down...
  Trip(*a);                  // ...when a trips.
  EXPECT_EQ(b->state(), State::kClosed);
  fleet_->SetPushes(true);
  const auto reads = fleet_->counters().reads;
  fleet_->Resync();  // The store reconnected: anything may have been missed.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(b->TryAcquire().has_value());
  EXPECT_EQ(b->state(), State::kOpen);
  EXPECT_EQ(fleet_->counters().reads - reads, 1);
}

TEST_F(SharedStateTest, AnOperatorOverrideIsNotOverruledByTheFleet) {
  auto a = Instance();
  auto b = Instance();
  b->ForceClosed({.reason = "incident 42", .actor = "oncall"});
  EXPECT_EQ(a->state(), State::kForcedClosed);              // the override is the fleet's
  fleet_->Trip(kCircuit, seconds(30), "retry_after_hint");  // a trip elsewhere
  EXPECT_EQ(a->state(), State::kForcedClosed);
  EXPECT_EQ(b->state(), State::kForcedClosed);
  EXPECT_TRUE(b->TryAcquire().has_value());
}

TEST_F(SharedStateTest, ARegistryTemplateSharesEveryBreakerItCreates) {
  RegistryOptions options;
  options.clock = &clock_;
  options.default_config = Config();
  auto instance1 = *Registry::Create(options);
  auto instance2 = *Registry::Create(options);
  auto a = *instance1->Get(kCircuit);
  auto b = *instance2->Get(kCircuit);
  auto other = *instance2->Get("meta:read:999:quota");
  {
    auto p = a->TryAcquire();
    p->Record(Outcome::OpenFor(seconds(45)));
  }
  EXPECT_EQ(b->state(), State::kOpen);
  EXPECT_EQ(other->state(), State::kClosed);
}

// Many threads, several instances: at no time do two probes run, and every
// recovery ends with the whole fleet CLOSED. Run under TSan in CI.
TEST_F(SharedStateTest, ConcurrentInstancesNeverProbeTwiceAtOnce) {
  std::vector<std::unique_ptr<CircuitBreaker>> fleet;
  for (int i = 0; i < 4; ++i) fleet.push_back(Instance());
  std::atomic<int> probing{0};
  std::atomic<int> max_probing{0};
  std::atomic<int> recoveries{0};
  for (int cycle = 0; cycle < 20; ++cycle) {
    Trip(*fleet[cycle % 4]);
    clock_.Advance(seconds(31));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          auto p = fleet[(t + i) % 4]->TryAcquire();
          if (!p.has_value()) continue;
          const State s = fleet[(t + i) % 4]->state();
          if (s == State::kHalfOpen) {
            const int now = probing.fetch_add(1) + 1;
            int seen = max_probing.load();
            while (now > seen && !max_probing.compare_exchange_weak(seen, now)) {
            }
            probing.fetch_sub(1);
            recoveries.fetch_add(1);
          }
          p->Success(milliseconds(1));
        }
      });
    }
    for (auto& th : threads) th.join();
    for (auto& b : fleet) ASSERT_EQ(b->state(), State::kClosed) << "cycle " << cycle;
  }
  EXPECT_EQ(max_probing.load(), 1);
  EXPECT_EQ(fleet_->counters().probes_granted, 20);
  EXPECT_EQ(fleet_->counters().closes, 20);
}

// A store whose thread reads a new breaker's circuit the instant it
// subscribes (the worst case of RedisSharedState's read at creation), with
// an operator's override in force there.
class ReadsAtOnce final : public SharedState {
 public:
  SubscriptionId Subscribe(std::string_view /*circuit*/,
                           std::shared_ptr<SharedStateListener> listener) override {
    listener->OnSharedRefresh();
    return 1;
  }
  void Unsubscribe(SubscriptionId /*id*/) override {}
  Result<SharedCircuitView> Read(std::string_view /*circuit*/) override {
    SharedCircuitView view;
    view.override_in_force =
        SharedOverride{SharedOverride::Kind::kForcedOpen, seconds(60), "incident 42", "alice"};
    return view;
  }
  void Trip(std::string_view /*circuit*/, Duration /*open_for*/,
            std::string_view /*reason*/) override {}
  ProbeLease AcquireProbe(std::string_view /*circuit*/, Duration /*lease_for*/) override {
    return {};
  }
  void Close(std::string_view /*circuit*/, std::string_view /*token*/) override {}
  void Release(std::string_view /*circuit*/, std::string_view /*token*/) override {}
};

// Issue 16, point 2: the transition a new breaker makes on its first read
// of the fleet reaches the registry's observers (they are attached before
// the breaker joins the fleet). It used to be applied inside the breaker's
// constructor, before on_create: an audit log missed it.
TEST_F(SharedStateTest, ARegistrysObserversHearTheOverrideANewBreakerFindsInTheFleet) {
  auto sink = std::make_shared<MemoryLineSink>();
  std::shared_ptr<AuditLog> audit = *AuditLog::Create({.sink = sink});
  auto recorder = std::make_shared<Recorder>();
  RegistryOptions options{.clock = &clock_};
  options.default_config.shared_state = std::make_shared<ReadsAtOnce>();
  options.on_create = [&](CircuitBreaker& b) { b.AddListener(recorder); };
  ObserveRegistry(options, {audit});
  std::unique_ptr<Registry> registry = *Registry::Create(std::move(options));

  std::shared_ptr<CircuitBreaker> b = *registry->Get(kCircuit);
  EXPECT_EQ(b->state(), State::kForcedOpen);
  ASSERT_EQ(sink->size(), 1u);
  EXPECT_THAT(sink->lines()[0], ::testing::HasSubstr(R"("action":"force_open")"));
  EXPECT_THAT(sink->lines()[0], ::testing::HasSubstr(R"("actor":"alice")"));
  ASSERT_EQ(recorder->transitions.size(), 1u);
  EXPECT_EQ(recorder->transitions[0].to, State::kForcedOpen);
  EXPECT_EQ(recorder->transitions[0].reason, TransitionReason::kOperator);
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

using std::chrono::seconds;

class SharedOverrideTest : public ::testing::Test {
 protected:
  SharedOverrideTest() : fleet_(std::make_shared<testing::InProcessSharedState>(clock_)) {}
  std::unique_ptr<CircuitBreaker> Instance() {
    CircuitBreakerConfig c;
    c.shared_state = fleet_;
    return *CircuitBreaker::Create("payments:charge:eu", c, clock_);
  }
  testing::ManualClock clock_;
  std::shared_ptr<testing::InProcessSharedState> fleet_;
};

TEST_F(SharedOverrideTest, AnOverrideOnOneInstanceReachesEveryOneWithItsExpiryAndAuthor) {
  auto a = Instance(), b = Instance();
  a->ForceOpen({.reason = "incident 42", .actor = "oncall", .expires_after = seconds(600)});
  EXPECT_EQ(b->state(), State::kForcedOpen);
  auto info = b->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->reason, "incident 42");
  EXPECT_EQ(info->actor, "oncall");
  EXPECT_EQ(info->expires_at, clock_.Now() + seconds(600));
  EXPECT_EQ(fleet_->counters().overrides, 1) << "the echo is not published again";
  // It expires everywhere by itself.
  clock_.Advance(seconds(600));
  EXPECT_EQ(a->state(), State::kClosed);
  EXPECT_EQ(b->state(), State::kClosed);
}

TEST_F(SharedOverrideTest, AResetLiftsItEverywhere) {
  auto a = Instance(), b = Instance();
  b->Disable({.reason = "maintenance", .actor = "ops"});
  EXPECT_EQ(a->state(), State::kDisabled);
  a->Reset("done", "ops");
  EXPECT_EQ(b->state(), State::kClosed);
}

TEST_F(SharedOverrideTest, ANewInstanceFindsTheOverrideInForce) {
  auto a = Instance();
  a->ForceClosed(
      {.reason = "upstream is fine, alarms are not", .actor = "sre", .expires_after = seconds(60)});
  clock_.Advance(seconds(20));
  auto late = Instance();
  EXPECT_TRUE(late->TryAcquire().has_value());  // first call reads the fleet
  EXPECT_EQ(late->state(), State::kForcedClosed);
  EXPECT_EQ(late->active_override()->expires_at, clock_.Now() + seconds(40));
}

}  // namespace
}  // namespace fusebox
