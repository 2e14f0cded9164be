// bindings/node/src/core_breaker.cc: CoreBreaker, one fusebox::CircuitBreaker
// driven from JS by tryAcquire() then onSuccess()/onError() (docs/node.md).
//
// A permit taken by tryAcquire() waits natively in a slot of a table owned by
// the CoreBreaker; JS sees only the slot's index and hands it back with the
// outcome, so each outcome is recorded against its own call's permit (and
// state epoch) whatever order concurrent calls finish in. Slots are reused
// from a free list (as in registry.cc): the hot path allocates nothing once
// the table is large enough.
//
// Fleet sharing (options.redis, docs/node.md): the breaker's name is its key
// on a fusebox::redis::RedisSharedState that every CoreBreaker naming the
// same Redis shares (fleet_store.h). The event loop never waits for Redis:
// tryAcquire() uses TryAcquireWithoutBlocking(), and where that would ask the
// store, an AcquireWorker asks it on the libuv pool and tryAcquire() returns
// a promise of its usual number.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "addon.h"
#include "fleet_store.h"
#include "fusebox/circuit_breaker.h"

namespace fusebox::node {
namespace {

class CoreBreakerWrap : public Napi::ObjectWrap<CoreBreakerWrap> {
 public:
  static Napi::Function Define(Napi::Env env) {
    return DefineClass(
        env, "CoreBreaker",
        {InstanceMethod<&CoreBreakerWrap::TryAcquire>("tryAcquire"),
         InstanceMethod<&CoreBreakerWrap::OnSuccess>("onSuccess"),
         InstanceMethod<&CoreBreakerWrap::OnError>("onError"),
         InstanceMethod<&CoreBreakerWrap::Release>("release"),
         InstanceAccessor<&CoreBreakerWrap::GetState>("state"),
         InstanceAccessor<&CoreBreakerWrap::GetName>("name"),
         InstanceAccessor<&CoreBreakerWrap::GetPending>("pendingPermits"),
         InstanceMethod<&CoreBreakerWrap::Metrics>("metrics"),
         InstanceMethod<&CoreBreakerWrap::NowMs>("nowMs"),
         InstanceMethod<&CoreBreakerWrap::TransitionToOpen>("transitionToOpen"),
         InstanceMethod<&CoreBreakerWrap::TransitionToClosed>("transitionToClosed"),
         InstanceMethod<&CoreBreakerWrap::TransitionToHalfOpen>("transitionToHalfOpen"),
         InstanceMethod<&CoreBreakerWrap::Disable>("transitionToDisabled"),
         InstanceMethod<&CoreBreakerWrap::ForceOpen>("transitionToForcedOpen"),
         InstanceMethod<&CoreBreakerWrap::MetricsOnly>("transitionToMetricsOnly"),
         InstanceMethod<&CoreBreakerWrap::Reset>("reset"),
         InstanceMethod<&CoreBreakerWrap::Close>("close"),
         InstanceAccessor<&CoreBreakerWrap::GetClosed>("closed"),
         InstanceMethod<&CoreBreakerWrap::FleetHealth>("fleetHealth")});
  }

