// fusebox/internal/system_clock.h: SystemClock()'s two reads, inline, for the
// hot paths that would otherwise reach them through a virtual call.
//
// A breaker or registry notes once, at construction, whether its clock is
// SystemClock() itself (IsSystemClock()); its hot reads then go through
// CoarseNow(clock, system) and Now(clock, system): a predictable branch and
// the read inline when it is, the virtual Clock call otherwise, so a
// testing::ManualClock (or any other Clock) is read exactly as before.
// src/clock.cc's SystemClock() reads through the same two functions, and the
// no-direct-clock check (cmake/CheckNoDirectClock.cmake) allows this header
// beside src/clock.cc.
//
// Thread-safe.
#ifndef FUSEBOX_INTERNAL_SYSTEM_CLOCK_H_
#define FUSEBOX_INTERNAL_SYSTEM_CLOCK_H_

#include <time.h>

#include <chrono>

#include "fusebox/clock.h"

namespace fusebox::internal {

// std::chrono::steady_clock (CLOCK_MONOTONIC on Linux): ~21 ns here.
inline TimePoint SteadyNow() noexcept {
  return std::chrono::time_point_cast<Duration>(std::chrono::steady_clock::now());
}

// CLOCK_MONOTONIC_COARSE is the same clock read from the last tick
// (resolution 1-4 ms), without the TSC read and scaling: ~3 ns instead of
// ~21 ns here. It never runs ahead of CLOCK_MONOTONIC, so a deadline checked
// against it is never early.
inline TimePoint CoarseSteadyNow() noexcept {
#if defined(CLOCK_MONOTONIC_COARSE)
  timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) == 0) {
    return TimePoint(std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec));
  }
#endif
  return SteadyNow();
}

// Whether `clock` is SystemClock() itself (not merely another Clock on
// steady_clock): only then are the reads below SystemClock()'s own.
inline bool IsSystemClock(const Clock& clock) noexcept { return &clock == &SystemClock(); }

// clock.CoarseNow() and clock.Now(), where `system` is IsSystemClock(clock)
// as the caller noted it once.
inline TimePoint CoarseNow(const Clock& clock, bool system) noexcept {
  return system ? CoarseSteadyNow() : clock.CoarseNow();
}
inline TimePoint Now(const Clock& clock, bool system) noexcept {
  return system ? SteadyNow() : clock.Now();
}

}  // namespace fusebox::internal

#endif  // FUSEBOX_INTERNAL_SYSTEM_CLOCK_H_
