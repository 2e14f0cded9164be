// ThreadPoolBulkhead: Java's ThreadPoolExecutor admission rule over a mutex,
// a deque and a list of threads. See thread_pool_bulkhead.h.
#include "fusebox/thread_pool_bulkhead.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace fusebox {

int ThreadPoolBulkheadOptions::DefaultMaxThreads() noexcept {
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

Status ThreadPoolBulkheadOptions::Validate() const {
  if (core_thread_pool_size < 1) {
    return Status::InvalidArgument("core_thread_pool_size must be >= 1, got " +
                                   std::to_string(core_thread_pool_size));
  }
  if (queue_capacity < 0) {
    return Status::InvalidArgument("queue_capacity must be >= 0, got " +
                                   std::to_string(queue_capacity));
  }
  if (keep_alive_duration < Duration::zero()) {
    return Status::InvalidArgument("keep_alive_duration must be >= 0, got " +
                                   std::to_string(keep_alive_duration.count()) + " ns");
  }
  // The rule between two fields last, so that each field's own is reported
  // first.
  if (max_thread_pool_size < core_thread_pool_size) {
    return Status::InvalidArgument("max_thread_pool_size must be >= core_thread_pool_size (" +
                                   std::to_string(core_thread_pool_size) + "), got " +
                                   std::to_string(max_thread_pool_size));
  }
  return Status();
}

struct ThreadPoolBulkhead::Core {
  explicit Core(const ThreadPoolBulkheadOptions& o) : options(o) {}

  // Starts a thread whose first call is `task`. Requires `mu` held (the
  // thread's own list entry is written before it can look at it).
  Status StartThread(std::function<void()> task) {
    threads.emplace_back();
    const auto self = std::prev(threads.end());
    try {
      *self = std::thread(
          [this, self, first = std::move(task)]() mutable { Work(self, std::move(first)); });
    } catch (const std::system_error&) {
      threads.erase(self);
      return Status::Rejected(StatusCode::kBulkheadFull, "thread_pool_bulkhead_no_thread");
    }
    ++live;
    ++active;
    return Status();
  }

  void Work(std::list<std::thread>::iterator self, std::function<void()> task) {
    std::unique_lock lock(mu);
    while (true) {
      if (task) {
        lock.unlock();
        Run(task);
        task = nullptr;
        lock.lock();
        --active;
      }
      while (queue.empty() && !stopping) {
        if (live > options.core_thread_pool_size) {
          // An extra thread: given back after keep_alive_duration idle.
          if (!work.wait_for(lock, options.keep_alive_duration,
                             [&] { return !queue.empty() || stopping; })) {
            // Ask again: others idle as long may have ended meanwhile, and
            // the decision and the --live below must be one step under the
            // lock, or they all end and the pool falls below its core.
            if (live > options.core_thread_pool_size) break;
          }
        } else {
          work.wait(lock);
        }
      }
      if (queue.empty()) break;  // stopping with nothing left, or idle too long
      task = std::move(queue.front());
      queue.pop_front();
      ++active;
    }
    --live;
    // Joined by the next Enqueue() or the destructor.
    exited.splice(exited.end(), threads, self);
    ended.notify_all();
  }

  static void Run(std::function<void()>& task) {
    try {
      task();
    } catch (...) {
      // Submit()'s packaged_task keeps the exception for its future; a bare
      // Enqueue() task has no one to give it to, and the thread must live on.
    }
  }

  const ThreadPoolBulkheadOptions options;
  mutable std::mutex mu;
  std::condition_variable work;   // a call was queued, or stopping
  std::condition_variable ended;  // a thread moved itself to `exited`
  std::deque<std::function<void()>> queue;
  std::list<std::thread> threads;  // running
  std::list<std::thread> exited;   // done, to join
  int live = 0;
  int active = 0;
  bool stopping = false;
  std::atomic<std::uint64_t> rejected{0};
};

Result<std::unique_ptr<ThreadPoolBulkhead>> ThreadPoolBulkhead::Create(
    ThreadPoolBulkheadOptions options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  return std::unique_ptr<ThreadPoolBulkhead>(new ThreadPoolBulkhead(options));
}

ThreadPoolBulkhead::ThreadPoolBulkhead(ThreadPoolBulkheadOptions options)
    : options_(options), core_(std::make_unique<Core>(options_)) {}

ThreadPoolBulkhead::~ThreadPoolBulkhead() {
  std::list<std::thread> done;
  {
    std::unique_lock lock(core_->mu);
    core_->stopping = true;
    core_->work.notify_all();
    // Each thread runs what is queued, then moves itself to `exited`.
    core_->ended.wait(lock, [&] { return core_->threads.empty(); });
    done.splice(done.end(), core_->exited);
  }
  for (std::thread& t : done) t.join();
}

Status ThreadPoolBulkhead::Enqueue(std::function<void()> task) {
  std::list<std::thread> done;
  Status result;
  {
    std::lock_guard lock(core_->mu);
    done.splice(done.end(), core_->exited);
    Core& c = *core_;
    if (c.stopping) {
      result = Status::Rejected(StatusCode::kBulkheadFull, "thread_pool_bulkhead_shut_down");
    } else if (c.live < options_.core_thread_pool_size) {
      result = c.StartThread(std::move(task));
    } else if (static_cast<int>(c.queue.size()) < options_.queue_capacity) {
      c.queue.push_back(std::move(task));
      c.work.notify_one();
    } else if (c.live < options_.max_thread_pool_size) {
      result = c.StartThread(std::move(task));
    } else {
      result = Status::Rejected(StatusCode::kBulkheadFull, "thread_pool_bulkhead_full");
    }
    if (!result.ok()) c.rejected.fetch_add(1, std::memory_order_relaxed);
  }
  for (std::thread& t : done) t.join();
  return result;
}

ThreadPoolBulkheadState ThreadPoolBulkhead::state() const {
  std::lock_guard lock(core_->mu);
  return {core_->live, core_->active, static_cast<int>(core_->queue.size()),
          core_->rejected.load(std::memory_order_relaxed)};
}

int ThreadPoolBulkhead::remaining_queue_capacity() const {
  std::lock_guard lock(core_->mu);
  return options_.queue_capacity - static_cast<int>(core_->queue.size());
}

}  // namespace fusebox
