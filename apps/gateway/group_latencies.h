// apps/gateway/group_latencies.h: each circuit group's upstream call times,
// as cumulative log-bucket histograms, for the dashboard's p50 and p99.
//
// The breakers keep only the sum of their calls' times (a mean); their
// per-breaker percentile histogram would cost 1.7 KB a breaker. The gateway
// knows each call's group and duration where it finishes an upstream call,
// so it records the duration here: one relaxed fetch_add on one bucket of
// the group's histogram. Once a second DashboardStats::Tick() reads the
// cumulative counts, diffs them and folds them into the groups' 10 s
// buckets, from which it computes the quantiles.
//
// Buckets: 4 per power of two of nanoseconds (each at most 25 % wider than
// its lower bound) from 2^13 ns (8.2 us) to 2^36 ns (68.7 s), plus one
// below and one above: kLatencyBuckets in all. A quantile is reported as
// the upper bound of the bucket holding it (the lower bound, 68.7 s, for
// the last bucket), so it may read up to 25 % high, never low.
//
//   GroupLatencies latencies;
//   LatencyHistogram* h = latencies.Find("facebook:read");   // once per route
//   LatencyHistogram::Record(h, took);                       // per call
//
// GroupLatencies: thread-safe. LatencyHistogram::Record: thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_GROUP_LATENCIES_H_
#define FUSEBOX_APPS_GATEWAY_GROUP_LATENCIES_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"

namespace fusebox::gateway {

// Buckets below 2^kLatencyFirstOctave ns, above 2^kLatencyEndOctave ns, and
// kLatencyPerOctave per octave between.
inline constexpr int kLatencyFirstOctave = 13;  // 8.192 us
inline constexpr int kLatencyEndOctave = 36;    // 68.7 s
inline constexpr int kLatencyPerOctave = 4;
inline constexpr std::size_t kLatencyBuckets =
    2 + static_cast<std::size_t>((kLatencyEndOctave - kLatencyFirstOctave) * kLatencyPerOctave);

// Counts per bucket (cumulative in a histogram, per interval in the stats).
using LatencyCounts = std::array<std::int64_t, kLatencyBuckets>;

// The bucket of a duration (a negative one counts as zero).
inline std::size_t LatencyBucketOf(Duration d) noexcept {
  static_assert(kLatencyPerOctave == 4, "the sub-bucket is the two bits after the leading one");
  const auto ns = static_cast<std::uint64_t>(std::max<Duration::rep>(0, d.count()));
  if (ns < (std::uint64_t{1} << kLatencyFirstOctave)) return 0;
  const int octave = std::bit_width(ns) - 1;
  if (octave >= kLatencyEndOctave) return kLatencyBuckets - 1;
  const auto sub = static_cast<std::size_t>((ns >> (octave - 2)) & 3);
  return 1 + static_cast<std::size_t>(octave - kLatencyFirstOctave) * kLatencyPerOctave + sub;
}

// The upper bound of bucket `i` (the lower bound of the last, unbounded one).
Duration LatencyBucketUpper(std::size_t i);

// The smallest bucket bound at or above the q-th percentile (q in 1..100)
// of `counts`: the ceil(q * n / 100)-th smallest call's bucket. nullopt when
// there is no call.
std::optional<Duration> LatencyPercentile(const LatencyCounts& counts, int q);

// One group's cumulative histogram. Never freed while its GroupLatencies
// lives, so a route may keep the pointer.
struct LatencyHistogram {
  std::array<std::atomic<std::int64_t>, kLatencyBuckets> counts{};

  // One call of duration `d`. Relaxed: the counts are independent totals,
  // read once a second by a tick that only needs each to grow; a call
  // counted in the next tick rather than this one is no error.
  static void Record(LatencyHistogram* h, Duration d) noexcept {
    h->counts[LatencyBucketOf(d)].fetch_add(1, std::memory_order_relaxed);
  }
};

// The histograms by group, at most kMaxGroups of them.
class GroupLatencies {
 public:
  // Groups timed apart at most (documented in docs/gateway.md); calls of
  // later groups are timed together in kOtherGroup. Never forgotten: the
  // table is at most kMaxGroups x ~0.8 KB.
  static constexpr std::size_t kMaxGroups = 1000;
  static constexpr std::string_view kOtherGroup = "other";

  // The histogram of `group` ("<provider>:<workload>"), made on first use;
  // kOtherGroup's once kMaxGroups are made. One lock and a map look-up:
  // callers on a hot path keep the pointer (it stays valid).
  LatencyHistogram* Find(std::string_view group) FUSEBOX_EXCLUDES(mu_);

  // Calls `fn(group, cumulative counts)` for every histogram.
  void ForEach(const std::function<void(const std::string&, const LatencyCounts&)>& fn) const
      FUSEBOX_EXCLUDES(mu_);

  // "provider:<p>:<w>:<subject>" -> "<p>:<w>"; anything else -> kOtherGroup.
  static std::string_view GroupOfKey(std::string_view key);

 private:
  mutable internal::Mutex mu_;
  std::map<std::string, std::unique_ptr<LatencyHistogram>, std::less<>> groups_
      FUSEBOX_GUARDED_BY(mu_);
};

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_GROUP_LATENCIES_H_
