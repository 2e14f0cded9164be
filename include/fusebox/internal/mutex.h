// Annotated mutex, scoped lock and condition variable for fusebox internals.
//
// libstdc++'s std::mutex has no capability attribute, so clang's thread-safety
// analysis cannot see what it guards. These thin wrappers add the attributes
// from fusebox/internal/thread_annotations.h and nothing else: a Mutex is a
// std::mutex, a CondVar is a std::condition_variable (leveldb's port::Mutex,
// port::CondVar and util/mutexlock.h are the model).
//
// Thread safety: Mutex and CondVar are thread-safe. MutexLock is not
// thread-safe: it belongs to the scope, and so the thread, that created it.
//
// Example:
//
//   class Queue {
//    public:
//     void Push(int v) FUSEBOX_EXCLUDES(mu_) {
//       {
//         internal::MutexLock lock(&mu_);
//         items_.push_back(v);
//       }
//       not_empty_.NotifyOne();
//     }
//     int Pop() FUSEBOX_EXCLUDES(mu_) {
//       internal::MutexLock lock(&mu_);
//       while (items_.empty()) not_empty_.Wait(lock);
//       int v = items_.front();
//       items_.pop_front();
//       return v;
//     }
//
//    private:
//     internal::Mutex mu_;
//     internal::CondVar not_empty_;
//     std::deque<int> items_ FUSEBOX_GUARDED_BY(mu_);
//   };
//
// Internal: shipped because public headers may use it, but not part of the API.

#ifndef FUSEBOX_INTERNAL_MUTEX_H_
#define FUSEBOX_INTERNAL_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "fusebox/internal/thread_annotations.h"

namespace fusebox::internal {

class CondVar;

// A non-recursive mutex that clang's thread-safety analysis understands.
// Prefer MutexLock to calling Lock() and Unlock() by hand.
//
// Thread-safe.
class FUSEBOX_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  ~Mutex() = default;

  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  // Blocks until the calling thread holds the mutex. The caller must not
  // already hold it.
  void Lock() FUSEBOX_ACQUIRE() { mu_.lock(); }

  // Releases the mutex, which the calling thread must hold.
  void Unlock() FUSEBOX_RELEASE() { mu_.unlock(); }

  // Acquires the mutex if it is free and returns true; otherwise returns false
  // at once. May fail spuriously, as std::mutex::try_lock may.
  [[nodiscard]] bool TryLock() FUSEBOX_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  // Tells the analysis that the calling thread holds the mutex. It checks
  // nothing at run time (std::mutex cannot say who holds it); use it where the
  // analysis cannot follow, e.g. in a callback that always runs under the lock.
  void AssertHeld() const FUSEBOX_ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;

  std::mutex mu_;
};

// Holds a Mutex for the lifetime of the scope: locks it in the constructor and
// unlocks it in the destructor.
//
//   internal::MutexLock lock(&mu_);
//
// Not thread-safe: a MutexLock belongs to the thread that created it.
class FUSEBOX_SCOPED_CAPABILITY MutexLock {
 public:
  // Locks `*mu`, which must outlive this object.
  explicit MutexLock(Mutex* mu) FUSEBOX_ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }

  // Unlocks the mutex.
  ~MutexLock() FUSEBOX_RELEASE() { mu_->Unlock(); }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  friend class CondVar;

  Mutex* const mu_;
};

// A condition variable used with Mutex. Waits may wake spuriously, so always
// wait in a loop that re-checks the condition:
//
//   while (!ready_) cv_.Wait(lock);
//
// Notify without holding the mutex where you can; it spares the woken thread
// from blocking on the mutex at once.
//
// Thread-safe.
class CondVar {
 public:
  CondVar() = default;
  ~CondVar() = default;

  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  // Atomically releases `*mu` and blocks until notified (or spuriously
  // woken), then reacquires `*mu` before returning. The caller must hold `*mu`.
  void Wait(Mutex* mu) FUSEBOX_REQUIRES(mu) { WaitImpl(mu->mu_); }

  // As Wait(&mu) for the mutex that `lock` holds. A MutexLock always holds its
  // mutex, so this overload needs no annotation.
  void Wait(MutexLock& lock) { WaitImpl(lock.mu_->mu_); }

  // As Wait(mu), but gives up at `deadline` (a real, steady_clock time). Returns
  // true if the deadline passed, false if the thread was notified or woke
  // spuriously. Code on a fusebox::Clock must not use this: a ManualClock's
  // time is not steady_clock time. This is for the clock implementations.
  [[nodiscard]] bool WaitUntil(Mutex* mu, std::chrono::steady_clock::time_point deadline)
      FUSEBOX_REQUIRES(mu) {
    return WaitUntilImpl(mu->mu_, deadline);
  }

  // As WaitUntil(&mu, deadline) for the mutex that `lock` holds.
  [[nodiscard]] bool WaitUntil(MutexLock& lock, std::chrono::steady_clock::time_point deadline) {
    return WaitUntilImpl(lock.mu_->mu_, deadline);
  }

  // Wakes one waiting thread, if any.
  void NotifyOne() { cv_.notify_one(); }

  // Wakes all waiting threads.
  void NotifyAll() { cv_.notify_all(); }

 private:
  // Both helpers adopt the std::mutex that the caller already holds for the
  // duration of the wait, then release() the unique_lock so that it does not
  // unlock on destruction: ownership stays with the caller, as in leveldb's
  // port/port_stdcxx.h. They take the raw std::mutex, which the analysis does
  // not track, so the annotated public overloads carry the contract.
  void WaitImpl(std::mutex& mu) {
    std::unique_lock<std::mutex> lock(mu, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }

  bool WaitUntilImpl(std::mutex& mu, std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu, std::adopt_lock);
    const std::cv_status status = cv_.wait_until(lock, deadline);
    lock.release();
    return status == std::cv_status::timeout;
  }

  std::condition_variable cv_;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_INTERNAL_MUTEX_H_
