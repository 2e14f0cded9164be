// fusebox/stale_cache.h: stale-if-error reads, single flight, snapshot keys.
//
// A circuit breaker decides whether a call may be made; what to answer when it
// may not is the cache's job. StaleIfErrorReader implements seed 000's flow:
//
//   fresh snapshot (age <= fresh_for)      -> return it; no call, no breaker
//   otherwise call (through the caller's function, which runs the breaker):
//     success                              -> store the snapshot, return it
//     failure that may be hidden (kUnavailable, kCircuitOpen, kRateLimited,
//     kTimeout by default; a breaker rejection is kCircuitOpen)
//                                          -> the last good value, marked
//                                             stale with its age, if it is
//                                             not older than max_stale_age
//     any other failure (authorization, invalid request)
//                                          -> the error, never stale data
//     no usable snapshot                   -> the error
//
// This is stale-if-error, not stale-while-revalidate: the refresh happens in
// the request and stale data is only served when it fails. Writes
// (CallKind::kWrite) are never cached nor served stale. Concurrent misses of
// one key are merged into one call by SingleFlight.
//
// Example, with a breaker in front of the dependency:
//
//   auto store = fusebox::MemorySnapshotStore::Create({});
//   auto reader = fusebox::StaleIfErrorReader::Create(
//       {.store = store->get(), .fresh_for = std::chrono::minutes(1)});
//   std::string key = fusebox::SnapshotKey("posts:acct-1", {{"limit", "25"}, {"cursor", c}});
//   fusebox::Result<fusebox::CachedRead> r = (*reader)->Read(key, [&] {
//     return breaker->Call([&] { return graph.GetPosts(c, 25); }, classify);
//   });
//   if (r && r->stale) ShowAsOf(r->age);
//
// Thread safety: SingleFlight and StaleIfErrorReader are thread-safe.
#ifndef FUSEBOX_STALE_CACHE_H_
#define FUSEBOX_STALE_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "fusebox/call_kind.h"
#include "fusebox/clock.h"
#include "fusebox/internal/key_hash.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/result.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/status.h"

namespace fusebox {

// Merges concurrent calls that share a key: the first caller of Do(key, fn)
// (the leader) runs fn; callers that arrive with the same key while it runs
// wait, without polling or sleeping, and receive a copy of its Result. The
// key is forgotten when the call ends, so a later Do() calls again.
//
// If fn throws, the leader's exception propagates from the leader's Do() and
// is rethrown (the same exception object, via std::rethrow_exception) from
// every waiter's Do(); no waiter is left blocked. Catch it by const reference.
//
// T must be copyable: each waiter gets its own copy.
//
// Thread-safe.
template <typename T>
class SingleFlight {
 public:
  SingleFlight() = default;
  SingleFlight(const SingleFlight&) = delete;
  SingleFlight& operator=(const SingleFlight&) = delete;

  // Runs fn (returning Result<T>) unless a call for `key` is in flight, in
  // which case it waits for that call and returns its result. fn runs without
  // any lock held.
  template <typename F>
  Result<T> Do(std::string_view key, F&& fn) FUSEBOX_EXCLUDES(mu_);

  // Calls in flight now (distinct keys).
  std::size_t InFlight() const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    return calls_.size();
  }

  // Callers waiting on the call in flight for `key` (the leader excluded).
  std::size_t WaitersForTesting(std::string_view key) const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    auto it = calls_.find(key);
    return it == calls_.end() ? 0 : it->second->waiters;
  }

  // Blocks until at least `n` callers wait on the call for `key`.
  void AwaitWaitersForTesting(std::string_view key, std::size_t n) FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    for (;;) {
      auto it = calls_.find(key);
      if (it != calls_.end() && it->second->waiters >= n) return;
      cv_.Wait(&mu_);
    }
  }

 private:
  struct Call {
    bool done = false;
    std::size_t waiters = 0;
    std::optional<Result<T>> result;
    std::exception_ptr exception;
  };

  void Finish(std::string_view key, const std::shared_ptr<Call>& call,
              std::optional<Result<T>> result, const std::exception_ptr& exception)
      FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    call->result = std::move(result);
    call->exception = exception;
    call->done = true;
    calls_.erase(std::string(key));
    cv_.NotifyAll();
  }

  mutable internal::Mutex mu_;
  // Signals both "a call finished" and "a waiter arrived" (for the test hook).
  internal::CondVar cv_;
  // Keyed by the caller's keys, which come from outside: KeyHash, not
  // std::hash, so that no one can choose keys that share a bucket.
  std::unordered_map<std::string, std::shared_ptr<Call>, internal::KeyHash, std::equal_to<>> calls_
      FUSEBOX_GUARDED_BY(mu_);
};

// Builds a snapshot key from `base` and request parameters (page cursor,
// limit, ...), so that different pages never share a snapshot:
// "<base>#p=<16 hex digits>", the digits a 64-bit FNV-1a hash of the
// parameters sorted by name then value and length-prefixed. The order of
// `params` does not matter; an empty list still adds the suffix. Two distinct
// parameter sets collide with probability about 2^-64.
std::string SnapshotKey(std::string_view base,
                        std::vector<std::pair<std::string, std::string>> params);

