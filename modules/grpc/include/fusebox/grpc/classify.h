// fusebox/grpc/classify.h: what a gRPC status code (and its
// grpc-retry-pushback-ms trailer) means to a resilience policy.
//
// The rules, in order; the first that matches decides:
//   1. an override in Rules::codes for this exact code;
//   2. 0 OK: success;
//   3. 8 RESOURCE_EXHAUSTED: rate limit, waiting for grpc-retry-pushback-ms
//      when it is usable, else Rules::default_wait;
//   4. 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED, 2 UNKNOWN, 10 ABORTED,
//      13 INTERNAL, 15 DATA_LOSS: transient;
//   5. 16 UNAUTHENTICATED, 7 PERMISSION_DENIED: authorization;
//   6. anything else (3 INVALID_ARGUMENT, 5 NOT_FOUND, 6 ALREADY_EXISTS,
//      9 FAILED_PRECONDITION, 11 OUT_OF_RANGE, 12 UNIMPLEMENTED, 1 CANCELLED,
//      numbers outside 0-16): invalid, the caller's own affair.
// The kinds are fusebox::http's (http::Kind), so that one policy reads both
// protocols alike: rate limits and transient failures are the dependency's
// fault, authorization and invalid are not (BreakerOutcome()). CANCELLED is
// invalid as http's Transport::kCancelled is: the caller (or its deadline
// policy) gave up, which says nothing of the dependency.
//
//   fusebox::grpc::Classification c = fusebox::grpc::Classify(8, "250");
//   // c.kind == http::Kind::kRateLimit, *c.retry_after == 250 ms
//   fusebox::Status s = fusebox::grpc::ToStatus(c, clock.Now());  // kRateLimited, retry_at
//
// Nothing here includes gRPC: codes are grpc::StatusCode's numbers, as in
// fusebox/status.h (docs/status-codes.md, docs/grpc.md).
//
// Thread-safe: every function is pure; a Rules object is read-only here.
// Classify() allocates nothing.
#ifndef FUSEBOX_GRPC_CLASSIFY_H_
#define FUSEBOX_GRPC_CLASSIFY_H_

#include <chrono>
#include <cstddef>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/http/classify.h"
#include "fusebox/status.h"

namespace fusebox::grpc {

// The trailing metadata key of gRPC's retry pushback (gRFC A6).
inline constexpr std::string_view kRetryPushbackKey = "grpc-retry-pushback-ms";

// Longer pushback values are malformed (20 digits already saturate).
inline constexpr std::size_t kMaxPushbackBytes = 64;

// A grpc-retry-pushback-ms value: 1*DIGIT milliseconds, nothing else (no
// sign, space, fraction or list). nullopt when malformed, negative (gRFC A6:
// "do not retry", which to a breaker is no usable hint), or longer than
// kMaxPushbackBytes. "0" is 1 ms. Saturates at `max_wait` (positive).
std::optional<std::chrono::milliseconds> ParsePushback(
    std::string_view value, std::chrono::milliseconds max_wait = std::chrono::hours(24)) noexcept;

struct Rules {
  // Exact codes whose kind is fixed, checked before every other rule, e.g.
  // {{5, http::Kind::kSuccess}} for a service where NOT_FOUND is an answer.
  std::vector<std::pair<int, http::Kind>> codes{};
  // A rate limit without a usable pushback waits this long. Default: 60 s.
  std::chrono::milliseconds default_wait = std::chrono::seconds(60);
  // Longer waits saturate to this. Default: 24 h.
  std::chrono::milliseconds max_wait = std::chrono::hours(24);
};

struct Classification {
  http::Kind kind = http::Kind::kInvalid;
  // The gRPC code (grpc::StatusCode's number).
  int code = 0;
  // The rule that decided, a static string such as "RESOURCE_EXHAUSTED is a
  // rate limit"; never text taken from the response.
  std::string_view rule{};
  // Rate limits only: how long to stop, in [1 ms, max_wait].
  std::optional<std::chrono::milliseconds> retry_after{};
};

// "OK", "CANCELLED", ..., "UNAUTHENTICATED"; "UNKNOWN_CODE" outside 0-16.
std::string_view GrpcCodeName(int code) noexcept;

// The classification of a call that ended with `code` and, when the server
// sent one, the grpc-retry-pushback-ms trailer `pushback`.
Classification Classify(int code, std::optional<std::string_view> pushback = std::nullopt,
                        const Rules& rules = Rules{});

// The Status for `c`, observed at `now`: OK for a success; otherwise
//   rate-limit     kRateLimited       retry_at = now + retry_after
//   transient      kTimeout (DEADLINE_EXCEEDED) or kUnavailable
//   authorization  kUnauthenticated (UNAUTHENTICATED) or kPermissionDenied
//   invalid        kNotFound (NOT_FOUND) or kInvalidArgument
// The message names the code and the rule, e.g. "gRPC UNAVAILABLE (14):
// UNAVAILABLE is transient". Allocates its message.
Status ToStatus(const Classification& c, TimePoint now);

// What a breaker records for `c` after a call that took `elapsed`: success;
// a rate limit with its wait as Outcome::OpenFor() when
// `rate_limit_opens_breaker` (a plain failure otherwise); a transient
// failure; authorization and invalid ignored.
Outcome BreakerOutcome(const Classification& c, Duration elapsed,
                       bool rate_limit_opens_breaker = true) noexcept;

}  // namespace fusebox::grpc

#endif  // FUSEBOX_GRPC_CLASSIFY_H_
