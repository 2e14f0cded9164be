// fusebox/registry.h: circuit breakers by key, with bounded memory.
//
// A Registry creates a breaker the first time a key is asked for, from a named
// configuration template, and hands out the same breaker for that key until it
// is dropped. Keys name what fails together: "dependency:operation:region"
// (seed 003) or "provider:workload:subject" (seed 000), e.g.
// "meta:read:17841400000000000:quota".
//
// Memory is bounded as seed 000 describes:
//   - a breaker idle for longer than idle_timeout (default 15 min) is dropped;
//   - beyond max_breakers (default 5,000) the least recently used are dropped;
//   - never a breaker that is OPEN, HALF_OPEN, under an operator override,
//     still holding failures or slow calls in its window, or in use (someone
//     holds its shared_ptr, or has it borrowed); an OPEN breaker becomes idle only once its wait
//     ended more than idle_timeout ago (OPEN ends lazily, on a call, so a
//     tripped key nobody asks for again would otherwise stay for ever);
//   - when every breaker is protected, the registry grows past max_breakers
//     and reports a kCapacityExceeded event instead of dropping one (again
//     each time it has grown by another 1/64 of max_breakers);
//   - it never grows past max_breakers_hard (default 4 x max_breakers): a key
//     that would need a breaker beyond that is answered by its template's
//     overflow breaker, one per template, named "overflow:<template>", shared
//     by every such key until the registry has room again. Such keys are not
//     held (Find() does not see them); stats().overflowed counts these Gets
//     and a kOverflow event reports them at most once per sweep_interval.
//     A shared breaker, not a refusal, so that callers need no new error path
//     and an upstream that rate-limits everyone still trips one breaker that
//     fails fast for all the keys without a breaker of their own.
//
// Eviction costs O(1) amortised per new key: the LRU order is a queue with a
// second chance (a breaker used since it was queued goes back to the front),
// and a protected breaker found at the end of the queue is set aside and
// looked at again only by the next idle sweep, not by every insertion. So the
// LRU choice is approximate (CLOCK-like): the breaker dropped was not asked
// for since it was last queued, but one asked for earlier and then requeued
// may outlive it; breakers set aside are checked again within sweep_interval.
// src/registry_model_test.cc predicts every drop from this rule.
//
// Idle sweeps visit every breaker, at most once per sweep_interval (default
// 1 min), on the calling path of Get(); there is no background thread.
//
//   auto registry = *fusebox::Registry::Create({});
//   registry->AddConfig("payment", payment_config);
//   auto breaker = registry->Get("payment-api:create-charge:ap-northeast", "payment");
//   if (breaker) (*breaker)->Call(...);
//
// A hit allocates nothing, takes no lock and writes no shared cache line
// (except a breaker's last-use time, once per coarse-clock tick): it hashes
// the key once (the slot keeps the hash, so a probe compares key bytes only
// when the hashes are equal), publishes the entry in one of the calling
// thread's hazard slots, and checks that the table still holds it. Writers
// (insertions, evictions, Remove) are serialised by one mutex; before one
// drops a breaker it unlinks it, waits for a membarrier(2) (every other
// thread passes a memory barrier) and looks at every thread's slots: a
// breaker found there is in use and stays. A caller that asks for the same
// key repeatedly can keep a RegistryKey, which carries its hash and where
// the key was found last.
//
// Borrow() lends the breaker without touching its reference count: the
// cheapest hit, for a caller that uses the breaker and lets it go (a call).
// Get() returns a shared_ptr, for a caller that keeps it.
//
// Thread-safe.
#ifndef FUSEBOX_REGISTRY_H_
#define FUSEBOX_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/system_clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

struct RegistryEvent {
  enum class Kind : std::uint8_t {
    // A breaker was created for a key.
    kCreated,
    // A breaker was dropped because it was idle.
    kEvictedIdle,
    // A breaker was dropped to stay within max_breakers.
    kEvictedLru,
    // Every breaker was protected: the registry holds more than max_breakers.
    kCapacityExceeded,
    // Remove() dropped a breaker.
    kRemoved,
    // The registry held max_breakers_hard breakers: `key` was answered by its
    // template's overflow breaker. At most once per sweep_interval.
    kOverflow,
  };
  Kind kind = Kind::kCreated;
  // The key, or empty for kCapacityExceeded.
  std::string_view key{};
  // The number of breakers after the event.
  std::size_t size = 0;
  // kOverflow: Gets answered by an overflow breaker since the previous
  // kOverflow event (this one's included). 0 for other kinds.
  std::uint64_t count = 0;
};

