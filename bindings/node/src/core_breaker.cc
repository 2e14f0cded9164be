// bindings/node/src/core_breaker.cc: CoreBreaker, one fusebox::CircuitBreaker
// driven from JS by tryAcquire() then onSuccess()/onError() (docs/node.md).
//
// A permit taken by tryAcquire() waits natively in a FIFO ring until an
// outcome or release() consumes it, oldest first: JS code that runs calls
// concurrently on one breaker reports outcomes in completion order, and each
// is recorded against the oldest permit still pending (the state epoch a
// permit carries decides, in fusebox's default compatibility, whether its
// outcome still counts; docs/semantics.md). The ring grows by doubling and is
// never shrunk: the hot path allocates nothing once it is large enough.
#include <cstddef>
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

class PermitRing {
 public:
  void Push(Permit permit) {
    if (size_ == slots_.size()) Grow();
    slots_[(head_ + size_) % slots_.size()].emplace(std::move(permit));
    ++size_;
  }
  // The oldest permit, or nullopt.
  std::optional<Permit> Pop() {
    if (size_ == 0) return std::nullopt;
    std::optional<Permit> p = std::move(slots_[head_]);
    slots_[head_].reset();
    head_ = (head_ + 1) % slots_.size();
    --size_;
    return p;
  }
  std::size_t size() const { return size_; }

 private:
  void Grow() {
    std::vector<std::optional<Permit>> grown(slots_.empty() ? 16 : slots_.size() * 2);
    for (std::size_t i = 0; i < size_; ++i) {
      grown[i] = std::move(slots_[(head_ + i) % slots_.size()]);
    }
    slots_ = std::move(grown);
    head_ = 0;
  }

  std::vector<std::optional<Permit>> slots_;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

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
  }

  ~CoreBreakerWrap() override {
    // Permits first: each refers to the breaker.
    while (permits_.Pop()) {
    }
  }

 private:
  // 0 when permitted (the permit waits for onSuccess/onError/release), else
  // retryAt in the clock's milliseconds, or Infinity when the breaker cannot
  // say (FORCED_OPEN without expiry, HALF_OPEN with every probe out).
  Napi::Value TryAcquire(const Napi::CallbackInfo& info) {
    Result<Permit> permit = breaker_->TryAcquire();
    if (permit) {
      permits_.Push(std::move(*permit));
      return Napi::Number::New(info.Env(), 0);
    }
    const std::optional<TimePoint> at = permit.error().retry_at();
    return Napi::Number::New(info.Env(), at ? ToMs(*at) : std::numeric_limits<double>::infinity());
  }

  Permit TakePermit(const Napi::CallbackInfo& info, const char* method) {
    std::optional<Permit> p = permits_.Pop();
    if (!p) {
      Napi::Error e =
          Napi::Error::New(info.Env(), std::string("CoreBreaker.") + method +
                                           ": no pending permit (call tryAcquire() first)");
      e.Set("code", Napi::String::New(info.Env(), "ENOPERMIT"));
      throw e;
    }
    return std::move(*p);
  }

  static Duration DurationArg(const Napi::CallbackInfo& info) {
    return info.Length() > 0 && info[0].IsNumber()
               ? FromMs(info[0].As<Napi::Number>().DoubleValue())
               : Duration::zero();
  }

  Napi::Value OnSuccess(const Napi::CallbackInfo& info) {
    TakePermit(info, "onSuccess").Success(DurationArg(info));
    return info.Env().Undefined();
  }
  Napi::Value OnError(const Napi::CallbackInfo& info) {
    TakePermit(info, "onError").Failure(DurationArg(info));
    return info.Env().Undefined();
  }
  // Gives the oldest permit back without an outcome (the call did not happen).
  Napi::Value Release(const Napi::CallbackInfo& info) {
    const Permit given_back = TakePermit(info, "release");
    return info.Env().Undefined();
  }

  Napi::Value GetState(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), std::string(StateName(breaker_->state())));
  }
  Napi::Value GetName(const Napi::CallbackInfo& info) {
    return Napi::String::New(info.Env(), breaker_->name());
  }
  Napi::Value GetPending(const Napi::CallbackInfo& info) {
    return Napi::Number::New(info.Env(), static_cast<double>(permits_.size()));
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
  PermitRing permits_;
};

}  // namespace

void InitCoreBreaker(Napi::Env env, Napi::Object exports) {
  exports.Set("CoreBreaker", CoreBreakerWrap::Define(env));
}

}  // namespace fusebox::node
