#include "fusebox/registry.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "hazard.h"
#include "registry_hash.h"
#include "registry_table.h"

namespace fusebox {

std::uint64_t RegistryKey::Hash(std::string_view key) noexcept { return internal::HashKey(key); }

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
    case RegistryEvent::Kind::kOverflow:
      return "overflow";
  }
  return "unknown";
}

using registry_internal::Links;
using registry_internal::List;
using registry_internal::Table;

// One breaker and its key, allocated in one block (the key's bytes follow the
// struct), so that a probe that matches the hash compares bytes in the same
// cache lines.
struct Registry::Entry : Links {
  Entry(std::uint64_t h, std::size_t n, std::shared_ptr<CircuitBreaker> b, Duration::rep now)
      : hash(h),
        serial(next_serial_.fetch_add(1, std::memory_order_relaxed) + 1),
        key_size(n),
        breaker(std::move(b)),
        last_used_ns(now),
        queued_ns(now) {}

  static Entry* New(std::uint64_t hash, std::string_view key, std::shared_ptr<CircuitBreaker> b,
                    Duration::rep now) {
    void* mem = ::operator new(sizeof(Entry) + key.size());
    Entry* e = new (mem) Entry(hash, key.size(), std::move(b), now);
    std::memcpy(e->key_data(), key.data(), key.size());
    return e;
  }
  static void Delete(Entry* e) noexcept {
    e->~Entry();
    ::operator delete(e);
  }
  static Entry* From(Links* l) noexcept { return static_cast<Entry*>(l); }

  // A use at `now`: written only when the tick has moved, so that threads
  // sharing a hot key do not take turns owning its cache line for nothing.
  void Touch(Duration::rep now) noexcept {
    if (last_used_ns.load(std::memory_order_relaxed) != now) {
      last_used_ns.store(now, std::memory_order_relaxed);
    }
  }

  char* key_data() noexcept { return reinterpret_cast<char*>(this + 1); }
  std::string_view key() const noexcept {
    return {reinterpret_cast<const char*>(this + 1), key_size};
  }
  bool Is(std::uint64_t h, std::string_view k) const noexcept {
    return hash == h && key_size == k.size() &&
           internal::SameBytes(reinterpret_cast<const char*>(this + 1), k.data(), k.size());
  }

  const std::uint64_t hash;
  // Unique among the entries of every registry of the process, ever (never
  // 0): a RegistryKey's hint names an entry by it, so that an entry freed and
  // another one allocated at its address are never taken for each other.
  const std::uint64_t serial;
  const std::size_t key_size;
  std::shared_ptr<CircuitBreaker> breaker;
  // Written by hits with a relaxed store when the coarse clock has moved (no
  // ordering needed: it only ranks entries for eviction).
  std::atomic<Duration::rep> last_used_ns;
  // last_used_ns when the entry took its place in the LRU queue; a larger
  // last_used_ns means it was used since. Guarded by Impl::mu.
  Duration::rep queued_ns;
  bool set_aside = false;  // in Impl::set_aside rather than the queue; Impl::mu

 private:
  static inline std::atomic<std::uint64_t> next_serial_{0};
};

// Events gathered under the locks and emitted after them, with the keys they
// point to and the breakers dropped (destroyed outside the locks too).
struct Registry::EventBatch {
  std::vector<RegistryEvent> events;
  std::deque<std::string> keys;  // A deque: push_back keeps earlier strings in place.
  std::vector<std::shared_ptr<CircuitBreaker>> graveyard;

  void Add(RegistryEvent::Kind kind, std::string key, std::size_t size, std::uint64_t count = 0) {
    keys.push_back(std::move(key));
    events.push_back(RegistryEvent{kind, keys.back(), size, count});
  }
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

// What a lookup lends: the breaker and the hazard slot naming its entry, or
// (an overflow breaker, or no slot free) a shared_ptr.
struct Registry::Lent {
  CircuitBreaker* breaker = nullptr;
  internal::HazardSlot* hazard = nullptr;  // names `entry`
  Entry* entry = nullptr;
  std::shared_ptr<CircuitBreaker> owned;  // when hazard is null
};

struct Registry::Impl {
  explicit Impl(std::atomic<void*>* table_array) : table(table_array) {}

