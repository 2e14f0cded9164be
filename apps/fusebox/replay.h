// apps/fusebox/replay.h: `fusebox replay`, a trace of calls through the real
// breaker, one decision per event.
//
// Each event moves a StepClock (a ManualClock) to its t, firing on the way, at
// their own deadlines, the breaker's timers that are due at or before t
// (automatic OPEN -> HALF_OPEN, maximum wait in HALF_OPEN); then the event is
// applied. Events at the same t are applied in input order. The transitions an
// event reports are those its clock step caused, then its own, in order.
//
// Output, one JSON line per event:
//   {"t": 1000, "call": "c1", "permitted": true, "state": "CLOSED",
//    "transitions": [], "failureRate": -1, "slowCallRate": -1}
// "call" is absent for a tick, "permitted" present for acquire and call.
// Rates are Resilience4j's: -1 below the minimum number of calls.
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
  // A complete for a call this configuration had rejected (compare mode only):
  // nothing was recorded.
  bool skipped = false;
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
  Replayer(std::unique_ptr<CircuitBreaker> breaker, std::shared_ptr<TransitionLog> log, Mode mode);

  Mode mode_;
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

// {"t", "call", "permitted", "state", "transitions", "failureRate", "slowCallRate"}.
Json ReplayStepJson(const ReplayStep& step);

// Reads a whole trace, stopping at the first bad line.
Result<Trace> ReadTrace(std::istream& in);

// `fusebox replay`: reads `in` line by line and writes one JSON line per event
// to `out` as it goes; stops at the first bad line with its error. Calls left
// without an outcome are listed on `notes`.
Status ReplayTrace(std::istream& in, std::ostream& out, std::ostream& notes);

}  // namespace fusebox::app

#endif  // FUSEBOX_APPS_FUSEBOX_REPLAY_H_
