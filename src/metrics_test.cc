#include "fusebox/metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/observer.h"
#include "fusebox/registry.h"
#include "fusebox/retry.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ManualClock;

constexpr int kSuccess = 0;
constexpr int kFailure = 1;
constexpr int kIgnored = 2;

CircuitBreakerConfig SmallWindow() {
  return CircuitBreakerConfig{
      .slow_call_duration_threshold = seconds(1),
      .permitted_number_of_calls_in_half_open_state = 2,
      .sliding_window_size = 4,
      .minimum_number_of_calls = 4,
      .wait_duration_in_open_state = seconds(10),
  };
}

class MetricsTest : public ::testing::Test {
 protected:
  std::unique_ptr<CircuitBreaker> Breaker(std::string name = "payment") {
    auto b = std::move(*CircuitBreaker::Create(std::move(name), SmallWindow(), clock_));
    metrics_.Attach(*b);
    return b;
  }
  // Two successes and two failures: 50 % opens the small window.
  static void Trip(CircuitBreaker& b) {
    b.TryAcquire()->Success(milliseconds(10));
    b.TryAcquire()->Success(milliseconds(10));
    b.TryAcquire()->Failure(milliseconds(10));
    b.TryAcquire()->Failure(milliseconds(10));
    ASSERT_EQ(b.state(), State::kOpen);
  }

  ManualClock clock_;
  MetricsCollector metrics_;
};

TEST(MetricsStateCode, FollowsSeed003ThenOperatorStates) {
  EXPECT_EQ(StateCode(State::kClosed), 0);
  EXPECT_EQ(StateCode(State::kHalfOpen), 1);
  EXPECT_EQ(StateCode(State::kOpen), 2);
  EXPECT_EQ(StateCode(State::kDisabled), 3);
  EXPECT_EQ(StateCode(State::kMetricsOnly), 4);
  EXPECT_EQ(StateCode(State::kForcedOpen), 5);
  EXPECT_EQ(StateCode(State::kForcedClosed), 6);
  EXPECT_EQ(StateLabel(State::kHalfOpen), "half_open");
  EXPECT_EQ(StateLabel(State::kForcedClosed), "forced_closed");
}

TEST_F(MetricsTest, CountsCallsByOutcomeWithDurationSums) {
  auto b = Breaker();
  b->TryAcquire()->Success(milliseconds(100));
  b->TryAcquire()->Success(milliseconds(250));
  b->TryAcquire()->Failure(milliseconds(40));
  b->TryAcquire()->Ignore();
  const BreakerSample s = metrics_.Sample(*b);
  ASSERT_TRUE(s.observed);
  EXPECT_EQ(s.name, "payment");
  EXPECT_EQ(s.counters.calls[kSuccess], 2u);
  EXPECT_EQ(s.counters.calls[kFailure], 1u);
  EXPECT_EQ(s.counters.calls[kIgnored], 1u);
  EXPECT_EQ(s.counters.call_duration[kSuccess], milliseconds(350));
  EXPECT_EQ(s.counters.call_duration[kFailure], milliseconds(40));
  // The window, from the breaker itself.
  EXPECT_EQ(s.window.buffered_calls, 3);
  EXPECT_EQ(s.window.failed_calls, 1);
}

TEST_F(MetricsTest, CountsSlowCallsAndRejectionsCumulatively) {
  auto b = Breaker();
  b->TryAcquire()->Success(seconds(2));
  b->TryAcquire()->Failure(seconds(3));
  b->TryAcquire()->Failure(milliseconds(1));
  b->TryAcquire()->Failure(milliseconds(1));
  ASSERT_EQ(b->state(), State::kOpen);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(b->TryAcquire().has_value());
  BreakerSample s = metrics_.Sample(*b);
  EXPECT_EQ(s.counters.slow_successful, 1u);
  EXPECT_EQ(s.counters.slow_failed, 1u);
  EXPECT_EQ(s.counters.not_permitted, 5u);
  EXPECT_EQ(s.window.not_permitted_calls, 5);

  // A new state restarts the breaker's own count, not the collector's.
  clock_.Advance(seconds(10) + milliseconds(1));
  b->TryAcquire()->Success(milliseconds(1));
  b->TryAcquire()->Success(milliseconds(1));
  ASSERT_EQ(b->state(), State::kClosed);
  s = metrics_.Sample(*b);
  EXPECT_EQ(s.counters.not_permitted, 5u);
  EXPECT_EQ(s.window.not_permitted_calls, 0);
}

