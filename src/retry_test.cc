// Unit tests of Retry on a ManualClock in auto-advance mode: every wait moves
// virtual time at once, so the tests read the waits off the clock and never
// sleep.
#include "fusebox/retry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "fusebox/backoff.h"
#include "fusebox/testing/manual_clock.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr TimePoint kEpoch = ManualClock::kEpoch;

class RetryTest : public ::testing::Test {
 protected:
  std::unique_ptr<Retry> Make(RetryOptions options) {
    return MustCreate(Retry::Create(std::move(options), clock_));
  }

  // A dependency that fails with `failures` in turn, then succeeds with 42,
  // and notes when (relative to kEpoch) each attempt began.
  auto Dependency(std::vector<Status> failures) {
    return [this, failures = std::move(failures), n = std::size_t{0}]() mutable -> Result<int> {
      attempts_.push_back(clock_.Now() - kEpoch);
      if (n < failures.size()) return failures[n++];
      return 42;
    };
  }

  ManualClock clock_{ManualClock::Options{.auto_advance = true}};
  std::vector<Duration> attempts_;
};

Status Unavailable() { return Status::Unavailable("reset by peer"); }

TEST_F(RetryTest, CreateNamesTheBadField) {
  auto bad = [&](RetryOptions o) { return Retry::Create(std::move(o), clock_).error(); };
  RetryOptions o;
  o.max_attempts = 0;
  EXPECT_EQ(bad(o).code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad(o).message()), HasSubstr("max_attempts"));
  o = {};
  o.wait_duration = -1ns;
  EXPECT_THAT(std::string(bad(o).message()), HasSubstr("wait_duration"));
  o = {};
  o.max_duration = -1ns;
  EXPECT_THAT(std::string(bad(o).message()), HasSubstr("max_duration"));
  o = {};
  o.max_retry_after = -1ns;
  EXPECT_THAT(std::string(bad(o).message()), HasSubstr("max_retry_after"));
}

TEST_F(RetryTest, FirstSuccessIsReturnedWithoutWaiting) {
  auto retry = Make({});
  Result<int> r = retry->Execute(Dependency({}));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 42);
  EXPECT_THAT(attempts_, ElementsAre(0ns));
  EXPECT_EQ(clock_.Now(), kEpoch);
}

TEST_F(RetryTest, RetriesUnavailableWithTheDefaultWait) {
  auto retry = Make({});
  Result<int> r = retry->Execute(Dependency({Unavailable(), Unavailable()}));
  ASSERT_TRUE(r.has_value());
  EXPECT_THAT(attempts_, ElementsAre(0ns, 500ms, 1000ms));
}

TEST_F(RetryTest, ExhaustedAfterMaxAttemptsNamesTheLastFailure) {
  auto retry = Make({.max_attempts = 3, .wait_duration = 10ms});
  Result<int> r = retry->Execute(Dependency({Unavailable(), Unavailable(), Unavailable()}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("3 attempts (max_attempts)"));
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("Unavailable: reset by peer"));
  EXPECT_THAT(attempts_, ElementsAre(0ns, 10ms, 20ms));
}

