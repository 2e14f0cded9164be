// Tests for the private SlidingWindow: the bulk RecordSuccesses() against the
// outcome-at-a-time Record() it stands for.
#include "sliding_window.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

namespace fusebox::internal {
namespace {

void ExpectSameTotals(SlidingWindow& a, SlidingWindow& b, const std::string& where) {
  const WindowTotals& ta = a.Totals(0);
  const WindowTotals& tb = b.Totals(0);
  ASSERT_EQ(ta.calls, tb.calls) << where;
  ASSERT_EQ(ta.failed, tb.failed) << where;
  ASSERT_EQ(ta.slow, tb.slow) << where;
  ASSERT_EQ(ta.slow_failed, tb.slow_failed) << where;
}

// Random outcomes, with batches of successes recorded in bulk into one window
// and one by one into the other, across ring sizes that end mid-word, fill
// whole words, and live on the heap (over 128 calls). Later outcomes evict
// what the batches left, so the ring itself, not only its totals, must agree.
TEST(SlidingWindow, RecordSuccessesIsRecordOneAtATime) {
  for (const int size : {1, 2, 3, 31, 32, 33, 64, 100, 128, 129, 300}) {
    std::mt19937 rng(static_cast<unsigned>(size));
    SlidingWindow bulk(SlidingWindowType::kCountBased, size);
    SlidingWindow single(SlidingWindowType::kCountBased, size);
    for (int step = 0; step < 2000; ++step) {
      const std::string where = "size " + std::to_string(size) + " step " + std::to_string(step);
      if (step % 500 == 250) {
        bulk.Reset();
        single.Reset();
      }
      if (rng() % 3 == 0) {
        const std::int64_t n = static_cast<std::int64_t>(rng() % (2 * size + 3));
        bulk.RecordSuccesses(n);
        for (std::int64_t i = 0; i < n; ++i) single.Record(0, false, false);
      } else {
        const bool failed = rng() % 2 == 0;
        const bool slow = rng() % 3 == 0;
        bulk.Record(0, failed, slow);
        single.Record(0, failed, slow);
      }
      ExpectSameTotals(bulk, single, where);
    }
  }
}

}  // namespace
}  // namespace fusebox::internal
