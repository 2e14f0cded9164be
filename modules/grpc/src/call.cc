#include "fusebox/grpc/call.h"

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include <string>
#include <utility>

#include "refusal.h"

namespace fusebox::grpc {
namespace internal {

Refusal MakeRefusal(const Status& status, std::string_view breaker, TimePoint now) {
  using std::chrono::milliseconds;
  Refusal refusal;
  if (status.code() == StatusCode::kCircuitOpen && status.retry_at()) {
    // Rounded up, at least 1 ms (a hint of 0 would read as "retry at once").
    const milliseconds ms = std::chrono::ceil<milliseconds>(*status.retry_at() - now);
    refusal.pushback = ms < milliseconds(1) ? milliseconds(1) : ms;
  }
  std::string& message = refusal.message;
  message = "fusebox: ";
  if (status.code() == StatusCode::kCircuitOpen) {
    message += "circuit '";
    message += breaker;
    message += "' is open (";
    message += status.reason().empty() ? std::string_view("open") : status.reason();
    message += ")";
    if (refusal.pushback) {
      const std::string ms = std::to_string(refusal.pushback->count());
      message += "; retry in " + ms + " ms (";
      message += kRetryPushbackKey;
      message += ": " + ms + ")";
    }
  } else {
    message += status.ToString();
  }
  refusal.code = GrpcCodeFor(status.code());
  return refusal;
}

}  // namespace internal

namespace {

// A local refusal: `status` is the breaker's (kCircuitOpen) or the
// registry's.
::grpc::Status Refuse(Status status, std::string_view breaker, TimePoint now, CallInfo* info) {
  const internal::Refusal refusal = internal::MakeRefusal(status, breaker, now);
  if (info != nullptr) {
    *info = CallInfo{};
    info->status = std::move(status);
    info->rejected = true;
    info->retry_pushback = refusal.pushback;
  }
  return {static_cast<::grpc::StatusCode>(refusal.code), refusal.message};
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
