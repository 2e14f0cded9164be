// Unit tests of Pipeline on a ManualClock in auto-advance mode: the order of
// the stages, each stage's own refusal code, the retry storm (the breaker
// opens, retries stop at once), retry recording, Retry-After, timeouts seen
// by the breaker, exceptions.
#include "fusebox/pipeline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

#include "fusebox/testing/manual_clock.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;

constexpr TimePoint kEpoch = ManualClock::kEpoch;

// Opens after 10 calls at 50 % failures, for 10 s.
CircuitBreakerConfig StormConfig() {
  CircuitBreakerConfig c;
  c.failure_rate_threshold = 50;
  c.sliding_window_size = 10;
  c.minimum_number_of_calls = 10;
  c.wait_duration_in_open_state = 10s;
  return c;
}

class PipelineTest : public ::testing::Test {
 protected:
  template <typename T>
  static std::shared_ptr<T> Must(Result<std::unique_ptr<T>> r) {
    return MustCreate(std::move(r));
  }
  std::shared_ptr<CircuitBreaker> Breaker(CircuitBreakerConfig c = StormConfig()) {
    return Must(CircuitBreaker::Create("dep", std::move(c), clock_));
  }
  std::shared_ptr<Retry> RetryOf(RetryOptions o) {
    return Must(Retry::Create(std::move(o), clock_));
  }
  std::shared_ptr<Timeout> TimeoutOf(Duration d) {
    return Must(Timeout::Create({.timeout_duration = d}, clock_));
  }
  std::shared_ptr<Bulkhead> BulkheadOf(int n) {
    return Must(Bulkhead::Create({.max_concurrent_calls = n}, clock_));
  }
  std::shared_ptr<RateLimiter> LimiterOf(int n) {
    return Must(RateLimiter::Create({.limit_for_period = n, .limit_refresh_period = 1s}, clock_));
  }
  std::unique_ptr<Pipeline> Build(Pipeline::Builder& builder) {
    return MustCreate(builder.Build());
  }

  // A dependency that always fails with kUnavailable, counting its calls.
  auto Failing() {
    return [this]() -> Result<int> {
      ++calls_;
      return Status::Unavailable("down");
    };
  }

  ManualClock clock_{ManualClock::Options{.auto_advance = true}};
  int calls_ = 0;
};

TEST_F(PipelineTest, BuildNamesTheBadStage) {
  auto r = Pipeline::Builder().WithBulkhead(nullptr).Build();
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("bulkhead must not be null"));
  ManualClock other;
  r = Pipeline::Builder()
          .WithCircuitBreaker(Breaker())
          .WithTimeout(Must(Timeout::Create({}, other)))
          .Build();
  EXPECT_THAT(std::string(r.error().message()),
              HasSubstr("timeout uses a different clock than circuit_breaker"));
}

TEST_F(PipelineTest, EmptyPipelineJustCalls) {
  Pipeline::Builder builder;
  auto pipeline = Build(builder);
  EXPECT_EQ(*pipeline->Execute([] { return 5; }), 5);
  EXPECT_TRUE(pipeline->Execute([] {}).ok());
}

