// fusebox/clock.h: the time source every time-dependent fusebox type takes.
//
// Nothing in fusebox reads the system clock or sleeps except through a Clock
// (a CI check enforces it), so that tests and the simulator drive time with
// testing::ManualClock and never sleep. (A breaker or registry whose clock is
// SystemClock() itself reads it inline, without the virtual call:
// fusebox/internal/system_clock.h.)
//
// A Clock provides:
//   - Now(): precise steady time;
//   - CoarseNow(): steady time that may lag Now() by a few milliseconds, for
//     hot paths that only need second-level or millisecond-level decisions
//     (CLOCK_MONOTONIC_COARSE costs ~3 ns here, steady_clock::now() ~21 ns);
//   - SleepFor()/SleepUntil();
//   - timers: ScheduleAt() runs a callback at or after a time point, Cancel()
//     withdraws it. SystemClock runs them on one lazily started thread;
//     ManualClock runs them inside Advance()/Set().
//
//   class Poller {
//    public:
//     explicit Poller(fusebox::Clock& clock = fusebox::SystemClock()) : clock_(clock) {}
//     void Wait() { clock_.SleepFor(std::chrono::seconds(1)); }
//    private:
//     fusebox::Clock& clock_;
//   };
//
// Thread-safe: every method of every Clock may be called from any thread.
#ifndef FUSEBOX_CLOCK_H_
#define FUSEBOX_CLOCK_H_

#include <chrono>
#include <cstdint>
#include <functional>

namespace fusebox {

// All fusebox durations are nanosecond chrono durations, passed by value.
using Duration = std::chrono::nanoseconds;
// A steady (monotonic) time point. It means nothing in another process: never
// send one over a wire (see docs/distributed.md).
using TimePoint = std::chrono::time_point<std::chrono::steady_clock, Duration>;

// Identifies a scheduled timer; 0 is never a valid id.
using TimerId = std::uint64_t;

class Clock {
 public:
  virtual ~Clock() = default;

  // The current steady time.
  virtual TimePoint Now() const = 0;

  // The current steady time, possibly a few milliseconds behind Now() and
  // never ahead of it. Defaults to Now().
  virtual TimePoint CoarseNow() const { return Now(); }

  // Blocks the calling thread for `d` (no-op when d <= 0).
  virtual void SleepFor(Duration d) { SleepUntil(Now() + d); }

  // Blocks the calling thread until Now() >= `deadline`.
  virtual void SleepUntil(TimePoint deadline) = 0;

  // Runs `fn` once, on a thread of the clock's choosing, at or after
  // `deadline`. `fn` must not block for long and must not throw (a throw is
  // swallowed). Returns an id for Cancel().
  virtual TimerId ScheduleAt(TimePoint deadline, std::function<void()> fn) = 0;

  // Withdraws a timer. Returns true when it was withdrawn before it ran; false
  // when it already ran, is running now, or never existed.
  virtual bool Cancel(TimerId id) = 0;

 protected:
  Clock() = default;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
};

// The process-wide clock on std::chrono::steady_clock. Never destroyed, so it
// may be used during static destruction.
Clock& SystemClock();

// The wall clock (std::chrono::system_clock), for what people read: the "ts"
// of log and audit lines (EventLogOptions::wall_clock,
// AuditLogOptions::wall_clock). Never for a decision: it jumps.
std::chrono::system_clock::time_point WallClockNow() noexcept;

}  // namespace fusebox

#endif  // FUSEBOX_CLOCK_H_
