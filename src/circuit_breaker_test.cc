// Unit tests of CircuitBreaker on testing::ManualClock: every transition and
// both sides of every boundary. Nothing here sleeps or reads real time.
// "Note point N" refers to the numbered points of docs/semantics.md ("The points").
#include "fusebox/circuit_breaker.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/backoff.h"
#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/testing/status_macros.h"

// Over 1,000 lines on purpose: one suite of ~100 tests that reads as the
// breaker's specification, section by section (CLOSED -> OPEN, TIME_BASED,
// OPEN, HALF_OPEN, timers, hints, operators, listeners, Call(), Validate(),
// metrics, late outcomes), all on the helpers above.
namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;

constexpr TimePoint kEpoch = ManualClock::kEpoch;
constexpr Duration kTick = Duration(1);  // one nanosecond

// The seed-004 shape: 10 calls, all needed, 50 %, 5 s, 3 probes.
CircuitBreakerConfig CountConfig() {
  CircuitBreakerConfig config;
  config.failure_rate_threshold = 50;
  config.permitted_number_of_calls_in_half_open_state = 3;
  config.sliding_window_type = SlidingWindowType::kCountBased;
  config.sliding_window_size = 10;
  config.minimum_number_of_calls = 10;
  config.wait_duration_in_open_state = 5s;
  return config;
}

// For FUSEBOX_ASSERT_OK_AND_ASSIGN: a breaker that cannot be made fails the
// test there, rather than crashing the binary on the first call.
Result<std::unique_ptr<CircuitBreaker>> Make(const CircuitBreakerConfig& config, Clock& clock,
                                             std::string name = "dep") {
  return CircuitBreaker::Create(std::move(name), config, clock);
}

void Succeed(CircuitBreaker& cb, Duration d = 1ms) {
  Result<Permit> p = cb.TryAcquire();
  ASSERT_TRUE(p.has_value()) << p.error();
  p->Success(d);
}

void Fail(CircuitBreaker& cb, Duration d = 1ms) {
  Result<Permit> p = cb.TryAcquire();
  ASSERT_TRUE(p.has_value()) << p.error();
  p->Failure(d);
}

// Records a success on each of `probes`, then expects CLOSED.
template <typename... P>
void SucceedAndExpectClosed(CircuitBreaker& cb, P&... probes) {
  (probes.Success(1ms), ...);
  EXPECT_EQ(cb.state(), State::kClosed);
}

// Expects a rejection with kCircuitOpen and `reason`; returns its retry_at.
std::optional<TimePoint> ExpectRejected(CircuitBreaker& cb, std::string_view reason) {
  Result<Permit> p = cb.TryAcquire();
  EXPECT_FALSE(p.has_value());
  if (p.has_value()) {
    p->Ignore();
    return std::nullopt;
  }
  EXPECT_EQ(p.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(p.error().reason(), reason);
  return p.error().retry_at();
}

// Trips a CountConfig()-like breaker (window 10, minimum 10, 50 %) with 10
// failures; returns the time it opened.
TimePoint Trip(CircuitBreaker& cb, int failures = 10) {
  for (int i = 0; i < failures; ++i) Fail(cb);
  EXPECT_EQ(cb.state(), State::kOpen);
  return cb.clock().Now();
}

struct Transition {
  State from;
  State to;
  TransitionReason reason;
  TimePoint at;
  std::optional<TimePoint> retry_at;
  std::string breaker;
  std::string detail;
  std::string actor;
  CircuitBreakerMetrics counts;
};

struct Rejection {
  State state;
  std::string reason;
  std::optional<TimePoint> retry_at;
};

class Recorder : public CircuitBreakerListener {
 public:
  void OnTransition(const TransitionEvent& e) override {
    transitions.push_back({e.from, e.to, e.reason, e.at, e.retry_at, std::string(e.breaker),
                           std::string(e.detail), std::string(e.actor), e.counts});
  }
  void OnRejection(const RejectionEvent& e) override {
    rejections.push_back({e.state, std::string(e.reason), e.retry_at});
  }
  void OnOutcome(const OutcomeEvent& e) override { outcomes.push_back(e); }

  std::vector<std::pair<State, State>> Path() const {
    std::vector<std::pair<State, State>> out;
    for (const auto& t : transitions) out.emplace_back(t.from, t.to);
    return out;
  }

  std::vector<Transition> transitions;
  std::vector<Rejection> rejections;
  std::vector<OutcomeEvent> outcomes;
};

// A Clock whose timers never run: Now() follows a ManualClock, ScheduleAt()
// only remembers. Proves that time-driven transitions are also checked on the
// calling path, not only by timers.
class NoTimerClock final : public Clock {
 public:
  TimePoint Now() const override { return clock.Now(); }
  void SleepUntil(TimePoint deadline) override { clock.SleepUntil(deadline); }
  TimerId ScheduleAt(TimePoint, std::function<void()>) override { return ++scheduled; }
  bool Cancel(TimerId) override { return true; }
  ManualClock clock;
  TimerId scheduled = 0;
};

// ---------------------------------------------------------------------------
// CLOSED -> OPEN

TEST(CircuitBreaker, ManualClockStartsAtWholeSecondEpoch) {
  ManualClock clock;
  EXPECT_EQ(clock.Now(), kEpoch);
  EXPECT_EQ(kEpoch.time_since_epoch() % 1s, Duration::zero());
}

TEST(CircuitBreaker, OpensWhenFailureRateReachesThreshold) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  for (int i = 0; i < 5; ++i) Succeed(*cb);
  for (int i = 0; i < 4; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);  // 5 of 10 = 50 % >= 50 (note point 6)
  EXPECT_EQ(cb->state(), State::kOpen);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.failure_rate, 50.0f);
  EXPECT_EQ(m.buffered_calls, 10);
  EXPECT_EQ(m.failed_calls, 5);
  EXPECT_EQ(m.successful_calls, 5);
  EXPECT_EQ(m.open_attempts, 1);
  EXPECT_EQ(m.retry_at, kEpoch + 5s);
  ASSERT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->transitions[0].from, State::kClosed);
  EXPECT_EQ(rec->transitions[0].to, State::kOpen);
  EXPECT_EQ(rec->transitions[0].reason, TransitionReason::kFailureRate);
  EXPECT_EQ(rec->transitions[0].retry_at, kEpoch + 5s);
  // The event carries the window that decided it.
  EXPECT_EQ(rec->transitions[0].counts.failure_rate, 50.0f);
  EXPECT_EQ(rec->transitions[0].counts.buffered_calls, 10);
  EXPECT_EQ(rec->transitions[0].counts.failed_calls, 5);
  EXPECT_EQ(rec->transitions[0].counts.successful_calls, 5);
}

TEST(CircuitBreaker, StaysClosedJustBelowFailureRateThreshold) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  for (int i = 0; i < 6; ++i) Succeed(*cb);
  for (int i = 0; i < 4; ++i) Fail(*cb);  // 4 of 10 = 40 %
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
}

TEST(CircuitBreaker, CountWindowSlidesOverTheLastCalls) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  for (int i = 0; i < 4; ++i) Fail(*cb);
  for (int i = 0; i < 6; ++i) Succeed(*cb);  // F F F F S S S S S S
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
  Succeed(*cb);  // F F F S S S S S S S: the oldest failure left
  EXPECT_EQ(cb->metrics().failure_rate, 30.0f);
  EXPECT_EQ(cb->metrics().buffered_calls, 10);
  Fail(*cb);  // F F S S S S S S S F: one failure out, one in
  Fail(*cb);  // F S S S S S S S F F
  Fail(*cb);  // S S S S S S S F F F
  EXPECT_EQ(cb->metrics().failure_rate, 30.0f);
  Fail(*cb);  // S S S S S S F F F F: a success out, a failure in
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);  // S S S S S F F F F F: 50 %
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, NothingTripsBelowMinimumNumberOfCalls) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  for (int i = 0; i < 9; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.failure_rate, -1.0f);  // note point 9
  EXPECT_EQ(m.slow_call_rate, -1.0f);
  EXPECT_EQ(m.buffered_calls, 9);
  EXPECT_EQ(m.failed_calls, 9);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, 100.0f);
}

TEST(CircuitBreaker, MinimumNumberOfCallsIsCappedAtCountWindowSize) {
  // Note point 8: COUNT_BASED caps minimum_number_of_calls at the window size.
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.sliding_window_size = 5;
  config.minimum_number_of_calls = 10;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb);
  Fail(*cb);
  Succeed(*cb);
  Succeed(*cb);
  EXPECT_EQ(cb->metrics().failure_rate, -1.0f);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);  // 3 of 5 = 60 %
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, 60.0f);
}

TEST(CircuitBreaker, TimeBasedMinimumIsNotCapped) {
  // Note point 8: a 2 s window never holds 5 calls at one call a second, so
  // 100 % failures never trip it.
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.sliding_window_type = SlidingWindowType::kTimeBased;
  config.sliding_window_size = 2;
  config.minimum_number_of_calls = 5;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  for (int i = 0; i < 20; ++i) {
    Fail(*cb);
    clock.Advance(1s);
  }
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().failure_rate, -1.0f);
}

TEST(CircuitBreaker, OpensWhenSlowCallRateReachesThreshold) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 1s;
  config.slow_call_rate_threshold = 50;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  for (int i = 0; i < 5; ++i) Succeed(*cb, 1s);  // exactly the threshold: not slow
  for (int i = 0; i < 4; ++i) Succeed(*cb, 1s + kTick);
  EXPECT_EQ(cb->state(), State::kClosed);
  Succeed(*cb, 1s + kTick);  // 5 of 10 slow = 50 %
  EXPECT_EQ(cb->state(), State::kOpen);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.slow_call_rate, 50.0f);
  EXPECT_EQ(m.failure_rate, 0.0f);
  EXPECT_EQ(m.slow_calls, 5);
  EXPECT_EQ(m.slow_successful_calls, 5);
  EXPECT_EQ(m.slow_failed_calls, 0);
  ASSERT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->transitions[0].reason, TransitionReason::kSlowCallRate);
}

TEST(CircuitBreaker, CallExactlyAtSlowThresholdIsNotSlow) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 1s;
  config.slow_call_rate_threshold = 10;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  for (int i = 0; i < 10; ++i) Succeed(*cb, 1s);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().slow_calls, 0);
  EXPECT_EQ(cb->metrics().slow_call_rate, 0.0f);
  Succeed(*cb, 1s + kTick);  // 1 of 10 = 10 %
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().slow_calls, 1);
}

TEST(CircuitBreaker, SlowFailureCountsAsFailedAndSlow) {
  // Note point 7.
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 1s;
  config.failure_rate_threshold = 100;
  config.slow_call_rate_threshold = 100;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb, 2s);
  Succeed(*cb, 2s);
  Fail(*cb, 1ms);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 3);
  EXPECT_EQ(m.failed_calls, 2);
  EXPECT_EQ(m.slow_calls, 2);
  EXPECT_EQ(m.slow_failed_calls, 1);
  EXPECT_EQ(m.slow_successful_calls, 1);
  EXPECT_EQ(m.successful_calls, 1);
}

