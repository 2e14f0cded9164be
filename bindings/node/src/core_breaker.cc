// bindings/node/src/core_breaker.cc: CoreBreaker, one fusebox::CircuitBreaker
// driven from JS by tryAcquire() then onSuccess()/onError() (docs/node.md).
//
// A permit taken by tryAcquire() waits natively in a slot of a table owned by
// the CoreBreaker; JS sees only the slot's index and hands it back with the
// outcome, so each outcome is recorded against its own call's permit (and
// state epoch) whatever order concurrent calls finish in. Slots are reused
// from a free list (as in registry.cc): the hot path allocates nothing once
// the table is large enough.
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "addon.h"
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
         InstanceMethod<&CoreBreakerWrap::Reset>("reset")});
  }

  // new CoreBreaker(config?, { clock?, name? })
  explicit CoreBreakerWrap(const Napi::CallbackInfo& info)
      : Napi::ObjectWrap<CoreBreakerWrap>(info) {
    Napi::Env env = info.Env();
    CircuitBreakerConfig config;
    ReadConfig(env, info[0], "resilience4j", config);
    ClockRef clock = ClockFromOptions(env, info[1], "CoreBreaker");
    std::string name = "node";
    if (info[1].IsObject()) {
      const Napi::Value n = info[1].As<Napi::Object>().Get("name");
      if (!n.IsUndefined()) {
        if (!n.IsString())
          throw Napi::TypeError::New(env, "CoreBreaker: options.name must be a string");
        name = n.As<Napi::String>().Utf8Value();
      }
    }
    Result<std::unique_ptr<CircuitBreaker>> created =
        CircuitBreaker::Create(std::move(name), std::move(config), *clock.clock);
    if (!created)
      throw Napi::RangeError::New(env, "resilience4j: " + std::string(created.error().message()));
    clock_owner_ = std::move(clock.owner);
    breaker_ = std::move(*created);
    // An array, not the strings: Node-API before 10.0 refers to objects only.
    Napi::Array names = Napi::Array::New(env, kStates);
    for (std::uint32_t i = 0; i < kStates; ++i) {
      names.Set(i, Napi::String::New(env, std::string(StateName(static_cast<State>(i)))));
    }
    state_names_ = Napi::Persistent(names);
  }

  ~CoreBreakerWrap() override {
    // Permits first: each refers to the breaker.
    slots_.clear();
  }

 private:
  // A slot index >= 0 when permitted (the permit waits in it for
  // onSuccess/onError/release); else -retryAt in the clock's milliseconds, or
  // -Infinity when the breaker cannot say (FORCED_OPEN without expiry,
  // HALF_OPEN with every probe out).
  Napi::Value TryAcquire(const Napi::CallbackInfo& info) {
    Result<Permit> permit = breaker_->TryAcquire();
    if (!permit) {
      const std::optional<TimePoint> at = permit.error().retry_at();
      return Napi::Number::New(info.Env(),
                               at ? -ToMs(*at) : -std::numeric_limits<double>::infinity());
    }
    std::uint32_t i = 0;
    if (free_.empty()) {
      i = static_cast<std::uint32_t>(slots_.size());
      slots_.emplace_back(std::move(*permit));
      starts_.emplace_back();
    } else {
      i = free_.back();
      free_.pop_back();
      slots_[i].emplace(std::move(*permit));
    }
    starts_[i] = breaker_->clock().Now();
    return Napi::Number::New(info.Env(), i);
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
  Napi::Value GetState(const Napi::CallbackInfo& /*info*/) { return StateValue(); }
  Napi::Value GetName(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), breaker_->name());
  }
  Napi::Value GetPending(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(slots_.size() - free_.size()));
  }
  Napi::Value Metrics(const Napi::CallbackInfo& info) {
    return MetricsObject(info.Env(), breaker_->metrics());
  }
  Napi::Value NowMs(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), ToMs(breaker_->clock().Now()));
  }

  static void Check(Napi::Env env, const Status& s) {
    if (!s.ok()) throw Napi::Error::New(env, std::string(s.message()));
  }
  Napi::Value TransitionToOpen(const Napi::CallbackInfo& info) {
    Check(info.Env(), breaker_->TransitionToOpen());
    return info.Env().Undefined();
  }
  Napi::Value TransitionToClosed(const Napi::CallbackInfo& info) {
    breaker_->TransitionToClosed();
    return info.Env().Undefined();
  }
  Napi::Value TransitionToHalfOpen(const Napi::CallbackInfo& info) {
    Check(info.Env(), breaker_->TransitionToHalfOpen());
    return info.Env().Undefined();
  }
  Napi::Value Disable(const Napi::CallbackInfo& info) {
    breaker_->Disable();
    return info.Env().Undefined();
  }
  Napi::Value ForceOpen(const Napi::CallbackInfo& info) {
    breaker_->ForceOpen();
    return info.Env().Undefined();
  }
  Napi::Value MetricsOnly(const Napi::CallbackInfo& info) {
    breaker_->MetricsOnly();
    return info.Env().Undefined();
  }
  Napi::Value Reset(const Napi::CallbackInfo& info) {
    breaker_->Reset();
    return info.Env().Undefined();
  }

  // Declared first: destroyed after the breaker that reads it.
  std::shared_ptr<testing::ManualClock> clock_owner_;
  std::unique_ptr<CircuitBreaker> breaker_;
  std::vector<std::optional<Permit>> slots_;
  std::vector<TimePoint> starts_;  // by slot: when tryAcquire() admitted it
  std::vector<std::uint32_t> free_;
  // StateName() of each State's value (kClosed .. kForcedClosed).
  static constexpr std::uint32_t kStates = static_cast<std::uint32_t>(State::kForcedClosed) + 1;
  Napi::Reference<Napi::Array> state_names_;
};

}  // namespace

void InitCoreBreaker(Napi::Env env, Napi::Object exports) {
  exports.Set("CoreBreaker", CoreBreakerWrap::Define(env));
}

}  // namespace fusebox::node
