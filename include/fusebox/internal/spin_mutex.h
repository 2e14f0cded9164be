// A small spin lock for very short critical sections on hot paths.
//
// CircuitBreaker's lock guards a few dozen nanoseconds of window arithmetic.
// Under contention a std::mutex sends the loser into futex_wait and the winner
// into futex_wake: microseconds of system calls for nanoseconds of work, and
// two threads on one breaker get a quarter of one thread's throughput (measured
// in bench/circuit_breaker_benchmark.cc). SpinMutex spins on a plain load
// (test-and-test-and-set, so waiting cores share the line instead of bouncing
// it), with a pause instruction between reads, and yields the CPU after a
// bounded number of spins, so that an oversubscribed machine or a holder that
// was preempted cannot make it burn a core for a whole time slice.
//
// Use it only where every critical section is short and never blocks; use
// internal::Mutex everywhere else.
//
// Thread-safe. SpinMutexLock belongs to the scope that created it.
//
// Internal: shipped because public headers may use it, but not part of the API.
#ifndef FUSEBOX_INTERNAL_SPIN_MUTEX_H_
#define FUSEBOX_INTERNAL_SPIN_MUTEX_H_

#include <atomic>
#include <thread>

#include "fusebox/internal/thread_annotations.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace fusebox::internal {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class FUSEBOX_CAPABILITY("mutex") SpinMutex {
 public:
  SpinMutex() = default;
  SpinMutex(const SpinMutex&) = delete;
  SpinMutex& operator=(const SpinMutex&) = delete;

  void Lock() FUSEBOX_ACQUIRE() {
    // Acquire pairs with the release in Unlock(): the holder's writes are
    // visible to the next holder.
    if (!locked_.exchange(true, std::memory_order_acquire)) return;
    LockSlow();
  }

  void Unlock() FUSEBOX_RELEASE() { locked_.store(false, std::memory_order_release); }

  [[nodiscard]] bool TryLock() FUSEBOX_TRY_ACQUIRE(true) {
    return !locked_.load(std::memory_order_relaxed) &&
           !locked_.exchange(true, std::memory_order_acquire);
  }

  void AssertHeld() const FUSEBOX_ASSERT_CAPABILITY(this) {}

 private:
  void LockSlow() {
    for (int spins = 0;; ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < 256) {
          CpuRelax();
        } else {
          std::this_thread::yield();
          spins = 0;
        }
      }
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  std::atomic<bool> locked_{false};
};

class FUSEBOX_SCOPED_CAPABILITY SpinMutexLock {
 public:
  explicit SpinMutexLock(SpinMutex* mu) FUSEBOX_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~SpinMutexLock() FUSEBOX_RELEASE() { mu_->Unlock(); }
  SpinMutexLock(const SpinMutexLock&) = delete;
  SpinMutexLock& operator=(const SpinMutexLock&) = delete;

 private:
  SpinMutex* const mu_;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_INTERNAL_SPIN_MUTEX_H_