TEST_F(MetricsTest, CountsTransitionsByFromToReasonAndTimeOpenOnTheBreakersClock) {
  auto b = Breaker();
  Trip(*b);
  clock_.Advance(seconds(4));
  // The OPEN period in progress counts up to the snapshot.
  EXPECT_EQ(metrics_.Sample(*b).counters.time_open, seconds(4));
  clock_.Advance(seconds(6) + milliseconds(1));
  b->TryAcquire()->Success(milliseconds(1));  // OPEN -> HALF_OPEN just after 10 s
  b->TryAcquire()->Failure(milliseconds(1));  // 50 % of 2 probes: back to OPEN
  ASSERT_EQ(b->state(), State::kOpen);
  clock_.Advance(seconds(3));
  const BreakerSample s = metrics_.Sample(*b);
  EXPECT_EQ(s.counters.time_open, seconds(13) + milliseconds(1));
  ASSERT_EQ(s.counters.transitions.size(), 3u);
  // Sorted by (from, to, reason): closed->open, open->half_open, half_open->open.
  const TransitionCount& trip = s.counters.transitions[0];
  EXPECT_EQ(trip.from, State::kClosed);
  EXPECT_EQ(trip.to, State::kOpen);
  EXPECT_EQ(trip.reason, TransitionReason::kFailureRate);
  EXPECT_EQ(trip.count, 1u);
  EXPECT_EQ(s.counters.transitions[1].reason, TransitionReason::kWaitElapsed);
  EXPECT_EQ(s.counters.transitions[2].reason, TransitionReason::kProbesFailed);
}

TEST_F(MetricsTest, CountsHalfOpenProbeResults) {
  auto b = Breaker();
  Trip(*b);
  clock_.Advance(seconds(10) + milliseconds(1));
  b->TryAcquire()->Ignore();
  b->TryAcquire()->Success(milliseconds(1));
  b->TryAcquire()->Success(milliseconds(1));
  ASSERT_EQ(b->state(), State::kClosed);
  b->TryAcquire()->Success(milliseconds(1));  // CLOSED again: not a probe
  const BreakerSample s = metrics_.Sample(*b);
  EXPECT_EQ(s.counters.probes[kSuccess], 2u);
  EXPECT_EQ(s.counters.probes[kFailure], 0u);
  EXPECT_EQ(s.counters.probes[kIgnored], 1u);
  EXPECT_EQ(s.counters.calls[kSuccess], 5u);
}

TEST_F(MetricsTest, AttachingTwiceCountsOnce) {
  auto b = Breaker();
  metrics_.Attach(*b);
  b->TryAcquire()->Failure(milliseconds(1));
  EXPECT_EQ(metrics_.Sample(*b).counters.calls[kFailure], 1u);
  EXPECT_EQ(metrics_.observed_breakers(), 1u);
}

TEST_F(MetricsTest, UnattachedBreakerHasItsOwnCountsButNoTransitions) {
  auto b = std::move(*CircuitBreaker::Create("loose", SmallWindow(), clock_));
  b->TryAcquire()->Failure(milliseconds(1));
  b->ForceOpen();
  const BreakerSample s = metrics_.Sample(*b);
  EXPECT_FALSE(s.observed);
  EXPECT_EQ(s.window.state, State::kForcedOpen);
  // Calls are the breaker's own totals(): counted whether or not observed.
  EXPECT_EQ(s.counters.calls[kFailure], 1u);
  EXPECT_TRUE(s.counters.transitions.empty());
}

TEST_F(MetricsTest, DestroyedBreakerDropsItsCounters) {
  auto b = Breaker();
  EXPECT_EQ(metrics_.observed_breakers(), 1u);
  b.reset();
  EXPECT_EQ(metrics_.observed_breakers(), 0u);
}

