// Unit tests of the keyed Pipeline (Execute(key, fn), pipeline.h): each key
// runs through its own breaker from a Registry and, where configured, its own
// bulkhead and rate limiter, which follow the breaker's lifetime; and retry
// loops are counted by the Retry, inside a pipeline too, and reported by the
// MetricsCollector with no code around the calls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/bulkhead.h"
#include "fusebox/metrics.h"
#include "fusebox/pipeline.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"
#include "fusebox/testing/status_macros.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;

// Opens after 4 calls at 50 % failures, for 10 s.
CircuitBreakerConfig SmallWindow() {
  CircuitBreakerConfig c;
  c.failure_rate_threshold = 50;
  c.sliding_window_size = 4;
  c.minimum_number_of_calls = 4;
  c.wait_duration_in_open_state = 10s;
  return c;
}

class KeyedPipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegistryOptions options;
    options.clock = &clock_;
    options.default_config = SmallWindow();
    registry_ = MustCreate(Registry::Create(std::move(options)));
    ASSERT_NE(registry_, nullptr);
  }

  std::shared_ptr<Retry> RetryOf(int attempts) {
    return MustCreate(Retry::Create({.max_attempts = attempts, .wait_duration = 100ms}, clock_));
  }

  std::unique_ptr<Pipeline> Build(Pipeline::Builder builder) { return MustCreate(builder.Build()); }

  ManualClock clock_{ManualClock::Options{.auto_advance = true}};
  std::shared_ptr<Registry> registry_;
};

Result<int> Ok() { return 1; }
Result<int> Down() { return Status::Unavailable("down"); }

TEST_F(KeyedPipelineTest, EachKeyRunsThroughItsOwnBreakerFromTheRegistry) {
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_)));
  ASSERT_NE(pipeline, nullptr);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(pipeline->Execute("a", Down).error().code(), StatusCode::kUnavailable);
  ASSERT_NE(registry_->Find("a"), nullptr);
  EXPECT_EQ(registry_->Find("a")->state(), State::kOpen);
  int calls = 0;
  Result<int> refused = pipeline->Execute("a", [&] {
    ++calls;
    return Ok();
  });
  EXPECT_EQ(refused.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(calls, 0);
  // Another key has a breaker of its own, still closed; a RegistryKey finds the same breaker.
  FUSEBOX_ASSERT_OK_AND_ASSIGN(int v, pipeline->Execute("b", Ok));
  EXPECT_EQ(v, 1);
  EXPECT_EQ(registry_->Find("b")->state(), State::kClosed);
  EXPECT_EQ(pipeline->Execute(RegistryKey("a"), Ok).error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(registry_->size(), 2u);
}

TEST_F(KeyedPipelineTest, BreakersComeFromTheNamedTemplate) {
  CircuitBreakerConfig one_failure = SmallWindow();
  one_failure.minimum_number_of_calls = 1;
  one_failure.sliding_window_size = 1;
  FUSEBOX_ASSERT_OK(registry_->AddConfig("fragile", one_failure));
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_, "fragile")));
  ASSERT_NE(pipeline, nullptr);
  EXPECT_EQ(pipeline->Execute("a", Down).error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(pipeline->Execute("a", Ok).error().code(), StatusCode::kCircuitOpen);

  auto missing = Build(std::move(Pipeline::Builder().WithRegistry(registry_, "nope")));
  ASSERT_NE(missing, nullptr);
  // A new key: the registry checks the template only when it creates a breaker.
  Result<int> r = missing->Execute("z", Ok);
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("nope"));
}

TEST_F(KeyedPipelineTest, BulkheadPerKeyBoundsEachKeyAlone) {
  auto pipeline = Build(std::move(
      Pipeline::Builder().WithRegistry(registry_).WithBulkheadPerKey({.max_concurrent_calls = 1})));
  ASSERT_NE(pipeline, nullptr);
  // Inside a call of "a", "a" has no free slot but "b" has one.
  Result<int> outer = pipeline->Execute("a", [&]() -> Result<int> {
    EXPECT_EQ(pipeline->Execute("a", Ok).error().code(), StatusCode::kBulkheadFull);
    return pipeline->Execute("b", Ok);
  });
  FUSEBOX_ASSERT_OK(outer);
  // The slot came back.
  FUSEBOX_EXPECT_OK(pipeline->Execute("a", Ok));
}

