// fusebox/redis/snapshot_store.h: last good responses kept in Redis.
//
// RedisSnapshotStore implements fusebox::SnapshotStore (snapshot_store.h) so
// that every instance of a service serves the same stale-if-error snapshot
// (seed 000: a snapshot written by one API server is served by another when
// Meta cannot be called):
//
//   auto snapshots = fusebox::redis::RedisSnapshotStore::Create(
//       {.connection = *fusebox::redis::ParseRedisUrl(url), .max_age = std::chrono::hours(24)});
//   fusebox::StaleIfErrorReader reader(**snapshots, ...);
//
// Ages come from Redis alone: a snapshot is written with SET ... PX max_age,
// and its age is max_age minus its PTTL, so no instance's clock (and no
// timestamp) is involved, and a snapshot older than max_age is gone by
// itself. Get is one round trip (GET and PTTL pipelined), Put and Erase one
// command each.
//
// Failures: a Redis that cannot answer is a kUnavailable Status (kTimeout
// when the caller's budget ran out first), never a miss (nullopt). The store
// is guarded by its own CircuitBreaker (as RedisSharedState is), so a dead
// Redis costs no latency per read. A caller finding every connection busy
// waits in a bounded queue (max_waiters, max_wait) instead of being refused;
// GetWithin/PutWithin bound that wait and the I/O by the caller's budget.
//
// Thread-safe.
#ifndef FUSEBOX_REDIS_SNAPSHOT_STORE_H_
#define FUSEBOX_REDIS_SNAPSHOT_STORE_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "fusebox/clock.h"
#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/status.h"

namespace fusebox::redis {

namespace internal {
class GuardedClient;
class SentinelWatch;
}  // namespace internal

struct SnapshotStoreOptions {
  ConnectionOptions connection{};
  // Prepended to every key. Default: "fusebox:v1:snap:".
  std::string prefix = "fusebox:v1:snap:";
  // How long a snapshot is kept (> 0, whole milliseconds): the oldest stale
  // answer that can ever be served. Default: 24 h.
  Duration max_age = std::chrono::hours(24);
  // Largest value accepted by Put (bytes, >= 1); larger ones are refused
  // with kInvalidArgument rather than filling Redis. Default: 1 MiB.
  std::size_t max_value_bytes = 1 << 20;
  // Connections for concurrent calls (>= 1): size it for the threads that
  // call the store. Default: 4.
  int connections = 4;
  // Callers that may wait for a busy pool (>= 0); one more fails at once
  // with kUnavailable. Default: 64.
  int max_waiters = 64;
  // The longest wait for a connection (> 0); then kTimeout. Default: 250 ms.
  Duration max_wait = std::chrono::milliseconds(250);
  // The store's breaker: failure_threshold failures in a row (>= 1) stop all
  // traffic for down_for (> 0). Defaults: 3, 5 s.
  int failure_threshold = 3;
  Duration down_for = std::chrono::seconds(5);
  // Times the store's breaker. Default: SystemClock().
  Clock* clock = nullptr;
};

class RedisSnapshotStore final : public SnapshotStore {
 public:
  static Result<std::unique_ptr<RedisSnapshotStore>> Create(SnapshotStoreOptions options);
  ~RedisSnapshotStore() override;

  Result<std::optional<Snapshot>> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string value) override;
  Status Erase(std::string_view key) override;
  Result<std::optional<Snapshot>> GetWithin(std::string_view key, Duration budget) override;
  Status PutWithin(std::string_view key, std::string value, Duration budget) override;

  // Since creation (in_use and waiting: now).
  struct Stats {
    std::int64_t commands = 0;
    std::int64_t errors = 0;
    // Calls not sent because the store's breaker is open.
    std::int64_t refused = 0;
    // Commands cut short by the caller's budget.
    std::int64_t timeouts = 0;
    // The pool: callers that waited, waits that ran out of time, callers
    // refused because max_waiters were already waiting.
    std::int64_t pool_waits = 0;
    std::int64_t pool_wait_timeouts = 0;
    std::int64_t pool_queue_full = 0;
    std::int64_t pool_in_use = 0;
    std::int64_t pool_waiting = 0;
    int pool_size = 0;
    // Sentinel mode: primaries followed as the sentinels announced them
    // (+switch-master), the first one included.
    std::int64_t failovers = 0;
  };
  Stats stats() const;

 private:
  RedisSnapshotStore(SnapshotStoreOptions options, std::unique_ptr<internal::GuardedClient> client);
  std::string KeyOf(std::string_view key) const;

  // Sentinel mode: listens for +switch-master until the store is destroyed,
  // so that a failover is followed when announced, not seconds later when
  // the old primary is demoted (writes sent there meanwhile would be lost).
  void WatchLoop();

  const SnapshotStoreOptions options_;
  const std::unique_ptr<internal::GuardedClient> client_;
  std::unique_ptr<internal::SentinelWatch> watch_;  // Sentinel mode only.
  std::thread watcher_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // Guarded by stop_mu_.
  std::atomic<std::int64_t> failovers_{0};
};

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_SNAPSHOT_STORE_H_
