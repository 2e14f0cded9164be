// CircuitBreakerConfig::Validate() and the names of the breaker's enums:
// what a configuration file or a log line spells.
#include <string>

#include "fusebox/circuit_breaker.h"

namespace fusebox {

std::string_view StateName(State state) noexcept {
  switch (state) {
    case State::kClosed:
      return "CLOSED";
    case State::kOpen:
      return "OPEN";
    case State::kHalfOpen:
      return "HALF_OPEN";
    case State::kDisabled:
      return "DISABLED";
    case State::kMetricsOnly:
      return "METRICS_ONLY";
    case State::kForcedOpen:
      return "FORCED_OPEN";
    case State::kForcedClosed:
      return "FORCED_CLOSED";
  }
  return "UNKNOWN";
}

std::string_view OutcomeKindName(OutcomeKind kind) noexcept {
  switch (kind) {
    case OutcomeKind::kSuccess:
      return "success";
    case OutcomeKind::kFailure:
      return "failure";
    case OutcomeKind::kIgnored:
      return "ignored";
  }
  return "unknown";
}

std::string_view TransitionReasonName(TransitionReason reason) noexcept {
  switch (reason) {
    case TransitionReason::kFailureRate:
      return "failure_rate_exceeded";
    case TransitionReason::kSlowCallRate:
      return "slow_call_rate_exceeded";
    case TransitionReason::kConsecutiveFailures:
      return "consecutive_failures";
    case TransitionReason::kOpenForHint:
      return "retry_after_hint";
    case TransitionReason::kWaitElapsed:
      return "wait_elapsed";
    case TransitionReason::kProbesSucceeded:
      return "probes_succeeded";
    case TransitionReason::kProbesFailed:
      return "probes_failed";
    case TransitionReason::kHalfOpenTimeout:
      return "half_open_timeout";
    case TransitionReason::kOverrideExpired:
      return "override_expired";
    case TransitionReason::kOperator:
      return "operator";
    case TransitionReason::kSharedOpen:
      return "shared_open";
    case TransitionReason::kSharedClosed:
      return "shared_closed";
  }
  return "unknown";
}

// Over 80 lines on purpose: a table, one check per field in the order the
// header declares them, each naming its field; split, it would only be
// harder to compare with the header.
Status CircuitBreakerConfig::Validate() const {
  auto bad = [](const char* field, const std::string& rule) {
    return Status::InvalidArgument(std::string(field) + " " + rule);
  };
  auto ns = [](Duration d) { return std::to_string(d.count()) + " ns"; };
  if (!(failure_rate_threshold > 0 && failure_rate_threshold <= 100)) {
    return bad("failure_rate_threshold",
               "must be in (0, 100], got " + std::to_string(failure_rate_threshold));
  }
  if (!(slow_call_rate_threshold > 0 && slow_call_rate_threshold <= 100)) {
    return bad("slow_call_rate_threshold",
               "must be in (0, 100], got " + std::to_string(slow_call_rate_threshold));
  }
  if (slow_call_duration_threshold <= Duration::zero()) {
    return bad("slow_call_duration_threshold",
               "must be > 0, got " + ns(slow_call_duration_threshold));
  }
  if (permitted_number_of_calls_in_half_open_state < 1) {
    return bad("permitted_number_of_calls_in_half_open_state",
               "must be >= 1, got " + std::to_string(permitted_number_of_calls_in_half_open_state));
  }
  if (max_wait_duration_in_half_open_state < Duration::zero()) {
    return bad("max_wait_duration_in_half_open_state",
               "must be >= 0 (0 means no limit), got " + ns(max_wait_duration_in_half_open_state));
  }
  if (transition_to_state_after_wait_duration != State::kOpen &&
      transition_to_state_after_wait_duration != State::kClosed) {
    return bad("transition_to_state_after_wait_duration",
               "must be OPEN or CLOSED, got " +
                   std::string(StateName(transition_to_state_after_wait_duration)));
  }
  if (sliding_window_type != SlidingWindowType::kCountBased &&
      sliding_window_type != SlidingWindowType::kTimeBased) {
    return bad("sliding_window_type", "must be COUNT_BASED or TIME_BASED");
  }
  if (sliding_window_size < 1) {
    return bad("sliding_window_size", "must be >= 1, got " + std::to_string(sliding_window_size));
  }
  if (const bool timed = sliding_window_type == SlidingWindowType::kTimeBased;
      sliding_window_size > (timed ? kMaxTimeBasedWindowSeconds : kMaxCountBasedWindowSize)) {
    return bad("sliding_window_size",
               timed ? "must be <= " + std::to_string(kMaxTimeBasedWindowSeconds) +
                           " (seconds, TIME_BASED), got " + std::to_string(sliding_window_size)
                     : "must be <= " + std::to_string(kMaxCountBasedWindowSize) +
                           " (calls, COUNT_BASED), got " + std::to_string(sliding_window_size));
  }
  if (permitted_number_of_calls_in_half_open_state > kMaxCountBasedWindowSize) {
    return bad("permitted_number_of_calls_in_half_open_state",
               "must be <= " + std::to_string(kMaxCountBasedWindowSize) + ", got " +
                   std::to_string(permitted_number_of_calls_in_half_open_state));
  }
  if (minimum_number_of_calls < 1) {
    return bad("minimum_number_of_calls",
               "must be >= 1, got " + std::to_string(minimum_number_of_calls));
  }
  if (wait_duration_in_open_state <= Duration::zero() && !wait_interval_function) {
    return bad("wait_duration_in_open_state",
               "must be > 0, got " + ns(wait_duration_in_open_state));
  }
  if (consecutive_failure_threshold < 0) {
    return bad("consecutive_failure_threshold", "must be >= 0 (0 disables it), got " +
                                                    std::to_string(consecutive_failure_threshold));
  }
  if (!(open_duration_jitter >= 0 && open_duration_jitter < 1)) {
    return bad("open_duration_jitter",
               "must be in [0, 1), got " + std::to_string(open_duration_jitter));
  }
  if (half_open_policy != HalfOpenPolicy::kFailureRate &&
      half_open_policy != HalfOpenPolicy::kAnyFailureReopens) {
    return bad("half_open_policy", "must be kFailureRate or kAnyFailureReopens");
  }
  if (compatibility != Compatibility::kDefault && compatibility != Compatibility::kResilience4j) {
    return bad("compatibility", "must be kDefault or kResilience4j");
  }
  if (call_timing != CallTiming::kAuto && call_timing != CallTiming::kPrecise &&
      call_timing != CallTiming::kCoarse) {
    return bad("call_timing", "must be kAuto, kPrecise or kCoarse");
  }
  if (outcome_order != OutcomeOrder::kLinearizable && outcome_order != OutcomeOrder::kRelaxed) {
    return bad("outcome_order", "must be kLinearizable or kRelaxed");
  }
  if (shared_probe_lease <= Duration::zero()) {
    return bad("shared_probe_lease", "must be > 0, got " + ns(shared_probe_lease));
  }
  return Status();
}

}  // namespace fusebox