  // Read without a lock (Table::FindShared), written under mu.
  Table<Entry> table;
  std::atomic<std::size_t> size{0};
  std::atomic<Duration::rep> last_sweep_ns{0};
  std::atomic<std::uint64_t> overflowed{0};
  std::atomic<std::uint64_t> lru_visits{0};
  std::atomic<std::uint64_t> lru_runs{0};

  // Insertions, removals, sweeps: one at a time.
  internal::Mutex mu;
  // Held (after mu) only while the table is being changed: Find() waits for
  // no more than that on a miss, never for a breaker being created.
  internal::Mutex table_mu;
  // Every entry not set aside, least recently queued at the back.
  List queue FUSEBOX_GUARDED_BY(mu);
  // Protected entries found at the back of the queue; the next idle sweep
  // puts them back.
  List set_aside FUSEBOX_GUARDED_BY(mu);
  // Report kCapacityExceeded again once the registry holds this many (0: at
  // the next insertion beyond max_breakers).
  std::size_t next_capacity_report FUSEBOX_GUARDED_BY(mu) = 0;
  std::map<std::string, std::shared_ptr<CircuitBreaker>, std::less<>> overflow
      FUSEBOX_GUARDED_BY(mu);
  std::uint64_t overflowed_unreported FUSEBOX_GUARDED_BY(mu) = 0;
  Duration::rep last_overflow_report_ns FUSEBOX_GUARDED_BY(mu) = 0;
  bool overflow_reported FUSEBOX_GUARDED_BY(mu) = false;

  // Entries Remove() unlinked while a thread still had them in a hazard
  // slot: freed by a later writer once no slot names them.
  std::vector<Entry*> zombies FUSEBOX_GUARDED_BY(mu);
  // Scratch for CollectHazards() and EvictLru().
  std::vector<const void*> hazards FUSEBOX_GUARDED_BY(mu);
  std::vector<Entry*> scratch FUSEBOX_GUARDED_BY(mu);

  mutable internal::Mutex configs_mu;
  std::map<std::string, CircuitBreakerConfig, std::less<>> configs FUSEBOX_GUARDED_BY(configs_mu);

  // Frees an entry already erased from its shard's table: its breaker goes
  // to the batch's graveyard, its event to the batch.
  void Drop(Entry* e, RegistryEvent::Kind kind, EventBatch& batch) {
    mu.AssertHeld();
    e->Unlink();
    batch.graveyard.push_back(std::move(e->breaker));
    const std::size_t now_size = size.fetch_sub(1, std::memory_order_relaxed) - 1;
    batch.Add(kind, std::string(e->key()), now_size);
    Entry::Delete(e);
  }

  // Takes `candidates` (evictable entries of the table) out of the table and,
  // once every thread is sure to see that (the heavy barrier), puts back
  // those that a hazard slot names (a lookup in progress, a breaker lent)
  // or that stopped being evictable meanwhile. `candidates` keeps the
  // others, in order: out of every reader's reach, for Drop().
  void Withdraw(std::vector<Entry*>& candidates, TimePoint now, Duration idle) {
    mu.AssertHeld();
    if (candidates.empty()) return;
    // Held throughout, so that Find() never misses one that goes back.
    internal::MutexLock lock(&table_mu);
    for (Entry* e : candidates) table.Erase(e);
    internal::HeavyBarrier();
    internal::CollectHazards(hazards);
    std::size_t out = 0;
    for (Entry* e : candidates) {
      if (!std::binary_search(hazards.begin(), hazards.end(), e) &&
          Evictable(e->breaker, now, idle)) {
        candidates[out++] = e;
      } else {
        table.Insert(e);  // no allocation: the table held it a moment ago
      }
    }
    candidates.resize(out);
  }