TEST_F(PipelineTest, EachStageRefusesWithItsOwnCode) {
  auto limiter = LimiterOf(1);
  auto bulkhead = BulkheadOf(1);
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithRateLimiter(limiter).WithBulkhead(bulkhead).WithCircuitBreaker(breaker);
  auto pipeline = Build(builder);
  auto dep = [&] {
    ++calls_;
    return 1;
  };

  EXPECT_TRUE(pipeline->Execute(dep).has_value());
  EXPECT_EQ(pipeline->Execute(dep).error().code(), StatusCode::kRateLimited);

  clock_.Advance(1s);
  BulkheadPermit held = *bulkhead->TryAcquire();
  EXPECT_EQ(pipeline->Execute(dep).error().code(), StatusCode::kBulkheadFull);
  held.Release();

  clock_.Advance(1s);
  ASSERT_TRUE(breaker->TransitionToOpen().ok());
  Result<int> open = pipeline->Execute(dep);
  EXPECT_EQ(open.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(open.error().retry_at(), clock_.Now() + 10s);
  EXPECT_EQ(bulkhead->available_permits(), 1);  // The slot came back.
  EXPECT_EQ(calls_, 1);

  Pipeline::Builder inner;
  inner.WithRetry(RetryOf({.wait_duration = 1ms})).WithTimeout(TimeoutOf(1s));
  auto retrying = Build(inner);
  EXPECT_EQ(retrying->Execute(Failing()).error().code(), StatusCode::kRetriesExhausted);
  Pipeline::Builder timed;
  timed.WithTimeout(TimeoutOf(1s));
  auto timing = Build(timed);
  EXPECT_EQ(timing->Execute([&] { clock_.Advance(2s); }).code(), StatusCode::kTimeout);
}

TEST_F(PipelineTest, RateLimiterComesBeforeTheBulkhead) {
  auto limiter = LimiterOf(1);
  auto bulkhead = BulkheadOf(1);
  Pipeline::Builder builder;
  builder.WithBulkhead(bulkhead).WithRateLimiter(limiter);  // The order of With*() is irrelevant.
  auto pipeline = Build(builder);
  ASSERT_TRUE(limiter->TryAcquire().ok());
  BulkheadPermit held = *bulkhead->TryAcquire();
  // Both would refuse: the rate limiter speaks first.
  EXPECT_EQ(pipeline->Execute([] {}).code(), StatusCode::kRateLimited);
}

// Seed 003's retry storm: the dependency is down, each call retries up to 3
// times. With every attempt recorded, the 10th failure opens the breaker, the
// loop that saw it stops before its next wait, and no later call reaches the
// dependency.
TEST_F(PipelineTest, RetryStormStopsWhenTheBreakerOpens) {
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker).WithRetry(
      RetryOf({.max_attempts = 3, .wait_duration = 100ms}));
  auto pipeline = Build(builder);
  std::vector<StatusCode> codes;
  for (int i = 0; i < 20; ++i) codes.push_back(pipeline->Execute(Failing()).error().code());

  EXPECT_EQ(calls_, 10);  // 3 + 3 + 3 + 1, then nothing.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(codes[i], StatusCode::kRetriesExhausted) << i;
  for (int i = 3; i < 20; ++i) EXPECT_EQ(codes[i], StatusCode::kCircuitOpen) << i;
  EXPECT_EQ(breaker->state(), State::kOpen);
  // Three loops waited twice each; the fourth stopped without waiting.
  EXPECT_EQ(clock_.Now(), kEpoch + 600ms);
}

TEST_F(PipelineTest, RetryStormWithFinalResultRecording) {
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker).WithRetry(
      RetryOf({.max_attempts = 3, .wait_duration = 100ms}), RetryRecording::kFinalResult);
  auto pipeline = Build(builder);
  std::vector<StatusCode> codes;
  for (int i = 0; i < 20; ++i) codes.push_back(pipeline->Execute(Failing()).error().code());
  // Ten logical calls of three attempts fill the window; then nothing passes.
  EXPECT_EQ(calls_, 30);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(codes[i], StatusCode::kRetriesExhausted) << i;
  for (int i = 10; i < 20; ++i) EXPECT_EQ(codes[i], StatusCode::kCircuitOpen) << i;
}

TEST_F(PipelineTest, FinalResultLoopStopsWhenTheBreakerOpensMeanwhile) {
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker).WithRetry(RetryOf({.max_attempts = 5, .wait_duration = 1s}),
                                                RetryRecording::kFinalResult);
  auto pipeline = Build(builder);
  Result<int> r = pipeline->Execute([&]() -> Result<int> {
    ++calls_;
    EXPECT_TRUE(breaker->TransitionToOpen().ok());  // As another thread's failures would.
    return Status::Unavailable("down");
  });
  EXPECT_EQ(r.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(clock_.Now(), kEpoch);
}

TEST_F(PipelineTest, RecordingModesDifferInWhatTheBreakerSees) {
  auto flaky = [this]() -> Result<int> {
    return ++calls_ % 3 == 0 ? Result<int>(1) : Result<int>(Status::Unavailable("blip"));
  };
  for (RetryRecording mode : {RetryRecording::kEachAttempt, RetryRecording::kFinalResult}) {
    auto breaker = Breaker();
    Pipeline::Builder builder;
    builder.WithCircuitBreaker(breaker).WithRetry(RetryOf({.wait_duration = 1ms}), mode);
    auto pipeline = Build(builder);
    EXPECT_TRUE(pipeline->Execute(flaky).has_value());
    const CircuitBreakerMetrics m = breaker->metrics();
    if (mode == RetryRecording::kEachAttempt) {
      EXPECT_EQ(m.failed_calls, 2);
      EXPECT_EQ(m.successful_calls, 1);
    } else {
      EXPECT_EQ(m.failed_calls, 0);
      EXPECT_EQ(m.successful_calls, 1);
    }
  }
}

