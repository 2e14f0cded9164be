// fusebox/meta/classify.h: which of four kinds of failure a Meta Graph API
// response is, and which rule said so.
//
// The rule set of seed 000, made precise in notes §1.7 (docs/meta.md); the
// first rule that matches decides:
//   1. rate-limit: HTTP 429, or error.code in rate_limit_codes, or (code,
//      subcode) in rate_limit_code_subcodes, or lower(error.message) contains
//      one of rate_limit_phrases ("temporarily" alone never qualifies);
//   2. transient: HTTP 408 or 5xx, or error.code in transient_codes;
//   3. authorization: HTTP 401/403, or error.code in authorization_codes or
//      authorization_code_ranges, or error.error_subcode in
//      authorization_subcodes;
//   4. invalid: anything else.
// The order matters: code 200 with "API access blocked" is a rate limit, not
// an authorization failure; a 503 with a Retry-After is transient, and its
// Retry-After is not reported. error.type never decides anything
// (OAuthException is on throttles too).
//
//   fusebox::meta::Classification c = fusebox::meta::Classify(response);
//   if (c.kind == fusebox::meta::Kind::kRateLimit) Wait(*c.retry_after);
//   log << c.reason;  // "rate-limit: error.code 80002 is a rate-limit code; ..."
//
// Classify() is not told whether the call succeeded: give it error responses
// (status >= 400, or a body with an `error` object).
//
// Thread-safe: every function is pure; a Rules object is read-only there.
#ifndef FUSEBOX_META_CLASSIFY_H_
#define FUSEBOX_META_CLASSIFY_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/meta/recovery.h"
#include "fusebox/meta/response.h"

namespace fusebox::meta {

enum class Kind : std::uint8_t {
  kRateLimit,
  kTransient,
  kAuthorization,
  kInvalid,
};

// "rate-limit", "transient", "authorization", "invalid".
std::string_view KindName(Kind kind) noexcept;

// The configurable code sets. The defaults are exactly notes §1.7; the
// `ruleset_gap_` cases of notes §1.8 are opt-in, e.g.
//   rules.rate_limit_codes.push_back(341);                 // Application limit reached
//   rules.rate_limit_code_subcodes.push_back({9, 2207042});  // IG daily publish quota
//   rules.transient_codes = {-1, -2, 1, 2};                // IG "server error" as 400
struct Rules {
  // Rule 1. Default: 4, 17, 32, 613 (Platform), 80000-80009 and 80014 (BUC
  // and WhatsApp).
  std::vector<std::int64_t> rate_limit_codes = {
      4, 17, 32, 613, 80000, 80001, 80002, 80003, 80004, 80005, 80006, 80007, 80008, 80009, 80014};
  // Rule 1, (code, subcode) pairs. Default: none.
  std::vector<std::pair<std::int64_t, std::int64_t>> rate_limit_code_subcodes{};
  // Rule 1, lower-case substrings of error.message. Default: "api access
  // blocked", "rate limit", "too many calls", "too many requests", "request
  // limit".
  std::vector<std::string> rate_limit_phrases = {
      "api access blocked", "rate limit", "too many calls", "too many requests", "request limit"};
  // Rule 2, besides HTTP 408 and 5xx. Default: none.
  std::vector<std::int64_t> transient_codes{};
  // Rule 3. Default: 10, 102, 190.
  std::vector<std::int64_t> authorization_codes = {10, 102, 190};
  // Rule 3, inclusive ranges. Default: [200, 299].
  std::vector<std::pair<std::int64_t, std::int64_t>> authorization_code_ranges = {{200, 299}};
  // Rule 3. Default: 458, 459, 460, 463, 464, 467, 492.
  std::vector<std::int64_t> authorization_subcodes = {458, 459, 460, 463, 464, 467, 492};
  // How rate limits' recovery time is read (recovery.h).
  RecoveryOptions recovery{};
};

struct Classification {
  Kind kind = Kind::kInvalid;
  // The rule that decided, for "why did my circuit open?", e.g.
  //   "rate-limit: HTTP status 429; wait 30 s from Retry-After"
  //   "authorization: error.error_subcode 463 is an authorization subcode"
  //   "invalid: no rule matched (status 400, error.code 100)"
  // It names statuses, codes and the rule's own phrase, never text taken
  // from the body or headers.
  std::string reason{};
  // Rate limits only: how long to stop (RecoveryTime()); nullopt otherwise.
  std::optional<std::chrono::seconds> retry_after{};
  // The parsed error body, for callers that want the codes.
  ErrorBody error{};
};

// The classification of `response` under `rules`.
Classification Classify(const Response& response, const Rules& rules = Rules{});

}  // namespace fusebox::meta

#endif  // FUSEBOX_META_CLASSIFY_H_
