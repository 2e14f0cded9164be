// fusebox/snapshot_store.h: the SnapshotStore port and an in-memory store.
//
// A SnapshotStore keeps the last good response of a read (a "snapshot") per
// key, so that StaleIfErrorReader (stale_cache.h) can serve it when the
// dependency cannot be called. The port speaks in values and ages, never in
// time points: a store shared between processes (Redis) cannot hand out
// steady_clock time points, which mean nothing in another process, so each
// store measures the age of an entry on its own clock.
//
// MemorySnapshotStore is the in-process implementation: bounded in entries and
// bytes, with least-recently-used eviction, on an injected Clock.
// TieredSnapshotStore puts one in front of a remote store (Redis): a fresh
// local hit costs no round trip, and a remote store that is down, busy or
// slow still leaves this process' copies to serve.
//
// A miss is not an outage: Get() answers std::nullopt only when the store
// knows it has no snapshot; a store that could not look (down, busy, out of
// time) answers an error. Callers must not take an error for "no snapshot"
// and stop there: they may call the dependency (once per key, merged by
// SingleFlight), but they count it apart and never evict on it.
//
// Example:
//
//   fusebox::testing::ManualClock clock;
//   auto store = fusebox::MemorySnapshotStore::Create({.clock = &clock, .max_entries = 1000});
//   if (!store) return store.error();
//   (void)(*store)->Put("stats:acct-1", "{\"followers\":10}");
//   clock.Advance(std::chrono::seconds(5));
//   auto snap = (*store)->Get("stats:acct-1");   // value "{...}", age 5 s
//
// Thread safety: implementations of SnapshotStore must be thread-safe;
// MemorySnapshotStore is thread-safe.
#ifndef FUSEBOX_SNAPSHOT_STORE_H_
#define FUSEBOX_SNAPSHOT_STORE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fusebox/clock.h"
#include "fusebox/internal/key_hash.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox {

// One stored snapshot as a store returns it.
struct Snapshot {
  // The stored bytes, exactly as given to Put().
  std::string value;
  // How long ago the value was stored, on the store's own clock; never
  // negative.
  Duration age = Duration::zero();
};

// The port through which StaleIfErrorReader keeps last good values. Keys are
// opaque strings (see SnapshotKey() in stale_cache.h).
//
// Thread-safe: every implementation must allow concurrent calls.
class SnapshotStore {
 public:
  virtual ~SnapshotStore() = default;

  // The snapshot under `key`; std::nullopt when the store has none (a miss);
  // an error when it could not tell: kUnavailable (down, or every connection
  // busy), kTimeout (no answer within the budget). An error is never a miss.
  virtual Result<std::optional<Snapshot>> Get(std::string_view key) = 0;

  // Stores `value` under `key` with age zero, replacing any previous value.
  virtual Status Put(std::string_view key, std::string value) = 0;

  // Get() and Put() spending at most about `budget` of real time (waiting
  // for a connection and I/O included), so that a caller's deadline bounds
  // them; a budget <= 0 fails with kTimeout without I/O. Stores that never
  // wait (the default) ignore the budget.
  virtual Result<std::optional<Snapshot>> GetWithin(std::string_view key, Duration budget) {
    (void)budget;
    return Get(key);
  }
  virtual Status PutWithin(std::string_view key, std::string value, Duration budget) {
    (void)budget;
    return Put(key, std::move(value));
  }

  // The snapshot under `key` if this process holds it in memory, found
  // without I/O or waiting: what a thread that must not block may serve.
  // std::nullopt says nothing about the store (Get() may still find one).
  // Default: std::nullopt.
  virtual std::optional<Snapshot> GetInMemory(std::string_view key) {
    (void)key;
    return std::nullopt;
  }

  // Removes `key`; OK when it was absent.
  virtual Status Erase(std::string_view key) = 0;

 protected:
  SnapshotStore() = default;
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;
};

// A SnapshotStore in this process's memory. Holds at most max_entries
// snapshots and max_bytes bytes of keys and values; storing one more evicts
// the least recently used (by Get or Put) until both bounds hold. A single
// snapshot larger than max_bytes is refused (kInvalidArgument) and the key's
// previous value dropped, so that the store never serves an older value than
// the last one it was given.
//
// Thread-safe.
class MemorySnapshotStore final : public SnapshotStore {
 public:
  struct Options {
    // Measures snapshot ages; must outlive the store. Default: SystemClock().
    Clock* clock = &SystemClock();
    // Most snapshots held (>= 1). Default: 10000.
    std::size_t max_entries = 10000;
    // Most bytes of keys and values held (>= 1). Default: 64 MiB.
    std::size_t max_bytes = std::size_t{64} << 20;
  };

