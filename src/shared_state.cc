#include "fusebox/shared_state.h"

namespace fusebox {

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