TEST(CircuitBreaker, RatesAreFloatsComparedWithAFloatThreshold) {
  // Note point 17: 1 in 3 is 33.333332f; a threshold of 33.3333334 is the same
  // float, so it opens (in double arithmetic 33.3333333... < 33.3333334).
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.sliding_window_size = 3;
  config.minimum_number_of_calls = 3;
  config.failure_rate_threshold = 33.3333334f;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb);
  Succeed(*cb);
  Succeed(*cb);
  EXPECT_EQ(cb->metrics().failure_rate, 100.0f / 3);
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, FloatThresholdJustAboveOneThirdDoesNotOpen) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.sliding_window_size = 3;
  config.minimum_number_of_calls = 3;
  config.failure_rate_threshold = 33.34f;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb);
  Succeed(*cb);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
}

// ---------------------------------------------------------------------------
// TIME_BASED windows (note point 10)

CircuitBreakerConfig TimeConfig() {
  CircuitBreakerConfig config = CountConfig();
  config.sliding_window_type = SlidingWindowType::kTimeBased;
  config.sliding_window_size = 10;  // seconds
  config.minimum_number_of_calls = 5;
  return config;
}

TEST(CircuitBreaker, TimeBasedOutcomeStillCountsOneTickBeforeItAgesOut) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(TimeConfig(), clock));
  clock.Advance(500ms);  // inside epoch second 0
  for (int i = 0; i < 4; ++i) Fail(*cb);
  clock.Set(kEpoch + 10s - kTick);  // last tick of second 9: second 0 is still in
  EXPECT_EQ(cb->metrics().buffered_calls, 4);
  Succeed(*cb);  // 4 of 5 = 80 %
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, TimeBasedOutcomesAgeOutAfterWindowSizeSeconds) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(TimeConfig(), clock));
  clock.Advance(500ms);
  for (int i = 0; i < 4; ++i) Fail(*cb);
  EXPECT_EQ(cb->metrics().buffered_calls, 4);
  clock.Set(kEpoch + 10s);  // second 10: second 0 has left the window
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  EXPECT_EQ(cb->metrics().failed_calls, 0);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().buffered_calls, 1);
  EXPECT_EQ(cb->metrics().failure_rate, -1.0f);
}

TEST(CircuitBreaker, TimeBasedSuccessLandsInTheSecondOfTheCallersCoarseRead) {
  // Permit::Success(d, coarse_now): the window takes the success's second
  // from the caller's read (Call() hands on its end read), not from a read
  // of its own; a read from a second the window has left is not trusted.
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(TimeConfig(), clock));
  clock.Advance(500ms);  // second 0
  const TimePoint in_second_0 = clock.CoarseNow();
  Succeed(*cb);
  Succeed(*cb);                // the window is clean: successes go to the striped counters
  clock.Set(kEpoch + 1500ms);  // second 1
  cb->TryAcquire()->Success(1ms, in_second_0);
  clock.Set(kEpoch + 10s);  // second 0 has left the window, second 1 has not
  EXPECT_EQ(cb->metrics().buffered_calls, 0) << "counted in second 0, as the caller read";
  // A read from second 0 now, when the window is at second 10: counted now.
  cb->TryAcquire()->Success(1ms, in_second_0);
  EXPECT_EQ(cb->metrics().buffered_calls, 1);
  clock.Set(kEpoch + 19s);
  EXPECT_EQ(cb->metrics().buffered_calls, 1) << "in second 10, still in the window";
}

TEST(CircuitBreaker, TimeBasedSuccessesOfAnotherThreadAreFoldedOnceInTheirSecond) {
  // A clean TIME_BASED window: a thread counts its successes in a word of its
  // own, without the lock; a fold on another thread (here metrics()) must
  // take each success once, in the second it was counted in, and leave the
  // word to its owner.
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(TimeConfig(), clock));
  const auto succeed_on_a_thread = [&](int n) {
    std::thread t([&] {
      for (int i = 0; i < n; ++i) Succeed(*cb);
    });
    t.join();
  };
  clock.Advance(100ms);  // second 0
  succeed_on_a_thread(7);
  EXPECT_EQ(cb->metrics().buffered_calls, 7);
  succeed_on_a_thread(5);
  EXPECT_EQ(cb->metrics().buffered_calls, 12) << "each success once, not the word's count again";
  Succeed(*cb);  // this thread's own word
  EXPECT_EQ(cb->metrics().buffered_calls, 13);
  clock.Set(kEpoch + 3s);  // second 3: every word is from second 0
  succeed_on_a_thread(4);
  Succeed(*cb);
  EXPECT_EQ(cb->metrics().buffered_calls, 18);
  clock.Set(kEpoch + 10s);  // second 0 leaves the window, second 3 stays
  EXPECT_EQ(cb->metrics().buffered_calls, 5) << "counted in the second they were counted in";
  clock.Set(kEpoch + 13s);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  // Failures after that see exactly the successes the other thread counted.
  succeed_on_a_thread(6);
  for (int i = 0; i < 4; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().buffered_calls, 10);
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
  Fail(*cb);  // 5 of 11
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);  // 6 of 12
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, TimeBasedWindowSumsPerSecondBuckets) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(TimeConfig(), clock));
  // A failure in each of seconds 0 and 1, a success in each of seconds 2..8.
  for (int s = 0; s < 9; ++s) {
    clock.Set(kEpoch + std::chrono::seconds(s) + 100ms);
    if (s < 2) {
      Fail(*cb);
    } else {
      Succeed(*cb);
    }
  }
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().buffered_calls, 9);
  EXPECT_EQ(cb->metrics().failed_calls, 2);
  EXPECT_EQ(cb->metrics().failure_rate, 2 * 100.0f / 9);  // float, note point 17
  clock.Set(kEpoch + 10s);                                // second 0 aged out
  EXPECT_EQ(cb->metrics().buffered_calls, 8);
  EXPECT_EQ(cb->metrics().failed_calls, 1);
  clock.Set(kEpoch + 11s + 999ms);  // seconds 0 and 1 aged out
  EXPECT_EQ(cb->metrics().buffered_calls, 7);
  EXPECT_EQ(cb->metrics().failed_calls, 0);
  EXPECT_EQ(cb->metrics().failure_rate, 0.0f);
}

// The success fast paths (a full, clean COUNT_BASED window; striped success
// counters for a clean TIME_BASED window) must leave the window exactly as
// the slow path would. Each test runs with and without an outcome listener,
// which turns the fast paths off.
class FastPathTest : public ::testing::TestWithParam<bool> {
 protected:
  Result<std::unique_ptr<CircuitBreaker>> MakeWithOptionalListener(
      const CircuitBreakerConfig& config) {
    Result<std::unique_ptr<CircuitBreaker>> cb = Make(config, clock_);
    if (cb && GetParam()) (*cb)->AddListener(std::make_shared<Recorder>());
    return cb;
  }
  ManualClock clock_;
};

TEST_P(FastPathTest, CountWindowAfterManySuccessesStillTrips) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, MakeWithOptionalListener(CountConfig()));
  for (int i = 0; i < 25; ++i) Succeed(*cb);
  EXPECT_EQ(cb->metrics().buffered_calls, 10);
  EXPECT_EQ(cb->metrics().successful_calls, 10);
  EXPECT_EQ(cb->metrics().failure_rate, 0.0f);
  for (int i = 0; i < 4; ++i) Fail(*cb);
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
  Succeed(*cb);  // pushes out a success
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
  for (int i = 0; i < 5; ++i) Succeed(*cb);  // pushes out the last old success
  EXPECT_EQ(cb->metrics().failure_rate, 40.0f);
  Succeed(*cb);  // pushes out the first failure
  EXPECT_EQ(cb->metrics().failure_rate, 30.0f);
  for (int i = 0; i < 3; ++i) Succeed(*cb);
  EXPECT_EQ(cb->metrics().failure_rate, 0.0f);
  for (int i = 0; i < 4; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, 50.0f);
}

TEST_P(FastPathTest, TimeWindowCountsAndAgesManySuccesses) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, MakeWithOptionalListener(TimeConfig()));
  for (int i = 0; i < 100; ++i) Succeed(*cb);  // second 0
  Fail(*cb);
  EXPECT_EQ(cb->metrics().buffered_calls, 101);
  EXPECT_EQ(cb->metrics().failure_rate, 100.0f / 101);
  clock_.Set(kEpoch + 5s);
  for (int i = 0; i < 5; ++i) Succeed(*cb);  // second 5
  EXPECT_EQ(cb->metrics().buffered_calls, 106);
  clock_.Set(kEpoch + 10s);  // second 0 leaves
  EXPECT_EQ(cb->metrics().buffered_calls, 5);
  EXPECT_EQ(cb->metrics().failed_calls, 0);
  for (int i = 0; i < 4; ++i) Fail(*cb);  // 4 of 9
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);  // 5 of 10
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, 50.0f);
}

TEST_P(FastPathTest, TimeWindowSuccessesAfterAgingOutFailures) {
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, MakeWithOptionalListener(TimeConfig()));
  for (int i = 0; i < 4; ++i) Fail(*cb);  // second 0
  clock_.Set(kEpoch + 10s);               // gone: the window is clean again
  for (int i = 0; i < 50; ++i) Succeed(*cb);
  EXPECT_EQ(cb->metrics().buffered_calls, 50);
  EXPECT_EQ(cb->metrics().failed_calls, 0);
  for (int i = 0; i < 50; ++i) Fail(*cb);  // 50 of 100
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, 50.0f);
}

INSTANTIATE_TEST_SUITE_P(CircuitBreaker, FastPathTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("WithOutcomeListener")
                                             : std::string("WithoutListener");
                         });

// ---------------------------------------------------------------------------
// OPEN

TEST(CircuitBreaker, OpenRejectsWithRetryAtTheEndOfTheWait) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  clock.Advance(123ms);
  const TimePoint opened = Trip(*cb);
  clock.Advance(1s);
  EXPECT_EQ(ExpectRejected(*cb, "open"), opened + 5s);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 1);
  EXPECT_EQ(cb->metrics().buffered_calls, 10);  // rejections are not recorded
}

TEST(CircuitBreaker, OpenEndsStrictlyAfterTheWait) {
  // Note point 1, on a manual clock: one tick before and at the end still rejected,
  // one tick after admitted.
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s - kTick);
  ExpectRejected(*cb, "open");
  EXPECT_EQ(cb->state(), State::kOpen);
  clock.Set(opened + 5s);
  ExpectRejected(*cb, "open");
  EXPECT_EQ(cb->state(), State::kOpen);  // lazy: nothing moves it (note point 2)
  clock.Set(opened + 5s + kTick);
  EXPECT_EQ(cb->state(), State::kOpen);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe.Success(1ms);
}

