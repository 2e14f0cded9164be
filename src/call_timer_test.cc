#include "fusebox/call_timer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/metrics.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using testing::ManualClock;

// Micrometer's defaults for its Prometheus registry: 1 min in 3 buffers, so
// the ring rotates every 20 s.
TEST(TimeWindowMax, DecaysAsMicrometersRingDoes) {
  ManualClock clock;
  const TimePoint t0 = clock.Now();
  TimeWindowMax max(seconds(60), 3, t0);
  EXPECT_EQ(max.Poll(t0), Duration::zero());
  max.Record(milliseconds(5), t0);
  max.Record(milliseconds(3), t0);  // lower: changes nothing
  EXPECT_EQ(max.Poll(t0), milliseconds(5));
  // Buffer 0 is read until the first rotation, at exactly 20 s.
  EXPECT_EQ(max.Poll(t0 + seconds(20) - nanoseconds(1)), milliseconds(5));
  // Then buffers 1 and 2, which the 5 ms raised too.
  EXPECT_EQ(max.Poll(t0 + seconds(20)), milliseconds(5));
  EXPECT_EQ(max.Poll(t0 + seconds(59)), milliseconds(5));
  // At 60 s buffer 0 again, zeroed at 20 s: the 5 ms is gone.
  EXPECT_EQ(max.Poll(t0 + seconds(60)), Duration::zero());
}

TEST(TimeWindowMax, ADurationStaysBetweenTwoThirdsAndAllOfTheExpiry) {
  ManualClock clock;
  const TimePoint t0 = clock.Now();
  TimeWindowMax max(seconds(60), 3, t0);
  // Recorded at 30 s, in buffer 1's period: read at 40 s (buffer 2) and at
  // 60 s (buffer 0, zeroed at 20 s, before it); gone at 80 s, when buffer 1,
  // zeroed at 40 s, is read.
  max.Record(milliseconds(7), t0 + seconds(30));
  EXPECT_EQ(max.Poll(t0 + seconds(30)), milliseconds(7));
  EXPECT_EQ(max.Poll(t0 + seconds(79)), milliseconds(7));
  EXPECT_EQ(max.Poll(t0 + seconds(80)), Duration::zero());
  // A larger one later replaces it, a smaller one does not hide it.
  max.Record(milliseconds(9), t0 + seconds(81));
  max.Record(milliseconds(2), t0 + seconds(82));
  EXPECT_EQ(max.Poll(t0 + seconds(82)), milliseconds(9));
}

TEST(TimeWindowMax, AQuietPeriodLongerThanTheRingClearsItAndKeepsLaterCalls) {
  ManualClock clock;
  const TimePoint t0 = clock.Now();
  TimeWindowMax max(seconds(60), 3, t0);
  max.Record(seconds(4), t0);
  // Ten minutes without a call or a poll: every buffer is stale.
  const TimePoint later = t0 + std::chrono::minutes(10) + milliseconds(1);
  EXPECT_EQ(max.Poll(later), Duration::zero());
  // A call then is kept for the next 40 s at least (the ring's phase is
  // still t0's: rotations at whole 20 s steps from t0).
  max.Record(milliseconds(11), later);
  EXPECT_EQ(max.Poll(later + seconds(39)), milliseconds(11));
  EXPECT_EQ(max.Poll(later + seconds(60)), Duration::zero());
  // Zero and negative durations change nothing.
  max.Record(Duration::zero(), later + seconds(61));
  max.Record(-seconds(1), later + seconds(61));
  EXPECT_EQ(max.Poll(later + seconds(61)), Duration::zero());
}

TEST(TimeWindowMax, OneBufferIsAPlainTumblingWindow) {
  ManualClock clock;
  const TimePoint t0 = clock.Now();
  TimeWindowMax max(seconds(10), 1, t0);
  max.Record(milliseconds(1), t0 + seconds(9));
  EXPECT_EQ(max.Poll(t0 + seconds(10) - nanoseconds(1)), milliseconds(1));
  EXPECT_EQ(max.Poll(t0 + seconds(10)), Duration::zero());
}

