// bindings/node/src/registry.cc: NativeRegistry, a fusebox::Registry of keyed
// breakers, and the native halves of Registry.run() and runProviderCall()
// (lib/index.js awaits the action between them; docs/node.md).
//
// A call in flight is a slot in a table owned by the registry object: it
// holds the breaker (a shared_ptr, so the registry counts it as in use and
// never drops it meanwhile) and the permit, or the two provider permits. JS
// sees only the slot's index. Slots are reused from a free list: a hit
// allocates nothing once the table is large enough.
//
// Fleet sharing (options.redis, docs/node.md "Fleet sharing (Redis)"): one
// fusebox::redis::RedisSharedState (the process's for those options,
// fleet_store.h) is the shared_state of every breaker of the default
// template and of the two provider templates. The event loop never waits
// for Redis: acquire() uses TryAcquireWithoutBlocking() and providerStart()
// ProviderCall::StartWithoutBlocking(), and where either would ask the store
// (a view to re-read, the probe lease that ends OPEN) the blocking call is
// made on the libuv pool (fleet_store.h's OnPool) and resolves a promise of
// the slot.
#include "fusebox/registry.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "addon.h"
#include "classify_meta.h"
#include "fleet_store.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/redis/shared_state.h"

namespace fusebox::node {
namespace {

// A JS string's UTF-8 bytes, on the stack when short (keys usually are).
class Utf8Arg {
 public:
  Utf8Arg(Napi::Env env, const Napi::Value& v, const char* what) {
    if (!v.IsString()) throw Napi::TypeError::New(env, std::string(what) + " must be a string");
    size_t length = 0;
    napi_status s = napi_get_value_string_utf8(env, v, stack_, sizeof stack_, &length);
    if (s != napi_ok) throw Napi::Error::New(env, std::string(what) + ": cannot read the string");
    if (length + 1 < sizeof stack_) {
      view_ = std::string_view(stack_, length);
    } else {
      heap_ = v.As<Napi::String>().Utf8Value();
      view_ = heap_;
    }
    if (view_.empty()) throw Napi::TypeError::New(env, std::string(what) + " must not be empty");
  }
  std::string_view view() const { return view_; }