  // Frees the entries Remove() left to a later writer once no hazard slot
  // names them; their breakers go to the batch's graveyard.
  void Reap(EventBatch& batch) {
    mu.AssertHeld();
    if (zombies.empty()) return;
    internal::CollectHazards(hazards);
    std::size_t out = 0;
    for (Entry* e : zombies) {
      if (std::binary_search(hazards.begin(), hazards.end(), e)) {
        zombies[out++] = e;
      } else {
        batch.graveyard.push_back(std::move(e->breaker));
        Entry::Delete(e);
      }
    }
    zombies.resize(out);
  }

  // Under mu, so that no writer can unlink `e` before the hazard slot names
  // it: lends its breaker through a slot, or a shared_ptr if none is free.
  static Lent LendLocked(Entry* e) {
    if (internal::HazardSlot* hazard = internal::FreeHazardSlot()) {
      hazard->store(e, std::memory_order_relaxed);
      return Lent{e->breaker.get(), hazard, e, nullptr};
    }
    return Lent{e->breaker.get(), nullptr, nullptr, e->breaker};
  }

  // A lent breaker as a shared_ptr; gives the slot back.
  static std::shared_ptr<CircuitBreaker> Share(Lent& lent) {
    if (lent.hazard == nullptr) return std::move(lent.owned);
    std::shared_ptr<CircuitBreaker> breaker = lent.entry->breaker;
    lent.hazard->store(nullptr, std::memory_order_release);
    return breaker;
  }

  static BorrowedBreaker Lend(Lent& lent) {
    if (lent.hazard == nullptr) return BorrowedBreaker(std::move(lent.owned));
    return BorrowedBreaker(lent.breaker, lent.hazard);
  }

