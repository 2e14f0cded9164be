#include "fusebox/meta/classify.h"

#include <algorithm>

namespace fusebox::meta {
namespace {

bool Contains(const std::vector<std::int64_t>& set, std::optional<std::int64_t> v) {
  return v && std::find(set.begin(), set.end(), *v) != set.end();
}

std::string ToLowerAscii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return out;
}

std::string Codes(const ErrorBody& e) {
  std::string out;
  if (e.code) out += ", error.code " + std::to_string(*e.code);
  if (e.subcode) out += ", error.error_subcode " + std::to_string(*e.subcode);
  return out;
}

// The rate-limit rule's reason, or empty when it does not match.
std::string RateLimitReason(const Response& r, const ErrorBody& e, const Rules& rules) {
  if (r.status == 429) return "HTTP status 429";
  if (Contains(rules.rate_limit_codes, e.code)) {
    return "error.code " + std::to_string(*e.code) + " is a rate-limit code";
  }
  if (e.code && e.subcode) {
    for (const auto& [code, subcode] : rules.rate_limit_code_subcodes) {
      if (*e.code == code && *e.subcode == subcode) {
        return "error.code " + std::to_string(code) + " with error.error_subcode " +
               std::to_string(subcode) + " is a rate limit";
      }
    }
  }
  if (e.message) {
    const std::string lower = ToLowerAscii(*e.message);
    for (const std::string& phrase : rules.rate_limit_phrases) {
      if (!phrase.empty() && lower.find(ToLowerAscii(phrase)) != std::string::npos) {
        return "error.message contains \"" + phrase + "\"";
      }
    }
  }
  return {};
}

}  // namespace

std::string_view KindName(Kind kind) noexcept {
  switch (kind) {
    case Kind::kRateLimit:
      return "rate-limit";
    case Kind::kTransient:
      return "transient";
    case Kind::kAuthorization:
      return "authorization";
    case Kind::kInvalid:
      return "invalid";
  }
  return "invalid";
}

Classification Classify(const Response& response, const Rules& rules) {
  Classification c;
  c.error = ParseErrorBody(response.body);
  const ErrorBody& e = c.error;
  const int status = response.status;

  // 1. Rate limit, before everything else.
  if (std::string why = RateLimitReason(response, e, rules); !why.empty()) {
    const Recovery recovery = RecoveryTime(response, rules.recovery);
    c.kind = Kind::kRateLimit;
    c.retry_after = recovery.wait;
    c.reason = "rate-limit: " + why + "; wait " + std::to_string(recovery.wait.count()) + " s " +
               (recovery.source == RecoverySource::kDefault
                    ? std::string("(default: no usable Retry-After or X-Business-Use-Case-Usage)")
                    : "from " + std::string(RecoverySourceName(recovery.source)));
    return c;
  }
  // 2. Transient.
  if (status == 408 || (status >= 500 && status <= 599)) {
    c.kind = Kind::kTransient;
    c.reason = "transient: HTTP status " + std::to_string(status);
    return c;
  }
  if (Contains(rules.transient_codes, e.code)) {
    c.kind = Kind::kTransient;
    c.reason = "transient: error.code " + std::to_string(*e.code) + " is a transient code";
    return c;
  }
  // 3. Authorization.
  c.kind = Kind::kAuthorization;
  if (status == 401 || status == 403) {
    c.reason = "authorization: HTTP status " + std::to_string(status);
    return c;
  }
  if (Contains(rules.authorization_codes, e.code)) {
    c.reason = "authorization: error.code " + std::to_string(*e.code) + " is an authorization code";
    return c;
  }
  if (e.code) {
    for (const auto& [lo, hi] : rules.authorization_code_ranges) {
      if (*e.code >= lo && *e.code <= hi) {
        c.reason = "authorization: error.code " + std::to_string(*e.code) + " is in [" +
                   std::to_string(lo) + ", " + std::to_string(hi) + "]";
        return c;
      }
    }
  }
  if (Contains(rules.authorization_subcodes, e.subcode)) {
    c.reason = "authorization: error.error_subcode " + std::to_string(*e.subcode) +
               " is an authorization subcode";
    return c;
  }
  // 4. Invalid.
  c.kind = Kind::kInvalid;
  c.reason = "invalid: no rule matched (HTTP status " + std::to_string(status) + Codes(e) + ")";
  return c;
}

}  // namespace fusebox::meta
