// Tests for the Resilience4j 2.4.0 semantics that fusebox reproduces, one or
// more per point of docs/semantics.md (points 1-17 of the semantics note).
//
// Every test runs in both compatibility modes. Where the default mode is
// allowed to differ (points 4 and 14), the test asserts Resilience4j's
// behaviour in kResilience4j and fusebox's documented behaviour in kDefault:
// outcomes whose permit came from an ended state epoch are dropped and counted
// in metrics().late_outcomes, and an ignored or abandoned permit gives back
// only a half-open slot it took itself.
//
// All time is simulated: a ManualClock that starts at a whole second, so that
// t0 = ManualClock::kEpoch is also the start of an epoch-second bucket.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/status.h"
#include "fusebox/testing/manual_clock.h"

// Over 1,000 lines on purpose: one test group per point of docs/semantics.md,
// in the document's order, so that the two are read side by side.
namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;

constexpr TimePoint kT0 = ManualClock::kEpoch;
constexpr Duration kWait = 10s;

struct RecordedTransition {
  State from;
  State to;
  TransitionReason reason;
  TimePoint at;
  std::optional<TimePoint> retry_at;
  CircuitBreakerMetrics counts;
};

// Records every transition, in delivery order.
class TransitionRecorder : public CircuitBreakerListener {
 public:
  void OnTransition(const TransitionEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    transitions_.push_back({e.from, e.to, e.reason, e.at, e.retry_at, e.counts});
  }
  std::vector<RecordedTransition> transitions() const {
    std::lock_guard<std::mutex> lock(mu_);
    return transitions_;
  }
  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return transitions_.size();
  }
  RecordedTransition last() const {
    std::lock_guard<std::mutex> lock(mu_);
    return transitions_.back();
  }

 private:
  mutable std::mutex mu_;
  std::vector<RecordedTransition> transitions_;
};

::testing::AssertionResult Succeed(CircuitBreaker& cb, Duration d = Duration::zero()) {
  Result<Permit> p = cb.TryAcquire();
  if (!p) return ::testing::AssertionFailure() << "rejected: " << p.error();
  p->Success(d);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Fail(CircuitBreaker& cb, Duration d = Duration::zero()) {
  Result<Permit> p = cb.TryAcquire();
  if (!p) return ::testing::AssertionFailure() << "rejected: " << p.error();
  p->Failure(d);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult IgnoreOne(CircuitBreaker& cb) {
  Result<Permit> p = cb.TryAcquire();
  if (!p) return ::testing::AssertionFailure() << "rejected: " << p.error();
  p->Ignore();
  return ::testing::AssertionSuccess();
}

// Expects TryAcquire to be refused with kCircuitOpen and `reason`.
::testing::AssertionResult Rejected(CircuitBreaker& cb, std::string_view reason) {
  Result<Permit> p = cb.TryAcquire();
  if (p) {
    p->Ignore();
    return ::testing::AssertionFailure() << "admitted in state " << StateName(cb.state());
  }
  if (p.error().code() != StatusCode::kCircuitOpen) {
    return ::testing::AssertionFailure() << "wrong code: " << p.error();
  }
  if (p.error().reason() != reason) {
    return ::testing::AssertionFailure()
           << "reason '" << p.error().reason() << "', want '" << reason << "'";
  }
  return ::testing::AssertionSuccess();
}

// A COUNT_BASED config with a 50 % failure threshold and kWait in OPEN.
CircuitBreakerConfig CountConfig(int window, int minimum, int permitted = 1) {
  CircuitBreakerConfig c;
  c.failure_rate_threshold = 50;
  c.sliding_window_type = SlidingWindowType::kCountBased;
  c.sliding_window_size = window;
  c.minimum_number_of_calls = minimum;
  c.permitted_number_of_calls_in_half_open_state = permitted;
  c.wait_duration_in_open_state = kWait;
  return c;
}

CircuitBreakerConfig TimeConfig(int seconds, int minimum, int permitted = 1) {
  CircuitBreakerConfig c = CountConfig(1, 1, permitted);
  c.sliding_window_type = SlidingWindowType::kTimeBased;
  c.sliding_window_size = seconds;
  c.minimum_number_of_calls = minimum;
  return c;
}

std::string ModeName(const ::testing::TestParamInfo<Compatibility>& info) {
  return info.param == Compatibility::kDefault ? "Default" : "Resilience4j";
}

class Resilience4jSemantics : public ::testing::TestWithParam<Compatibility> {
 protected:
  bool r4j() const { return GetParam() == Compatibility::kResilience4j; }

  std::unique_ptr<CircuitBreaker> Make(CircuitBreakerConfig config) {
    config.compatibility = GetParam();
    Result<std::unique_ptr<CircuitBreaker>> r =
        CircuitBreaker::Create("semantics", std::move(config), clock_);
    if (!r) {
      ADD_FAILURE() << "Create failed: " << r.error();
      return nullptr;
    }
    std::unique_ptr<CircuitBreaker> cb = std::move(r).value();
    recorder_ = std::make_shared<TransitionRecorder>();
    cb->AddListener(recorder_);
    return cb;
  }

  // Records `n` failures; the breaker must admit each.
  void FailTimes(CircuitBreaker& cb, int n) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(Fail(cb)) << "failure #" << i;
  }
  void SucceedTimes(CircuitBreaker& cb, int n, Duration d = Duration::zero()) {
    for (int i = 0; i < n; ++i) ASSERT_TRUE(Succeed(cb, d)) << "success #" << i;
  }

  // Moves past the end of the current OPEN period (strictly after it).
  void PassWait() { clock_.Advance(kWait + 1ns); }

  ManualClock clock_;
  std::shared_ptr<TransitionRecorder> recorder_;
};

INSTANTIATE_TEST_SUITE_P(BothModes, Resilience4jSemantics,
                         ::testing::Values(Compatibility::kDefault, Compatibility::kResilience4j),
                         ModeName);

// ---------------------------------------------------------------------------
// Point 1: OPEN ends strictly after opened_at + wait.

TEST_P(Resilience4jSemantics, Point01_OpenEndsStrictlyAfterWait) {
  auto cb = Make(CountConfig(2, 2));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().retry_at, kT0 + kWait);

  clock_.Advance(kWait - 1ns);
  EXPECT_TRUE(Rejected(*cb, "open"));
  clock_.Advance(1ns);  // exactly opened_at + wait: still rejected
  Result<Permit> at_boundary = cb->TryAcquire();
  ASSERT_FALSE(at_boundary.has_value());
  EXPECT_EQ(at_boundary.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(at_boundary.error().reason(), "open");
  EXPECT_EQ(at_boundary.error().retry_at(), kT0 + kWait);
  EXPECT_EQ(cb->state(), State::kOpen);

  clock_.Advance(1ns);  // a hair after: admitted as the first probe
  Result<Permit> probe = cb->TryAcquire();
  ASSERT_TRUE(probe.has_value()) << probe.error();
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probe->Success(Duration::zero());
}

TEST_P(Resilience4jSemantics, Point01_OneMillisecondAfterIsAdmitted) {
  auto cb = Make(CountConfig(2, 2));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  clock_.Advance(kWait);
  EXPECT_TRUE(Rejected(*cb, "open"));
  clock_.Advance(1ms);
  EXPECT_TRUE(Succeed(*cb));
}

// ---------------------------------------------------------------------------
// Point 2: OPEN -> HALF_OPEN is lazy without automatic transition; the same
// acquire takes the first permit, and one call can hold two transitions.

TEST_P(Resilience4jSemantics, Point02_OpenToHalfOpenIsLazy) {
  auto cb = Make(CountConfig(2, 2, 2));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  clock_.Advance(1h);
  EXPECT_EQ(cb->state(), State::kOpen) << "moved to HALF_OPEN without a call";
  EXPECT_EQ(recorder_->size(), 1u);

  Result<Permit> first = cb->TryAcquire();
  ASSERT_TRUE(first.has_value()) << first.error();
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  auto t = recorder_->transitions();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].from, State::kOpen);
  EXPECT_EQ(t[1].to, State::kHalfOpen);
  EXPECT_EQ(t[1].reason, TransitionReason::kWaitElapsed);
  EXPECT_EQ(t[1].at, kT0 + 1h);

  // The acquire that moved the state took one of the two slots.
  Result<Permit> second = cb->TryAcquire();
  ASSERT_TRUE(second.has_value()) << second.error();
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  first->Ignore();
  second->Ignore();
}

