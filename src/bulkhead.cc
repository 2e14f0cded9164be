// Bulkhead: the waiting path and validation. The fast paths are inline in
// bulkhead.h.
#include "fusebox/bulkhead.h"

#include <cassert>
#include <string>

#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"

namespace fusebox {

// What waiters block on. Waiters re-check both conditions (a free slot, the
// deadline) after every wake-up, so a notification carries no data and a
// spurious or stale one does no harm.
struct Bulkhead::Waiters {
  internal::Mutex mu;
  internal::CondVar cv;

  void WakeAll() {
    // Taking the lock orders this notification after any waiter's check-then-
    // wait: one that checked before us is waiting by now and gets it.
    { internal::MutexLock lock(&mu); }
    cv.NotifyAll();
  }
};

Status BulkheadOptions::Validate() const {
  if (max_concurrent_calls < 1) {
    return Status::InvalidArgument("max_concurrent_calls must be >= 1, got " +
                                   std::to_string(max_concurrent_calls));
  }
  if (max_wait_duration < Duration::zero()) {
    return Status::InvalidArgument("max_wait_duration must be >= 0, got " +
                                   std::to_string(max_wait_duration.count()) + " ns");
  }
  if (max_waiting_calls < 0) {
    return Status::InvalidArgument("max_waiting_calls must be >= 0, got " +
                                   std::to_string(max_waiting_calls));
  }
  return Status();
}

Result<std::unique_ptr<Bulkhead>> Bulkhead::Create(BulkheadOptions options, Clock& clock) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<Bulkhead>(new Bulkhead(options, clock));
}

Bulkhead::Bulkhead(BulkheadOptions options, Clock& clock)
    : available_(options.max_concurrent_calls),
      options_(options),
      clock_(clock),
      waiters_(std::make_shared<Waiters>()) {}

Bulkhead::~Bulkhead() {
  assert(waiting_.load() == 0 && "Bulkhead destroyed while callers wait on it");
  assert(available_.load() == options_.max_concurrent_calls &&
         "Bulkhead destroyed while permits are held");
}

void Bulkhead::WakeWaiters() noexcept { waiters_->WakeAll(); }

Result<BulkheadPermit> Bulkhead::AcquireSlow() {
  const TimePoint deadline = clock_.Now() + options_.max_wait_duration;
  // Joining the waiters before the re-check below is what makes the wake-up
  // reliable (see Release()).
  if (waiting_.fetch_add(1, std::memory_order_seq_cst) >= options_.max_waiting_calls) {
    waiting_.fetch_sub(1, std::memory_order_relaxed);
    return Refuse("too_many_waiting");
  }
  // The timer only wakes us; it holds the Waiters alive, not the bulkhead, so
  // it is harmless if it runs after this wait ended or the bulkhead died.
  const TimerId timer = clock_.ScheduleAt(deadline, [waiters = waiters_] { waiters->WakeAll(); });
  Result<BulkheadPermit> result = Status::Rejected(StatusCode::kBulkheadFull, "wait_timeout");
  {
    internal::MutexLock lock(&waiters_->mu);
    for (;;) {
      int n = available_.load(std::memory_order_seq_cst);
      bool taken = false;
      while (n > 0 && !taken) {
        taken = available_.compare_exchange_weak(n, n - 1, std::memory_order_seq_cst);
      }
      if (taken) {
        result = BulkheadPermit(this);
        break;
      }
      // At the deadline exactly, the wait is over (the timer fires then).
      if (clock_.Now() >= deadline) break;
      waiters_->cv.Wait(lock);
    }
  }
  waiting_.fetch_sub(1, std::memory_order_seq_cst);
  clock_.Cancel(timer);
  if (!result) rejected_.fetch_add(1, std::memory_order_relaxed);
  return result;
}

}  // namespace fusebox
