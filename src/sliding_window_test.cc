// Tests for the private SlidingWindow: the bulk RecordSuccesses() against the
// outcome-at-a-time Record() it stands for.
#include "sliding_window.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

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

// Failures among runs of successes recorded at once into one window and
// outcome by outcome into the other: runs short enough to keep part of the
// ring (replayed), and long enough to overwrite it (rebuilt), with failures
// on either side of the boundary between what is overwritten and what stays.
TEST(SlidingWindow, RecordFailuresAmongSuccessesIsRecordOneAtATime) {
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
        std::vector<std::uint64_t> before(rng() % 32);
        const std::uint64_t longest = rng() % 2 == 0 ? 3 : static_cast<std::uint64_t>(size) / 4 + 2;
        for (std::uint64_t& n : before) n = rng() % longest;
        const std::uint64_t after = rng() % (2 * longest);
        bulk.RecordFailuresAmongSuccesses(before, after);
        for (const std::uint64_t n : before) {
          for (std::uint64_t i = 0; i < n; ++i) single.Record(0, false, false);
          single.Record(0, true, false);
        }
        for (std::uint64_t i = 0; i < after; ++i) single.Record(0, false, false);
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

// Runs far longer than the ring: only where they end decides what remains.
TEST(SlidingWindow, RecordFailuresAmongSuccessesLongRuns) {
  SlidingWindow bulk(SlidingWindowType::kCountBased, 7);
  SlidingWindow single(SlidingWindowType::kCountBased, 7);
  for (int i = 0; i < 5; ++i) {
    bulk.Record(0, false, true);
    single.Record(0, false, true);
  }
  const std::uint64_t before[] = {std::uint64_t{1} << 40, 0, 3};
  bulk.RecordFailuresAmongSuccesses(before, 2);
  // The last seven of them: F F S S S F S S, less the first F.
  for (const bool failed : {true, false, false, false, true, false, false}) {
    single.Record(0, failed, false);
  }
  ExpectSameTotals(bulk, single, "after the runs");
  EXPECT_EQ(bulk.Totals(0).failed, 2);
  for (int i = 0; i < 7; ++i) {
    bulk.Record(0, false, false);
    single.Record(0, false, false);
    ExpectSameTotals(bulk, single, "evicting " + std::to_string(i));
  }
}

}  // namespace
}  // namespace fusebox::internal
