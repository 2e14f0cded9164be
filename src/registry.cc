#include "fusebox/registry.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"

namespace fusebox {
namespace {

constexpr std::size_t kShards = 16;

// Transparent hashing so that a hit looks up a string_view without building a
// std::string.
struct KeyHash {
  using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard's name.
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace

std::string_view RegistryEventKindName(RegistryEvent::Kind kind) noexcept {
  switch (kind) {
    case RegistryEvent::Kind::kCreated:
      return "created";
    case RegistryEvent::Kind::kEvictedIdle:
      return "evicted_idle";
    case RegistryEvent::Kind::kEvictedLru:
      return "evicted_lru";
    case RegistryEvent::Kind::kCapacityExceeded:
      return "capacity_exceeded";
    case RegistryEvent::Kind::kRemoved:
      return "removed";
  }
  return "unknown";
}

struct Registry::Entry {
  explicit Entry(std::shared_ptr<CircuitBreaker> b, TimePoint now)
      : breaker(std::move(b)), last_used_ns(now.time_since_epoch().count()) {}
  std::shared_ptr<CircuitBreaker> breaker;
  // Written on every hit with a relaxed store (no ordering needed: it only
  // ranks entries for eviction), read by sweeps.
  std::atomic<Duration::rep> last_used_ns;
};

struct Registry::Shard {
  mutable internal::Mutex mu;
  std::unordered_map<std::string, Entry, KeyHash, std::equal_to<>> map FUSEBOX_GUARDED_BY(mu);
};

// Events gathered under the locks and emitted after them, with the keys they
// point to and the breakers dropped (destroyed outside the locks too).
struct Registry::EventBatch {
  std::vector<RegistryEvent> events;
  std::deque<std::string> keys;  // A deque: push_back keeps earlier strings in place.
  std::vector<std::shared_ptr<CircuitBreaker>> graveyard;