TEST_F(PipelineTest, TimedOutAttemptIsASlowFailureForTheBreaker) {
  CircuitBreakerConfig c = StormConfig();
  c.slow_call_duration_threshold = 500ms;
  auto breaker = Breaker(c);
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker).WithTimeout(TimeoutOf(1s));
  auto pipeline = Build(builder);
  Status s = pipeline->Execute([&](const std::stop_token& stop) {
    while (!stop.stop_requested()) clock_.Advance(100ms);
  });
  EXPECT_EQ(s.code(), StatusCode::kTimeout);
  const CircuitBreakerMetrics m = breaker->metrics();
  EXPECT_EQ(m.failed_calls, 1);
  EXPECT_EQ(m.slow_failed_calls, 1);
}

TEST_F(PipelineTest, RetryAfterOpensTheBreakerByDefault) {
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker).WithRetry(RetryOf({.wait_duration = 1ms}));
  auto pipeline = Build(builder);
  auto throttled = [this]() -> Result<int> {
    if (++calls_ == 1) return Status::Rejected(StatusCode::kUnavailable, "429", clock_.Now() + 30s);
    return 1;
  };
  Result<int> r = pipeline->Execute(throttled);
  EXPECT_EQ(r.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(r.error().retry_at(), kEpoch + 30s);
  EXPECT_EQ(calls_, 1);
  EXPECT_EQ(breaker->state(), State::kOpen);
}

TEST_F(PipelineTest, RetryAfterCanDelayTheRetryInstead) {
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker)
      .WithRetry(RetryOf({.wait_duration = 1ms}))
      .WithRetryAfter(RetryAfter::kDelaysRetry);
  auto pipeline = Build(builder);
  Result<int> r = pipeline->Execute([this]() -> Result<int> {
    if (++calls_ == 1) return Status::Rejected(StatusCode::kUnavailable, "429", clock_.Now() + 30s);
    return 1;
  });
  EXPECT_TRUE(r.has_value());
  EXPECT_EQ(calls_, 2);
  EXPECT_EQ(clock_.Now(), kEpoch + 30s);
  EXPECT_EQ(breaker->state(), State::kClosed);
}

TEST_F(PipelineTest, OneBulkheadSlotCoversEveryAttempt) {
  auto bulkhead = BulkheadOf(2);
  Pipeline::Builder builder;
  builder.WithBulkhead(bulkhead).WithRetry(RetryOf({.wait_duration = 1ms}));
  auto pipeline = Build(builder);
  std::vector<int> free_during;
  (void)pipeline->Execute([&]() -> Status {
    free_during.push_back(bulkhead->available_permits());
    return Status::Unavailable("down");
  });
  EXPECT_EQ(free_during, (std::vector<int>{1, 1, 1}));
  EXPECT_EQ(bulkhead->available_permits(), 2);
}

TEST_F(PipelineTest, RetriesDrawNoRateLimiterPermits) {
  auto limiter = LimiterOf(1);
  Pipeline::Builder builder;
  builder.WithRateLimiter(limiter).WithRetry(RetryOf({.wait_duration = 1ms}));
  auto pipeline = Build(builder);
  auto flaky = [this]() -> Result<int> {
    return ++calls_ < 3 ? Result<int>(Status::Unavailable("blip")) : Result<int>(1);
  };
  EXPECT_TRUE(pipeline->Execute(flaky).has_value());
  EXPECT_EQ(calls_, 3);
}

TEST_F(PipelineTest, ExceptionIsAFailureFreesEverythingAndPropagates) {
  auto bulkhead = BulkheadOf(1);
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithBulkhead(bulkhead)
      .WithCircuitBreaker(breaker)
      .WithRetry(RetryOf({}))
      .WithTimeout(TimeoutOf(1s));
  auto pipeline = Build(builder);
  EXPECT_THROW((void)pipeline->Execute([&]() -> Status {
    ++calls_;
    throw std::runtime_error("boom");
  }),
               std::runtime_error);
  EXPECT_EQ(calls_, 1);  // Not retried.
  EXPECT_EQ(bulkhead->available_permits(), 1);
  EXPECT_EQ(breaker->metrics().failed_calls, 1);
}

TEST_F(PipelineTest, ClassifierDecidesWhatTheBreakerCounts) {
  auto breaker = Breaker();
  Pipeline::Builder builder;
  builder.WithCircuitBreaker(breaker).WithOutcomeClassifier([](const Status& s) {
    return s.code() == StatusCode::kInvalidArgument ? OutcomeKind::kIgnored : OutcomeKind::kFailure;
  });
  auto pipeline = Build(builder);
  EXPECT_EQ(pipeline->Execute([] { return Status::InvalidArgument("bad id"); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(breaker->metrics().buffered_calls, 0);
  EXPECT_EQ(pipeline->Execute([] { return Status::Unavailable("down"); }).code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(breaker->metrics().failed_calls, 1);
}

}  // namespace
}  // namespace fusebox
