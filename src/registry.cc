#include "fusebox/registry.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"

namespace fusebox {
namespace {

// The top bits of a key's hash pick its shard, the bottom bits its slot.
constexpr unsigned kShardBits = 4;
constexpr std::size_t kShards = std::size_t{1} << kShardBits;
// Reader slots per shard lock: threads take different ones, so concurrent
// lookups write to different cache lines.
constexpr std::size_t kReaderSlots = 4;

std::uint64_t Load64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

std::uint64_t Load32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 64x64 -> 128 multiply, folded: wyhash's mixing step.
__extension__ typedef unsigned __int128 U128;
std::uint64_t Mix(std::uint64_t a, std::uint64_t b) noexcept {
  const U128 r = static_cast<U128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

constexpr std::uint64_t kK0 = 0xa0761d6478bd642full;
constexpr std::uint64_t kK1 = 0xe7037ed1a0b428dbull;
constexpr std::uint64_t kK2 = 0x8ebc6af09c88c6e3ull;
constexpr std::uint64_t kK3 = 0x589965cc75374cc3ull;

// Spins briefly, then lets another thread run (the machine may have fewer
// cores than threads).
void Backoff(int& spins) noexcept {
  if (++spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    std::this_thread::yield();
  }
}

class FUSEBOX_CAPABILITY("mutex") SpinLock {
 public:
  void Lock() FUSEBOX_ACQUIRE() {
    int spins = 0;
    while (locked_.exchange(true, std::memory_order_acquire)) {
      while (locked_.load(std::memory_order_relaxed)) Backoff(spins);
    }
  }
  void Unlock() FUSEBOX_RELEASE() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// This thread's reader slot, assigned round robin on first use.
std::size_t ReaderSlot() noexcept {
  static std::atomic<std::size_t> next{0};
  thread_local std::size_t slot = kReaderSlots;  // constant-initialised: no TLS guard
  if (slot == kReaderSlots) slot = next.fetch_add(1, std::memory_order_relaxed) % kReaderSlots;
  return slot;
}

}  // namespace

// Keys of up to 48 bytes (seed 000's "provider:workload:subject" keys are
// 30-45) are hashed in at most three independent lanes of 16 bytes and one
// final fold: two multiplies deep, not one per 16 bytes in a chain. Longer keys
// go 48 bytes a step, then the last 48 (overlapping: fine for a hash).
std::uint64_t RegistryKey::Hash(std::string_view key) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  const std::size_t size = key.size();
  const std::uint64_t seed = kK0 ^ (static_cast<std::uint64_t>(size) * kK1);
  if (size <= 16) {
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    if (size >= 8) {
      a = Load64(p);
      b = Load64(p + size - 8);
    } else if (size >= 4) {
      a = Load32(p);
      b = Load32(p + size - 4);
    } else if (size > 0) {
      a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[size / 2]} << 8) | p[size - 1];
    }
    return Mix(Mix(a ^ kK1, b ^ seed) ^ kK2, static_cast<std::uint64_t>(size) ^ kK0);
  }
  const unsigned char* const end = p + size;
  std::uint64_t h0 = seed;
  std::uint64_t h1 = seed ^ kK2;
  std::uint64_t h2 = seed ^ kK3;
  if (size > 48) {
    for (; end - p > 48; p += 48) {
      h0 = Mix(Load64(p) ^ kK1, Load64(p + 8) ^ h0);
      h1 = Mix(Load64(p + 16) ^ kK2, Load64(p + 24) ^ h1);
      h2 = Mix(Load64(p + 32) ^ kK3, Load64(p + 40) ^ h2);
    }
    p = end - 48;
    h0 = Mix(Load64(p) ^ kK1, Load64(p + 8) ^ h0);
    h1 = Mix(Load64(p + 16) ^ kK2, Load64(p + 24) ^ h1);
    h2 = Mix(Load64(p + 32) ^ kK3, Load64(p + 40) ^ h2);
  } else {
    h0 = Mix(Load64(p) ^ kK1, Load64(p + 8) ^ h0);
    h1 = Mix(Load64(end - 16) ^ kK2, Load64(end - 8) ^ h1);
    if (size > 32) h2 = Mix(Load64(p + 16) ^ kK3, Load64(p + 24) ^ h2);
  }
  return Mix(h0 ^ h2 ^ kK2, h1 ^ static_cast<std::uint64_t>(size) ^ kK0);
}

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

