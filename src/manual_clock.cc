#include "fusebox/testing/manual_clock.h"

#include <cassert>
#include <utility>
#include <vector>

namespace fusebox::testing {

ManualClock::ManualClock(Options options)
    : now_ns_(options.start.time_since_epoch().count()), auto_advance_(options.auto_advance) {}

ManualClock::~ManualClock() {
  internal::MutexLock lock(&mu_);
  assert(sleepers_.empty() && "ManualClock destroyed while threads sleep on it");
}

TimePoint ManualClock::Now() const {
  // Acquire pairs with the release store in Set(): whoever sees the new time
  // also sees what the advancing thread wrote before it.
  return TimePoint(Duration(now_ns_.load(std::memory_order_acquire)));
}

void ManualClock::SleepUntil(TimePoint deadline) {
  if (auto_advance_) {
    if (deadline > Now()) Set(deadline);
    return;
  }
  internal::MutexLock lock(&mu_);
  const auto it = sleepers_.insert(deadline);
  while (Now() < deadline) cv_.Wait(lock);
  sleepers_.erase(it);
}

TimerId ManualClock::ScheduleAt(TimePoint deadline, std::function<void()> fn) {
  internal::MutexLock lock(&mu_);
  const TimerId id = next_id_++;
  timers_.emplace(std::make_pair(deadline, id), std::move(fn));
  return id;
}

bool ManualClock::Cancel(TimerId id) {
  internal::MutexLock lock(&mu_);
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->first.second == id) {
      timers_.erase(it);
      return true;
    }
  }
  return false;
}

std::size_t ManualClock::Advance(Duration d) {
  assert(d >= Duration::zero() && "ManualClock cannot go back");
  std::size_t woken = 0;
  {
    // Read and move under one lock, so that two threads advancing at once
    // add up instead of one overwriting the other with an earlier time.
    internal::MutexLock lock(&mu_);
    woken = MoveToLocked(Now() + (d > Duration::zero() ? d : Duration::zero()));
  }
  cv_.NotifyAll();
  return woken + RunDueTimers();
}

std::size_t ManualClock::Set(TimePoint t) {
  std::size_t woken = 0;
  {
    internal::MutexLock lock(&mu_);
    assert(t >= Now() && "ManualClock cannot go back");
    woken = MoveToLocked(t);
  }
  cv_.NotifyAll();
  return woken + RunDueTimers();
}

std::size_t ManualClock::MoveToLocked(TimePoint t) {
  if (t > Now()) now_ns_.store(t.time_since_epoch().count(), std::memory_order_release);
  // Sleepers whose deadline has passed; they leave sleepers_ as they wake.
  std::size_t woken = 0;
  for (auto it = sleepers_.begin(); it != sleepers_.end() && *it <= t; ++it) ++woken;
  return woken;
}

std::size_t ManualClock::RunDueTimers() {
  std::size_t ran = 0;
  for (;;) {
    std::function<void()> fn;
    {
      internal::MutexLock lock(&mu_);
      if (timers_.empty() || timers_.begin()->first.first > Now()) break;
      fn = std::move(timers_.begin()->second);
      timers_.erase(timers_.begin());
    }
    // Run with no lock held: the callback may schedule or cancel timers, or
    // read the clock.
    try {
      fn();
    } catch (...) {
    }
    ++ran;
  }
  return ran;
}

std::size_t ManualClock::PendingTimers() const {
  internal::MutexLock lock(&mu_);
  return timers_.size();
}

std::size_t ManualClock::Sleepers() const {
  internal::MutexLock lock(&mu_);
  return sleepers_.size();
}

}  // namespace fusebox::testing
