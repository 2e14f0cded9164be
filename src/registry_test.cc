// Tests for fusebox::Registry on a ManualClock: creation from templates,
// lookup, removal, the idle sweep, the LRU bound, the protection of breakers
// that must not be dropped, events, the on_create hook, the hard ceiling and
// its overflow breakers, the cost of eviction when nothing can be dropped,
// and a randomized comparison against a reference model.
//
// About 1,000 lines on purpose: one suite on the shared helpers below, that
// reads as the registry's specification, section by section.

#include "fusebox/registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/testing/manual_clock.h"
#include "registry_race.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using Kind = RegistryEvent::Kind;

struct Event {
  Kind kind;
  std::string key;
  std::size_t size;
  friend bool operator==(const Event& a, const Event& b) {
    return a.kind == b.kind && a.key == b.key && a.size == b.size;
  }
  friend std::ostream& operator<<(std::ostream& os, const Event& e) {
    return os << "{" << RegistryEventKindName(e.kind) << ", '" << e.key << "', " << e.size << "}";
  }
};

// Trips after 2 failures in a window of 2, stays OPEN for an hour.
CircuitBreakerConfig SmallConfig(int window = 2) {
  CircuitBreakerConfig c;
  c.sliding_window_size = window;
  c.minimum_number_of_calls = 2;
  c.wait_duration_in_open_state = 1h;
  c.permitted_number_of_calls_in_half_open_state = 1;
  return c;
}

OverrideOptions Because(std::string reason) {
  OverrideOptions o;
  o.reason = std::move(reason);
  return o;
}

void FailOnce(CircuitBreaker& cb) {
  Result<Permit> p = cb.TryAcquire();
  ASSERT_TRUE(p.has_value()) << p.error();
  p->Failure(Duration::zero());
}

class RegistryTest : public ::testing::Test {
 protected:
  RegistryOptions Options() {
    RegistryOptions o;
    o.clock = &clock_;
    o.default_config = SmallConfig();
    o.on_event = [this](const RegistryEvent& e) {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back({e.kind, std::string(e.key), e.size});
    };
    return o;
  }

  void Build(RegistryOptions o) {
    Result<std::unique_ptr<Registry>> r = Registry::Create(std::move(o));
    ASSERT_TRUE(r.has_value()) << r.error();
    registry_ = std::move(r).value();
  }

  std::shared_ptr<CircuitBreaker> Get(std::string_view key, std::string_view config = "default") {
    Result<std::shared_ptr<CircuitBreaker>> r = registry_->Get(key, config);
    EXPECT_TRUE(r.has_value()) << r.error();
    return r ? *r : nullptr;
  }

  std::vector<Event> events() {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  std::vector<Event> EventsOf(Kind kind) {
    std::vector<Event> out;
    for (const Event& e : events()) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  void ClearEvents() {
    std::lock_guard<std::mutex> lock(mu_);
    events_.clear();
  }

  ManualClock clock_;
  std::mutex mu_;
  std::vector<Event> events_;
  std::unique_ptr<Registry> registry_;  // after clock_: destroyed first
};

TEST_F(RegistryTest, CreateValidatesOptions) {
  {
    RegistryOptions o = Options();
    o.max_breakers = 0;
    EXPECT_EQ(Registry::Create(std::move(o)).error().code(), StatusCode::kInvalidArgument);
  }
  {
    RegistryOptions o = Options();
    o.idle_timeout = Duration::zero();
    EXPECT_EQ(Registry::Create(std::move(o)).error().code(), StatusCode::kInvalidArgument);
  }
  {
    RegistryOptions o = Options();
    o.idle_timeout = -1s;
    EXPECT_EQ(Registry::Create(std::move(o)).error().code(), StatusCode::kInvalidArgument);
  }
  {
    RegistryOptions o = Options();
    o.sweep_interval = Duration::zero();
    EXPECT_EQ(Registry::Create(std::move(o)).error().code(), StatusCode::kInvalidArgument);
  }
  {
    RegistryOptions o = Options();
    o.default_config.failure_rate_threshold = 0;
    Result<std::unique_ptr<Registry>> r = Registry::Create(std::move(o));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("failure_rate_threshold"), std::string_view::npos)
        << r.error();
  }
  {
    Result<std::unique_ptr<Registry>> r = Registry::Create({});
    ASSERT_TRUE(r.has_value()) << r.error();
    EXPECT_EQ(&(*r)->clock(), &SystemClock()) << "a null clock means SystemClock()";
  }
}

TEST_F(RegistryTest, CoarseNowIsTheClocksWhateverTheClock) {
  // Inline for SystemClock() (internal/system_clock.h), the clock's own read
  // otherwise: the manual time is 1,000 days from the real one.
  Build(Options());
  clock_.Advance(1234ms);
  EXPECT_EQ(registry_->CoarseNow(), clock_.Now());
  Result<std::unique_ptr<Registry>> real = Registry::Create({});
  ASSERT_TRUE(real.has_value()) << real.error();
  const TimePoint before = SystemClock().CoarseNow();
  const TimePoint now = (*real)->CoarseNow();
  EXPECT_GE(now, before);
  EXPECT_LE(now, SystemClock().Now());  // the coarse clock never runs ahead
}

TEST_F(RegistryTest, GetCreatesFromDefaultTemplateAndReturnsTheSameBreaker) {
  RegistryOptions o = Options();
  o.default_config = SmallConfig(7);
  Build(std::move(o));
  std::shared_ptr<CircuitBreaker> a = Get("svc:read:1");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name(), "svc:read:1");
  EXPECT_EQ(a->config().sliding_window_size, 7);
  EXPECT_EQ(&a->clock(), &clock_);
  EXPECT_EQ(a->state(), State::kClosed);
  EXPECT_EQ(Get("svc:read:1"), a);
  EXPECT_EQ(registry_->size(), 1u);
  EXPECT_EQ(events(), (std::vector<Event>{{Kind::kCreated, "svc:read:1", 1}}));
}

