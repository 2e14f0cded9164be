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
//     holds its shared_ptr); an OPEN breaker becomes idle only once its wait
//     ended more than idle_timeout ago (OPEN ends lazily, on a call, so a
//     tripped key nobody asks for again would otherwise stay for ever);
//   - when every breaker is protected, the registry grows past max_breakers
//     and reports a kCapacityExceeded event instead of dropping one.
// Sweeping is opportunistic: at most once per sweep_interval (default 1 min),
// on the calling path of Get(); there is no background thread.
//
//   auto registry = *fusebox::Registry::Create({});
//   registry->AddConfig("payment", payment_config);
//   auto breaker = registry->Get("payment-api:create-charge:ap-northeast", "payment");
//   if (breaker) (*breaker)->Call(...);
//
// A hit allocates nothing: lookup is heterogeneous (string_view against the
// stored std::string).
//
// Thread-safe.
#ifndef FUSEBOX_REGISTRY_H_
#define FUSEBOX_REGISTRY_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
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
  };
  Kind kind = Kind::kCreated;
  // The key, or empty for kCapacityExceeded.
  std::string_view key{};
  // The number of breakers after the event.
  std::size_t size = 0;
};

std::string_view RegistryEventKindName(RegistryEvent::Kind kind) noexcept;

struct RegistryOptions {
  // Time source for idle tracking and for every breaker created. Default:
  // SystemClock(). Must outlive the registry and its breakers.
  Clock* clock = nullptr;
  // Soft upper bound of breakers held (>= 1). Default: 5,000.
  std::size_t max_breakers = 5000;
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
  // can see it (to add listeners, say). Default: none.
  std::function<void(CircuitBreaker&)> on_create = nullptr;
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
  // none. A hit takes one shard lock and allocates nothing. Fails with
  // kInvalidArgument when the template does not exist or the key is empty.
  // The template of an existing breaker is not checked.
  Result<std::shared_ptr<CircuitBreaker>> Get(std::string_view key,
                                              std::string_view config_name = "default");

  // The breaker for `key` if it exists; does not count as a use.
  std::shared_ptr<CircuitBreaker> Find(std::string_view key) const;

  // Drops the breaker for `key` whatever its state. Returns whether it existed.
  bool Remove(std::string_view key);

  // Runs an idle sweep and the LRU bound now. Returns how many were dropped.
  std::size_t Sweep();

  // Breakers held.
  std::size_t size() const;

  // Calls `fn` for every breaker, outside any registry lock, on a snapshot.
  void ForEach(const std::function<void(const std::string& key, CircuitBreaker&)>& fn) const;

  Clock& clock() const noexcept { return clock_; }

 private:
  struct Shard;
  struct Entry;
  explicit Registry(RegistryOptions options);

  void MaybeSweep(TimePoint now);
  struct EventBatch;
  std::size_t SweepLocked(TimePoint now, EventBatch& batch);
  void Emit(const EventBatch& batch) const;
  void Emit(const RegistryEvent& event) const;
  Shard& ShardFor(std::string_view key) const;

  Clock& clock_;
  const RegistryOptions options_;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusebox

#endif  // FUSEBOX_REGISTRY_H_
