// Tests for testing::ManualClock and SystemClock().
//
// ManualClock tests never sleep for real: a thread blocked in SleepFor is
// detected with Sleepers() and woken by Advance()/Set(). Only the SystemClock
// tests touch real time, with short waits bounded by wait_for.

#include "fusebox/clock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using namespace std::chrono_literals;
using fusebox::testing::ManualClock;

constexpr TimePoint kT0 = ManualClock::kEpoch;

// Spins (yielding) until `done()` holds; fails after a generous bound
// rather than hanging.
template <typename Pred>
::testing::AssertionResult WaitUntil(Pred done) {
  for (long i = 0; i < 200'000'000; ++i) {
    if (done()) return ::testing::AssertionSuccess();
    std::this_thread::yield();
  }
  return ::testing::AssertionFailure() << "condition never held";
}

// Waits until `clock` has `n` sleepers.
::testing::AssertionResult WaitForSleepers(const ManualClock& clock, std::size_t n) {
  if (WaitUntil([&] { return clock.Sleepers() == n; })) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "sleepers: " << clock.Sleepers() << ", want " << n;
}

TEST(ManualClock, StartsAtEpochAndNeverTicksByItself) {
  ManualClock clock;
  EXPECT_EQ(clock.Now(), kT0);
  EXPECT_EQ(clock.CoarseNow(), kT0);
  EXPECT_EQ(kT0.time_since_epoch() % std::chrono::seconds(1), Duration::zero());
  EXPECT_EQ(clock.Now(), kT0);
  EXPECT_EQ(clock.PendingTimers(), 0u);
  EXPECT_EQ(clock.Sleepers(), 0u);
}

TEST(ManualClock, CustomStart) {
  ManualClock::Options options;
  options.start = kT0 + 90s;
  ManualClock clock(options);
  EXPECT_EQ(clock.Now(), kT0 + 90s);
}

TEST(ManualClock, AdvanceAndSetMoveTime) {
  ManualClock clock;
  EXPECT_EQ(clock.Advance(1500ms), 0u);
  EXPECT_EQ(clock.Now(), kT0 + 1500ms);
  EXPECT_EQ(clock.Advance(Duration::zero()), 0u);
  EXPECT_EQ(clock.Now(), kT0 + 1500ms);
  EXPECT_EQ(clock.Set(kT0 + 1h), 0u);
  EXPECT_EQ(clock.Now(), kT0 + 1h);
  EXPECT_EQ(clock.Set(kT0 + 1h), 0u);  // same time is allowed
  EXPECT_EQ(clock.Now(), kT0 + 1h);
}

TEST(ManualClock, SleepForNonPositiveReturnsAtOnce) {
  ManualClock clock;
  clock.SleepFor(Duration::zero());
  clock.SleepFor(-5s);
  clock.SleepUntil(kT0);
  clock.SleepUntil(kT0 - 1s);
  EXPECT_EQ(clock.Now(), kT0);
}

TEST(ManualClock, AdvanceWakesASleeperOnlyAtItsDeadline) {
  ManualClock clock;
  std::atomic<bool> woke{false};
  std::thread sleeper([&] {
    clock.SleepFor(5s);
    woke.store(true);
  });
  ASSERT_TRUE(WaitForSleepers(clock, 1));
  EXPECT_EQ(clock.Advance(5s - 1ns), 0u);
  EXPECT_EQ(clock.Sleepers(), 1u);
  EXPECT_FALSE(woke.load());
  EXPECT_EQ(clock.Advance(1ns), 1u);
  sleeper.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(clock.Sleepers(), 0u);
}

TEST(ManualClock, SetWakesEverySleeperWhoseDeadlinePassed) {
  ManualClock clock;
  std::atomic<int> woke{0};
  std::vector<std::thread> sleepers;
  sleepers.emplace_back([&] {
    clock.SleepUntil(kT0 + 1s);
    woke.fetch_add(1);
  });
  sleepers.emplace_back([&] {
    clock.SleepUntil(kT0 + 2s);
    woke.fetch_add(1);
  });
  sleepers.emplace_back([&] {
    clock.SleepUntil(kT0 + 10s);
    woke.fetch_add(1);
  });
  ASSERT_TRUE(WaitForSleepers(clock, 3));
  EXPECT_EQ(clock.Set(kT0 + 2s), 2u);
  ASSERT_TRUE(WaitForSleepers(clock, 1));
  // A sleeper leaves the set before it returns from SleepUntil: wait for
  // both increments rather than reading `woke` in that window.
  ASSERT_TRUE(WaitUntil([&] { return woke.load() == 2; }));
  EXPECT_EQ(clock.Sleepers(), 1u);
  EXPECT_EQ(clock.Set(kT0 + 10s), 1u);
  for (std::thread& t : sleepers) t.join();
  EXPECT_EQ(woke.load(), 3);
}