// Micrometer's bucket series: 1, 2, 3, then 4..14, 16, 21, ..., 56, 64, ...
TEST(PercentileHistogramBuckets, AreMicrometersWithinTheExpectedRange) {
  std::vector<Duration> small = PercentileHistogramBuckets(nanoseconds(1), nanoseconds(64));
  std::vector<std::int64_t> ns;
  for (Duration d : small) ns.push_back(d.count());
  EXPECT_EQ(ns, (std::vector<std::int64_t>{1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                           13, 14, 16, 21, 26, 31, 36, 41, 46, 51, 56, 64}));
  // A timer's range, [1 ms, 4 ms]: both limits and 4^10's steps between.
  ns.clear();
  for (Duration d : PercentileHistogramBuckets(milliseconds(1), milliseconds(4))) {
    ns.push_back(d.count());
  }
  EXPECT_EQ(ns, (std::vector<std::int64_t>{1000000, 1048576, 1398101, 1747626, 2097151, 2446676,
                                           2796201, 3145726, 3495251, 3844776, 4000000}));
  // Micrometer's default timer range: 1 ms to 30 s, sorted, distinct.
  const std::vector<Duration> timer = PercentileHistogramBuckets(milliseconds(1), seconds(30));
  EXPECT_EQ(timer.front(), milliseconds(1));
  EXPECT_EQ(timer.back(), seconds(30));
  EXPECT_TRUE(std::adjacent_find(timer.begin(), timer.end(), std::greater_equal<>()) ==
              timer.end());
  EXPECT_EQ(timer.size(), 68u);
}

TEST(CallTimerOptions, AreValidated) {
  EXPECT_TRUE(ValidateCallTimerOptions({}).ok());
  EXPECT_FALSE(ValidateCallTimerOptions({.max_expiry = Duration::zero()}).ok());
  EXPECT_FALSE(ValidateCallTimerOptions({.max_buffer_length = 0}).ok());
  EXPECT_FALSE(ValidateCallTimerOptions({.max_buffer_length = 65}).ok());
  EXPECT_FALSE(ValidateCallTimerOptions({.minimum_expected_value = Duration::zero()}).ok());
  const Status s = ValidateCallTimerOptions(
      {.minimum_expected_value = seconds(2), .maximum_expected_value = seconds(1)});
  EXPECT_NE(std::string(s.message()).find("maximum_expected_value"), std::string::npos);
}

std::shared_ptr<const std::vector<Duration>> Bounds(std::vector<Duration> b) {
  return std::make_shared<const std::vector<Duration>>(std::move(b));
}

// `le` is inclusive; above the last bound is +Inf only; the counts are
// cumulative and end at the number of calls; kinds are kept apart.
TEST(CallTimer, CountsCumulativeBucketsByKind) {
  ManualClock clock;
  CallTimer timer(clock, {.percentiles_histogram = true},
                  Bounds({milliseconds(1), milliseconds(10), milliseconds(100)}));
  timer.Record(OutcomeKind::kSuccess, milliseconds(1));                   // le=0.001
  timer.Record(OutcomeKind::kSuccess, milliseconds(1) + nanoseconds(1));  // le=0.01
  timer.Record(OutcomeKind::kSuccess, milliseconds(10));                  // le=0.01
  timer.Record(OutcomeKind::kSuccess, seconds(5));                        // +Inf
  timer.Record(OutcomeKind::kFailure, milliseconds(50));                  // le=0.1
  const CallTimerSample s = timer.Sample();
  EXPECT_EQ(s.cumulative[0], (std::vector<std::uint64_t>{1, 3, 3, 4}));
  EXPECT_EQ(s.cumulative[1], (std::vector<std::uint64_t>{0, 0, 1, 1}));
  EXPECT_EQ(s.cumulative[2], (std::vector<std::uint64_t>{0, 0, 0, 0}));
  EXPECT_EQ(s.sum[0],
            milliseconds(1) + nanoseconds(1) + milliseconds(1) + milliseconds(10) + seconds(5));
  EXPECT_EQ(s.sum[1], milliseconds(50));
  EXPECT_EQ(s.max[0], seconds(5));
  EXPECT_EQ(s.max[1], milliseconds(50));
  EXPECT_EQ(s.max[2], Duration::zero());
  // The max decays on the timer's clock; the buckets do not.
  clock.Advance(seconds(60));
  const CallTimerSample later = timer.Sample();
  EXPECT_EQ(later.max[0], Duration::zero());
  EXPECT_EQ(later.cumulative[0], s.cumulative[0]);
}

