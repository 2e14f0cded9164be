#include "fusebox/grpc/call.h"

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <string>
#include <utility>

namespace fusebox::grpc {
namespace {

using std::chrono::milliseconds;

// The time from `now` to `retry_at`, rounded up to whole milliseconds, at
// least 1 ms (a hint of 0 would read as "retry at once").
milliseconds PushbackUntil(TimePoint retry_at, TimePoint now) {
  const milliseconds ms = std::chrono::ceil<milliseconds>(retry_at - now);
  return ms < milliseconds(1) ? milliseconds(1) : ms;
}

// A local refusal: `status` is the breaker's (kCircuitOpen) or the
// registry's. UNAVAILABLE for an open circuit, whose retry hint is in the
// message; otherwise the status's own gRPC code.
::grpc::Status Refuse(Status status, std::string_view breaker, TimePoint now, CallInfo* info) {
  std::optional<milliseconds> pushback;
  if (status.code() == StatusCode::kCircuitOpen && status.retry_at()) {
    pushback = PushbackUntil(*status.retry_at(), now);
  }
  std::string message = "fusebox: ";
  if (status.code() == StatusCode::kCircuitOpen) {
    message += "circuit '";
    message += breaker;
    message += "' is open (";
    message += status.reason().empty() ? std::string_view("open") : status.reason();
    message += ")";
    if (pushback) {
      const std::string ms = std::to_string(pushback->count());
      message += "; retry in " + ms + " ms (";
      message += kRetryPushbackKey;
      message += ": " + ms + ")";
    }
  } else {
    message += status.ToString();
  }
  const auto code = static_cast<::grpc::StatusCode>(GrpcCodeFor(status.code()));
  if (info != nullptr) {
    *info = CallInfo{};
    info->status = std::move(status);
    info->rejected = true;
    info->retry_pushback = pushback;
  }
  return {code, message};
}

// The grpc-retry-pushback-ms trailer, if the server sent one.
std::optional<std::string_view> PushbackTrailer(const ::grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it =
      trailers.find(::grpc::string_ref(kRetryPushbackKey.data(), kRetryPushbackKey.size()));
  if (it == trailers.end()) return std::nullopt;
  return std::string_view(it->second.data(), it->second.size());
}

}  // namespace

::grpc::Status UnaryCall::operator()(::grpc::ClientContext& context) const {
  return invoke_(object_, context);
}

::grpc::Status Call(CircuitBreaker& breaker, ::grpc::ClientContext& context, UnaryCall call,
                    CallInfo* info, const Options& options) {
  Clock& clock = breaker.clock();
  Result<Permit> permit = breaker.TryAcquire();
  if (!permit) return Refuse(permit.error(), breaker.name(), clock.Now(), info);
  const TimePoint start = clock.Now();
  ::grpc::Status status = call(context);
  const TimePoint end = clock.Now();
  const Duration elapsed = end - start;
  const Classification c =
      Classify(static_cast<int>(status.error_code()), PushbackTrailer(context), options.rules);
  permit->Record(BreakerOutcome(c, elapsed, options.rate_limit_opens_breaker));
  if (info != nullptr) {
    *info = CallInfo{};
    info->status = ToStatus(c, end);
    info->classification = c;
    info->elapsed = elapsed;
  }
  return status;
}

::grpc::Status Call(Registry& registry, std::string_view key, ::grpc::ClientContext& context,
                    UnaryCall call, CallInfo* info, const Options& options) {
  Result<std::shared_ptr<CircuitBreaker>> breaker = registry.Get(key, options.config_name);
  if (!breaker) return Refuse(breaker.error(), key, registry.clock().Now(), info);
  return Call(**breaker, context, call, info, options);
}

}  // namespace fusebox::grpc
