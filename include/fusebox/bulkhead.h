// fusebox/bulkhead.h: a limit on concurrent calls to one dependency.
//
// A Bulkhead is a counting semaphore. Each call holds a BulkheadPermit (RAII:
// the slot comes back when the permit is destroyed), so a dependency that
// slows down can tie up at most max_concurrent_calls of the caller's threads,
// connections and memory, even before a circuit breaker has seen enough
// failures to open (seed 003: "회로가 열리기 전에도 ... 동시 연결 수를 제한한다").
//
// A full bulkhead refuses at once with kBulkheadFull. With max_wait_duration
// > 0, Acquire() may instead wait that long for a slot; the wait is measured on
// the bulkhead's Clock (a timer on the clock ends it, so a ManualClock's
// Advance() does), and at most max_waiting_calls callers wait at once: there
// is never an unbounded queue, in time or in length. Waiters are not served
// in order; a slot that frees goes to whoever takes it first.
//
//   auto bulkhead = *fusebox::Bulkhead::Create({.max_concurrent_calls = 20});
//   fusebox::Result<fusebox::BulkheadPermit> slot = bulkhead->TryAcquire();
//   if (!slot) return slot.error();                       // kBulkheadFull
//   return recommendations.Load(id);                      // slot freed on return
//
// Cost: TryAcquire() plus the permit's release is two atomic read-modify-writes
// and one load when nobody waits; no allocation (docs/performance.md). Only a
// caller that waits takes a lock and schedules a clock timer.
//
// Thread-safe.
#ifndef FUSEBOX_BULKHEAD_H_
#define FUSEBOX_BULKHEAD_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>

#include "fusebox/clock.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

class Bulkhead;

struct BulkheadOptions {
  // Calls allowed in flight at once (>= 1). Default: 25 (Resilience4j).
  int max_concurrent_calls = 25;
  // How long Acquire() and Execute() may wait for a slot (>= 0); zero means
  // they refuse at once, as TryAcquire() does. Default: 0 (Resilience4j).
  Duration max_wait_duration = Duration::zero();
  // How many callers may wait at once when max_wait_duration > 0 (>= 0); one
  // more is refused at once. Default: 25.
  int max_waiting_calls = 25;

  // OK, or kInvalidArgument naming the first field at fault and its rule.
  Status Validate() const;
};

// One slot of a bulkhead, given back on destruction (or Release()). Move-only.
// A permit must not outlive its bulkhead.
//
// Thread-compatible: one thread at a time may use a permit.
class [[nodiscard]] BulkheadPermit {
 public:
  BulkheadPermit(BulkheadPermit&& other) noexcept
      : bulkhead_(std::exchange(other.bulkhead_, nullptr)) {}
  BulkheadPermit& operator=(BulkheadPermit&& other) noexcept {
    if (this != &other) {
      Release();
      bulkhead_ = std::exchange(other.bulkhead_, nullptr);
    }
    return *this;
  }
  BulkheadPermit(const BulkheadPermit&) = delete;
  BulkheadPermit& operator=(const BulkheadPermit&) = delete;
  ~BulkheadPermit() { Release(); }

  // Gives the slot back now; a no-op after the first call.
  void Release() noexcept;

  // False once released or moved from.
  bool held() const noexcept { return bulkhead_ != nullptr; }

 private:
  friend class Bulkhead;
  explicit BulkheadPermit(Bulkhead* bulkhead) noexcept : bulkhead_(bulkhead) {}

  Bulkhead* bulkhead_;
};

class Bulkhead {
 public:
  // Validates `options` and builds a bulkhead on `clock`, which must outlive
  // it. Fails with kInvalidArgument naming the bad field.
  static Result<std::unique_ptr<Bulkhead>> Create(BulkheadOptions options,
                                                  Clock& clock = SystemClock());

  Bulkhead(const Bulkhead&) = delete;
  Bulkhead& operator=(const Bulkhead&) = delete;
  // No permit may be held and nobody may wait when the bulkhead is destroyed.
  ~Bulkhead();

  // A slot if one is free now, else kBulkheadFull (reason "bulkhead_full").
  // Never waits, never allocates.
  Result<BulkheadPermit> TryAcquire() noexcept;