 private:
  char stack_[256];
  std::string heap_;
  std::string_view view_;
};

struct CallSlot {
  std::shared_ptr<CircuitBreaker> breaker;
  std::optional<Permit> permit;
  std::optional<meta::ProviderCall> provider;
  TimePoint start{};
};

Napi::Object ProviderErrorObject(Napi::Env env, const meta::ProviderError& e, Clock& clock) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("code", std::string(meta::ConnCodeName(e.code)));
  o.Set("httpStatus", e.http_status);
  auto opt = [&](const std::optional<std::int64_t>& v) {
    return v ? Napi::Value(Napi::Number::New(env, static_cast<double>(*v)))
             : Napi::Value(env.Null());
  };
  o.Set("metaCode", opt(e.meta_code));
  o.Set("metaSubcode", opt(e.meta_subcode));
  if (e.retry_after) {
    o.Set("retryAfterSeconds", static_cast<double>(e.retry_after->count()));
    o.Set("retryAt", ToMs(clock.Now() + *e.retry_after));
  } else {
    o.Set("retryAfterSeconds", env.Null());
    o.Set("retryAt", env.Null());
  }
  o.Set("circuitOpen", e.circuit_open);
  o.Set("message", e.message());
  return o;
}

class RegistryWrap : public Napi::ObjectWrap<RegistryWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "NativeRegistry",
        {InstanceMethod<&RegistryWrap::Acquire>("acquire"),
         InstanceMethod<&RegistryWrap::Finish>("finish"),
         InstanceMethod<&RegistryWrap::ProviderStart>("providerStart"),
         InstanceMethod<&RegistryWrap::ProviderFinish>("providerFinish"),
         InstanceMethod<&RegistryWrap::StateOf>("stateOf"),
         InstanceMethod<&RegistryWrap::MetricsOf>("metricsOf"),
         InstanceMethod<&RegistryWrap::Size>("size"), InstanceMethod<&RegistryWrap::Sweep>("sweep"),
         InstanceMethod<&RegistryWrap::Keys>("keys"), InstanceMethod<&RegistryWrap::NowMs>("nowMs"),
         InstanceMethod<&RegistryWrap::Close>("close"),
         InstanceMethod<&RegistryWrap::FleetHealth>("fleetHealth")});
  }

  // new NativeRegistry({ maxBreakers?, maxBreakersHard?, idleTtlMs?,
  //                      sweepIntervalMs?, defaults?, clock?, redis? })
  explicit RegistryWrap(const Napi::CallbackInfo& info) : Napi::ObjectWrap<RegistryWrap>(info) {
    Napi::Env env = info.Env();
    RegistryOptions options;
    const Napi::Value arg = info[0];
    if (!arg.IsUndefined() && !arg.IsObject()) {
      throw Napi::TypeError::New(env, "Registry: options must be an object");
    }
    ClockRef clock = ClockFromOptions(env, arg, "Registry");
    options.clock = clock.clock;
    if (arg.IsObject()) {
      const Napi::Object o = arg.As<Napi::Object>();
      auto count = [&](const char* name, std::size_t& out, double min) {
        const Napi::Value v = o.Get(name);
        if (v.IsUndefined()) return;
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
        if (!v.IsNumber() || !(d >= min && d <= 1e9) ||
            static_cast<double>(static_cast<std::int64_t>(d)) != d) {
          throw Napi::RangeError::New(
              env, std::string("Registry: options.") + name + " must be an integer in [" +
                       std::to_string(int(min)) + ", 1e9], got " + v.ToString().Utf8Value());
        }
        out = static_cast<std::size_t>(d);
      };
      auto millis = [&](const char* name, Duration& out) {
        const Napi::Value v = o.Get(name);
        if (v.IsUndefined()) return;
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1;
        if (!v.IsNumber() || !(d > 0 && d <= 1e12)) {
          throw Napi::RangeError::New(env, std::string("Registry: options.") + name +
                                               " must be a number of ms in (0, 1e12], got " +
                                               v.ToString().Utf8Value());
        }
        out = FromMs(d);
      };
      count("maxBreakers", options.max_breakers, 1);
      count("maxBreakersHard", options.max_breakers_hard, 0);
      millis("idleTtlMs", options.idle_timeout);
      millis("sweepIntervalMs", options.sweep_interval);
      ReadConfig(env, o.Get("defaults"), "defaults", options.default_config);
      const Napi::Value redis_option = o.Get("redis");
      if (!redis_option.IsUndefined()) {
        store_ = FleetStore(env, redis_option, "Registry: options.redis");
        options.default_config.shared_state = store_;
      }
    }
    Result<std::unique_ptr<Registry>> created = Registry::Create(std::move(options));
    if (!created)
      throw Napi::RangeError::New(env, "Registry: " + std::string(created.error().message()));
    clock_owner_ = std::move(clock.owner);
    registry_ = std::move(*created);
    if (store_) ShareProviderCircuits(env);
  }

  ~RegistryWrap() override { Shutdown(); }

 private:
  // In-flight calls first: their permits refer to the breakers. The store's
  // threads stop when its last breaker is gone (a call still on the libuv
  // pool holds its breaker until it returns).
  void Shutdown() {
    slots_.clear();
    free_.clear();
    registry_.reset();
    store_.reset();
  }
  // runProviderCall's two circuits (the meta templates) share the store too,
  // as the gateway's do; their probe lease is the gateway's default, 30 s
  // (CircuitBreakerConfig's): the longest a probe may take before another
  // process may probe, should its holder hang or die.
  void ShareProviderCircuits(Napi::Env env) {
    for (const auto& [name, config] :
         {std::pair(meta::kTransientConfigName, meta::TransientCircuitConfig()),
          std::pair(meta::kQuotaConfigName, meta::QuotaCircuitConfig())}) {
      CircuitBreakerConfig shared = config;
      shared.shared_state = store_;
      if (Status s = registry_->AddConfig(std::string(name), std::move(shared)); !s.ok()) {
        throw Napi::Error::New(env, "Registry: " + std::string(s.message()));
      }
    }
  }
  Registry& Reg(Napi::Env env) {
    if (!registry_) throw Napi::Error::New(env, "Registry: closed");
    return *registry_;
  }
  std::uint32_t Admit(std::shared_ptr<CircuitBreaker>& breaker, Permit permit) {
    const std::uint32_t i = NewSlot();
    CallSlot& slot = slots_[i];
    slot.breaker = std::move(breaker);
    slot.permit.emplace(std::move(permit));
    slot.start = registry_->clock().Now();
    return i;
  }
  static Napi::Value Refused(Napi::Env env, const Status& status) {
    const std::optional<TimePoint> at = status.retry_at();
    return Napi::Number::New(env, at ? -ToMs(*at) : -std::numeric_limits<double>::infinity());
  }

  std::uint32_t NewSlot() {
    if (free_.empty()) {
      slots_.emplace_back();
      return static_cast<std::uint32_t>(slots_.size() - 1);
    }
    const std::uint32_t i = free_.back();
    free_.pop_back();
    return i;
  }
  CallSlot& SlotArg(const Napi::CallbackInfo& info) {
    const double d = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(d >= 0 && d < static_cast<double>(slots_.size()))) {
      throw Napi::RangeError::New(info.Env(), "NativeRegistry: no such call");
    }
    CallSlot& slot = slots_[static_cast<std::size_t>(d)];
    if (!slot.breaker && !slot.provider)
      throw Napi::Error::New(info.Env(), "NativeRegistry: call already finished");
    return slot;
  }
  void FreeSlot(std::uint32_t i) {
    slots_[i] = CallSlot{};
    free_.push_back(i);
  }

  // acquire(key): a slot index >= 0 when permitted; else -retryAt (the
  // clock's ms), or -Infinity when the breaker cannot say. With a shared
  // state, a call that would wait for the store (the breaker's first, the
  // one after a reconnect, the probe that ends OPEN) gets a promise of that
  // number instead, settled once a libuv thread has asked the store.
  Napi::Value Acquire(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const Utf8Arg key(env, info[0], "Registry.run(key): key");
    Result<std::shared_ptr<CircuitBreaker>> breaker = Reg(env).Get(key.view());
    if (!breaker) throw Napi::Error::New(env, std::string(breaker.error().message()));
    std::optional<Result<Permit>> permit = (*breaker)->TryAcquireWithoutBlocking();
    if (!permit) {
      return AcquireOnPool(
          env, info.This().As<Napi::Object>(), std::move(*breaker),
          [this](Napi::Env e, std::shared_ptr<CircuitBreaker>& b, Result<Permit>& p) {
            if (!p) return Refused(e, p.error());
            if (!registry_) {
              p->Ignore();
              throw Napi::Error::New(e, "Registry: closed");
            }
            return Napi::Value(Napi::Number::New(e, Admit(b, std::move(*p))));
          });
    }
    if (!*permit) return Refused(env, permit->error());
    return Napi::Number::New(env, Admit(*breaker, std::move(**permit)));
  }

  // finish(slot, outcome, openForMs?): 0 success, 1 failure, 2 no outcome
  // (permit given back), 3 a failure that opens the breaker for openForMs
  // (Outcome::OpenFor: a Retry-After the caller read). The duration is the
  // registry clock's time since acquire().
  Napi::Value Finish(const Napi::CallbackInfo& info) {
    CallSlot& slot = SlotArg(info);
    const int outcome = info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 2;
    const Duration elapsed = Reg(info.Env()).clock().Now() - slot.start;
    if (outcome == 0) {
      slot.permit->Success(elapsed);
    } else if (outcome == 1) {
      slot.permit->Failure(elapsed);
    } else if (outcome == 3) {
      const double ms = info[2].IsNumber() ? info[2].As<Napi::Number>().DoubleValue() : 0;
      slot.permit->Record(ms > 0 ? Outcome::OpenFor(FromMs(ms), elapsed)
                                 : Outcome::Failure(elapsed));
    }
    FreeSlot(static_cast<std::uint32_t>(info[0].As<Napi::Number>().Int32Value()));
    return info.Env().Undefined();
  }

  // providerStart(key): a slot index, or the rejection as a ProviderError
  // object (CONN_003 or CONN_008, circuitOpen true). With a shared state, a
  // start that would wait for the store (as acquire()'s would) gets a promise
  // of that value instead, settled once a libuv thread has completed it.
  Napi::Value ProviderStart(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const Utf8Arg key(env, info[0], "runProviderCall(registry, key): key");
    std::variant<meta::ProviderCall, meta::ProviderError, meta::PendingProviderCall> started =
        meta::ProviderCall::StartWithoutBlocking(Reg(env), key.view());
    if (auto* pending = std::get_if<meta::PendingProviderCall>(&started)) {
      return OnPool(
          env, "fusebox:providerStart", info.This().As<Napi::Object>(),
          [start = std::move(*pending)]() mutable { return std::move(start).Complete(); },
          [this](Napi::Env e, std::variant<meta::ProviderCall, meta::ProviderError>& done) {
            // Closed meanwhile: the call is dropped (its permits given back).
            if (!registry_) throw Napi::Error::New(e, "Registry: closed");
            return ProviderStarted(e, done);
          });
    }
    return ProviderStarted(env, started);
  }
  // The value of a start that decided (`started` holds a ProviderCall or a
  // ProviderError): a slot, or the refusal's object.
  template <typename Started>
  Napi::Value ProviderStarted(Napi::Env env, Started& started) {
    if (auto* refused = std::get_if<meta::ProviderError>(&started)) {
      return ProviderErrorObject(env, *refused, registry_->clock());
    }
    const std::uint32_t i = NewSlot();
    slots_[i].provider.emplace(std::get<meta::ProviderCall>(std::move(started)));
    return Napi::Number::New(env, i);
  }

  // providerFinish(slot, kind, response?): kind 0 success, 1 an error
  // response { status, headers, body } (returns its ProviderError object),
  // 2 an exception (a transient failure), 3 no outcome.
  Napi::Value ProviderFinish(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    CallSlot& slot = SlotArg(info);
    const auto index = static_cast<std::uint32_t>(info[0].As<Napi::Number>().Int32Value());
    const int kind = info[1].IsNumber() ? info[1].As<Napi::Number>().Int32Value() : 3;
    Napi::Value result = env.Undefined();
    if (kind == 0) {
      std::move(*slot.provider).Finish(nullptr);
    } else if (kind == 1) {
      std::optional<meta::Response> response;
      try {
        response = ReadMetaResponse(env, info[2], "runProviderCall: the action's error response");
      } catch (...) {
        std::move(*slot.provider).FinishWithException();
        FreeSlot(index);
        throw;
      }
      const meta::ProviderError e = meta::ProviderError::FromResponse(*response);
      std::move(*slot.provider).Finish(&e);
      result = ProviderErrorObject(env, e, registry_->clock());
    } else if (kind == 2) {
      std::move(*slot.provider).FinishWithException();
    }
    FreeSlot(index);
    return result;
  }

  Napi::Value StateOf(const Napi::CallbackInfo& info) {
    const Utf8Arg key(info.Env(), info[0], "Registry.state(key): key");
    const std::shared_ptr<CircuitBreaker> b = Reg(info.Env()).Find(key.view());
    if (!b) return info.Env().Undefined();
    return Napi::String::New(info.Env(), std::string(StateName(b->state())));
  }
  Napi::Value MetricsOf(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    const Utf8Arg key(env, info[0], "Registry.metrics(key): key");
    const std::shared_ptr<CircuitBreaker> b = Reg(env).Find(key.view());
    if (!b) return env.Undefined();
    return MetricsObject(env, b->metrics());
  }
  Napi::Value Size(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(Reg(info.Env()).size()));
  }
  Napi::Value Sweep(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(Reg(info.Env()).Sweep()));
  }
  Napi::Value Keys(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::vector<std::string> keys;
    Reg(env).ForEach([&](const std::string& key, CircuitBreaker&) { keys.push_back(key); });
    Napi::Array a = Napi::Array::New(env, keys.size());
    for (std::size_t i = 0; i < keys.size(); ++i) a.Set(static_cast<uint32_t>(i), keys[i]);
    return a;
  }
  Napi::Value NowMs(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), ToMs(Reg(info.Env()).clock().Now()));
  }
  // close(): drops every breaker and the store reference, on the libuv pool
  // (the store's last user stops its threads there, once the calls still
  // asking it return). Idempotent.
  Napi::Value Close(const Napi::CallbackInfo& info) {
    std::shared_ptr<redis::RedisSharedState> store = store_;
    Shutdown();
    if (store) (new StoreCloser(info.Env(), std::move(store)))->Queue();
    return info.Env().Undefined();
  }
  // fleetHealth(): undefined without options.redis; else { connected, and
  // the store's counters }.
  Napi::Value FleetHealth(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (!store_) return env.Undefined();
    return FleetHealthObject(env, *store_);
  }

  // Declared first: destroyed last.
  std::shared_ptr<testing::ManualClock> clock_owner_;
  std::shared_ptr<redis::RedisSharedState> store_;
  std::unique_ptr<Registry> registry_;
  std::vector<CallSlot> slots_;
  std::vector<std::uint32_t> free_;
};