TEST_P(Resilience4jSemantics, Point02_OneCallHoldsTwoTransitionsWhenItDecides) {
  auto cb = Make(CountConfig(2, 2, 1));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  const TimePoint now = clock_.Now();
  Result<int> r = cb->Call([] { return 7; });
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(cb->state(), State::kClosed);
  auto t = recorder_->transitions();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[1].from, State::kOpen);
  EXPECT_EQ(t[1].to, State::kHalfOpen);
  EXPECT_EQ(t[1].at, now);
  EXPECT_EQ(t[2].from, State::kHalfOpen);
  EXPECT_EQ(t[2].to, State::kClosed);
  EXPECT_EQ(t[2].reason, TransitionReason::kProbesSucceeded);
  EXPECT_EQ(t[2].at, now);
}

TEST_P(Resilience4jSemantics, Point02_FailingSingleProbeReopensInTheSameCall) {
  auto cb = Make(CountConfig(2, 2, 1));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  const TimePoint now = clock_.Now();
  Status s = cb->Call([] { return Status::Unavailable("still down"); });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_EQ(cb->state(), State::kOpen);
  auto t = recorder_->transitions();
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[1].to, State::kHalfOpen);
  EXPECT_EQ(t[2].from, State::kHalfOpen);
  EXPECT_EQ(t[2].to, State::kOpen);
  EXPECT_EQ(t[2].reason, TransitionReason::kProbesFailed);
  EXPECT_EQ(t[2].at, now);
  EXPECT_EQ(cb->metrics().retry_at, now + kWait);
}

TEST_P(Resilience4jSemantics, Point02_AutomaticTransitionMovesWithoutACall) {
  CircuitBreakerConfig c = CountConfig(2, 2, 1);
  c.automatic_transition_from_open_to_half_open_enabled = true;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  clock_.Advance(kWait - 1ns);
  EXPECT_EQ(cb->state(), State::kOpen);
  clock_.Advance(2ns);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kWaitElapsed);
  EXPECT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kClosed);
}

// ---------------------------------------------------------------------------
// Point 3: the open period starts when the tripping outcome is reported.

TEST_P(Resilience4jSemantics, Point03_OpenPeriodStartsAtReportNotAtCallStart) {
  auto cb = Make(CountConfig(1, 1));
  ASSERT_NE(cb, nullptr);
  Result<Permit> p = cb->TryAcquire();
  ASSERT_TRUE(p.has_value());
  clock_.Advance(5s);
  p->Failure(5s);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(recorder_->last().at, kT0 + 5s);
  EXPECT_EQ(cb->metrics().retry_at, kT0 + 5s + kWait);
  clock_.Advance(kWait);
  EXPECT_TRUE(Rejected(*cb, "open"));
  clock_.Advance(1ns);
  EXPECT_TRUE(Succeed(*cb));
}

TEST_P(Resilience4jSemantics, Point03_CallReportsWhenTheCallableReturns) {
  auto cb = Make(CountConfig(1, 1));
  ASSERT_NE(cb, nullptr);
  Status s = cb->Call([&] {
    clock_.Advance(3s);
    return Status::Unavailable("down");
  });
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().retry_at, kT0 + 3s + kWait);
}

// ---------------------------------------------------------------------------
// Point 4: an outcome is recorded into whatever state is current when it is
// reported (kResilience4j); kDefault drops outcomes of an ended epoch.

TEST_P(Resilience4jSemantics, Point04_ClosedPermitReportedInOpen) {
  auto cb = Make(CountConfig(4, 4));
  ASSERT_NE(cb, nullptr);
  Result<Permit> p = cb->TryAcquire();
  ASSERT_TRUE(p.has_value());
  ASSERT_TRUE(Fail(*cb));
  ASSERT_TRUE(Succeed(*cb));
  ASSERT_TRUE(Fail(*cb));
  ASSERT_TRUE(Succeed(*cb));
  ASSERT_EQ(cb->state(), State::kOpen);
  ASSERT_EQ(cb->metrics().failed_calls, 2);

  p->Success(Duration::zero());
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kOpen);
  EXPECT_EQ(recorder_->size(), 1u) << "no transition in OPEN";
  if (r4j()) {
    // Added to the tripped window: the oldest call (a failure) falls out.
    EXPECT_EQ(m.buffered_calls, 4);
    EXPECT_EQ(m.failed_calls, 1);
    EXPECT_EQ(m.successful_calls, 3);
    EXPECT_FLOAT_EQ(m.failure_rate, 25.0f);
    EXPECT_EQ(m.late_outcomes, 0);
  } else {
    EXPECT_EQ(m.buffered_calls, 4);
    EXPECT_EQ(m.failed_calls, 2);
    EXPECT_EQ(m.successful_calls, 2);
    EXPECT_FLOAT_EQ(m.failure_rate, 50.0f);
    EXPECT_EQ(m.late_outcomes, 1);
  }
}

