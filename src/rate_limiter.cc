// RateLimiter: GCRA on one atomic word. See rate_limiter.h for the algorithm;
// this file holds validation and the paths that may wait.
#include "fusebox/rate_limiter.h"

#include <algorithm>
#include <cassert>
#include <string>

namespace fusebox {
namespace {

constexpr Duration kMaxPeriod = std::chrono::hours(24 * 366);

bool PreciseTiming(const RateLimiterOptions& o) {
  return o.timing == CallTiming::kPrecise ||
         (o.timing == CallTiming::kAuto && o.limit_refresh_period < std::chrono::seconds(1));
}

}  // namespace

Status RateLimiterOptions::Validate() const {
  if (limit_for_period < 1) {
    return Status::InvalidArgument("limit_for_period must be >= 1, got " +
                                   std::to_string(limit_for_period));
  }
  if (limit_refresh_period <= Duration::zero() || limit_refresh_period > kMaxPeriod) {
    return Status::InvalidArgument("limit_refresh_period must be in (0, 1 year], got " +
                                   std::to_string(limit_refresh_period.count()) + " ns");
  }
  if (timeout_duration < Duration::zero()) {
    return Status::InvalidArgument("timeout_duration must be >= 0, got " +
                                   std::to_string(timeout_duration.count()) + " ns");
  }
  if (timing != CallTiming::kAuto && timing != CallTiming::kPrecise &&
      timing != CallTiming::kCoarse) {
    return Status::InvalidArgument("timing must be kAuto, kPrecise or kCoarse");
  }
  return Status();
}

Result<std::unique_ptr<RateLimiter>> RateLimiter::Create(RateLimiterOptions options, Clock& clock) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<RateLimiter>(new RateLimiter(options, clock));
}

RateLimiter::RateLimiter(RateLimiterOptions options, Clock& clock)
    // Rounded up: a T that is a little long admits a little less, never more.
    : interval_ns_((options.limit_refresh_period.count() + options.limit_for_period - 1) /
                   options.limit_for_period),
      tolerance_ns_(interval_ns_ * options.limit_for_period),
      precise_(PreciseTiming(options)),
      clock_(clock),
      options_(options) {
  // An idle limiter: a full burst is available from the first call.
  tat_ns_.store(NowNs(), std::memory_order_relaxed);
}

Status RateLimiter::TooMany(int permits) const {
  assert(false && "permits must be in [1, limit_for_period]");
  return Status::InvalidArgument("permits must be in [1, " +
                                 std::to_string(options_.limit_for_period) + "], got " +
                                 std::to_string(permits));
}

Status RateLimiter::AcquireSlow(int permits) {
  if (permits < 1 || permits > options_.limit_for_period) return TooMany(permits);
  const Duration::rep now = NowNs();
  const Duration::rep cost = interval_ns_ * permits;
  const Duration::rep max_wait = options_.timeout_duration.count();
  Duration::rep tat = tat_ns_.load(std::memory_order_relaxed);
  Duration::rep free_at = now;
  for (;;) {
    const Duration::rep next = (tat > now ? tat : now) + cost;
    free_at = next - tolerance_ns_;
    if (free_at - now > max_wait) {
      rejected_.fetch_add(1, std::memory_order_relaxed);
      return Status::Rejected(StatusCode::kRateLimited, "rate_limited",
                              TimePoint(Duration(free_at)));
    }
    // Reserve now, wait after: whoever asked first is served first.
    if (tat_ns_.compare_exchange_weak(tat, next, std::memory_order_relaxed)) break;
  }
  if (free_at > now) {
    // Resilience4j's number_of_waiting_threads: callers asleep here.
    waiting_.fetch_add(1, std::memory_order_relaxed);
    clock_.SleepUntil(TimePoint(Duration(free_at)));
    waiting_.fetch_sub(1, std::memory_order_relaxed);
  }
  return Status();
}

Duration RateLimiter::TimeUntilPermit(int permits) const noexcept {
  const Duration::rep now = NowNs();
  const Duration::rep tat = tat_ns_.load(std::memory_order_relaxed);
  const Duration::rep next = std::max(tat, now) + interval_ns_ * std::max(permits, 1);
  return Duration(std::max<Duration::rep>(0, next - tolerance_ns_ - now));
}

int RateLimiter::AvailablePermits() const noexcept {
  const Duration::rep now = NowNs();
  const Duration::rep ahead =
      std::max<Duration::rep>(0, tat_ns_.load(std::memory_order_relaxed) - now);
  return static_cast<int>(std::max<Duration::rep>(0, (tolerance_ns_ - ahead) / interval_ns_));
}

}  // namespace fusebox