TEST_F(RegistryTest, GetCreatesFromNamedTemplate) {
  Build(Options());
  ASSERT_TRUE(registry_->AddConfig("fast", SmallConfig(3)).ok());
  std::shared_ptr<CircuitBreaker> f = Get("k1", "fast");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->config().sliding_window_size, 3);
  std::shared_ptr<CircuitBreaker> d = Get("k2");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->config().sliding_window_size, 2);

  // Replacing a template does not touch breakers already created.
  ASSERT_TRUE(registry_->AddConfig("fast", SmallConfig(5)).ok());
  EXPECT_EQ(f->config().sliding_window_size, 3);
  EXPECT_EQ(Get("k3", "fast")->config().sliding_window_size, 5);
  ASSERT_TRUE(registry_->AddConfig("default", SmallConfig(9)).ok());
  EXPECT_EQ(d->config().sliding_window_size, 2);
  EXPECT_EQ(Get("k4")->config().sliding_window_size, 9);
}

TEST_F(RegistryTest, AddConfigValidates) {
  Build(Options());
  CircuitBreakerConfig bad = SmallConfig();
  bad.sliding_window_size = 0;
  Status s = registry_->AddConfig("bad", bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sliding_window_size"), std::string_view::npos) << s;
  EXPECT_EQ(registry_->Get("k", "bad").error().code(), StatusCode::kInvalidArgument);
}

TEST_F(RegistryTest, UnknownTemplateOrEmptyKeyIsInvalidArgument) {
  Build(Options());
  Result<std::shared_ptr<CircuitBreaker>> r = registry_->Get("k", "no-such-template");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->Get("").error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->size(), 0u);
  EXPECT_TRUE(events().empty());

  // The template of an existing breaker is not checked.
  std::shared_ptr<CircuitBreaker> k = Get("k");
  Result<std::shared_ptr<CircuitBreaker>> again = registry_->Get("k", "no-such-template");
  ASSERT_TRUE(again.has_value()) << again.error();
  EXPECT_EQ(*again, k);
}

TEST_F(RegistryTest, FindDoesNotCreate) {
  Build(Options());
  EXPECT_EQ(registry_->Find("k"), nullptr);
  EXPECT_EQ(registry_->size(), 0u);
  EXPECT_TRUE(events().empty());
  std::shared_ptr<CircuitBreaker> k = Get("k");
  EXPECT_EQ(registry_->Find("k"), k);
  EXPECT_EQ(registry_->Find("other"), nullptr);
}

TEST_F(RegistryTest, RemoveDropsWhateverTheState) {
  Build(Options());
  EXPECT_FALSE(registry_->Remove("k"));
  std::shared_ptr<CircuitBreaker> k = Get("k");
  FailOnce(*k);
  FailOnce(*k);
  ASSERT_EQ(k->state(), State::kOpen);
  ClearEvents();
  EXPECT_TRUE(registry_->Remove("k"));
  EXPECT_EQ(registry_->Find("k"), nullptr);
  EXPECT_EQ(registry_->size(), 0u);
  EXPECT_EQ(events(), (std::vector<Event>{{Kind::kRemoved, "k", 0}}));
  EXPECT_FALSE(registry_->Remove("k"));
  // The holder's breaker stays usable; the key now gets a new one.
  EXPECT_EQ(k->state(), State::kOpen);
  std::shared_ptr<CircuitBreaker> fresh = Get("k");
  EXPECT_NE(fresh, k);
  EXPECT_EQ(fresh->state(), State::kClosed);
}

TEST_F(RegistryTest, IdleBreakerIsDroppedOnlyAfterIdleTimeoutBySweep) {
  Build(Options());  // idle 15 min, sweep every minute
  Get("idle");
  clock_.Advance(15min - 1s);
  EXPECT_EQ(registry_->Sweep(), 0u);
  EXPECT_NE(registry_->Find("idle"), nullptr);
  clock_.Advance(2s);
  // Time alone drops nothing: there is no background thread.
  EXPECT_NE(registry_->Find("idle"), nullptr);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(registry_->Find("idle"), nullptr);
  EXPECT_EQ(registry_->size(), 0u);
  EXPECT_EQ(EventsOf(Kind::kEvictedIdle), (std::vector<Event>{{Kind::kEvictedIdle, "idle", 0}}));
}