TEST_P(Resilience4jSemantics, Point04_ClosedPermitReportedInHalfOpenDecidesOnlyInR4j) {
  auto cb = Make(CountConfig(2, 2, 1));
  ASSERT_NE(cb, nullptr);
  Result<Permit> p = cb->TryAcquire();  // CLOSED permit
  ASSERT_TRUE(p.has_value());
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  PassWait();
  Result<Permit> q = cb->TryAcquire();  // the only probe slot
  ASSERT_TRUE(q.has_value()) << q.error();
  ASSERT_EQ(cb->state(), State::kHalfOpen);

  p->Success(Duration::zero());
  if (r4j()) {
    // Counts as a probe result: min(2, 1) = 1 result decides.
    EXPECT_EQ(cb->state(), State::kClosed);
    EXPECT_EQ(recorder_->last().reason, TransitionReason::kProbesSucceeded);
  } else {
    EXPECT_EQ(cb->state(), State::kHalfOpen);
    EXPECT_EQ(cb->metrics().late_outcomes, 1);
    EXPECT_EQ(cb->metrics().buffered_calls, 0);
  }

  q->Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kClosed);
  // In R4j the probe reported after the verdict lands in the new window.
  EXPECT_EQ(cb->metrics().buffered_calls, r4j() ? 1 : 0);
}

TEST_P(Resilience4jSemantics, Point04_ProbeResultAfterVerdictGoesToNextWindow) {
  auto cb = Make(CountConfig(2, 2, 3));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  Result<Permit> a = cb->TryAcquire();
  Result<Permit> b = cb->TryAcquire();
  Result<Permit> c = cb->TryAcquire();
  ASSERT_TRUE(a && b && c);
  a->Success(Duration::zero());
  b->Success(Duration::zero());  // min(2, 3) = 2 results: verdict
  ASSERT_EQ(cb->state(), State::kClosed);
  c->Failure(Duration::zero());
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kClosed);
  if (r4j()) {
    EXPECT_EQ(m.buffered_calls, 1);
    EXPECT_EQ(m.failed_calls, 1);
    EXPECT_EQ(m.late_outcomes, 0);
  } else {
    EXPECT_EQ(m.buffered_calls, 0);
    EXPECT_EQ(m.failed_calls, 0);
    EXPECT_EQ(m.late_outcomes, 1);
  }
  // One more failure: in R4j the window is then full of failures.
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), r4j() ? State::kOpen : State::kClosed);
}

// ---------------------------------------------------------------------------
// Point 5: the half-open verdict comes after min(minimum, permitted) results
// on a COUNT_BASED window of size permitted.

TEST_P(Resilience4jSemantics, Point05_FailingProbeCanCloseOnTimeBasedBreaker) {
  auto cb = Make(TimeConfig(10, 3, 3));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 3);
  ASSERT_EQ(cb->state(), State::kOpen);
  PassWait();
  Result<Permit> a = cb->TryAcquire();
  Result<Permit> b = cb->TryAcquire();
  Result<Permit> c = cb->TryAcquire();
  ASSERT_TRUE(a && b && c);
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  a->Failure(Duration::zero());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  b->Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  c->Success(Duration::zero());
  // 1 failure in 3 = 33 % < 50 %: closes.
  EXPECT_EQ(cb->state(), State::kClosed);
  RecordedTransition t = recorder_->last();
  EXPECT_EQ(t.from, State::kHalfOpen);
  EXPECT_EQ(t.reason, TransitionReason::kProbesSucceeded);
  EXPECT_EQ(t.counts.buffered_calls, 3);
  EXPECT_EQ(t.counts.failed_calls, 1);
}

TEST_P(Resilience4jSemantics, Point05_VerdictWithProbesStillInFlight) {
  auto cb = Make(CountConfig(10, 2, 4));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  PassWait();
  std::vector<Permit> probes;
  for (int i = 0; i < 4; ++i) {
    Result<Permit> p = cb->TryAcquire();
    ASSERT_TRUE(p.has_value()) << "probe " << i << ": " << p.error();
    probes.push_back(std::move(p).value());
  }
  probes[0].Failure(Duration::zero());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  probes[1].Success(Duration::zero());
  // min(2, 4) = 2 results; 1 of 2 = 50 % >= 50 %: reopens with 2 in flight.
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kProbesFailed);

  probes[2].Success(Duration::zero());
  probes[3].Success(Duration::zero());
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kOpen);
  if (r4j()) {
    // Recorded into the probe window that tripped (size permitted = 4).
    EXPECT_EQ(m.buffered_calls, 4);
    EXPECT_EQ(m.failed_calls, 1);
    EXPECT_FLOAT_EQ(m.failure_rate, 25.0f);
  } else {
    EXPECT_EQ(m.buffered_calls, 2);
    EXPECT_EQ(m.failed_calls, 1);
    EXPECT_FLOAT_EQ(m.failure_rate, 50.0f);
  }
}

TEST_P(Resilience4jSemantics, Point05_MinimumAbovePermittedDecidesAfterPermitted) {
  auto cb = Make(CountConfig(10, 10, 3));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 10);
  ASSERT_EQ(cb->state(), State::kOpen);
  PassWait();
  ASSERT_TRUE(Succeed(*cb));
  ASSERT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  ASSERT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST_P(Resilience4jSemantics, Point05_HalfOpenWindowIsCountBasedOfSizePermitted) {
  // The closed window is TIME_BASED with a large minimum; the probe window
  // still decides after min(minimum, permitted) = 2 results.
  auto cb = Make(TimeConfig(10, 3, 2));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 3);
  ASSERT_EQ(cb->state(), State::kOpen);
  PassWait();
  ASSERT_TRUE(Fail(*cb));
  clock_.Advance(30s);  // time does not age a COUNT_BASED probe window
  ASSERT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kOpen);  // 1 of 2 = 50 %
}

TEST_P(Resilience4jSemantics, Point05_AnyFailureReopensPolicy) {
  CircuitBreakerConfig c = CountConfig(2, 2, 3);
  c.half_open_policy = HalfOpenPolicy::kAnyFailureReopens;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  ASSERT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), State::kOpen) << "the first failed probe reopens";
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kProbesFailed);

  PassWait();
  SucceedTimes(*cb, 2);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  ASSERT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kClosed) << "permitted successes close";
}

