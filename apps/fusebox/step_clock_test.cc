// Tests for StepClock: timers run at their own deadlines.
#include "apps/fusebox/step_clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace fusebox::app {
namespace {

using namespace std::chrono_literals;

TEST(StepClock, RunsEachTimerAtItsDeadline) {
  StepClock clock;
  std::vector<Duration> seen;
  clock.ScheduleAt(StepClock::kStart + 3s, [&] { seen.push_back(clock.Elapsed()); });
  clock.ScheduleAt(StepClock::kStart + 1s, [&] {
    seen.push_back(clock.Elapsed());
    // A timer scheduled by a timer, due before the target, runs on the way too.
    clock.ScheduleAt(StepClock::kStart + 2s, [&] { seen.push_back(clock.Elapsed()); });
  });
  clock.AdvanceTo(StepClock::kStart + 10s);
  EXPECT_EQ(seen, (std::vector<Duration>{1s, 2s, 3s}));
  EXPECT_EQ(clock.Elapsed(), 10s);
}

TEST(StepClock, TimerAtTheTargetRunsAndLaterOnesWait) {
  StepClock clock;
  int ran = 0;
  clock.ScheduleAt(StepClock::kStart + 5s, [&] { ++ran; });
  const TimerId later = clock.ScheduleAt(StepClock::kStart + 6s, [&] { ran += 10; });
  clock.AdvanceTo(StepClock::kStart + 5s);
  EXPECT_EQ(ran, 1);
  EXPECT_TRUE(clock.Cancel(later));
  clock.AdvanceTo(StepClock::kStart + 7s);
  EXPECT_EQ(ran, 1);
}

// A timer scheduled for the present runs when the clock is asked to move to
// the present (a breaker's zero wait), though the clock does not move.
TEST(StepClock, ATimerDueNowRunsWhenAdvancingToNow) {
  StepClock clock;
  clock.AdvanceTo(StepClock::kStart + 2s);
  int ran = 0;
  clock.ScheduleAt(clock.Now(), [&] { ++ran; });
  clock.AdvanceTo(clock.Now());
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(clock.Elapsed(), 2s);
}

}  // namespace
}  // namespace fusebox::app