TEST(ManualClock, TimersRunInDeadlineOrderWithinAdvance) {
  ManualClock clock;
  std::vector<int> order;
  std::vector<TimePoint> seen;
  auto at = [&](Duration d, int id) {
    return clock.ScheduleAt(kT0 + d, [&, id, d] {
      order.push_back(id);
      seen.push_back(clock.Now());
      EXPECT_GE(clock.Now(), kT0 + d);
    });
  };
  at(3s, 3);
  at(1s, 1);
  at(2s, 2);
  at(2s, 22);  // same deadline: in scheduling order
  at(9s, 9);
  EXPECT_EQ(clock.PendingTimers(), 5u);
  EXPECT_EQ(clock.Advance(5s), 4u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 22, 3}));
  EXPECT_EQ(clock.PendingTimers(), 1u);
  EXPECT_EQ(clock.Now(), kT0 + 5s);
  EXPECT_EQ(clock.Advance(4s), 1u);
  EXPECT_EQ(order.back(), 9);
  EXPECT_EQ(clock.PendingTimers(), 0u);
}

TEST(ManualClock, TimerAtExactlyNowRunsOnTheNextAdvance) {
  ManualClock clock;
  int runs = 0;
  clock.ScheduleAt(kT0, [&] { ++runs; });
  clock.ScheduleAt(kT0 - 1s, [&] { ++runs; });
  EXPECT_EQ(clock.Advance(Duration::zero()), 2u);
  EXPECT_EQ(runs, 2);
}

TEST(ManualClock, TimerSchedulingAnAlreadyDueTimerRunsInTheSameAdvance) {
  ManualClock clock;
  std::vector<std::string> log;
  clock.ScheduleAt(kT0 + 1s, [&] {
    log.push_back("first");
    clock.ScheduleAt(kT0 + 500ms, [&] { log.push_back("past"); });
    clock.ScheduleAt(kT0 + 2s, [&] { log.push_back("due-later-in-range"); });
    clock.ScheduleAt(kT0 + 1h, [&] { log.push_back("future"); });
  });
  EXPECT_EQ(clock.Advance(3s), 3u);
  EXPECT_EQ(log, (std::vector<std::string>{"first", "past", "due-later-in-range"}));
  EXPECT_EQ(clock.PendingTimers(), 1u);
}

TEST(ManualClock, CancelWithdrawsATimer) {
  ManualClock clock;
  int runs = 0;
  TimerId a = clock.ScheduleAt(kT0 + 1s, [&] { ++runs; });
  TimerId b = clock.ScheduleAt(kT0 + 1s, [&] { runs += 10; });
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(clock.Cancel(a));
  EXPECT_FALSE(clock.Cancel(a)) << "already cancelled";
  EXPECT_FALSE(clock.Cancel(0));
  EXPECT_FALSE(clock.Cancel(123456789));
  EXPECT_EQ(clock.PendingTimers(), 1u);
  EXPECT_EQ(clock.Advance(2s), 1u);
  EXPECT_EQ(runs, 10);
  EXPECT_FALSE(clock.Cancel(b)) << "already ran";
}

TEST(ManualClock, TimerMayCancelAnotherDueTimer) {
  ManualClock clock;
  int runs = 0;
  TimerId second = 0;
  bool withdrawn = false;
  clock.ScheduleAt(kT0 + 1s, [&] { withdrawn = clock.Cancel(second); });
  second = clock.ScheduleAt(kT0 + 2s, [&] { ++runs; });
  clock.Advance(3s);
  // Cancel() returning true promises the timer never runs.
  EXPECT_EQ(runs, withdrawn ? 0 : 1);
}

TEST(ManualClock, AutoAdvanceSleepMovesTimeAtOnce) {
  ManualClock::Options options;
  options.auto_advance = true;
  ManualClock clock(options);
  int runs = 0;
  clock.ScheduleAt(kT0 + 2s, [&] { ++runs; });
  clock.SleepFor(5s);
  EXPECT_EQ(clock.Now(), kT0 + 5s);
  EXPECT_EQ(runs, 1) << "timers due by the new time run";
  clock.SleepUntil(kT0 + 7s);
  EXPECT_EQ(clock.Now(), kT0 + 7s);
  clock.SleepUntil(kT0 + 1s);  // in the past: no move backwards
  EXPECT_EQ(clock.Now(), kT0 + 7s);
  EXPECT_EQ(clock.Sleepers(), 0u);
}