TEST(CircuitBreaker, RejectedCallsAreCountedAndCarriedByState) {
  // Note point 11.
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  for (int i = 0; i < 3; ++i) ExpectRejected(*cb, "open");
  EXPECT_EQ(cb->metrics().not_permitted_calls, 3);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p1, cb->TryAcquire());
  EXPECT_EQ(cb->metrics().not_permitted_calls, 0);  // HALF_OPEN starts fresh
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p2, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p3, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  EXPECT_EQ(cb->metrics().not_permitted_calls, 1);
  p1.Failure(1ms);
  p2.Failure(1ms);
  p3.Failure(1ms);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 1);  // carried into OPEN
  ExpectRejected(*cb, "open");
  EXPECT_EQ(cb->metrics().not_permitted_calls, 2);
}

TEST(CircuitBreaker, TryRejectRecordsAnOpenRejectionLikeTryAcquire) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  EXPECT_EQ(cb->TryReject(), std::nullopt);  // CLOSED: nothing to refuse
  EXPECT_EQ(cb->metrics().not_permitted_calls, 0);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s);  // the last instant of the wait
  const std::optional<Status> rejected = cb->TryReject();
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(rejected->reason(), "open");
  EXPECT_EQ(rejected->retry_at(), opened + 5s);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 1);
  EXPECT_EQ(cb->totals().not_permitted_calls, 1);
  ASSERT_EQ(rec->rejections.size(), 1u);
  EXPECT_EQ(rec->rejections[0].reason, "open");
  // The wait is over: the call that ends OPEN is TryAcquire's, not this one's.
  clock.Set(opened + 5s + kTick);
  EXPECT_EQ(cb->TryReject(), std::nullopt);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 1);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  // HALF_OPEN, even full, is TryAcquire's to decide.
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p2, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p3, cb->TryAcquire());
  EXPECT_EQ(cb->TryReject(), std::nullopt);
  ExpectRejected(*cb, "half_open_full");
  SucceedAndExpectClosed(*cb, probe, p2, p3);
}

TEST(CircuitBreaker, TryRejectRefusesWhileForcedOpenOnly) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->ForceOpen({.reason = "maintenance", .expires_after = 60s});
  const std::optional<Status> rejected = cb->TryReject();
  ASSERT_TRUE(rejected.has_value());
  EXPECT_EQ(rejected->reason(), "forced_open");
  EXPECT_EQ(rejected->retry_at(), kEpoch + 60s);
  cb->Disable({});
  EXPECT_EQ(cb->TryReject(), std::nullopt);
  cb->ForceClosed({});
  EXPECT_EQ(cb->TryReject(), std::nullopt);
  cb->ForceOpen({});  // no expiry
  ASSERT_TRUE(cb->TryReject().has_value());
  EXPECT_EQ(cb->TryReject()->retry_at(), std::nullopt);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 2);  // since the last transition
  EXPECT_EQ(cb->totals().not_permitted_calls, 3);
}

// ---------------------------------------------------------------------------
// HALF_OPEN

TEST(CircuitBreaker, HalfOpenAdmitsExactlyPermittedCallsThenRejects) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  std::vector<Permit> probes;
  for (int i = 0; i < 3; ++i) {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
    probes.push_back(std::move(probe));
  }
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  ExpectRejected(*cb, "half_open_full");
  ExpectRejected(*cb, "half_open_full");
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.failure_rate, -1.0f);  // note point 9: no verdict yet
  EXPECT_EQ(m.buffered_calls, 0);
  for (auto& p : probes) p.Success(1ms);
}

TEST(CircuitBreaker, HalfOpenClosesWhenProbeFailureRateIsBelowThreshold) {
  // Note point 5: 1 failure in 3 probes is 33 % < 50 %: it closes.
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  Succeed(*cb);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  EXPECT_EQ(cb->metrics().buffered_calls, 2);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  const CircuitBreakerMetrics m = cb->metrics();  // note point 13: a new window
  EXPECT_EQ(m.buffered_calls, 0);
  EXPECT_EQ(m.failure_rate, -1.0f);
  EXPECT_EQ(m.open_attempts, 0);
  ASSERT_EQ(rec->transitions.size(), 3u);
  EXPECT_EQ(rec->transitions[2].reason, TransitionReason::kProbesSucceeded);
  // It needs a full minimum of new calls before it can trip again.
  for (int i = 0; i < 9; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, HalfOpenReopensWhenProbeFailureRateReachesThreshold) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 4;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  Fail(*cb);
  Succeed(*cb);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  clock.Advance(7ms);
  Fail(*cb);  // 2 of 4 = 50 %
  EXPECT_EQ(cb->state(), State::kOpen);
  const TimePoint reopened = clock.Now();
  EXPECT_EQ(cb->metrics().open_attempts, 2);
  EXPECT_EQ(cb->metrics().retry_at, reopened + 5s);
  EXPECT_EQ(ExpectRejected(*cb, "open"), reopened + 5s);
  ASSERT_EQ(rec->transitions.size(), 3u);
  EXPECT_EQ(rec->transitions[2].reason, TransitionReason::kProbesFailed);
  EXPECT_EQ(rec->transitions[2].from, State::kHalfOpen);
  EXPECT_EQ(rec->transitions[2].to, State::kOpen);
}

TEST(CircuitBreaker, HalfOpenVerdictAfterMinimumNumberOfCallsWhenSmaller) {
  // Note point 5: the verdict comes after min(minimum, permitted) results.
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.minimum_number_of_calls = 2;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb);
  Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  clock.Advance(5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit third,
                               cb->TryAcquire());  // still in flight when the verdict comes
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  third.Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, AnyFailureReopensPolicyReopensOnFirstFailedProbe) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.half_open_policy = HalfOpenPolicy::kAnyFailureReopens;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit in_flight, cb->TryAcquire());
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().retry_at, clock.Now() + 5s);
  in_flight.Success(1ms);
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, AnyFailureReopensPolicyClosesAfterPermittedSuccesses) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.half_open_policy = HalfOpenPolicy::kAnyFailureReopens;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  Succeed(*cb);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, AnyFailureReopensPolicyCountsSlowProbeAsFailure) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.half_open_policy = HalfOpenPolicy::kAnyFailureReopens;
  config.slow_call_duration_threshold = 1s;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  Succeed(*cb, 1s + kTick);
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, IgnoredOutcomeInHalfOpenGivesTheSlotBack) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit a, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit b, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit c, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  b.Ignore();
  EXPECT_EQ(cb->metrics().buffered_calls, 0);  // not recorded
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit d, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  a.Success(1ms);
  c.Success(1ms);
  EXPECT_EQ(cb->state(), State::kHalfOpen);  // only 2 results so far
  d.Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, DroppedPermitGivesTheSlotBack) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit a, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit b, cb->TryAcquire());
  {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit dropped, cb->TryAcquire());
    ExpectRejected(*cb, "half_open_full");
    EXPECT_TRUE(dropped.pending());
  }  // destroyed without an outcome
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit c, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  SucceedAndExpectClosed(*cb, a, b, c);
}

TEST(CircuitBreaker, MovedFromPermitIsNotPendingAndGivesNothingBack) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit a, cb->TryAcquire());
  Permit b = std::move(a);
  EXPECT_FALSE(a.pending());  // NOLINT(bugprone-use-after-move): that is the test
  EXPECT_TRUE(b.pending());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit c, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit d, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  b.Success(1ms);
  EXPECT_FALSE(b.pending());
  SucceedAndExpectClosed(*cb, c, d);
}

// ---------------------------------------------------------------------------
// max_wait_duration_in_half_open_state (note point 16)

CircuitBreakerConfig MaxWaitConfig(State target) {
  CircuitBreakerConfig config = CountConfig();
  config.max_wait_duration_in_half_open_state = 10s;
  config.transition_to_state_after_wait_duration = target;
  return config;
}

TEST(CircuitBreaker, MaxWaitInHalfOpenMovesToOpenByTimer) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(MaxWaitConfig(State::kOpen), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  const TimePoint entered = clock.Now();
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  ASSERT_EQ(cb->state(), State::kHalfOpen);
  clock.Set(entered + 10s - kTick);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  clock.Set(entered + 10s);  // the timer fires; no call needed
  EXPECT_EQ(cb->state(), State::kOpen);
  ASSERT_FALSE(rec->transitions.empty());
  EXPECT_EQ(rec->transitions.back().reason, TransitionReason::kHalfOpenTimeout);
  EXPECT_EQ(rec->transitions.back().from, State::kHalfOpen);
  EXPECT_EQ(rec->transitions.back().to, State::kOpen);
  // A new full wait.
  EXPECT_EQ(cb->metrics().retry_at, entered + 10s + 5s);
  EXPECT_EQ(ExpectRejected(*cb, "open"), entered + 10s + 5s);
  probe.Success(1ms);  // in flight across the timeout: decides nothing
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, MaxWaitInHalfOpenMovesToClosedByTimer) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(MaxWaitConfig(State::kClosed), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  const TimePoint entered = clock.Now();
  Fail(*cb);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  clock.Set(entered + 10s - kTick);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  clock.Set(entered + 10s);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(rec->transitions.back().reason, TransitionReason::kHalfOpenTimeout);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);  // a fresh window
  EXPECT_EQ(cb->metrics().failure_rate, -1.0f);
  probe.Failure(1ms);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, MaxWaitInHalfOpenIsAlsoCheckedOnTheNextCall) {
  NoTimerClock clock;  // timers never fire
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(MaxWaitConfig(State::kOpen), clock));
  Trip(*cb);
  clock.clock.Advance(5s + kTick);
  const TimePoint entered = clock.Now();
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  clock.clock.Set(entered + 10s - kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit second, cb->TryAcquire());  // still HALF_OPEN
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  clock.clock.Set(entered + 10s + kTick);
  ExpectRejected(*cb, "open");
  EXPECT_EQ(cb->state(), State::kOpen);
  probe.Ignore();
  second.Ignore();
}

TEST(CircuitBreaker, MaxWaitToClosedIsAlsoCheckedOnTheNextCall) {
  NoTimerClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(MaxWaitConfig(State::kClosed), clock));
  Trip(*cb);
  clock.clock.Advance(5s + kTick);
  const TimePoint entered = clock.Now();
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit a, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit b, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit c, cb->TryAcquire());
  clock.clock.Set(entered + 10s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit d,
                               cb->TryAcquire());  // half-open was full; now CLOSED admits
  EXPECT_EQ(cb->state(), State::kClosed);
  a.Ignore();
  b.Ignore();
  c.Ignore();
  d.Success(1ms);
}

TEST(CircuitBreaker, ZeroMaxWaitMeansHalfOpenWaitsForever) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  clock.Advance(24h);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe.Success(1ms);
}

// ---------------------------------------------------------------------------
// Automatic OPEN -> HALF_OPEN, interval functions, jitter

