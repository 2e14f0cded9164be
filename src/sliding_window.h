// Private: the sliding windows behind CircuitBreaker.
//
// Not thread-safe: CircuitBreaker guards each window with its lock.
#ifndef FUSEBOX_SRC_SLIDING_WINDOW_H_
#define FUSEBOX_SRC_SLIDING_WINDOW_H_

#include <cstdint>
#include <span>
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
  SlidingWindow(const SlidingWindow&) = delete;
  SlidingWindow& operator=(const SlidingWindow&) = delete;

  // Records one outcome reported in epoch second `second` (ignored by
  // kCountBased).
  void Record(std::int64_t second, bool failed, bool slow);

  // Adds `n` fast successes reported in epoch second `second`. kTimeBased only.
  void AddSuccesses(std::int64_t second, std::int64_t n);

  // Records `n` successes that are not slow, leaving the window exactly as
  // `n` calls of Record(second, false, false) would. kCountBased only; a word
  // of the ring at a time rather than an outcome at a time.
  void RecordSuccesses(std::int64_t n);

  // Records, for each k, `successes_before[k]` successes and then a failure
  // (none of them slow), then `successes_after` successes, leaving the window
  // exactly as those calls of RecordSuccesses() and Record() would.
  // kCountBased only. When they fill the ring at least once over, only the
  // last `size` of them remain: the ring is rebuilt from those rather than
  // replayed an outcome at a time.
  void RecordFailuresAmongSuccesses(std::span<const std::uint64_t> successes_before,
                                    std::uint64_t successes_after);

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
  static constexpr std::uint64_t kFailed = 1;
  static constexpr std::uint64_t kSlow = 2;
  // Outcomes are 2 bits each, 32 to a word; windows of up to 128 calls keep
  // them inline, so that the whole window sits in the breaker's own cache
  // lines (recording a failure touches no separate allocation).
  static constexpr int kInlineWords = 4;
  static constexpr int kPerWord = 32;

  std::uint64_t Slot(int i) const { return (bits_[i / kPerWord] >> (2 * (i % kPerWord))) & 3u; }
  void SetSlot(int i, std::uint64_t v) {
    std::uint64_t& w = bits_[i / kPerWord];
    const int shift = 2 * (i % kPerWord);
    w = (w & ~(std::uint64_t{3} << shift)) | (v << shift);
  }

  void AgeTo(std::int64_t second);
  static void Add(WindowTotals& t, bool failed, bool slow, std::int64_t n);

  // Hot fields first: recording a COUNT_BASED outcome touches only these.
  const SlidingWindowType type_;
  const int size_;
  int head_ = 0;  // kCountBased: next slot to write.
  WindowTotals totals_;
  // kCountBased: a ring of 2-bit outcomes, inline up to 128 calls.
  std::uint64_t* bits_;
  std::uint64_t inline_bits_[kInlineWords] = {};
  std::vector<std::uint64_t> heap_bits_;  // Windows larger than 128 calls.
  // kTimeBased.
  std::vector<Bucket> buckets_;
  std::int64_t latest_second_ = 0;
  bool started_ = false;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_SLIDING_WINDOW_H_
