#include "fusebox/backoff.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

namespace fusebox::backoff {
namespace {

// A lock-free, seeded source of uniform doubles in [0, 1): splitmix64 over an
// atomic counter. Two calls never get the same draw, and the same seed with the
// same number of calls gives the same sequence.
class Uniform {
 public:
  explicit Uniform(std::uint64_t seed) : state_(seed) {}
  double Next() {
    std::uint64_t z =
        state_.fetch_add(0x9E3779B97F4A7C15ull, std::memory_order_relaxed) + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

 private:
  std::atomic<std::uint64_t> state_;
};

// Scales a duration by a double without overflow: saturates at `max`.
Duration Scale(Duration d, double factor, Duration max) {
  const long double ns = static_cast<long double>(d.count()) * factor;
  if (!(ns < static_cast<long double>(max.count()))) return max;
  if (ns <= 0) return Duration::zero();
  return Duration(static_cast<Duration::rep>(ns));
}

Duration ExponentialBase(const ExponentialOptions& o, int attempt) {
  const int n = std::max(attempt, 1) - 1;
  return Scale(o.initial, std::pow(o.multiplier, n), o.max);
}

// Java's (long) cast of a double: toward zero, saturating.
std::int64_t JavaLong(double d) {
  if (std::isnan(d)) return 0;
  if (d >= 0x1.0p63) return INT64_MAX;
  if (d <= -0x1.0p63) return INT64_MIN;
  return static_cast<std::int64_t>(d);
}

// The longest wait in whole milliseconds a Duration holds.
constexpr std::int64_t kMaxMillis = Duration::max().count() / 1'000'000;

Duration FromMillis(std::int64_t ms) {
  return ms >= kMaxMillis ? Duration::max()
                          : std::chrono::milliseconds(std::max<std::int64_t>(ms, 0));
}

// Steps MillisSteps() takes one by one. A breaker calls the function under
// its lock, so the work is bounded: with a multiplier of 1.01, a wait that
// grows at all passes every Duration in a few thousand steps; only a
// multiplier closer to 1 gets further, and then continues exactly
// (std::pow), within 1 ms a step of Resilience4j's truncations.
constexpr int kMaxMillisSteps = 4096;

// Resilience4j's IntervalFunction.of(initial, x -> (long) (x * multiplier)),
// uncapped, in whole milliseconds: the wait for `attempt`, iterated as
// Resilience4j iterates it. The loop stops early at a fixed point (7 x 1.1
// truncates back to 7) or once past every Duration.
std::int64_t MillisSteps(const ExponentialOptions& o, int attempt) {
  std::int64_t x = std::chrono::duration_cast<std::chrono::milliseconds>(o.initial).count();
  int i = 1;
  for (; i < attempt && i <= kMaxMillisSteps && x < kMaxMillis; ++i) {
    const std::int64_t next = JavaLong(static_cast<double>(x) * o.multiplier);
    if (next == x) return x;
    x = next;
  }
  if (i < attempt && x < kMaxMillis) {
    x = JavaLong(static_cast<double>(x) * std::pow(o.multiplier, attempt - i));
  }
  return x;
}

std::int64_t MaxMillis(Duration max) {
  return max == Duration::max()
             ? INT64_MAX
             : std::chrono::duration_cast<std::chrono::milliseconds>(max).count();
}

std::string Got(double v) { return ", got " + std::to_string(v); }
std::string Got(Duration d) { return ", got " + std::to_string(d.count()) + " ns"; }

}  // namespace

IntervalFunction Fixed(Duration d) {
  return [d](int) { return d; };
}

IntervalFunction Exponential(ExponentialOptions options) {
  if (options.whole_milliseconds) {
    return [options](int attempt) {
      return FromMillis(std::min(MillisSteps(options, attempt), MaxMillis(options.max)));
    };
  }
  return [options](int attempt) { return ExponentialBase(options, attempt); };
}

IntervalFunction ExponentialJitter(JitterOptions options) {
  auto rng = std::make_shared<Uniform>(options.seed);
  const ExponentialOptions base{options.initial, options.multiplier, options.max};
  if (options.whole_milliseconds) {
    return [base, jitter = options.jitter, rng](int attempt) {
      // IntervalFunctionCompanion.randomize(): min + random * (max - min),
      // over the uncapped whole-millisecond wait; then (long), then the cap.
      const double w = static_cast<double>(MillisSteps(base, attempt));
      const double delta = jitter * w;
      const double spread = (w - delta) + rng->Next() * ((w + delta) - (w - delta));
      return FromMillis(std::min(JavaLong(spread), MaxMillis(base.max)));
    };
  }
  return [base, jitter = options.jitter, rng](int attempt) {
    const Duration w = ExponentialBase(base, attempt);
    // Uniform in [w * (1 - jitter), w * (1 + jitter)], as Resilience4j's
    // randomize(): w - delta + random * (2 * delta + 1).
    const double factor = 1.0 - jitter + rng->Next() * 2.0 * jitter;
    return Scale(w, factor, Duration::max());
  };
}

IntervalFunction FullJitter(ExponentialOptions options, std::uint64_t seed) {
  auto rng = std::make_shared<Uniform>(seed);
  return [options, rng](int attempt) {
    return Scale(ExponentialBase(options, attempt), rng->Next(), Duration::max());
  };
}

IntervalFunction DecorrelatedJitter(Duration initial, Duration max, std::uint64_t seed) {
  struct State {
    explicit State(std::uint64_t s, Duration initial) : rng(s), previous(initial.count()) {}
    Uniform rng;
    std::atomic<Duration::rep> previous;
  };
  auto state = std::make_shared<State>(seed, initial);
  return [initial, max, state](int attempt) {
    if (attempt <= 1) state->previous.store(initial.count(), std::memory_order_relaxed);
    const Duration prev(state->previous.load(std::memory_order_relaxed));
    // sleep = min(max, uniform(initial, prev * 3))
    const Duration upper = Scale(prev, 3.0, max);
    const Duration span = upper > initial ? upper - initial : Duration::zero();
    const Duration next = std::min(max, initial + Scale(span, state->rng.Next(), Duration::max()));
    state->previous.store(next.count(), std::memory_order_relaxed);
    return next;
  };
}

Status Validate(const ExponentialOptions& o) {
  if (o.initial <= Duration::zero()) {
    return Status::InvalidArgument("initial must be > 0" + Got(o.initial));
  }
  if (!(o.multiplier >= 1.0) || !std::isfinite(o.multiplier)) {
    return Status::InvalidArgument("multiplier must be >= 1" + Got(o.multiplier));
  }
  if (o.max < o.initial) {
    return Status::InvalidArgument("max must be >= initial" + Got(o.max));
  }
  return Status();
}

Status Validate(const JitterOptions& o) {
  Status s = Validate(ExponentialOptions{o.initial, o.multiplier, o.max});
  if (!s.ok()) return s;
  if (!(o.jitter >= 0.0 && o.jitter <= 1.0)) {
    return Status::InvalidArgument("jitter must be in [0, 1]" + Got(o.jitter));
  }
  return Status();
}

}  // namespace fusebox::backoff
