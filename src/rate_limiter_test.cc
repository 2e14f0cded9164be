// Unit tests of RateLimiter on a ManualClock: bursts, both sides of every
// refill boundary, waits through the clock, and threads racing for permits.
#include "fusebox/rate_limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fusebox/testing/manual_clock.h"
#include "src/policy_test_util.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;
using ::testing::HasSubstr;

constexpr TimePoint kEpoch = ManualClock::kEpoch;

class RateLimiterTest : public ::testing::Test {
 protected:
  std::unique_ptr<RateLimiter> Make(RateLimiterOptions options, Clock& clock) {
    return MustCreate(RateLimiter::Create(options, clock));
  }
  std::unique_ptr<RateLimiter> Make(RateLimiterOptions options) { return Make(options, clock_); }

  static int Drain(RateLimiter& limiter) {
    int n = 0;
    while (limiter.TryAcquire().ok()) ++n;
    return n;
  }

  ManualClock clock_;
};

TEST_F(RateLimiterTest, CreateNamesTheBadField) {
  auto r = RateLimiter::Create({.limit_for_period = 0}, clock_);
  EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("limit_for_period"));
  r = RateLimiter::Create({.limit_refresh_period = 0ns}, clock_);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("limit_refresh_period"));
  r = RateLimiter::Create({.timeout_duration = -1ns}, clock_);
  EXPECT_THAT(std::string(r.error().message()), HasSubstr("timeout_duration"));
}

TEST_F(RateLimiterTest, BurstThenRefusalSaysWhenToComeBack) {
  auto limiter = Make({.limit_for_period = 10, .limit_refresh_period = 1s});
  EXPECT_EQ(limiter->AvailablePermits(), 10);
  EXPECT_EQ(Drain(*limiter), 10);
  const std::uint64_t refused = limiter->rejected_calls();
  Status s = limiter->TryAcquire();
  EXPECT_EQ(s.code(), StatusCode::kRateLimited);
  EXPECT_EQ(limiter->rejected_calls(), refused + 1);
  EXPECT_EQ(s.reason(), "rate_limited");
  EXPECT_EQ(s.retry_at(), kEpoch + 100ms);
  EXPECT_EQ(limiter->TimeUntilPermit(), 100ms);
  EXPECT_EQ(limiter->TimeUntilPermit(3), 300ms);
  EXPECT_EQ(limiter->AvailablePermits(), 0);
}

TEST_F(RateLimiterTest, PermitsComeBackOneEveryInterval) {
  auto limiter = Make({.limit_for_period = 10, .limit_refresh_period = 1s});
  EXPECT_EQ(Drain(*limiter), 10);
  clock_.Advance(100ms - 1ns);
  EXPECT_EQ(limiter->TryAcquire().code(), StatusCode::kRateLimited);
  clock_.Advance(1ns);
  EXPECT_TRUE(limiter->TryAcquire().ok());
  EXPECT_EQ(limiter->TryAcquire().code(), StatusCode::kRateLimited);
  // A whole idle period refills the whole burst, and no more.
  clock_.Advance(10s);
  EXPECT_EQ(limiter->AvailablePermits(), 10);
  EXPECT_EQ(Drain(*limiter), 10);
}

TEST_F(RateLimiterTest, MultiplePermitsAtOnce) {
  auto limiter = Make({.limit_for_period = 4, .limit_refresh_period = 400ms});
  EXPECT_TRUE(limiter->TryAcquire(3).ok());
  Status s = limiter->TryAcquire(2);
  EXPECT_EQ(s.code(), StatusCode::kRateLimited);
  EXPECT_EQ(s.retry_at(), kEpoch + 100ms);   // One more permit is needed.
  EXPECT_TRUE(limiter->TryAcquire(1).ok());  // A refusal took nothing.
}

// A whole period's permits may be taken at once (limit_for_period is the
// largest request, not one past it); then none is left.
TEST_F(RateLimiterTest, AllOfAPeriodsPermitsAtOnce) {
  auto limiter = Make({.limit_for_period = 4, .limit_refresh_period = 400ms});
  EXPECT_TRUE(limiter->TryAcquire(4).ok());
  EXPECT_FALSE(limiter->TryAcquire(1).ok());
}

// Acquire() with a timeout takes the waiting path; a whole period's permits
// are a valid request there too: at once from a full bucket, then after one
// period.
TEST_F(RateLimiterTest, AcquireTakesAllOfAPeriodsPermitsOnTheWaitingPath) {
  ManualClock clock(ManualClock::Options{.auto_advance = true});
  auto limiter =
      Make({.limit_for_period = 4, .limit_refresh_period = 400ms, .timeout_duration = 1s}, clock);
  EXPECT_TRUE(limiter->Acquire(4).ok());
  EXPECT_EQ(clock.Now(), kEpoch);
  EXPECT_TRUE(limiter->Acquire(4).ok());
  EXPECT_EQ(clock.Now(), kEpoch + 400ms);
}

