// bindings/node/src/addon.cc: the module's entry point, ManualClock, and the
// configuration reader the classes share (addon.h).
#include "addon.h"

#include <cmath>
#include <string>

#include "fusebox/config_names.h"
#include "fusebox/status.h"

namespace fusebox::node {

Napi::Function ManualClockWrap::Define(Napi::Env env) {
  return DefineClass(env, "ManualClock",
                     {InstanceMethod<&ManualClockWrap::Advance>("advance"),
                      InstanceMethod<&ManualClockWrap::NowMs>("nowMs")});
}

ManualClockWrap::ManualClockWrap(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<ManualClockWrap>(info), clock_(std::make_shared<testing::ManualClock>()) {}

// advance(ms): moves the clock forward, running due timers (an automatic
// OPEN -> HALF_OPEN). Returns the new time in ms.
Napi::Value ManualClockWrap::Advance(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    throw Napi::TypeError::New(env, "ManualClock.advance(ms): ms must be a number");
  }
  const double ms = info[0].As<Napi::Number>().DoubleValue();
  if (!std::isfinite(ms) || ms < 0) {
    throw Napi::RangeError::New(
        env, "ManualClock.advance(ms): ms must be finite and >= 0, got " + std::to_string(ms));
  }
  clock_->Advance(FromMs(ms));
  return Napi::Number::New(env, ToMs(clock_->Now()));
}

Napi::Value ManualClockWrap::NowMs(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), ToMs(clock_->Now()));
}

ClockRef ClockFromOptions(Napi::Env env, const Napi::Value& options, std::string_view where) {
  ClockRef ref;
  if (options.IsUndefined() || options.IsNull()) return ref;
  if (!options.IsObject()) {
    throw Napi::TypeError::New(env, std::string(where) + ": options must be an object");
  }
  const Napi::Value clock = options.As<Napi::Object>().Get("clock");
  if (clock.IsUndefined()) return ref;
  const auto* data = env.GetInstanceData<AddonData>();
  if (!clock.IsObject() || !clock.As<Napi::Object>().InstanceOf(data->manual_clock.Value())) {
    throw Napi::TypeError::New(env, std::string(where) + ": options.clock must be a ManualClock");
  }
  ref.owner = ManualClockWrap::Unwrap(clock.As<Napi::Object>())->clock();
  ref.clock = ref.owner.get();
  return ref;
}

Napi::Object MetricsObject(Napi::Env env, const CircuitBreakerMetrics& m) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("state", std::string(StateName(m.state)));
  o.Set("failureRate", static_cast<double>(m.failure_rate));
  o.Set("slowCallRate", static_cast<double>(m.slow_call_rate));
  o.Set("bufferedCalls", m.buffered_calls);
  o.Set("failedCalls", m.failed_calls);
  o.Set("successfulCalls", m.successful_calls);
  o.Set("slowCalls", m.slow_calls);
  o.Set("slowSuccessfulCalls", m.slow_successful_calls);
  o.Set("slowFailedCalls", m.slow_failed_calls);
  o.Set("notPermittedCalls", static_cast<double>(m.not_permitted_calls));
  o.Set("retryAt", m.retry_at ? Napi::Value(Napi::Number::New(env, ToMs(*m.retry_at)))
                              : Napi::Value(env.Null()));
  o.Set("openAttempts", m.open_attempts);
  o.Set("lateOutcomes", static_cast<double>(m.late_outcomes));
  return o;
}

namespace {

// The text SetConfigProperty() reads for one JS value.
std::string ConfigText(Napi::Env env, const Napi::Value& v, const std::string& name) {
  if (v.IsString()) return v.As<Napi::String>().Utf8Value();
  if (v.IsBoolean()) return v.As<Napi::Boolean>().Value() ? "true" : "false";
  if (v.IsNumber()) {
    const double d = v.As<Napi::Number>().DoubleValue();
    if (!std::isfinite(d)) throw Napi::RangeError::New(env, name + " must be finite");
    // JS's own spelling: 50, 0.5, 1e21.
    return v.ToString().Utf8Value();
  }
  throw Napi::TypeError::New(env, name + " must be a number, a string or a boolean, got " +
                                      (v.IsNull()     ? "null"
                                       : v.IsObject() ? "an object"
                                                      : "undefined"));
}

}  // namespace

void ReadConfig(Napi::Env env, const Napi::Value& value, std::string_view prefix,
                CircuitBreakerConfig& config) {
  if (value.IsUndefined()) return;
  if (!value.IsObject() || value.IsArray() || value.IsFunction()) {
    throw Napi::TypeError::New(env, std::string(prefix) + " must be an object");
  }
  const Napi::Object object = value.As<Napi::Object>();
  const Napi::Array names = object.GetPropertyNames();
  for (uint32_t i = 0; i < names.Length(); ++i) {
    const std::string name = names.Get(i).ToString().Utf8Value();
    const std::string qualified = std::string(prefix) + "." + name;
    const Napi::Value v = object.Get(name);
    if (v.IsUndefined()) continue;
    if (FindConfigProperty(name) == nullptr) {
      const Status s = SetConfigProperty(config, name, "");  // the message with its suggestion
      throw Napi::TypeError::New(env, std::string(prefix) + ": " + std::string(s.message()));
    }
    const Status s = SetConfigProperty(config, name, ConfigText(env, v, qualified));
    if (!s.ok())
      throw Napi::TypeError::New(env, std::string(prefix) + "." + std::string(s.message()));
  }
  const Status valid = ValidateConfigProperties(config);
  if (!valid.ok()) {
    throw Napi::RangeError::New(env, std::string(prefix) + "." + std::string(valid.message()));
  }
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  auto* data = new AddonData();
  env.SetInstanceData(data);
  const Napi::Function clock = ManualClockWrap::Define(env);
  data->manual_clock = Napi::Persistent(clock);
  exports.Set("ManualClock", clock);
  InitCoreBreaker(env, exports);
  InitClassifyMeta(env, exports);
  InitRegistry(env, exports);
  return exports;
}

}  // namespace fusebox::node

namespace {

Napi::Object InitModule(Napi::Env env, Napi::Object exports) {
  return fusebox::node::Init(env, exports);
}

}  // namespace

NODE_API_MODULE(fusebox_node, InitModule)
