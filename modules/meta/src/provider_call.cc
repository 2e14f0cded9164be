#include "fusebox/meta/provider_call.h"

#include <cassert>
#include <cmath>
#include <cstdlib>

#include "fusebox/meta/redact.h"

namespace fusebox::meta {

std::string_view ConnCodeName(ConnCode code) noexcept {
  switch (code) {
    case ConnCode::kConn003Transient:
      return "CONN_003";
    case ConnCode::kConn008RateLimit:
      return "CONN_008";
    case ConnCode::kConn009Authorization:
      return "CONN_009";
    case ConnCode::kConn010Invalid:
      return "CONN_010";
  }
  return "CONN_010";
}

ConnCode ConnCodeFor(Kind kind) noexcept {
  switch (kind) {
    case Kind::kRateLimit:
      return ConnCode::kConn008RateLimit;
    case Kind::kTransient:
      return ConnCode::kConn003Transient;
    case Kind::kAuthorization:
      return ConnCode::kConn009Authorization;
    case Kind::kInvalid:
      return ConnCode::kConn010Invalid;
  }
  return ConnCode::kConn010Invalid;
}

ProviderError ProviderError::FromResponse(const Response& response, const Rules& rules) {
  const Classification c = Classify(response, rules);
  ProviderError e;
  e.code = ConnCodeFor(c.kind);
  e.http_status = response.status;
  e.meta_code = c.error.code;
  e.meta_subcode = c.error.subcode;
  e.retry_after = c.retry_after;
  return e;
}

std::string ProviderError::message() const { return LogSummary(*this); }

std::string_view WorkloadName(Workload workload) noexcept {
  switch (workload) {
    case Workload::kRead:
      return "read";
    case Workload::kPublish:
      return "publish";
    case Workload::kReply:
      return "reply";
    case Workload::kTokenRefresh:
      return "token-refresh";
  }
  return "read";
}

Status ProviderError::ToStatus(TimePoint now) const {
  StatusCode status_code = StatusCode::kInvalidArgument;  // CONN_009, CONN_010
  if (circuit_open) {
    status_code = StatusCode::kCircuitOpen;
  } else if (code == ConnCode::kConn003Transient) {
    status_code = StatusCode::kUnavailable;
  } else if (code == ConnCode::kConn008RateLimit) {
    status_code = StatusCode::kRateLimited;
  }
  Status s(status_code, message());
  if (retry_after) return std::move(s).WithRetryAt(now + *retry_after);
  return s;
}

Result<std::string> ProviderCircuitKey(std::string_view provider, Workload workload,
                                       std::string_view subject) {
  if (provider.empty() || provider.find(':') != std::string_view::npos) {
    return Status::InvalidArgument("provider must be non-empty and without ':', got \"" +
                                   std::string(provider) + "\"");
  }
  if (subject.empty()) return Status::InvalidArgument("subject must be non-empty");
  std::string key = "provider:";
  key.append(provider).append(":").append(WorkloadName(workload)).append(":").append(subject);
  return key;
}

CircuitBreakerConfig TransientCircuitConfig() {
  return CircuitBreakerConfig{
      // "More than 50 %": the breaker trips when rate >= threshold, the rate
      // being part * 100.0f / total in float32. 2 of 4 is exactly 50.0f, so
      // the threshold is the next float above 50 (50.000004): 1 of 2 stays
      // below the minimum of 3 calls, 2 of 3 (66.7 %) trips, 2 of 4 (50 %)
      // does not, 3 of 5 (60 %) does. Opossum's errorThresholdPercentage: 50
      // means "> 50" in the same way.
      .failure_rate_threshold = std::nextafter(50.0f, 100.0f),
      .permitted_number_of_calls_in_half_open_state = 1,
      .sliding_window_type = SlidingWindowType::kTimeBased,
      .sliding_window_size = 10,  // seconds, Opossum's rollingCountTimeout
      .minimum_number_of_calls = 3,
      .wait_duration_in_open_state = std::chrono::seconds(30),
      .half_open_policy = HalfOpenPolicy::kAnyFailureReopens,
  };
}

CircuitBreakerConfig QuotaCircuitConfig() {
  return CircuitBreakerConfig{
      // Every failure this breaker sees carries OpenFor (the recovery time),
      // which opens it at once. An open decided by the window as well lasts
      // max(wait_duration_in_open_state, hint), so the wait is the smallest
      // valid one and the hint alone decides; the window itself (100 calls,
      // all failed) is only a backstop.
      .failure_rate_threshold = 100,
      .permitted_number_of_calls_in_half_open_state = 1,
      .sliding_window_size = 100,
      .minimum_number_of_calls = 100,
      .wait_duration_in_open_state = std::chrono::seconds(1),
      .half_open_policy = HalfOpenPolicy::kAnyFailureReopens,
  };
}

Status AddProviderCircuitConfigs(Registry& registry) {
  if (Status s = registry.AddConfig(std::string(kTransientConfigName), TransientCircuitConfig());
      !s.ok()) {
    return s;
  }
  return registry.AddConfig(std::string(kQuotaConfigName), QuotaCircuitConfig());
}

namespace internal {

namespace {

// The breaker `key` from template `name`, adding the default template first
// when it is missing (the only way Get() fails for a non-empty key). Two
// threads adding the same default at once is harmless; add custom templates
// before the first call.
std::shared_ptr<CircuitBreaker> GetOrAddTemplate(Registry& registry, const std::string& key,
                                                 std::string_view name,
                                                 CircuitBreakerConfig (*config)()) {
  Result<std::shared_ptr<CircuitBreaker>> b = registry.Get(key, name);
  if (!b) {
    (void)registry.AddConfig(std::string(name), config());
    b = registry.Get(key, name);
  }
  if (!b) std::abort();  // a valid template and a non-empty key: a bug
  return std::move(*b);
}

}  // namespace

ProviderError RejectionError(ConnCode code, const Status& rejection, Clock& clock) {
  ProviderError e;
  e.code = code;
  e.circuit_open = true;
  if (std::optional<TimePoint> at = rejection.retry_at()) {
    const Duration left = *at - clock.Now();
    // Rounded up: never tell a caller to come back before the circuit allows.
    auto secs = std::chrono::ceil<std::chrono::seconds>(left);
    if (secs < std::chrono::seconds(1)) secs = std::chrono::seconds(1);
    e.retry_after = secs;
  }
  return e;
}

std::optional<ProviderError> RejectWithoutPermit(const ProviderCircuits& circuits, Clock& clock) {
  // Transient first, as the nesting says; a quota refusal then takes no
  // transient permit (it would only be given back: Meta was not called).
  if (std::optional<Status> no = circuits.transient->TryReject()) {
    return RejectionError(ConnCode::kConn003Transient, *no, clock);
  }
  if (std::optional<Status> no = circuits.quota->TryReject()) {
    return RejectionError(ConnCode::kConn008RateLimit, *no, clock);
  }
  return std::nullopt;
}

Outcome TransientOutcome(const ProviderError* error, Duration elapsed) {
  if (error != nullptr && error->code == ConnCode::kConn003Transient) {
    return Outcome::Failure(elapsed);
  }
  // Success, rate limit, authorization, invalid: Meta answered (Opossum's
  // errorFilter counts these as successes of this circuit).
  return Outcome::Success(elapsed);
}

Outcome QuotaOutcome(const ProviderError* error, Duration elapsed) {
  if (error == nullptr) return Outcome::Success(elapsed);
  switch (error->code) {
    case ConnCode::kConn008RateLimit:
      return Outcome::OpenFor(error->retry_after.value_or(std::chrono::seconds(120)), elapsed);
    case ConnCode::kConn003Transient:
      // Says nothing about the quota; a probe that fails this way frees its
      // slot for the next one.
      return Outcome::Ignored(elapsed);
    case ConnCode::kConn009Authorization:
    case ConnCode::kConn010Invalid:
      return Outcome::Success(elapsed);
  }
  return Outcome::Ignored(elapsed);
}

}  // namespace internal

ProviderCircuits GetProviderCircuits(Registry& registry, std::string_view key) {
  return {internal::GetOrAddTemplate(registry, std::string(key) + ":transient",
                                     kTransientConfigName, &TransientCircuitConfig),
          internal::GetOrAddTemplate(registry, std::string(key) + ":quota", kQuotaConfigName,
                                     &QuotaCircuitConfig)};
}

std::variant<ProviderCall, ProviderError> ProviderCall::Start(Registry& registry,
                                                              std::string_view key) {
  assert(!key.empty() && "a provider call needs a key (ProviderCircuitKey)");
  ProviderCircuits circuits = GetProviderCircuits(registry, key);
  Clock& clock = registry.clock();
  if (std::optional<ProviderError> refused = internal::RejectWithoutPermit(circuits, clock)) {
    return *refused;
  }
  Result<Permit> outer = circuits.transient->TryAcquire();
  if (!outer) {
    return internal::RejectionError(ConnCode::kConn003Transient, outer.error(), clock);
  }
  Result<Permit> inner = circuits.quota->TryAcquire();
  if (!inner) {
    // Meta was not called: nothing to say about transient failures.
    outer->Ignore();
    return internal::RejectionError(ConnCode::kConn008RateLimit, inner.error(), clock);
  }
  return ProviderCall(std::move(circuits), *std::move(outer), *std::move(inner), clock);
}

void ProviderCall::Finish(const ProviderError* error) && {
  const Duration elapsed = clock_->Now() - start_;
  inner_.Record(internal::QuotaOutcome(error, elapsed));
  outer_.Record(internal::TransientOutcome(error, elapsed));
}

void ProviderCall::FinishWithException() && {
  const Duration elapsed = clock_->Now() - start_;
  inner_.Record(Outcome::Ignored(elapsed));
  outer_.Record(Outcome::Failure(elapsed));
}

std::optional<ProviderError> RejectIfOpen(Registry& registry, std::string_view key) {
  std::string name(key);
  name += ":transient";
  std::shared_ptr<CircuitBreaker> transient = registry.Find(name);
  name.resize(key.size());
  name += ":quota";
  std::shared_ptr<CircuitBreaker> quota = registry.Find(name);
  if (transient == nullptr || quota == nullptr) return std::nullopt;
  return internal::RejectWithoutPermit({std::move(transient), std::move(quota)}, registry.clock());
}

}  // namespace fusebox::meta
