#include "sliding_window.h"

#include <algorithm>
#include <cassert>

namespace fusebox::internal {
namespace {

// Bits set in `x`. Written out: the baseline x86-64 target has no POPCNT
// instruction, and __builtin_popcountll becomes a library call there.
int PopCount(std::uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ull);
  x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
  return static_cast<int>((x * 0x0101010101010101ull) >> 56);
}

}  // namespace

SlidingWindow::SlidingWindow(SlidingWindowType type, int size)
    : type_(type), size_(size), bits_(inline_bits_) {
  assert(size >= 1);
  if (type_ == SlidingWindowType::kCountBased) {
    if (size > kInlineWords * kPerWord) {
      heap_bits_.assign(static_cast<std::size_t>((size + kPerWord - 1) / kPerWord), 0);
      bits_ = heap_bits_.data();
    }
  } else {
    buckets_.assign(static_cast<std::size_t>(size), Bucket{});
  }
}

void SlidingWindow::Add(WindowTotals& t, bool failed, bool slow, std::int64_t n) {
  t.calls += n;
  if (failed) t.failed += n;
  if (slow) t.slow += n;
  if (failed && slow) t.slow_failed += n;
}

void SlidingWindow::Record(std::int64_t second, bool failed, bool slow) {
  if (type_ == SlidingWindowType::kCountBased) {
    if (totals_.calls >= size_) {
      // Evict the oldest outcome, which sits where the new one goes.
      const std::uint64_t old = Slot(head_);
      Add(totals_, (old & kFailed) != 0, (old & kSlow) != 0, -1);
    }
    SetSlot(head_, (failed ? kFailed : 0) | (slow ? kSlow : 0));
    Add(totals_, failed, slow, 1);
    head_ = head_ + 1 == size_ ? 0 : head_ + 1;
    return;
  }
  AgeTo(second);
  if (second <= latest_second_ - size_) return;  // Older than the window.
  Bucket& b = buckets_[static_cast<std::size_t>(second % size_)];
  if (b.second != second) return;  // Cannot happen after AgeTo; defensive.
  Add(b.totals, failed, slow, 1);
  Add(totals_, failed, slow, 1);
}

void SlidingWindow::AddSuccesses(std::int64_t second, std::int64_t n) {
  assert(type_ == SlidingWindowType::kTimeBased);
  if (n <= 0) return;
  AgeTo(second);
  if (second <= latest_second_ - size_) return;
  Bucket& b = buckets_[static_cast<std::size_t>(second % size_)];
  if (b.second != second) return;
  Add(b.totals, false, false, n);
  Add(totals_, false, false, n);
}

void SlidingWindow::RecordSuccesses(std::int64_t n) {
  assert(type_ == SlidingWindowType::kCountBased);
  // More than the ring holds leave the same ring as `size` of them.
  n = std::min<std::int64_t>(n, size_);
  // While the ring fills up (slots head_.. are empty then) nothing is evicted.
  const std::int64_t empty = size_ - std::min<std::int64_t>(totals_.calls, size_);
  const std::int64_t filling = std::min(n, empty);
  totals_.calls += filling;
  // Then each success replaces the oldest outcome, which sits where it goes:
  // clear runs of 2-bit slots, counting the failed and slow ones among them.
  std::int64_t evict = n - filling;
  int i = head_ + static_cast<int>(filling);
  if (i >= size_) i -= size_;
  while (evict > 0) {
    const int bit = i % kPerWord;
    const int run = static_cast<int>(
        std::min<std::int64_t>({evict, kPerWord - bit, static_cast<std::int64_t>(size_ - i)}));
    const std::uint64_t mask =
        (run == kPerWord ? ~std::uint64_t{0} : ((std::uint64_t{1} << (2 * run)) - 1)) << (2 * bit);
    std::uint64_t& w = bits_[i / kPerWord];
    const std::uint64_t old = w & mask;
    constexpr std::uint64_t kLow = 0x5555555555555555ull;  // the kFailed bit of every slot
    const std::uint64_t failed = old & kLow;
    const std::uint64_t slow = (old >> 1) & kLow;
    totals_.failed -= PopCount(failed);
    totals_.slow -= PopCount(slow);
    totals_.slow_failed -= PopCount(failed & slow);
    w &= ~mask;
    evict -= run;
    i += run;
    if (i == size_) i = 0;
  }
  // Slots head_ .. head_ + filling - 1 were empty (all bits zero) already.
  head_ = static_cast<int>((head_ + n) % size_);
}

