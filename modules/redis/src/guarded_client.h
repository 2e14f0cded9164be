// GuardedClient: Redis connections behind the store's own circuit breaker.
//
// Both stores of this module (RedisSharedState, RedisSnapshotStore) talk to a
// Redis that may be slow, paused or gone, and must never make their callers
// pay for it more than once. GuardedClient holds a small pool of connections
// for calls made on callers' threads, and runs every command through a
// CircuitBreaker: after `failure_threshold` failures in a row it refuses
// everything, without I/O, for `down_for`, then lets one command try. A
// caller that finds every pooled connection busy waits in a bounded queue
// (PoolOptions: at most max_waiters callers, each for at most max_wait and
// its own budget), or is refused at once when the queue is full or has no
// room (max_waiters 0, the default). Connections are made, and remade after
// an error, only with the breaker's permission: no reconnect storm.
//
// A budget (Run's, RunOn's) bounds the caller's wait for a connection, a
// reconnect and each read and write of its command; a command cut short by
// the budget fails with kTimeout.
//
// Private to fusebox::redis. Thread-safe; RunOn() callers own their
// connection (one thread at a time).
#ifndef FUSEBOX_REDIS_SRC_GUARDED_CLIENT_H_
#define FUSEBOX_REDIS_SRC_GUARDED_CLIENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
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

// How a GuardedClient's pool treats callers that find it busy.
struct PoolOptions {
  // Callers that may wait for a busy pool (>= 0); one more is refused.
  int max_waiters = 0;
  // The longest wait for a connection (> 0).
  Duration max_wait = std::chrono::milliseconds(250);
};

class GuardedClient {
 public:
  // Real time: budgets bound real I/O.
  using Deadline = std::chrono::steady_clock::time_point;
  static constexpr Duration kNoBudget = Duration::max();

  struct Counters {
    std::atomic<std::int64_t> commands{0}, errors{0}, refused{0}, down_periods{0};
    // Pool pressure: callers that had to wait for a connection, waits that
    // ran out of time, callers refused because the queue was full; and the
    // connections in use and callers waiting now.
    std::atomic<std::int64_t> pool_waits{0}, pool_wait_timeouts{0}, pool_queue_full{0};
    std::atomic<std::int64_t> pool_in_use{0}, pool_waiting{0};
    // Commands cut short by their caller's budget.
    std::atomic<std::int64_t> timeouts{0};
  };

  // kInvalidArgument for bad options (named as in the stores' options).
  static Result<std::unique_ptr<GuardedClient>> Create(ConnectionOptions connection,
                                                       int pooled_connections,
                                                       int failure_threshold, Duration down_for,
                                                       Clock& clock, PoolOptions pool = {});

  // Runs `fn(Connection&) -> Result<T>` on a pooled connection, waiting for
  // one as PoolOptions allow, all within `budget`.
  template <typename T, typename F>
  Result<T> Run(F&& fn, Duration budget = kNoBudget) {
    const Deadline deadline = DeadlineAfter(budget);
    Result<Slot*> slot = Acquire(deadline);
    if (!slot) return slot.error();
    struct Held {
      GuardedClient* client;
      Slot* slot;
      ~Held() { client->Release(slot); }
    } held{this, *slot};
    return RunOn<T>((*slot)->conn, std::forward<F>(fn), deadline);
  }