TEST(CircuitBreaker, AutomaticTransitionMovesToHalfOpenAtTheDeadlineWithoutACall) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.automatic_transition_from_open_to_half_open_enabled = true;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s - kTick);
  EXPECT_EQ(cb->state(), State::kOpen);
  clock.Set(opened + 5s);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  ASSERT_EQ(rec->transitions.size(), 2u);
  EXPECT_EQ(rec->transitions[1].reason, TransitionReason::kWaitElapsed);
  EXPECT_EQ(rec->transitions[1].from, State::kOpen);
  EXPECT_EQ(rec->transitions[1].to, State::kHalfOpen);
  for (int i = 0; i < 3; ++i) Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, WaitIntervalFunctionGrowsWithEachReopening) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 1;
  config.wait_interval_function = backoff::Exponential({.initial = 5s, .multiplier = 2, .max = 1h});
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  TimePoint opened = Trip(*cb);
  EXPECT_EQ(cb->metrics().open_attempts, 1);
  EXPECT_EQ(cb->metrics().retry_at, opened + 5s);
  const Duration expected[] = {10s, 20s, 40s};
  for (int attempt = 2; attempt <= 4; ++attempt) {
    clock.Set(*cb->metrics().retry_at + kTick);
    Fail(*cb);  // the single probe fails: reopen
    ASSERT_EQ(cb->state(), State::kOpen);
    opened = clock.Now();
    EXPECT_EQ(cb->metrics().open_attempts, attempt);
    EXPECT_EQ(cb->metrics().retry_at, opened + expected[attempt - 2]) << "attempt " << attempt;
  }
  // Closing resets the attempt count.
  clock.Set(*cb->metrics().retry_at + kTick);
  Succeed(*cb);
  ASSERT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().open_attempts, 0);
  opened = Trip(*cb);
  EXPECT_EQ(cb->metrics().retry_at, opened + 5s);
}

// Open durations of successive reopenings with a single-probe breaker.
std::vector<Duration> OpenDurations(const CircuitBreakerConfig& base, std::string name, int n) {
  ManualClock clock;
  CircuitBreakerConfig config = base;
  config.permitted_number_of_calls_in_half_open_state = 1;
  Result<std::unique_ptr<CircuitBreaker>> made = Make(config, clock, std::move(name));
  EXPECT_TRUE(made.has_value()) << made.error();
  if (!made) return {};  // fails the comparison that follows, not the binary
  std::unique_ptr<CircuitBreaker> cb = *std::move(made);
  std::vector<Duration> out;
  Trip(*cb);
  for (int i = 0; i < n; ++i) {
    const TimePoint opened = clock.Now();
    const std::optional<TimePoint> until = cb->metrics().retry_at;
    EXPECT_TRUE(until.has_value());
    if (!until) break;
    out.push_back(*until - opened);
    clock.Set(*until + kTick);
    Fail(*cb);
  }
  return out;
}

TEST(CircuitBreaker, OpenDurationJitterStaysWithinBoundsAndIsReproducible) {
  CircuitBreakerConfig config = CountConfig();
  config.wait_duration_in_open_state = 10s;
  config.open_duration_jitter = 0.5;
  config.jitter_seed = 42;
  const std::vector<Duration> a = OpenDurations(config, "dep", 20);
  ASSERT_EQ(a.size(), 20u);
  std::set<Duration::rep> distinct;
  for (Duration d : a) {
    EXPECT_GE(d, 5s);
    EXPECT_LE(d, 15s);
    distinct.insert(d.count());
  }
  EXPECT_GT(distinct.size(), 10u) << "jitter should spread the waits";
  // Same seed, same sequence (whatever the name).
  EXPECT_EQ(OpenDurations(config, "other", 20), a);
  // Another seed, another sequence.
  CircuitBreakerConfig other = config;
  other.jitter_seed = 43;
  EXPECT_NE(OpenDurations(other, "dep", 20), a);
}

TEST(CircuitBreaker, OpenDurationJitterSeedDefaultsToTheName) {
  CircuitBreakerConfig config = CountConfig();
  config.wait_duration_in_open_state = 10s;
  config.open_duration_jitter = 0.3;
  const std::vector<Duration> a = OpenDurations(config, "payment", 10);
  EXPECT_EQ(OpenDurations(config, "payment", 10), a);
  EXPECT_NE(OpenDurations(config, "inventory", 10), a);
  for (Duration d : a) {
    EXPECT_GE(d, 7s);
    EXPECT_LE(d, 13s);
  }
}

TEST(CircuitBreaker, NoJitterMeansExactWait) {
  CircuitBreakerConfig config = CountConfig();
  for (Duration d : OpenDurations(config, "dep", 5)) EXPECT_EQ(d, 5s);
}

// ---------------------------------------------------------------------------
// consecutive_failure_threshold, open_for hints

TEST(CircuitBreaker, OpensAfterConsecutiveFailures) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.sliding_window_size = 100;
  config.minimum_number_of_calls = 100;
  config.consecutive_failure_threshold = 3;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  Fail(*cb);
  Fail(*cb);
  Succeed(*cb);  // breaks the streak
  Fail(*cb);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);
  ASSERT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->transitions[0].reason, TransitionReason::kConsecutiveFailures);
  EXPECT_EQ(cb->metrics().retry_at, clock.Now() + 5s);
}

TEST(CircuitBreaker, OpenForHintOpensAtOnceRegardlessOfMinimumCalls) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.minimum_number_of_calls = 100;
  config.sliding_window_size = 100;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  Succeed(*cb);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, cb->TryAcquire());
  p.Record(Outcome::OpenFor(30s));
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 30s);
  EXPECT_EQ(ExpectRejected(*cb, "open"), kEpoch + 30s);
  ASSERT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->transitions[0].reason, TransitionReason::kOpenForHint);
  EXPECT_EQ(rec->transitions[0].retry_at, kEpoch + 30s);
  clock.Set(kEpoch + 30s);
  ExpectRejected(*cb, "open");
  clock.Set(kEpoch + 30s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe.Success(1ms);
}

// A later hint arrives while OPEN: the permits were taken in CLOSED and are
// reported after the first hint opened the breaker. The hint is about the
// dependency, not the window ("whatever the window says"), so it applies in
// both compatibility modes.
void ExpectHintsNeverShortenButExtend(Compatibility compat) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.compatibility = compat;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit first, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit shorter, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit longer, cb->TryAcquire());
  first.Record(Outcome::OpenFor(30s));
  ASSERT_EQ(cb->state(), State::kOpen);
  clock.Advance(1s);
  shorter.Record(Outcome::OpenFor(10s));  // would end at 11 s: ignored
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 30s);
  EXPECT_EQ(ExpectRejected(*cb, "open"), kEpoch + 30s);
  clock.Advance(1s);
  longer.Record(Outcome::OpenFor(60s));  // ends at 62 s: extends
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 62s);
  EXPECT_EQ(ExpectRejected(*cb, "open"), kEpoch + 62s);
  clock.Set(kEpoch + 30s + kTick);
  ExpectRejected(*cb, "open");
  clock.Set(kEpoch + 62s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe.Success(1ms);
}

TEST(CircuitBreaker, OpenForHintNeverShortensButExtends) {
  ExpectHintsNeverShortenButExtend(Compatibility::kDefault);
}

TEST(CircuitBreaker, OpenForHintNeverShortensButExtendsInResilience4jMode) {
  ExpectHintsNeverShortenButExtend(Compatibility::kResilience4j);
}

TEST(CircuitBreaker, OpenForHintIsNotJittered) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.open_duration_jitter = 0.5;
  config.jitter_seed = 7;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, cb->TryAcquire());
  p.Record(Outcome::OpenFor(20s));
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 20s);
}

// ---------------------------------------------------------------------------
// Operator overrides

TEST(CircuitBreaker, ForceOpenRejectsAndExpiresByTimer) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  clock.Advance(3s);
  cb->ForceOpen({.reason = "maintenance", .actor = "alice", .expires_after = 60s});
  EXPECT_EQ(cb->state(), State::kForcedOpen);
  const std::optional<TimePoint> retry = ExpectRejected(*cb, "forced_open");
  EXPECT_EQ(retry, kEpoch + 63s);
  const std::optional<OverrideInfo> info = cb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state, State::kForcedOpen);
  EXPECT_EQ(info->reason, "maintenance");
  EXPECT_EQ(info->actor, "alice");
  EXPECT_EQ(info->since, kEpoch + 3s);
  EXPECT_EQ(info->expires_at, kEpoch + 63s);
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 63s);
  ASSERT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->transitions[0].reason, TransitionReason::kOperator);
  EXPECT_EQ(rec->transitions[0].to, State::kForcedOpen);
  EXPECT_EQ(rec->transitions[0].detail, "maintenance");
  EXPECT_EQ(rec->transitions[0].actor, "alice");

  clock.Set(kEpoch + 63s - kTick);
  EXPECT_EQ(cb->state(), State::kForcedOpen);
  clock.Set(kEpoch + 63s);  // the expiry timer runs
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_FALSE(cb->active_override().has_value());
  ASSERT_EQ(rec->transitions.size(), 2u);
  EXPECT_EQ(rec->transitions[1].from, State::kForcedOpen);
  EXPECT_EQ(rec->transitions[1].to, State::kClosed);
  EXPECT_EQ(rec->transitions[1].reason, TransitionReason::kOverrideExpired);
  Succeed(*cb);
}

TEST(CircuitBreaker, ForceOpenWithoutExpiryStaysUntilChanged) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->ForceOpen();
  clock.Advance(24h);
  EXPECT_EQ(cb->state(), State::kForcedOpen);
  ExpectRejected(*cb, "forced_open");
  const std::optional<OverrideInfo> info = cb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_FALSE(info->expires_at.has_value());
  cb->Reset();
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_FALSE(cb->active_override().has_value());
}

TEST(CircuitBreaker, OverrideExpiryIsAlsoCheckedOnTheNextCall) {
  NoTimerClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->ForceOpen({.reason = "r", .actor = "a", .expires_after = 10s});
  clock.clock.Advance(10s - kTick);
  ExpectRejected(*cb, "forced_open");
  clock.clock.Advance(2 * kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kClosed);
  p.Success(1ms);
}

TEST(CircuitBreaker, ForceClosedRecordsButNeverTrips) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->ForceClosed({.reason = "incident 42", .actor = "bob", .expires_after = 30s});
  EXPECT_EQ(cb->state(), State::kForcedClosed);
  for (int i = 0; i < 20; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kForcedClosed);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 10);
  EXPECT_EQ(m.failed_calls, 10);
  EXPECT_EQ(m.failure_rate, 100.0f);
  const std::optional<OverrideInfo> info = cb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state, State::kForcedClosed);
  EXPECT_EQ(info->reason, "incident 42");
  EXPECT_EQ(info->actor, "bob");
  EXPECT_EQ(info->expires_at, kEpoch + 30s);
  clock.Advance(30s);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_FALSE(cb->active_override().has_value());
}

