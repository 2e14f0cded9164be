// bindings/node/src/addon.h: what the fusebox Node addon's classes share:
// the ManualClock wrapper, Resilience4j-named configuration read from a JS
// object, and time conversions (docs/node.md).
//
// Every entry point runs under node-addon-api's C++ exception wrapper
// (NODE_ADDON_API_CPP_EXCEPTIONS_ALL): a Napi::Error becomes that JS error,
// any other exception a plain Error, and none escapes into Node.
#ifndef FUSEBOX_NODE_ADDON_H_
#define FUSEBOX_NODE_ADDON_H_

#include <napi.h>

#include <memory>
#include <string>
#include <string_view>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::node {

// The JS ManualClock: a fusebox::testing::ManualClock shared with every
// breaker and registry created with it (they keep it alive).
class ManualClockWrap : public Napi::ObjectWrap<ManualClockWrap> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit ManualClockWrap(const Napi::CallbackInfo& info);

  const std::shared_ptr<testing::ManualClock>& clock() const { return clock_; }

 private:
  Napi::Value Advance(const Napi::CallbackInfo& info);
  Napi::Value NowMs(const Napi::CallbackInfo& info);

  std::shared_ptr<testing::ManualClock> clock_;
};

// The per-module state: constructors the classes need to recognise.
struct AddonData {
  Napi::FunctionReference manual_clock;
};

// A clock taken from `options.clock` (a ManualClock) or the system clock.
// The shared_ptr is empty for the system clock, which lives for ever.
struct ClockRef {
  Clock* clock = &SystemClock();
  std::shared_ptr<testing::ManualClock> owner;
};
ClockRef ClockFromOptions(Napi::Env env, const Napi::Value& options, std::string_view where);

// Reads `value` (a plain object of Resilience4j property names, as in
// docs/configuration.md) over `config`. Durations are milliseconds numbers or
// strings ("10s", "PT5S"). Throws a TypeError naming `prefix`.<property> for
// an unknown name or a value of the wrong kind, a RangeError for a value out
// of range. undefined leaves `config` unchanged.
void ReadConfig(Napi::Env env, const Napi::Value& value, std::string_view prefix,
                CircuitBreakerConfig& config);

// Milliseconds of `t` on its clock's steady time line (the value
// CoreBreaker.tryAcquire() and rejections carry as retryAt).
inline double ToMs(TimePoint t) { return static_cast<double>(t.time_since_epoch().count()) / 1e6; }
// A non-negative duration from milliseconds; NaN and negatives are zero.
inline Duration FromMs(double ms) {
  if (!(ms > 0)) return Duration::zero();
  if (ms > 1e12) ms = 1e12;
  return Duration(static_cast<Duration::rep>(ms * 1e6));
}

// A breaker's CircuitBreakerMetrics as a JS object (CoreBreaker.metrics(),
// Registry.metrics(key)): camelCase names, retryAt in clock ms or null.
Napi::Object MetricsObject(Napi::Env env, const CircuitBreakerMetrics& m);

// The module's exports (ManualClock and the three below).
Napi::Object Init(Napi::Env env, Napi::Object exports);

// Each adds its classes and functions to `exports`.
void InitCoreBreaker(Napi::Env env, Napi::Object exports);
void InitClassifyMeta(Napi::Env env, Napi::Object exports);
void InitRegistry(Napi::Env env, Napi::Object exports);

}  // namespace fusebox::node

#endif  // FUSEBOX_NODE_ADDON_H_
