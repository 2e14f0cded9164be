// fusebox/snapshot_store.h: the SnapshotStore port and an in-memory store.
//
// A SnapshotStore keeps the last good response of a read (a "snapshot") per
// key, so that StaleIfErrorReader (stale_cache.h) can serve it when the
// dependency cannot be called. The port speaks in values and ages, never in
// time points: a store shared between processes (Redis) cannot hand out
// steady_clock time points, which mean nothing in another process, so each
// store measures the age of an entry on its own clock.
//
// MemorySnapshotStore is the in-process implementation: bounded, with
// least-recently-used eviction, on an injected Clock.
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

#include <cstddef>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "fusebox/clock.h"
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

  // The snapshot under `key`, std::nullopt when there is none, or an error
  // (e.g. kUnavailable when a remote store cannot be reached). Callers treat
  // an error as "no snapshot".
  virtual Result<std::optional<Snapshot>> Get(std::string_view key) = 0;

  // Stores `value` under `key` with age zero, replacing any previous value.
  virtual Status Put(std::string_view key, std::string value) = 0;

  // Removes `key`; OK when it was absent.
  virtual Status Erase(std::string_view key) = 0;

 protected:
  SnapshotStore() = default;
  SnapshotStore(const SnapshotStore&) = delete;
  SnapshotStore& operator=(const SnapshotStore&) = delete;
};

// A SnapshotStore in this process's memory. Holds at most max_entries
// snapshots; storing one more evicts the least recently used (by Get or Put).
//
// Thread-safe.
class MemorySnapshotStore final : public SnapshotStore {
 public:
  struct Options {
    // Measures snapshot ages; must outlive the store. Default: SystemClock().
    Clock* clock = &SystemClock();
    // Most snapshots held (>= 1). Default: 10000.
    std::size_t max_entries = 10000;
  };

  // Validates `options`. Fails with kInvalidArgument naming the field, e.g.
  // "max_entries must be >= 1, got 0".
  static Result<std::unique_ptr<MemorySnapshotStore>> Create(Options options);

  Result<std::optional<Snapshot>> Get(std::string_view key) override;
  Status Put(std::string_view key, std::string value) override;
  Status Erase(std::string_view key) override;

  // Snapshots held now.
  std::size_t size() const;

 private:
  struct Entry {
    std::string key;
    std::string value;
    TimePoint stored_at;
  };
  using Lru = std::list<Entry>;  // Most recently used first.

  explicit MemorySnapshotStore(Options options) : options_(options) {}

  const Options options_;
  mutable internal::Mutex mu_;
  Lru lru_ FUSEBOX_GUARDED_BY(mu_);
  // Keys point into lru_'s entries, whose addresses list operations keep.
  std::unordered_map<std::string_view, Lru::iterator> index_ FUSEBOX_GUARDED_BY(mu_);
};

}  // namespace fusebox

#endif  // FUSEBOX_SNAPSHOT_STORE_H_