// Many breakers attached, every third one destroyed: each survivor still finds
// its own series (the collector's table grows and closes the gaps it leaves).
TEST_F(MetricsTest, SurvivorsKeepTheirSeriesWhenOthersAreDestroyed) {
  constexpr int kBreakers = 1000;
  std::vector<std::unique_ptr<CircuitBreaker>> breakers;
  for (int i = 0; i < kBreakers; ++i) {
    breakers.push_back(Breaker("b" + std::to_string(i)));
    if (i % 2 == 0) Trip(*breakers.back());
  }
  EXPECT_EQ(metrics_.observed_breakers(), static_cast<std::size_t>(kBreakers));
  for (int i = 0; i < kBreakers; i += 3) breakers[i].reset();
  EXPECT_EQ(metrics_.observed_breakers(), static_cast<std::size_t>(kBreakers - 334));
  for (int i = 0; i < kBreakers; ++i) {
    if (breakers[i] == nullptr) continue;
    const BreakerSample s = metrics_.Sample(*breakers[i]);
    ASSERT_TRUE(s.observed) << s.name;
    EXPECT_EQ(s.counters.transitions.size(), i % 2 == 0 ? 1u : 0u) << s.name;
  }
  // A new breaker attached after the deletions gets a fresh series.
  auto fresh = Breaker("fresh");
  EXPECT_TRUE(metrics_.Sample(*fresh).observed);
  EXPECT_TRUE(metrics_.Sample(*fresh).counters.transitions.empty());
  breakers.clear();
  fresh.reset();
  EXPECT_EQ(metrics_.observed_breakers(), 0u);
}

TEST_F(MetricsTest, BreakerOutlivingTheCollectorIsFine) {
  auto b = std::move(*CircuitBreaker::Create("survivor", SmallWindow(), clock_));
  {
    MetricsCollector short_lived;
    short_lived.Attach(*b);
  }
  b->TryAcquire()->Success(milliseconds(1));
  EXPECT_TRUE(b->TryAcquire().has_value());
}

TEST_F(MetricsTest, CountsAreExactUnderConcurrentCalls) {
  auto b = Breaker();
  constexpr int kThreads = 4;
  constexpr int kCalls = 5000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) b->TryAcquire()->Success(milliseconds(1));
    });
  }
  for (auto& t : threads) t.join();
  const BreakerSample s = metrics_.Sample(*b);
  EXPECT_EQ(s.counters.calls[kSuccess], static_cast<std::uint64_t>(kThreads * kCalls));
  EXPECT_EQ(s.counters.call_duration[kSuccess], milliseconds(kThreads * kCalls));
}

TEST(MetricsRegistry, ObservesEveryBreakerAndForgetsEvictedOnes) {
  ManualClock clock;
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions options{.clock = &clock,
                          .idle_timeout = std::chrono::minutes(1),
                          .sweep_interval = std::chrono::minutes(1)};
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (*registry->Get("a"))->TryAcquire()->Success(milliseconds(1));
  (*registry->Get("b"))->TryAcquire()->Success(milliseconds(1));
  EXPECT_EQ(metrics->observed_breakers(), 2u);

  MetricsSnapshot snap = metrics->Collect(*registry);
  ASSERT_EQ(snap.breakers.size(), 2u);
  ASSERT_TRUE(snap.registry.has_value());
  EXPECT_EQ(snap.registry->breakers, 2u);
  EXPECT_EQ(snap.registry->events[static_cast<int>(RegistryEvent::Kind::kCreated)], 2u);

  auto b = *registry->Get("b");  // held: not evictable
  clock.Advance(std::chrono::minutes(2));
  EXPECT_EQ(registry->Sweep(), 1u);
  EXPECT_EQ(metrics->observed_breakers(), 1u);
  snap = metrics->Collect(*registry);
  ASSERT_EQ(snap.breakers.size(), 1u);
  EXPECT_EQ(snap.breakers[0].name, "b");
  EXPECT_EQ(snap.registry->events[static_cast<int>(RegistryEvent::Kind::kEvictedIdle)], 1u);

  // A breaker created again under the evicted key starts from zero.
  (void)registry->Get("a");
  snap = metrics->Collect(*registry);
  for (const BreakerSample& s : snap.breakers) {
    if (s.name == "a") {
      EXPECT_EQ(s.counters.calls[kSuccess], 0u);
    }
  }
}

