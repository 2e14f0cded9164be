// bindings/node/src/fleet_store.cc: options.redis, and the process's table
// of Redis stores (fleet_store.h).
#include "fleet_store.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "addon.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/redis/options.h"

namespace fusebox::node {
namespace {

// The stores alive, by identity. Weak: a breaker's reference keeps a store
// alive, the table never does. Expired entries are dropped as the table is
// walked. Never destroyed (a store may outlive static destruction's turn).
struct StoreTable {
  internal::Mutex mu;
  std::map<std::string, std::weak_ptr<redis::RedisSharedState>, std::less<>> stores
      FUSEBOX_GUARDED_BY(mu);
};

StoreTable& Table() {
  static auto* table = new StoreTable;
  return *table;
}

// options.redis read into SharedStateOptions; `identity` receives the key
// stores are shared by: the URL as written and the options (never shown).
redis::SharedStateOptions ReadRedisOptions(Napi::Env env, const Napi::Value& v,
                                           std::string_view where, std::string* identity) {
  const std::string at(where);
  Napi::Value url = v;
  Napi::Object o;
  if (v.IsObject()) {
    o = v.As<Napi::Object>();
    url = o.Get("url");
  }
  if (!url.IsString()) {
    throw Napi::TypeError::New(
        env, at + " must be a redis:// or rediss:// URL string, or { url, prefix?, heartbeatMs?, "
                  "commandTimeoutMs? }");
  }
  const std::string text = url.As<Napi::String>().Utf8Value();
  Result<redis::ConnectionOptions> connection = redis::ParseRedisUrl(text);
  if (!connection) {
    throw Napi::TypeError::New(env, at + ": " + std::string(connection.error().message()));
  }
  redis::SharedStateOptions options;
  options.connection = std::move(*connection);
  if (!o.IsEmpty()) {
    const Napi::Value prefix = o.Get("prefix");
    if (!prefix.IsUndefined()) {
      if (!prefix.IsString()) throw Napi::TypeError::New(env, at + ".prefix must be a string");
      options.prefix = prefix.As<Napi::String>().Utf8Value();
    }
    auto millis = [&](const char* name, Duration& out) {
      const Napi::Value m = o.Get(name);
      if (m.IsUndefined()) return;
      const double d = m.IsNumber() ? m.As<Napi::Number>().DoubleValue() : -1;
      if (!m.IsNumber() || !(d > 0 && d <= 3.6e6)) {
        throw Napi::RangeError::New(env,
                                    at + "." + name + " must be a number of ms in (0, 3600000]");
      }
      out = FromMs(d);
    };
    millis("heartbeatMs", options.heartbeat);
    millis("commandTimeoutMs", options.connection.command_timeout);
  }
  // No '\n' in a valid URL, and the numbers last: the fields cannot run
  // together.
  *identity = text + '\n' + options.prefix + '\n' + std::to_string(options.heartbeat.count()) +
              '\n' + std::to_string(options.connection.command_timeout.count());
  return options;
}

}  // namespace

std::shared_ptr<redis::RedisSharedState> FleetStore(Napi::Env env, const Napi::Value& v,
                                                    std::string_view where) {
  std::string identity;
  redis::SharedStateOptions options = ReadRedisOptions(env, v, where, &identity);
  StoreTable& table = Table();
  internal::MutexLock lock(&table.mu);
  std::weak_ptr<redis::RedisSharedState>& entry = table.stores[identity];
  if (std::shared_ptr<redis::RedisSharedState> alive = entry.lock()) return alive;
  Result<std::shared_ptr<redis::RedisSharedState>> made =
      redis::RedisSharedState::Create(std::move(options));
  if (!made) {
    table.stores.erase(identity);
    throw Napi::RangeError::New(env,
                                std::string(where) + ": " + std::string(made.error().message()));
  }
  entry = *made;
  return std::move(*made);
}

std::size_t FleetStoreCount() {
  StoreTable& table = Table();
  internal::MutexLock lock(&table.mu);
  std::erase_if(table.stores, [](const auto& e) { return e.second.expired(); });
  return table.stores.size();
}

Napi::Promise AcquireOnPool(Napi::Env env, Napi::Object owner,
                            std::shared_ptr<CircuitBreaker> breaker, AcquireDone done) {
  CircuitBreaker* b = breaker.get();
  return OnPool(
      env, "fusebox:acquire", owner, [b] { return b->TryAcquire(); },
      [breaker = std::move(breaker), done = std::move(done)](
          Napi::Env e, Result<Permit>& permit) mutable { return done(e, breaker, permit); });
}

Napi::Object FleetHealthObject(Napi::Env env, const redis::RedisSharedState& store) {
  const redis::SharedStateStats s = store.stats();
  Napi::Object o = Napi::Object::New(env);
  o.Set("connected", store.healthy());
  auto n = [&](const char* name, std::int64_t v) { o.Set(name, static_cast<double>(v)); };
  n("commands", s.commands);
  n("errors", s.errors);
  n("refused", s.refused);
  n("downPeriods", s.down_periods);
  n("subscribes", s.subscribes);
  n("events", s.events);
  n("leasesGranted", s.leases_granted);
  n("leasesBusy", s.leases_busy);
  n("dropped", s.dropped);
  n("expiredInQueue", s.expired_in_queue);
  n("resent", s.resent);
  n("closesLost", s.closes_lost);
  n("resyncs", s.resyncs);
  n("authFailures", s.auth_failures);
  n("failovers", s.failovers);
  n("replicaAcks", s.replica_acks);
  n("replicaAckShortfalls", s.replica_ack_shortfalls);
  return o;
}

}  // namespace fusebox::node