  // Validates `options`. Fails with kInvalidArgument naming the field, e.g.
  // "max_entries must be >= 1, got 0".
  static Result<std::unique_ptr<MemorySnapshotStore>> Create(Options options);

  Result<std::optional<Snapshot>> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string value) override;
  Status Erase(std::string_view key) override;
  std::optional<Snapshot> GetInMemory(std::string_view key) override;

  // Stores `value` as already `age` old (a copy of another store's snapshot
  // keeps that store's age); a negative age counts as zero.
  Status PutAged(std::string_view key, std::string value, Duration age);

  // Snapshots held now, and the bytes of their keys and values.
  std::size_t size() const;
  std::size_t bytes() const;

 private:
  struct Entry {
    std::string key;
    std::string value;
    TimePoint stored_at;
  };
  using Lru = std::list<Entry>;  // Most recently used first.

  explicit MemorySnapshotStore(Options options) : options_(options) {}
  using Index = std::unordered_map<std::string_view, Lru::iterator, internal::KeyHash>;
  void EraseLocked(Index::iterator it) FUSEBOX_REQUIRES(mu_);

  const Options options_;
  mutable internal::Mutex mu_;
  Lru lru_ FUSEBOX_GUARDED_BY(mu_);
  std::size_t bytes_ FUSEBOX_GUARDED_BY(mu_) = 0;
  // Keys point into lru_'s entries, whose addresses list operations keep.
  Index index_ FUSEBOX_GUARDED_BY(mu_);
};

// A bounded MemorySnapshotStore (the local tier) in front of another store
// (the remote tier, e.g. fusebox::redis::RedisSnapshotStore):
//
//   Put:  local, then remote (write-through); the remote's error is returned
//         but the local copy stays.
//   Get:  a local snapshot at most local_fresh_for old -> it, no remote call;
//         else the remote's: a remote snapshot younger than the local one is
//         copied into the local tier with its remote age and returned;
//         no remote snapshot -> the local one, or a miss (nullopt);
//         the remote cannot answer -> the local one whatever its age (the
//         caller judges it), or the remote's error when there is none.
//   Erase: both.
//
// Thread-safe; the tiers must outlive the store.
class TieredSnapshotStore final : public SnapshotStore {
 public:
  struct Options {
    // Required.
    MemorySnapshotStore* local = nullptr;
    SnapshotStore* remote = nullptr;
    // A local snapshot at most this old is served without asking the remote
    // tier (>= 0); set it to the shortest freshness of the reads served, so
    // that a fresh answer never waits for the remote. Default: 60 s.
    Duration local_fresh_for = std::chrono::seconds(60);
  };

  // How Get() calls ended, since creation.
  struct Stats {
    std::uint64_t local_hits = 0;   // Served by the local tier alone.
    std::uint64_t remote_hits = 0;  // The remote's snapshot (copied locally).
    std::uint64_t misses = 0;       // Neither tier had one.
    // The remote could not answer (any error; kTimeout ones also counted in
    // remote_timeouts); of those, answered from the local tier.
    std::uint64_t remote_errors = 0;
    std::uint64_t remote_timeouts = 0;
    std::uint64_t local_on_remote_error = 0;
    // Puts the remote tier refused (the local copy was kept).
    std::uint64_t remote_put_errors = 0;
  };

  // Fails with kInvalidArgument naming the field.
  static Result<std::unique_ptr<TieredSnapshotStore>> Create(Options options);

  Result<std::optional<Snapshot>> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string value) override;
  Status Erase(std::string_view key) override;
  Result<std::optional<Snapshot>> GetWithin(std::string_view key, Duration budget) override;
  Status PutWithin(std::string_view key, std::string value, Duration budget) override;
  std::optional<Snapshot> GetInMemory(std::string_view key) override;

  Stats stats() const;

 private:
  struct Counters {
    std::atomic<std::uint64_t> local_hits{0}, remote_hits{0}, misses{0}, remote_errors{0},
        remote_timeouts{0}, local_on_remote_error{0}, remote_put_errors{0};
  };
  explicit TieredSnapshotStore(Options options) : options_(options) {}
  // Get with the remote call given (with or without a budget).
  template <typename RemoteGet>
  Result<std::optional<Snapshot>> GetThrough(std::string_view key, RemoteGet&& remote_get);
  Status Counted(Status remote_put);

  const Options options_;
  Counters counters_;
};

}  // namespace fusebox

#endif  // FUSEBOX_SNAPSHOT_STORE_H_
