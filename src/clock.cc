// The one place in fusebox that reads the system clock and sleeps (its two
// reads are inline in fusebox/internal/system_clock.h, for the hot paths).
#include "fusebox/clock.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "fusebox/internal/system_clock.h"

namespace fusebox {
namespace {

using internal::CoarseSteadyNow;
using internal::SteadyNow;

// Runs timers for SystemClock on one thread, started on the first
// ScheduleAt(). The thread and this object live until the process exits (the
// object is never destroyed, so timers scheduled during static destruction are
// harmless: they just never run).
class TimerThread {
 public:
  TimerId Schedule(TimePoint deadline, std::function<void()> fn) {
    std::unique_lock<std::mutex> lock(mu_);
    const TimerId id = next_id_++;
    const bool earliest = timers_.empty() || deadline < timers_.begin()->first.first;
    timers_.emplace(std::make_pair(deadline, id), std::move(fn));
    if (!started_) {
      started_ = true;
      std::thread([this] { Run(); }).detach();
    } else if (earliest) {
      cv_.notify_one();
    }
    return id;
  }

  bool Cancel(TimerId id) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = timers_.begin(); it != timers_.end(); ++it) {
      if (it->first.second == id) {
        timers_.erase(it);
        return true;
      }
    }
    return false;
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (timers_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const TimePoint next = timers_.begin()->first.first;
      if (SteadyNow() < next) {
        cv_.wait_until(lock, std::chrono::steady_clock::time_point(next.time_since_epoch()));
        continue;
      }
      std::function<void()> fn = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
      lock.unlock();
      try {
        fn();
      } catch (...) {
        // A timer callback must not throw; swallowing keeps the thread alive.
      }
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool started_ = false;
  TimerId next_id_ = 1;
  std::map<std::pair<TimePoint, TimerId>, std::function<void()>> timers_;
};

class SteadyClock final : public Clock {
 public:
  TimePoint Now() const override { return SteadyNow(); }
  TimePoint CoarseNow() const override { return CoarseSteadyNow(); }
  void SleepFor(Duration d) override {
    if (d > Duration::zero()) std::this_thread::sleep_for(d);
  }
  void SleepUntil(TimePoint deadline) override {
    std::this_thread::sleep_until(
        std::chrono::steady_clock::time_point(deadline.time_since_epoch()));
  }
  TimerId ScheduleAt(TimePoint deadline, std::function<void()> fn) override {
    return timers_->Schedule(deadline, std::move(fn));
  }
  bool Cancel(TimerId id) override { return timers_->Cancel(id); }

 private:
  // Leaked on purpose: the timer thread may still touch it at exit.
  TimerThread* timers_ = new TimerThread;
};

}  // namespace

Clock& SystemClock() {
  // Never destroyed (leveldb's NoDestructor idiom): usable during static
  // destruction, and no exit-time race with the timer thread.
  static SteadyClock* const kClock = new SteadyClock;
  return *kClock;
}

std::chrono::system_clock::time_point WallClockNow() noexcept {
  return std::chrono::system_clock::now();
}

}  // namespace fusebox