// ---------------------------------------------------------------------------
// Point 6: thresholds trip at >=.

TEST_P(Resilience4jSemantics, Point06_FailureRateTripsAtThreshold) {
  auto cb = Make(CountConfig(10, 10));
  ASSERT_NE(cb, nullptr);
  SucceedTimes(*cb, 5);
  FailTimes(*cb, 4);
  EXPECT_EQ(cb->state(), State::kClosed);
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, 50.0f);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kFailureRate);

  auto below = Make(CountConfig(10, 10));
  ASSERT_NE(below, nullptr);
  SucceedTimes(*below, 6);
  FailTimes(*below, 4);
  EXPECT_EQ(below->state(), State::kClosed);
  EXPECT_FLOAT_EQ(below->metrics().failure_rate, 40.0f);
}

TEST_P(Resilience4jSemantics, Point06_SlowCallRateTripsAtThreshold) {
  CircuitBreakerConfig c = CountConfig(10, 10);
  c.slow_call_rate_threshold = 50;
  c.slow_call_duration_threshold = 1s;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  SucceedTimes(*cb, 5);
  SucceedTimes(*cb, 4, 2s);
  EXPECT_EQ(cb->state(), State::kClosed);
  ASSERT_TRUE(Succeed(*cb, 2s));
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_FLOAT_EQ(cb->metrics().slow_call_rate, 50.0f);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, 0.0f);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kSlowCallRate);
}

// ---------------------------------------------------------------------------
// Point 7: slow means duration > threshold, strictly; a slow failure is both.

TEST_P(Resilience4jSemantics, Point07_SlowIsStrictlyLongerThanThreshold) {
  CircuitBreakerConfig c = CountConfig(1, 1);
  c.failure_rate_threshold = 100;
  c.slow_call_rate_threshold = 100;
  c.slow_call_duration_threshold = 1s;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(Succeed(*cb, 1s));
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().slow_calls, 0);
  EXPECT_FLOAT_EQ(cb->metrics().slow_call_rate, 0.0f);
  ASSERT_TRUE(Succeed(*cb, 1s + 1ns));
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kSlowCallRate);
}

TEST_P(Resilience4jSemantics, Point07_SlowFailureCountsAsFailedAndSlow) {
  CircuitBreakerConfig c = CountConfig(10, 10);
  c.slow_call_duration_threshold = 1s;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(Fail(*cb, 2s));
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 1);
  EXPECT_EQ(m.failed_calls, 1);
  EXPECT_EQ(m.successful_calls, 0);
  EXPECT_EQ(m.slow_calls, 1);
  EXPECT_EQ(m.slow_failed_calls, 1);
  EXPECT_EQ(m.slow_successful_calls, 0);
  ASSERT_TRUE(Succeed(*cb, 2s));
  m = cb->metrics();
  EXPECT_EQ(m.slow_calls, 2);
  EXPECT_EQ(m.slow_successful_calls, 1);
  EXPECT_EQ(m.successful_calls, 1);
}

TEST_P(Resilience4jSemantics, Point07_EitherRateAloneTrips) {
  CircuitBreakerConfig c = CountConfig(4, 4);
  c.slow_call_rate_threshold = 50;
  c.slow_call_duration_threshold = 1s;

  auto failures = Make(c);
  ASSERT_NE(failures, nullptr);
  FailTimes(*failures, 2);
  SucceedTimes(*failures, 2);
  EXPECT_EQ(failures->state(), State::kOpen);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kFailureRate);

  auto slow = Make(c);
  ASSERT_NE(slow, nullptr);
  SucceedTimes(*slow, 2, 2s);
  SucceedTimes(*slow, 2);
  EXPECT_EQ(slow->state(), State::kOpen);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kSlowCallRate);

  auto neither = Make(c);
  ASSERT_NE(neither, nullptr);
  ASSERT_TRUE(Fail(*neither, 2s));  // 25 % failed, 25 % slow
  SucceedTimes(*neither, 3);
  EXPECT_EQ(neither->state(), State::kClosed);
  EXPECT_FLOAT_EQ(neither->metrics().failure_rate, 25.0f);
  EXPECT_FLOAT_EQ(neither->metrics().slow_call_rate, 25.0f);
}

// ---------------------------------------------------------------------------
// Point 8: minimum_number_of_calls is capped at the window size for
// COUNT_BASED only.

TEST_P(Resilience4jSemantics, Point08_MinimumCappedAtWindowSizeForCountBased) {
  auto cb = Make(CountConfig(5, 100));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 4);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, -1.0f);
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST_P(Resilience4jSemantics, Point08_MinimumNotCappedForTimeBased) {
  auto cb = Make(TimeConfig(5, 10));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 9);
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, -1.0f);
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), State::kOpen);
}

TEST_P(Resilience4jSemantics, Point08_LowCallRateCanNeverTripTimeBased) {
  auto cb = Make(TimeConfig(5, 10));
  ASSERT_NE(cb, nullptr);
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(Fail(*cb)) << "second " << i;
    EXPECT_LE(cb->metrics().buffered_calls, 5);
    clock_.Advance(1s);
  }
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, -1.0f);
}

// ---------------------------------------------------------------------------
// Point 9: below the minimum, rates are -1, also in HALF_OPEN before the
// verdict and right after a transition into HALF_OPEN or CLOSED.

TEST_P(Resilience4jSemantics, Point09_RatesAreMinusOneBelowMinimum) {
  auto cb = Make(CountConfig(10, 5, 3));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 4);
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_FLOAT_EQ(m.failure_rate, -1.0f);
  EXPECT_FLOAT_EQ(m.slow_call_rate, -1.0f);
  EXPECT_EQ(m.failed_calls, 4);
  EXPECT_EQ(m.buffered_calls, 4);
  ASSERT_TRUE(Fail(*cb));
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, 100.0f);
  EXPECT_FLOAT_EQ(cb->metrics().slow_call_rate, 0.0f);

  PassWait();
  Result<Permit> a = cb->TryAcquire();
  ASSERT_TRUE(a.has_value());
  m = cb->metrics();
  EXPECT_EQ(m.state, State::kHalfOpen);
  EXPECT_EQ(m.buffered_calls, 0);
  EXPECT_FLOAT_EQ(m.failure_rate, -1.0f);
  EXPECT_FLOAT_EQ(m.slow_call_rate, -1.0f);
  a->Failure(Duration::zero());
  m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 1);
  EXPECT_EQ(m.failed_calls, 1);
  EXPECT_FLOAT_EQ(m.failure_rate, -1.0f) << "before the verdict";
  SucceedTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kClosed);
  m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 0);
  EXPECT_FLOAT_EQ(m.failure_rate, -1.0f);
  EXPECT_FLOAT_EQ(m.slow_call_rate, -1.0f);
}