void SlidingWindow::RecordFailuresAmongSuccesses(std::span<const std::uint64_t> successes_before,
                                                 std::uint64_t successes_after) {
  assert(type_ == SlidingWindowType::kCountBased);
  const std::uint64_t size = static_cast<std::uint64_t>(size_);
  std::uint64_t total = successes_after + successes_before.size();
  for (const std::uint64_t n : successes_before) total += n;
  if (total < size) {
    // Part of the ring stays: replay them.
    for (const std::uint64_t n : successes_before) {
      if (n > 0) RecordSuccesses(static_cast<std::int64_t>(n));
      Record(0, /*failed=*/true, /*slow=*/false);
    }
    if (successes_after > 0) RecordSuccesses(static_cast<std::int64_t>(successes_after));
    return;
  }
  // Outcome j of the `total` goes to slot (head_ + j) % size; only those from
  // `first` on are not overwritten by a later one. Those span less than one
  // turn of the ring, so their slots are found by stepping and wrapping once,
  // not by a division per failure (this runs under the breaker's lock).
  if (bits_ == inline_bits_) {
    for (std::uint64_t& w : inline_bits_) w = 0;  // No call for four words.
  } else {
    std::fill(heap_bits_.begin(), heap_bits_.end(), 0);
  }
  totals_ = WindowTotals{.calls = size_};
  const std::uint64_t first = total - size;
  const std::uint64_t head = static_cast<std::uint64_t>(head_);
  std::uint64_t j = 0;     // The failure's place in the sequence.
  std::uint64_t last = 0;  // The place of the last failure kept, if any.
  std::uint64_t slot = 0;  // Its slot: (head + last) % size.
  bool kept = false;
  for (const std::uint64_t n : successes_before) {
    j += n;
    if (j >= first) {
      if (kept) {
        slot += j - last;  // < size: both places lie in the last turn.
        if (slot >= size) slot -= size;
      } else {
        slot = (head + j) % size;
        kept = true;
      }
      last = j;
      SetSlot(static_cast<int>(slot), kFailed);
      ++totals_.failed;
    }
    ++j;
  }
  head_ = static_cast<int>((head + total) % size);
}

void SlidingWindow::AgeTo(std::int64_t second) {
  if (!started_) {
    // Buckets hold the seconds (second - size, second], all empty.
    for (std::int64_t s = second - size_ + 1; s <= second; ++s) {
      buckets_[static_cast<std::size_t>(((s % size_) + size_) % size_)] = Bucket{s, {}};
    }
    latest_second_ = second;
    started_ = true;
    return;
  }
  if (second <= latest_second_) return;
  const std::int64_t first =
      second - latest_second_ >= size_ ? second - size_ + 1 : latest_second_ + 1;
  if (second - latest_second_ >= size_) totals_ = WindowTotals{};
  for (std::int64_t s = first; s <= second; ++s) {
    Bucket& b = buckets_[static_cast<std::size_t>(s % size_)];
    if (second - latest_second_ < size_) {
      totals_.calls -= b.totals.calls;
      totals_.failed -= b.totals.failed;
      totals_.slow -= b.totals.slow;
      totals_.slow_failed -= b.totals.slow_failed;
    }
    b = Bucket{s, {}};
  }
  latest_second_ = second;
}

const WindowTotals& SlidingWindow::Totals(std::int64_t second) {
  if (type_ == SlidingWindowType::kTimeBased && started_) AgeTo(second);
  return totals_;
}

void SlidingWindow::Reset() {
  totals_ = WindowTotals{};
  if (type_ == SlidingWindowType::kCountBased) {
    const std::size_t words = bits_ == inline_bits_ ? kInlineWords : heap_bits_.size();
    std::fill(bits_, bits_ + words, 0);
    head_ = 0;
  } else {
    started_ = false;
  }
}

}  // namespace fusebox::internal
