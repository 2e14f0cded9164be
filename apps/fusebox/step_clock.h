// apps/fusebox/step_clock.h: a ManualClock that fires each timer at its own
// deadline.
//
// ManualClock::Set(t) runs every timer due by t with the clock already at t, so
// a breaker timer (automatic OPEN -> HALF_OPEN, maximum wait in HALF_OPEN) that
// was due earlier sees Now() == t and dates its transition, and whatever it
// starts, at t. The simulator and the replayer want each timer at its deadline:
// StepClock remembers the deadlines of the timers scheduled through it, and
// AdvanceTo(t) stops at each one that is due (Set(deadline)) before it moves to
// t. It is still the real ManualClock underneath.
//
// Not thread-safe: one thread drives it (the breaker schedules and cancels
// timers only on that thread, inside TryAcquire, Record and the timers).
#ifndef FUSEBOX_APPS_FUSEBOX_STEP_CLOCK_H_
#define FUSEBOX_APPS_FUSEBOX_STEP_CLOCK_H_

#include <functional>
#include <map>

#include "fusebox/clock.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::app {

class StepClock final : public Clock {
 public:
  // Time zero of a simulation or a trace: ManualClock's epoch, a whole second.
  static constexpr TimePoint kStart = testing::ManualClock::kEpoch;

  StepClock() = default;

  TimePoint Now() const override { return manual_.Now(); }
  void SleepUntil(TimePoint deadline) override { AdvanceTo(deadline); }
  TimerId ScheduleAt(TimePoint deadline, std::function<void()> fn) override;
  bool Cancel(TimerId id) override;

  // Moves to `t` (not earlier than Now()), stopping at every timer deadline on
  // the way, in order, so that each timer runs with Now() equal to its
  // deadline.
  void AdvanceTo(TimePoint t);

  // Time since kStart.
  Duration Elapsed() const { return Now() - kStart; }

 private:
  testing::ManualClock manual_;
  // Pending timers' deadlines, by ManualClock id.
  std::map<TimerId, TimePoint> deadlines_;
};

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_STEP_CLOCK_H_