// Says whether a failed call's Status may be hidden behind a stale snapshot.
using StaleClassifier = std::function<bool(const Status&)>;

// The default StaleClassifier: true for kUnavailable, kCircuitOpen,
// kRateLimited and kTimeout (the dependency is down, refuses, or is being
// spared); false for everything else, notably kUnauthenticated,
// kPermissionDenied, kNotFound and kInvalidArgument: an authorization or
// invalid-request failure is never hidden behind stale data.
bool DefaultMayServeStale(const Status& status) noexcept;

// Where a CachedRead's value came from.
enum class ReadSource : std::uint8_t {
  kFreshSnapshot,  // A snapshot no older than fresh_for; nothing was called.
  kCall,           // The call just made (or the one it was merged with).
  kStaleSnapshot,  // A snapshot served because the call failed or was refused.
};

// A successful read.
struct CachedRead {
  std::string value;
  // True when `value` is a stale snapshot served in place of an error.
  bool stale = false;
  // Age of `value`: zero when it comes from the call.
  Duration age = Duration::zero();
  ReadSource source = ReadSource::kCall;
  // When stale: the error that the snapshot hides (its retry_at() tells when
  // a refresh may succeed). OK otherwise.
  Status hidden_error{};
  // When the store could not look (its Get failed: down, busy, out of time)
  // and the value comes from the call: that error. OK otherwise.
  Status store_error{};
};

// Seed 000's stale-if-error reader over a SnapshotStore.
//
// Thread-safe.
class StaleIfErrorReader {
 public:
  struct Options {
    // Where snapshots live; must outlive the reader. Required.
    SnapshotStore* store = nullptr;
    // A snapshot at most this old is returned without calling (>= 0).
    // Default: 60 s.
    Duration fresh_for = std::chrono::seconds(60);
    // A snapshot older than this is never served, stale or not
    // (>= fresh_for). Default: 24 h.
    Duration max_stale_age = std::chrono::hours(24);
    // Which failures a stale snapshot may hide. Default (unset):
    // DefaultMayServeStale.
    StaleClassifier may_serve_stale = nullptr;
  };

  // The function that makes the call; it should run the breaker (e.g.
  // CircuitBreaker::Call, or fusebox::meta::RunProviderCall with its
  // ProviderError mapped to a Status, see docs/stale_cache.md).
  using Fetch = std::function<Result<std::string>()>;

  // Validates `options`. Fails with kInvalidArgument naming the field, e.g.
  // "store must be set".
  static Result<std::unique_ptr<StaleIfErrorReader>> Create(Options options);

  StaleIfErrorReader(const StaleIfErrorReader&) = delete;
  StaleIfErrorReader& operator=(const StaleIfErrorReader&) = delete;

  // Reads `key` (see SnapshotKey) by the flow in the file comment. For
  // kWrite, calls `fetch` and returns its result: no snapshot is read,
  // stored or served, and no call is merged. A snapshot store error on Get
  // is not a miss but is answered like one, by the call (merged per key),
  // and reported in CachedRead::store_error; on Put it is ignored: the cache
  // must never turn a good answer into an error. Exceptions thrown by `fetch` propagate
  // unchanged (to every merged caller).
  Result<CachedRead> Read(std::string_view key, const Fetch& fetch,
                          CallKind kind = CallKind::kRead);

  const Options& options() const noexcept { return options_; }

  // Merged concurrent misses, for tests and metrics.
  SingleFlight<std::string>& single_flight() noexcept { return flight_; }

 private:
  explicit StaleIfErrorReader(Options options) : options_(std::move(options)) {}

  const Options options_;
  SingleFlight<std::string> flight_;
};

// --- Implementation ---------------------------------------------------------

template <typename T>
template <typename F>
Result<T> SingleFlight<T>::Do(std::string_view key, F&& fn) {
  std::shared_ptr<Call> call;
  {
    internal::MutexLock lock(&mu_);
    auto it = calls_.find(key);
    if (it != calls_.end()) {
      // A waiter: hold the Call by shared_ptr, since the leader erases it
      // from calls_ when it finishes.
      call = it->second;
      ++call->waiters;
      cv_.NotifyAll();  // For AwaitWaitersForTesting.
      while (!call->done) cv_.Wait(&mu_);
      if (call->exception) std::rethrow_exception(call->exception);
      return *call->result;
    }
    call = std::make_shared<Call>();
    calls_.emplace(std::string(key), call);
  }
  try {
    Result<T> result = std::forward<F>(fn)();
    Finish(key, call, result, nullptr);
    return result;
  } catch (...) {
    Finish(key, call, std::nullopt, std::current_exception());
    throw;
  }
}

}  // namespace fusebox

#endif  // FUSEBOX_STALE_CACHE_H_