TEST(CircuitBreaker, DisableLetsEverythingPassAndRecordsNothing) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  Trip(*cb);
  cb->Disable({.reason = "dependency is optional", .actor = "carol", .expires_after = 5min});
  EXPECT_EQ(cb->state(), State::kDisabled);
  for (int i = 0; i < 30; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kDisabled);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  EXPECT_EQ(cb->metrics().failed_calls, 0);
  const std::optional<OverrideInfo> info = cb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state, State::kDisabled);
  EXPECT_EQ(info->actor, "carol");
  clock.Advance(5min - kTick);
  EXPECT_EQ(cb->state(), State::kDisabled);
  clock.Advance(kTick);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, MetricsOnlyRecordsButNeverTrips) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->MetricsOnly({.reason = "shadow", .actor = "dave", .expires_after = 1h});
  EXPECT_EQ(cb->state(), State::kMetricsOnly);
  for (int i = 0; i < 10; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kMetricsOnly);
  EXPECT_EQ(cb->metrics().failed_calls, 10);
  EXPECT_EQ(cb->metrics().failure_rate, 100.0f);
  const std::optional<OverrideInfo> info = cb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state, State::kMetricsOnly);
  EXPECT_EQ(info->reason, "shadow");
  EXPECT_EQ(info->expires_at, kEpoch + 1h);
  clock.Advance(1h);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, ResetReturnsToClosedWithAnEmptyWindow) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  Trip(*cb);
  cb->Reset("fixed", "erin");
  EXPECT_EQ(cb->state(), State::kClosed);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 0);
  EXPECT_EQ(m.failure_rate, -1.0f);
  EXPECT_EQ(m.not_permitted_calls, 0);
  ASSERT_EQ(rec->transitions.size(), 2u);
  EXPECT_EQ(rec->transitions[1].from, State::kOpen);
  EXPECT_EQ(rec->transitions[1].to, State::kClosed);
  EXPECT_EQ(rec->transitions[1].reason, TransitionReason::kOperator);
  EXPECT_EQ(rec->transitions[1].detail, "fixed");
  EXPECT_EQ(rec->transitions[1].actor, "erin");
  Succeed(*cb);
}

TEST(CircuitBreaker, TransitionToOpenKeepsTheWindowAndWaits) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  Fail(*cb);
  Fail(*cb);
  Succeed(*cb);
  ASSERT_TRUE(cb->TransitionToOpen().ok());
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().buffered_calls, 3);
  EXPECT_EQ(cb->metrics().failed_calls, 2);
  EXPECT_EQ(ExpectRejected(*cb, "open"), kEpoch + 5s);
  ASSERT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->transitions[0].reason, TransitionReason::kOperator);
  clock.Set(kEpoch + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  p.Success(1ms);
}

TEST(CircuitBreaker, TransitionToHalfOpenAdmitsProbes) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  ASSERT_TRUE(cb->TransitionToHalfOpen().ok());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit a, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit b, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit c, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  a.Failure(1ms);
  b.Failure(1ms);
  c.Success(1ms);
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, TransitionToClosedStartsAnEmptyWindow) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  Trip(*cb);
  cb->TransitionToClosed();
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  for (int i = 0; i < 9; ++i) Fail(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, StateNamesAreResilience4jNames) {
  EXPECT_EQ(StateName(State::kClosed), "CLOSED");
  EXPECT_EQ(StateName(State::kOpen), "OPEN");
  EXPECT_EQ(StateName(State::kHalfOpen), "HALF_OPEN");
  EXPECT_EQ(StateName(State::kDisabled), "DISABLED");
  EXPECT_EQ(StateName(State::kMetricsOnly), "METRICS_ONLY");
  EXPECT_EQ(StateName(State::kForcedOpen), "FORCED_OPEN");
  EXPECT_EQ(StateName(State::kForcedClosed), "FORCED_CLOSED");
}

// ---------------------------------------------------------------------------
// Listeners

TEST(CircuitBreaker, ListenerSeesEveryTransitionInOrder) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock, "payment"));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  for (int i = 0; i < 3; ++i) Fail(*cb);
  const TimePoint reopened = clock.Now();
  clock.Set(reopened + 5s + kTick);
  for (int i = 0; i < 3; ++i) Succeed(*cb);
  const std::vector<std::pair<State, State>> want = {
      {State::kClosed, State::kOpen},     {State::kOpen, State::kHalfOpen},
      {State::kHalfOpen, State::kOpen},   {State::kOpen, State::kHalfOpen},
      {State::kHalfOpen, State::kClosed},
  };
  EXPECT_EQ(rec->Path(), want);
  ASSERT_EQ(rec->transitions.size(), 5u);
  const TransitionReason reasons[] = {
      TransitionReason::kFailureRate, TransitionReason::kWaitElapsed,
      TransitionReason::kProbesFailed, TransitionReason::kWaitElapsed,
      TransitionReason::kProbesSucceeded};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(rec->transitions[i].reason, reasons[i]) << i;
    EXPECT_EQ(rec->transitions[i].breaker, "payment") << i;
  }
  EXPECT_EQ(rec->transitions[0].at, opened);
  EXPECT_EQ(rec->transitions[0].retry_at, opened + 5s);
  EXPECT_EQ(rec->transitions[1].at, opened + 5s + kTick);
  EXPECT_EQ(rec->transitions[2].at, reopened);
  EXPECT_EQ(rec->transitions[2].retry_at, reopened + 5s);
  // Counts: the window that decided each transition.
  EXPECT_EQ(rec->transitions[0].counts.failed_calls, 10);
  EXPECT_EQ(rec->transitions[0].counts.failure_rate, 100.0f);
  EXPECT_EQ(rec->transitions[2].counts.buffered_calls, 3);  // the probe window
  EXPECT_EQ(rec->transitions[2].counts.failed_calls, 3);
  EXPECT_EQ(rec->transitions[2].counts.failure_rate, 100.0f);
  EXPECT_EQ(rec->transitions[4].counts.buffered_calls, 3);
  EXPECT_EQ(rec->transitions[4].counts.successful_calls, 3);
  EXPECT_EQ(rec->transitions[4].counts.failure_rate, 0.0f);
}

TEST(CircuitBreaker, OneEventCanHoldTwoTransitions) {
  // Note point 2: the lazy acquire moves to HALF_OPEN and its probe decides.
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 1;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  Succeed(*cb);
  const std::vector<std::pair<State, State>> want = {
      {State::kClosed, State::kOpen},
      {State::kOpen, State::kHalfOpen},
      {State::kHalfOpen, State::kClosed},
  };
  EXPECT_EQ(rec->Path(), want);
}

TEST(CircuitBreaker, ListenerSeesRejectionsAndOutcomes) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 1s;
  config.slow_call_rate_threshold = 100;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock, "payment"));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  Succeed(*cb, 2s);
  Fail(*cb, 5ms);
  ASSERT_EQ(rec->outcomes.size(), 2u);
  EXPECT_EQ(rec->outcomes[0].state, State::kClosed);
  EXPECT_EQ(rec->outcomes[0].kind, OutcomeKind::kSuccess);
  EXPECT_EQ(rec->outcomes[0].duration, 2s);
  EXPECT_TRUE(rec->outcomes[0].slow);
  EXPECT_FALSE(rec->outcomes[0].late);
  EXPECT_EQ(rec->outcomes[1].kind, OutcomeKind::kFailure);
  EXPECT_EQ(rec->outcomes[1].duration, 5ms);
  EXPECT_FALSE(rec->outcomes[1].slow);
  for (int i = 0; i < 8; ++i) Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(rec->outcomes.size(), 10u);
  EXPECT_TRUE(rec->rejections.empty());
  ExpectRejected(*cb, "open");
  ASSERT_EQ(rec->rejections.size(), 1u);
  EXPECT_EQ(rec->rejections[0].state, State::kOpen);
  EXPECT_EQ(rec->rejections[0].reason, "open");
  EXPECT_EQ(rec->rejections[0].retry_at, kEpoch + 5s);
  clock.Set(kEpoch + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit a, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit b, cb->TryAcquire());
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit c, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  ASSERT_EQ(rec->rejections.size(), 2u);
  EXPECT_EQ(rec->rejections[1].state, State::kHalfOpen);
  EXPECT_EQ(rec->rejections[1].reason, "half_open_full");
  a.Success(1ms);
  b.Success(1ms);
  c.Success(1ms);
  ASSERT_EQ(rec->outcomes.size(), 13u);
  EXPECT_EQ(rec->outcomes.back().state, State::kHalfOpen);
}

class ThrowingListener : public CircuitBreakerListener {
 public:
  void OnTransition(const TransitionEvent&) override { throw std::runtime_error("transition"); }
  void OnRejection(const RejectionEvent&) override { throw 42; }
};

TEST(CircuitBreaker, ThrowingListenerDoesNotBreakTheBreaker) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->AddListener(std::make_shared<ThrowingListener>());
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  const TimePoint opened = Trip(*cb);  // one transition: one error
  EXPECT_EQ(cb->metrics().listener_errors, 1);
  ExpectRejected(*cb, "open");  // one rejection: another
  EXPECT_EQ(cb->metrics().listener_errors, 2);
  // The listener behind the thrower still got everything.
  EXPECT_EQ(rec->transitions.size(), 1u);
  EXPECT_EQ(rec->rejections.size(), 1u);
  clock.Set(opened + 5s + kTick);
  for (int i = 0; i < 3; ++i) Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().listener_errors, 4);  // + OPEN->HALF_OPEN, HALF_OPEN->CLOSED
  EXPECT_EQ(rec->transitions.size(), 3u);
}

class ThrowingOutcomeListener : public CircuitBreakerListener {
 public:
  void OnOutcome(const OutcomeEvent&) override { throw std::runtime_error("outcome"); }
};

TEST(CircuitBreaker, ThrowingOutcomeListenerIsCountedPerEvent) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->AddListener(std::make_shared<ThrowingOutcomeListener>());
  Succeed(*cb);
  Fail(*cb);
  Succeed(*cb);
  EXPECT_EQ(cb->metrics().listener_errors, 3);
  EXPECT_EQ(cb->metrics().buffered_calls, 3);
  EXPECT_EQ(cb->metrics().failed_calls, 1);
}

TEST(CircuitBreaker, LaterOverrideReplacesEarlierOne) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->ForceOpen({.reason = "first", .actor = "a", .expires_after = 10s});
  cb->Disable({.reason = "second", .actor = "b"});
  EXPECT_EQ(cb->state(), State::kDisabled);
  const std::optional<OverrideInfo> info = cb->active_override();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->state, State::kDisabled);
  EXPECT_EQ(info->reason, "second");
  EXPECT_FALSE(info->expires_at.has_value());
  clock.Advance(10s);  // the first override's expiry must not end the second
  EXPECT_EQ(cb->state(), State::kDisabled);
  EXPECT_TRUE(cb->active_override().has_value());
}

