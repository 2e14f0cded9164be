#include "fusebox/status.h"

#include <string>

namespace fusebox {

std::string_view StatusCodeName(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCircuitOpen:
      return "CircuitOpen";
    case StatusCode::kBulkheadFull:
      return "BulkheadFull";
    case StatusCode::kRateLimited:
      return "RateLimited";
    case StatusCode::kTimeout:
      return "Timeout";
    case StatusCode::kRetriesExhausted:
      return "RetriesExhausted";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  const std::string_view text = message();
  if (!text.empty()) {
    out += ": ";
    out += text;
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Status& status) { return os << status.ToString(); }

std::ostream& operator<<(std::ostream& os, StatusCode code) { return os << StatusCodeName(code); }

}  // namespace fusebox
