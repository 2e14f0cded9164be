// apps/fusebox/common.h: what sim, replay and compare share: the record of a
// breaker's transitions, and the spelling of times and rates in text and JSON.
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_FUSEBOX_COMMON_H_
#define FUSEBOX_APPS_FUSEBOX_COMMON_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"

namespace fusebox::app {

// JSON objects keep their keys in the order written: {"t", "call", ...}.
using Json = nlohmann::ordered_json;

// One transition, with times relative to the start of the run.
struct Transition {
  State from = State::kClosed;
  State to = State::kClosed;
  TransitionReason reason = TransitionReason::kOperator;
  // The window when the transition was decided.
  CircuitBreakerMetrics counts;
  Duration at = Duration::zero();
  // How long the new state lasts, when it has an end (OPEN).
  std::optional<Duration> lasts;
};

// "CLOSED>OPEN".
std::string TransitionLabel(const Transition& t);

// Collects a breaker's transitions as they happen. Listeners run on the thread
// that caused the event, after the breaker's lock is released; the simulator
// and the replayer drive everything from one thread, so Take() after each step
// returns exactly what that step caused, in order.
class TransitionLog : public CircuitBreakerListener {
 public:
  explicit TransitionLog(TimePoint start) : start_(start) {}
  unsigned interests() const override { return kTransitionEvents; }
  void OnTransition(const TransitionEvent& e) override;
  // The transitions since the last Take().
  std::vector<Transition> Take();

 private:
  TimePoint start_;
  std::vector<Transition> pending_;
};

// A duration as seconds for people: "3", "0.25", "4.004" (at most 3 decimals,
// trailing zeros dropped). Units are the caller's: "3 s", "3초".
std::string SecondsText(Duration d);

// A rate in percent for people: "50", "33.3".
std::string PercentText(float rate);

// A float as JSON shows it: an integer when whole (-1, 50), else the shortest
// decimal that reads back as the same float (33.333332, not 33.33333206176758).
Json JsonFloat(float f);

// Milliseconds since the start as a JSON number: an integer when whole.
Json JsonMillis(Duration d);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_COMMON_H_
