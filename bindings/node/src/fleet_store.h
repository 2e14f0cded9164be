// bindings/node/src/fleet_store.h: the Redis stores of fleet sharing
// (options.redis, docs/node.md "Fleet sharing (Redis)"), as the addon's
// classes share them.
//
// A fusebox::redis::RedisSharedState has threads and connections, so a
// process keeps one per distinct (URL, prefix, heartbeat, command timeout):
// every CoreBreaker (and CircuitBreaker with resilience4j) naming the same
// one shares it. The process-wide table holds weak references only: a store
// lives while a breaker uses it, and whoever drops the last reference
// destroys it (off the event loop through StoreCloser, where it can).
//
// Thread-safe: FleetStore() and FleetStoreCount() may run on any JS thread
// (worker_threads share the table).
#ifndef FUSEBOX_NODE_FLEET_STORE_H_
#define FUSEBOX_NODE_FLEET_STORE_H_

#include <napi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/result.h"

namespace fusebox::node {

// The process's store for options.redis `v` (a URL string, or { url,
// prefix?, heartbeatMs?, commandTimeoutMs? }), made when none with the same
// URL and options is alive. Throws a TypeError (RangeError for a number out
// of range, or what RedisSharedState::Create() refuses) starting with
// `where` (e.g. "Registry: options.redis"); no message echoes the URL (it
// may hold a password): ParseRedisUrl's messages do not.
std::shared_ptr<redis::RedisSharedState> FleetStore(Napi::Env env, const Napi::Value& v,
                                                    std::string_view where);

// Stores alive in the process (made by FleetStore() and not yet destroyed).
std::size_t FleetStoreCount();

// fleetHealth(): { connected, and the store's counters (stats()) }.
Napi::Object FleetHealthObject(Napi::Env env, const redis::RedisSharedState& store);

// A call that may wait for the fleet's store, made on the libuv pool (the
// blocking TryAcquire() or PendingProviderCall::Complete() of a call that
// the event loop could not decide): Execute() runs `work` there; OnOK (the
// JS thread) gives its result to `done`, whose value resolves the promise
// OnPool() returned (a throw rejects it). `owner` (the JS registry or
// breaker, and so its slot table) is kept alive until then.
template <typename Work, typename Done>
class PoolWorker : public Napi::AsyncWorker {
 public:
  PoolWorker(Napi::Env env, const char* name, Napi::Object owner, Work work, Done done)
      : Napi::AsyncWorker(env, name),
        deferred_(Napi::Promise::Deferred::New(env)),
        owner_(Napi::Persistent(owner)),
        work_(std::move(work)),
        done_(std::move(done)) {}

  Napi::Promise promise() const { return deferred_.Promise(); }

 protected:
  void Execute() override { result_.emplace(work_()); }
  void OnOK() override {
    Napi::Env env = Env();
    Napi::HandleScope scope(env);
    try {
      deferred_.Resolve(done_(env, *result_));
    } catch (const Napi::Error& e) {
      deferred_.Reject(e.Value());
    }
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference owner_;
  // They hold the breakers: declared before the result (a permit), so
  // destroyed after it.
  Work work_;
  Done done_;
  std::optional<std::invoke_result_t<Work&>> result_;
};

// Queues `work` on the libuv pool and returns the promise of done(result).
template <typename Work, typename Done>
Napi::Promise OnPool(Napi::Env env, const char* name, Napi::Object owner, Work work, Done done) {
  auto* worker = new PoolWorker<Work, Done>(env, name, owner, std::move(work), std::move(done));
  Napi::Promise promise = worker->promise();
  worker->Queue();
  return promise;
}

// OnPool() for the blocking TryAcquire() of a call that
// TryAcquireWithoutBlocking() could not decide: back on the JS thread the
// permit goes to `done`, which files it in its owner's slot table. Defined
// out of line: the callers' hot paths stay small enough for the compiler to
// inline as before.
using AcquireDone =
    std::function<Napi::Value(Napi::Env, std::shared_ptr<CircuitBreaker>&, Result<Permit>&)>;
Napi::Promise AcquireOnPool(Napi::Env env, Napi::Object owner,
                            std::shared_ptr<CircuitBreaker> breaker, AcquireDone done);

// Drops `held` (a store, or a breaker that holds one) on the libuv pool: the
// last reference to a store joins its threads (about 50 ms), which close()
// must not make the event loop wait for.
class StoreCloser : public Napi::AsyncWorker {
 public:
  StoreCloser(Napi::Env env, std::shared_ptr<void> held)
      : Napi::AsyncWorker(env, "fusebox:close"), held_(std::move(held)) {}

 protected:
  void Execute() override { held_.reset(); }

 private:
  std::shared_ptr<void> held_;
};

}  // namespace fusebox::node

#endif  // FUSEBOX_NODE_FLEET_STORE_H_
