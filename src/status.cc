#include "fusebox/status.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "fusebox/result.h"

namespace fusebox {

std::string_view StatusCodeName(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCircuitOpen:
      return "CircuitOpen";
    case StatusCode::kBulkheadFull:
      return "BulkheadFull";
    case StatusCode::kRateLimited:
      return "RateLimited";
    case StatusCode::kTimeout:
      return "Timeout";
    case StatusCode::kRetriesExhausted:
      return "RetriesExhausted";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kInternal:
      return "Internal";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kPermissionDenied:
      return "PermissionDenied";
    case StatusCode::kUnauthenticated:
      return "Unauthenticated";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  const std::string_view text = message();
  if (!text.empty()) {
    out += ": ";
    out += text;
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Status& status) { return os << status.ToString(); }

std::ostream& operator<<(std::ostream& os, StatusCode code) { return os << StatusCodeName(code); }

// docs/status-codes.md is this table; src/status_test.cc checks it both ways.
namespace {
// gRPC's codes (grpc/impl/codegen/status.h), by number: no gRPC dependency.
enum Grpc : int {
  kGrpcOk = 0,
  kGrpcCancelled = 1,
  kGrpcUnknown = 2,
  kGrpcInvalidArgument = 3,
  kGrpcDeadlineExceeded = 4,
  kGrpcNotFound = 5,
  kGrpcAlreadyExists = 6,
  kGrpcPermissionDenied = 7,
  kGrpcResourceExhausted = 8,
  kGrpcFailedPrecondition = 9,
  kGrpcAborted = 10,
  kGrpcOutOfRange = 11,
  kGrpcUnimplemented = 12,
  kGrpcInternal = 13,
  kGrpcUnavailable = 14,
  kGrpcDataLoss = 15,
  kGrpcUnauthenticated = 16,
};
}  // namespace

int HttpStatusFor(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kRateLimited:
      return 429;
    case StatusCode::kInternal:
      return 500;
    case StatusCode::kCircuitOpen:
    case StatusCode::kBulkheadFull:
    case StatusCode::kRetriesExhausted:
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kTimeout:
      return 504;
  }
  return 500;
}

StatusCode StatusCodeFromHttp(int http_status) noexcept {
  switch (http_status) {
    case 400:
      return StatusCode::kInvalidArgument;
    case 401:
      return StatusCode::kUnauthenticated;
    case 403:
      return StatusCode::kPermissionDenied;
    case 404:
    case 410:
      return StatusCode::kNotFound;
    case 408:
    case 504:
      return StatusCode::kTimeout;
    case 429:
      return StatusCode::kRateLimited;
    default:
      break;
  }
  if (http_status >= 100 && http_status < 400) return StatusCode::kOk;
  if (http_status >= 400 && http_status < 500) return StatusCode::kInvalidArgument;
  return StatusCode::kUnavailable;  // 5xx, and numbers no server should send.
}

int GrpcCodeFor(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk:
      return kGrpcOk;
    case StatusCode::kInvalidArgument:
      return kGrpcInvalidArgument;
    case StatusCode::kTimeout:
      return kGrpcDeadlineExceeded;
    case StatusCode::kNotFound:
      return kGrpcNotFound;
    case StatusCode::kPermissionDenied:
      return kGrpcPermissionDenied;
    case StatusCode::kRateLimited:
    case StatusCode::kBulkheadFull:
      return kGrpcResourceExhausted;
    case StatusCode::kInternal:
      return kGrpcInternal;
    case StatusCode::kCircuitOpen:
    case StatusCode::kRetriesExhausted:
    case StatusCode::kUnavailable:
      return kGrpcUnavailable;
    case StatusCode::kUnauthenticated:
      return kGrpcUnauthenticated;
  }
  return kGrpcInternal;
}

StatusCode StatusCodeFromGrpc(int grpc_code) noexcept {
  switch (grpc_code) {
    case kGrpcOk:
      return StatusCode::kOk;
    case kGrpcInvalidArgument:
    case kGrpcAlreadyExists:
    case kGrpcFailedPrecondition:
    case kGrpcOutOfRange:
    case kGrpcUnimplemented:
      return StatusCode::kInvalidArgument;
    case kGrpcDeadlineExceeded:
      return StatusCode::kTimeout;
    case kGrpcNotFound:
      return StatusCode::kNotFound;
    case kGrpcPermissionDenied:
      return StatusCode::kPermissionDenied;
    case kGrpcResourceExhausted:
      return StatusCode::kRateLimited;
    case kGrpcUnauthenticated:
      return StatusCode::kUnauthenticated;
    case kGrpcCancelled:
    case kGrpcUnknown:
    case kGrpcAborted:
    case kGrpcInternal:
    case kGrpcUnavailable:
    case kGrpcDataLoss:
    default:
      return StatusCode::kUnavailable;
  }
}

namespace internal {

void DieOfValueOnError(const Status& status) noexcept {
  // stdio, not iostreams: safe however the program is failing, and one write.
  const std::string text = "fusebox: Result::value() on an error: " + status.ToString() + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
  std::abort();
}

}  // namespace internal

}  // namespace fusebox