namespace {

// Links of the LRU queue and of the list of breakers set aside, both
// guarded by Impl::mu.
struct Links {
  Links* prev = this;
  Links* next = this;

  void Unlink() noexcept {
    prev->next = next;
    next->prev = prev;
    prev = next = this;
  }
};

// A circular list with a sentinel: front() is the newest, back() the oldest.
class List {
 public:
  bool empty() const noexcept { return head_.next == &head_; }
  Links* back() noexcept { return empty() ? nullptr : head_.prev; }
  void PushFront(Links* l) noexcept { InsertAfter(&head_, l); }
  void PushBack(Links* l) noexcept { InsertAfter(head_.prev, l); }
  // Moves every element of `other` to the back of this list, in order.
  void SpliceBack(List& other) noexcept {
    while (!other.empty()) {
      Links* newest = other.head_.next;
      newest->Unlink();
      PushBack(newest);
    }
  }
  template <typename F>
  void ForEach(F&& f) {
    for (Links* l = head_.next; l != &head_;) {
      Links* next = l->next;
      f(l);
      l = next;
    }
  }

 private:
  static void InsertAfter(Links* at, Links* l) noexcept {
    l->prev = at;
    l->next = at->next;
    at->next->prev = l;
    at->next = l;
  }
  Links head_;
};

}  // namespace

// One breaker and its key, allocated in one block (the key's bytes follow the
// struct), so that a probe that matches the hash compares bytes in the same
// cache lines.
struct Registry::Entry : Links {
  Entry(std::uint64_t h, std::size_t n, std::shared_ptr<CircuitBreaker> b, Duration::rep now)
      : hash(h), key_size(n), breaker(std::move(b)), last_used_ns(now), queued_ns(now) {}

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

  char* key_data() noexcept { return reinterpret_cast<char*>(this + 1); }
  std::string_view key() const noexcept {
    return {reinterpret_cast<const char*>(this + 1), key_size};
  }

  const std::uint64_t hash;
  const std::size_t key_size;
  std::shared_ptr<CircuitBreaker> breaker;
  // Written by hits with a relaxed store when the coarse clock has moved (no
  // ordering needed: it only ranks entries for eviction).
  std::atomic<Duration::rep> last_used_ns;
  // last_used_ns when the entry took its place in the LRU queue; a larger
  // last_used_ns means it was used since. Guarded by Impl::mu.
  Duration::rep queued_ns;
  bool set_aside = false;  // in Impl::set_aside rather than the queue; Impl::mu
};

namespace {

// Open addressing with linear probing. A slot keeps the full hash, so a probe
// looks at an entry only when the hashes are equal. Deletion shifts the
// following entries back (no tombstones). Load factor <= 1/2.
template <typename Entry>
class Table {
 public:
  Table() : slots_(new Slot[kInitial]()), mask_(kInitial - 1) {}

  Entry* Find(std::uint64_t hash, std::string_view key) const noexcept {
    for (std::size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.entry == nullptr) return nullptr;
      if (s.hash == hash && s.entry->key() == key) return s.entry;
    }
  }

  void Insert(Entry* e) {
    if ((count_ + 1) * 2 > mask_ + 1) Grow();
    Place(e);
    ++count_;
  }

  void Erase(Entry* e) noexcept {
    std::size_t i = e->hash & mask_;
    while (slots_[i].entry != e) i = (i + 1) & mask_;
    // Backward shift: move later entries of the run into the hole when their
    // home slot does not lie (cyclically) in (hole, j].
    std::size_t hole = i;
    for (std::size_t j = (i + 1) & mask_; slots_[j].entry != nullptr; j = (j + 1) & mask_) {
      const std::size_t home = slots_[j].hash & mask_;
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole] = Slot{};
    --count_;
  }

  template <typename F>
  void ForEach(F&& f) const {
    for (std::size_t i = 0; i <= mask_; ++i) {
      if (slots_[i].entry != nullptr) f(slots_[i].entry);
    }
  }

 private:
  static constexpr std::size_t kInitial = 16;
  struct Slot {
    std::uint64_t hash = 0;
    Entry* entry = nullptr;
  };

  void Place(Entry* e) noexcept {
    std::size_t i = e->hash & mask_;
    while (slots_[i].entry != nullptr) i = (i + 1) & mask_;
    slots_[i] = Slot{e->hash, e};
  }