// ---------------------------------------------------------------------------
// Point 10: TIME_BASED windows are epoch-second buckets keyed by when the
// outcome is reported: the current partial second plus size-1 previous whole
// seconds. With size 10, an outcome reported in second S counts while the
// current second is S..S+9, i.e. until the boundary S+10.

TEST_P(Resilience4jSemantics, Point10_TimeBasedWindowAgesBySecondBuckets) {
  for (bool failures : {false, true}) {
    SCOPED_TRACE(failures ? "failures" : "successes");
    ManualClock clock;
    CircuitBreakerConfig c = TimeConfig(10, 100);
    c.failure_rate_threshold = 100;
    c.compatibility = GetParam();
    auto r = CircuitBreaker::Create("p10", c, clock);
    ASSERT_TRUE(r.has_value()) << r.error();
    CircuitBreaker& cb = **r;
    auto report = [&] { ASSERT_TRUE(failures ? Fail(cb) : Succeed(cb)); };

    clock.Set(kT0 + 900ms);
    report();
    clock.Set(kT0 + 9100ms);
    report();
    EXPECT_EQ(cb.metrics().buffered_calls, 2);
    clock.Set(kT0 + 10s - 1ns);
    EXPECT_EQ(cb.metrics().buffered_calls, 2);
    clock.Set(kT0 + 10s);  // second S0 leaves the window: 9.1 s after its report
    EXPECT_EQ(cb.metrics().buffered_calls, 1);
    EXPECT_EQ(cb.metrics().failed_calls, failures ? 1 : 0);
    clock.Set(kT0 + 19s - 1ns);
    EXPECT_EQ(cb.metrics().buffered_calls, 1);
    clock.Set(kT0 + 19s);  // second S0+9 leaves: 9.9 s after its report
    EXPECT_EQ(cb.metrics().buffered_calls, 0);
    EXPECT_EQ(cb.state(), State::kClosed);
  }
}

TEST_P(Resilience4jSemantics, Point10_TripDecisionAtTheSecondBoundary) {
  // Failures at t0+0.9 s and t0+9.1 s, then a success: with a minimum of 3
  // the third call trips only while the first failure is still in the window.
  struct Case {
    Duration third;
    State want;
  };
  for (const Case& k : {Case{10s - 1ns, State::kOpen}, Case{10s, State::kClosed}}) {
    SCOPED_TRACE(k.third.count());
    ManualClock clock;
    CircuitBreakerConfig c = TimeConfig(10, 3);
    c.compatibility = GetParam();
    auto r = CircuitBreaker::Create("p10", c, clock);
    ASSERT_TRUE(r.has_value()) << r.error();
    CircuitBreaker& cb = **r;
    clock.Set(kT0 + 900ms);
    ASSERT_TRUE(Fail(cb));
    clock.Set(kT0 + 9100ms);
    ASSERT_TRUE(Fail(cb));
    clock.Set(kT0 + k.third);
    ASSERT_TRUE(Succeed(cb));
    EXPECT_EQ(cb.state(), k.want);
  }
}

TEST_P(Resilience4jSemantics, Point10_BucketIsChosenByReportTimeNotStartTime) {
  for (bool failure : {false, true}) {
    SCOPED_TRACE(failure ? "failure" : "success");
    ManualClock clock;
    CircuitBreakerConfig c = TimeConfig(10, 100);
    c.failure_rate_threshold = 100;
    c.compatibility = GetParam();
    auto r = CircuitBreaker::Create("p10", c, clock);
    ASSERT_TRUE(r.has_value()) << r.error();
    CircuitBreaker& cb = **r;
    clock.Set(kT0 + 500ms);
    Result<Permit> p = cb.TryAcquire();
    ASSERT_TRUE(p.has_value());
    clock.Set(kT0 + 1200ms);  // reported in second S0+1
    if (failure) {
      p->Failure(700ms);
    } else {
      p->Success(700ms);
    }
    clock.Set(kT0 + 10500ms);
    EXPECT_EQ(cb.metrics().buffered_calls, 1) << "a start-time bucket would be gone";
    clock.Set(kT0 + 11s);
    EXPECT_EQ(cb.metrics().buffered_calls, 0);
  }
}

// ---------------------------------------------------------------------------
// Point 11: rejected calls are never recorded; the not-permitted counter
// belongs to the state's metrics: CLOSED's continues into OPEN, HALF_OPEN
// starts fresh and carries into the next OPEN.

TEST_P(Resilience4jSemantics, Point11_NotPermittedCounterFollowsTheStateMetrics) {
  auto cb = Make(CountConfig(2, 2, 2));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(Rejected(*cb, "open"));
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.not_permitted_calls, 3);
  EXPECT_EQ(m.buffered_calls, 2) << "rejections are not recorded";
  EXPECT_EQ(m.failed_calls, 2);

  PassWait();
  Result<Permit> a = cb->TryAcquire();
  Result<Permit> b = cb->TryAcquire();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 0) << "HALF_OPEN starts a fresh counter";
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  m = cb->metrics();
  EXPECT_EQ(m.not_permitted_calls, 2);
  EXPECT_EQ(m.buffered_calls, 0);

  a->Failure(Duration::zero());
  b->Failure(Duration::zero());
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 2) << "carried into the next OPEN";
  EXPECT_TRUE(Rejected(*cb, "open"));
  EXPECT_EQ(cb->metrics().not_permitted_calls, 3);

  PassWait();
  SucceedTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().not_permitted_calls, 0);
}

// ---------------------------------------------------------------------------
// Point 12: metrics reported in OPEN are the window that tripped; a
// TIME_BASED one keeps aging while OPEN.

