// fusebox/status.h: Status, the outcome of an operation that can fail.
//
// A Status is either OK or carries a StatusCode that tells the caller what to
// do next, an optional static reason (which guard refused, as a short
// snake_case word such as "open" or "half_open_full"), an optional retry_at
// (the earliest time a retry can make sense) and an optional message.
//
// An OK Status, and a rejection built with Status::Rejected(), allocate
// nothing: the reason is a pointer to a string literal and there is no
// message. Only messages cost an allocation, so the hot paths never use them.
//
//   fusebox::Status s = breaker.Call([] { return Charge(); });
//   if (s.code() == fusebox::StatusCode::kCircuitOpen) {
//     ScheduleRetry(*s.retry_at());
//   }
//
// Thread-compatible: const methods may run concurrently, others need external
// synchronization.
#ifndef FUSEBOX_STATUS_H_
#define FUSEBOX_STATUS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>

#include "fusebox/clock.h"

namespace fusebox {

// What went wrong, phrased as what the caller should do about it. The values
// are stable (new codes are added at the end); HttpStatusFor() and
// GrpcCodeFor() below, and docs/status-codes.md, map them to HTTP and gRPC.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  // A circuit breaker refused the call; retry_at() says when it may admit one.
  kCircuitOpen,
  // A bulkhead had no free slot.
  kBulkheadFull,
  // A rate limiter had no permit; retry_at() says when one frees up.
  kRateLimited,
  // The call did not finish within its deadline.
  kTimeout,
  // A retry policy gave up; the message names the last failure.
  kRetriesExhausted,
  // The dependency failed or cannot be reached.
  kUnavailable,
  // The caller passed something invalid; the message names it.
  kInvalidArgument,
  // A bug or an unexpected condition inside fusebox.
  kInternal,
  // What the call names does not exist (HTTP 404, gRPC NOT_FOUND).
  kNotFound,
  // The caller is known but may not do this (HTTP 403, PERMISSION_DENIED):
  // retrying with the same credentials cannot help.
  kPermissionDenied,
  // The caller's credentials are missing, wrong or expired (HTTP 401,
  // UNAUTHENTICATED): refresh them before trying again.
  kUnauthenticated,
};

// The last StatusCode: codes run densely from kOk to it.
inline constexpr StatusCode kLastStatusCode = StatusCode::kUnauthenticated;

// Returns the enumerator's name without the k, e.g. "CircuitOpen", except
// "OK" for kOk (the conventional spelling, as in absl::Status).
std::string_view StatusCodeName(StatusCode code) noexcept;

// The table of docs/status-codes.md, both ways. From fusebox to the wire:
// the HTTP status and the gRPC code (grpc::StatusCode's numeric value) that
// report `code`, e.g. 503 and 14 (UNAVAILABLE) for kCircuitOpen. From the
// wire to fusebox: what a dependency's HTTP status or gRPC code means to a
// caller, e.g. 429 and RESOURCE_EXHAUSTED -> kRateLimited, any 2xx or 3xx ->
// kOk, a 5xx or gRPC INTERNAL -> kUnavailable (the dependency failed; kInternal
// is kept for fusebox's own faults). Unknown numbers map to kUnavailable.
int HttpStatusFor(StatusCode code) noexcept;
StatusCode StatusCodeFromHttp(int http_status) noexcept;
int GrpcCodeFor(StatusCode code) noexcept;
StatusCode StatusCodeFromGrpc(int grpc_code) noexcept;

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() noexcept = default;

  // A status with `code` and a human-readable `message`.
  Status(StatusCode code, std::string message)
      : code_(code),
        message_(message.empty() ? nullptr : std::make_unique<std::string>(std::move(message))) {}

  Status(const Status& other)
      : code_(other.code_),
        cause_(other.cause_),
        has_retry_at_(other.has_retry_at_),
        reason_(other.reason_),
        retry_at_(other.retry_at_),
        message_(other.message_ ? std::make_unique<std::string>(*other.message_) : nullptr) {}
  Status& operator=(const Status& other) {
    if (this != &other) *this = Status(other);
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;

  // A rejection by a guard: `reason` must point to a string literal (it is not
  // copied), `retry_at` is when a retry can make sense, if known. Allocates
  // nothing.
  static Status Rejected(StatusCode code, const char* reason,
                         std::optional<TimePoint> retry_at = std::nullopt) noexcept {
    Status s;
    s.code_ = code;
    s.reason_ = reason;
    if (retry_at) {
      s.has_retry_at_ = true;
      s.retry_at_ = *retry_at;
    }
    return s;
  }

  // This status, saying when a retry can make sense (a rate limit's
  // Retry-After, say).
  Status WithRetryAt(TimePoint retry_at) && noexcept {
    has_retry_at_ = true;
    retry_at_ = retry_at;
    return std::move(*this);
  }

  static Status InvalidArgument(std::string message) {
    return Status(StatusCode::kInvalidArgument, std::move(message));
  }
  static Status Internal(std::string message) {
    return Status(StatusCode::kInternal, std::move(message));
  }
  static Status Unavailable(std::string message) {
    return Status(StatusCode::kUnavailable, std::move(message));
  }

  bool ok() const noexcept { return code_ == StatusCode::kOk; }
  StatusCode code() const noexcept { return code_; }

  // The static reason given to Rejected(), or "" when there is none.
  std::string_view reason() const noexcept { return reason_ ? reason_ : ""; }

  // The code of the failure behind this one, kOk when none was given. Retry
  // sets it on kRetriesExhausted to the last attempt's code (kTimeout after
  // three timeouts), so that a Fallback or a caller can tell why the retries
  // ran out.
  StatusCode cause() const noexcept { return cause_; }

  // This status, naming `cause` as the failure behind it (see cause()).
  Status WithCause(StatusCode cause) && noexcept {
    cause_ = cause;
    return std::move(*this);
  }

  // When a retry can make sense, if the refusing guard knows.
  std::optional<TimePoint> retry_at() const noexcept {
    if (!has_retry_at_) return std::nullopt;
    return retry_at_;
  }

  // The message; for a rejection without one, the reason.
  std::string_view message() const noexcept {
    if (message_) return *message_;
    return reason();
  }

  // "OK", or "CircuitOpen: half_open_full" and the like.
  std::string ToString() const;

  friend bool operator==(const Status& a, const Status& b) noexcept {
    return a.code_ == b.code_ && a.reason() == b.reason() && a.message() == b.message();
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  StatusCode cause_ = StatusCode::kOk;  // In the padding: no size cost.
  bool has_retry_at_ = false;
  const char* reason_ = nullptr;
  TimePoint retry_at_{};
  // Null unless there is a message: an OK status or a rejection is 32 bytes
  // that move with a few register copies.
  std::unique_ptr<std::string> message_;
};

std::ostream& operator<<(std::ostream& os, const Status& status);
std::ostream& operator<<(std::ostream& os, StatusCode code);

}  // namespace fusebox

#endif  // FUSEBOX_STATUS_H_