  void Add(RegistryEvent::Kind kind, std::string key, std::size_t size) {
    keys.push_back(std::move(key));
    events.push_back(RegistryEvent{kind, keys.back(), size});
  }
};

struct Registry::Impl {
  Shard shards[kShards];
  std::atomic<std::size_t> size{0};
  std::atomic<Duration::rep> last_sweep_ns{0};
  // Do not rescan for LRU victims until the registry holds this many (set
  // after a scan that found too few evictable breakers).
  std::atomic<std::size_t> next_capacity_scan{0};
  internal::Mutex sweep_mu;  // One sweep at a time.
  mutable internal::Mutex configs_mu;
  std::map<std::string, CircuitBreakerConfig, std::less<>> configs FUSEBOX_GUARDED_BY(configs_mu);
};

namespace {

// Evictable: nobody but the registry holds it, and it remembers nothing that
// dropping it would lose: CLOSED with a clean window and no override; or OPEN
// with a wait that ended more than `idle` ago (OPEN ends lazily, so a tripped
// breaker nobody calls again would otherwise stay forever; by then what it
// knew is stale, and a new breaker starts CLOSED).
bool Evictable(const std::shared_ptr<CircuitBreaker>& b, TimePoint now, Duration idle) {
  if (b.use_count() != 1) return false;
  if (b->state() == State::kOpen) {
    const std::optional<TimePoint> until = b->metrics().retry_at;
    return until && *until <= now - idle;
  }
  return b->IsQuiescent();
}

}  // namespace

Result<std::unique_ptr<Registry>> Registry::Create(RegistryOptions options) {
  if (options.max_breakers < 1) {
    return Status::InvalidArgument("max_breakers must be >= 1, got 0");
  }
  if (options.idle_timeout <= Duration::zero()) {
    return Status::InvalidArgument("idle_timeout must be > 0");
  }
  if (options.sweep_interval <= Duration::zero()) {
    return Status::InvalidArgument("sweep_interval must be > 0");
  }
  Status s = options.default_config.Validate();
  if (!s.ok()) return Status::InvalidArgument("default_config: " + std::string(s.message()));
  return std::unique_ptr<Registry>(new Registry(std::move(options)));
}

Registry::Registry(RegistryOptions options)
    : clock_(options.clock != nullptr ? *options.clock : SystemClock()),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>()) {
  internal::MutexLock lock(&impl_->configs_mu);
  impl_->configs.emplace("default", options_.default_config);
  impl_->last_sweep_ns.store(clock_.CoarseNow().time_since_epoch().count(),
                             std::memory_order_relaxed);
}

Registry::~Registry() = default;

Status Registry::AddConfig(std::string name, CircuitBreakerConfig config) {
  if (name.empty()) return Status::InvalidArgument("config name must not be empty");
  Status s = config.Validate();
  if (!s.ok()) return Status::InvalidArgument("config '" + name + "': " + std::string(s.message()));
  internal::MutexLock lock(&impl_->configs_mu);
  impl_->configs.insert_or_assign(std::move(name), std::move(config));
  return Status();
}

Registry::Shard& Registry::ShardFor(std::string_view key) const {
  return impl_->shards[KeyHash{}(key) % kShards];
}

Result<std::shared_ptr<CircuitBreaker>> Registry::Get(std::string_view key,
                                                      std::string_view config_name) {
  // The coarse clock (~3 ns) is plenty to rank entries by last use and to
  // notice that a minute has passed since the last sweep.
  const TimePoint now = clock_.CoarseNow();
  const Duration::rep now_ns = now.time_since_epoch().count();
  Shard& shard = ShardFor(key);
  {
    std::shared_ptr<CircuitBreaker> hit;
    {
      internal::MutexLock lock(&shard.mu);
      auto it = shard.map.find(key);
      if (it != shard.map.end()) {
        it->second.last_used_ns.store(now_ns, std::memory_order_relaxed);
        hit = it->second.breaker;
      }
    }
    if (hit) {
      // After the lookup: the key just asked for is fresh and held, so the
      // sweep cannot drop it.
      MaybeSweep(now);
      return hit;
    }
  }
  MaybeSweep(now);
  if (key.empty()) return Status::InvalidArgument("breaker key must not be empty");
  CircuitBreakerConfig config;
  {
    internal::MutexLock lock(&impl_->configs_mu);
    auto it = impl_->configs.find(config_name);
    if (it == impl_->configs.end()) {
      return Status::InvalidArgument("no breaker config named '" + std::string(config_name) + "'");
    }
    config = it->second;
  }
  std::shared_ptr<CircuitBreaker> breaker;
  std::size_t size = 0;
  {
    // Created under the shard lock so that concurrent first Gets of one key
    // build one breaker and report one kCreated.
    internal::MutexLock lock(&shard.mu);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) return it->second.breaker;
    auto created = CircuitBreaker::Create(std::string(key), std::move(config), clock_);
    if (!created) return std::move(created).error();  // Cannot happen: templates are validated.
    breaker = std::shared_ptr<CircuitBreaker>(std::move(*created));
    if (options_.on_create) options_.on_create(*breaker);
    shard.map.try_emplace(std::string(key), breaker, now);
    size = impl_->size.fetch_add(1, std::memory_order_relaxed) + 1;
  }
  Emit(RegistryEvent{RegistryEvent::Kind::kCreated, key, size});
  if (size > options_.max_breakers &&
      size >= impl_->next_capacity_scan.load(std::memory_order_relaxed)) {
    EventBatch batch;
    {
      internal::MutexLock sweep(&impl_->sweep_mu);
      SweepLocked(now, batch);
    }
    Emit(batch);
  }
  return breaker;
}

std::shared_ptr<CircuitBreaker> Registry::Find(std::string_view key) const {
  Shard& shard = ShardFor(key);
  internal::MutexLock lock(&shard.mu);
  auto it = shard.map.find(key);
  return it == shard.map.end() ? nullptr : it->second.breaker;
}

bool Registry::Remove(std::string_view key) {
  std::shared_ptr<CircuitBreaker> dropped;  // Destroyed outside the lock.
  std::size_t size = 0;
  {
    Shard& shard = ShardFor(key);
    internal::MutexLock lock(&shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return false;
    dropped = std::move(it->second.breaker);
    shard.map.erase(it);
    size = impl_->size.fetch_sub(1, std::memory_order_relaxed) - 1;
  }
  Emit(RegistryEvent{RegistryEvent::Kind::kRemoved, key, size});
  return true;
}

std::size_t Registry::size() const { return impl_->size.load(std::memory_order_relaxed); }

void Registry::ForEach(const std::function<void(const std::string&, CircuitBreaker&)>& fn) const {
  std::vector<std::pair<std::string, std::shared_ptr<CircuitBreaker>>> snapshot;
  snapshot.reserve(size());
  for (Shard& shard : impl_->shards) {
    internal::MutexLock lock(&shard.mu);
    for (const auto& [key, entry] : shard.map) snapshot.emplace_back(key, entry.breaker);
  }
  for (auto& [key, breaker] : snapshot) fn(key, *breaker);
}

std::size_t Registry::Sweep() {
  const TimePoint now = clock_.CoarseNow();
  impl_->last_sweep_ns.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  EventBatch batch;
  std::size_t dropped = 0;
  {
    internal::MutexLock sweep(&impl_->sweep_mu);
    dropped = SweepLocked(now, batch);
  }
  Emit(batch);
  return dropped;
}

void Registry::MaybeSweep(TimePoint now) {
  const Duration::rep now_ns = now.time_since_epoch().count();
  Duration::rep last = impl_->last_sweep_ns.load(std::memory_order_relaxed);
  if (now_ns - last < options_.sweep_interval.count()) return;
  // One caller per interval wins the sweep; the others go on at once.
  if (!impl_->last_sweep_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed))
    return;
  if (!impl_->sweep_mu.TryLock()) return;
  EventBatch batch;
  SweepLocked(now, batch);
  impl_->sweep_mu.Unlock();
  Emit(batch);
}

std::size_t Registry::SweepLocked(TimePoint now, EventBatch& batch) {
  const Duration::rep now_ns = now.time_since_epoch().count();
  const Duration::rep idle_ns = options_.idle_timeout.count();
  std::size_t dropped = 0;
  struct Candidate {
    Duration::rep last_used;
    std::size_t shard;
    std::string key;
  };
  std::vector<Candidate> candidates;

  // Idle pass, collecting LRU candidates on the way.
  for (std::size_t i = 0; i < kShards; ++i) {
    Shard& shard = impl_->shards[i];
    internal::MutexLock lock(&shard.mu);
    for (auto it = shard.map.begin(); it != shard.map.end();) {
      const Duration::rep last = it->second.last_used_ns.load(std::memory_order_relaxed);
      const bool evictable = Evictable(it->second.breaker, now, options_.idle_timeout);
      if (evictable && now_ns - last >= idle_ns) {
        std::string key = it->first;
        batch.graveyard.push_back(std::move(it->second.breaker));
        it = shard.map.erase(it);
        ++dropped;
        const std::size_t size = impl_->size.fetch_sub(1, std::memory_order_relaxed) - 1;
        batch.Add(RegistryEvent::Kind::kEvictedIdle, std::move(key), size);
        continue;
      }
      if (evictable) candidates.push_back(Candidate{last, i, it->first});
      ++it;
    }
  }

  // LRU pass: beyond max_breakers, drop the least recently used evictable
  // breakers. Above 64 breakers it frees a little more than needed (1/64 of
  // the bound) so that a registry at its bound does not scan on every insert.
  const std::size_t max = options_.max_breakers;
  std::size_t size = impl_->size.load(std::memory_order_relaxed);
  if (size > max) {
    const std::size_t target = max - max / 64;
    std::sort(candidates.begin(), candidates.end(),
              [](const Candidate& a, const Candidate& b) { return a.last_used < b.last_used; });
    for (const Candidate& c : candidates) {
      if (impl_->size.load(std::memory_order_relaxed) <= target) break;
      Shard& shard = impl_->shards[c.shard];
      internal::MutexLock lock(&shard.mu);
      auto it = shard.map.find(c.key);
      if (it == shard.map.end() || !Evictable(it->second.breaker, now, options_.idle_timeout))
        continue;
      batch.graveyard.push_back(std::move(it->second.breaker));
      shard.map.erase(it);
      ++dropped;
      const std::size_t now_size = impl_->size.fetch_sub(1, std::memory_order_relaxed) - 1;
      batch.Add(RegistryEvent::Kind::kEvictedLru, c.key, now_size);
    }
    size = impl_->size.load(std::memory_order_relaxed);
    if (size > max) {
      // Every remaining breaker is protected: grow, say so, and do not rescan
      // until the registry has grown by the slack again.
      impl_->next_capacity_scan.store(size + std::max<std::size_t>(1, max / 64),
                                      std::memory_order_relaxed);
      batch.Add(RegistryEvent::Kind::kCapacityExceeded, std::string(), size);
    } else {
      impl_->next_capacity_scan.store(0, std::memory_order_relaxed);
    }
  }
  return dropped;
}

void Registry::Emit(const RegistryEvent& event) const {
  if (!options_.on_event) return;
  try {
    options_.on_event(event);
  } catch (...) {
    // An event sink must not break the registry.
  }
}

void Registry::Emit(const EventBatch& batch) const {
  for (const RegistryEvent& e : batch.events) Emit(e);
}

}  // namespace fusebox
