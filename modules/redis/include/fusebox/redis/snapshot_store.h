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
// Failures: every Redis error is a kUnavailable Status, which the reader
// treats as "no snapshot" (Get) or ignores (Put). The store is guarded by its
// own CircuitBreaker (as RedisSharedState is), so a dead Redis costs no
// latency per read.
//
// Thread-safe.
#ifndef FUSEBOX_REDIS_SNAPSHOT_STORE_H_
#define FUSEBOX_REDIS_SNAPSHOT_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/status.h"

namespace fusebox::redis {

namespace internal {
class GuardedClient;
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
  // Connections for concurrent calls (>= 1); a call finding all busy fails
  // at once (kUnavailable). Default: 4.
  int connections = 4;
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

 private:
  RedisSnapshotStore(SnapshotStoreOptions options, std::unique_ptr<internal::GuardedClient> client);
  std::string KeyOf(std::string_view key) const;

  const SnapshotStoreOptions options_;
  const std::unique_ptr<internal::GuardedClient> client_;
};

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_SNAPSHOT_STORE_H_