TEST_F(RateLimiterTest, UnevenPeriodRoundsTowardsFewerCalls) {
  // 1 s / 3 = 333,333,333.3 ns: T is rounded up, so 3 permits never come back
  // within exactly one second.
  auto limiter = Make({.limit_for_period = 3, .limit_refresh_period = 1s});
  EXPECT_EQ(Drain(*limiter), 3);
  clock_.Advance(1s);
  EXPECT_EQ(Drain(*limiter), 2);
  clock_.Advance(333333334ns);
  EXPECT_EQ(Drain(*limiter), 1);
}

TEST_F(RateLimiterTest, AcquireWaitsThroughTheClockUpToTheTimeout) {
  ManualClock clock(ManualClock::Options{.auto_advance = true});
  auto limiter =
      Make({.limit_for_period = 10, .limit_refresh_period = 1s, .timeout_duration = 200ms}, clock);
  EXPECT_EQ(Drain(*limiter), 10);
  const std::uint64_t refused = limiter->rejected_calls();
  // Two callers queue: each reserves the next permit and sleeps until it.
  EXPECT_TRUE(limiter->Acquire().ok());
  EXPECT_EQ(clock.Now(), kEpoch + 100ms);
  EXPECT_TRUE(limiter->Acquire().ok());
  EXPECT_EQ(clock.Now(), kEpoch + 200ms);
  // 3 permits would take 300 ms > 200 ms: refused at once, nothing reserved.
  Status s = limiter->Acquire(3);
  EXPECT_EQ(s.code(), StatusCode::kRateLimited);
  EXPECT_EQ(s.retry_at(), kEpoch + 500ms);
  EXPECT_EQ(clock.Now(), kEpoch + 200ms);
  EXPECT_EQ(limiter->rejected_calls(), refused + 1) << "the two waits are not refusals";
  // At exactly the timeout it still waits.
  EXPECT_TRUE(limiter->Acquire(2).ok());
  EXPECT_EQ(clock.Now(), kEpoch + 400ms);
}

TEST_F(RateLimiterTest, ExecuteRunsOnlyWithAPermit) {
  auto limiter = Make({.limit_for_period = 1, .limit_refresh_period = 1s});
  int calls = 0;
  EXPECT_EQ(*limiter->Execute([&] { return ++calls; }), 1);
  Result<int> refused = limiter->Execute([&] { return ++calls; });
  EXPECT_EQ(refused.error().code(), StatusCode::kRateLimited);
  EXPECT_EQ(calls, 1);
}

TEST_F(RateLimiterTest, CoarseTimingIsTheDefaultForLongPeriods) {
  // On ManualClock the coarse and precise reads agree; this pins the options.
  auto slow = Make({.limit_refresh_period = 1s});
  auto fast = Make({.limit_refresh_period = 10ms});
  EXPECT_EQ(slow->options().timing, CallTiming::kAuto);
  EXPECT_TRUE(slow->TryAcquire().ok());
  EXPECT_TRUE(fast->TryAcquire().ok());
}

// Threads race for permits on a clock that stands still: exactly the burst is
// handed out, whoever wins it; after one period, exactly one period's worth.
TEST_F(RateLimiterTest, ConcurrentCallersGetExactlyTheLimit) {
  constexpr int kLimit = 1000;
  auto limiter = Make({.limit_for_period = kLimit, .limit_refresh_period = 1s});
  auto race = [&] {
    std::atomic<int> granted{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < kLimit; ++i) {
          Status s = limiter->TryAcquire();
          if (s.ok()) {
            granted.fetch_add(1, std::memory_order_relaxed);
          } else {
            EXPECT_EQ(s.code(), StatusCode::kRateLimited);
          }
        }
      });
    }
    for (std::thread& th : threads) th.join();
    return granted.load();
  };
  EXPECT_EQ(race(), kLimit);
  clock_.Advance(1s);
  EXPECT_EQ(race(), kLimit);
}

// waiting_threads() counts the callers asleep in Acquire() for a reserved
// permit, and only while they sleep.
TEST_F(RateLimiterTest, WaitingThreadsCountsCallersAsleepInAcquire) {
  auto limiter = Make({.limit_for_period = 1, .limit_refresh_period = 1s, .timeout_duration = 5s});
  ASSERT_TRUE(limiter->Acquire().ok());
  EXPECT_EQ(limiter->waiting_threads(), 0);
  std::thread waiter([&] { EXPECT_TRUE(limiter->Acquire().ok()); });
  // Bounded poll (no sleeping: yield): the waiter reserves its permit, then
  // sleeps on the clock.
  for (long i = 0; i < 50'000'000 && clock_.Sleepers() == 0; ++i) std::this_thread::yield();
  EXPECT_EQ(clock_.Sleepers(), 1U) << "the waiter never slept on the clock";
  EXPECT_EQ(limiter->waiting_threads(), 1);
  // Its permit is due at the next period: one period wakes it (a few more
  // only if that failed, so that the thread is joined either way).
  for (int i = 0; i < 10 && clock_.Sleepers() != 0; ++i) clock_.Advance(1s);
  waiter.join();
  EXPECT_EQ(limiter->waiting_threads(), 0);
}

}  // namespace
}  // namespace fusebox
