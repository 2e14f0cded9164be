#include "fusebox/meta/recovery.h"

#include <cmath>

#include "fusebox/http/retry_after.h"
#include "src/json.h"

namespace fusebox::meta {
namespace {

using std::chrono::seconds;
using std::chrono::sys_seconds;

seconds Saturate(double secs, seconds max_wait) {
  if (!(secs < static_cast<double>(max_wait.count()))) return max_wait;
  return seconds(static_cast<seconds::rep>(secs));
}

}  // namespace

std::string_view RecoverySourceName(RecoverySource source) noexcept {
  switch (source) {
    case RecoverySource::kRetryAfter:
      return "Retry-After";
    case RecoverySource::kBusinessUseCaseUsage:
      return "X-Business-Use-Case-Usage";
    case RecoverySource::kDefault:
      return "default";
  }
  return "default";
}

// The HTTP-date and Retry-After grammar is fusebox::http's (retry_after.h);
// Meta adds only X-Business-Use-Case-Usage.
std::optional<sys_seconds> ParseHttpDate(std::string_view text) {
  return http::ParseHttpDate(text);
}

std::optional<seconds> ParseRetryAfter(std::string_view value, std::optional<sys_seconds> reference,
                                       seconds max_wait) {
  return http::ParseRetryAfter(value, reference, max_wait);
}

std::optional<seconds> ParseBusinessUseCaseUsage(std::string_view value, seconds max_wait) {
  const std::optional<internal::JsonValue> doc = internal::ParseJson(value);
  if (!doc || !doc->is_object()) return std::nullopt;
  std::optional<seconds> best;
  for (const auto& [id, entries] : doc->members) {  // duplicate ids included
    if (!entries.is_array()) continue;
    for (const internal::JsonValue& entry : entries.array) {
      if (!entry.is_object()) continue;
      // Every occurrence of the field counts (the maximum is kept anyway).
      for (const auto& [name, eta] : entry.members) {
        if (name != "estimated_time_to_regain_access" || !eta.is_number()) continue;
        if (!(eta.number > 0)) continue;  // <= 0: absent
        const seconds s = Saturate(std::ceil(eta.number * 60.0), max_wait);
        if (s <= seconds::zero()) continue;
        if (!best || s > *best) best = s;
      }
    }
  }
  return best;
}

Recovery RecoveryTime(const Response& response, const RecoveryOptions& options) {
  std::optional<sys_seconds> reference = options.now;
  if (std::optional<std::string_view> date = response.Header("Date")) {
    if (std::optional<sys_seconds> d = ParseHttpDate(http::TrimOws(*date))) reference = d;
  }
  std::optional<seconds> retry_after;
  if (std::optional<std::string_view> v = response.Header("Retry-After")) {
    retry_after = ParseRetryAfter(*v, reference, options.max_wait);
  }
  std::optional<seconds> buc;
  if (std::optional<std::string_view> v = response.Header("X-Business-Use-Case-Usage")) {
    buc = ParseBusinessUseCaseUsage(*v, options.max_wait);
  }
  if (retry_after && (!buc || *retry_after >= *buc)) {
    return {*retry_after, RecoverySource::kRetryAfter};
  }
  if (buc) return {*buc, RecoverySource::kBusinessUseCaseUsage};
  return {options.default_wait, RecoverySource::kDefault};
}

}  // namespace fusebox::meta
