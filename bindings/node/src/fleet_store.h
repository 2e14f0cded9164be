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
#include <string>
#include <string_view>
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

// The blocking TryAcquire() of a call that TryAcquireWithoutBlocking() could
// not decide, made on the libuv pool; back on the JS thread the permit goes
// to `done`, which files it in its owner's slot table. Returns a promise of
// what `done` returns (rejected with what it throws). `owner` (the JS
// registry or breaker, and so its slot table) is kept alive until then.
// Defined out of line: the callers' hot paths stay small enough for the
// compiler to inline as before.
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
