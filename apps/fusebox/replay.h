// apps/fusebox/replay.h: `fusebox replay`, a trace of calls through the real
// breaker, one decision per event.
//
// Each event moves a StepClock (a ManualClock) to its t, firing on the way, at
// their own deadlines, the breaker's timers that are due at or before t
// (automatic OPEN -> HALF_OPEN, maximum wait in HALF_OPEN); then the event is
// applied. Events at the same t are applied in input order. The transitions an
// event reports are those its clock step caused, then its own, in order.
//
// An operator event calls the breaker's method of that name; one that
// Resilience4j refuses (IllegalStateTransitionException, in compatibility:
// resilience4j) changes nothing and is reported, not an error of the trace.
//
// Output, one JSON line per event:
//   {"t": 1000, "call": "c1", "permitted": true, "state": "CLOSED",
//    "transitions": [], "failureRate": -1, "slowCallRate": -1,
//    "numberOfBufferedCalls": 0, "numberOfFailedCalls": 0,
//    "numberOfSlowCalls": 0, "numberOfSlowSuccessfulCalls": 0,
//    "numberOfSlowFailedCalls": 0, "numberOfSuccessfulCalls": 0,
//    "numberOfNotPermittedCalls": 0}
// "call" is absent for a tick and an operator event, "permitted" present for
// acquire and call; an operator event has "operator" (the method) and, when
// refused, "refused" (why). Rates and counts are Resilience4j's
// CircuitBreaker.Metrics (getFailureRate(), getNumberOfBufferedCalls(), ...):
// rates -1 below the minimum number of calls.
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_FUSEBOX_REPLAY_H_
#define FUSEBOX_APPS_FUSEBOX_REPLAY_H_

#include <cstddef>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "apps/fusebox/common.h"
#include "apps/fusebox/step_clock.h"
#include "apps/fusebox/trace.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::app {

// The longest trace line `fusebox replay` (and `compare --trace`) reads, in
// bytes: an event is one small JSON object, so a longer line is a broken or
// hostile file, refused with its line number before it is buffered whole.
inline constexpr std::size_t kMaxTraceLineBytes = 64 * 1024;

// What one event did.
struct ReplayStep {
  TraceEvent event;
  // acquire and call: whether the breaker let the call through.
  std::optional<bool> permitted;
  // A complete for a call this configuration had rejected, or an operator
  // event with no breaker (compare mode only): nothing was recorded.
  bool skipped = false;
  // An operator event the breaker refused: why.
  std::optional<std::string> refused;
  std::vector<Transition> transitions;
  CircuitBreakerMetrics metrics;
};

// A parsed trace.
struct Trace {
  CircuitBreakerConfig config;
  std::vector<TraceEvent> events;
};

class Replayer {
 public:
  enum class Mode {
    // `fusebox replay`: completing a call that holds no permit is an error.
    kStrict,
    // `fusebox compare`: a configuration may reject a call that the trace
    // completes later; that complete is skipped.
    kSkipRejected,
  };

  // A breaker built from `config`, or none (DISABLED) when !breaker_enabled.
  static Result<std::unique_ptr<Replayer>> Create(const CircuitBreakerConfig& config,
                                                  bool breaker_enabled, Mode mode);

  // Applies one event. Errors (kInvalidArgument, "line <n>: ...") for t going
  // backwards, acquiring an id that holds a permit, completing an unknown call.
  Result<ReplayStep> Apply(const TraceEvent& event);

  // Ids acquired and never completed, in id order.
  std::vector<std::string> PendingCalls() const;

 private:
  Replayer(std::unique_ptr<CircuitBreaker> breaker, std::shared_ptr<TransitionLog> log, Mode mode,
           bool breaker_enabled);

  // Calls the breaker's method for `action`; its refusal, if any.
  Status ApplyOperator(OperatorAction action);

  Mode mode_;
  // False: the breaker stays DISABLED, operator events change nothing.
  bool breaker_enabled_;
  std::unique_ptr<StepClock> clock_;
  std::unique_ptr<CircuitBreaker> breaker_;
  std::shared_ptr<TransitionLog> log_;
  std::int64_t last_t_ms_ = 0;
  struct Held {
    Permit permit;
    int line;
  };
  std::map<std::string, Held> pending_;
  // Ids whose last acquire was rejected, with that line.
  std::map<std::string, int> rejected_;
};

// {"t", "call" | "operator", "permitted", "refused", "state", "transitions",
// "failureRate", "slowCallRate", "numberOf...Calls"}.
Json ReplayStepJson(const ReplayStep& step);

// Reads a whole trace, stopping at the first bad line.
Result<Trace> ReadTrace(std::istream& in);

// `fusebox replay`: reads `in` line by line and writes one JSON line per event
// to `out` as it goes; stops at the first bad line with its error. Calls left
// without an outcome are listed on `notes`.
Status ReplayTrace(std::istream& in, std::ostream& out, std::ostream& notes);

// `fusebox replay --expect`: compares `replayed`, the output of ReplayTrace(),
// line by line with `recorded`, the same trace's output recorded from
// Resilience4j 2.4.0 (same format). On each line, every field present in
// both is compared and a field present in only one is not, so that a
// recording made before the counts were added still compares on the rest;
// rates compare as the 32-bit floats they are. Each difference is written to
// `report` as "line <n>: <field>: fusebox <value>, recorded <value>", n
// counting trace events from 1, and so is a line present in only one.
// Returns how many there were; kInvalidArgument for a recorded line that is
// not a JSON object, or longer than kMaxTraceLineBytes.
Result<int> CompareWithRecorded(std::istream& replayed, std::istream& recorded,
                                std::ostream& report);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_REPLAY_H_
