// apps/fusebox/trace.h: the JSON-lines trace that `fusebox replay` and
// `fusebox compare` read, one line at a time.
//
//   {"config": {"slidingWindowSize": 10, "waitDurationInOpenState": "5s", ...}}
//   {"t": 1000, "acquire": "c1"}
//   {"t": 4000, "complete": "c1", "outcome": "failure", "durationMs": 3000}
//   {"t": 5000, "call": "c2", "outcome": "success", "durationMs": 5}
//   {"t": 6000, "tick": true}
//   {"t": 7000, "operator": "transitionToForcedOpenState"}
//
// The first line holds the configuration in Resilience4j's names (through
// fusebox/config_names.h, so "compatibility" too, and, when the yaml module
// is built in, every property a resilience4j.circuitbreaker instance takes,
// enableExponentialBackoff and the rest, in any of Spring's spellings). A
// number is read from its text, as Java reads it: a threshold of
// 50.000001907348633 is Float.parseFloat's 50.000004, not the float nearest
// to the double nearest to it (50). Every other line is one event at `t`
// milliseconds of the ManualClock; "operator" names one of Resilience4j's
// CircuitBreaker methods (OperatorActionName()). Blank lines are skipped.
// docs/cli.md describes the format. These parsers only read: they know
// nothing of breakers, so the fuzz target can call them on anything.
//
// Thread-safe: pure functions.
#ifndef FUSEBOX_APPS_FUSEBOX_TRACE_H_
#define FUSEBOX_APPS_FUSEBOX_TRACE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "fusebox/circuit_breaker.h"
#include "fusebox/result.h"

namespace fusebox::app {

enum class TraceEventKind : std::uint8_t { kAcquire, kComplete, kCall, kTick, kOperator };

// "acquire", "complete", "call", "tick", "operator".
std::string_view TraceEventKindName(TraceEventKind kind);

// What an operator event does: Resilience4j's CircuitBreaker methods.
enum class OperatorAction : std::uint8_t {
  kTransitionToForcedOpenState,
  kTransitionToDisabledState,
  kTransitionToMetricsOnlyState,
  kTransitionToClosedState,
  kTransitionToOpenState,
  kTransitionToHalfOpenState,
  kReset,
};

// The method's name: "transitionToForcedOpenState", ..., "reset".
std::string_view OperatorActionName(OperatorAction action);

struct TraceEvent {
  // 1-based line of the input.
  int line = 0;
  // Milliseconds of the ManualClock since the start of the trace (>= 0).
  std::int64_t t_ms = 0;
  TraceEventKind kind = TraceEventKind::kTick;
  // The call's id (acquire, complete, call).
  std::string call;
  // complete and call only.
  OutcomeKind outcome = OutcomeKind::kSuccess;
  // complete and call only; decides slow or not. Default 0.
  std::int64_t duration_ms = 0;
  // operator only.
  OperatorAction action = OperatorAction::kReset;
};

// kInvalidArgument "line <n>: <what>": how every trace error reads.
Status LineError(int line_number, const std::string& what);

// True for a line with nothing but spaces.
bool IsBlankLine(std::string_view line);

// Parses the first line, {"config": {...}}. Errors are kInvalidArgument
// "line <n>: <what>", e.g. "line 1: config: slidingWindowSize: expected an
// integer >= 1, got \"ten\"".
Result<CircuitBreakerConfig> ParseTraceConfigLine(std::string_view line, int line_number);

// Parses one event line. Errors are kInvalidArgument "line <n>: <what>":
// broken JSON, not an object, an unknown field, no or several event kinds, a
// missing or bad t, outcome, durationMs or operator method.
Result<TraceEvent> ParseTraceEventLine(std::string_view line, int line_number);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_TRACE_H_