std::string_view RegistryEventKindName(RegistryEvent::Kind kind) noexcept;

struct RegistryOptions {
  // Time source for idle tracking and for every breaker created. Default:
  // SystemClock(). Must outlive the registry and its breakers.
  Clock* clock = nullptr;
  // Soft upper bound of breakers held (>= 1). Default: 5,000.
  std::size_t max_breakers = 5000;
  // Hard upper bound (>= max_breakers): beyond it a new key gets its
  // template's overflow breaker. 0 means 4 x max_breakers.
  std::size_t max_breakers_hard = 0;
  // A breaker not asked for in this long may be dropped (> 0). Default: 15 min.
  Duration idle_timeout = std::chrono::minutes(15);
  // Idle sweeps run at most this often (> 0). Default: 1 min.
  Duration sweep_interval = std::chrono::minutes(1);
  // The "default" template. Default: CircuitBreakerConfig{}.
  CircuitBreakerConfig default_config{};
  // Receives creation, eviction and capacity events, on the calling thread,
  // with no registry lock held. Default: none.
  std::function<void(const RegistryEvent&)> on_event = nullptr;
  // Called with each breaker right after it is created, before anyone else
  // can see it (to add listeners, say), overflow breakers included. It must
  // not call back into the registry. Default: none.
  std::function<void(CircuitBreaker&)> on_create = nullptr;
};

// A key with its hash computed once, for callers that look up the same key
// repeatedly (Registry::Get(const RegistryKey&) does not hash again).
//
// It also remembers where a registry last found it (the table slot and the
// entry, with the entry's serial number), and the next lookup looks there
// first: no probe and no byte compare on a repeat. The hint is only a cache:
// it is checked against the table under the lookup's hazard and against the
// entry's serial, which no other entry of any registry ever has, so a moved,
// dropped or reused entry just sends the lookup the usual way. One key may
// be used by many threads and with several registries at once. A copy
// starts without a hint.
class RegistryKey {
 public:
  explicit RegistryKey(std::string key) : key_(std::move(key)), hash_(Hash(key_)) {}
  RegistryKey(const RegistryKey& other) : key_(other.key_), hash_(other.hash_) {}
  RegistryKey(RegistryKey&& other) noexcept : key_(std::move(other.key_)), hash_(other.hash_) {}
  RegistryKey& operator=(const RegistryKey& other) {
    if (this != &other) Assign(std::string(other.key_), other.hash_);
    return *this;
  }
  RegistryKey& operator=(RegistryKey&& other) noexcept {
    if (this != &other) Assign(std::move(other.key_), other.hash_);
    return *this;
  }
  ~RegistryKey() = default;

  const std::string& key() const noexcept { return key_; }
  std::uint64_t hash() const noexcept { return hash_; }

  // The registry's hash of a key: 64 bits, keyed by a secret that the
  // process draws at random on first use (so that no client can choose keys
  // that pile into one probe run): the same within a process, different in
  // the next one. Never store it or send it to another process.
  static std::uint64_t Hash(std::string_view key) noexcept;

 private:
  friend class Registry;
  void Assign(std::string key, std::uint64_t hash) noexcept {
    key_ = std::move(key);
    hash_ = hash;
    hint_entry_.store(nullptr, std::memory_order_relaxed);
  }

  std::string key_;
  std::uint64_t hash_;
  // Written by lookups that found the key elsewhere (relaxed: each field is
  // checked on its own, see Registry::HintedHit()).
  mutable std::atomic<const void*> hint_entry_{nullptr};
  mutable std::atomic<std::uint64_t> hint_serial_{0};
  mutable std::atomic<std::size_t> hint_slot_{0};
};

// Counters since the registry was created (relaxed: each exact, not a
// single instant together).
struct RegistryStats {
  // Gets answered by an overflow breaker.
  std::uint64_t overflowed = 0;
  // Breakers looked at by the LRU bound at insertion (each evicted, moved to
  // the front of the queue, or set aside as protected): O(1) per insertion
  // amortised. Idle sweeps are not counted.
  std::uint64_t lru_visits = 0;
  // Insertions that ran the LRU bound.
  std::uint64_t lru_runs = 0;
};

class Registry;