TEST(ManualClock, ConcurrentSchedulingAndAdvancing) {
  ManualClock clock;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 200;
  std::atomic<int> runs{0};
  std::atomic<bool> done{false};
  std::vector<std::thread> schedulers;
  for (int t = 0; t < kThreads; ++t) {
    schedulers.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        clock.ScheduleAt(clock.Now() + std::chrono::milliseconds(i % 7),
                         [&] { runs.fetch_add(1); });
        (void)clock.Now();
      }
    });
  }
  std::thread advancer([&] {
    while (!done.load()) {
      clock.Advance(1ms);
      std::this_thread::yield();
    }
  });
  for (std::thread& t : schedulers) t.join();
  done.store(true);
  advancer.join();
  clock.Advance(1s);
  EXPECT_EQ(runs.load(), kThreads * kPerThread);
  EXPECT_EQ(clock.PendingTimers(), 0u);
}

TEST(ManualClock, DestroyedWithPendingTimers) {
  int runs = 0;
  {
    ManualClock clock;
    clock.ScheduleAt(kT0 + 1s, [&] { ++runs; });
  }
  EXPECT_EQ(runs, 0);
}

// --- SystemClock -----------------------------------------------------------

TEST(SystemClock, IsOneInstance) { EXPECT_EQ(&SystemClock(), &SystemClock()); }

TEST(SystemClock, NowIsMonotonic) {
  Clock& clock = SystemClock();
  TimePoint prev = clock.Now();
  for (int i = 0; i < 10000; ++i) {
    TimePoint now = clock.Now();
    ASSERT_GE(now, prev);
    prev = now;
  }
}

TEST(SystemClock, CoarseNowIsNeverAheadAndOnlySlightlyBehind) {
  Clock& clock = SystemClock();
  TimePoint prev_coarse = clock.CoarseNow();
  for (int i = 0; i < 10000; ++i) {
    const TimePoint before = clock.Now();
    const TimePoint coarse = clock.CoarseNow();
    const TimePoint after = clock.Now();
    ASSERT_LE(coarse, after) << "CoarseNow ahead of Now";
    // "a few milliseconds" behind; allow generous slack for loaded CI hosts.
    ASSERT_GE(coarse, before - 100ms);
    ASSERT_GE(coarse, prev_coarse) << "CoarseNow went backwards";
    prev_coarse = coarse;
  }
}

TEST(SystemClock, SleepForWaitsAtLeastTheDuration) {
  Clock& clock = SystemClock();
  const TimePoint start = clock.Now();
  clock.SleepFor(2ms);
  EXPECT_GE(clock.Now() - start, 2ms);
  clock.SleepUntil(clock.Now() - 1s);  // past: returns at once
}

TEST(SystemClock, TimerFires) {
  Clock& clock = SystemClock();
  std::promise<TimePoint> fired;
  std::future<TimePoint> f = fired.get_future();
  const TimePoint deadline = clock.Now() + 5ms;
  TimerId id = clock.ScheduleAt(deadline, [&] { fired.set_value(clock.Now()); });
  EXPECT_NE(id, 0u);
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_GE(f.get(), deadline);
  EXPECT_FALSE(clock.Cancel(id)) << "already ran";
}

TEST(SystemClock, TimersFireInDeadlineOrder) {
  Clock& clock = SystemClock();
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> last;
  std::future<void> done = last.get_future();
  const TimePoint now = clock.Now();
  clock.ScheduleAt(now + 30ms, [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(2);
    last.set_value();
  });
  clock.ScheduleAt(now + 10ms, [&] {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(1);
  });
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
}

TEST(SystemClock, CancelledTimerNeverFires) {
  Clock& clock = SystemClock();
  auto fired = std::make_shared<std::atomic<bool>>(false);
  TimerId id = clock.ScheduleAt(clock.Now() + 1h, [fired] { fired->store(true); });
  EXPECT_TRUE(clock.Cancel(id));
  EXPECT_FALSE(clock.Cancel(id));
  // Let the timer thread run something else; the cancelled one stays silent.
  std::promise<void> p;
  std::future<void> f = p.get_future();
  clock.ScheduleAt(clock.Now() + 1ms, [&] { p.set_value(); });
  ASSERT_EQ(f.wait_for(10s), std::future_status::ready);
  EXPECT_FALSE(fired->load());
}

}  // namespace
}  // namespace fusebox
