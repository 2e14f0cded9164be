// Fallback: the parts that do not depend on the value type.
#include "fusebox/fallback.h"

#include <string>

namespace fusebox {

std::string_view CallKindName(CallKind kind) noexcept {
  switch (kind) {
    case CallKind::kRead:
      return "read";
    case CallKind::kWrite:
      return "write";
  }
  return "unknown";
}

namespace internal {

Status FallbackCodeMask(const std::vector<StatusCode>& codes, bool has_fn, std::uint32_t* mask) {
  if (codes.empty()) {
    // A fallback for every failure hides the ones nobody thought about.
    return Status::InvalidArgument("on_codes must not be empty: name the failures to answer");
  }
  std::uint32_t bits = 0;
  for (StatusCode code : codes) {
    if (code == StatusCode::kOk) return Status::InvalidArgument("on_codes must not contain OK");
    if (static_cast<unsigned>(code) > static_cast<unsigned>(kLastStatusCode)) {
      return Status::InvalidArgument("on_codes contains an unknown code " +
                                     std::to_string(static_cast<unsigned>(code)));
    }
    bits |= std::uint32_t{1} << static_cast<unsigned>(code);
  }
  if (!has_fn) return Status::InvalidArgument("fn must be set");
  *mask = bits;
  return Status();
}

}  // namespace internal
}  // namespace fusebox