TEST(CallTimer, WithoutBoundsKeepsOnlyTheMax) {
  ManualClock clock;
  CallTimer timer(clock, {}, nullptr);
  timer.Record(OutcomeKind::kIgnored, milliseconds(3));
  const CallTimerSample s = timer.Sample();
  EXPECT_EQ(s.bounds, nullptr);
  EXPECT_TRUE(s.cumulative[2].empty());
  EXPECT_EQ(s.max[2], milliseconds(3));
}

// Threads recording while another samples: every sample cumulative and
// monotone, nothing lost, the max the largest. Run under TSan too.
TEST(CallTimer, ConcurrentRecordingLosesNothing) {
  ManualClock clock;
  CallTimer timer(clock, {.percentiles_histogram = true},
                  Bounds(PercentileHistogramBuckets(milliseconds(1), seconds(30))));
  constexpr int kThreads = 4;
  constexpr int kCalls = 5000;
  std::atomic<bool> done{false};
  std::thread sampler([&] {
    std::uint64_t last = 0;
    while (!done.load()) {
      const CallTimerSample s = timer.Sample();
      const std::vector<std::uint64_t>& c = s.cumulative[0];
      ASSERT_TRUE(std::is_sorted(c.begin(), c.end()));
      ASSERT_GE(c.back(), last);
      last = c.back();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&timer, t] {
      for (int i = 1; i <= kCalls; ++i) {
        timer.Record(OutcomeKind::kSuccess, milliseconds(i % 97 + t));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  done = true;
  sampler.join();
  const CallTimerSample s = timer.Sample();
  EXPECT_EQ(s.cumulative[0].back(), std::uint64_t{kThreads} * kCalls);
  EXPECT_EQ(s.max[0], milliseconds(96 + kThreads - 1));
}

// A collector gives each breaker it attaches a timer on the breaker's clock;
// the breaker records every outcome into it; a second collector keeps it.
TEST(CallTimer, ACollectorTimesTheCallsOfTheBreakersItAttaches) {
  ManualClock clock;
  auto breaker = std::move(*CircuitBreaker::Create("payment", {}, clock));
  MetricsCollector metrics({.time_calls = true, .timer = {.percentiles_histogram = true}});
  metrics.Attach(*breaker);
  CallTimer* timer = breaker->call_timer();
  ASSERT_NE(timer, nullptr);
  breaker->TryAcquire()->Success(milliseconds(40));
  breaker->TryAcquire()->Success(milliseconds(20));
  breaker->TryAcquire()->Failure(milliseconds(70));
  breaker->TryAcquire()->Ignore();
  BreakerSample sample = metrics.Sample(*breaker);
  EXPECT_TRUE(sample.counters.timed);
  EXPECT_EQ(sample.counters.timer.max[0], milliseconds(40));
  EXPECT_EQ(sample.counters.timer.max[1], milliseconds(70));
  EXPECT_EQ(sample.counters.timer.cumulative[0].back(), 2u);
  EXPECT_EQ(sample.counters.timer.cumulative[2].back(), 1u);
  MetricsCollector other({.time_calls = false});
  other.Attach(*breaker);
  MetricsCollector third;
  third.Attach(*breaker);
  EXPECT_EQ(breaker->call_timer(), timer);
  // The breaker's timer decays on the breaker's clock.
  clock.Advance(seconds(61));
  sample = third.Sample(*breaker);
  EXPECT_EQ(sample.counters.timer.max[0], Duration::zero());
  EXPECT_EQ(sample.counters.timer.cumulative[0].back(), 2u);

  auto untimed = std::move(*CircuitBreaker::Create("untimed", {}, clock));
  other.Attach(*untimed);
  EXPECT_EQ(untimed->call_timer(), nullptr);
  EXPECT_FALSE(other.Sample(*untimed).counters.timed);
}

}  // namespace
}  // namespace fusebox
