// src/per_breaker_policies.h: a keyed pipeline's per-key bulkheads and rate
// limiters, found by breaker (Pipeline::WithBulkheadPerKey(),
// WithRateLimiterPerKey()). Internal to the library; its own file so that a
// test can hand it breakers that share an address (aliasing shared_ptrs),
// the reuse of a dropped breaker's memory that no registry test can force.
#ifndef FUSEBOX_SRC_PER_BREAKER_POLICIES_H_
#define FUSEBOX_SRC_PER_BREAKER_POLICIES_H_

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/result.h"

namespace fusebox::internal {

// Keys that share a breaker (an overflow breaker) share its policies too. An
// entry whose breaker the registry has dropped is replaced on the next call
// for its key (a new breaker, new policies) — even when the new breaker was
// allocated at the dropped one's address: entries are told apart by control
// block, not by address — and erased by the sweep that runs when a shard has
// doubled since its last sweep, so memory follows the registry's bounds.
// Sharded by the breaker's address. Thread-safe.
class PerBreakerPolicies {
 public:
  PerBreakerPolicies(const std::optional<BulkheadOptions>& bulkhead,
                     const std::optional<RateLimiterOptions>& rate_limiter, Clock& clock)
      : bulkhead_(bulkhead), rate_limiter_(rate_limiter), clock_(clock) {}

  // The policies of `breaker` (null where none is configured), made if it has
  // none. The pointers stay valid as long as the caller holds `breaker`: an
  // entry is replaced or erased only once its breaker is gone, and the map's
  // nodes do not move.
  Result<std::pair<Bulkhead*, RateLimiter*>> For(const std::shared_ptr<CircuitBreaker>& breaker);

  // Entries held now (live and dropped breakers'), for tests.
  std::size_t SizeForTesting();

 private:
  struct Entry {
    std::weak_ptr<CircuitBreaker> breaker;
    std::shared_ptr<Bulkhead> bulkhead;
    std::shared_ptr<RateLimiter> rate_limiter;
  };
  struct Shard {
    Mutex mu;
    std::unordered_map<const CircuitBreaker*, Entry> entries FUSEBOX_GUARDED_BY(mu);
    std::size_t sweep_at FUSEBOX_GUARDED_BY(mu) = 64;
  };
  static constexpr std::size_t kShards = 16;

  Result<Entry> Make(const std::shared_ptr<CircuitBreaker>& breaker) const;

  const std::optional<BulkheadOptions> bulkhead_;
  const std::optional<RateLimiterOptions> rate_limiter_;
  Clock& clock_;
  std::array<Shard, kShards> shards_;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_PER_BREAKER_POLICIES_H_
