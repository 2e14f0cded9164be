// Private: the sliding windows behind CircuitBreaker.
//
// Not thread-safe: CircuitBreaker guards each window with its lock.
#ifndef FUSEBOX_SRC_SLIDING_WINDOW_H_
#define FUSEBOX_SRC_SLIDING_WINDOW_H_

#include <cstdint>
#include <vector>

#include "fusebox/circuit_breaker.h"

namespace fusebox::internal {

// Totals over a window.
struct WindowTotals {
  std::int64_t calls = 0;
  std::int64_t failed = 0;
  std::int64_t slow = 0;
  std::int64_t slow_failed = 0;

  bool clean() const { return failed == 0 && slow == 0; }
};

// Resilience4j's FixedSizeSlidingWindowMetrics (kCountBased: a ring of the
// last `size` outcomes) and SlidingTimeWindowMetrics (kTimeBased: `size`
// per-second buckets keyed by the epoch second of the report, aged on every
// record and read), with running totals so that a read is O(1) (O(seconds
// elapsed) for aging).
class SlidingWindow {
 public:
  SlidingWindow(SlidingWindowType type, int size);

  // Records one outcome reported in epoch second `second` (ignored by
  // kCountBased).
  void Record(std::int64_t second, bool failed, bool slow);

  // Adds `n` fast successes reported in epoch second `second`. kTimeBased only.
  void AddSuccesses(std::int64_t second, std::int64_t n);

  // Ages a kTimeBased window to `second`, then returns the totals.
  const WindowTotals& Totals(std::int64_t second);

  // Empties the window.
  void Reset();

  SlidingWindowType type() const { return type_; }
  int size() const { return size_; }
  // kCountBased: whether the ring holds `size` outcomes.
  bool full() const { return totals_.calls >= size_; }

 private:
  struct Bucket {
    std::int64_t second = 0;
    WindowTotals totals;
  };
  static constexpr std::uint8_t kFailed = 1;
  static constexpr std::uint8_t kSlow = 2;

  void AgeTo(std::int64_t second);
  static void Add(WindowTotals& t, bool failed, bool slow, std::int64_t n);

  const SlidingWindowType type_;
  const int size_;
  WindowTotals totals_;
  // kCountBased.
  std::vector<std::uint8_t> ring_;
  int head_ = 0;  // Next slot to write.
  // kTimeBased.
  std::vector<Bucket> buckets_;
  std::int64_t latest_second_ = 0;
  bool started_ = false;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_SLIDING_WINDOW_H_
