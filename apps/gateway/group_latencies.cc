#include "apps/gateway/group_latencies.h"

namespace fusebox::gateway {

Duration LatencyBucketUpper(std::size_t i) {
  if (i == 0) return Duration(Duration::rep{1} << kLatencyFirstOctave);
  if (i >= kLatencyBuckets - 1) return Duration(Duration::rep{1} << kLatencyEndOctave);
  // Bucket 1 + 4 (octave - first) + sub holds [(4 + sub), (5 + sub)) x 2^(octave - 2).
  const std::size_t j = i - 1;
  const int octave = kLatencyFirstOctave + static_cast<int>(j / kLatencyPerOctave);
  const auto sub = static_cast<Duration::rep>(j % kLatencyPerOctave);
  return Duration((kLatencyPerOctave + sub + 1) << (octave - 2));
}

std::optional<Duration> LatencyPercentile(const LatencyCounts& counts, int q) {
  std::int64_t n = 0;
  for (std::int64_t c : counts) n += c;
  if (n == 0) return std::nullopt;
  // In integers: ceil(q * n / 100), at least the first call.
  const std::int64_t rank = std::max<std::int64_t>(1, (q * n + 99) / 100);
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= rank) return LatencyBucketUpper(i);
  }
  return LatencyBucketUpper(counts.size() - 1);  // unreachable: seen reaches n
}

LatencyHistogram* GroupLatencies::Find(std::string_view group) {
  internal::MutexLock lock(&mu_);
  auto it = groups_.find(group);
  if (it != groups_.end()) return it->second.get();
  // Bounded: a flood of new groups (a provider taken from the path) shares
  // one histogram.
  if (groups_.size() >= kMaxGroups) group = kOtherGroup;
  auto [at, added] = groups_.try_emplace(std::string(group));
  if (added) at->second = std::make_unique<LatencyHistogram>();
  return at->second.get();
}

void GroupLatencies::ForEach(
    const std::function<void(const std::string&, const LatencyCounts&)>& fn) const {
  std::map<std::string, LatencyHistogram*> all;
  {
    internal::MutexLock lock(&mu_);
    for (const auto& [group, h] : groups_) all.emplace(group, h.get());
  }
  // Read outside the lock: the histograms are never freed, and a call
  // recorded while they are read is counted at the next tick.
  LatencyCounts counts;
  for (const auto& [group, h] : all) {
    for (std::size_t i = 0; i < kLatencyBuckets; ++i) {
      counts[i] = h->counts[i].load(std::memory_order_relaxed);
    }
    fn(group, counts);
  }
}

std::string_view GroupLatencies::GroupOfKey(std::string_view key) {
  static constexpr std::string_view kPrefix = "provider:";
  if (key.substr(0, kPrefix.size()) != kPrefix) return kOtherGroup;
  const std::string_view rest = key.substr(kPrefix.size());
  const std::size_t p = rest.find(':');
  const std::size_t w = p == std::string_view::npos ? p : rest.find(':', p + 1);
  if (w == std::string_view::npos) return kOtherGroup;
  return rest.substr(0, w);
}

}  // namespace fusebox::gateway