// An OPEN breaker nobody asks for again: kept while its wait runs and for
// idle_timeout after it ends (the dependency may still be down, and a new
// breaker would start CLOSED and call it), dropped once it ended longer ago.
TEST_F(RegistryTest, AnOpenBreakerIsDroppedOnlyOnceItsWaitEndedMoreThanIdleTimeoutAgo) {
  Build(Options());  // idle 15 min; SmallConfig stays OPEN for an hour
  {
    std::shared_ptr<CircuitBreaker> cb = Get("tripped");
    FailOnce(*cb);
    FailOnce(*cb);
    ASSERT_EQ(cb->state(), State::kOpen);
    ASSERT_EQ(cb->metrics().retry_at, clock_.Now() + 1h);
  }
  clock_.Advance(30min);  // idle for longer than idle_timeout, the wait runs
  EXPECT_EQ(registry_->Sweep(), 0u);
  clock_.Advance(30min + 15min - 1s);  // the wait ended just under 15 min ago
  EXPECT_EQ(registry_->Sweep(), 0u);
  EXPECT_NE(registry_->Find("tripped"), nullptr);
  clock_.Advance(2s);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(registry_->Find("tripped"), nullptr);
  EXPECT_EQ(EventsOf(Kind::kEvictedIdle), (std::vector<Event>{{Kind::kEvictedIdle, "tripped", 0}}));
}

TEST_F(RegistryTest, GetRunsTheSweepAtMostOncePerInterval) {
  Build(Options());
  Get("x");
  clock_.Advance(14min + 50s);
  Get("y");  // a sweep is due (more than a minute since start): x not idle yet
  EXPECT_NE(registry_->Find("x"), nullptr);
  clock_.Advance(20s);  // x idle for 15:10, but the last sweep was 20 s ago
  Get("z");
  EXPECT_NE(registry_->Find("x"), nullptr) << "swept twice within a sweep_interval";
  EXPECT_TRUE(EventsOf(Kind::kEvictedIdle).empty());
  clock_.Advance(41s);  // 61 s since the last sweep
  Get("w");
  EXPECT_EQ(registry_->Find("x"), nullptr);
  std::vector<Event> evicted = EventsOf(Kind::kEvictedIdle);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, "x");
  // 2 if the sweep ran before w was inserted, 3 if after.
  EXPECT_GE(evicted[0].size, 2u);
  EXPECT_LE(evicted[0].size, 3u);
  EXPECT_EQ(registry_->size(), 3u);
}

TEST_F(RegistryTest, AHitAlsoRunsADueSweep) {
  Build(Options());
  Get("stale");
  Get("hot");
  clock_.Advance(16min);
  Get("hot");  // a hit, not a creation
  EXPECT_EQ(registry_->Find("stale"), nullptr);
  EXPECT_NE(registry_->Find("hot"), nullptr);
  std::vector<Event> evicted = EventsOf(Kind::kEvictedIdle);
  ASSERT_FALSE(evicted.empty());
  EXPECT_EQ(evicted.back().key, "stale");
}

// The Get that asks for a key is a use of it: the sweep it triggers must not
// drop that very breaker and hand back a new one.
TEST_F(RegistryTest, TheSweepTriggeredByAGetDoesNotDropTheKeyBeingAskedFor) {
  Build(Options());
  {
    std::shared_ptr<CircuitBreaker> hot = Get("hot");
    Result<Permit> p = hot->TryAcquire();
    ASSERT_TRUE(p.has_value());
    p->Success(Duration::zero());  // still quiescent: evictable, but marked
  }
  clock_.Advance(16min);
  std::shared_ptr<CircuitBreaker> again = Get("hot");
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->metrics().buffered_calls, 1) << "a new breaker replaced the one asked for";
  EXPECT_TRUE(EventsOf(Kind::kEvictedIdle).empty());
  EXPECT_EQ(EventsOf(Kind::kCreated).size(), 1u);
}

TEST_F(RegistryTest, GetCountsAsUseFindDoesNot) {
  Build(Options());
  Get("got");
  Get("found");
  clock_.Advance(10min);
  Get("got");
  EXPECT_NE(registry_->Find("found"), nullptr);
  clock_.Advance(6min);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_NE(registry_->Find("got"), nullptr);
  EXPECT_EQ(registry_->Find("found"), nullptr);
}

TEST_F(RegistryTest, LruBoundDropsTheLeastRecentlyUsed) {
  RegistryOptions o = Options();
  o.max_breakers = 3;
  Build(std::move(o));
  Get("a");
  clock_.Advance(1s);
  Get("b");
  clock_.Advance(1s);
  Get("c");
  clock_.Advance(1s);
  Get("a");  // a is now the most recently used
  clock_.Advance(1s);
  std::shared_ptr<CircuitBreaker> d = Get("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(registry_->size(), 3u);
  EXPECT_EQ(registry_->Find("b"), nullptr);
  EXPECT_NE(registry_->Find("a"), nullptr);
  EXPECT_NE(registry_->Find("c"), nullptr);
  EXPECT_NE(registry_->Find("d"), nullptr);
  std::vector<Event> evicted = EventsOf(Kind::kEvictedLru);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, "b");
  // 2 if b was dropped to make room before d went in, 3 if after.
  EXPECT_GE(evicted[0].size, 2u);
  EXPECT_LE(evicted[0].size, 3u);
  EXPECT_TRUE(EventsOf(Kind::kCapacityExceeded).empty());
}

enum class Protection {
  kOpen,
  kHalfOpen,
  kForcedOpen,
  kForcedClosed,
  kDisabled,
  kFailureInWindow,
  kSlowCallInWindow,
  kInUse,
};

