#include "fusebox/http/classify.h"

#include <string>

#include "fusebox/http/retry_after.h"

namespace fusebox::http {
namespace {

using std::chrono::seconds;
using std::chrono::sys_seconds;

// The recovery time of a rate limit: Retry-After against Date (else
// rules.now), else the default wait.
seconds RecoveryTime(const Response& response, const Rules& rules) {
  if (std::optional<seconds> wait = UsableRetryAfter(response, rules)) return *wait;
  return std::min(rules.default_wait, rules.max_wait);
}

}  // namespace

std::optional<seconds> UsableRetryAfter(const Response& response, const Rules& rules) {
  if (!response.retry_after) return std::nullopt;
  std::optional<sys_seconds> reference = rules.now;
  if (response.date) {
    if (std::optional<sys_seconds> d = ParseHttpDate(TrimOws(*response.date))) reference = d;
  }
  return ParseRetryAfter(*response.retry_after, reference, rules.max_wait);
}

std::string_view KindName(Kind kind) noexcept {
  switch (kind) {
    case Kind::kSuccess:
      return "success";
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

std::string_view TransportName(Transport transport) noexcept {
  switch (transport) {
    case Transport::kConnect:
      return "connect";
    case Transport::kReset:
      return "reset";
    case Transport::kDeadline:
      return "deadline";
    case Transport::kCancelled:
      return "cancelled";
    case Transport::kOther:
      return "other";
  }
  return "other";
}

Classification Classify(const Response& response, const Rules& rules) {
  Classification c;
  c.status = response.status;
  const int s = response.status;
  const auto decide = [&](Kind kind, std::string_view rule) {
    c.kind = kind;
    c.rule = rule;
    if (kind == Kind::kRateLimit) c.retry_after = RecoveryTime(response, rules);
    return c;
  };
  for (const auto& [status, kind] : rules.statuses) {
    if (status == s) return decide(kind, "an override in Rules::statuses");
  }
  if (s >= 200 && s <= 399) return decide(Kind::kSuccess, "2xx and 3xx are success");
  if (s == 429) return decide(Kind::kRateLimit, "429 is a rate limit");
  if (s == 503 && rules.unavailable_with_retry_after_is_rate_limit &&
      UsableRetryAfter(response, rules)) {
    return decide(Kind::kRateLimit, "503 with Retry-After is a rate limit");
  }
  if (s == 408) return decide(Kind::kTransient, "408 is transient");
  if (s >= 500 && s <= 599) return decide(Kind::kTransient, "5xx is transient");
  if (s == 401 || s == 403) return decide(Kind::kAuthorization, "401 and 403 are authorization");
  if (s >= 400 && s <= 499) return decide(Kind::kInvalid, "other 4xx are invalid");
  return decide(Kind::kInvalid, "a status outside 200-599 is invalid");
}

Classification ClassifyTransport(Transport transport, const Rules& rules) {
  Classification c;
  c.transport = transport;
  switch (transport) {
    case Transport::kConnect:
      c.kind = rules.on_connect;
      c.rule = "Rules::on_connect";
      break;
    case Transport::kReset:
      c.kind = rules.on_reset;
      c.rule = "Rules::on_reset";
      break;
    case Transport::kDeadline:
      c.kind = rules.on_deadline;
      c.rule = "Rules::on_deadline";
      break;
    case Transport::kCancelled:
      c.kind = rules.on_cancelled;
      c.rule = "Rules::on_cancelled";
      break;
    case Transport::kOther:
      c.kind = rules.on_other;
      c.rule = "Rules::on_other";
      break;
  }
  if (c.kind == Kind::kRateLimit) c.retry_after = std::min(rules.default_wait, rules.max_wait);
  return c;
}

Status ToStatus(const Classification& c, TimePoint now) {
  if (c.kind == Kind::kSuccess) return Status();
  std::string message;
  if (c.transport) {
    message = "HTTP exchange failed (";
    message += TransportName(*c.transport);
    message += ")";
  } else {
    message = "HTTP " + std::to_string(c.status);
  }
  message += ": ";
  message += c.rule;
  switch (c.kind) {
    case Kind::kSuccess:
      break;
    case Kind::kRateLimit: {
      Status s(StatusCode::kRateLimited, std::move(message));
      if (c.retry_after) return std::move(s).WithRetryAt(now + *c.retry_after);
      return s;
    }
    case Kind::kTransient:
      return Status(
          c.transport == Transport::kDeadline ? StatusCode::kTimeout : StatusCode::kUnavailable,
          std::move(message));
    case Kind::kAuthorization:
      return Status(c.status == 401 ? StatusCode::kUnauthenticated : StatusCode::kPermissionDenied,
                    std::move(message));
    case Kind::kInvalid:
      return Status(c.status == 404 ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                    std::move(message));
  }
  return Status(StatusCode::kInvalidArgument, std::move(message));
}

OutcomeKind BreakerOutcomeKind(const Status& status) noexcept {
  switch (status.code()) {
    case StatusCode::kOk:
      return OutcomeKind::kSuccess;
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated:
      return OutcomeKind::kIgnored;
    default:
      return OutcomeKind::kFailure;
  }
}

}  // namespace fusebox::http