// A breaker lent by Registry::Borrow(): usable while this object lives, and
// never dropped by the registry meanwhile (it counts as in use). Move-only.
// It may be given back (destroyed) on any thread, but must not outlive the
// registry. A thread has four hazard slots: a fifth breaker borrowed at
// once is lent through a shared_ptr instead (still correct, a little dearer).
class BorrowedBreaker {
 public:
  BorrowedBreaker() = default;
  BorrowedBreaker(BorrowedBreaker&& other) noexcept
      : breaker_(other.breaker_), hazard_(other.hazard_), owned_(std::move(other.owned_)) {
    other.breaker_ = nullptr;
    other.hazard_ = nullptr;
  }
  BorrowedBreaker& operator=(BorrowedBreaker&& other) noexcept {
    if (this != &other) {
      Release();
      breaker_ = other.breaker_;
      hazard_ = other.hazard_;
      owned_ = std::move(other.owned_);
      other.breaker_ = nullptr;
      other.hazard_ = nullptr;
    }
    return *this;
  }
  BorrowedBreaker(const BorrowedBreaker&) = delete;
  BorrowedBreaker& operator=(const BorrowedBreaker&) = delete;
  ~BorrowedBreaker() { Release(); }

  CircuitBreaker& operator*() const noexcept { return *breaker_; }
  CircuitBreaker* operator->() const noexcept { return breaker_; }
  CircuitBreaker* get() const noexcept { return breaker_; }
  explicit operator bool() const noexcept { return breaker_ != nullptr; }

 private:
  friend class Registry;
  BorrowedBreaker(CircuitBreaker* breaker, std::atomic<const void*>* hazard) noexcept
      : breaker_(breaker), hazard_(hazard) {}
  explicit BorrowedBreaker(std::shared_ptr<CircuitBreaker> owned) noexcept
      : breaker_(owned.get()), owned_(std::move(owned)) {}
  void Release() noexcept {
    if (hazard_ != nullptr) hazard_->store(nullptr, std::memory_order_release);
    hazard_ = nullptr;
    breaker_ = nullptr;
    owned_.reset();
  }

  CircuitBreaker* breaker_ = nullptr;
  // The hazard slot naming the breaker's entry, or null.
  std::atomic<const void*>* hazard_ = nullptr;
  // Set instead of hazard_ when no slot was free, and for overflow breakers.
  std::shared_ptr<CircuitBreaker> owned_;
};

class Registry {
 public:
  // Fails with kInvalidArgument naming a bad option or default_config field.
  static Result<std::unique_ptr<Registry>> Create(RegistryOptions options);

  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;
  ~Registry();

  // Adds or replaces the template `name` ("default" replaces the default).
  // Breakers already created keep their configuration.
  Status AddConfig(std::string name, CircuitBreakerConfig config);

  // The breaker for `key`, created from template `config_name` if there is
  // none. A hit takes no lock and allocates nothing. Fails with
  // kInvalidArgument when the template does not exist or the key is empty.
  // The template of an existing breaker is not checked. When the registry
  // holds max_breakers_hard breakers and none can be dropped, a new key gets
  // the template's overflow breaker (see the top of this file).
  Result<std::shared_ptr<CircuitBreaker>> Get(std::string_view key,
                                              std::string_view config_name = "default");
  // The same, without hashing the key again.
  Result<std::shared_ptr<CircuitBreaker>> Get(const RegistryKey& key,
                                              std::string_view config_name = "default");

  // As Get(), but lends the breaker (see BorrowedBreaker) instead of sharing
  // it: a hit writes nothing shared and allocates nothing.
  //
  //   if (auto b = registry->Borrow(key, "meta")) (*b)->Call(...);
  Result<BorrowedBreaker> Borrow(std::string_view key, std::string_view config_name = "default") {
    return Borrow(key, config_name, CoarseNow());
  }
  Result<BorrowedBreaker> Borrow(const RegistryKey& key, std::string_view config_name = "default") {
    return Borrow(key, config_name, CoarseNow());
  }
  // As Borrow(), at `coarse_now`: clock().CoarseNow() read by a caller that
  // looks up several keys for one call (seed 000's two circuits), so that the
  // clock is read once for all of them. It only ranks the breaker for LRU
  // and paces the idle sweep: a read a moment old is as good as a fresh one.
  Result<BorrowedBreaker> Borrow(std::string_view key, std::string_view config_name,
                                 TimePoint coarse_now);
  // The same for a kept key: no hash, no clock read, and where the key was
  // found last is looked at first (see RegistryKey). The cheapest hit.
  Result<BorrowedBreaker> Borrow(const RegistryKey& key, std::string_view config_name,
                                 TimePoint coarse_now);

