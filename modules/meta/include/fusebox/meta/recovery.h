// fusebox/meta/recovery.h: how long Meta asked us to stop calling.
//
// Two headers carry a recovery time (docs/meta.md, notes §1.7):
//   - Retry-After (RFC 9110): delta-seconds ("120") or an HTTP-date, measured
//     against the response's own Date header (the server's clock, immune to
//     local clock error), or against RecoveryOptions::now when Date is absent
//     or unreadable;
//   - X-Business-Use-Case-Usage: a JSON object of arrays of entries whose
//     `estimated_time_to_regain_access` is in minutes; the maximum over every
//     id and entry, duplicate ids included.
// The longer of the two wins; values <= 0 count as absent; values above
// max_wait (24 h) saturate to it, integer overflow included; when neither is
// present the wait is default_wait (120 s). A malformed header is ignored,
// never an error.
//
//   fusebox::meta::Recovery r = fusebox::meta::RecoveryTime(response);
//   breaker_permit.Record(fusebox::Outcome::OpenFor(r.wait));
//
// Thread-safe: every function is pure.
#ifndef FUSEBOX_META_RECOVERY_H_
#define FUSEBOX_META_RECOVERY_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

#include "fusebox/meta/response.h"

namespace fusebox::meta {

struct RecoveryOptions {
  // The wait when no header gives one. Default: 120 s (seed 000).
  std::chrono::seconds default_wait = std::chrono::seconds(120);
  // Longer waits saturate to this. Default: 24 h, Meta's longest documented
  // window.
  std::chrono::seconds max_wait = std::chrono::hours(24);
  // Wall-clock "now" for an HTTP-date Retry-After when the response has no
  // usable Date header. Default: unset, and such a Retry-After is then ignored
  // (fusebox never reads the system clock itself; pass one in if you want it).
  std::optional<std::chrono::sys_seconds> now{};
};

// Where a Recovery's wait came from.
enum class RecoverySource : std::uint8_t {
  kRetryAfter,
  kBusinessUseCaseUsage,
  kDefault,
};

// "Retry-After", "X-Business-Use-Case-Usage", "default".
std::string_view RecoverySourceName(RecoverySource source) noexcept;

struct Recovery {
  // In [1 s, max_wait], or default_wait.
  std::chrono::seconds wait{0};
  RecoverySource source = RecoverySource::kDefault;
};

// The recovery time of `response` (whatever its class; Classify() reports it
// only for rate limits).
Recovery RecoveryTime(const Response& response, const RecoveryOptions& options = {});

// Retry-After alone: spaces and tabs trimmed; 1*DIGIT is seconds; otherwise
// an HTTP-date (IMF-fixdate, RFC 850, asctime) minus `reference`. nullopt when
// malformed ("-600", "90.5", "30, 60", "soon"), when <= 0, or for a date with
// no reference. Saturates at `max_wait`.
std::optional<std::chrono::seconds> ParseRetryAfter(
    std::string_view value, std::optional<std::chrono::sys_seconds> reference,
    std::chrono::seconds max_wait = std::chrono::hours(24));

// X-Business-Use-Case-Usage alone: ceil(minutes * 60) of the largest
// estimated_time_to_regain_access. nullopt when the JSON is bad, not an
// object, or holds no positive value. Saturates at `max_wait`.
std::optional<std::chrono::seconds> ParseBusinessUseCaseUsage(
    std::string_view value, std::chrono::seconds max_wait = std::chrono::hours(24));

// An HTTP-date in any of RFC 9110's three forms, exactly (no surrounding
// text; two-digit RFC 850 years are 19xx from 70, else 20xx). nullopt when it
// is anything else or not a real date.
std::optional<std::chrono::sys_seconds> ParseHttpDate(std::string_view text);

}  // namespace fusebox::meta

#endif  // FUSEBOX_META_RECOVERY_H_
