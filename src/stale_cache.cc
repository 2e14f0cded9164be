// Snapshot stores, snapshot keys and the stale-if-error reader.

#include "fusebox/stale_cache.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

#include "fusebox/snapshot_store.h"

namespace fusebox {

// --- MemorySnapshotStore ------------------------------------------------------

namespace {

std::size_t Charge(std::string_view key, std::string_view value) {
  return key.size() + value.size();
}

}  // namespace

Result<std::unique_ptr<MemorySnapshotStore>> MemorySnapshotStore::Create(Options options) {
  if (options.clock == nullptr) return Status::InvalidArgument("clock must be set");
  if (options.max_entries < 1) {
    return Status::InvalidArgument("max_entries must be >= 1, got " +
                                   std::to_string(options.max_entries));
  }
  if (options.max_bytes < 1) {
    return Status::InvalidArgument("max_bytes must be >= 1, got " +
                                   std::to_string(options.max_bytes));
  }
  return std::unique_ptr<MemorySnapshotStore>(new MemorySnapshotStore(options));
}

Result<std::optional<Snapshot>> MemorySnapshotStore::Get(std::string_view key) {
  return GetInMemory(key);
}

std::optional<Snapshot> MemorySnapshotStore::GetInMemory(std::string_view key) {
  const TimePoint now = options_.clock->Now();
  internal::MutexLock lock(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  const Entry& entry = *it->second;
  // Another thread may have stored the entry after this thread read the clock.
  const Duration age = std::max(Duration::zero(), now - entry.stored_at);
  return Snapshot{.value = entry.value, .age = age};
}

Status MemorySnapshotStore::Put(std::string_view key, std::string value) {
  return PutAged(key, std::move(value), Duration::zero());
}

Status MemorySnapshotStore::PutAged(std::string_view key, std::string value, Duration age) {
  const TimePoint stored_at = options_.clock->Now() - std::max(Duration::zero(), age);
  const std::size_t charge = Charge(key, value);
  internal::MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) EraseLocked(it);
  if (charge > options_.max_bytes) {
    return Status::InvalidArgument("snapshot of " + std::to_string(charge) +
                                   " bytes exceeds max_bytes " +
                                   std::to_string(options_.max_bytes));
  }
  while (!lru_.empty() &&
         (lru_.size() >= options_.max_entries || bytes_ + charge > options_.max_bytes)) {
    EraseLocked(index_.find(lru_.back().key));
  }
  lru_.push_front(
      Entry{.key = std::string(key), .value = std::move(value), .stored_at = stored_at});
  index_.emplace(lru_.front().key, lru_.begin());
  bytes_ += charge;
  return Status();
}

void MemorySnapshotStore::EraseLocked(Index::iterator it) {
  Lru::iterator entry = it->second;
  bytes_ -= Charge(entry->key, entry->value);
  index_.erase(it);  // Before the entry whose key the index's string_view views.
  lru_.erase(entry);
}

Status MemorySnapshotStore::Erase(std::string_view key) {
  internal::MutexLock lock(&mu_);
  if (auto it = index_.find(key); it != index_.end()) EraseLocked(it);
  return Status();
}

std::size_t MemorySnapshotStore::size() const {
  internal::MutexLock lock(&mu_);
  return lru_.size();
}

std::size_t MemorySnapshotStore::bytes() const {
  internal::MutexLock lock(&mu_);
  return bytes_;
}

// --- TieredSnapshotStore ------------------------------------------------------

Result<std::unique_ptr<TieredSnapshotStore>> TieredSnapshotStore::Create(Options options) {
  if (options.local == nullptr) return Status::InvalidArgument("local must be set");
  if (options.remote == nullptr) return Status::InvalidArgument("remote must be set");
  if (options.local_fresh_for < Duration::zero()) {
    return Status::InvalidArgument("local_fresh_for must be >= 0, got " +
                                   std::to_string(options.local_fresh_for.count()) + " ns");
  }
  return std::unique_ptr<TieredSnapshotStore>(new TieredSnapshotStore(options));
}

template <typename RemoteGet>
Result<std::optional<Snapshot>> TieredSnapshotStore::GetThrough(std::string_view key,
                                                                RemoteGet&& remote_get) {
  auto count = [](std::atomic<std::uint64_t>& n) { n.fetch_add(1, std::memory_order_relaxed); };
  std::optional<Snapshot> local = options_.local->GetInMemory(key);
  if (local && local->age <= options_.local_fresh_for) {
    count(counters_.local_hits);
    return local;
  }
  Result<std::optional<Snapshot>> remote = remote_get();
  if (!remote) {
    count(counters_.remote_errors);
    if (remote.error().code() == StatusCode::kTimeout) count(counters_.remote_timeouts);
    if (!local) return remote;
    count(counters_.local_on_remote_error);
    return local;
  }
  if (*remote && (!local || (*remote)->age < local->age)) {
    count(counters_.remote_hits);
    // A copy too large for the local tier is still served.
    (void)options_.local->PutAged(key, (*remote)->value, (*remote)->age);
    return remote;
  }
  count(local ? counters_.local_hits : counters_.misses);
  return local;
}

Result<std::optional<Snapshot>> TieredSnapshotStore::Get(std::string_view key) {
  return GetThrough(key, [&] { return options_.remote->Get(key); });
}

Result<std::optional<Snapshot>> TieredSnapshotStore::GetWithin(std::string_view key,
                                                               Duration budget) {
  return GetThrough(key, [&] { return options_.remote->GetWithin(key, budget); });
}

std::optional<Snapshot> TieredSnapshotStore::GetInMemory(std::string_view key) {
  return options_.local->GetInMemory(key);
}

Status TieredSnapshotStore::Counted(Status remote_put) {
  if (!remote_put.ok()) counters_.remote_put_errors.fetch_add(1, std::memory_order_relaxed);
  return remote_put;
}

Status TieredSnapshotStore::Put(std::string_view key, std::string value) {
  (void)options_.local->Put(key, value);
  return Counted(options_.remote->Put(key, std::move(value)));
}

Status TieredSnapshotStore::PutWithin(std::string_view key, std::string value, Duration budget) {
  (void)options_.local->Put(key, value);
  return Counted(options_.remote->PutWithin(key, std::move(value), budget));
}

Status TieredSnapshotStore::Erase(std::string_view key) {
  (void)options_.local->Erase(key);
  return options_.remote->Erase(key);
}

TieredSnapshotStore::Stats TieredSnapshotStore::stats() const {
  auto get = [](const std::atomic<std::uint64_t>& n) { return n.load(std::memory_order_relaxed); };
  return Stats{.local_hits = get(counters_.local_hits),
               .remote_hits = get(counters_.remote_hits),
               .misses = get(counters_.misses),
               .remote_errors = get(counters_.remote_errors),
               .remote_timeouts = get(counters_.remote_timeouts),
               .local_on_remote_error = get(counters_.local_on_remote_error),
               .remote_put_errors = get(counters_.remote_put_errors)};
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

  // A store that cannot answer is not a miss, but the call still decides:
  // one per key (merged below), and the caller is told why.
  std::optional<Snapshot> snapshot;
  Status store_error;
  if (Result<std::optional<Snapshot>> got = options_.store->Get(key); got) {
    snapshot = std::move(*got);
  } else {
    store_error = std::move(got).error();
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
  if (r) {
    return CachedRead{
        .value = std::move(*r), .source = ReadSource::kCall, .store_error = std::move(store_error)};
  }

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