TEST_P(Resilience4jSemantics, Point12_MetricsInOpenAreTheTrippedWindow) {
  auto cb = Make(CountConfig(4, 4, 2));
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(Fail(*cb));
  ASSERT_TRUE(Succeed(*cb));
  ASSERT_TRUE(Fail(*cb));
  ASSERT_TRUE(Succeed(*cb));
  ASSERT_EQ(cb->state(), State::kOpen);
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kOpen);
  EXPECT_EQ(m.buffered_calls, 4);
  EXPECT_EQ(m.failed_calls, 2);
  EXPECT_EQ(m.successful_calls, 2);
  EXPECT_FLOAT_EQ(m.failure_rate, 50.0f);

  // Reopened from HALF_OPEN: the probe window is the one that tripped.
  PassWait();
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  m = cb->metrics();
  EXPECT_EQ(m.buffered_calls, 2);
  EXPECT_EQ(m.failed_calls, 2);
  EXPECT_FLOAT_EQ(m.failure_rate, 100.0f);
}

TEST_P(Resilience4jSemantics, Point12_TimeBasedWindowKeepsAgingWhileOpen) {
  CircuitBreakerConfig c = TimeConfig(2, 2);
  c.wait_duration_in_open_state = 60s;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  ASSERT_EQ(cb->state(), State::kOpen);
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, 100.0f);
  clock_.Advance(1s);
  EXPECT_EQ(cb->metrics().buffered_calls, 2);
  clock_.Advance(1s);
  CircuitBreakerMetrics m = cb->metrics();
  EXPECT_EQ(m.state, State::kOpen);
  EXPECT_EQ(m.buffered_calls, 0);
  EXPECT_FLOAT_EQ(m.failure_rate, -1.0f);
  EXPECT_EQ(cb->state(), State::kOpen);
}

// ---------------------------------------------------------------------------
// Point 13: closing starts an empty window.

TEST_P(Resilience4jSemantics, Point13_ClosingStartsAnEmptyWindow) {
  auto cb = Make(CountConfig(4, 4, 1));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 4);
  ASSERT_EQ(cb->state(), State::kOpen);
  PassWait();
  ASSERT_TRUE(Succeed(*cb));
  ASSERT_EQ(cb->state(), State::kClosed);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  FailTimes(*cb, 3);
  EXPECT_EQ(cb->state(), State::kClosed) << "needs a full minimum of new results";
  EXPECT_FLOAT_EQ(cb->metrics().failure_rate, -1.0f);
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), State::kOpen);
}

// ---------------------------------------------------------------------------
// Point 14: ignored outcomes are not recorded; in HALF_OPEN they give a permit
// back (kResilience4j: wherever the permit came from; kDefault: only a slot
// the permit took itself).

TEST_P(Resilience4jSemantics, Point14_IgnoredOutcomesAreNotRecorded) {
  auto cb = Make(CountConfig(2, 2));
  ASSERT_NE(cb, nullptr);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(IgnoreOne(*cb));
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  ASSERT_TRUE(Fail(*cb));
  ASSERT_TRUE(IgnoreOne(*cb));
  EXPECT_EQ(cb->state(), State::kClosed);
  ASSERT_TRUE(Fail(*cb));
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().buffered_calls, 2);
}

TEST_P(Resilience4jSemantics, Point14_IgnoredOrAbandonedProbeGivesItsSlotBack) {
  auto cb = Make(CountConfig(2, 2, 2));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  Result<Permit> a = cb->TryAcquire();
  Result<Permit> b = cb->TryAcquire();
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  a->Ignore();
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  {
    Result<Permit> c = cb->TryAcquire();
    ASSERT_TRUE(c.has_value()) << "the ignored probe's slot was not given back";
    EXPECT_TRUE(Rejected(*cb, "half_open_full"));
    // c is destroyed without an outcome: like Ignore().
  }
  Result<Permit> d = cb->TryAcquire();
  ASSERT_TRUE(d.has_value()) << "the abandoned probe's slot was not given back";
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  b->Success(Duration::zero());
  d->Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kClosed);
}

TEST_P(Resilience4jSemantics, Point14_IgnoredClosedPermitInHalfOpen) {
  auto cb = Make(CountConfig(2, 2, 1));
  ASSERT_NE(cb, nullptr);
  Result<Permit> p = cb->TryAcquire();  // taken in CLOSED
  ASSERT_TRUE(p.has_value());
  FailTimes(*cb, 2);
  PassWait();
  Result<Permit> q = cb->TryAcquire();
  ASSERT_TRUE(q.has_value());
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  p->Ignore();
  if (r4j()) {
    // Resilience4j releases a permit whatever its origin: a second probe
    // gets in although permitted is 1.
    Result<Permit> extra = cb->TryAcquire();
    EXPECT_TRUE(extra.has_value());
    EXPECT_EQ(cb->state(), State::kHalfOpen);
  } else {
    EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  }
  q->Ignore();
}

TEST_P(Resilience4jSemantics, Point14_AbandonedClosedPermitInHalfOpen) {
  auto cb = Make(CountConfig(2, 2, 1));
  ASSERT_NE(cb, nullptr);
  std::optional<Permit> p;
  {
    Result<Permit> r = cb->TryAcquire();
    ASSERT_TRUE(r.has_value());
    p.emplace(std::move(r).value());
  }
  FailTimes(*cb, 2);
  PassWait();
  Result<Permit> q = cb->TryAcquire();
  ASSERT_TRUE(q.has_value());
  p.reset();  // destroyed without an outcome
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  if (!r4j()) {
    // kDefault: the CLOSED permit had no half-open slot to give back.
    EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  }
  // (kResilience4j: the header leaves an abandoned foreign permit's effect in
  // HALF_OPEN unspecified; only that nothing breaks is checked.)
  q->Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kClosed);
}

// ---------------------------------------------------------------------------
// Point 15: exactly `permitted` concurrent acquisitions succeed in HALF_OPEN.

TEST_P(Resilience4jSemantics, Point15_LaterArrivalsRejectedUntilVerdict) {
  auto cb = Make(CountConfig(3, 3, 3));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 3);
  PassWait();
  std::vector<Permit> probes;
  for (int i = 0; i < 3; ++i) {
    Result<Permit> p = cb->TryAcquire();
    ASSERT_TRUE(p.has_value());
    probes.push_back(std::move(p).value());
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  clock_.Advance(1h);
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  for (Permit& p : probes) p.Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kClosed);
  EXPECT_TRUE(Succeed(*cb));
}

