// fusebox/retry.h: retrying a failed call, a bounded number of times.
//
// A Retry runs a callable again when it fails with a retryable Status, waiting
// between attempts as its interval function says (fusebox/backoff.h: fixed,
// exponential, exponential with proportional, full or decorrelated jitter,
// all from seeded generators). It stops at the first of:
//   - success, or a failure that is not retryable: returned as it is;
//   - max_attempts attempts, or a wait that would end past max_duration after
//     the first attempt began: kRetriesExhausted, whose message names the
//     number of attempts and the last failure.
//
// Which failures are retried:
//   - kCircuitOpen never: a breaker that refuses has decided when to try again
//     (its retry_at), and retrying it is exactly the retry storm seed 003
//     warns about ("CircuitOpenError를 ... 다시 시도하지 않아야 한다");
//   - kBulkheadFull and kRateLimited only when retry_on_bulkhead_full /
//     retry_on_rate_limited say so: they are our own guards saying "too much",
//     and more attempts make it more;
//   - everything else as retry_on says (by default kUnavailable and kTimeout).
//
// A failure that carries retry_at() (a Retry-After from the dependency, or a
// rate limiter's answer) sets the next wait to "until then" instead of the
// interval function; a hint further away than max_retry_after ends the loop
// (kRetriesExhausted) rather than block a thread that long.
//
// Waits go through Clock::SleepFor, so tests use a ManualClock with
// auto_advance and never sleep. Exceptions thrown by the callable are not
// retried: they propagate at once, unchanged.
//
//   auto retry = *fusebox::Retry::Create({
//       .max_attempts = 4,
//       .interval_function = fusebox::backoff::FullJitter({.initial = 100ms, .multiplier = 2,
//                                                          .max = 2s}, /*seed=*/42),
//       .max_duration = 5s,
//   });
//   fusebox::Result<Page> page = retry->Execute([&] { return client.Get(url); });
//
// Inside a Pipeline with a circuit breaker, whether the breaker records every
// attempt or only the final result is RetryRecording (pipeline.h).
//
// Every loop, run by Execute() or inside a Pipeline, is counted by how it
// ended (loop_counts(), Resilience4j's Retry.Metrics): the metrics report it
// once the Retry is registered with MetricsCollector::AddRetry(), with no code
// around the calls. The counters are striped per thread, so loops on many
// threads do not write one cache line.
//
// Thread-safe: one Retry may run any number of loops at once. The interval
// function is shared by them; backoff::DecorrelatedJitter keeps its previous
// wait per function object, so concurrent loops draw from one sequence (still
// within [initial, max]).
#ifndef FUSEBOX_RETRY_H_
#define FUSEBOX_RETRY_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include "fusebox/backoff.h"
#include "fusebox/clock.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

struct RetryOptions {
  // Attempts in all, the first included (>= 1; 1 means never retry).
  // Default: 3 (Resilience4j).
  int max_attempts = 3;
  // The wait before every retry when interval_function is unset (>= 0).
  // Default: 500 ms (Resilience4j).
  Duration wait_duration = std::chrono::milliseconds(500);
  // When set, the wait before retry n (n = 1 after the first attempt failed),
  // e.g. backoff::Exponential(...). Default: unset.
  IntervalFunction interval_function = nullptr;
  // Whether a failure is worth another attempt. Never asked about
  // kCircuitOpen, kBulkheadFull or kRateLimited (see above). Default (unset):
  // kUnavailable and kTimeout are retried, nothing else.
  std::function<bool(const Status&)> retry_on = nullptr;
  // Retry kBulkheadFull. Default: false.
  bool retry_on_bulkhead_full = false;
  // Retry kRateLimited (after its retry_at). Default: false.
  bool retry_on_rate_limited = false;
  // Total time budget of one loop, from the start of the first attempt; a
  // retry whose wait would end later is not made (>= 0; zero means no
  // budget). Measured on the coarse clock (a few ms of resolution on
  // SystemClock, exact on ManualClock). Default: 0.
  Duration max_duration = Duration::zero();
  // The longest Retry-After hint that is waited for (>= 0). Default: 1 min.
  Duration max_retry_after = std::chrono::minutes(1);

  // OK, or kInvalidArgument naming the first field at fault and its rule.
  Status Validate() const;
};