TEST(CircuitBreaker, IsQuiescentOnlyWhenClosedAndClean) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  EXPECT_TRUE(cb->IsQuiescent());
  Succeed(*cb);
  EXPECT_TRUE(cb->IsQuiescent());
  Fail(*cb);
  EXPECT_FALSE(cb->IsQuiescent());
  cb->Reset();
  EXPECT_TRUE(cb->IsQuiescent());
  ASSERT_TRUE(cb->TransitionToOpen().ok());
  EXPECT_FALSE(cb->IsQuiescent());
  cb->Reset();
  cb->ForceClosed({.reason = "r", .actor = "a"});
  EXPECT_FALSE(cb->IsQuiescent());
}

TEST(CircuitBreaker, RemovedListenerHearsNothingMore) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto rec = std::make_shared<Recorder>();
  const std::uint64_t id = cb->AddListener(rec);
  Succeed(*cb);
  EXPECT_EQ(rec->outcomes.size(), 1u);
  EXPECT_TRUE(cb->RemoveListener(id));
  EXPECT_FALSE(cb->RemoveListener(id));
  Trip(*cb, 9);  // S + 9 F = 90 %
  ExpectRejected(*cb, "open");
  EXPECT_EQ(rec->outcomes.size(), 1u);
  EXPECT_TRUE(rec->transitions.empty());
  EXPECT_TRUE(rec->rejections.empty());
}

TEST(CircuitBreaker, ListenerIdsAreDistinct) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const std::uint64_t a = cb->AddListener(std::make_shared<Recorder>());
  const std::uint64_t b = cb->AddListener(std::make_shared<Recorder>());
  EXPECT_NE(a, b);
  EXPECT_TRUE(cb->RemoveListener(b));
  EXPECT_TRUE(cb->RemoveListener(a));
}

// ---------------------------------------------------------------------------
// Call()

TEST(CircuitBreaker, CallReturnsResultOfTheValue) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  Result<int> r = cb->Call([] { return 42; });
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(*r, 42);
  Result<std::string> s = cb->Call([] { return std::string("receipt"); });
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(*s, "receipt");
  EXPECT_EQ(cb->metrics().successful_calls, 2);
}

TEST(CircuitBreaker, CallReturnsStatusForVoid) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  int runs = 0;
  Status s = cb->Call([&] { ++runs; });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cb->metrics().successful_calls, 1);
}

TEST(CircuitBreaker, CallPassesStatusThroughAndCountsNonOkAsFailure) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  Status ok = cb->Call([] { return Status(); });
  EXPECT_TRUE(ok.ok());
  Status s = cb->Call([] { return Status::Unavailable("payment down"); });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "payment down");
  EXPECT_EQ(cb->metrics().failed_calls, 1);
  EXPECT_EQ(cb->metrics().successful_calls, 1);
}

TEST(CircuitBreaker, CallPassesResultThroughAndCountsErrorAsFailure) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  Result<int> good = cb->Call([]() -> Result<int> { return 7; });
  ASSERT_TRUE(good.has_value());
  EXPECT_EQ(*good, 7);
  Result<int> bad = cb->Call([]() -> Result<int> { return Status(StatusCode::kTimeout, "3 s"); });
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code(), StatusCode::kTimeout);
  EXPECT_EQ(bad.error().message(), "3 s");
  EXPECT_EQ(cb->metrics().failed_calls, 1);
  EXPECT_EQ(cb->metrics().successful_calls, 1);
}

TEST(CircuitBreaker, CallWithClassifierReturningOutcomeKind) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  auto classify = [](const int& code) {
    if (code >= 500) return OutcomeKind::kFailure;
    if (code >= 400) return OutcomeKind::kIgnored;
    return OutcomeKind::kSuccess;
  };
  Result<int> a = cb->Call([] { return 200; }, classify);
  Result<int> b = cb->Call([] { return 503; }, classify);
  Result<int> c = cb->Call([] { return 404; }, classify);
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(b.has_value());  // the value is returned whatever the classification
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*b, 503);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.successful_calls, 1);
  EXPECT_EQ(m.failed_calls, 1);
  EXPECT_EQ(m.buffered_calls, 2);  // the ignored one is not recorded
}

TEST(CircuitBreaker, CallWithClassifierReturningOutcomeWithOpenFor) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.minimum_number_of_calls = 100;
  config.sliding_window_size = 100;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  int runs = 0;
  Result<int> r = cb->Call(
      [&] {
        ++runs;
        return 429;
      },
      [](const int& code) { return code == 429 ? Outcome::OpenFor(90s) : Outcome::Success(); });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 429);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 90s);
  Result<int> rejected = cb->Call([&] {
    ++runs;
    return 200;
  });
  ASSERT_FALSE(rejected.has_value());
  EXPECT_EQ(rejected.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(rejected.error().retry_at(), kEpoch + 90s);
  EXPECT_EQ(runs, 1);
}

TEST(CircuitBreaker, CallMeasuresDurationOnTheClock) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 1s;
  config.call_timing = CallTiming::kPrecise;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  Result<int> r = cb->Call([&] {
    clock.Advance(2s);
    return 1;
  });
  ASSERT_TRUE(r.has_value());
  Status s = cb->Call([&] { clock.Advance(1s); });  // exactly the threshold: not slow
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(cb->metrics().slow_calls, 1);
  ASSERT_EQ(rec->outcomes.size(), 2u);
  EXPECT_EQ(rec->outcomes[0].duration, 2s);
  EXPECT_TRUE(rec->outcomes[0].slow);
  EXPECT_EQ(rec->outcomes[1].duration, 1s);
  EXPECT_FALSE(rec->outcomes[1].slow);
}

// A ManualClock that counts its reads (timers never run).
class CountingClock final : public Clock {
 public:
  TimePoint Now() const override {
    ++precise_reads;
    return clock.Now();
  }
  TimePoint CoarseNow() const override {
    ++coarse_reads;
    return clock.Now();
  }
  void SleepUntil(TimePoint deadline) override { clock.SleepUntil(deadline); }
  TimerId ScheduleAt(TimePoint, std::function<void()>) override { return 0; }
  bool Cancel(TimerId) override { return true; }
  ManualClock clock;
  mutable int precise_reads = 0;
  mutable int coarse_reads = 0;
};

TEST(CircuitBreaker, ACoarselyTimedCallOnATimeBasedWindowReadsTheClockTwice) {
  // Call() hands its end read on to the record: the TIME_BASED window takes
  // the success's second from it instead of reading the clock a third time.
  CountingClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(TimeConfig(), clock));
  ASSERT_TRUE(cb->Call([] { return 1; }).has_value());  // arms the window's second
  for (int i = 0; i < 2; ++i) {
    const int coarse = clock.coarse_reads;
    const int precise = clock.precise_reads;
    if (i == 0) {
      ASSERT_TRUE(cb->Call([] { return 1; }).has_value());
    } else {
      ASSERT_TRUE(cb->Call([] {}).ok());
    }
    EXPECT_EQ(clock.coarse_reads - coarse, 2) << (i == 0 ? "value" : "void");
    EXPECT_EQ(clock.precise_reads - precise, 0);
  }
  EXPECT_EQ(cb->metrics().buffered_calls, 3);
}

TEST(CircuitBreaker, AClockOtherThanSystemClockIsReadThroughItsOwnReads) {
  // The hot reads skip the virtual call for SystemClock() only
  // (internal/system_clock.h): any other Clock is asked, and its time decides.
  // The manual time is 1,000 days ahead of the real one: a breaker that read
  // the system clock instead would never see its OPEN wait end.
  CountingClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  const int before = clock.coarse_reads;
  ASSERT_TRUE(cb->Call([] { return 1; }).has_value());
  // The call's start and end at least (a window still filling reads a third).
  EXPECT_GE(clock.coarse_reads - before, 2);
  const TimePoint opened = Trip(*cb, 9);
  clock.clock.Set(opened + 5s);
  const int open_reads = clock.coarse_reads;
  ExpectRejected(*cb, "open");
  EXPECT_EQ(clock.coarse_reads - open_reads, 1);  // OPEN's one read
  clock.clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe.Success(1ms);
}

TEST(CircuitBreaker, ASystemClockBreakerTimesAndWaitsInRealTime) {
  // SystemClock()'s inline reads: a call that runs 10 ms of real time is
  // slow at a 5 ms threshold (timed precisely), and OPEN ends no earlier
  // than its real wait. Real time only: a bounded spin, no sleep.
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 5ms;
  config.wait_duration_in_open_state = 50ms;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, SystemClock()));
  Clock& real = SystemClock();
  ASSERT_TRUE(cb->precise_call_timing());
  const TimePoint start = real.Now();
  ASSERT_TRUE(cb->Call([&] {
                  while (real.Now() - start < 10ms) {
                    // Spins: the call's duration is the point.
                  }
                  return 1;
                }).has_value());
  EXPECT_EQ(cb->metrics().slow_calls, 1);
  Trip(*cb, 9);
  const TimePoint after_trip = real.Now();
  const std::optional<TimePoint> retry_at = ExpectRejected(*cb, "open");
  ASSERT_TRUE(retry_at.has_value());
  EXPECT_LE(*retry_at, after_trip + 50ms);
  EXPECT_GE(*retry_at, start + 10ms + 50ms);  // opened after the 10 ms call
  Result<Permit> probe = cb->TryAcquire();
  while (!probe.has_value() && real.Now() < after_trip + 10s) probe = cb->TryAcquire();
  ASSERT_TRUE(probe.has_value()) << "OPEN never ended on the system clock";
  EXPECT_GT(real.Now(), *retry_at);
  probe->Success(1ms);
}

TEST(CircuitBreaker, CallRecordsAndRethrowsExceptionsUnchanged) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  try {
    (void)cb->Call([]() -> int { throw std::runtime_error("boom"); });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "boom");
  }
  struct Custom {
    int code;
  };
  try {
    (void)cb->Call([] { throw Custom{7}; });
    ADD_FAILURE() << "no exception";
  } catch (const Custom& c) {
    EXPECT_EQ(c.code, 7);
  }
  EXPECT_EQ(cb->metrics().failed_calls, 2);
}

TEST(CircuitBreaker, CallClassifiesExceptionsWithTheConfiguredClassifier) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.exception_classifier = [](const std::exception_ptr& e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::invalid_argument&) {
      return Outcome::Ignored();
    } catch (const std::overflow_error&) {
      return Outcome::OpenFor(45s);
    } catch (...) {
      return Outcome::Failure();
    }
  };
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  EXPECT_THROW((void)cb->Call([]() -> int { throw std::invalid_argument("client"); }),
               std::invalid_argument);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  EXPECT_THROW((void)cb->Call([]() -> int { throw std::logic_error("bug"); }), std::logic_error);
  EXPECT_EQ(cb->metrics().failed_calls, 1);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_THROW((void)cb->Call([] { throw std::overflow_error("quota"); }), std::overflow_error);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().retry_at, kEpoch + 45s);
}

