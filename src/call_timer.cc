// CallTimer and TimeWindowMax (fusebox/call_timer.h).
#include "fusebox/call_timer.h"

#include <algorithm>
#include <cstddef>
#include <set>
#include <string>
#include <utility>

namespace fusebox {
namespace {

std::int64_t Ns(TimePoint t) { return t.time_since_epoch().count(); }

// Raises `a` to `v`: a load when it is already as high, a CAS loop otherwise.
void RaiseTo(std::atomic<std::int64_t>& a, std::int64_t v) noexcept {
  std::int64_t cur = a.load(std::memory_order_relaxed);
  while (v > cur && !a.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

Status ValidateCallTimerOptions(const CallTimerOptions& o) {
  const auto ns = [](Duration d) { return std::to_string(d.count()) + " ns"; };
  if (o.max_expiry <= Duration::zero()) {
    return Status::InvalidArgument("max_expiry must be > 0, got " + ns(o.max_expiry));
  }
  if (o.max_buffer_length < 1 || o.max_buffer_length > 64) {
    return Status::InvalidArgument("max_buffer_length must be in [1, 64], got " +
                                   std::to_string(o.max_buffer_length));
  }
  if (o.max_expiry.count() < o.max_buffer_length) {
    return Status::InvalidArgument("max_expiry must be at least max_buffer_length ns");
  }
  if (o.minimum_expected_value <= Duration::zero()) {
    return Status::InvalidArgument("minimum_expected_value must be > 0, got " +
                                   ns(o.minimum_expected_value));
  }
  if (o.maximum_expected_value < o.minimum_expected_value) {
    return Status::InvalidArgument(
        "maximum_expected_value must be >= minimum_expected_value, got " +
        ns(o.maximum_expected_value));
  }
  return Status();
}

std::vector<Duration> PercentileHistogramBuckets(Duration min, Duration max) {
  std::set<std::int64_t> bounds;
  const auto keep = [&](std::int64_t b) {
    if (b >= min.count() && b <= max.count()) bounds.insert(b);
  };
  keep(1);
  keep(2);
  keep(3);
  // Each power of 4 from 4^1: 4^k, then steps of 4^k / 3 below
  // 4^(k+1) - 4^k / 3 (Micrometer's PercentileHistogramBuckets; its 4^31
  // overflows a long and adds nothing, so the last is 4^30).
  for (int exp = 2; exp <= 60; exp += 2) {
    std::int64_t current = std::int64_t{1} << exp;
    const std::int64_t delta = current / 3;
    const std::int64_t next = current * 4 - delta;
    for (; current < next; current += delta) keep(current);
  }
  bounds.insert(min.count());
  bounds.insert(max.count());
  std::vector<Duration> out;
  out.reserve(bounds.size());
  for (std::int64_t b : bounds) out.emplace_back(b);
  return out;
}

TimeWindowMax::TimeWindowMax(Duration expiry, int buffer_length, TimePoint start)
    : rotate_every_ns_(std::max<std::int64_t>(1, expiry.count() / std::max(1, buffer_length))),
      buffers_(std::max(1, buffer_length)),
      ring_(std::make_unique<std::atomic<std::int64_t>[]>(static_cast<std::size_t>(buffers_))),
      last_rotation_ns_(Ns(start)) {}

void TimeWindowMax::Rotate(TimePoint now) noexcept {
  const std::int64_t t = Ns(now);
  if (t - last_rotation_ns_.load(std::memory_order_acquire) < rotate_every_ns_) return;
  // One rotating thread; the others record into the ring as it is.
  if (rotating_.exchange(true, std::memory_order_acquire)) return;
  const std::int64_t last = last_rotation_ns_.load(std::memory_order_relaxed);
  const std::int64_t rotations = (t - last) / rotate_every_ns_;
  if (rotations > 0) {
    // Zero the buffer read and read the next, once per interval passed; after
    // a whole ring of them every buffer is zero.
    int current = current_.load(std::memory_order_relaxed);
    const std::int64_t steps = std::min<std::int64_t>(rotations, buffers_);
    for (std::int64_t i = 0; i < steps; ++i) {
      ring_[static_cast<std::size_t>(current)].store(0, std::memory_order_relaxed);
      current = current + 1 == buffers_ ? 0 : current + 1;
    }
    current_.store(current, std::memory_order_release);
    last_rotation_ns_.store(last + rotations * rotate_every_ns_, std::memory_order_release);
  }
  rotating_.store(false, std::memory_order_release);
}

void TimeWindowMax::Record(Duration d, TimePoint now) noexcept {
  Rotate(now);
  if (d <= Duration::zero()) return;
  for (int i = 0; i < buffers_; ++i) RaiseTo(ring_[static_cast<std::size_t>(i)], d.count());
}

Duration TimeWindowMax::Poll(TimePoint now) noexcept {
  Rotate(now);
  const int current = current_.load(std::memory_order_acquire);
  return Duration(ring_[static_cast<std::size_t>(current)].load(std::memory_order_relaxed));
}

CallTimer::CallTimer(Clock& clock, const CallTimerOptions& options,
                     std::shared_ptr<const std::vector<Duration>> bounds)
    : clock_(clock),
      max_{{options.max_expiry, options.max_buffer_length, clock.CoarseNow()},
           {options.max_expiry, options.max_buffer_length, clock.CoarseNow()},
           {options.max_expiry, options.max_buffer_length, clock.CoarseNow()}},
      bounds_(std::move(bounds)) {
  if (bounds_) {
    counts_ = std::make_unique<std::atomic<std::uint64_t>[]>(3 * (bounds_->size() + 1));
  }
}

void CallTimer::Record(OutcomeKind kind, Duration d) noexcept {
  const auto k = static_cast<std::size_t>(kind);
  max_[k].Record(d, clock_.CoarseNow());
  if (!bounds_) return;
  // The first bound >= d: the bucket `le` that counts it first.
  const std::size_t i = static_cast<std::size_t>(
      std::lower_bound(bounds_->begin(), bounds_->end(), d) - bounds_->begin());
  counts_[k * (bounds_->size() + 1) + i].fetch_add(1, std::memory_order_relaxed);
  if (d > Duration::zero()) sum_ns_[k].fetch_add(d.count(), std::memory_order_relaxed);
}

CallTimerSample CallTimer::Sample() {
  CallTimerSample s;
  const TimePoint now = clock_.CoarseNow();
  for (std::size_t k = 0; k < 3; ++k) s.max[k] = max_[k].Poll(now);
  if (!bounds_) return s;
  s.bounds = bounds_;
  const std::size_t n = bounds_->size() + 1;
  for (std::size_t k = 0; k < 3; ++k) {
    // Each counter read once and summed: cumulative and monotone however
    // recording races with this.
    std::vector<std::uint64_t>& c = s.cumulative[k];
    c.resize(n);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) {
      total += counts_[k * n + i].load(std::memory_order_relaxed);
      c[i] = total;
    }
    s.sum[k] = Duration(sum_ns_[k].load(std::memory_order_relaxed));
  }
  return s;
}

}  // namespace fusebox
