// apps/fusebox/sim.h: `fusebox sim`, seed 004's simulator on the real breaker.
//
// Simulate() runs a Scenario through fusebox::CircuitBreaker on a StepClock (a
// ManualClock) and records, call by call, what the dependency did, what the
// breaker decided and every transition, so that the narration, the JSON lines
// and the HTML page all show what the library itself did.
//
// Timing model (seed 004's, as src/seed004_scenarios_test.cc has it):
//   - call k (k = 1..calls) arrives at k * interval + k * hair, where
//     hair = min(1 ms, interval / (2 * calls)): 1 ms for the presets, so call k
//     is at k s + k ms. OPEN ends strictly after its wait (docs/semantics.md
//     point 1) and the seed's page says its screen assumes each call comes a
//     hair after the whole second: the growing hair puts the call that lands on
//     a "wait is over" second just past the boundary, and the hairs never add
//     up to more than half an interval;
//   - a permitted call is acquired and its outcome recorded at that same
//     instant, with the dependency's answer time as its duration (a timeout is
//     a failure lasting `timeout`); the duration only decides slow or not;
//   - a rejected call costs nothing: the fallback answers at once;
//   - breaker timers (automatic transition, maximum wait in HALF_OPEN) fire at
//     their own deadlines between calls.
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_FUSEBOX_SIM_H_
#define FUSEBOX_APPS_FUSEBOX_SIM_H_

#include <cstdint>
#include <ostream>
#include <string_view>
#include <vector>

#include "apps/fusebox/common.h"
#include "apps/fusebox/scenario.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/result.h"

namespace fusebox::app {

enum class CallResult : std::uint8_t { kSuccess, kFailure, kRejected };

// "success", "failure", "rejected".
std::string_view CallResultName(CallResult result);

struct CallRecord {
  // 1-based.
  int call = 0;
  // k * interval: the time the narration shows.
  Duration nominal = Duration::zero();
  // When it happened on the clock, since the start: nominal + k * hair.
  Duration at = Duration::zero();
  // What the dependency does (or would have done, for a rejected call).
  Answer answer;
  CallResult result = CallResult::kSuccess;
  // For a rejection: "open", "forced_open" or "half_open_full".
  std::string_view reject_reason;
  // Permitted in HALF_OPEN: probe number `probe` of its half-open period.
  int probe = 0;
  // A permitted call slower than slowCallDurationThreshold.
  bool slow = false;
  // Transitions caused by the clock reaching this call (timers), by its
  // acquisition, and by its outcome.
  std::vector<Transition> on_clock;
  std::vector<Transition> on_acquire;
  std::vector<Transition> on_outcome;
  // After the call.
  CircuitBreakerMetrics metrics;

  // on_clock, on_acquire, on_outcome, in order.
  std::vector<Transition> AllTransitions() const;
};

struct SimSummary {
  // The initial state and the state after each transition.
  std::vector<State> states;
  int successes = 0;
  int failures = 0;
  int rejections = 0;
  // Time request threads spent waiting for the dependency.
  Duration thread_time = Duration::zero();
  Duration thread_time_without_breaker = Duration::zero();
  // Calls sent while the dependency was down (its answer a timeout or an
  // error).
  int calls_to_down_dependency = 0;
  int calls_to_down_dependency_without_breaker = 0;
};

struct SimRun {
  Scenario scenario;
  Duration hair = Duration::zero();
  std::vector<CallRecord> calls;
  SimSummary summary;
};

// Runs `scenario`. Fails with kInvalidArgument when it does not validate.
Result<SimRun> Simulate(const Scenario& scenario);

// One JSON object per call, {"t", "call", "result", "state", "transitions"},
// then {"summary": {...}}; one per line.
void WriteSimJson(const SimRun& run, std::ostream& out);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_SIM_H_