// What to do after a failed attempt. Returned by Retry::Decide(), for loops
// that interleave other steps with the retries (Pipeline does).
struct RetryDecision {
  enum class Action : std::uint8_t {
    // Wait `wait`, then try again.
    kRetry,
    // Not retryable: return the failure as it is.
    kGiveUp,
    // Retryable, but out of attempts, time budget, or patience for a hint:
    // return Retry::Exhausted().
    kExhausted,
  };
  Action action = Action::kGiveUp;
  Duration wait = Duration::zero();
  // For kExhausted: "max_attempts", "max_duration" or "max_retry_after".
  const char* reason = "";
};

// A Retry's loops by how they ended, since it was created. Each counter is
// exact; the four together are not one instant.
struct RetryLoopCounts {
  std::uint64_t successful_without_retry = 0;
  std::uint64_t successful_with_retry = 0;
  // A non-retryable failure on the first attempt included.
  std::uint64_t failed_without_retry = 0;
  // kRetriesExhausted, a breaker that opened between attempts, or a
  // non-retryable failure after a retry.
  std::uint64_t failed_with_retry = 0;
};

class Retry {
 public:
  // Validates `options` and builds a retry policy that sleeps on `clock`,
  // which must outlive it. Fails with kInvalidArgument naming the bad field.
  static Result<std::unique_ptr<Retry>> Create(RetryOptions options, Clock& clock = SystemClock());

  Retry(const Retry&) = delete;
  Retry& operator=(const Retry&) = delete;
  ~Retry() = default;

  // Runs `fn` (see internal/policy_call.h for the callables accepted and what
  // comes back) until it succeeds or the policy gives up, as described at the
  // top of this file.
  template <typename F>
  internal::PolicyReturn<F> Execute(F&& fn);

  // --- The loop's steps, for callers that build their own loop. ---

  // When a loop starts: the coarse now if there is a time budget, else an
  // unused zero (no clock read).
  TimePoint LoopStart() const noexcept;
  // Whether `failure` (not OK) is retryable at all, by the rules above.
  bool IsRetryable(const Status& failure) const;
  // What to do after attempt number `attempt` (1-based) of a loop begun at
  // `loop_start` failed with `failure`.
  RetryDecision Decide(int attempt, const Status& failure, TimePoint loop_start) const;
  // The kRetriesExhausted status for a loop that made `attempts` attempts, the
  // last of which failed with `last`: "3 attempts (max_attempts), last:
  // Unavailable: reset by peer". Allocates (the message); failure path only.
  static Status Exhausted(int attempts, const RetryDecision& decision, const Status& last);
  // Counts a loop that ended after `attempts` attempts (see loop_counts()).
  // Execute() and Pipeline call it; a loop of one's own may too.
  void CountLoop(bool succeeded, int attempts) const noexcept {
    const int i = (succeeded ? 0 : 2) + (attempts > 1 ? 1 : 0);
    stripes_[StripeOfThisThread()].counts[i].fetch_add(1, std::memory_order_relaxed);
  }

  // The loops counted so far.
  RetryLoopCounts loop_counts() const noexcept;

  const RetryOptions& options() const noexcept { return options_; }
  Clock& clock() const noexcept { return clock_; }

 private:
  Retry(RetryOptions options, Clock& clock);

  static constexpr std::size_t kStripes = 8;
  // This thread's stripe: threads take stripes in turn, on first use.
  static std::size_t StripeOfThisThread() noexcept;

  const RetryOptions options_;
  Clock& clock_;
  // Loop counts: successful_without, successful_with, failed_without,
  // failed_with; one cache line per stripe.
  struct alignas(64) Stripe {
    std::atomic<std::uint64_t> counts[4] = {};
  };
  mutable Stripe stripes_[kStripes];
};

template <typename F>
internal::PolicyReturn<F> Retry::Execute(F&& fn) {
  const TimePoint start = LoopStart();
  for (int attempt = 1;; ++attempt) {
    internal::PolicyReturn<F> r = internal::InvokePlain(fn);
    const Status& s = internal::StatusOf(r);
    if (s.ok()) {
      CountLoop(true, attempt);
      return r;
    }
    const RetryDecision d = Decide(attempt, s, start);
    if (d.action != RetryDecision::Action::kRetry) {
      CountLoop(false, attempt);
      if (d.action == RetryDecision::Action::kGiveUp) return r;
      return Exhausted(attempt, d, s);
    }
    clock_.SleepFor(d.wait);
  }
}

}  // namespace fusebox

#endif  // FUSEBOX_RETRY_H_