std::string ProtectionName(const ::testing::TestParamInfo<Protection>& info) {
  switch (info.param) {
    case Protection::kOpen:
      return "Open";
    case Protection::kHalfOpen:
      return "HalfOpen";
    case Protection::kForcedOpen:
      return "ForcedOpen";
    case Protection::kForcedClosed:
      return "ForcedClosed";
    case Protection::kDisabled:
      return "Disabled";
    case Protection::kFailureInWindow:
      return "FailureInWindow";
    case Protection::kSlowCallInWindow:
      return "SlowCallInWindow";
    case Protection::kInUse:
      return "InUse";
  }
  return "Unknown";
}

class RegistryProtection : public RegistryTest, public ::testing::WithParamInterface<Protection> {
 protected:
  // Puts `cb` in the protected condition; returns the pointer the test must
  // keep holding (only for kInUse).
  std::shared_ptr<CircuitBreaker> Protect(std::shared_ptr<CircuitBreaker> cb) {
    switch (GetParam()) {
      case Protection::kOpen:
        FailOnce(*cb);
        FailOnce(*cb);
        EXPECT_EQ(cb->state(), State::kOpen);
        break;
      case Protection::kHalfOpen:
        EXPECT_TRUE(cb->TransitionToHalfOpen().ok());
        EXPECT_EQ(cb->state(), State::kHalfOpen);
        break;
      case Protection::kForcedOpen:
        cb->ForceOpen(Because("test"));
        EXPECT_EQ(cb->state(), State::kForcedOpen);
        break;
      case Protection::kForcedClosed:
        cb->ForceClosed(Because("test"));
        EXPECT_EQ(cb->state(), State::kForcedClosed);
        break;
      case Protection::kDisabled:
        cb->Disable(Because("test"));
        EXPECT_EQ(cb->state(), State::kDisabled);
        break;
      case Protection::kFailureInWindow:
        FailOnce(*cb);
        EXPECT_EQ(cb->state(), State::kClosed);
        break;
      case Protection::kSlowCallInWindow: {
        Result<Permit> p = cb->TryAcquire();
        EXPECT_TRUE(p.has_value());
        if (p) p->Success(2min);  // slower than the default 60 s threshold
        EXPECT_EQ(cb->metrics().slow_calls, 1);
        break;
      }
      case Protection::kInUse:
        return cb;
    }
    EXPECT_FALSE(cb->IsQuiescent());
    return nullptr;
  }
};

INSTANTIATE_TEST_SUITE_P(AllProtections, RegistryProtection,
                         ::testing::Values(Protection::kOpen, Protection::kHalfOpen,
                                           Protection::kForcedOpen, Protection::kForcedClosed,
                                           Protection::kDisabled, Protection::kFailureInWindow,
                                           Protection::kSlowCallInWindow, Protection::kInUse),
                         ProtectionName);

TEST_P(RegistryProtection, IdleSweepNeverDropsAProtectedBreaker) {
  Build(Options());
  std::shared_ptr<CircuitBreaker> held = Protect(Get("protected"));
  Get("clean");
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_NE(registry_->Find("protected"), nullptr);
  EXPECT_EQ(registry_->Find("clean"), nullptr);
  EXPECT_EQ(EventsOf(Kind::kEvictedIdle), (std::vector<Event>{{Kind::kEvictedIdle, "clean", 1}}));
}

TEST_P(RegistryProtection, LruSkipsAProtectedBreaker) {
  RegistryOptions o = Options();
  o.max_breakers = 2;
  Build(std::move(o));
  std::shared_ptr<CircuitBreaker> held = Protect(Get("oldest-protected"));
  clock_.Advance(1s);
  Get("middle");
  clock_.Advance(1s);
  Get("newest");
  EXPECT_EQ(registry_->size(), 2u);
  EXPECT_NE(registry_->Find("oldest-protected"), nullptr);
  EXPECT_EQ(registry_->Find("middle"), nullptr);
  std::vector<Event> evicted = EventsOf(Kind::kEvictedLru);
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, "middle");
  EXPECT_GE(evicted[0].size, 1u);
  EXPECT_LE(evicted[0].size, 2u);
}

TEST_P(RegistryProtection, CapacityExceededWhenEveryBreakerIsProtected) {
  RegistryOptions o = Options();
  o.max_breakers = 2;
  Build(std::move(o));
  std::shared_ptr<CircuitBreaker> h1 = Protect(Get("p1"));
  clock_.Advance(1s);
  std::shared_ptr<CircuitBreaker> h2 = Protect(Get("p2"));
  clock_.Advance(1s);
  std::shared_ptr<CircuitBreaker> third = Get("p3");
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(registry_->size(), 3u);
  EXPECT_NE(registry_->Find("p1"), nullptr);
  EXPECT_NE(registry_->Find("p2"), nullptr);
  EXPECT_TRUE(EventsOf(Kind::kEvictedLru).empty());
  std::vector<Event> exceeded = EventsOf(Kind::kCapacityExceeded);
  ASSERT_FALSE(exceeded.empty());
  EXPECT_EQ(exceeded.back(), (Event{Kind::kCapacityExceeded, "", 3}));
}

TEST_F(RegistryTest, AbandonedBreakerBecomesEvictableAgain) {
  Build(Options());
  {
    std::shared_ptr<CircuitBreaker> held = Get("k");
    clock_.Advance(16min);
    EXPECT_EQ(registry_->Sweep(), 0u) << "in use";
  }
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(registry_->Find("k"), nullptr);
}