TEST_F(KeyedPipelineTest, RateLimiterPerKeyFollowsTheBreakersLifetime) {
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_).WithRateLimiterPerKey(
      {.limit_for_period = 1, .limit_refresh_period = 1h})));
  ASSERT_NE(pipeline, nullptr);
  FUSEBOX_EXPECT_OK(pipeline->Execute("a", Ok));
  EXPECT_EQ(pipeline->Execute("a", Ok).error().code(), StatusCode::kRateLimited);
  FUSEBOX_EXPECT_OK(pipeline->Execute("b", Ok));
  // The registry drops "a": its next breaker comes with a limiter of its own.
  ASSERT_TRUE(registry_->Remove("a"));
  FUSEBOX_EXPECT_OK(pipeline->Execute("a", Ok));
  EXPECT_EQ(pipeline->Execute("b", Ok).error().code(), StatusCode::kRateLimited);
}

TEST_F(KeyedPipelineTest, SharedStagesApplyToEveryKey) {
  auto retry = RetryOf(3);
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_).WithRetry(retry)));
  ASSERT_NE(pipeline, nullptr);
  int calls = 0;
  Result<int> r = pipeline->Execute("a", [&] {
    ++calls;
    return Down();
  });
  EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_EQ(calls, 3);
  // Each attempt was recorded by "a"'s breaker (kEachAttempt).
  EXPECT_EQ(registry_->Find("a")->metrics().failed_calls, 3);
}

TEST_F(KeyedPipelineTest, KeyedAndUnkeyedExecuteAreNotMixedUp) {
  auto keyed = Build(std::move(Pipeline::Builder().WithRegistry(registry_)));
  ASSERT_NE(keyed, nullptr);
  Result<int> no_key = keyed->Execute(Ok);
  EXPECT_EQ(no_key.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(no_key.error().reason(), "keyed_pipeline_needs_key");
  EXPECT_EQ(keyed->Execute("", Ok).error().code(), StatusCode::kInvalidArgument);

  auto plain = Build(Pipeline::Builder());
  ASSERT_NE(plain, nullptr);
  Result<int> key = plain->Execute("a", Ok);
  EXPECT_EQ(key.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(key.error().reason(), "pipeline_not_keyed");
}

TEST_F(KeyedPipelineTest, BuildRefusesWhatCannotWork) {
  auto breaker = MustCreate(CircuitBreaker::Create("x", {}, clock_));
  auto both = Pipeline::Builder()
                  .WithRegistry(registry_)
                  .WithCircuitBreaker(std::shared_ptr<CircuitBreaker>(std::move(breaker)))
                  .Build();
  EXPECT_THAT(std::string(both.error().message()), HasSubstr("exclusive"));
  auto no_registry = Pipeline::Builder().WithBulkheadPerKey({}).Build();
  EXPECT_THAT(std::string(no_registry.error().message()), HasSubstr("need a registry"));
  // A shared and a per-key bulkhead (rate limiter) cannot both bound a key.
  auto shared_bulkhead = MustCreate(Bulkhead::Create({}, clock_));
  auto two_bulkheads = Pipeline::Builder()
                           .WithRegistry(registry_)
                           .WithBulkhead(std::shared_ptr<Bulkhead>(std::move(shared_bulkhead)))
                           .WithBulkheadPerKey({})
                           .Build();
  ASSERT_FALSE(two_bulkheads.has_value());
  EXPECT_THAT(std::string(two_bulkheads.error().message()),
              HasSubstr("bulkhead and bulkhead per key are exclusive"));
  auto shared_limiter = MustCreate(RateLimiter::Create({}, clock_));
  auto two_limiters = Pipeline::Builder()
                          .WithRegistry(registry_)
                          .WithRateLimiter(std::shared_ptr<RateLimiter>(std::move(shared_limiter)))
                          .WithRateLimiterPerKey({})
                          .Build();
  ASSERT_FALSE(two_limiters.has_value());
  EXPECT_THAT(std::string(two_limiters.error().message()),
              HasSubstr("rate_limiter and rate limiter per key are exclusive"));
  auto bad = Pipeline::Builder()
                 .WithRegistry(registry_)
                 .WithRateLimiterPerKey({.limit_for_period = 0})
                 .Build();
  EXPECT_THAT(std::string(bad.error().message()), HasSubstr("limit_for_period"));
  auto null_registry = Pipeline::Builder().WithRegistry(nullptr).Build();
  EXPECT_THAT(std::string(null_registry.error().message()), HasSubstr("registry must not be null"));
  ManualClock other;
  auto retry = MustCreate(Retry::Create({}, other));
  auto clocks = Pipeline::Builder()
                    .WithRegistry(registry_)
                    .WithRetry(std::shared_ptr<Retry>(std::move(retry)))
                    .Build();
  EXPECT_THAT(std::string(clocks.error().message()), HasSubstr("different clock"));
}

// A registry that keeps only two breakers, so that calls on a few keys evict
// all the time.
std::shared_ptr<Registry> TwoBreakerRegistry(ManualClock& clock) {
  RegistryOptions options;
  options.clock = &clock;
  options.max_breakers = 2;
  return std::shared_ptr<Registry>(MustCreate(Registry::Create(std::move(options))));
}

// Four threads, 500 calls each over eight keys: how many `call` says succeeded.
template <typename F>
int SucceedingCalls(F call) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        if (call("k" + std::to_string((i + t) % 8))) ok.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return ok.load();
}

// Many threads, few keys, a registry that keeps only two breakers: per-key
// policies are made, replaced and swept while calls run (TSan).
TEST_F(KeyedPipelineTest, ConcurrentKeysWithEvictions) {
  ManualClock clock;
  std::shared_ptr<Registry> registry = TwoBreakerRegistry(clock);
  ASSERT_NE(registry, nullptr);
  auto pipeline = Build(std::move(
      Pipeline::Builder().WithRegistry(registry).WithBulkheadPerKey({.max_concurrent_calls = 64})));
  ASSERT_NE(pipeline, nullptr);
  EXPECT_EQ(SucceedingCalls(
                [&](const std::string& key) { return pipeline->Execute(key, Ok).has_value(); }),
            4 * 500);
}

// The breaker of a call in flight is in use (borrowed, not shared, without
// per-key policies): a sweep that runs meanwhile, past idle_timeout, keeps
// it, through every attempt of a retry loop and until an exception has
// passed, and the call's outcome lands in that breaker. Once the call is
// over, the same sweep drops it.
TEST_F(KeyedPipelineTest, ASweepDuringACallKeepsItsBreaker) {
  // The call lasts 16 min: not a slow call, which would protect the breaker.
  CircuitBreakerConfig patient = SmallWindow();
  patient.slow_call_duration_threshold = 1h;
  FUSEBOX_ASSERT_OK(registry_->AddConfig("patient", patient));
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_, "patient")));
  ASSERT_NE(pipeline, nullptr);
  const CircuitBreaker* lent = nullptr;
  FUSEBOX_ASSERT_OK(pipeline->Execute("a", [&] {
    lent = registry_->Find("a").get();  // the shared_ptr is dropped at once
    clock_.Advance(16min);              // idle_timeout is 15 min
    EXPECT_EQ(registry_->Sweep(), 0u);
    EXPECT_EQ(registry_->Find("a").get(), lent);
    return Ok();
  }));
  ASSERT_NE(lent, nullptr);
  EXPECT_EQ(registry_->Find("a").get(), lent);
  EXPECT_EQ(registry_->Find("a")->metrics().successful_calls, 1);
  // Not in use any more, idle and clean: dropped.
  clock_.Advance(16min);
  EXPECT_EQ(registry_->Sweep(), 1u);
  EXPECT_EQ(registry_->Find("a"), nullptr);
}

