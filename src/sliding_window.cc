#include "sliding_window.h"

#include <algorithm>
#include <cassert>

namespace fusebox::internal {

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