TEST(MetricsRegistry, KeepsHooksAlreadySet) {
  ManualClock clock;
  int created = 0;
  int events = 0;
  auto metrics = std::make_shared<MetricsCollector>();
  RegistryOptions options{.clock = &clock};
  options.on_create = [&](CircuitBreaker&) { ++created; };
  options.on_event = [&](const RegistryEvent&) { ++events; };
  ObserveRegistry(options, {metrics});
  auto registry = std::move(*Registry::Create(std::move(options)));
  (void)registry->Get("x");
  EXPECT_EQ(created, 1);
  EXPECT_EQ(events, 1);
  EXPECT_EQ(metrics->observed_breakers(), 1u);
}

TEST(MetricsPolicies, ReportsBulkheadAndRateLimiterGauges) {
  ManualClock clock;
  MetricsCollector metrics;
  auto bulkhead = std::move(*Bulkhead::Create({.max_concurrent_calls = 3}, clock));
  auto limiter = std::move(*RateLimiter::Create({.limit_for_period = 10}, clock));
  metrics.AddBulkhead("db", *bulkhead);
  metrics.AddRateLimiter("api", *limiter);
  auto p1 = bulkhead->TryAcquire();
  ASSERT_TRUE(limiter->TryAcquire(4).ok());
  MetricsSnapshot snap = metrics.Collect();
  ASSERT_EQ(snap.bulkheads.size(), 1u);
  EXPECT_EQ(snap.bulkheads[0].available_concurrent_calls, 2);
  EXPECT_EQ(snap.bulkheads[0].max_allowed_concurrent_calls, 3);
  ASSERT_EQ(snap.rate_limiters.size(), 1u);
  EXPECT_EQ(snap.rate_limiters[0].available_permissions, 6);
  EXPECT_EQ(snap.rate_limiters[0].limit_for_period, 10);
  EXPECT_TRUE(metrics.RemoveBulkhead("db"));
  EXPECT_FALSE(metrics.RemoveBulkhead("db"));
  EXPECT_TRUE(metrics.Collect().bulkheads.empty());
}

TEST(MetricsPolicies, CountedExecuteCountsRetryLoopsByHowTheyEnded) {
  ManualClock clock;
  MetricsCollector metrics;
  auto retry =
      std::move(*Retry::Create({.max_attempts = 3, .wait_duration = Duration::zero()}, clock));
  RetryCounters& counters = metrics.RetryCountersFor("payment");
  EXPECT_EQ(&counters, &metrics.RetryCountersFor("payment"));

  int calls = 0;
  auto ok_first = [&] { return Status(); };
  auto ok_third = [&] { return ++calls % 3 == 0 ? Status() : Status::Unavailable("down"); };
  auto fails = [&] { return Status::Unavailable("down"); };
  auto not_retryable = [&] { return Status::InvalidArgument("bad"); };
  EXPECT_TRUE(CountedExecute(*retry, counters, ok_first).ok());
  EXPECT_TRUE(CountedExecute(*retry, counters, ok_third).ok());
  EXPECT_EQ(CountedExecute(*retry, counters, fails).code(), StatusCode::kRetriesExhausted);
  EXPECT_EQ(CountedExecute(*retry, counters, not_retryable).code(), StatusCode::kInvalidArgument);
  Result<int> value = CountedExecute(*retry, counters, [] { return 7; });
  EXPECT_EQ(*value, 7);

  const MetricsSnapshot snap = metrics.Collect();
  ASSERT_EQ(snap.retries.size(), 1u);
  const RetrySample& r = snap.retries[0];
  EXPECT_EQ(r.name, "payment");
  EXPECT_EQ(r.successful_without_retry, 2u);
  EXPECT_EQ(r.successful_with_retry, 1u);
  EXPECT_EQ(r.failed_with_retry, 1u);
  EXPECT_EQ(r.failed_without_retry, 1u);
}

}  // namespace
}  // namespace fusebox
