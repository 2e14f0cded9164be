// fusebox/http/classify.h: what an HTTP response (or a failed exchange) means
// to a resilience policy, for any HTTP API.
//
// The generic rules, in order; the first that matches decides:
//   1. an override in Rules::statuses for this exact status;
//   2. 2xx and 3xx: success;
//   3. 429: rate limit; 503 with a usable Retry-After: rate limit
//      (Rules::unavailable_with_retry_after_is_rate_limit);
//   4. 408 and 5xx: transient;
//   5. 401 and 403: authorization;
//   6. anything else (other 4xx, 1xx, statuses outside 100-599): invalid.
// A failed exchange with no response is classified by ClassifyTransport():
// connect failures, resets and deadlines are transient by default, each
// overridable. A rate limit carries its recovery time: Retry-After (seconds
// or an HTTP-date measured against the response's Date, else Rules::now),
// else Rules::default_wait; saturated at Rules::max_wait. Vendor rules (Meta's
// error codes in the body, fusebox::meta) are never applied here.
//
//   fusebox::http::Classification c = fusebox::http::Classify(
//       {.status = 503, .retry_after = "30"});
//   // c.kind == Kind::kRateLimit, *c.retry_after == 30 s
//   fusebox::Status s = fusebox::http::ToStatus(c, clock.Now());  // kRateLimited, retry_at
//
// ToStatus() maps a classification to fusebox's Status (the table in
// docs/http.md); BreakerOutcomeKind() tells a breaker or a Pipeline which
// statuses are the dependency's fault (Pipeline::Builder::WithOutcomeClassifier).
//
// Thread-safe: every function is pure; a Rules object is read-only here.
// Classify() allocates nothing.
#ifndef FUSEBOX_HTTP_CLASSIFY_H_
#define FUSEBOX_HTTP_CLASSIFY_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/status.h"

namespace fusebox::http {

enum class Kind : std::uint8_t {
  kSuccess,
  kRateLimit,
  kTransient,
  kAuthorization,
  kInvalid,
};

// "success", "rate-limit", "transient", "authorization", "invalid".
std::string_view KindName(Kind kind) noexcept;

// Why an exchange produced no response.
enum class Transport : std::uint8_t {
  // No connection: refused, DNS, TLS handshake, no route.
  kConnect,
  // The connection broke mid-exchange (reset, EOF, bad framing).
  kReset,
  // The deadline passed (the caller's timeout or the client's own).
  kDeadline,
  // The caller gave up (a stop_token): nothing is known of the dependency.
  kCancelled,
  // Anything else.
  kOther,
};

// "connect", "reset", "deadline", "cancelled", "other".
std::string_view TransportName(Transport transport) noexcept;

// The parts of a response the rules read. The views must outlive the call.
struct Response {
  int status = 0;
  // The Retry-After header's value, when present.
  std::optional<std::string_view> retry_after{};
  // The Date header's value, when present: the reference of an HTTP-date
  // Retry-After.
  std::optional<std::string_view> date{};
};

struct Rules {
  // Exact statuses whose kind is fixed, checked before every other rule, e.g.
  // {{404, Kind::kSuccess}} for an API where "absent" is an answer, or
  // {{409, Kind::kTransient}}. Default: none.
  std::vector<std::pair<int, Kind>> statuses{};
  // Rule 3: a 503 with a usable Retry-After is a rate limit (the server told
  // us when to come back). When false it is transient. Default: true.
  bool unavailable_with_retry_after_is_rate_limit = true;
  // ClassifyTransport(): the kind of each failure without a response.
  // Defaults: connect, reset and deadline transient; cancelled invalid (the
  // caller's own choice says nothing about the dependency); other transient.
  Kind on_connect = Kind::kTransient;
  Kind on_reset = Kind::kTransient;
  Kind on_deadline = Kind::kTransient;
  Kind on_cancelled = Kind::kInvalid;
  Kind on_other = Kind::kTransient;
  // A rate limit without a usable Retry-After waits this long. Default: 60 s.
  std::chrono::seconds default_wait = std::chrono::seconds(60);
  // Longer waits saturate to this. Default: 24 h.
  std::chrono::seconds max_wait = std::chrono::hours(24);
  // Wall-clock "now" for an HTTP-date Retry-After when the response has no
  // usable Date. Default: unset, and such a Retry-After is then unusable
  // (fusebox never reads the system clock itself).
  std::optional<std::chrono::sys_seconds> now{};
};

struct Classification {
  Kind kind = Kind::kInvalid;
  // The HTTP status, or 0 for a failure without a response.
  int status = 0;
  // Set for a failure without a response.
  std::optional<Transport> transport{};
  // The rule that decided, a static string such as "429 is a rate limit" or
  // "5xx is transient"; never text taken from the response.
  std::string_view rule{};
  // Rate limits only: how long to stop, in [1 s, max_wait].
  std::optional<std::chrono::seconds> retry_after{};
};

// The classification of `response` under `rules`.
Classification Classify(const Response& response, const Rules& rules = Rules{});

// The Retry-After of `response` when it is usable: parsed (retry_after.h)
// against the response's Date, else rules.now; nullopt otherwise.
std::optional<std::chrono::seconds> UsableRetryAfter(const Response& response,
                                                     const Rules& rules = Rules{});

// The classification of an exchange that produced no response.
Classification ClassifyTransport(Transport transport, const Rules& rules = Rules{});

// The Status for `c`, observed at `now`: OK for a success; otherwise
//   rate-limit     kRateLimited       retry_at = now + retry_after
//   transient      kUnavailable       (kTimeout for Transport::kDeadline)
//   authorization  kUnauthenticated   (401) or kPermissionDenied (otherwise)
//   invalid        kNotFound          (404) or kInvalidArgument (otherwise)
// The message names the status or transport and the rule, e.g.
// "HTTP 503: 503 with Retry-After is a rate limit". Allocates its message.
Status ToStatus(const Classification& c, TimePoint now);

// What a breaker should record for a call that ended with `status` as
// ToStatus() makes them: kIgnored for the caller's own faults
// (kInvalidArgument, kNotFound, kPermissionDenied, kUnauthenticated),
// kSuccess for OK, kFailure for everything else. Pass it to
// Pipeline::Builder::WithOutcomeClassifier().
OutcomeKind BreakerOutcomeKind(const Status& status) noexcept;

}  // namespace fusebox::http

#endif  // FUSEBOX_HTTP_CLASSIFY_H_