TEST_F(RegistryTest, EventsCarryKeyAndSize) {
  Build(Options());
  Get("a");
  Get("b");
  Get("a");  // a hit: no event
  EXPECT_TRUE(registry_->Remove("a"));
  EXPECT_EQ(events(),
            (std::vector<Event>{
                {Kind::kCreated, "a", 1}, {Kind::kCreated, "b", 2}, {Kind::kRemoved, "a", 1}}));
  EXPECT_EQ(RegistryEventKindName(Kind::kCreated).empty(), false);
}

TEST_F(RegistryTest, EventsAreDeliveredWithNoRegistryLockHeld) {
  RegistryOptions o = Options();
  std::vector<std::size_t> sizes_seen;
  // Calling back into the registry from on_event would deadlock if a
  // registry lock were held.
  o.on_event = [this, &sizes_seen](const RegistryEvent& e) {
    sizes_seen.push_back(registry_->size());
    (void)registry_->Find(e.key);
  };
  Build(std::move(o));
  Get("a");
  Get("b");
  EXPECT_EQ(sizes_seen, (std::vector<std::size_t>{1, 2}));
}

TEST_F(RegistryTest, ForEachVisitsEveryBreakerOutsideTheLock) {
  Build(Options());
  Get("a");
  Get("b");
  Get("c");
  std::set<std::string> seen;
  registry_->ForEach([&](const std::string& key, CircuitBreaker& cb) {
    seen.insert(key);
    EXPECT_EQ(cb.name(), key);
    EXPECT_NE(registry_->Find(key), nullptr);  // would deadlock under a lock
  });
  EXPECT_EQ(seen, (std::set<std::string>{"a", "b", "c"}));
}

TEST_F(RegistryTest, OnCreateRunsOnceBeforeTheBreakerIsVisible) {
  constexpr int kThreads = 8;
  constexpr int kKeys = 40;
  std::mutex hooked_mu;
  std::set<const CircuitBreaker*> hooked;
  std::atomic<int> hook_calls{0};
  RegistryOptions o = Options();
  o.on_create = [&](CircuitBreaker& cb) {
    hook_calls.fetch_add(1);
    // Give other threads a chance to find the breaker early if they can.
    std::this_thread::yield();
    std::lock_guard<std::mutex> lock(hooked_mu);
    hooked.insert(&cb);
  };
  Build(std::move(o));

  for (int k = 0; k < kKeys; ++k) {
    const std::string key = "key-" + std::to_string(k);
    std::latch start(kThreads);
    std::vector<std::shared_ptr<CircuitBreaker>> got(kThreads);
    std::atomic<int> unhooked{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        Result<std::shared_ptr<CircuitBreaker>> r = registry_->Get(key);
        if (!r) return;
        got[t] = *r;
        std::lock_guard<std::mutex> lock(hooked_mu);
        if (hooked.count(got[t].get()) == 0) unhooked.fetch_add(1);
      });
    }
    for (std::thread& t : threads) t.join();
    for (int t = 0; t < kThreads; ++t) {
      ASSERT_NE(got[t], nullptr);
      EXPECT_EQ(got[t], got[0]) << key;
    }
    EXPECT_EQ(unhooked.load(), 0) << key << " was visible before on_create ran";
  }
  EXPECT_EQ(hook_calls.load(), kKeys);
  std::vector<Event> created = EventsOf(Kind::kCreated);
  EXPECT_EQ(created.size(), static_cast<std::size_t>(kKeys)) << "one kCreated per key";
  std::set<std::string> keys;
  for (const Event& e : created) keys.insert(e.key);
  EXPECT_EQ(keys.size(), static_cast<std::size_t>(kKeys));
}

TEST_F(RegistryTest, OnCreateCanAddListeners) {
  struct Counter : CircuitBreakerListener {
    std::atomic<int> transitions{0};
    void OnTransition(const TransitionEvent&) override { transitions.fetch_add(1); }
  };
  auto counter = std::make_shared<Counter>();
  RegistryOptions o = Options();
  o.on_create = [counter](CircuitBreaker& cb) { cb.AddListener(counter); };
  Build(std::move(o));
  std::shared_ptr<CircuitBreaker> k = Get("k");
  FailOnce(*k);
  FailOnce(*k);
  EXPECT_EQ(k->state(), State::kOpen);
  EXPECT_EQ(counter->transitions.load(), 1);
}

TEST_F(RegistryTest, CreateValidatesTheHardCeiling) {
  {
    RegistryOptions o = Options();
    o.max_breakers = 10;
    o.max_breakers_hard = 9;
    Result<std::unique_ptr<Registry>> r = Registry::Create(std::move(o));
    ASSERT_FALSE(r.has_value());
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.error().message().find("max_breakers_hard"), std::string_view::npos) << r.error();
  }
  {
    // 0: four times max_breakers. With everything protected, the fifth key
    // of max_breakers 1 is the first without a breaker of its own.
    RegistryOptions o = Options();
    o.max_breakers = 1;
    o.on_create = [](CircuitBreaker& cb) { cb.ForceOpen(Because("test")); };
    Build(std::move(o));
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(Get("k" + std::to_string(i))->name(), "k" + std::to_string(i));
    EXPECT_EQ(Get("k4")->name(), "overflow:default");
    EXPECT_EQ(registry_->size(), 4u);
  }
}