Napi::Value ProviderCircuitKey(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 3 || !info[0].IsString() || !info[1].IsString() || !info[2].IsString()) {
    throw Napi::TypeError::New(env,
                               "providerCircuitKey(provider, workload, subject): three strings");
  }
  const std::string workload = info[1].As<Napi::String>().Utf8Value();
  meta::Workload w{};
  if (workload == "read") {
    w = meta::Workload::kRead;
  } else if (workload == "publish") {
    w = meta::Workload::kPublish;
  } else if (workload == "reply") {
    w = meta::Workload::kReply;
  } else if (workload == "token-refresh") {
    w = meta::Workload::kTokenRefresh;
  } else {
    throw Napi::RangeError::New(env,
                                "providerCircuitKey: workload must be read, publish, reply or "
                                "token-refresh, got \"" +
                                    workload + "\"");
  }
  Result<std::string> key = meta::ProviderCircuitKey(info[0].As<Napi::String>().Utf8Value(), w,
                                                     info[2].As<Napi::String>().Utf8Value());
  if (!key)
    throw Napi::RangeError::New(env, "providerCircuitKey: " + std::string(key.error().message()));
  return Napi::String::New(env, *key);
}

}  // namespace

void InitRegistry(Napi::Env env, Napi::Object exports) {
  exports.Set("NativeRegistry", RegistryWrap::Define(env));
  exports.Set("providerCircuitKey",
              Napi::Function::New<ProviderCircuitKey>(env, "providerCircuitKey"));
}

}  // namespace fusebox::node