TEST(CircuitBreaker, RejectedCallDoesNotRunTheCallable) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  ASSERT_TRUE(cb->TransitionToOpen().ok());
  int runs = 0;
  Result<int> r = cb->Call([&] { return ++runs; });
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(r.error().reason(), "open");
  EXPECT_EQ(r.error().retry_at(), kEpoch + 5s);
  Status v = cb->Call([&] { ++runs; });
  EXPECT_EQ(v.code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(v.reason(), "open");
  Status st = cb->Call([&] {
    ++runs;
    return Status();
  });
  EXPECT_EQ(st.code(), StatusCode::kCircuitOpen);
  Result<double> rr = cb->Call([&]() -> Result<double> {
    ++runs;
    return 1.5;
  });
  ASSERT_FALSE(rr.has_value());
  EXPECT_EQ(rr.error().code(), StatusCode::kCircuitOpen);
  EXPECT_THROW(
      {
        Status thrown = cb->Call([&] {
          ++runs;
          throw std::runtime_error("never");
        });
        (void)thrown;
        throw std::logic_error("rejected without running");
      },
      std::logic_error);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 5);
}

TEST(CircuitBreaker, ForcedOpenCallIsRejectedWithForcedOpenReason) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  cb->ForceOpen({.reason = "drill", .actor = "ops"});
  int runs = 0;
  Status s = cb->Call([&] { ++runs; });
  EXPECT_EQ(s.code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(s.reason(), "forced_open");
  EXPECT_EQ(runs, 0);
}

// ---------------------------------------------------------------------------
// Validate() and Create()

struct BadField {
  const char* field;
  std::function<void(CircuitBreakerConfig&)> breaks;
};

std::vector<BadField> BadFields() {
  return {
      {"failure_rate_threshold", [](auto& c) { c.failure_rate_threshold = 0; }},
      {"failure_rate_threshold", [](auto& c) { c.failure_rate_threshold = -5; }},
      {"failure_rate_threshold", [](auto& c) { c.failure_rate_threshold = 100.5f; }},
      {"slow_call_rate_threshold", [](auto& c) { c.slow_call_rate_threshold = 0; }},
      {"slow_call_rate_threshold", [](auto& c) { c.slow_call_rate_threshold = 101; }},
      {"slow_call_duration_threshold",
       [](auto& c) { c.slow_call_duration_threshold = Duration::zero(); }},
      {"slow_call_duration_threshold", [](auto& c) { c.slow_call_duration_threshold = -1s; }},
      {"permitted_number_of_calls_in_half_open_state",
       [](auto& c) { c.permitted_number_of_calls_in_half_open_state = 0; }},
      {"max_wait_duration_in_half_open_state",
       [](auto& c) { c.max_wait_duration_in_half_open_state = -1s; }},
      {"transition_to_state_after_wait_duration",
       [](auto& c) { c.transition_to_state_after_wait_duration = State::kHalfOpen; }},
      {"transition_to_state_after_wait_duration",
       [](auto& c) { c.transition_to_state_after_wait_duration = State::kForcedOpen; }},
      {"sliding_window_size", [](auto& c) { c.sliding_window_size = 0; }},
      {"sliding_window_size", [](auto& c) { c.sliding_window_size = -3; }},
      {"minimum_number_of_calls", [](auto& c) { c.minimum_number_of_calls = 0; }},
      {"wait_duration_in_open_state",
       [](auto& c) { c.wait_duration_in_open_state = Duration::zero(); }},
      {"wait_duration_in_open_state", [](auto& c) { c.wait_duration_in_open_state = -1s; }},
      {"consecutive_failure_threshold", [](auto& c) { c.consecutive_failure_threshold = -1; }},
      {"open_duration_jitter", [](auto& c) { c.open_duration_jitter = 1.0; }},
      {"open_duration_jitter", [](auto& c) { c.open_duration_jitter = -0.1; }},
  };
}

TEST(CircuitBreaker, DefaultAndSeedConfigsAreValid) {
  EXPECT_TRUE(CircuitBreakerConfig{}.Validate().ok()) << CircuitBreakerConfig{}.Validate();
  EXPECT_TRUE(CountConfig().Validate().ok());
  CircuitBreakerConfig edge = CountConfig();
  edge.failure_rate_threshold = 100;
  edge.slow_call_rate_threshold = 100;
  edge.slow_call_duration_threshold = kTick;
  edge.open_duration_jitter = 0.999;
  edge.max_wait_duration_in_half_open_state = Duration::zero();
  edge.transition_to_state_after_wait_duration = State::kClosed;
  edge.consecutive_failure_threshold = 0;
  edge.permitted_number_of_calls_in_half_open_state = 1;
  edge.sliding_window_size = 1;
  edge.minimum_number_of_calls = 1;
  EXPECT_TRUE(edge.Validate().ok()) << edge.Validate();
  // wait_duration_in_open_state is not needed when an interval function is set.
  CircuitBreakerConfig with_fn = CountConfig();
  with_fn.wait_duration_in_open_state = Duration::zero();
  with_fn.wait_interval_function = backoff::Fixed(5s);
  EXPECT_TRUE(with_fn.Validate().ok()) << with_fn.Validate();
}

TEST(CircuitBreaker, ValidateNamesEachBadField) {
  for (const BadField& bad : BadFields()) {
    CircuitBreakerConfig config = CountConfig();
    bad.breaks(config);
    const Status s = config.Validate();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad.field;
    EXPECT_THAT(std::string(s.message()), HasSubstr(bad.field)) << bad.field;
  }
}

TEST(CircuitBreaker, CreateFailsWithInvalidArgumentNamingTheField) {
  ManualClock clock;
  for (const BadField& bad : BadFields()) {
    CircuitBreakerConfig config = CountConfig();
    bad.breaks(config);
    auto created = CircuitBreaker::Create("dep", config, clock);
    ASSERT_FALSE(created.has_value()) << bad.field;
    EXPECT_EQ(created.error().code(), StatusCode::kInvalidArgument) << bad.field;
    EXPECT_THAT(std::string(created.error().message()), HasSubstr(bad.field)) << bad.field;
  }
}

TEST(CircuitBreaker, CreateKeepsNameConfigAndClock) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb,
                               Make(CountConfig(), clock, "payment-api:charge:ap-northeast"));
  EXPECT_EQ(cb->name(), "payment-api:charge:ap-northeast");
  EXPECT_EQ(cb->config().sliding_window_size, 10);
  EXPECT_EQ(&cb->clock(), &clock);
  EXPECT_EQ(cb->state(), State::kClosed);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kClosed);
  EXPECT_EQ(m.buffered_calls, 0);
  EXPECT_EQ(m.failure_rate, -1.0f);
  EXPECT_EQ(m.not_permitted_calls, 0);
  EXPECT_FALSE(m.retry_at.has_value());
  EXPECT_FALSE(cb->active_override().has_value());
}

// ---------------------------------------------------------------------------
// Metrics

TEST(CircuitBreaker, MetricsCountEverything) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.slow_call_duration_threshold = 100ms;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Succeed(*cb, 10ms);
  Succeed(*cb, 200ms);
  Fail(*cb, 10ms);
  Fail(*cb, 300ms);
  {
    FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit p, cb->TryAcquire());
    p.Ignore();
  }
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kClosed);
  EXPECT_EQ(m.buffered_calls, 4);
  EXPECT_EQ(m.successful_calls, 2);
  EXPECT_EQ(m.failed_calls, 2);
  EXPECT_EQ(m.slow_calls, 2);
  EXPECT_EQ(m.slow_successful_calls, 1);
  EXPECT_EQ(m.slow_failed_calls, 1);
  EXPECT_EQ(m.not_permitted_calls, 0);
  EXPECT_EQ(m.failure_rate, -1.0f);
  for (int i = 0; i < 6; ++i) Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  ExpectRejected(*cb, "open");
  ExpectRejected(*cb, "open");
  m = cb->metrics();  // note point 12: OPEN reports the window that tripped
  EXPECT_EQ(m.state, State::kOpen);
  EXPECT_EQ(m.buffered_calls, 10);
  EXPECT_EQ(m.failed_calls, 8);
  EXPECT_EQ(m.failure_rate, 80.0f);
  EXPECT_EQ(m.slow_call_rate, 20.0f);
  EXPECT_EQ(m.not_permitted_calls, 2);
}

TEST(CircuitBreaker, TimeBasedMetricsKeepAgingWhileOpen) {
  // Note point 12: the tripped TIME_BASED window ages while OPEN.
  ManualClock clock;
  CircuitBreakerConfig config = TimeConfig();
  config.wait_duration_in_open_state = 60s;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  for (int i = 0; i < 5; ++i) Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, 100.0f);
  clock.Set(kEpoch + 10s);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  EXPECT_EQ(cb->metrics().failure_rate, -1.0f);
}

TEST(CircuitBreaker, HalfOpenUsesCountWindowEvenWhenClosedWindowIsTimeBased) {
  // Note point 5: probes go into a COUNT_BASED window of size permitted.
  ManualClock clock;
  CircuitBreakerConfig config = TimeConfig();
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  for (int i = 0; i < 5; ++i) Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  clock.Advance(5s + kTick);
  Fail(*cb);
  clock.Advance(20s);  // a time window would have dropped that failure
  Fail(*cb);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  Succeed(*cb);
  EXPECT_EQ(cb->state(), State::kOpen);  // 2 of 3
}

// ---------------------------------------------------------------------------
// Compatibility: late outcomes (note points 4 and 14)

TEST(CircuitBreaker, DefaultModeDropsOutcomeFromClosedEpochReportedInHalfOpen) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 1;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  auto rec = std::make_shared<Recorder>();
  cb->AddListener(rec);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit late, cb->TryAcquire());  // taken in CLOSED
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  ASSERT_EQ(cb->state(), State::kHalfOpen);
  late.Failure(1ms);
  EXPECT_EQ(cb->state(), State::kHalfOpen);  // decides nothing
  EXPECT_EQ(cb->metrics().late_outcomes, 1);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  ASSERT_FALSE(rec->outcomes.empty());
  EXPECT_TRUE(rec->outcomes.back().late);
  probe.Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, Resilience4jModeCountsOutcomeFromClosedAsProbe) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 1;
  config.compatibility = Compatibility::kResilience4j;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit late, cb->TryAcquire());
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  ASSERT_EQ(cb->state(), State::kHalfOpen);
  late.Failure(1ms);  // 1 of 1 failed: reopen
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().late_outcomes, 0);
  EXPECT_EQ(cb->metrics().open_attempts, 2);
  probe.Success(1ms);  // after the verdict: into the next window, no transition
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST(CircuitBreaker, DefaultModeDropsOutcomeFromClosedReportedInOpen) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit late, cb->TryAcquire());
  for (int i = 0; i < 5; ++i) Succeed(*cb);
  for (int i = 0; i < 5; ++i) Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  late.Failure(1ms);
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.failed_calls, 5);
  EXPECT_EQ(m.failure_rate, 50.0f);
  EXPECT_EQ(m.late_outcomes, 1);
  EXPECT_EQ(m.state, State::kOpen);
}

