// apps/fusebox/compare.h: `fusebox compare`, one incident through several
// breaker configurations, side by side.
//
// The incident is a trace (replayed as `fusebox replay` does, except that a
// complete for a call the configuration rejected is skipped) or a scenario
// (simulated as `fusebox sim` does). Every configuration meets the same
// dependency: a trace's recorded outcomes, or the scenario's answers. For each
// configuration it measures:
//   - first failure -> OPEN: from the first failure the dependency gave to the
//     first transition to OPEN;
//   - calls to the dead dependency: calls let through whose outcome was a
//     failure;
//   - rejected while healthy: calls rejected whose outcome would have been a
//     success;
//   - recovery -> CLOSED: from the dependency's recovery (its first success
//     after its last failure) to the breaker being CLOSED again (0 when it
//     already was).
// Scenario times are nominal (call k at k * interval, without the simulator's
// hair); trace times are the trace's.
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_FUSEBOX_COMPARE_H_
#define FUSEBOX_APPS_FUSEBOX_COMPARE_H_

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "apps/fusebox/common.h"
#include "apps/fusebox/replay.h"
#include "apps/fusebox/scenario.h"
#include "apps/fusebox/sim.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/result.h"

namespace fusebox::app {

// One configuration to try.
struct Candidate {
  std::string label;
  bool breaker_enabled = true;
  CircuitBreakerConfig config;
};

// A candidate from its command-line spelling:
//   - "input": `base`, the trace's or the scenario's own configuration;
//   - a preset name ("threshold-30"): that preset's breaker;
//   - a scenario file (*.yaml, *.yml): its breaker;
//   - "[label:]name=value[,name=value...]": `base` with those Resilience4j
//     properties changed, e.g. "fast:failureRateThreshold=30,waitDurationInOpenState=2s".
Result<Candidate> ParseCandidate(std::string_view spec, const Candidate& base);

// The breakers of the five presets, labelled by preset.
std::vector<Candidate> PresetCandidates();

// What one configuration did to each call, and its transitions.
struct CallFact {
  // When the breaker decided, and when the outcome was (or would have been)
  // known.
  Duration decided_at = Duration::zero();
  Duration reported_at = Duration::zero();
  bool permitted = false;
  // The dependency's outcome, when known.
  std::optional<OutcomeKind> outcome;
};

struct RunFacts {
  bool breaker_enabled = true;
  std::vector<CallFact> calls;
  std::vector<Transition> transitions;
};

RunFacts FactsFromSim(const SimRun& run);
Result<RunFacts> FactsFromTrace(const Trace& trace, const Candidate& candidate);

struct CompareRow {
  std::string label;
  std::string settings;
  // Unset: never opened (or no failure, or no breaker).
  std::optional<Duration> failure_to_open;
  int calls_to_dead = 0;
  int rejected_while_healthy = 0;
  // Unset: see recovery_note.
  std::optional<Duration> recovery_to_closed;
  // "no failure", "not recovered", "still OPEN at the end", "no breaker".
  std::string recovery_note;
  int permitted = 0;
  int rejected = 0;
};

CompareRow Measure(const RunFacts& facts);

// Runs every candidate on the scenario / the trace.
Result<std::vector<CompareRow>> CompareOnScenario(const Scenario& scenario,
                                                  const std::vector<Candidate>& candidates);
Result<std::vector<CompareRow>> CompareOnTrace(const Trace& trace,
                                               const std::vector<Candidate>& candidates);

// The table: one column per configuration, one row per measure; then each
// configuration's settings.
void WriteCompareTable(const std::string& title, const std::vector<CompareRow>& rows,
                       std::ostream& out);
// One JSON line per configuration.
void WriteCompareJson(const std::vector<CompareRow>& rows, std::ostream& out);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_COMPARE_H_
