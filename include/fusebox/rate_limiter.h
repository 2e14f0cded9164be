// fusebox/rate_limiter.h: a lock-free limit on the rate of calls.
//
// A RateLimiter admits at most limit_for_period calls per
// limit_refresh_period, smoothly: it is a GCRA (generic cell rate algorithm,
// the "virtual scheduling" form of a leaky bucket), the algorithm behind
// Stripe's and Redis Cell's limiters. Its whole state is one atomic time
// point, the theoretical arrival time (TAT): each permit moves the TAT forward
// by the emission interval T = ceil(limit_refresh_period / limit_for_period),
// and a request is admitted when the new TAT is no further than one period
// ahead of now. So an idle limiter admits a burst of limit_for_period calls,
// then one call every T: fair (first come, first served, no cycle boundary at
// which everyone races) and lock-free (one compare-and-swap).
//
// Compared with Resilience4j's AtomicRateLimiter (fixed cycles of
// limit_for_period permits): the same long-run rate and the same worst case
// of 2 x limit_for_period in any window of one period (a burst at the end of
// one cycle and another at the start of the next there; a full bucket followed
// by a refilled one here); but permits come back one by one, every T, instead
// of all at once at a cycle boundary. The option names are Resilience4j's.
//
// A refused request gets kRateLimited with retry_at() = the moment its permits
// will be free (exact on any clock, see TryAcquire()), and TimeUntilPermit()
// answers the same question without taking anything. Acquire() may instead
// reserve the permits and wait for them, up to timeout_duration, sleeping
// through the Clock (a ManualClock with auto_advance moves time at once).
//
//   auto limiter = *fusebox::RateLimiter::Create({.limit_for_period = 100,
//                                                 .limit_refresh_period =
//                                                 std::chrono::seconds(1)});
//   fusebox::Status s = limiter->TryAcquire();
//   if (s.code() == fusebox::StatusCode::kRateLimited) return TryLaterAt(*s.retry_at());
//
// Cost: TryAcquire() is one coarse clock read (see `timing`), one load and one
// compare-and-swap; it never allocates (docs/performance.md).
//
// Thread-safe.
#ifndef FUSEBOX_RATE_LIMITER_H_
#define FUSEBOX_RATE_LIMITER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

struct RateLimiterOptions {
  // Permits per limit_refresh_period, which is also the largest burst (>= 1).
  // Default: 50 (Resilience4j).
  int limit_for_period = 50;
  // The period (> 0, at most one year). Default: 1 s (Resilience4j: 500 ns,
  // which suits its cycles, not a smooth limiter). The limit is exact when
  // the period in nanoseconds is a multiple of limit_for_period; otherwise T
  // is rounded up, so the limiter errs on the side of fewer calls.
  Duration limit_refresh_period = std::chrono::seconds(1);
  // How long Acquire() and Execute() may wait for a permit (>= 0); zero means
  // they refuse at once, as TryAcquire() does. Default: 0 (Resilience4j: 5 s;
  // a blocking default surprises callers on a request path).
  Duration timeout_duration = Duration::zero();
  // Which clock read decides. kCoarse (Clock::CoarseNow, ~3 ns) lags the
  // precise clock by up to a few milliseconds, which can only make the limiter
  // stricter, never admit more; kPrecise (Clock::Now, ~21 ns) suits periods
  // of a few milliseconds. Default: kAuto, meaning kCoarse when
  // limit_refresh_period >= 1 s, else kPrecise.
  CallTiming timing = CallTiming::kAuto;

  // OK, or kInvalidArgument naming the first field at fault and its rule.
  Status Validate() const;
};

class RateLimiter {
 public:
  // Validates `options` and builds a limiter on `clock`, which must outlive
  // it. Fails with kInvalidArgument naming the bad field.
  static Result<std::unique_ptr<RateLimiter>> Create(RateLimiterOptions options,
                                                     Clock& clock = SystemClock());

  RateLimiter(const RateLimiter&) = delete;
  RateLimiter& operator=(const RateLimiter&) = delete;
  ~RateLimiter() = default;

