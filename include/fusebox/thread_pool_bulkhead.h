// fusebox/thread_pool_bulkhead.h: Resilience4j's thread-pool bulkhead, a
// bounded pool of threads and a bounded queue that run calls asynchronously.
//
// Where Bulkhead (fusebox/bulkhead.h) bounds how many of the caller's threads
// a dependency can hold, a ThreadPoolBulkhead takes the call off the caller's
// thread altogether: Submit() hands it to the pool and returns a future at
// once, or refuses it at once with kBulkheadFull. The pool follows Java's
// ThreadPoolExecutor, as Resilience4j's FixedThreadPoolBulkhead does:
//   - while fewer than core_thread_pool_size threads run, a call starts a new
//     one;
//   - else it waits in the queue, if fewer than queue_capacity calls wait;
//   - else, while fewer than max_thread_pool_size threads run, it starts a
//     new one (which takes this call, not the queue's oldest);
//   - else it is refused.
// A thread above the core count that finds nothing to do for
// keep_alive_duration ends. Threads start on demand, none at creation.
//
//   auto pool = *fusebox::ThreadPoolBulkhead::Create({.max_thread_pool_size = 4,
//                                                     .core_thread_pool_size = 2,
//                                                     .queue_capacity = 10});
//   fusebox::Result<std::future<Report>> f = pool->Submit([&] { return BuildReport(id); });
//   if (!f) return f.error();                   // kBulkheadFull: pool and queue full
//   Report r = f->get();                        // an exception thrown by the call comes back here
//
// keep_alive_duration is measured on the system's steady clock (a pool
// thread waits on a condition variable), not on a fusebox Clock: it decides
// only when an idle thread is given back, never an outcome.
//
// The destructor refuses new calls, lets the queued ones run, and joins every
// thread, as Java's shutdown() then awaitTermination() would.
//
// Cost: a Submit() takes one mutex and allocates the task (std::packaged_task
// and its shared state); a hand-off to another thread is microseconds. Use it
// for calls that must not hold the caller's thread, not on a hot path where
// the semaphore Bulkhead does.
//
// Thread-safe.
#ifndef FUSEBOX_THREAD_POOL_BULKHEAD_H_
#define FUSEBOX_THREAD_POOL_BULKHEAD_H_

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <type_traits>
#include <utility>

#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

struct ThreadPoolBulkheadOptions {
  // Most threads at once (>= core_thread_pool_size). Default: the number of
  // hardware threads (Resilience4j: availableProcessors()).
  int max_thread_pool_size = DefaultMaxThreads();
  // Threads kept even when idle (>= 1). Default: one less than the hardware
  // threads, at least 1 (Resilience4j).
  int core_thread_pool_size = DefaultMaxThreads() > 1 ? DefaultMaxThreads() - 1 : 1;
  // Calls waiting for a thread (>= 0; 0: a call that finds every core thread
  // busy needs a thread of its own). Default: 100 (Resilience4j).
  int queue_capacity = 100;
  // How long a thread above the core count stays idle before it ends (>= 0).
  // Default: 20 ms (Resilience4j).
  Duration keep_alive_duration = std::chrono::milliseconds(20);

  // OK, or kInvalidArgument naming the first field at fault and its rule.
  Status Validate() const;

  // std::thread::hardware_concurrency(), at least 1.
  static int DefaultMaxThreads() noexcept;
};

// A snapshot of a pool, Resilience4j's ThreadPoolBulkhead.Metrics.
struct ThreadPoolBulkheadState {
  int thread_pool_size = 0;     // threads now (getThreadPoolSize)
  int active_thread_count = 0;  // threads running a call (getActiveThreadCount)
  int queue_depth = 0;          // calls waiting (getQueueDepth)
  std::uint64_t rejected_calls = 0;
};

class ThreadPoolBulkhead {
 public:
  static Result<std::unique_ptr<ThreadPoolBulkhead>> Create(ThreadPoolBulkheadOptions options);

  ThreadPoolBulkhead(const ThreadPoolBulkhead&) = delete;
  ThreadPoolBulkhead& operator=(const ThreadPoolBulkhead&) = delete;
  // Runs the queued calls, then joins every thread. Must not be called from
  // one of the pool's own calls.
  ~ThreadPoolBulkhead();

  // Runs `fn()` on a pool thread; its result, or the exception it throws, is
  // the future's. Fails at once with kBulkheadFull (reason
  // "thread_pool_bulkhead_full") when pool and queue are full.
  template <typename F>
  Result<std::future<std::invoke_result_t<std::decay_t<F>&>>> Submit(F&& fn) {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> future = task->get_future();
    if (Status s = Enqueue([task] { (*task)(); }); !s.ok()) return s;
    return future;
  }

  // Submit() for a task with no result to wait for.
  Status Enqueue(std::function<void()> task);

  ThreadPoolBulkheadState state() const;
  // queue_capacity minus the calls waiting (getRemainingQueueCapacity).
  int remaining_queue_capacity() const;
  const ThreadPoolBulkheadOptions& options() const noexcept { return options_; }

 private:
  explicit ThreadPoolBulkhead(ThreadPoolBulkheadOptions options);
  struct Core;

  const ThreadPoolBulkheadOptions options_;
  const std::unique_ptr<Core> core_;
};

}  // namespace fusebox

#endif  // FUSEBOX_THREAD_POOL_BULKHEAD_H_
