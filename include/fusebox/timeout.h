// fusebox/timeout.h: a deadline for one attempt, with cooperative cancellation.
//
// A Timeout gives each call timeout_duration. The callable receives a
// std::stop_token; when the deadline comes, a timer on the Clock requests a
// stop on that token (running any std::stop_callback the callable registered,
// e.g. one that cancels a socket read). A call that finishes at or after its
// deadline, or whose token was stopped, is reported as kTimeout (reason
// "deadline_exceeded"), whatever it returned, and a Pipeline records it to its
// circuit breaker as a failure with its real duration, so that the slow-call
// rate sees it too.
//
// Where the callable runs, and what happens when it ignores the token:
//
//   The callable runs on the caller's thread. The deadline is enforced by
//   asking, not by abandoning: a callable that ignores its token runs to its
//   end, the caller waits for it, and only then gets kTimeout. Nothing is
//   leaked, no thread is created, and the call costs a few atomic operations
//   and no allocation (docs/performance.md).
//
//   The alternative, running the callable on a worker thread and returning
//   kTimeout to the caller at the deadline, bounds the caller's wait even for
//   a callable that never looks at its token; but the abandoned callable keeps
//   its worker, its socket and its memory, so a dependency that hangs fills
//   any pool (and an unbounded pool with threads), which is the resource
//   exhaustion the timeout was meant to prevent. It also costs a hand-off
//   between threads (microseconds) and an allocation per call, and needs the
//   callable's captures to outlive the caller. fusebox chooses the bounded,
//   honest version: a deadline a callable can observe, and a Bulkhead to
//   bound how many callers a non-cooperative dependency can hold at once. To
//   bound the wait for a blocking API that cannot be cancelled, give that API
//   its own timeout (a socket option, a driver deadline) from the token's
//   deadline.
//
// How the deadline is watched: each Timeout owns watch_slots slots. A call
// claims a free slot with one compare-and-swap, writing its deadline; one
// clock timer at a time is armed for the earliest deadline that needs one,
// and when it fires it stops the expired calls and re-arms itself, for the
// next deadline, or for one more period if calls were made since it last ran.
// So under steady load there is about one timer per timeout_duration, not one
// per call, scheduled from the timer's own thread; a caller schedules it only
// after an idle period. A slot keeps its std::stop_source from call to call and gets a fresh
// one only after a stop, so a call allocates nothing. When more calls than
// watch_slots are in flight, the extra ones each get their own stop source and
// timer (allocations, still correct).
//
// The token is meaningful only until the callable returns: a copy kept after
// that may later see the stop meant for another call of the same slot.
//
//   auto timeout = *fusebox::Timeout::Create({.timeout_duration = 800ms});
//   fusebox::Result<Reply> r = timeout->Execute([&](const std::stop_token& stop) {
//     return client.Get(url, stop);   // returns early once stop is requested
//   });
//   if (!r && r.error().code() == fusebox::StatusCode::kTimeout) ...
//
// Thread-safe.
#ifndef FUSEBOX_TIMEOUT_H_
#define FUSEBOX_TIMEOUT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <utility>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

struct TimeoutOptions {
  // The deadline of one call, from its start (> 0). A call that takes exactly
  // this long has timed out. Default: 1 s (Resilience4j's TimeLimiter).
  Duration timeout_duration = std::chrono::seconds(1);
  // Calls watched at once without allocating (>= 1; rounded up to a power of
  // two). Default: 64.
  int watch_slots = 64;
  // Which clock reads time a call. kCoarse (~3 ns a read) may stop a call up
  // to a few milliseconds late on SystemClock, never early; kPrecise costs
  // ~21 ns a read. Default: kAuto, meaning kCoarse when timeout_duration >= 1 s,
  // else kPrecise.
  CallTiming timing = CallTiming::kAuto;
  // Whether the deadline requests a stop on the call's token (Resilience4j's
  // cancelRunningFuture). When false, the token is never stopped and no
  // timer is armed: a call that takes timeout_duration or longer still ends
  // as kTimeout, but only once it has returned by itself. Default: true.
  bool cancel_running_future = true;