  // new CoreBreaker(config?, { clock?, name?, redis? })
  explicit CoreBreakerWrap(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<CoreBreakerWrap>(info) {
    Napi::Env env = info.Env();
    CircuitBreakerConfig config;
    ReadConfig(env, info[0], "resilience4j", config);
    ClockRef clock = ClockFromOptions(env, info[1], "CoreBreaker");
    std::string name = "node";
    Napi::Value redis_option = env.Undefined();
    if (info[1].IsObject()) {
      const Napi::Object o = info[1].As<Napi::Object>();
      const Napi::Value n = o.Get("name");
      redis_option = o.Get("redis");
      if (!n.IsUndefined()) {
        if (!n.IsString())
          throw Napi::TypeError::New(env, "CoreBreaker: options.name must be a string");
        name = n.As<Napi::String>().Utf8Value();
      }
      if (!redis_option.IsUndefined() && (n.IsUndefined() || name.empty())) {
        // A default shared by every process would merge unrelated circuits.
        throw Napi::TypeError::New(env,
                                   "CoreBreaker: options.redis needs options.name, the circuit's "
                                   "key in the fleet (e.g. 'graph:read:1')");
      }
    }
    if (!redis_option.IsUndefined()) {
      store_ = FleetStore(env, redis_option, "CoreBreaker: options.redis");
      config.shared_state = store_;
    }
    Result<std::unique_ptr<CircuitBreaker>> created =
        CircuitBreaker::Create(std::move(name), std::move(config), *clock.clock);
    if (!created)
      throw Napi::RangeError::New(env, "resilience4j: " + std::string(created.error().message()));
    clock_owner_ = std::move(clock.owner);
    breaker_ = std::shared_ptr<CircuitBreaker>(std::move(*created));
    name_ = breaker_->name();
    // An array, not the strings: Node-API before 10.0 refers to objects only.
    Napi::Array names = Napi::Array::New(env, kStates);
    for (std::uint32_t i = 0; i < kStates; ++i) {
      names.Set(i, Napi::String::New(env, std::string(StateName(static_cast<State>(i)))));
    }
    state_names_ = Napi::Persistent(names);
  }

  // Collected without close(): a store this breaker was the last user of
  // joins its threads here, on the JS thread (as a Registry's does).
  ~CoreBreakerWrap() override {
    // Permits first: each refers to the breaker.
    slots_.clear();
  }

 private:
  // A slot index >= 0 when permitted (the permit waits in it for
  // onSuccess/onError/release); else -retryAt in the clock's milliseconds, or
  // -Infinity when the breaker cannot say (FORCED_OPEN without expiry,
  // HALF_OPEN with every probe out).
  // With options.redis, a call that would ask the store gets a promise of
  // that number instead, settled once a libuv thread has asked it.
  Napi::Value TryAcquire(const Napi::CallbackInfo& info) {
    // One test for both: a store to ask, or closed (TryAcquireShared throws).
    if (store_ || !breaker_) return TryAcquireShared(info);
    Result<Permit> permit = breaker_->TryAcquire();
    if (!permit) return Refused(info.Env(), permit.error());
    return Napi::Number::New(info.Env(), Admit(std::move(*permit)));
  }

  // This and the other members marked cold are rare calls: marked so, they
  // leave gcc's inlining budget to the hot callbacks (tryAcquire, onSuccess:
  // about 20 instructions less per pair under callgrind).
  [[gnu::cold]] Napi::Value TryAcquireShared(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    std::optional<Result<Permit>> permit = Breaker(env).TryAcquireWithoutBlocking();
    if (permit) {
      if (!*permit) return Refused(env, permit->error());
      return Napi::Number::New(env, Admit(std::move(**permit)));
    }
    return AcquireOnPool(
        env, info.This().As<Napi::Object>(), breaker_,
        [this](Napi::Env e, std::shared_ptr<CircuitBreaker>& b, Result<Permit>& p) {
          if (breaker_ != b) {
            // close() ran meanwhile: this may be the breaker's last
            // reference, and so the store's.
            if (p) p->Ignore();
            (new StoreCloser(e, std::move(b)))->Queue();
            ThrowClosed(e);
          }
          if (!p) return Refused(e, p.error());
          return Napi::Value(Napi::Number::New(e, Admit(std::move(*p))));
        });
  }

  static Napi::Value Refused(Napi::Env env, const Status& status) {
    const std::optional<TimePoint> at = status.retry_at();
    return Napi::Number::New(env, at ? -ToMs(*at) : -std::numeric_limits<double>::infinity());
  }

  // Moves `permit` into a free slot, returns the slot's index.
  std::uint32_t Admit(Permit&& permit) {
    std::uint32_t i = 0;
    if (free_.empty()) {
      i = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back(std::move(permit));
      starts_.emplace_back();
    } else {
      i = free_.back();
      free_.pop_back();
      slots_[i].emplace(std::move(permit));
    }
    starts_[i] = breaker_->clock().Now();
    return i;
  }

  // The permit in the slot info[0], taken out and the slot freed, with the
  // call's duration: info[1] in ms, or when it is not a number the time since
  // tryAcquire() on the breaker's clock. Throws an Error with code ENOPERMIT
  // naming `method` for anything but a pending slot's index.
  Permit TakePermit(const Napi::CallbackInfo& info, const char* method, Duration* elapsed) {
    const double d = info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : -1;
    if (!(d >= 0 && d < static_cast<double>(slots_.size())) ||
        static_cast<double>(static_cast<std::size_t>(d)) != d ||
        !slots_[static_cast<std::size_t>(d)]) {
      Breaker(info.Env());  // a closed breaker says so (close() emptied the table)
      // Only a number is printed: converting anything else could run JS.
      const std::string shown =
          info[0].IsNumber() ? info[0].ToString().Utf8Value() : std::string("(not a number)");
      Napi::Error e = Napi::Error::New(
          info.Env(), std::string("CoreBreaker.") + method + "(slot): no pending permit in slot " +
                          shown + " (pass the slot tryAcquire() returned, once)");
      e.Set("code", Napi::String::New(info.Env(), "ENOPERMIT"));
      throw e;
    }
    const auto i = static_cast<std::uint32_t>(d);
    if (elapsed != nullptr) {
      *elapsed = info.Length() > 1 && info[1].IsNumber()
                     ? FromMs(info[1].As<Napi::Number>().DoubleValue())
                     : breaker_->clock().Now() - starts_[i];
    }
    Permit p = std::move(*slots_[i]);
    slots_[i].reset();
    free_.push_back(i);
    return p;
  }

  // Each outcome returns the breaker's state after it (as `state` does): a
  // caller watching for transitions needs no second call.
  Napi::Value OnSuccess(const Napi::CallbackInfo& info) {
    Duration elapsed{};
    TakePermit(info, "onSuccess", &elapsed).Success(elapsed);
    return StateValue();
  }
  Napi::Value OnError(const Napi::CallbackInfo& info) {
    Duration elapsed{};
    TakePermit(info, "onError", &elapsed).Failure(elapsed);
    return StateValue();
  }
  // Gives the slot's permit back without an outcome (the call did not happen,
  // or its outcome says nothing about the dependency): nothing is recorded, a
  // half-open probe's place is freed.
  Napi::Value Release(const Napi::CallbackInfo& info) {
    // The permit is given back as the temporary is destroyed, before the state is read.
    static_cast<void>(TakePermit(info, "release", nullptr));
    return StateValue();
  }

  // The state's name, from strings made once per breaker.
  Napi::Value StateValue() {
    return state_names_.Value().Get(static_cast<std::uint32_t>(breaker_->state()));
  }
  Napi::Value GetState(const Napi::CallbackInfo& info) {
    Breaker(info.Env());
    return StateValue();
  }
  Napi::Value GetName(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), name_);
  }
  Napi::Value GetPending(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(slots_.size() - free_.size()));
  }
  Napi::Value Metrics(const Napi::CallbackInfo& info) {
    return MetricsObject(info.Env(), Breaker(info.Env()).metrics());
  }
  Napi::Value NowMs(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), ToMs(Breaker(info.Env()).clock().Now()));
  }

  static void Check(Napi::Env env, const Status& s) {
    if (!s.ok()) throw Napi::Error::New(env, std::string(s.message()));
  }
  Napi::Value TransitionToOpen(const Napi::CallbackInfo& info) {
    Check(info.Env(), Breaker(info.Env()).TransitionToOpen());
    return info.Env().Undefined();
  }
  Napi::Value TransitionToClosed(const Napi::CallbackInfo& info) {
    Breaker(info.Env()).TransitionToClosed();
    return info.Env().Undefined();
  }
  Napi::Value TransitionToHalfOpen(const Napi::CallbackInfo& info) {
    Check(info.Env(), Breaker(info.Env()).TransitionToHalfOpen());
    return info.Env().Undefined();
  }
  Napi::Value Disable(const Napi::CallbackInfo& info) {
    Breaker(info.Env()).Disable();
    return info.Env().Undefined();
  }
  Napi::Value ForceOpen(const Napi::CallbackInfo& info) {
    Breaker(info.Env()).ForceOpen();
    return info.Env().Undefined();
  }
  Napi::Value MetricsOnly(const Napi::CallbackInfo& info) {
    Breaker(info.Env()).MetricsOnly();
    return info.Env().Undefined();
  }
  Napi::Value Reset(const Napi::CallbackInfo& info) {
    Breaker(info.Env()).Reset();
    return info.Env().Undefined();
  }

  // close(): gives every pending permit back (no outcome), drops the breaker
  // and its store reference on the libuv pool (the last user of a store
  // joins its threads there). Later calls throw ECLOSED. Idempotent.
  [[gnu::cold]] Napi::Value Close(const Napi::CallbackInfo& info) {
    if (!breaker_) return info.Env().Undefined();
    slots_.clear();
    free_.clear();
    starts_.clear();
    // The breaker first: it unsubscribes from the store it holds.
    (new StoreCloser(info.Env(), std::move(breaker_)))->Queue();
    if (store_) (new StoreCloser(info.Env(), std::move(store_)))->Queue();
    breaker_.reset();
    store_.reset();
    return info.Env().Undefined();
  }
  [[gnu::cold]] Napi::Value GetClosed(const Napi::CallbackInfo& info) {
    return Napi::Boolean::New(info.Env(), !breaker_);
  }
  // fleetHealth(): undefined without options.redis (or once closed); else
  // the shared store's { connected, counters } (as Registry's).
  [[gnu::cold]] Napi::Value FleetHealth(const Napi::CallbackInfo& info) {
    if (!store_) return info.Env().Undefined();
    return FleetHealthObject(info.Env(), *store_);
  }

  // Out of line and cold: inlined into every method, the throw would grow
  // this file past gcc's inlining budget, and the hot callbacks would call
  // node-addon-api's helpers instead of inlining them.
  [[noreturn, gnu::cold, gnu::noinline]] static void ThrowClosed(Napi::Env env) {
    Napi::Error e = Napi::Error::New(env, "CoreBreaker: closed");
    e.Set("code", Napi::String::New(env, "ECLOSED"));
    throw e;
  }
  CircuitBreaker& Breaker(Napi::Env env) {
    if (!breaker_) ThrowClosed(env);
    return *breaker_;
  }

  // Declared first: destroyed after the breaker that reads it.
  std::shared_ptr<testing::ManualClock> clock_owner_;
  // The shared store (options.redis), also held by the breaker's config.
  std::shared_ptr<redis::RedisSharedState> store_;
  // Shared with an AcquireWorker asking the store; null once closed.
  std::shared_ptr<CircuitBreaker> breaker_;
  std::string name_;
  std::vector<std::optional<Permit>> slots_;
  std::vector<TimePoint> starts_;  // by slot: when tryAcquire() admitted it
  std::vector<std::uint32_t> free_;
  // StateName() of each State's value (kClosed .. kForcedClosed).
  static constexpr std::uint32_t kStates = static_cast<std::uint32_t>(State::kForcedClosed) + 1;
  Napi::Reference<Napi::Array> state_names_;
};

// fleetStores(): the Redis stores alive in the process (fleet_store.h), one
// per distinct options.redis in use.
Napi::Value FleetStores(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(FleetStoreCount()));
}

}  // namespace

void InitCoreBreaker(Napi::Env env, Napi::Object exports) {
  exports.Set("CoreBreaker", CoreBreakerWrap::Define(env));
  exports.Set("fleetStores", Napi::Function::New<FleetStores>(env, "fleetStores"));
}

}  // namespace fusebox::node