  void Grow() {
    std::unique_ptr<Slot[]> old = std::move(slots_);
    const std::size_t old_size = mask_ + 1;
    slots_.reset(new Slot[old_size * 2]());
    mask_ = old_size * 2 - 1;
    for (std::size_t i = 0; i < old_size; ++i) {
      if (old[i].entry != nullptr) Place(old[i].entry);
    }
  }

  std::unique_ptr<Slot[]> slots_;
  std::size_t mask_;
  std::size_t count_ = 0;
};

}  // namespace

// A table behind a reader-writer lock made of kReaderSlots spin locks, each
// on its own cache line: a reader takes its thread's slot, a writer takes
// them all. The table is read under any slot and written under all of them.
struct Registry::Shard {
  struct alignas(64) ReaderLock {
    SpinLock lock;
  };
  ReaderLock readers[kReaderSlots];
  Table<Entry> table;

  SpinLock& ReadLock() noexcept { return readers[ReaderSlot()].lock; }
  void LockAll() noexcept FUSEBOX_NO_THREAD_SAFETY_ANALYSIS {
    for (ReaderLock& r : readers) r.lock.Lock();
  }
  void UnlockAll() noexcept FUSEBOX_NO_THREAD_SAFETY_ANALYSIS {
    for (ReaderLock& r : readers) r.lock.Unlock();
  }
};

namespace {

class ReadGuard {
 public:
  explicit ReadGuard(SpinLock& l) FUSEBOX_NO_THREAD_SAFETY_ANALYSIS : l_(l) { l_.Lock(); }
  ~ReadGuard() FUSEBOX_NO_THREAD_SAFETY_ANALYSIS { l_.Unlock(); }
  ReadGuard(const ReadGuard&) = delete;
  ReadGuard& operator=(const ReadGuard&) = delete;

 private:
  SpinLock& l_;
};

template <typename ShardT>
class WriteGuard {
 public:
  explicit WriteGuard(ShardT& s) : s_(s) { s_.LockAll(); }
  ~WriteGuard() { s_.UnlockAll(); }
  WriteGuard(const WriteGuard&) = delete;
  WriteGuard& operator=(const WriteGuard&) = delete;

 private:
  ShardT& s_;
};

}  // namespace

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

struct Registry::Impl {
  Shard shards[kShards];
  std::atomic<std::size_t> size{0};
  std::atomic<Duration::rep> last_sweep_ns{0};
  std::atomic<std::uint64_t> overflowed{0};
  std::atomic<std::uint64_t> lru_visits{0};
  std::atomic<std::uint64_t> lru_runs{0};

  // Insertions, removals, sweeps: one at a time. Taken before a shard's
  // write lock.
  internal::Mutex mu;
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