// The last attempt's code and retry_at are kept as data, not only in the
// message, so that a Fallback can answer "retries exhausted after timeouts".
TEST_F(RetryTest, ExhaustedKeepsTheLastAttemptsCodeAndRetryAt) {
  auto retry = Make({.max_attempts = 2, .wait_duration = 10ms, .max_retry_after = 1h});
  const Status timeout = Status::Rejected(StatusCode::kTimeout, "deadline_exceeded");
  Result<int> r = retry->Execute(Dependency({timeout, timeout}));
  EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_EQ(r.error().cause(), StatusCode::kTimeout);
  EXPECT_EQ(r.error().retry_at(), std::nullopt);

  const TimePoint later = clock_.Now() + 30s;
  const Status limited = Status::Rejected(StatusCode::kUnavailable, "429", later);
  r = retry->Execute(Dependency({timeout, limited}));
  EXPECT_EQ(r.error().cause(), StatusCode::kUnavailable);
  EXPECT_EQ(r.error().retry_at(), later) << "the dependency's Retry-After survives";

  // A loop around a loop passes the innermost cause on.
  auto outer = Make(
      {.max_attempts = 2, .wait_duration = 10ms, .retry_on = [](const Status&) { return true; }});
  Result<int> nested = outer->Execute([&] {
    return retry->Execute(Dependency({timeout, timeout}));
  });
  EXPECT_EQ(nested.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_EQ(nested.error().cause(), StatusCode::kTimeout);
}

TEST_F(RetryTest, TimeoutIsRetriedByDefault) {
  auto retry = Make({.wait_duration = 1ms});
  Result<int> r = retry->Execute(Dependency({Status::Rejected(StatusCode::kTimeout, "x")}));
  EXPECT_TRUE(r.has_value());
  EXPECT_EQ(attempts_.size(), 2u);
}

TEST_F(RetryTest, CircuitOpenIsNeverRetried) {
  RetryOptions o;
  o.retry_on = [](const Status&) { return true; };  // Even a classifier cannot ask for it.
  auto retry = Make(std::move(o));
  const Status open = Status::Rejected(StatusCode::kCircuitOpen, "open", kEpoch + 5s);
  Result<int> r = retry->Execute(Dependency({open}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kCircuitOpen);
  EXPECT_EQ(r.error().retry_at(), kEpoch + 5s);
  EXPECT_EQ(attempts_.size(), 1u);
  EXPECT_EQ(clock_.Now(), kEpoch);
}

TEST_F(RetryTest, OwnGuardsAreRetriedOnlyWhenConfigured) {
  const Status full = Status::Rejected(StatusCode::kBulkheadFull, "bulkhead_full");
  const Status limited = Status::Rejected(StatusCode::kRateLimited, "rate_limited", kEpoch + 2s);
  {
    auto retry = Make({.wait_duration = 1ms});
    EXPECT_EQ(retry->Execute(Dependency({full})).error().code(), StatusCode::kBulkheadFull);
    EXPECT_EQ(retry->Execute(Dependency({limited})).error().code(), StatusCode::kRateLimited);
    EXPECT_EQ(attempts_.size(), 2u);
  }
  attempts_.clear();
  {
    auto retry =
        Make({.wait_duration = 1ms, .retry_on_bulkhead_full = true, .retry_on_rate_limited = true});
    EXPECT_TRUE(retry->Execute(Dependency({full})).has_value());
    EXPECT_THAT(attempts_, ElementsAre(0ns, 1ms));
    attempts_.clear();
    // The rate limiter's retry_at sets the wait: 2 s from the epoch, 1 ms
    // already passed.
    EXPECT_TRUE(retry->Execute(Dependency({limited})).has_value());
    EXPECT_THAT(attempts_, ElementsAre(1ms, 2s));
  }
}

TEST_F(RetryTest, NonRetryableFailureIsReturnedAsItIs) {
  auto retry = Make({});
  Result<int> r = retry->Execute(Dependency({Status::InvalidArgument("bad id")}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error(), Status::InvalidArgument("bad id"));
  EXPECT_EQ(attempts_.size(), 1u);
}

TEST_F(RetryTest, ClassifierChoosesWhatIsRetried) {
  RetryOptions o;
  o.wait_duration = 1ms;
  o.retry_on = [](const Status& s) { return s.code() == StatusCode::kInternal; };
  auto retry = Make(std::move(o));
  EXPECT_TRUE(retry->Execute(Dependency({Status::Internal("flaky")})).has_value());
  EXPECT_EQ(retry->Execute(Dependency({Unavailable()})).error().code(), StatusCode::kUnavailable);
  EXPECT_EQ(attempts_.size(), 3u);
}

TEST_F(RetryTest, IntervalFunctionSetsEachWait) {
  auto retry = Make(
      {.max_attempts = 4,
       .interval_function = backoff::Exponential({.initial = 100ms, .multiplier = 2, .max = 1s})});
  Result<int> r = retry->Execute(Dependency({Unavailable(), Unavailable(), Unavailable()}));
  EXPECT_TRUE(r.has_value());
  EXPECT_THAT(attempts_, ElementsAre(0ns, 100ms, 300ms, 700ms));
}

TEST_F(RetryTest, SeededJitterIsReproducible) {
  auto run = [&] {
    attempts_.clear();
    auto retry = Make({.max_attempts = 4,
                       .interval_function = backoff::FullJitter(
                           {.initial = 100ms, .multiplier = 2, .max = 1s}, /*seed=*/42)});
    const TimePoint start = clock_.Now();
    (void)retry->Execute(Dependency({Unavailable(), Unavailable(), Unavailable()}));
    return clock_.Now() - start;
  };
  const Duration first = run();
  EXPECT_EQ(run(), first);
  EXPECT_GT(first, 0ns);
  EXPECT_LE(first, 700ms);
}

TEST_F(RetryTest, RetryAfterHintSetsTheNextWait) {
  auto retry = Make({.wait_duration = 1ms});
  const Status throttled = Status::Rejected(StatusCode::kUnavailable, "429", kEpoch + 7s);
  Result<int> r = retry->Execute(Dependency({throttled}));
  EXPECT_TRUE(r.has_value());
  EXPECT_THAT(attempts_, ElementsAre(0ns, 7s));
}

TEST_F(RetryTest, RetryAfterPastIsNoWait) {
  clock_.Advance(10s);
  auto retry = Make({.wait_duration = 1s});
  Result<int> r =
      retry->Execute(Dependency({Status::Rejected(StatusCode::kUnavailable, "429", kEpoch)}));
  EXPECT_TRUE(r.has_value());
  EXPECT_THAT(attempts_, ElementsAre(10s, 10s));
}

TEST_F(RetryTest, RetryAfterBeyondMaxRetryAfterEndsTheLoop) {
  auto retry = Make({.max_retry_after = 5s});
  auto at = [](Duration d) {
    return Status::Rejected(StatusCode::kUnavailable, "429", kEpoch + d);
  };
  // At the limit it waits...
  EXPECT_TRUE(retry->Execute(Dependency({at(5s)})).has_value());
  EXPECT_THAT(attempts_, ElementsAre(0ns, 5s));
  // ...one nanosecond past it, it gives up without waiting.
  attempts_.clear();
  Result<int> r = retry->Execute(Dependency({at(10s + 1ns)}));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("1 attempt (max_retry_after)"));
  EXPECT_EQ(clock_.Now(), kEpoch + 5s);
}

// docs/policies.md, the defaults: our own guards' refusals (kBulkheadFull,
// kRateLimited) and failures other than kUnavailable and kTimeout are returned
// as they are; a Retry-After of up to one minute is waited for, a longer one
// ends the loop.
TEST_F(RetryTest, DefaultsLeaveOurGuardsAloneAndWaitForHintsUpToAMinute) {
  auto retry = Make({});
  for (const Status& once :
       {Status::Rejected(StatusCode::kBulkheadFull, "bulkhead_full"),
        Status::Rejected(StatusCode::kRateLimited, "rate_limited", kEpoch + 1s),
        Status(StatusCode::kInvalidArgument, "bad"), Status(StatusCode::kInternal, "bug")}) {
    attempts_.clear();
    Result<int> r = retry->Execute(Dependency({once}));
    ASSERT_FALSE(r.has_value()) << once;
    EXPECT_EQ(r.error().code(), once.code());
    EXPECT_EQ(attempts_.size(), 1u) << once;
  }
  EXPECT_EQ(clock_.Now(), kEpoch);
  attempts_.clear();
  const Status minute = Status::Rejected(StatusCode::kUnavailable, "429", kEpoch + 1min);
  EXPECT_TRUE(retry->Execute(Dependency({minute})).has_value());
  EXPECT_THAT(attempts_, ElementsAre(0ns, 1min));
  attempts_.clear();
  const TimePoint now = clock_.Now();
  const Status longer = Status::Rejected(StatusCode::kUnavailable, "429", now + 1min + 1ns);
  Result<int> r = retry->Execute(Dependency({longer}));
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("(max_retry_after)"));
  EXPECT_EQ(clock_.Now(), now);
}

TEST_F(RetryTest, TimeBudgetBoundary) {
  const std::vector<Status> failing(10, Unavailable());
  // A retry that starts exactly at the end of the budget is still made.
  auto retry = Make({.max_attempts = 10, .wait_duration = 500ms, .max_duration = 1s});
  Result<int> r = retry->Execute(Dependency(failing));
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("3 attempts (max_duration)"));
  EXPECT_THAT(attempts_, ElementsAre(0ns, 500ms, 1s));
  // One nanosecond less budget: the third attempt would start too late.
  attempts_.clear();
  const TimePoint start = clock_.Now();
  auto tighter = Make({.max_attempts = 10, .wait_duration = 500ms, .max_duration = 1s - 1ns});
  (void)tighter->Execute(Dependency(failing));
  ASSERT_EQ(attempts_.size(), 2u);
  EXPECT_EQ(attempts_[1] - attempts_[0], 500ms);
  EXPECT_EQ(clock_.Now() - start, 500ms);
}

TEST_F(RetryTest, ExceptionsPropagateWithoutRetry) {
  auto retry = Make({});
  int calls = 0;
  EXPECT_THROW((void)retry->Execute([&]() -> Status {
    ++calls;
    throw std::runtime_error("boom");
  }),
               std::runtime_error);
  EXPECT_EQ(calls, 1);
}

TEST_F(RetryTest, AcceptsStatusVoidAndPlainValues) {
  auto retry = Make({.wait_duration = 1ms});
  int calls = 0;
  Status s = retry->Execute([&] { return ++calls < 2 ? Unavailable() : Status(); });
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(calls, 2);
  Status v = retry->Execute([&] { ++calls; });
  EXPECT_TRUE(v.ok());
  Result<std::string> value = retry->Execute([] { return std::string("x"); });
  EXPECT_EQ(*value, "x");
}

TEST_F(RetryTest, MaxAttemptsOneNeverRetries) {
  auto retry = Make({.max_attempts = 1});
  Result<int> r = retry->Execute(Dependency({Unavailable()}));
  EXPECT_EQ(r.error().code(), StatusCode::kRetriesExhausted);
  EXPECT_EQ(attempts_.size(), 1u);
}

}  // namespace
}  // namespace fusebox
