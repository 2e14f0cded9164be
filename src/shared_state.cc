#include "fusebox/shared_state.h"

#include <algorithm>

namespace fusebox {
namespace {

// This thread's innermost SharedStateDeadline; TimePoint::max(): none.
thread_local TimePoint current_deadline = TimePoint::max();

}  // namespace

SharedStateDeadline::SharedStateDeadline(TimePoint deadline) noexcept
    : previous_(current_deadline) {
  current_deadline = std::min(previous_, deadline);
}

SharedStateDeadline::~SharedStateDeadline() { current_deadline = previous_; }

Duration SharedStateBudget() noexcept {
  const TimePoint deadline = current_deadline;
  if (deadline == TimePoint::max()) return Duration::max();
  return deadline - SystemClock().Now();
}

std::string_view SharedOverrideKindName(SharedOverride::Kind kind) noexcept {
  switch (kind) {
    case SharedOverride::Kind::kLifted:
      return "LIFTED";
    case SharedOverride::Kind::kForcedOpen:
      return "FORCED_OPEN";
    case SharedOverride::Kind::kForcedClosed:
      return "FORCED_CLOSED";
    case SharedOverride::Kind::kDisabled:
      return "DISABLED";
    case SharedOverride::Kind::kMetricsOnly:
      return "METRICS_ONLY";
  }
  return "UNKNOWN";
}

}  // namespace fusebox