  ~Impl() {
    for (Shard& shard : shards) {
      shard.table.ForEach([](Entry* e) { Entry::Delete(e); });
    }
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

Registry::Shard& Registry::ShardFor(std::uint64_t hash) const {
  return impl_->shards[hash >> (64 - kShardBits)];
}

Result<std::shared_ptr<CircuitBreaker>> Registry::Get(std::string_view key,
                                                      std::string_view config_name) {
  return GetHashed(RegistryKey::Hash(key), key, config_name);
}

Result<std::shared_ptr<CircuitBreaker>> Registry::Get(const RegistryKey& key,
                                                      std::string_view config_name) {
  return GetHashed(key.hash(), key.key(), config_name);
}

Result<std::shared_ptr<CircuitBreaker>> Registry::GetHashed(std::uint64_t hash,
                                                            std::string_view key,
                                                            std::string_view config_name) {
  // The coarse clock is plenty to rank entries by last use and to notice
  // that a minute has passed since the last sweep.
  const TimePoint now = clock_.CoarseNow();
  const Duration::rep now_ns = now.time_since_epoch().count();
  Shard& shard = ShardFor(hash);
  {
    std::shared_ptr<CircuitBreaker> hit;
    {
      ReadGuard lock(shard.ReadLock());
      if (Entry* e = shard.table.Find(hash, key)) {
        // Written only when the tick has moved: threads sharing a hot key
        // do not take turns owning its cache line for nothing.
        if (e->last_used_ns.load(std::memory_order_relaxed) != now_ns) {
          e->last_used_ns.store(now_ns, std::memory_order_relaxed);
        }
        hit = e->breaker;
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
  return Insert(hash, key, config_name, now);
}

Result<std::shared_ptr<CircuitBreaker>> Registry::Insert(std::uint64_t hash, std::string_view key,
                                                         std::string_view config_name,
                                                         TimePoint now) {
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
  Shard& shard = ShardFor(hash);
  EventBatch batch;
  std::shared_ptr<CircuitBreaker> breaker;
  {
    // Created under the registry lock so that concurrent first Gets of one
    // key build one breaker and report one kCreated; inserted under the
    // shard's write lock so that no reader sees it before on_create ran.
    internal::MutexLock lock(&impl_->mu);
    {
      ReadGuard read(shard.ReadLock());
      if (Entry* e = shard.table.Find(hash, key)) return e->breaker;
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
      breaker = overflow;
    } else {
      auto created = CircuitBreaker::CreateUnjoined(std::string(key), std::move(config), clock_);
      if (!created) return std::move(created).error();  // Cannot happen: validated.
      breaker = std::shared_ptr<CircuitBreaker>(std::move(*created));
      // Observers first, then the fleet: a transition the fleet's state
      // causes at once (an override in force, read by the store's thread)
      // reaches every observer (issue 16).
      if (options_.on_create) options_.on_create(*breaker);
      breaker->JoinFleet();
      Entry* e = Entry::New(hash, key, breaker, now_ns);
      {
        WriteGuard<Shard> write(shard);
        shard.table.Insert(e);
      }
      impl_->queue.PushFront(e);
      size = impl_->size.fetch_add(1, std::memory_order_relaxed) + 1;
      batch.Add(RegistryEvent::Kind::kCreated, std::string(key), size);
      ReportCapacity(size, batch);
    }
  }
  Emit(batch);
  return breaker;
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
    Shard& shard = ShardFor(e->hash);
    {
      // Under the write lock no reader can copy the shared_ptr meanwhile,
      // so use_count() == 1 stays true until the entry is gone.
      WriteGuard<Shard> write(shard);
      if (Evictable(e->breaker, now, options_.idle_timeout)) {
        shard.table.Erase(e);
      } else {
        e = nullptr;
      }
    }
    if (e == nullptr) {
      Entry* kept = Entry::From(back);
      kept->Unlink();
      kept->set_aside = true;
      impl_->set_aside.PushFront(kept);
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
  Shard& shard = ShardFor(hash);
  ReadGuard lock(shard.ReadLock());
  Entry* e = shard.table.Find(hash, key);
  return e == nullptr ? nullptr : e->breaker;
}

bool Registry::Remove(std::string_view key) {
  std::shared_ptr<CircuitBreaker> dropped;  // Destroyed outside the locks.
  std::size_t size = 0;
  {
    const std::uint64_t hash = RegistryKey::Hash(key);
    Shard& shard = ShardFor(hash);
    internal::MutexLock lock(&impl_->mu);
    Entry* e = nullptr;
    {
      WriteGuard<Shard> write(shard);
      e = shard.table.Find(hash, key);
      if (e == nullptr) return false;
      shard.table.Erase(e);
    }
    e->Unlink();
    dropped = std::move(e->breaker);
    Entry::Delete(e);
    size = impl_->size.fetch_sub(1, std::memory_order_relaxed) - 1;
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
  for (Shard& shard : impl_->shards) {
    ReadGuard lock(shard.ReadLock());
    shard.table.ForEach(
        [&](Entry* e) { snapshot.emplace_back(std::string(e->key()), e->breaker); });
  }
  {
    internal::MutexLock lock(&impl_->mu);
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
  Duration::rep last = impl_->last_sweep_ns.load(std::memory_order_relaxed);
  if (now_ns - last < options_.sweep_interval.count()) return;
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

  // What was set aside as protected is looked at again, from the back.
  impl_->set_aside.ForEach([](Links* l) { Entry::From(l)->set_aside = false; });
  impl_->queue.SpliceBack(impl_->set_aside);

  // Idle pass.
  std::vector<Entry*> idle;
  for (Shard& shard : impl_->shards) {
    idle.clear();
    {
      WriteGuard<Shard> write(shard);
      shard.table.ForEach([&](Entry* e) {
        const Duration::rep last = e->last_used_ns.load(std::memory_order_relaxed);
        if (now_ns - last >= idle_ns && Evictable(e->breaker, now, options_.idle_timeout)) {
          idle.push_back(e);
        }
      });
      for (Entry* e : idle) shard.table.Erase(e);
    }
    for (Entry* e : idle) impl_->Drop(e, RegistryEvent::Kind::kEvictedIdle, batch);
    dropped += idle.size();
  }

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