  ~Impl() {
    table.ForEach([](Entry* e) { Entry::Delete(e); });
    for (Entry* e : zombies) Entry::Delete(e);
  }
};

Result<std::unique_ptr<Registry>> Registry::Create(RegistryOptions options) {
  if (options.max_breakers < 1) {
    return Status::InvalidArgument("max_breakers must be >= 1, got 0");
  }
  if (options.max_breakers_hard == 0) {
    options.max_breakers_hard =
        options.max_breakers > SIZE_MAX / 4 ? SIZE_MAX : 4 * options.max_breakers;
  }
  if (options.max_breakers_hard < options.max_breakers) {
    return Status::InvalidArgument(
        "max_breakers_hard (" + std::to_string(options.max_breakers_hard) +
        ") must be >= max_breakers (" + std::to_string(options.max_breakers) + ")");
  }
  if (options.idle_timeout <= Duration::zero()) {
    return Status::InvalidArgument("idle_timeout must be > 0");
  }
  if (options.sweep_interval <= Duration::zero()) {
    return Status::InvalidArgument("sweep_interval must be > 0");
  }
  Status s = options.default_config.Validate();
  if (!s.ok()) return Status::InvalidArgument("default_config: " + std::string(s.message()));
  // Before any lookup of any registry: readers and writers must agree on it.
  internal::EnableAsymmetricBarriers();
  return std::unique_ptr<Registry>(new Registry(std::move(options)));
}

Registry::Registry(RegistryOptions options)
    : clock_(options.clock != nullptr ? *options.clock : SystemClock()),
      system_clock_(internal::IsSystemClock(clock_)),
      options_(std::move(options)),
      impl_(std::make_unique<Impl>(&table_array_)) {
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

Result<std::shared_ptr<CircuitBreaker>> Registry::Get(std::string_view key,
                                                      std::string_view config_name) {
  return GetHashed(internal::HashKey(key), key, config_name);
}

Result<std::shared_ptr<CircuitBreaker>> Registry::Get(const RegistryKey& key,
                                                      std::string_view config_name) {
  return GetHashed(key.hash(), key.key(), config_name, &key);
}

// The two Borrow()s keep a hit in one frame (hash, probe, compare and the
// lent breaker inline); a miss, rare, goes out of line (BorrowMissed()).
Result<BorrowedBreaker> Registry::Borrow(std::string_view key, std::string_view config_name,
                                         TimePoint coarse_now) {
  const std::uint64_t hash = internal::HashKey(key);
  if (internal::HazardSlot* hazard = internal::FreeHazardSlot()) [[likely]] {
    if (Entry* e = Hit(hash, key, coarse_now, hazard)) [[likely]] {
      MaybeSweep(coarse_now);
      return BorrowedBreaker(e->breaker.get(), hazard);
    }
  }
  return BorrowMissed(hash, key, coarse_now, config_name);
}

Result<BorrowedBreaker> Registry::Borrow(const RegistryKey& key, std::string_view config_name,
                                         TimePoint coarse_now) {
  if (internal::HazardSlot* hazard = internal::FreeHazardSlot()) [[likely]] {
    if (Entry* e = HintedHit(key, coarse_now, hazard)) [[likely]] {
      MaybeSweep(coarse_now);
      return BorrowedBreaker(e->breaker.get(), hazard);
    }
  }
  return BorrowMissed(key.hash(), key.key(), coarse_now, config_name);
}

// A hit: the entry, published in a slot of this thread's, and touched.
[[gnu::always_inline]] inline Registry::Entry* Registry::Hit(std::uint64_t hash,
                                                             std::string_view key, TimePoint now,
                                                             internal::HazardSlot* hazard) const {
  if (hazard == nullptr) return nullptr;
  std::size_t slot = 0;
  Entry* e = Table<Entry>::FindShared(table_array_, hash, key, *hazard, &slot);
  if (e != nullptr) e->Touch(now.time_since_epoch().count());
  return e;
}

// Hit() for a RegistryKey: first where that key was found last. The slot
// must still hold the entry (checked as FindShared() checks it) and the
// entry must be the one the hint names (its serial; never reused, so an
// entry allocated where a dropped one was is not taken for it). The three
// hint fields may come from different lookups of the same key: each is
// checked on its own.
[[gnu::always_inline]] inline Registry::Entry* Registry::HintedHit(
    const RegistryKey& key, TimePoint now, internal::HazardSlot* hazard) const {
  if (hazard == nullptr) return nullptr;
  if (auto* named =
          static_cast<Entry*>(const_cast<void*>(key.hint_entry_.load(std::memory_order_relaxed)))) {
    if (Entry* e = Table<Entry>::FindAt(
            table_array_, key.hint_slot_.load(std::memory_order_relaxed), named, *hazard)) {
      if (e->serial == key.hint_serial_.load(std::memory_order_relaxed)) [[likely]] {
        e->Touch(now.time_since_epoch().count());
        return e;
      }
      hazard->store(nullptr, std::memory_order_relaxed);
    }
  }
  std::size_t slot = 0;
  Entry* e = Table<Entry>::FindShared(table_array_, key.hash(), key.key(), *hazard, &slot);
  if (e == nullptr) return nullptr;
  key.hint_slot_.store(slot, std::memory_order_relaxed);
  key.hint_serial_.store(e->serial, std::memory_order_relaxed);
  key.hint_entry_.store(e, std::memory_order_relaxed);
  e->Touch(now.time_since_epoch().count());
  return e;
}

// HintedHit() for two keys, each only where its hint says (a key without a
// hint, or not there, sends the caller to the one-key path).
[[gnu::always_inline]] inline bool Registry::HintedHits(const RegistryKey& first,
                                                        const RegistryKey& second, TimePoint now,
                                                        internal::HazardSlot& first_hazard,
                                                        internal::HazardSlot& second_hazard,
                                                        Entry*& first_entry,
                                                        Entry*& second_entry) const {
  auto* e1 =
      static_cast<Entry*>(const_cast<void*>(first.hint_entry_.load(std::memory_order_relaxed)));
  auto* e2 =
      static_cast<Entry*>(const_cast<void*>(second.hint_entry_.load(std::memory_order_relaxed)));
  if (e1 == nullptr || e2 == nullptr) return false;
  if (!Table<Entry>::FindTwoAt(table_array_, first.hint_slot_.load(std::memory_order_relaxed), e1,
                               first_hazard, second.hint_slot_.load(std::memory_order_relaxed), e2,
                               second_hazard)) {
    return false;
  }
  if (e1->serial != first.hint_serial_.load(std::memory_order_relaxed) ||
      e2->serial != second.hint_serial_.load(std::memory_order_relaxed)) [[unlikely]] {
    first_hazard.store(nullptr, std::memory_order_relaxed);
    second_hazard.store(nullptr, std::memory_order_relaxed);
    return false;
  }
  e1->Touch(now.time_since_epoch().count());
  e2->Touch(now.time_since_epoch().count());
  first_entry = e1;
  second_entry = e2;
  return true;
}

Registry::BorrowedPair Registry::BorrowPair(const RegistryKey& first, std::string_view first_config,
                                            const RegistryKey& second,
                                            std::string_view second_config, TimePoint coarse_now) {
  internal::HazardSlot* h1 = nullptr;
  internal::HazardSlot* h2 = nullptr;
  Entry* e1 = nullptr;
  Entry* e2 = nullptr;
  if (internal::FreeHazardSlots(h1, h2) && HintedHits(first, second, coarse_now, *h1, *h2, e1, e2))
      [[likely]] {
    // After both lookups: both keys are fresh and held, so the sweep cannot
    // drop either.
    MaybeSweep(coarse_now);
    return {BorrowedBreaker(e1->breaker.get(), h1), BorrowedBreaker(e2->breaker.get(), h2)};
  }
  return {Borrow(first, first_config, coarse_now), Borrow(second, second_config, coarse_now)};
}

Result<std::shared_ptr<CircuitBreaker>> Registry::GetHashed(std::uint64_t hash,
                                                            std::string_view key,
                                                            std::string_view config_name,
                                                            const RegistryKey* hinted) {
  // The coarse clock is plenty to rank entries by last use and to notice
  // that a minute has passed since the last sweep.
  const TimePoint now = CoarseNow();
  internal::HazardSlot* hazard = internal::FreeHazardSlot();
  if (Entry* e =
          hinted != nullptr ? HintedHit(*hinted, now, hazard) : Hit(hash, key, now, hazard)) {
    std::shared_ptr<CircuitBreaker> breaker = e->breaker;
    hazard->store(nullptr, std::memory_order_release);
    // After the lookup: the key just asked for is fresh and held, so the
    // sweep cannot drop it.
    MaybeSweep(now);
    return breaker;
  }
  Result<Lent> lent = Miss(hash, key, config_name, now);
  if (!lent) return std::move(lent).error();
  return Impl::Share(*lent);
}

Result<BorrowedBreaker> Registry::BorrowMissed(std::uint64_t hash, std::string_view key,
                                               TimePoint now, std::string_view config_name) {
  Result<Lent> lent = Miss(hash, key, config_name, now);
  if (!lent) return std::move(lent).error();
  return Impl::Lend(*lent);
}

Result<Registry::Lent> Registry::Miss(std::uint64_t hash, std::string_view key,
                                      std::string_view config_name, TimePoint now) {
  MaybeSweep(now);
  if (key.empty()) return Status::InvalidArgument("breaker key must not be empty");
  return Insert(hash, key, config_name, now);
}

Result<Registry::Lent> Registry::Insert(std::uint64_t hash, std::string_view key,
                                        std::string_view config_name, TimePoint now) {
  CircuitBreakerConfig config;
  {
    internal::MutexLock lock(&impl_->configs_mu);
    auto it = impl_->configs.find(config_name);
    if (it == impl_->configs.end()) {
      return Status::InvalidArgument("no breaker config named '" + std::string(config_name) + "'");
    }
    config = it->second;
  }
  const Duration::rep now_ns = now.time_since_epoch().count();
  EventBatch batch;
  Lent lent;
  {
    // Created under the registry lock so that concurrent first Gets of one
    // key build one breaker and report one kCreated; published in the table
    // only once on_create ran, so that no reader sees it before.
    internal::MutexLock lock(&impl_->mu);
    impl_->Reap(batch);
    if (Entry* e = impl_->table.Find(hash, key)) {
      // Another thread inserted it meanwhile, or a writer was moving it.
      e->Touch(now_ns);
      return impl_->LendLocked(e);
    }
    std::size_t size = impl_->size.load(std::memory_order_relaxed);
    if (size >= options_.max_breakers) {
      // Make room first: up to two, so that a registry over its bound (after
      // a time when every breaker was protected) comes back down.
      EvictLru(now, options_.max_breakers - 1, 2, batch);
      size = impl_->size.load(std::memory_order_relaxed);
    }
    if (size >= options_.max_breakers_hard) {
      auto it = impl_->overflow.find(config_name);
      if (it == impl_->overflow.end()) {
        it = impl_->overflow.emplace(std::string(config_name), nullptr).first;
      }
      std::shared_ptr<CircuitBreaker>& overflow = it->second;
      if (!overflow) {
        auto created = CircuitBreaker::CreateUnjoined("overflow:" + std::string(config_name),
                                                      std::move(config), clock_);
        if (!created) return std::move(created).error();  // Cannot happen: validated.
        overflow = std::shared_ptr<CircuitBreaker>(std::move(*created));
        if (options_.on_create) options_.on_create(*overflow);
        overflow->JoinFleet();
      }
      impl_->overflowed.fetch_add(1, std::memory_order_relaxed);
      ++impl_->overflowed_unreported;
      if (!impl_->overflow_reported ||
          now_ns - impl_->last_overflow_report_ns >= options_.sweep_interval.count()) {
        impl_->overflow_reported = true;
        impl_->last_overflow_report_ns = now_ns;
        batch.Add(RegistryEvent::Kind::kOverflow, std::string(key), size,
                  impl_->overflowed_unreported);
        impl_->overflowed_unreported = 0;
      }
      lent = Lent{overflow.get(), nullptr, nullptr, overflow};
    } else {
      auto created = CircuitBreaker::CreateUnjoined(std::string(key), std::move(config), clock_);
      if (!created) return std::move(created).error();  // Cannot happen: validated.
      auto breaker = std::shared_ptr<CircuitBreaker>(std::move(*created));
      // Observers first, then the fleet: a transition the fleet's state
      // causes at once (an override in force, read by the store's thread)
      // reaches every observer (issue 16).
      if (options_.on_create) options_.on_create(*breaker);
      breaker->JoinFleet();
      Entry* e = Entry::New(hash, key, std::move(breaker), now_ns);
      {
        internal::MutexLock table_lock(&impl_->table_mu);
        impl_->table.Insert(e);
      }
      impl_->queue.PushFront(e);
      lent = impl_->LendLocked(e);
      size = impl_->size.fetch_add(1, std::memory_order_relaxed) + 1;
      batch.Add(RegistryEvent::Kind::kCreated, std::string(key), size);
      ReportCapacity(size, batch);
    }
  }
  Emit(batch);
  return lent;
}

void Registry::ReportCapacity(std::size_t size, EventBatch& batch) {
  impl_->mu.AssertHeld();
  if (size <= options_.max_breakers) {
    impl_->next_capacity_report = 0;
    return;
  }
  // Every breaker that could have made room was protected: grow, say so,
  // and say it again once the registry has grown by 1/64 of its bound.
  if (size < impl_->next_capacity_report) return;
  impl_->next_capacity_report = size + std::max<std::size_t>(1, options_.max_breakers / 64);
  batch.Add(RegistryEvent::Kind::kCapacityExceeded, std::string(), size);
}

std::size_t Registry::EvictLru(TimePoint now, std::size_t target, std::size_t limit,
                               EventBatch& batch) {
  impl_->mu.AssertHeld();
  impl_->lru_runs.fetch_add(1, std::memory_order_relaxed);
  std::size_t dropped = 0;
  std::uint64_t visits = 0;
  while (dropped < limit && impl_->size.load(std::memory_order_relaxed) > target) {
    Links* back = impl_->queue.back();
    if (back == nullptr) break;  // every breaker is set aside
    Entry* e = Entry::From(back);
    ++visits;
    const Duration::rep last = e->last_used_ns.load(std::memory_order_relaxed);
    if (last > e->queued_ns) {
      // Used since it was queued: a second chance, at the front.
      e->queued_ns = last;
      e->Unlink();
      impl_->queue.PushFront(e);
      continue;
    }
    impl_->scratch.assign(1, e);
    if (Evictable(e->breaker, now, options_.idle_timeout)) {
      impl_->Withdraw(impl_->scratch, now, options_.idle_timeout);
    } else {
      impl_->scratch.clear();
    }
    if (impl_->scratch.empty()) {
      // Protected (or in use): looked at again by the next idle sweep.
      e->Unlink();
      e->set_aside = true;
      impl_->set_aside.PushFront(e);
      continue;
    }
    impl_->Drop(e, RegistryEvent::Kind::kEvictedLru, batch);
    ++dropped;
  }
  impl_->lru_visits.fetch_add(visits, std::memory_order_relaxed);
  return dropped;
}

std::shared_ptr<CircuitBreaker> Registry::Find(std::string_view key) const {
  const std::uint64_t hash = RegistryKey::Hash(key);
  if (internal::HazardSlot* hazard = internal::FreeHazardSlot()) {
    std::size_t slot = 0;
    if (Entry* e = Table<Entry>::FindShared(table_array_, hash, key, *hazard, &slot)) {
      std::shared_ptr<CircuitBreaker> breaker = e->breaker;
      hazard->store(nullptr, std::memory_order_release);
      return breaker;
    }
  }
  // A miss (or a writer moving the entry meanwhile): asked again while no
  // writer changes the table.
  internal::MutexLock lock(&impl_->table_mu);
  Entry* e = impl_->table.Find(hash, key);
  return e == nullptr ? nullptr : e->breaker;
}

bool Registry::Remove(std::string_view key) {
  EventBatch batch;  // Breakers dropped are destroyed outside the lock.
  std::size_t size = 0;
  {
    const std::uint64_t hash = RegistryKey::Hash(key);
    internal::MutexLock lock(&impl_->mu);
    impl_->Reap(batch);
    Entry* e = impl_->table.Find(hash, key);
    if (e == nullptr) return false;
    {
      internal::MutexLock table_lock(&impl_->table_mu);
      impl_->table.Erase(e);
    }
    e->Unlink();
    size = impl_->size.fetch_sub(1, std::memory_order_relaxed) - 1;
    // Dropped whatever its state, but not freed while a thread has it in a
    // hazard slot (a BorrowedBreaker): a later writer frees it.
    internal::HeavyBarrier();
    internal::CollectHazards(impl_->hazards);
    if (std::binary_search(impl_->hazards.begin(), impl_->hazards.end(), e)) {
      impl_->zombies.push_back(e);
    } else {
      batch.graveyard.push_back(std::move(e->breaker));
      Entry::Delete(e);
    }
  }
  Emit(RegistryEvent{RegistryEvent::Kind::kRemoved, key, size});
  return true;
}

std::size_t Registry::size() const { return impl_->size.load(std::memory_order_relaxed); }

RegistryStats Registry::stats() const {
  RegistryStats s;
  s.overflowed = impl_->overflowed.load(std::memory_order_relaxed);
  s.lru_visits = impl_->lru_visits.load(std::memory_order_relaxed);
  s.lru_runs = impl_->lru_runs.load(std::memory_order_relaxed);
  return s;
}

void Registry::ForEach(const std::function<void(const std::string&, CircuitBreaker&)>& fn) const {
  std::vector<std::pair<std::string, std::shared_ptr<CircuitBreaker>>> snapshot;
  snapshot.reserve(size());
  {
    internal::MutexLock lock(&impl_->mu);
    impl_->table.ForEach(
        [&](Entry* e) { snapshot.emplace_back(std::string(e->key()), e->breaker); });
    for (const auto& [name, breaker] : impl_->overflow) {
      snapshot.emplace_back(breaker->name(), breaker);
    }
  }
  for (auto& [key, breaker] : snapshot) fn(key, *breaker);
}

std::size_t Registry::Sweep() {
  const TimePoint now = clock_.CoarseNow();
  impl_->last_sweep_ns.store(now.time_since_epoch().count(), std::memory_order_relaxed);
  EventBatch batch;
  std::size_t dropped = 0;
  {
    internal::MutexLock lock(&impl_->mu);
    dropped = SweepLocked(now, batch);
  }
  Emit(batch);
  return dropped;
}

void Registry::MaybeSweep(TimePoint now) {
  const Duration::rep now_ns = now.time_since_epoch().count();
  const Duration::rep last = impl_->last_sweep_ns.load(std::memory_order_relaxed);
  if (now_ns - last >= options_.sweep_interval.count()) [[unlikely]]
    SweepIfDue(now, last);
}

void Registry::SweepIfDue(TimePoint now, Duration::rep last) {
  const Duration::rep now_ns = now.time_since_epoch().count();
  // One caller per interval wins the sweep; the others go on at once.
  if (!impl_->last_sweep_ns.compare_exchange_strong(last, now_ns, std::memory_order_relaxed))
    return;
  if (!impl_->mu.TryLock()) {
    // An insertion holds the lock: give the sweep back, so that the next
    // Get tries again rather than waiting a whole interval (a registry busy
    // inserting would otherwise never put back what it set aside).
    Duration::rep mine = now_ns;
    impl_->last_sweep_ns.compare_exchange_strong(mine, last, std::memory_order_relaxed);
    return;
  }
  EventBatch batch;
  SweepLocked(now, batch);
  impl_->mu.Unlock();
  Emit(batch);
}

std::size_t Registry::SweepLocked(TimePoint now, EventBatch& batch) {
  impl_->mu.AssertHeld();
  const Duration::rep now_ns = now.time_since_epoch().count();
  const Duration::rep idle_ns = options_.idle_timeout.count();
  std::size_t dropped = 0;
  impl_->Reap(batch);

  // What was set aside as protected is looked at again, from the back.
  impl_->set_aside.ForEach([](Links* l) { Entry::From(l)->set_aside = false; });
  impl_->queue.SpliceBack(impl_->set_aside);

  // Idle pass.
  std::vector<Entry*> idle;
  impl_->table.ForEach([&](Entry* e) {
    const Duration::rep last = e->last_used_ns.load(std::memory_order_relaxed);
    if (now_ns - last >= idle_ns && Evictable(e->breaker, now, options_.idle_timeout)) {
      idle.push_back(e);
    }
  });
  impl_->Withdraw(idle, now, options_.idle_timeout);
  for (Entry* e : idle) impl_->Drop(e, RegistryEvent::Kind::kEvictedIdle, batch);
  dropped += idle.size();

  // LRU pass: beyond max_breakers, drop the least recently used.
  const std::size_t size = impl_->size.load(std::memory_order_relaxed);
  if (size > options_.max_breakers) {
    dropped += EvictLru(now, options_.max_breakers, SIZE_MAX, batch);
    ReportCapacity(impl_->size.load(std::memory_order_relaxed), batch);
  } else {
    impl_->next_capacity_report = 0;
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