TEST_F(KeyedPipelineTest, ASweepBetweenAttemptsKeepsTheBreakerOfTheLoop) {
  // Failures ignored by the breaker keep its window clean (evictable when idle).
  auto pipeline = Build(
      std::move(Pipeline::Builder()
                    .WithRegistry(registry_)
                    .WithRetry(RetryOf(3))
                    .WithOutcomeClassifier([](const Status&) { return OutcomeKind::kIgnored; })));
  ASSERT_NE(pipeline, nullptr);
  int attempts = 0;
  const CircuitBreaker* lent = nullptr;
  FUSEBOX_ASSERT_OK(pipeline->Execute("a", [&]() -> Result<int> {
    if (++attempts == 1) lent = registry_->Find("a").get();
    clock_.Advance(16min);
    EXPECT_EQ(registry_->Sweep(), 0u) << "attempt " << attempts;
    EXPECT_EQ(registry_->Find("a").get(), lent) << "attempt " << attempts;
    return attempts < 3 ? Down() : Ok();
  }));
  EXPECT_EQ(attempts, 3);
  ASSERT_NE(lent, nullptr);
  EXPECT_EQ(registry_->Find("a").get(), lent);
  EXPECT_EQ(registry_->Find("a")->metrics().successful_calls, 1);
  EXPECT_EQ(registry_->Find("a")->metrics().failed_calls, 0);
}