  // Runs `fn` on `conn`, a connection the caller owns (made or remade here
  // when missing or broken), within `deadline`.
  template <typename T, typename F>
  Result<T> RunOn(std::unique_ptr<Connection>& conn, F&& fn, Deadline deadline = Deadline::max()) {
    Duration left = Left(deadline);
    if (left <= Duration::zero()) return OutOfTime("no time left");
    Result<Permit> permit = gate_->TryAcquire();
    if (!permit) {
      counters_.refused.fetch_add(1, std::memory_order_relaxed);
      return Status::Unavailable("redis " + connection_.Endpoint() +
                                 ": not contacted, it failed repeatedly (" +
                                 std::string(permit.error().message()) + ")");
    }
    if (Status s = Ensure(conn, left); !s.ok()) {
      counters_.errors.fetch_add(1, std::memory_order_relaxed);
      permit->Failure(Duration::zero());
      return s;
    }
    // The caller's budget, when shorter, bounds each read and write.
    left = Left(deadline);
    const bool bounded = left < connection_.command_timeout;
    if (bounded) {
      if (left <= Duration::zero()) {
        permit->Ignore();
        return OutOfTime("no time left after connecting");
      }
      if (Status s = conn->SetCommandTimeout(left); !s.ok()) {
        permit->Ignore();
        return s;
      }
    }
    counters_.commands.fetch_add(1, std::memory_order_relaxed);
    Result<T> r = fn(*conn);
    if (bounded && !conn->broken()) (void)conn->SetCommandTimeout(connection_.command_timeout);
    if (r.has_value()) {
      permit->Success(Duration::zero());
    } else if (r.error().code() == StatusCode::kInvalidArgument) {
      permit->Ignore();  // The caller's input, not Redis' health.
    } else {
      counters_.errors.fetch_add(1, std::memory_order_relaxed);
      permit->Failure(Duration::zero());
      if (bounded && Left(deadline) <= Duration::zero()) {
        return OutOfTime(std::string(r.error().message()));
      }
    }
    return r;
  }

  // Records a failure seen outside Run/RunOn (a subscriber's read).
  void RecordFailure();

  // Sentinel mode: the primary is now at `endpoint` ("host:port"), as a
  // sentinel announced (SentinelWatch). From then on a connection to any
  // other server is remade before its next command, and one the sentinels
  // still send elsewhere is refused (kUnavailable: they have not all seen
  // the failover yet). Returns whether the primary changed.
  bool FollowPrimary(std::string endpoint);
  // Whether `conn` is on the primary last announced (true when none was).
  bool OnPrimary(const Connection& conn);

  const ConnectionOptions& connection() const { return connection_; }
  CircuitBreaker& gate() { return *gate_; }
  const Counters& counters() const { return counters_; }

 private:
  struct Slot {
    std::unique_ptr<Connection> conn;
  };

  GuardedClient(ConnectionOptions connection, std::unique_ptr<CircuitBreaker> gate,
                int pooled_connections, PoolOptions pool);
  // Connects (within `budget` and the connect timeout) when `conn` is
  // missing or broken.
  Status Ensure(std::unique_ptr<Connection>& conn, Duration budget);
  // A free slot, waiting as PoolOptions and `deadline` allow.
  Result<Slot*> Acquire(Deadline deadline);
  void Release(Slot* slot);
  // kTimeout, counted.
  Status OutOfTime(const std::string& detail);

  static Deadline DeadlineAfter(Duration budget) {
    const Deadline now = SystemClock().Now();  // real I/O, real time
    if (budget >= Deadline::max() - now) return Deadline::max();
    return now + std::chrono::duration_cast<Deadline::duration>(budget);
  }
  static Duration Left(Deadline deadline) {
    if (deadline == Deadline::max()) return kNoBudget;
    return deadline - SystemClock().Now();
  }

  const ConnectionOptions connection_;
  const std::unique_ptr<CircuitBreaker> gate_;
  const PoolOptions pool_options_;
  std::vector<std::unique_ptr<Slot>> pool_;
  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  // Slots no caller holds (guarded by pool_mu_), and callers waiting for one.
  std::vector<Slot*> free_;
  int waiting_ = 0;
  Counters counters_;
  // The primary the sentinels last announced (FollowPrimary), or empty.
  // Read only when a command is about to be sent, so the lock costs nothing
  // next to its round trip.
  std::mutex primary_mu_;
  std::string primary_;
};

}  // namespace fusebox::redis::internal

#endif  // FUSEBOX_REDIS_SRC_GUARDED_CLIENT_H_