  // Two kept keys for one call, at one clock read: the same as
  // Borrow(first, first_config, coarse_now) then Borrow(second, second_config,
  // coarse_now), for a caller whose every call uses two breakers (seed 000's
  // transient and quota circuits). When both are found where their keys were
  // found last, one pass lends both: one hazard check, one sweep check.
  struct BorrowedPair {
    Result<BorrowedBreaker> first;
    Result<BorrowedBreaker> second;
  };
  BorrowedPair BorrowPair(const RegistryKey& first, std::string_view first_config,
                          const RegistryKey& second, std::string_view second_config,
                          TimePoint coarse_now);

  // The breaker for `key` if it exists; does not count as a use.
  std::shared_ptr<CircuitBreaker> Find(std::string_view key) const;

  // Drops the breaker for `key` whatever its state. Returns whether it existed.
  bool Remove(std::string_view key);

  // Runs an idle sweep and the LRU bound now. Returns how many were dropped.
  std::size_t Sweep();

  // Breakers held (overflow breakers not counted).
  std::size_t size() const;

  RegistryStats stats() const;

  // Calls `fn` for every breaker, overflow breakers included, outside any
  // registry lock, on a snapshot.
  void ForEach(const std::function<void(const std::string& key, CircuitBreaker&)>& fn) const;

  Clock& clock() const noexcept { return clock_; }
  // clock().CoarseNow(), inline when the clock is SystemClock() (no virtual
  // call): the read a caller hands to Borrow(key, config, coarse_now).
  TimePoint CoarseNow() const noexcept { return internal::CoarseNow(clock_, system_clock_); }

 private:
  struct Entry;
  struct Lent;
  explicit Registry(RegistryOptions options);

  // `hinted`: the RegistryKey the lookup came with, whose hint is tried
  // first and updated after a hit elsewhere; null for a plain key.
  Result<std::shared_ptr<CircuitBreaker>> GetHashed(std::uint64_t hash, std::string_view key,
                                                    std::string_view config_name,
                                                    const RegistryKey* hinted = nullptr);
  // A Borrow() the lock-free probe did not answer: inserts, or lends what
  // the locked lookup finds.
  [[gnu::noinline]] Result<BorrowedBreaker> BorrowMissed(std::uint64_t hash, std::string_view key,
                                                         TimePoint now,
                                                         std::string_view config_name);
  Entry* Hit(std::uint64_t hash, std::string_view key, TimePoint now,
             std::atomic<const void*>* hazard) const;
  Entry* HintedHit(const RegistryKey& key, TimePoint now, std::atomic<const void*>* hazard) const;
  // Both keys' entries where their hints say, published in `first_hazard`
  // and `second_hazard` and touched; false, with both hazards clear, when
  // either is not there.
  bool HintedHits(const RegistryKey& first, const RegistryKey& second, TimePoint now,
                  std::atomic<const void*>& first_hazard, std::atomic<const void*>& second_hazard,
                  Entry*& first_entry, Entry*& second_entry) const;
  Result<Lent> Miss(std::uint64_t hash, std::string_view key, std::string_view config_name,
                    TimePoint now);
  Result<Lent> Insert(std::uint64_t hash, std::string_view key, std::string_view config_name,
                      TimePoint now);
  void MaybeSweep(TimePoint now);
  void SweepIfDue(TimePoint now, Duration::rep last);
  struct EventBatch;
  std::size_t SweepLocked(TimePoint now, EventBatch& batch);
  std::size_t EvictLru(TimePoint now, std::size_t target, std::size_t limit, EventBatch& batch);
  void ReportCapacity(std::size_t size, EventBatch& batch);
  void Emit(const EventBatch& batch) const;
  void Emit(const RegistryEvent& event) const;

  Clock& clock_;
  // clock_ is SystemClock(): CoarseNow() reads it inline.
  const bool system_clock_;
  const RegistryOptions options_;
  // The newest array of Impl's hash table, kept here rather than in Impl so
  // that a hit loads it straight from the registry: one load nearer its slot.
  std::atomic<void*> table_array_{nullptr};
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusebox

#endif  // FUSEBOX_REGISTRY_H_