  // As TryAcquire(), but when full waits up to max_wait_duration for a slot.
  // kBulkheadFull with reason "wait_timeout" when none came in time, or
  // "too_many_waiting" when max_waiting_calls callers already wait.
  Result<BulkheadPermit> Acquire();

  // Acquire()s a slot, runs `fn` holding it (see internal/policy_call.h for
  // the callables accepted and what comes back), and frees the slot, also when
  // `fn` throws. kBulkheadFull without running `fn` when no slot came.
  template <typename F>
  internal::PolicyReturn<F> Execute(F&& fn);

  // Free slots now, in [0, max_concurrent_calls].
  int available_permits() const noexcept { return available_.load(std::memory_order_relaxed); }
  // Callers blocked in Acquire() now.
  int waiting_calls() const noexcept { return waiting_.load(std::memory_order_relaxed); }
  // Calls refused since creation (full, too many waiting, or the wait ran
  // out); counted on the refusing path only.
  std::uint64_t rejected_calls() const noexcept {
    return rejected_.load(std::memory_order_relaxed);
  }

  const BulkheadOptions& options() const noexcept { return options_; }
  Clock& clock() const noexcept { return clock_; }

 private:
  friend class BulkheadPermit;
  struct Waiters;

  Bulkhead(BulkheadOptions options, Clock& clock);

  void Release() noexcept;
  bool TryTake() noexcept;
  Result<BulkheadPermit> Refuse(const char* reason) noexcept;
  Result<BulkheadPermit> AcquireSlow();
  void WakeWaiters() noexcept;

  // Free slots. Its own cache line: every call writes it twice.
  alignas(64) std::atomic<int> available_;
  // Callers in AcquireSlow(); read by every Release().
  std::atomic<int> waiting_{0};
  const BulkheadOptions options_;
  Clock& clock_;
  // The lock and condition variable waiters block on. Shared with the clock
  // timers that end waits, which may still run after a wait (and even the
  // bulkhead) is gone.
  const std::shared_ptr<Waiters> waiters_;
  // Apart from available_: refusals must not slow the calls that get in.
  alignas(64) std::atomic<std::uint64_t> rejected_{0};
};

// ---------------------------------------------------------------------------
// Inline fast paths.

inline bool Bulkhead::TryTake() noexcept {
  int n = available_.load(std::memory_order_relaxed);
  while (n > 0) {
    // Acquire pairs with the release in Release(): what the previous holder of
    // a slot did happens before the next holder starts, as a mutex would give.
    if (available_.compare_exchange_weak(n, n - 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

inline Result<BulkheadPermit> Bulkhead::Refuse(const char* reason) noexcept {
  rejected_.fetch_add(1, std::memory_order_relaxed);
  return Status::Rejected(StatusCode::kBulkheadFull, reason);
}

inline Result<BulkheadPermit> Bulkhead::TryAcquire() noexcept {
  if (TryTake()) return BulkheadPermit(this);
  return Refuse("bulkhead_full");
}

inline void Bulkhead::Release() noexcept {
  // Sequentially consistent, with the seq_cst increment of waiting_ and the
  // seq_cst re-check in AcquireSlow(): either this load sees the waiter, or the
  // waiter's re-check sees this slot. Never both missed, so no lost wake-up.
  available_.fetch_add(1, std::memory_order_seq_cst);
  if (waiting_.load(std::memory_order_seq_cst) != 0) [[unlikely]] {
    WakeWaiters();
  }
}

inline void BulkheadPermit::Release() noexcept {
  if (bulkhead_ != nullptr) std::exchange(bulkhead_, nullptr)->Release();
}

inline Result<BulkheadPermit> Bulkhead::Acquire() {
  if (TryTake()) return BulkheadPermit(this);
  if (options_.max_wait_duration <= Duration::zero()) return Refuse("bulkhead_full");
  return AcquireSlow();
}

template <typename F>
internal::PolicyReturn<F> Bulkhead::Execute(F&& fn) {
  Result<BulkheadPermit> permit = Acquire();
  if (!permit) return std::move(permit).error();
  return internal::InvokePlain(fn);
}

}  // namespace fusebox

#endif  // FUSEBOX_BULKHEAD_H_