  // OK, or kInvalidArgument naming the first field at fault and its rule.
  Status Validate() const;
};

// Calls a Timeout ran (Execute(), or a Pipeline's timeout stage), by how they
// ended: Resilience4j's TimeLimiter metrics (kind successful, failed,
// timeout).
struct TimeLimiterCounts {
  std::uint64_t successful = 0;
  std::uint64_t failed = 0;
  std::uint64_t timeout = 0;
};

class Timeout {
 private:
  struct Shared;
  struct Slot;

 public:
  // One watched call: from Start() to Finish() (or destruction). Not movable;
  // Start() returns it by guaranteed copy elision.
  //
  // Not thread-safe: it belongs to the thread running the call.
  class [[nodiscard]] Watch {
   public:
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;
    // Finishes the watch if Finish() was not called (e.g. the callable threw).
    ~Watch();

    // The token to give the callable.
    const std::stop_token& token() const noexcept;

    // Ends the watch. Returns true when the call timed out: its token was
    // stopped, or it took timeout_duration or longer. Call it at most once.
    bool Finish();
    // As Finish(), and counts the call in counts() as a timeout, or else as
    // successful or failed by `result` (what the callable returned).
    bool Finish(const Status& result);

    // How long the call took; valid after Finish().
    Duration elapsed() const noexcept { return elapsed_; }

   private:
    friend class Timeout;
    Watch(Shared* shared, bool precise);

    Shared* shared_;
    Slot* slot_ = nullptr;
    bool precise_;
    bool finished_ = false;
    TimePoint start_{};
    Duration::rep deadline_ns_ = 0;
    Duration elapsed_ = Duration::zero();
    // Only for a call that found no free slot.
    std::stop_source own_source_{std::nostopstate};
    std::stop_token own_token_{};
    TimerId own_timer_ = 0;
  };

  // Validates `options` and builds a timeout on `clock`, which must outlive
  // it. Fails with kInvalidArgument naming the bad field.
  static Result<std::unique_ptr<Timeout>> Create(TimeoutOptions options,
                                                 Clock& clock = SystemClock());

  Timeout(const Timeout&) = delete;
  Timeout& operator=(const Timeout&) = delete;
  // No call may be in flight when the timeout is destroyed.
  ~Timeout();

  // Runs `fn` with a token that is stopped at the deadline (see
  // internal/policy_call.h for the callables accepted and what comes back).
  // Returns kTimeout when the call timed out, else what `fn` returned.
  // An exception thrown by `fn` propagates unchanged.
  template <typename F>
  internal::PolicyReturn<F> Execute(F&& fn);

  // Starts watching a call, timed as options().timing says; for callers that
  // run the callable themselves (Pipeline does).
  Watch Start() { return Watch(shared_.get(), precise_); }
  // As Start(), with precise (true) or coarse (false) clock reads.
  Watch Start(bool precise) { return Watch(shared_.get(), precise); }

  // The status a timed-out call gets: kTimeout, reason "deadline_exceeded".
  static Status TimedOut() noexcept {
    return Status::Rejected(StatusCode::kTimeout, "deadline_exceeded");
  }

  // Calls counted so far (Watch::Finish(const Status&)): each count is exact,
  // the three together are not one instant.
  TimeLimiterCounts counts() const noexcept;

  // Whether options().timing resolves to precise clock reads.
  bool precise_timing() const noexcept { return precise_; }
  const TimeoutOptions& options() const noexcept { return options_; }
  Clock& clock() const noexcept;

 private:
  Timeout(TimeoutOptions options, Clock& clock);

  const TimeoutOptions options_;
  const bool precise_;
  // Shared with the watchdog timer, which may fire after the Timeout is gone.
  const std::shared_ptr<Shared> shared_;
};

template <typename F>
internal::PolicyReturn<F> Timeout::Execute(F&& fn) {
  Watch watch = Start();
  internal::PolicyReturn<F> r = internal::InvokeWithToken(fn, watch.token());
  if (watch.Finish(internal::StatusOf(r))) return TimedOut();
  return r;
}

}  // namespace fusebox

#endif  // FUSEBOX_TIMEOUT_H_
