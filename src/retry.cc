// Retry: the decisions of the loop. The loop itself is a template in retry.h
// (and in pipeline.h), so that the callable is never type-erased.
#include "fusebox/retry.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace fusebox {
namespace {

std::string Ns(Duration d) { return std::to_string(d.count()) + " ns"; }

RetryDecision Exhaust(const char* reason) {
  return {RetryDecision::Action::kExhausted, Duration::zero(), reason};
}

}  // namespace

Status RetryOptions::Validate() const {
  if (max_attempts < 1) {
    return Status::InvalidArgument("max_attempts must be >= 1, got " +
                                   std::to_string(max_attempts));
  }
  if (wait_duration < Duration::zero()) {
    return Status::InvalidArgument("wait_duration must be >= 0, got " + Ns(wait_duration));
  }
  if (max_duration < Duration::zero()) {
    return Status::InvalidArgument("max_duration must be >= 0 (0 means no budget), got " +
                                   Ns(max_duration));
  }
  if (max_retry_after < Duration::zero()) {
    return Status::InvalidArgument("max_retry_after must be >= 0, got " + Ns(max_retry_after));
  }
  return Status();
}

Result<std::unique_ptr<Retry>> Retry::Create(RetryOptions options, Clock& clock) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<Retry>(new Retry(std::move(options), clock));
}

Retry::Retry(RetryOptions options, Clock& clock) : options_(std::move(options)), clock_(clock) {}

std::size_t Retry::StripeOfThisThread() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local std::size_t stripe_of_thread =
      next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripe_of_thread;
}

RetryLoopCounts Retry::loop_counts() const noexcept {
  std::uint64_t sum[4] = {0, 0, 0, 0};
  for (const Stripe& stripe : stripes_) {
    for (int i = 0; i < 4; ++i) sum[i] += stripe.counts[i].load(std::memory_order_relaxed);
  }
  return RetryLoopCounts{sum[0], sum[1], sum[2], sum[3]};
}

TimePoint Retry::LoopStart() const noexcept {
  // The budget is the only reader; without one the success path reads no clock.
  return options_.max_duration > Duration::zero() ? clock_.CoarseNow() : TimePoint();
}

bool Retry::IsRetryable(const Status& failure) const {
  switch (failure.code()) {
    case StatusCode::kOk:
    case StatusCode::kCircuitOpen:
      return false;
    case StatusCode::kBulkheadFull:
      return options_.retry_on_bulkhead_full;
    case StatusCode::kRateLimited:
      return options_.retry_on_rate_limited;
    default:
      break;
  }
  if (options_.retry_on) return options_.retry_on(failure);
  return failure.code() == StatusCode::kUnavailable || failure.code() == StatusCode::kTimeout;
}

RetryDecision Retry::Decide(int attempt, const Status& failure, TimePoint loop_start) const {
  if (!IsRetryable(failure)) return {};
  if (attempt >= options_.max_attempts) return Exhaust("max_attempts");
  Duration wait;
  const bool budget = options_.max_duration > Duration::zero();
  TimePoint now{};
  if (const std::optional<TimePoint> hint = failure.retry_at()) {
    now = clock_.CoarseNow();
    wait = *hint > now ? *hint - now : Duration::zero();
    if (wait > options_.max_retry_after) return Exhaust("max_retry_after");
  } else {
    wait =
        options_.interval_function ? options_.interval_function(attempt) : options_.wait_duration;
    if (wait < Duration::zero()) wait = Duration::zero();
    if (budget) now = clock_.CoarseNow();
  }
  // The retry must begin within the budget: at loop_start + max_duration
  // exactly is still in time.
  if (budget && now - loop_start > options_.max_duration - wait) return Exhaust("max_duration");
  return {RetryDecision::Action::kRetry, wait, ""};
}

Status Retry::Exhausted(int attempts, const RetryDecision& decision, const Status& last) {
  Status exhausted(StatusCode::kRetriesExhausted,
                   std::to_string(attempts) + (attempts == 1 ? " attempt (" : " attempts (") +
                       decision.reason + "), last: " + last.ToString());
  // The last attempt's code and retry_at stay readable, not only in the
  // message: a nested loop's exhaustion passes on the cause it carries.
  if (last.retry_at()) exhausted = std::move(exhausted).WithRetryAt(*last.retry_at());
  return std::move(exhausted).WithCause(last.code() == StatusCode::kRetriesExhausted ? last.cause()
                                                                                     : last.code());
}

}  // namespace fusebox
