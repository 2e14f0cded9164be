// GuardedClient: Redis connections behind the store's own circuit breaker.
//
// Both stores of this module (RedisSharedState, RedisSnapshotStore) talk to a
// Redis that may be slow, paused or gone, and must never make their callers
// pay for it more than once. GuardedClient holds a small pool of connections
// for calls made on callers' threads, and runs every command through a
// CircuitBreaker: after `failure_threshold` failures in a row it refuses
// everything, without I/O, for `down_for`, then lets one command try. A
// caller that finds every pooled connection busy is refused at once too,
// rather than queue behind a slow Redis. Connections are made, and remade
// after an error, only with the breaker's permission: no reconnect storm.
//
// Private to fusebox::redis. Thread-safe; RunOn() callers own their
// connection (one thread at a time).
#ifndef FUSEBOX_REDIS_SRC_GUARDED_CLIENT_H_
#define FUSEBOX_REDIS_SRC_GUARDED_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/redis/connection.h"
#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::redis::internal {

class GuardedClient {
 public:
  struct Counters {
    std::atomic<std::int64_t> commands{0}, errors{0}, refused{0}, down_periods{0};
  };

  // kInvalidArgument for bad options (named as in the stores' options).
  static Result<std::unique_ptr<GuardedClient>> Create(ConnectionOptions connection,
                                                       int pooled_connections,
                                                       int failure_threshold, Duration down_for,
                                                       Clock& clock);

  // Runs `fn(Connection&) -> Result<T>` on a free pooled connection.
  template <typename T, typename F>
  Result<T> Run(F&& fn) {
    for (auto& slot : pool_) {
      if (!slot->mu.try_lock()) continue;
      std::lock_guard<std::mutex> lock(slot->mu, std::adopt_lock);
      return RunOn<T>(slot->conn, std::forward<F>(fn));
    }
    counters_.refused.fetch_add(1, std::memory_order_relaxed);
    return Status::Unavailable("redis " + connection_.Endpoint() + ": every connection busy");
  }

  // Runs `fn` on `conn`, a connection the caller owns (made or remade here
  // when missing or broken).
  template <typename T, typename F>
  Result<T> RunOn(std::unique_ptr<Connection>& conn, F&& fn) {
    Result<Permit> permit = gate_->TryAcquire();
    if (!permit) {
      counters_.refused.fetch_add(1, std::memory_order_relaxed);
      return Status::Unavailable("redis " + connection_.Endpoint() +
                                 ": not contacted, it failed repeatedly (" +
                                 std::string(permit.error().message()) + ")");
    }
    if (Status s = Ensure(conn); !s.ok()) {
      counters_.errors.fetch_add(1, std::memory_order_relaxed);
      permit->Failure(Duration::zero());
      return s;
    }
    counters_.commands.fetch_add(1, std::memory_order_relaxed);
    Result<T> r = fn(*conn);
    if (r.has_value()) {
      permit->Success(Duration::zero());
    } else if (r.error().code() == StatusCode::kInvalidArgument) {
      permit->Ignore();  // The caller's input, not Redis' health.
    } else {
      counters_.errors.fetch_add(1, std::memory_order_relaxed);
      permit->Failure(Duration::zero());
    }
    return r;
  }

  // Records a failure seen outside Run/RunOn (a subscriber's read).
  void RecordFailure();

  const ConnectionOptions& connection() const { return connection_; }
  CircuitBreaker& gate() { return *gate_; }
  const Counters& counters() const { return counters_; }

 private:
  struct Slot {
    std::mutex mu;
    std::unique_ptr<Connection> conn;
  };

  GuardedClient(ConnectionOptions connection, std::unique_ptr<CircuitBreaker> gate,
                int pooled_connections);
  Status Ensure(std::unique_ptr<Connection>& conn);

  const ConnectionOptions connection_;
  const std::unique_ptr<CircuitBreaker> gate_;
  std::vector<std::unique_ptr<Slot>> pool_;
  Counters counters_;
};

}  // namespace fusebox::redis::internal

#endif  // FUSEBOX_REDIS_SRC_GUARDED_CLIENT_H_