TEST_P(Resilience4jSemantics, Point15_ExactlyPermittedConcurrentProbesSucceed) {
  constexpr int kThreads = 8;
  constexpr int kPermitted = 3;
  for (bool from_expired_open : {true, false}) {
    for (int round = 0; round < 20; ++round) {
      SCOPED_TRACE(::testing::Message()
                   << "from_expired_open=" << from_expired_open << " round=" << round);
      auto cb = Make(CountConfig(2, 2, kPermitted));
      ASSERT_NE(cb, nullptr);
      FailTimes(*cb, 2);
      PassWait();
      if (!from_expired_open) {
        // Enter HALF_OPEN first with a probe that is then given back.
        ASSERT_TRUE(IgnoreOne(*cb));
        ASSERT_EQ(cb->state(), State::kHalfOpen);
      }
      std::latch start(kThreads);
      std::latch counted(kThreads);
      std::atomic<int> admitted{0};
      std::atomic<int> wrong_rejections{0};
      std::vector<std::thread> threads;
      for (int i = 0; i < kThreads; ++i) {
        threads.emplace_back([&] {
          start.arrive_and_wait();
          Result<Permit> p = cb->TryAcquire();
          if (p) {
            admitted.fetch_add(1);
          } else if (p.error().code() != StatusCode::kCircuitOpen ||
                     p.error().reason() != "half_open_full") {
            wrong_rejections.fetch_add(1);
          }
          counted.arrive_and_wait();  // hold the permits until all have tried
          if (p) p->Ignore();
        });
      }
      for (std::thread& t : threads) t.join();
      EXPECT_EQ(admitted.load(), kPermitted);
      EXPECT_EQ(wrong_rejections.load(), 0);
      EXPECT_EQ(cb->state(), State::kHalfOpen);
    }
  }
}

// ---------------------------------------------------------------------------
// Point 16: max_wait_duration_in_half_open_state counts from entering
// HALF_OPEN, then forces transition_to_state_after_wait_duration whatever is
// in flight; zero means never.

TEST_P(Resilience4jSemantics, Point16_MaxWaitInHalfOpenForcesOpen) {
  CircuitBreakerConfig c = CountConfig(2, 2, 2);
  c.max_wait_duration_in_half_open_state = 5s;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  const TimePoint entered = clock_.Now();
  Result<Permit> a = cb->TryAcquire();
  ASSERT_TRUE(a.has_value());
  ASSERT_EQ(cb->state(), State::kHalfOpen);
  clock_.Advance(5s - 1ns);
  Result<Permit> b = cb->TryAcquire();
  ASSERT_TRUE(b.has_value()) << "still HALF_OPEN before the max wait: " << b.error();
  EXPECT_EQ(cb->state(), State::kHalfOpen);

  clock_.Advance(2ns);
  EXPECT_TRUE(Rejected(*cb, "open"));
  EXPECT_EQ(cb->state(), State::kOpen);
  RecordedTransition t = recorder_->last();
  EXPECT_EQ(t.from, State::kHalfOpen);
  EXPECT_EQ(t.to, State::kOpen);
  EXPECT_EQ(t.reason, TransitionReason::kHalfOpenTimeout);
  std::optional<TimePoint> retry_at = cb->metrics().retry_at;
  ASSERT_TRUE(retry_at.has_value());
  // A new full wait from the moment the max wait ran out.
  EXPECT_GE(*retry_at, entered + 5s + kWait);
  EXPECT_LE(*retry_at, entered + 5s + 1ns + kWait);

  // The probes still in flight do not change the state.
  a->Success(Duration::zero());
  b->Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kOpen);

  clock_.Set(*retry_at + 1ns);
  EXPECT_TRUE(Succeed(*cb));
  EXPECT_EQ(cb->state(), State::kHalfOpen);
}

TEST_P(Resilience4jSemantics, Point16_MaxWaitCanLeadToClosedWithAFreshWindow) {
  CircuitBreakerConfig c = CountConfig(2, 2, 2);
  c.max_wait_duration_in_half_open_state = 5s;
  c.transition_to_state_after_wait_duration = State::kClosed;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  Result<Permit> a = cb->TryAcquire();
  ASSERT_TRUE(a.has_value());
  ASSERT_TRUE(Fail(*cb));  // one probe result, no verdict yet
  ASSERT_EQ(cb->state(), State::kHalfOpen);
  clock_.Advance(5s + 1ns);
  Result<Permit> after = cb->TryAcquire();  // a call also notices the timeout
  ASSERT_TRUE(after.has_value()) << after.error();
  EXPECT_EQ(cb->state(), State::kClosed);
  RecordedTransition t = recorder_->last();
  EXPECT_EQ(t.from, State::kHalfOpen);
  EXPECT_EQ(t.to, State::kClosed);
  EXPECT_EQ(t.reason, TransitionReason::kHalfOpenTimeout);
  EXPECT_EQ(cb->metrics().buffered_calls, 0);
  after->Failure(Duration::zero());
  EXPECT_EQ(cb->state(), State::kClosed) << "1 failure < minimum of 2 in a fresh window";
  a->Ignore();
}

TEST_P(Resilience4jSemantics, Point16_ZeroMaxWaitMeansNever) {
  auto cb = Make(CountConfig(2, 2, 1));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 2);
  PassWait();
  Result<Permit> a = cb->TryAcquire();
  ASSERT_TRUE(a.has_value());
  clock_.Advance(10h);
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  EXPECT_TRUE(Rejected(*cb, "half_open_full"));
  a->Success(Duration::zero());
  EXPECT_EQ(cb->state(), State::kClosed);
}

// ---------------------------------------------------------------------------
// Point 17: rates are 32-bit floats (failed * 100f / total) compared with a
// float threshold.

TEST_P(Resilience4jSemantics, Point17_OneInThreeOpensAtThreshold33_3333334) {
  const float threshold = 33.3333334f;
  ASSERT_EQ(threshold, 1 * 100.0f / 3);  // the same float as 1 in 3
  CircuitBreakerConfig c = CountConfig(3, 3);
  c.failure_rate_threshold = threshold;
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  ASSERT_TRUE(Fail(*cb));
  SucceedTimes(*cb, 2);
  EXPECT_EQ(cb->state(), State::kOpen);
  EXPECT_EQ(cb->metrics().failure_rate, threshold);

  c.failure_rate_threshold = std::nextafter(threshold, 100.0f);
  auto above = Make(c);
  ASSERT_NE(above, nullptr);
  ASSERT_TRUE(Fail(*above));
  SucceedTimes(*above, 2);
  EXPECT_EQ(above->state(), State::kClosed);
}