  // Takes `permits` (1 <= permits <= limit_for_period; more is a bug,
  // asserted, and kInvalidArgument in release builds) if they are free now.
  // Otherwise takes nothing and returns kRateLimited, reason "rate_limited",
  // with retry_at() the time at which they will be free if nobody else takes
  // them first. Never waits, never allocates.
  Status TryAcquire(int permits = 1) noexcept;

  // As TryAcquire(), but when the permits will be free within
  // timeout_duration, reserves them at once (so later callers queue behind,
  // fairly) and sleeps on the clock until they are. Returns kRateLimited
  // without waiting when they will not be free in time.
  Status Acquire(int permits = 1);

  // How long until `permits` would be free; zero when they are free now.
  Duration TimeUntilPermit(int permits = 1) const noexcept;

  // How many permits could be taken now, in [0, limit_for_period].
  int AvailablePermits() const noexcept;
  // Requests refused since creation (no permit in time); counted on the
  // refusing path only.
  std::uint64_t rejected_calls() const noexcept {
    return rejected_.load(std::memory_order_relaxed);
  }

  // Callers of Acquire() asleep now, waiting for their reserved permits
  // (Resilience4j's getNumberOfWaitingThreads()).
  int waiting_threads() const noexcept { return waiting_.load(std::memory_order_relaxed); }

  // Acquire()s one permit, then runs `fn` (see internal/policy_call.h for the
  // callables accepted and what comes back); returns kRateLimited without
  // running it when no permit comes in time.
  template <typename F>
  internal::PolicyReturn<F> Execute(F&& fn);

  const RateLimiterOptions& options() const noexcept { return options_; }
  Clock& clock() const noexcept { return clock_; }

 private:
  RateLimiter(RateLimiterOptions options, Clock& clock);

  Duration::rep NowNs() const noexcept {
    return (precise_ ? clock_.Now() : clock_.CoarseNow()).time_since_epoch().count();
  }
  Status TooMany(int permits) const;
  Status AcquireSlow(int permits);

  // The theoretical arrival time in clock nanoseconds: when the permits
  // handed out so far would all have been "emitted" at one every T. Only this
  // word is shared, so relaxed ordering is enough everywhere: the
  // compare-and-swap makes each update atomic, and the limiter publishes no
  // other data through it. Its own cache line: every permit writes it.
  alignas(64) std::atomic<Duration::rep> tat_ns_{0};
  // T, the emission interval, in nanoseconds.
  const Duration::rep interval_ns_;
  // How far ahead of now the TAT may run: limit_for_period * T.
  const Duration::rep tolerance_ns_;
  const bool precise_;
  Clock& clock_;
  const RateLimiterOptions options_;
  // Apart from tat_ns_: refusals must not slow the calls that get permits.
  alignas(64) std::atomic<std::uint64_t> rejected_{0};
  // Touched only by callers that wait; relaxed: a gauge, nothing is
  // published through it.
  std::atomic<int> waiting_{0};
};

// ---------------------------------------------------------------------------
// Inline fast path.

inline Status RateLimiter::TryAcquire(int permits) noexcept {
  if (permits < 1 || permits > options_.limit_for_period) [[unlikely]] {
    return TooMany(permits);
  }
  const Duration::rep now = NowNs();
  const Duration::rep cost = interval_ns_ * permits;
  Duration::rep tat = tat_ns_.load(std::memory_order_relaxed);
  for (;;) {
    const Duration::rep next = (tat > now ? tat : now) + cost;
    if (next - now > tolerance_ns_) {
      // Free once the TAT is back within the tolerance: at next - tolerance,
      // whatever clock read now (a lagging coarse read changes `now`, not
      // this).
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return Status::Rejected(StatusCode::kRateLimited, "rate_limited",
                              TimePoint(Duration(next - tolerance_ns_)));
    }
    if (tat_ns_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) return Status();
  }
}

inline Status RateLimiter::Acquire(int permits) {
  if (options_.timeout_duration <= Duration::zero()) return TryAcquire(permits);
  return AcquireSlow(permits);
}

template <typename F>
internal::PolicyReturn<F> RateLimiter::Execute(F&& fn) {
  Status s = Acquire();
  if (!s.ok()) return s;
  return internal::InvokePlain(fn);
}

}  // namespace fusebox

#endif  // FUSEBOX_RATE_LIMITER_H_
