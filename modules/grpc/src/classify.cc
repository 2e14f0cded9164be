#include "fusebox/grpc/classify.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

namespace fusebox::grpc {
namespace {

using std::chrono::milliseconds;

// grpc::StatusCode's numbers (grpc/impl/codegen/status.h): no gRPC here.
enum Code : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kAlreadyExists = 6,
  kPermissionDenied = 7,
  kResourceExhausted = 8,
  kFailedPrecondition = 9,
  kAborted = 10,
  kOutOfRange = 11,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
  kDataLoss = 15,
  kUnauthenticated = 16,
};

}  // namespace

std::optional<milliseconds> ParsePushback(std::string_view value, milliseconds max_wait) noexcept {
  if (value.empty() || value.size() > kMaxPushbackBytes) return std::nullopt;
  const std::int64_t cap = std::max<std::int64_t>(max_wait.count(), 1);
  constexpr std::int64_t kLimit = (std::numeric_limits<std::int64_t>::max() - 9) / 10;
  std::int64_t ms = 0;
  for (const char ch : value) {
    if (ch < '0' || ch > '9') return std::nullopt;
    if (ms > cap) continue;  // saturated; the rest must still be digits
    ms = ms > kLimit ? std::numeric_limits<std::int64_t>::max() : ms * 10 + (ch - '0');
  }
  return milliseconds(std::clamp<std::int64_t>(ms, 1, cap));
}

std::string_view GrpcCodeName(int code) noexcept {
  switch (code) {
    case kOk:
      return "OK";
    case kCancelled:
      return "CANCELLED";
    case kUnknown:
      return "UNKNOWN";
    case kInvalidArgument:
      return "INVALID_ARGUMENT";
    case kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case kNotFound:
      return "NOT_FOUND";
    case kAlreadyExists:
      return "ALREADY_EXISTS";
    case kPermissionDenied:
      return "PERMISSION_DENIED";
    case kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case kAborted:
      return "ABORTED";
    case kOutOfRange:
      return "OUT_OF_RANGE";
    case kUnimplemented:
      return "UNIMPLEMENTED";
    case kInternal:
      return "INTERNAL";
    case kUnavailable:
      return "UNAVAILABLE";
    case kDataLoss:
      return "DATA_LOSS";
    case kUnauthenticated:
      return "UNAUTHENTICATED";
    default:
      return "UNKNOWN_CODE";
  }
}

Classification Classify(int code, std::optional<std::string_view> pushback, const Rules& rules) {
  Classification c;
  c.code = code;
  const auto decide = [&](http::Kind kind, std::string_view rule) {
    c.kind = kind;
    c.rule = rule;
    if (kind == http::Kind::kRateLimit) {
      std::optional<milliseconds> wait;
      if (pushback) wait = ParsePushback(*pushback, rules.max_wait);
      c.retry_after = wait ? *wait
                           : std::clamp(std::min(rules.default_wait, rules.max_wait),
                                        milliseconds(1), std::max(rules.max_wait, milliseconds(1)));
    }
    return c;
  };
  for (const auto& [overridden, kind] : rules.codes) {
    if (overridden == code) return decide(kind, "an override in Rules::codes");
  }
  switch (code) {
    case kOk:
      return decide(http::Kind::kSuccess, "OK is success");
    case kResourceExhausted:
      return decide(http::Kind::kRateLimit, "RESOURCE_EXHAUSTED is a rate limit");
    case kUnavailable:
    case kDeadlineExceeded:
    case kUnknown:
    case kAborted:
    case kInternal:
    case kDataLoss:
      return decide(http::Kind::kTransient,
                    "UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN, ABORTED, INTERNAL and DATA_LOSS "
                    "are transient");
    case kUnauthenticated:
    case kPermissionDenied:
      return decide(http::Kind::kAuthorization,
                    "UNAUTHENTICATED and PERMISSION_DENIED are authorization");
    default:
      return decide(http::Kind::kInvalid, "other codes are the caller's (invalid)");
  }
}

Status ToStatus(const Classification& c, TimePoint now) {
  if (c.kind == http::Kind::kSuccess) return Status();
  std::string message = "gRPC ";
  message += GrpcCodeName(c.code);
  message += " (" + std::to_string(c.code) + "): ";
  message += c.rule;
  switch (c.kind) {
    case http::Kind::kSuccess:
      break;
    case http::Kind::kRateLimit: {
      Status s(StatusCode::kRateLimited, std::move(message));
      if (c.retry_after) return std::move(s).WithRetryAt(now + *c.retry_after);
      return s;
    }
    case http::Kind::kTransient:
      return Status(c.code == kDeadlineExceeded ? StatusCode::kTimeout : StatusCode::kUnavailable,
                    std::move(message));
    case http::Kind::kAuthorization:
      return Status(
          c.code == kUnauthenticated ? StatusCode::kUnauthenticated : StatusCode::kPermissionDenied,
          std::move(message));
    case http::Kind::kInvalid:
      return Status(c.code == kNotFound ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                    std::move(message));
  }
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

Outcome BreakerOutcome(const Classification& c, Duration elapsed,
                       bool rate_limit_opens_breaker) noexcept {
  switch (c.kind) {
    case http::Kind::kSuccess:
      return Outcome::Success(elapsed);
    case http::Kind::kRateLimit:
      if (rate_limit_opens_breaker && c.retry_after)
        return Outcome::OpenFor(*c.retry_after, elapsed);
      return Outcome::Failure(elapsed);
    case http::Kind::kTransient:
      return Outcome::Failure(elapsed);
    case http::Kind::kAuthorization:
    case http::Kind::kInvalid:
      return Outcome::Ignored(elapsed);
  }
  return Outcome::Ignored(elapsed);
}

}  // namespace fusebox::grpc