// Beyond max_breakers_hard, with nothing evictable, a new key shares its
// template's overflow breaker; a key already held keeps its own; room made
// later gives new keys their own breakers again.
TEST_F(RegistryTest, BeyondTheHardCeilingNewKeysShareTheTemplatesOverflowBreaker) {
  RegistryOptions o = Options();
  o.max_breakers = 2;
  o.max_breakers_hard = 3;
  o.on_create = [](CircuitBreaker& cb) { cb.ForceOpen(Because("test")); };
  Build(std::move(o));
  ASSERT_TRUE(registry_->AddConfig("fast", SmallConfig(3)).ok());
  std::shared_ptr<CircuitBreaker> a = Get("a");
  Get("b");
  Get("c");
  ASSERT_EQ(registry_->size(), 3u);
  ClearEvents();

  std::shared_ptr<CircuitBreaker> d = Get("d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->name(), "overflow:default");
  EXPECT_EQ(d->state(), State::kForcedOpen) << "on_create runs for overflow breakers too";
  EXPECT_EQ(registry_->Find("d"), nullptr) << "an overflowed key is not held";
  EXPECT_EQ(registry_->size(), 3u);
  EXPECT_EQ(Get("e"), d) << "one overflow breaker per template";
  EXPECT_EQ(Get("a"), a) << "a key already held keeps its breaker";
  std::shared_ptr<CircuitBreaker> f = Get("f", "fast");
  EXPECT_EQ(f->name(), "overflow:fast");
  EXPECT_EQ(f->config().sliding_window_size, 3);
  EXPECT_EQ(registry_->stats().overflowed, 3u);
  // Reported once per sweep_interval, with the count since the last report.
  EXPECT_EQ(EventsOf(Kind::kOverflow), (std::vector<Event>{{Kind::kOverflow, "d", 3}}));
  EXPECT_TRUE(EventsOf(Kind::kCreated).empty());

  std::set<std::string> seen;
  registry_->ForEach([&](const std::string& key, CircuitBreaker&) { seen.insert(key); });
  EXPECT_EQ(seen, (std::set<std::string>{"a", "b", "c", "overflow:default", "overflow:fast"}));

  ASSERT_TRUE(registry_->Remove("b"));
  std::shared_ptr<CircuitBreaker> g = Get("g");
  EXPECT_EQ(g->name(), "g");
  EXPECT_EQ(registry_->size(), 3u);
}

TEST_F(RegistryTest, OverflowIsReportedAtMostOncePerSweepIntervalWithACount) {
  RegistryOptions o = Options();
  o.max_breakers = 1;
  o.max_breakers_hard = 1;
  o.sweep_interval = 10s;
  o.on_create = [](CircuitBreaker& cb) { cb.ForceOpen(Because("test")); };
  std::vector<std::uint64_t> counts;
  o.on_event = [&counts, record = o.on_event](const RegistryEvent& e) {
    record(e);
    if (e.kind == Kind::kOverflow) counts.push_back(e.count);
  };
  Build(std::move(o));
  Get("held");
  Get("o1");
  Get("o2");
  clock_.Advance(9s);
  Get("o3");
  EXPECT_EQ(EventsOf(Kind::kOverflow), (std::vector<Event>{{Kind::kOverflow, "o1", 1}}));
  clock_.Advance(1s);
  Get("o4");
  EXPECT_EQ(EventsOf(Kind::kOverflow),
            (std::vector<Event>{{Kind::kOverflow, "o1", 1}, {Kind::kOverflow, "o4", 1}}));
  EXPECT_EQ(counts, (std::vector<std::uint64_t>{1, 3})) << "o4 reports o2, o3 and itself";
  EXPECT_EQ(registry_->stats().overflowed, 4u);
}

// seed 000's growth past max_breakers when everything is protected, at O(1)
// per insertion: a protected breaker found at the end of the LRU queue is set
// aside until the next sweep instead of being looked at by every insertion.
TEST_F(RegistryTest, EvictionCostStaysConstantPerInsertionWhenNothingIsEvictable) {
  constexpr std::size_t kMax = 640;
  constexpr std::size_t kInserts = 20000;
  RegistryOptions o = Options();
  o.max_breakers = kMax;
  o.max_breakers_hard = 1000000;
  o.on_create = [](CircuitBreaker& cb) { cb.ForceOpen(Because("test")); };
  Build(std::move(o));
  for (std::size_t i = 0; i < kInserts; ++i) Get("k" + std::to_string(i));
  EXPECT_EQ(registry_->size(), kInserts);
  const RegistryStats stats = registry_->stats();
  EXPECT_EQ(stats.lru_runs, kInserts - kMax);
  EXPECT_LE(stats.lru_visits, 2 * stats.lru_runs) << "breakers looked at per insertion grew";
  // Reported when first exceeded and then every max/64 = 10 more.
  std::vector<Event> exceeded = EventsOf(Kind::kCapacityExceeded);
  ASSERT_FALSE(exceeded.empty());
  EXPECT_EQ(exceeded.front().size, kMax + 1);
  EXPECT_EQ(exceeded.size(), (kInserts - kMax - 1) / 10 + 1);
}

// A protected breaker set aside is looked at again by the next sweep: once
// it can be dropped, the LRU bound drops it.
TEST_F(RegistryTest, ASetAsideBreakerIsDroppedAfterTheNextSweepOnceUnprotected) {
  RegistryOptions o = Options();
  o.max_breakers = 2;
  Build(std::move(o));
  std::shared_ptr<CircuitBreaker> p1 = Get("p1");
  p1->ForceOpen(Because("test"));
  clock_.Advance(1s);
  std::shared_ptr<CircuitBreaker> p2 = Get("p2");
  p2->ForceOpen(Because("test"));
  clock_.Advance(1s);
  Get("p3");  // both set aside: over capacity
  EXPECT_EQ(registry_->size(), 3u);
  p1->Reset();
  p1.reset();
  clock_.Advance(1s);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(registry_->Find("p1"), nullptr);
  EXPECT_NE(registry_->Find("p2"), nullptr);
  EXPECT_NE(registry_->Find("p3"), nullptr);
  EXPECT_EQ(registry_->size(), 2u);
  EXPECT_EQ(EventsOf(Kind::kEvictedLru).back().key, "p1");
}

TEST_F(RegistryTest, RegistryKeyFindsTheSameBreakerAsItsString) {
  Build(Options());
  const RegistryKey key("meta:read:17841400000000000:quota");
  EXPECT_EQ(key.hash(), RegistryKey::Hash(key.key()));
  std::shared_ptr<CircuitBreaker> a = Get(key.key());
  Result<std::shared_ptr<CircuitBreaker>> b = registry_->Get(key);
  ASSERT_TRUE(b.has_value()) << b.error();
  EXPECT_EQ(*b, a);
  EXPECT_EQ(registry_->size(), 1u);
  EXPECT_EQ(registry_->Get(RegistryKey("")).error().code(), StatusCode::kInvalidArgument);
}

// Keys whose hashes share their low bits (one probe run) and keys that are
// prefixes of each other: insertion, lookup and removal in any order keep
// every other key findable (the table's backward-shift deletion).
TEST_F(RegistryTest, ManyKeysSurviveRemovalsInAnyOrder) {
  RegistryOptions o = Options();
  o.max_breakers = 100000;
  Build(std::move(o));
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i)
    keys.push_back(std::string(static_cast<std::size_t>(i % 40), 'k') + std::to_string(i));
  std::map<std::string, std::shared_ptr<CircuitBreaker>> held;
  for (const std::string& k : keys) held[k] = Get(k);
  std::mt19937 rng(7);
  std::shuffle(keys.begin(), keys.end(), rng);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_TRUE(registry_->Remove(keys[i])) << keys[i];
      held.erase(keys[i]);
    }
  }
  for (const auto& [k, b] : held) ASSERT_EQ(registry_->Find(k), b) << k;
  for (std::size_t i = 0; i < keys.size(); i += 2) ASSERT_EQ(registry_->Find(keys[i]), nullptr);
  EXPECT_EQ(registry_->size(), held.size());
}