TEST(CircuitBreaker, Resilience4jModeAddsOutcomeReportedInOpenToTheTrippedWindow) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.compatibility = Compatibility::kResilience4j;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit late, cb->TryAcquire());
  for (int i = 0; i < 5; ++i) Succeed(*cb);
  for (int i = 0; i < 5; ++i) Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  const std::optional<TimePoint> until = cb->metrics().retry_at;
  clock.Advance(1s);
  late.Failure(1ms);  // the oldest success leaves, a failure comes in
  const CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.failed_calls, 6);
  EXPECT_EQ(m.buffered_calls, 10);
  EXPECT_EQ(m.failure_rate, 60.0f);
  EXPECT_EQ(m.late_outcomes, 0);
  EXPECT_EQ(m.state, State::kOpen);  // no transition
  EXPECT_EQ(m.retry_at, until);      // and no new wait
}

TEST(CircuitBreaker, DefaultModeIgnoredPermitFromClosedGivesNoProbeSlot) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 1;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit early, cb->TryAcquire());
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  early.Ignore();
  ExpectRejected(*cb, "half_open_full");
  probe.Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST(CircuitBreaker, Resilience4jModeIgnoredPermitFromClosedGivesAProbeSlot) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 1;
  config.compatibility = Compatibility::kResilience4j;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit early, cb->TryAcquire());
  const TimePoint opened = Trip(*cb);
  clock.Set(opened + 5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit probe, cb->TryAcquire());
  ExpectRejected(*cb, "half_open_full");
  early.Ignore();  // note point 14: more than `permitted` probes get in
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit extra, cb->TryAcquire());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe.Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
  extra.Success(1ms);
}

TEST(CircuitBreaker, Resilience4jModeProbeReportedAfterVerdictGoesIntoTheNextWindow) {
  // Note point 4: probe results reported after the verdict go into the next
  // window (CLOSED here).
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.minimum_number_of_calls = 2;
  config.compatibility = Compatibility::kResilience4j;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb);
  Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  clock.Advance(5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit straggler, cb->TryAcquire());
  Succeed(*cb);
  Succeed(*cb);
  ASSERT_EQ(cb->state(), State::kClosed);
  straggler.Failure(1ms);
  EXPECT_EQ(cb->metrics().buffered_calls, 1);
  EXPECT_EQ(cb->metrics().failed_calls, 1);
  EXPECT_EQ(cb->metrics().late_outcomes, 0);
}

TEST(CircuitBreaker, DefaultModeProbeReportedAfterVerdictIsDropped) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.minimum_number_of_calls = 2;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  Fail(*cb);
  Fail(*cb);
  ASSERT_EQ(cb->state(), State::kOpen);
  clock.Advance(5s + kTick);
  FUSEBOX_ASSERT_OK_AND_ASSIGN(Permit straggler, cb->TryAcquire());
  Succeed(*cb);
  Succeed(*cb);
  ASSERT_EQ(cb->state(), State::kClosed);
  straggler.Failure(1ms);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  EXPECT_EQ(cb->metrics().late_outcomes, 1);
}

TEST(CircuitBreaker, Resilience4jModeMatchesDefaultOnOrdinaryCycles) {
  for (Compatibility compat : {Compatibility::kDefault, Compatibility::kResilience4j}) {
    ManualClock clock;
    CircuitBreakerConfig config = CountConfig();
    config.compatibility = compat;
    FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
    auto rec = std::make_shared<Recorder>();
    cb->AddListener(rec);
    const TimePoint opened = Trip(*cb);
    clock.Set(opened + 5s + kTick);
    Succeed(*cb);
    Fail(*cb);
    Succeed(*cb);
    EXPECT_EQ(cb->state(), State::kClosed);
    EXPECT_EQ(rec->transitions.size(), 3u);
  }
}

}  // namespace
}  // namespace fusebox

namespace fusebox {
namespace {

// totals(): counts since creation, by outcome, with durations; never reset by
// transitions (unlike metrics(), which is the current window).
TEST(CircuitBreakerTotals, CountEveryOutcomeSinceCreationAcrossTransitions) {
  testing::ManualClock clock;
  CircuitBreakerConfig config;
  config.sliding_window_size = 4;
  config.minimum_number_of_calls = 4;
  config.permitted_number_of_calls_in_half_open_state = 2;
  config.slow_call_duration_threshold = std::chrono::milliseconds(100);
  config.wait_duration_in_open_state = std::chrono::seconds(10);
  auto b = *CircuitBreaker::Create("totals", config, clock);
  b->TryAcquire()->Success(std::chrono::milliseconds(5));
  b->TryAcquire()->Success(std::chrono::milliseconds(150));  // slow
  b->TryAcquire()->Ignore();
  b->TryAcquire()->Failure(std::chrono::milliseconds(7));
  b->TryAcquire()->Failure(std::chrono::milliseconds(200));  // slow; 3 of 4 bad: opens
  ASSERT_EQ(b->state(), State::kOpen);
  EXPECT_FALSE(b->TryAcquire().has_value());
  EXPECT_FALSE(b->TryAcquire().has_value());
  clock.Advance(std::chrono::seconds(11));
  b->TryAcquire()->Success(std::chrono::milliseconds(1));  // probe
  b->TryAcquire()->Failure(std::chrono::milliseconds(1));  // probe: 50 %, reopens
  const CircuitBreakerTotals t = b->totals();
  EXPECT_EQ(t.calls[0], 3);
  EXPECT_EQ(t.calls[1], 3);
  EXPECT_EQ(t.calls[2], 1);
  EXPECT_EQ(t.call_time[0], std::chrono::milliseconds(156));
  EXPECT_EQ(t.call_time[1], std::chrono::milliseconds(208));
  EXPECT_EQ(t.slow_successful_calls, 1);
  EXPECT_EQ(t.slow_failed_calls, 1);
  EXPECT_EQ(t.not_permitted_calls, 2);
  EXPECT_EQ(t.probe_calls[0], 1);
  EXPECT_EQ(t.probe_calls[1], 1);
  // The window restarted; the totals did not.
  EXPECT_EQ(b->metrics().not_permitted_calls, 0);
}

TEST(CircuitBreakerTotals, AddUpExactlyAcrossThreads) {
  auto b = *CircuitBreaker::Create("totals-mt", CircuitBreakerConfig{});
  constexpr int kThreads = 12;  // more than the owned writer slots
  constexpr int kCalls = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        auto p = b->TryAcquire();
        if (i % 100 == 0) {
          p->Ignore();
        } else {
          p->Success(std::chrono::nanoseconds(3));
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const CircuitBreakerTotals t = b->totals();
  EXPECT_EQ(t.calls[0], kThreads * (kCalls - kCalls / 100));
  EXPECT_EQ(t.calls[2], kThreads * (kCalls / 100));
  EXPECT_EQ(t.call_time[0], std::chrono::nanoseconds(3) * t.calls[0]);
}

class TransitionsOnly : public CircuitBreakerListener {
 public:
  unsigned interests() const override { return kTransitionEvents; }
  void OnTransition(const TransitionEvent&) override { ++transitions; }
  void OnOutcome(const OutcomeEvent&) override { ++outcomes; }
  void OnRejection(const RejectionEvent&) override { ++rejections; }
  int transitions = 0, outcomes = 0, rejections = 0;
};

TEST(CircuitBreakerListenerInterests, AListenerGetsOnlyWhatItAskedFor) {
  testing::ManualClock clock;
  CircuitBreakerConfig config;
  config.sliding_window_size = 2;
  config.minimum_number_of_calls = 2;
  auto b = *CircuitBreaker::Create("interests", config, clock);
  auto l = std::make_shared<TransitionsOnly>();
  b->AddListener(l);
  b->TryAcquire()->Failure(std::chrono::milliseconds(1));
  b->TryAcquire()->Failure(std::chrono::milliseconds(1));
  EXPECT_FALSE(b->TryAcquire().has_value());
  EXPECT_EQ(l->transitions, 1);
  EXPECT_EQ(l->outcomes, 0);
  EXPECT_EQ(l->rejections, 0);
}

// The probes' verdict counts a slow-call rate at the threshold as failing,
// as the failure rate: one slow probe of two at 50 % reopens.
TEST(CircuitBreaker, ProbesAtTheSlowCallRateThresholdReopen) {
  ManualClock clock;
  CircuitBreakerConfig config = CountConfig();
  config.permitted_number_of_calls_in_half_open_state = 2;
  config.slow_call_rate_threshold = 50;
  config.slow_call_duration_threshold = 1s;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(config, clock));
  ASSERT_TRUE(cb->TransitionToHalfOpen().ok());
  ASSERT_EQ(cb->state(), State::kHalfOpen);
  Succeed(*cb, 2s);  // slow
  Succeed(*cb, 1ms);
  EXPECT_EQ(cb->state(), State::kOpen);
}

// An operator's override with an expiry ends at that instant: a call at
// expires_after is admitted (CLOSED again), one just before is not.
TEST(CircuitBreaker, AForcedOpenEndsExactlyAtItsExpiry) {
  ManualClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  OverrideOptions o;
  o.reason = "drill";
  o.expires_after = 10s;
  cb->ForceOpen(o);
  ASSERT_EQ(cb->state(), State::kForcedOpen);
  clock.Advance(10s - Duration(1));
  EXPECT_FALSE(cb->TryAcquire().has_value());
  clock.Advance(Duration(1));
  Result<Permit> p = cb->TryAcquire();
  ASSERT_TRUE(p.has_value()) << p.error();
  p->Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
}

// A clock whose timers are late (SystemClock's timer thread can be): they
// never run, so what ends an override at its expiry is the breaker's own
// catching up on the next call.
class LateTimersClock final : public Clock {
 public:
  TimePoint Now() const override { return time.Now(); }
  void SleepUntil(TimePoint /*deadline*/) override {}
  TimerId ScheduleAt(TimePoint /*deadline*/, std::function<void()> /*fn*/) override {
    return next_id.fetch_add(1) + 1;
  }
  bool Cancel(TimerId /*id*/) override { return true; }

  ManualClock time;
  std::atomic<TimerId> next_id{0};
};

TEST(CircuitBreaker, AForcedOpenEndsExactlyAtItsExpiryWhenItsTimerIsLate) {
  LateTimersClock clock;
  FUSEBOX_ASSERT_OK_AND_ASSIGN(auto cb, Make(CountConfig(), clock));
  OverrideOptions o;
  o.expires_after = 10s;
  cb->ForceOpen(o);
  clock.time.Advance(10s - Duration(1));
  EXPECT_FALSE(cb->TryAcquire().has_value());
  clock.time.Advance(Duration(1));
  Result<Permit> p = cb->TryAcquire();
  ASSERT_TRUE(p.has_value()) << p.error();
  p->Success(1ms);
  EXPECT_EQ(cb->state(), State::kClosed);
}

}  // namespace
}  // namespace fusebox
