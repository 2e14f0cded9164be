// fusebox/testing/manual_clock.h: a Clock that moves only when told to.
//
// ManualClock starts at kEpoch and never ticks by itself. Advance() and Set()
// move it, wake every sleeper whose deadline has passed, run every timer that
// has come due (in deadline order, on the calling thread, with no lock held,
// including timers that those timers schedule for a time already passed) and
// return how many sleepers and timers they woke.
//
// In auto-advance mode (Options::auto_advance) SleepFor/SleepUntil move the
// clock forward to the deadline at once instead of blocking: the simulator and
// retry tests use it so that nothing ever waits for real.
//
//   fusebox::testing::ManualClock clock;
//   auto breaker = *fusebox::CircuitBreaker::Create("dep", config, clock);
//   clock.Advance(std::chrono::seconds(5));
//
// Thread-safe.
#ifndef FUSEBOX_TESTING_MANUAL_CLOCK_H_
#define FUSEBOX_TESTING_MANUAL_CLOCK_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <utility>

#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"

namespace fusebox::testing {

class ManualClock final : public Clock {
 public:
  // Where every ManualClock starts: a whole number of seconds, far from zero,
  // so that epoch-second buckets and "one tick before" arithmetic never touch
  // the time point's lower limit.
  static constexpr TimePoint kEpoch = TimePoint(std::chrono::hours(24 * 1000));

  struct Options {
    // Start time. Default: kEpoch.
    TimePoint start = kEpoch;
    // When true, SleepFor/SleepUntil advance the clock to the deadline instead
    // of blocking. Default: false.
    bool auto_advance = false;
  };

  ManualClock() : ManualClock(Options{}) {}
  explicit ManualClock(Options options);
  ~ManualClock() override;

  TimePoint Now() const override;
  void SleepUntil(TimePoint deadline) override;
  TimerId ScheduleAt(TimePoint deadline, std::function<void()> fn) override;
  bool Cancel(TimerId id) override;

  // Moves the clock forward by `d` (d >= 0). Returns sleepers + timers woken.
  std::size_t Advance(Duration d);

  // Moves the clock to `t`; t may not be earlier than Now() (asserted).
  // Returns sleepers + timers woken.
  std::size_t Set(TimePoint t);

  // Number of timers scheduled and not yet run or cancelled.
  std::size_t PendingTimers() const;

  // Number of threads blocked in SleepUntil/SleepFor.
  std::size_t Sleepers() const;

 private:
  std::size_t RunDueTimers();
  // Moves the time to `t` (if later); returns the sleepers it wakes. Needs mu_.
  std::size_t MoveToLocked(TimePoint t) FUSEBOX_REQUIRES(mu_);

  mutable internal::Mutex mu_;
  internal::CondVar cv_;
  // Written under mu_, read without it: Now() is on every hot path under test.
  std::atomic<Duration::rep> now_ns_;
  bool auto_advance_;
  // Deadlines of the threads blocked in SleepUntil.
  std::multiset<TimePoint> sleepers_ FUSEBOX_GUARDED_BY(mu_);
  TimerId next_id_ FUSEBOX_GUARDED_BY(mu_) = 1;
  // Keyed by (deadline, id) so timers at the same deadline run in the order
  // they were scheduled.
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> timers_ FUSEBOX_GUARDED_BY(mu_);
};

}  // namespace fusebox::testing

#endif  // FUSEBOX_TESTING_MANUAL_CLOCK_H_