// Lookups racing insertions, LRU evictions, removals and sweeps on a small
// registry (run under tsan and asan): every Get returns the key's breaker or
// the overflow breaker, and the registry stays within its ceiling.
TEST_F(RegistryTest, ConcurrentGetsRemovesAndSweepsStayConsistent) {
  RegistryOptions o = Options();
  o.max_breakers = 16;
  o.max_breakers_hard = 24;
  o.on_event = nullptr;
  Build(std::move(o));
  constexpr int kThreads = 4;
  std::latch start(kThreads);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t));
      start.arrive_and_wait();
      for (int i = 0; i < 4000; ++i) {
        const std::string key = "k" + std::to_string(rng() % 64);
        const unsigned op = rng() % 100;
        if (op < 70) {
          Result<std::shared_ptr<CircuitBreaker>> b = registry_->Get(key);
          if (!testing::IsKeysBreaker(b, key)) ++wrong;
          if (b && op < 10) (*b)->ForceOpen(Because("race"));  // protected for a while
          if (b && op >= 60) (*b)->Reset();
        } else {
          testing::FindRemoveOrSweep(*registry_, key, op, wrong);
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(registry_->size(), 24u);
  std::set<std::string> keys;
  std::size_t visited = 0;
  registry_->ForEach([&](const std::string& key, CircuitBreaker&) {
    keys.insert(key);
    ++visited;
  });
  EXPECT_EQ(keys.size(), visited) << "a key held twice";
}

// Random Gets, Removes, sweeps, holds, overrides and clock steps, checked
// after every step against a reference model of what seed 000 promises:
// a key keeps its breaker until an event says it was dropped; nothing
// protected is dropped; an idle drop follows idle_timeout without a Get,
// and a sweep drops every such breaker; the registry grows past
// max_breakers only when nothing (not set aside since the last sweep) could
// be dropped, and never past max_breakers_hard, where a new key gets the
// overflow breaker.
class RegistryModel {
 public:
  explicit RegistryModel(unsigned seed) : rng_(seed) {}

  void Run(int steps) {
    RegistryOptions o;
    o.clock = &clock_;
    o.max_breakers = kMax;
    o.max_breakers_hard = kHard;
    o.idle_timeout = 15min;
    o.sweep_interval = std::chrono::hours(100000);  // sweeps only when the model asks
    o.on_event = [this](const RegistryEvent& e) {
      events_.push_back({e.kind, std::string(e.key), e.size});
    };
    registry_ = std::move(*Registry::Create(std::move(o)));
    for (int step = 0; step < steps && !::testing::Test::HasFailure(); ++step) {
      const int op = Pick(100);
      std::string key = "key:" + std::to_string(Pick(kUniverse));
      if (op < 55) {
        DoGet(key);
      } else if (op < 70) {
        clock_.Advance(std::chrono::seconds(Pick(300)));
      } else if (op < 78) {
        DoHold(key);
      } else if (op < 86) {
        DoForce(key);
      } else if (op < 93) {
        DoSweep();
      } else {
        DoRemove(key);
      }
      Check(step);
    }
  }

 private:
  static constexpr std::size_t kMax = 8;
  static constexpr std::size_t kHard = 12;
  static constexpr int kUniverse = 30;

  struct Key {
    // Weak: a strong reference would make every breaker "in use".
    std::weak_ptr<CircuitBreaker> breaker;
    TimePoint last_get;
    std::shared_ptr<CircuitBreaker> held;  // kept by "the caller"
    bool forced = false;
    bool maybe_set_aside = false;  // protected at some time since the last sweep
    bool Protected() const { return held != nullptr || forced; }
  };

  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  bool AnyDroppable() const {
    for (const auto& [k, m] : model_) {
      if (!m.Protected() && !m.maybe_set_aside) return true;
    }
    return false;
  }

  // Applies the events of one step to the model, checking each drop.
  void Drain(const std::string& context) {
    for (const Event& e : events_) {
      if (e.kind != Kind::kEvictedIdle && e.kind != Kind::kEvictedLru) continue;
      auto it = model_.find(e.key);
      ASSERT_NE(it, model_.end()) << context << ": dropped unknown " << e;
      EXPECT_FALSE(it->second.Protected()) << context << ": dropped protected " << e;
      if (e.kind == Kind::kEvictedIdle) {
        EXPECT_GE(clock_.Now() - it->second.last_get, 15min) << context << ": " << e;
      }
      model_.erase(it);
    }
    events_.clear();
  }

  void DoGet(const std::string& key) {
    const std::size_t before = model_.size();
    const bool droppable = AnyDroppable();
    Result<std::shared_ptr<CircuitBreaker>> r = registry_->Get(key);
    ASSERT_TRUE(r.has_value()) << r.error();
    auto it = model_.find(key);
    if (it != model_.end()) {
      EXPECT_EQ(*r, it->second.breaker.lock()) << "Get " << key << " changed its breaker";
      it->second.last_get = clock_.Now();
      events_.clear();
      return;
    }
    Drain("Get " + key);
    if ((*r)->name() == "overflow:default") {
      EXPECT_GE(model_.size(), kHard) << "overflow below the ceiling";
      EXPECT_FALSE(droppable) << "overflow while a breaker could be dropped";
      return;
    }
    EXPECT_EQ((*r)->name(), key);
    Key& m = model_[key];
    m.breaker = *r;
    m.last_get = clock_.Now();
    if (droppable && before >= kMax) {
      EXPECT_LE(model_.size(), before) << "grew past max_breakers with something droppable";
    }
    // Often protected from the start, so that the registry fills up with
    // breakers it cannot drop and reaches its ceiling.
    if (Pick(2) == 0) DoForce(key);
  }

  void DoHold(const std::string& key) {
    auto it = model_.find(key);
    if (it == model_.end()) return;
    if (it->second.held) {
      it->second.held.reset();
    } else {
      it->second.held = registry_->Find(key);
      it->second.maybe_set_aside = true;
    }
  }

  void DoForce(const std::string& key) {
    auto it = model_.find(key);
    if (it == model_.end()) return;
    std::shared_ptr<CircuitBreaker> b = it->second.breaker.lock();
    ASSERT_NE(b, nullptr) << key;
    if (it->second.forced) {
      b->Reset();
    } else {
      b->ForceOpen(Because("model"));
      it->second.maybe_set_aside = true;
    }
    it->second.forced = !it->second.forced;
  }

  void DoSweep() {
    registry_->Sweep();
    const TimePoint now = clock_.Now();
    Drain("Sweep");
    for (auto& [k, m] : model_) {
      EXPECT_FALSE(!m.Protected() && now - m.last_get >= 15min) << "Sweep kept idle " << k;
      m.maybe_set_aside = m.Protected();
    }
    if (model_.size() > kMax) {
      for (const auto& [k, m] : model_) {
        EXPECT_TRUE(m.Protected())
            << "Sweep left the registry over max_breakers with " << k << " droppable";
      }
    }
  }

  void DoRemove(const std::string& key) {
    const bool existed = model_.erase(key) > 0;
    EXPECT_EQ(registry_->Remove(key), existed) << "Remove " << key;
    events_.clear();
  }

  void Check(int step) {
    ASSERT_EQ(registry_->size(), model_.size()) << "step " << step;
    ASSERT_LE(registry_->size(), kHard) << "step " << step;
    for (const auto& [k, m] : model_) {
      ASSERT_EQ(registry_->Find(k), m.breaker.lock()) << "step " << step << " key " << k;
    }
  }

  ManualClock clock_;
  std::mt19937 rng_;
  std::vector<Event> events_;
  std::map<std::string, Key> model_;
  std::unique_ptr<Registry> registry_;  // after clock_: destroyed first
};

TEST(RegistryRandomized, AgreesWithTheReferenceModel) {
  for (unsigned seed = 1; seed <= 200 && !::testing::Test::HasFailure(); ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RegistryModel(seed).Run(1500);
  }
}

}  // namespace
}  // namespace fusebox
