// Snapshot stores, snapshot keys and the stale-if-error reader.

#include "fusebox/stale_cache.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "fusebox/snapshot_store.h"

namespace fusebox {

// --- MemorySnapshotStore ------------------------------------------------------

Result<std::unique_ptr<MemorySnapshotStore>> MemorySnapshotStore::Create(Options options) {
  if (options.clock == nullptr) return Status::InvalidArgument("clock must be set");
  if (options.max_entries < 1) {
    return Status::InvalidArgument("max_entries must be >= 1, got " +
                                   std::to_string(options.max_entries));
  }
  return std::unique_ptr<MemorySnapshotStore>(new MemorySnapshotStore(options));
}

Result<std::optional<Snapshot>> MemorySnapshotStore::Get(std::string_view key) {
  const TimePoint now = options_.clock->Now();
  internal::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::optional<Snapshot>();
  lru_.splice(lru_.begin(), lru_, it->second);
  const Entry& entry = *it->second;
  // Another thread may have stored the entry after this thread read the clock.
  const Duration age = std::max(Duration::zero(), now - entry.stored_at);
  return std::optional<Snapshot>(Snapshot{.value = entry.value, .age = age});
}

Status MemorySnapshotStore::Put(std::string_view key, std::string value) {
  const TimePoint now = options_.clock->Now();
  internal::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    it->second->value = std::move(value);
    it->second->stored_at = now;
    lru_.splice(lru_.begin(), lru_, it->second);
    return Status();
  }
  if (lru_.size() >= options_.max_entries) {
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
  lru_.push_front(Entry{.key = std::string(key), .value = std::move(value), .stored_at = now});
  index_.emplace(lru_.front().key, lru_.begin());
  return Status();
}

Status MemorySnapshotStore::Erase(std::string_view key) {
  internal::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return Status();
  Lru::iterator entry = it->second;
  index_.erase(it);  // Before the entry whose key the index's string_view views.
  lru_.erase(entry);
  return Status();
}

std::size_t MemorySnapshotStore::size() const {
  internal::MutexLock lock(&mu_);
  return lru_.size();
}

// --- SnapshotKey --------------------------------------------------------------

namespace {

constexpr std::uint64_t kFnvOffset = 14695981039346656037ull;
constexpr std::uint64_t kFnvPrime = 1099511628211ull;

void HashBytes(std::uint64_t& h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
}

// Length-prefixed, so that ("a", "bc") and ("ab", "c") hash differently.
void HashField(std::uint64_t& h, std::string_view field) {
  HashBytes(h, std::to_string(field.size()));
  HashBytes(h, ":");
  HashBytes(h, field);
}

}  // namespace

std::string SnapshotKey(std::string_view base,
                        std::vector<std::pair<std::string, std::string>> params) {
  std::sort(params.begin(), params.end());
  std::uint64_t h = kFnvOffset;
  for (const auto& [name, value] : params) {
    HashField(h, name);
    HashField(h, value);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string key(base);
  key += "#p=";
  for (int shift = 60; shift >= 0; shift -= 4) key += kHex[(h >> shift) & 0xF];
  return key;
}

// --- StaleIfErrorReader -------------------------------------------------------

bool DefaultMayServeStale(const Status& status) noexcept {
  switch (status.code()) {
    case StatusCode::kUnavailable:
    case StatusCode::kCircuitOpen:
    case StatusCode::kRateLimited:
    case StatusCode::kTimeout:
      return true;
    default:
      return false;
  }
}

Result<std::unique_ptr<StaleIfErrorReader>> StaleIfErrorReader::Create(Options options) {
  if (options.store == nullptr) return Status::InvalidArgument("store must be set");
  if (options.fresh_for < Duration::zero()) {
    return Status::InvalidArgument("fresh_for must be >= 0, got " +
                                   std::to_string(options.fresh_for.count()) + " ns");
  }
  if (options.max_stale_age < options.fresh_for) {
    return Status::InvalidArgument("max_stale_age must be >= fresh_for, got " +
                                   std::to_string(options.max_stale_age.count()) + " ns");
  }
  if (!options.may_serve_stale) options.may_serve_stale = DefaultMayServeStale;
  return std::unique_ptr<StaleIfErrorReader>(new StaleIfErrorReader(std::move(options)));
}

Result<CachedRead> StaleIfErrorReader::Read(std::string_view key, const Fetch& fetch,
                                            CallKind kind) {
  if (kind == CallKind::kWrite) {
    Result<std::string> r = fetch();
    if (!r) return std::move(r).error();
    return CachedRead{.value = std::move(*r), .source = ReadSource::kCall};
  }

  // A store that cannot answer counts as a miss: the call decides.
  std::optional<Snapshot> snapshot;
  if (Result<std::optional<Snapshot>> got = options_.store->Get(key); got) {
    snapshot = std::move(*got);
  }
  if (snapshot && snapshot->age <= options_.fresh_for) {
    return CachedRead{.value = std::move(snapshot->value),
                      .age = snapshot->age,
                      .source = ReadSource::kFreshSnapshot};
  }

  // The miss path: one call per key at a time; the leader refreshes the
  // snapshot so that merged callers do not write it again.
  Result<std::string> r = flight_.Do(key, [&]() -> Result<std::string> {
    Result<std::string> fetched = fetch();
    // A failed Put loses a snapshot, not the answer.
    if (fetched) (void)options_.store->Put(key, *fetched);
    return fetched;
  });
  if (r) return CachedRead{.value = std::move(*r), .source = ReadSource::kCall};

  if (snapshot && snapshot->age <= options_.max_stale_age && options_.may_serve_stale(r.error())) {
    return CachedRead{.value = std::move(snapshot->value),
                      .stale = true,
                      .age = snapshot->age,
                      .source = ReadSource::kStaleSnapshot,
                      .hidden_error = r.error()};
  }
  return std::move(r).error();
}

}  // namespace fusebox
