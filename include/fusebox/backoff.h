// fusebox/backoff.h: interval functions, from an attempt number to a wait.
//
// An IntervalFunction maps attempt 1, 2, 3, ... to how long to wait before the
// next try. CircuitBreakerConfig::wait_interval_function uses it for the OPEN
// duration (attempt 1 is the first OPEN after CLOSED, 2 the first reopening
// from HALF_OPEN, and so on, as Resilience4j's waitIntervalFunctionInOpenState
// does); the retry policy uses it between attempts.
//
//   config.wait_interval_function = fusebox::backoff::ExponentialJitter(
//       {.initial = 5s, .multiplier = 2, .max = 5min, .jitter = 0.2, .seed = 42});
//
// The functions returned here are thread-safe: the randomized ones draw from a
// seeded, lock-free generator, so that two runs with the same seed and the same
// sequence of calls give the same waits.
#ifndef FUSEBOX_BACKOFF_H_
#define FUSEBOX_BACKOFF_H_

#include <cstdint>
#include <functional>

#include "fusebox/clock.h"
#include "fusebox/status.h"

namespace fusebox {

// Attempt number (>= 1) to wait duration.
using IntervalFunction = std::function<Duration(int attempt)>;

namespace backoff {

// Always `d`.
IntervalFunction Fixed(Duration d);

struct ExponentialOptions {
  // The wait for attempt 1. Default: 500 ms (Resilience4j's default).
  Duration initial = std::chrono::milliseconds(500);
  // Each attempt multiplies the wait by this (>= 1). Default: 1.5.
  double multiplier = 1.5;
  // Upper bound of the wait before jitter. Default: no bound.
  Duration max = Duration::max();
  // Resilience4j's arithmetic, for Compatibility::kResilience4j: the wait is
  // whole milliseconds, truncated at every step (initial and max to whole
  // milliseconds, then each wait is (long) (previous * multiplier)), so
  // 7 ms x 1.3 gives 7, 9, 11, 14 ms where the exact values are 7, 9.1,
  // 11.83, 15.379 ms. Default: false (exact, to the nanosecond).
  bool whole_milliseconds = false;
};

// initial * multiplier^(attempt-1), capped at max. Resilience4j's
// IntervalFunction.ofExponentialBackoff.
IntervalFunction Exponential(ExponentialOptions options);

struct JitterOptions {
  Duration initial = std::chrono::milliseconds(500);
  double multiplier = 1.5;
  Duration max = Duration::max();
  // Spread as a fraction of the wait, in [0, 1]: the wait is drawn uniformly
  // from [w * (1 - jitter), w * (1 + jitter)] (Resilience4j's
  // randomizationFactor). Default: 0.5.
  double jitter = 0.5;
  // Seed of the generator. Default: 0 (a fixed seed, for reproducibility).
  std::uint64_t seed = 0;
  // As ExponentialOptions::whole_milliseconds; the spread wait is truncated
  // to whole milliseconds too, and `max` caps it after the spread, as
  // Resilience4j's ofExponentialRandomBackoff does. Default: false.
  bool whole_milliseconds = false;
};

// Exponential with proportional jitter: Resilience4j's
// IntervalFunction.ofExponentialRandomBackoff.
IntervalFunction ExponentialJitter(JitterOptions options);

// "Full jitter" (AWS): uniform in [0, min(max, initial * multiplier^(n-1))].
IntervalFunction FullJitter(ExponentialOptions options, std::uint64_t seed = 0);

// "Decorrelated jitter" (AWS): uniform in [initial, previous * 3], capped at
// max. The previous wait is kept per function object, so share one function
// per retry loop, not per process.
IntervalFunction DecorrelatedJitter(Duration initial, Duration max, std::uint64_t seed = 0);

// Checks ExponentialOptions/JitterOptions values; names the field at fault.
Status Validate(const ExponentialOptions& options);
Status Validate(const JitterOptions& options);

}  // namespace backoff
}  // namespace fusebox

#endif  // FUSEBOX_BACKOFF_H_
