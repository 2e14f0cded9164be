#include "per_breaker_policies.h"

#include <algorithm>
#include <functional>

namespace fusebox::internal {

Result<PerBreakerPolicies::Entry> PerBreakerPolicies::Make(
    const std::shared_ptr<CircuitBreaker>& breaker) const {
  Entry e{breaker, nullptr, nullptr};
  if (bulkhead_) {
    Result<std::unique_ptr<Bulkhead>> b = Bulkhead::Create(*bulkhead_, clock_);
    if (!b) return std::move(b).error();
    e.bulkhead = std::move(*b);
  }
  if (rate_limiter_) {
    Result<std::unique_ptr<RateLimiter>> l = RateLimiter::Create(*rate_limiter_, clock_);
    if (!l) return std::move(l).error();
    e.rate_limiter = std::move(*l);
  }
  return e;
}

Result<std::pair<Bulkhead*, RateLimiter*>> PerBreakerPolicies::For(
    const std::shared_ptr<CircuitBreaker>& breaker) {
  Shard& shard = shards_[std::hash<const CircuitBreaker*>{}(breaker.get()) / 64 % kShards];
  MutexLock lock(&shard.mu);
  auto it = shard.entries.find(breaker.get());
  // Same control block: the entry is this breaker's (no reference count touched).
  if (it != shard.entries.end() && !it->second.breaker.owner_before(breaker) &&
      !breaker.owner_before(it->second.breaker)) {
    return std::pair{it->second.bulkhead.get(), it->second.rate_limiter.get()};
  }
  Result<Entry> made = Make(breaker);
  if (!made) return std::move(made).error();
  const std::pair<Bulkhead*, RateLimiter*> policies{made->bulkhead.get(), made->rate_limiter.get()};
  if (it != shard.entries.end()) {
    it->second = std::move(*made);
  } else {
    shard.entries.emplace(breaker.get(), std::move(*made));
    if (shard.entries.size() >= shard.sweep_at) {
      std::erase_if(shard.entries, [](const auto& kv) { return kv.second.breaker.expired(); });
      shard.sweep_at = std::max<std::size_t>(64, 2 * shard.entries.size());
    }
  }
  return policies;
}

std::size_t PerBreakerPolicies::SizeForTesting() {
  std::size_t n = 0;
  for (Shard& shard : shards_) {
    MutexLock lock(&shard.mu);
    n += shard.entries.size();
  }
  return n;
}

}  // namespace fusebox::internal