TEST_F(KeyedPipelineTest, ASweepDuringACallThatThrowsKeepsItsBreaker) {
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_)));
  ASSERT_NE(pipeline, nullptr);
  const CircuitBreaker* lent = nullptr;
  EXPECT_THROW((void)pipeline->Execute("a",
                                       [&]() -> Result<int> {
                                         lent = registry_->Find("a").get();
                                         clock_.Advance(16min);
                                         EXPECT_EQ(registry_->Sweep(), 0u);
                                         throw std::runtime_error("boom");
                                       }),
               std::runtime_error);
  ASSERT_NE(lent, nullptr);
  EXPECT_EQ(registry_->Find("a").get(), lent);
  EXPECT_EQ(registry_->Find("a")->metrics().failed_calls, 1);
}

// As ConcurrentKeysWithEvictions, without per-key policies: every call
// borrows its breaker while other threads' insertions evict (TSan).
TEST_F(KeyedPipelineTest, ConcurrentBorrowedKeysWithEvictions) {
  ManualClock clock;
  std::shared_ptr<Registry> registry = TwoBreakerRegistry(clock);
  ASSERT_NE(registry, nullptr);
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry)));
  ASSERT_NE(pipeline, nullptr);
  // Every call finds its own breaker still in the registry while it runs.
  EXPECT_EQ(SucceedingCalls([&](const std::string& key) {
              return pipeline
                  ->Execute(key, [&] { return registry->Find(key) != nullptr ? Ok() : Down(); })
                  .has_value();
            }),
            4 * 500);
}

// ---------------------------------------------------------------------------
// Retry loops are counted without user code.

class RetryMetricsTest : public KeyedPipelineTest {
 protected:
  RetrySample Sample() {
    MetricsSnapshot s = metrics_.Collect();
    for (const RetrySample& r : s.retries) {
      if (r.name == "payment") return r;
    }
    ADD_FAILURE() << "no retry sample named payment";
    return {};
  }

  MetricsCollector metrics_;
};

TEST_F(RetryMetricsTest, PipelineLoopsAreCountedByHowTheyEnded) {
  auto retry = RetryOf(3);
  metrics_.AddRetry("payment", *retry);
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_).WithRetry(retry)));
  ASSERT_NE(pipeline, nullptr);
  int n = 0;
  auto third_time_lucky = [&]() -> Result<int> { return ++n % 3 == 0 ? Ok() : Down(); };
  auto invalid = []() -> Result<int> { return Status::InvalidArgument("bad"); };

  FUSEBOX_EXPECT_OK(pipeline->Execute("a", Ok));
  FUSEBOX_EXPECT_OK(pipeline->Execute("a", Ok));
  FUSEBOX_EXPECT_OK(pipeline->Execute("b", third_time_lucky));
  EXPECT_EQ(pipeline->Execute("c", invalid).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pipeline->Execute("d", Down).error().code(), StatusCode::kRetriesExhausted);
  const RetrySample s = Sample();
  EXPECT_EQ(s.successful_without_retry, 2u);
  EXPECT_EQ(s.successful_with_retry, 1u);
  EXPECT_EQ(s.failed_without_retry, 1u);
  EXPECT_EQ(s.failed_with_retry, 1u);

  // Retry::Execute counts into the same counters.
  FUSEBOX_EXPECT_OK(retry->Execute(Ok));
  EXPECT_EQ(Sample().successful_without_retry, 3u);
  EXPECT_TRUE(metrics_.RemoveRetry("payment"));
  EXPECT_TRUE(metrics_.Collect().retries.empty());
}

TEST_F(RetryMetricsTest, ABreakerOpeningBetweenAttemptsEndsAFailedLoopWithRetry) {
  auto retry = RetryOf(5);
  metrics_.AddRetry("payment", *retry);
  auto pipeline = Build(std::move(Pipeline::Builder().WithRegistry(registry_).WithRetry(retry)));
  ASSERT_NE(pipeline, nullptr);
  // The window of 4 opens on the 4th failure; the loop stops there.
  EXPECT_EQ(pipeline->Execute("a", Down).error().code(), StatusCode::kCircuitOpen);
  // Refused before any attempt: no loop.
  EXPECT_EQ(pipeline->Execute("a", Down).error().code(), StatusCode::kCircuitOpen);
  const RetrySample s = Sample();
  EXPECT_EQ(s.failed_with_retry, 1u);
  EXPECT_EQ(s.failed_without_retry + s.successful_with_retry + s.successful_without_retry, 0u);
}

TEST_F(RetryMetricsTest, LoopsOnManyThreadsAreAllCounted) {
  auto retry = RetryOf(2);
  metrics_.AddRetry("payment", *retry);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) (void)retry->Execute(Ok);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(Sample().successful_without_retry, 4000u);
}

}  // namespace
}  // namespace fusebox