TEST_P(Resilience4jSemantics, Point17_FloatRoundingUpOpensWhereDoubleWouldNot) {
  // 3 in 7 as a float rounds up: 42.8571434f > 300.0 / 7 = 42.857142857...
  // A double rate compared with this threshold would stay closed.
  const float threshold = 3 * 100.0f / 7;
  ASSERT_GT(static_cast<double>(threshold), 300.0 / 7.0);

  CircuitBreakerConfig c = CountConfig(7, 7);
  c.failure_rate_threshold = threshold;
  auto failures = Make(c);
  ASSERT_NE(failures, nullptr);
  FailTimes(*failures, 3);
  SucceedTimes(*failures, 4);
  EXPECT_EQ(failures->state(), State::kOpen);

  c.failure_rate_threshold = 100;
  c.slow_call_rate_threshold = threshold;
  c.slow_call_duration_threshold = 1s;
  auto slow = Make(c);
  ASSERT_NE(slow, nullptr);
  SucceedTimes(*slow, 3, 2s);
  SucceedTimes(*slow, 4);
  EXPECT_EQ(slow->state(), State::kOpen);
  EXPECT_EQ(recorder_->last().reason, TransitionReason::kSlowCallRate);
}

// ---------------------------------------------------------------------------
// Point 19: kResilience4j refuses the operator moves Resilience4j's
// StateTransition table lacks (CLOSED -> HALF_OPEN, METRICS_ONLY -> OPEN or
// HALF_OPEN), leaving state, window and listeners as they were; kDefault
// takes them.

TEST_P(Resilience4jSemantics, Point19_HalfOpenFromClosedIsIllegalInResilience4j) {
  auto cb = Make(CountConfig(4, 4));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 1);
  SucceedTimes(*cb, 1);
  const Status s = cb->TransitionToHalfOpen();
  if (r4j()) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("illegal state transition from CLOSED to HALF_OPEN"),
              std::string::npos)
        << s;
    EXPECT_EQ(cb->state(), State::kClosed);
    EXPECT_EQ(cb->metrics().buffered_calls, 2);
    EXPECT_EQ(cb->metrics().failed_calls, 1);
    EXPECT_EQ(recorder_->size(), 0u);
  } else {
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(cb->state(), State::kHalfOpen);
    ASSERT_EQ(recorder_->size(), 1u);
    EXPECT_EQ(recorder_->last().to, State::kHalfOpen);
  }
}

TEST_P(Resilience4jSemantics, Point19_OpenAndHalfOpenFromMetricsOnlyAreIllegalInResilience4j) {
  auto cb = Make(CountConfig(4, 4));
  ASSERT_NE(cb, nullptr);
  cb->MetricsOnly();
  FailTimes(*cb, 1);
  const std::size_t before = recorder_->size();
  const Status open = cb->TransitionToOpen();
  const Status half_open = cb->TransitionToHalfOpen();
  if (r4j()) {
    EXPECT_EQ(open.code(), StatusCode::kInvalidArgument) << open;
    EXPECT_EQ(half_open.code(), StatusCode::kInvalidArgument) << half_open;
    EXPECT_EQ(cb->state(), State::kMetricsOnly);
    EXPECT_EQ(cb->metrics().failed_calls, 1);
    EXPECT_EQ(recorder_->size(), before);
  } else {
    EXPECT_TRUE(open.ok()) << open;
    EXPECT_TRUE(half_open.ok()) << half_open;
    EXPECT_EQ(cb->state(), State::kHalfOpen);
  }
}

TEST_P(Resilience4jSemantics, Point19_LegalOperatorMovesAreTakenInBothModes) {
  auto cb = Make(CountConfig(4, 4));
  ASSERT_NE(cb, nullptr);
  EXPECT_TRUE(cb->TransitionToOpen().ok());
  EXPECT_TRUE(cb->TransitionToHalfOpen().ok());
  EXPECT_EQ(cb->state(), State::kHalfOpen);
  cb->ForceOpen();
  EXPECT_TRUE(cb->TransitionToHalfOpen().ok());  // FORCED_OPEN -> HALF_OPEN is in the table.
  cb->Disable();
  EXPECT_TRUE(cb->TransitionToOpen().ok());  // So is DISABLED -> OPEN.
  EXPECT_EQ(cb->state(), State::kOpen);
}

// ---------------------------------------------------------------------------
// Point 20: a move to the current state starts it afresh; kResilience4j
// tells listeners nothing of it (StateTransition.isInternalTransition),
// kDefault publishes X -> X so that an audit sees the operator's action.

TEST_P(Resilience4jSemantics, Point20_MoveToTheCurrentStatePublishesNoEventInResilience4j) {
  auto cb = Make(CountConfig(4, 4));
  ASSERT_NE(cb, nullptr);
  FailTimes(*cb, 1);
  cb->TransitionToClosed();
  EXPECT_EQ(cb->metrics().buffered_calls, 0);  // Afresh in both modes.
  cb->ForceOpen();
  cb->ForceOpen();
  cb->Reset();
  cb->Reset();
  std::vector<std::pair<State, State>> moves;
  for (const RecordedTransition& t : recorder_->transitions()) moves.emplace_back(t.from, t.to);
  using P = std::pair<State, State>;
  if (r4j()) {
    EXPECT_EQ(moves, (std::vector<P>{{State::kClosed, State::kForcedOpen},
                                     {State::kForcedOpen, State::kClosed}}));
  } else {
    EXPECT_EQ(moves, (std::vector<P>{{State::kClosed, State::kClosed},
                                     {State::kClosed, State::kForcedOpen},
                                     {State::kForcedOpen, State::kForcedOpen},
                                     {State::kForcedOpen, State::kClosed},
                                     {State::kClosed, State::kClosed}}));
  }
}

// ---------------------------------------------------------------------------
// Point 22: FORCED_OPEN counts as an OPEN period in kResilience4j
// (ForcedOpenState(attempts + 1)): the next OPEN's wait interval continues
// from it. kDefault starts again from attempt 1, as after CLOSED.

TEST_P(Resilience4jSemantics, Point22_ForcedOpenCountsAsAnOpenAttemptInResilience4j) {
  CircuitBreakerConfig c = CountConfig(4, 4);
  c.wait_interval_function = [](int attempt) { return attempt * kWait; };
  auto cb = Make(c);
  ASSERT_NE(cb, nullptr);
  cb->ForceOpen();
  ASSERT_TRUE(cb->TransitionToOpen().ok());
  EXPECT_EQ(cb->metrics().open_attempts, r4j() ? 2 : 1);
  EXPECT_EQ(cb->metrics().retry_at, kT0 + (r4j() ? 2 : 1) * kWait);
}

}  // namespace
}  // namespace fusebox
