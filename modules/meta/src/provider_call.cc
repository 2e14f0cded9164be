#include "fusebox/meta/provider_call.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

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

// What `lookup(name)` (Registry::Get or Borrow of a circuit from template
// `name`) returns, adding the default template first when it is missing (the
// only way a lookup fails for a non-empty key). Two threads adding the same
// default at once is harmless; add custom templates before the first call.
// Returned as the lookup built it, never moved on a hit (BorrowedCircuits).
template <typename Lookup>
auto OrAddTemplate(Registry& registry, std::string_view name, CircuitBreakerConfig (*config)(),
                   const Lookup& lookup) {
  auto b = lookup(name);
  if (!b) {
    (void)registry.AddConfig(std::string(name), config());
    b = lookup(name);
  }
  if (!b) std::abort();  // a valid template and a non-empty key: a bug
  return b;
}

// The circuits' names are the key and these.
constexpr std::string_view kTransientSuffix = ":transient";
constexpr std::string_view kQuotaSuffix = ":quota";

// The names "<key>:transient" and "<key>:quota", built in place: on the stack
// unless the key is very long (a subject is an account id: keys are ~40 bytes).
class CircuitNames {
 public:
  explicit CircuitNames(std::string_view key) : key_size_(key.size()) {
    if (key.size() + kLongestSuffix.size() <= kStackBytes) {
      key.copy(stack_.data(), key.size());
    } else {
      heap_.reserve(key.size() + kLongestSuffix.size());
      heap_.assign(key);
    }
  }

  std::string_view Transient() { return With(kTransientSuffix); }
  std::string_view Quota() { return With(kQuotaSuffix); }

 private:
  static constexpr std::size_t kStackBytes = 256;
  static constexpr std::string_view kLongestSuffix = kTransientSuffix;

  std::string_view With(std::string_view suffix) {
    if (heap_.empty()) {
      suffix.copy(stack_.data() + key_size_, suffix.size());
      return {stack_.data(), key_size_ + suffix.size()};
    }
    heap_.resize(key_size_);
    heap_.append(suffix);
    return heap_;
  }

  std::size_t key_size_;
  std::array<char, kStackBytes> stack_;
  std::string heap_;
};

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

std::optional<ProviderError> RejectWithoutPermit(CircuitBreaker& transient, CircuitBreaker& quota,
                                                 Clock& clock) {
  // Transient first, as the nesting says; a quota refusal then takes no
  // transient permit (it would only be given back: Meta was not called).
  if (std::optional<Status> no = transient.TryReject()) {
    return RejectionError(ConnCode::kConn003Transient, *no, clock);
  }
  if (std::optional<Status> no = quota.TryReject()) {
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

std::variant<ProviderPermits, ProviderError> Admit(CircuitBreaker& transient, CircuitBreaker& quota,
                                                   Clock& clock, TimePoint coarse_now) {
  std::optional<Permit> transient_permit;
  // Allowed to wait, every step decides: never nullopt.
  return *AdmitFrom(transient, quota, clock, coarse_now, transient_permit, StoreWait::kAllowed);
}

namespace {

// `breaker`'s permit or refusal; nullopt where it would ask its store and
// `wait` forbids that.
std::optional<Result<Permit>> Ask(CircuitBreaker& breaker, StoreWait wait) {
  if (wait == StoreWait::kNever) return breaker.TryAcquireWithoutBlocking();
  return breaker.TryAcquire();
}

}  // namespace

std::optional<std::variant<ProviderPermits, ProviderError>> AdmitFrom(
    CircuitBreaker& transient, CircuitBreaker& quota, Clock& clock, TimePoint coarse_now,
    std::optional<Permit>& transient_permit, StoreWait wait) {
  if (!transient_permit) {
    if (std::optional<ProviderError> refused = RejectWithoutPermit(transient, quota, clock)) {
      return *refused;
    }
    std::optional<Result<Permit>> outer = Ask(transient, wait);
    if (!outer) return std::nullopt;
    if (!*outer) return RejectionError(ConnCode::kConn003Transient, outer->error(), clock);
    transient_permit.emplace(*std::move(*outer));
  }
  std::optional<Result<Permit>> inner = Ask(quota, wait);
  if (!inner) return std::nullopt;
  Permit outer = std::exchange(transient_permit, std::nullopt).value();
  if (!*inner) {
    // Meta was not called: nothing to say about transient failures.
    outer.Ignore();
    return RejectionError(ConnCode::kConn008RateLimit, inner->error(), clock);
  }
  return ProviderPermits(std::move(outer), *std::move(*inner), coarse_now);
}

void ProviderPermits::Finish(const ProviderError* error) {
  const TimePoint end = Now();
  const Duration elapsed = end - start_;
  // A coarse end is the read each breaker's record would take (the transient
  // circuit's TIME_BASED window): handed on, it spares them (Permit::Record).
  const TimePoint coarse_end = precise_ ? TimePoint{} : end;
  inner_.Record(QuotaOutcome(error, elapsed), coarse_end);
  outer_.Record(TransientOutcome(error, elapsed), coarse_end);
}

void ProviderPermits::FinishWithException() {
  const Duration elapsed = Now() - start_;
  inner_.Record(Outcome::Ignored(elapsed));
  outer_.Record(Outcome::Failure(elapsed));
}

namespace {

// Both circuits, each borrowed by its lookup (a Borrow() given the template's
// name) into the Result where it stays, transient first (a braced list is
// evaluated in order).
template <typename TransientLookup, typename QuotaLookup>
BorrowedCircuits BorrowBoth(Registry& registry, const TransientLookup& transient,
                            const QuotaLookup& quota) {
  return {{OrAddTemplate(registry, kTransientConfigName, &TransientCircuitConfig, transient),
           OrAddTemplate(registry, kQuotaConfigName, &QuotaCircuitConfig, quota)}};
}

// A circuit BorrowPair() did not lend (its template missing: the first
// call of a process), borrowed as BorrowBoth() does, transient first.
[[gnu::noinline]] void AddTemplatesAndBorrow(Registry& registry, const ProviderCircuitKeys& keys,
                                             TimePoint coarse_now, Registry::BorrowedPair& lent) {
  if (!lent.first) {
    lent.first = OrAddTemplate(
        registry, kTransientConfigName, &TransientCircuitConfig,
        [&](std::string_view name) { return registry.Borrow(keys.transient(), name, coarse_now); });
  }
  if (!lent.second) {
    lent.second = OrAddTemplate(
        registry, kQuotaConfigName, &QuotaCircuitConfig,
        [&](std::string_view name) { return registry.Borrow(keys.quota(), name, coarse_now); });
  }
}

}  // namespace

BorrowedCircuits BorrowProviderCircuits(Registry& registry, std::string_view key,
                                        TimePoint coarse_now) {
  assert(!key.empty() && "a provider call needs a key (ProviderCircuitKey)");
  CircuitNames names(key);
  return BorrowBoth(
      registry,
      [&](std::string_view name) { return registry.Borrow(names.Transient(), name, coarse_now); },
      [&](std::string_view name) { return registry.Borrow(names.Quota(), name, coarse_now); });
}

BorrowedCircuits BorrowProviderCircuits(Registry& registry, const ProviderCircuitKeys& keys,
                                        TimePoint coarse_now) {
  // Both at once (one hazard check), built in place and returned so.
  BorrowedCircuits c{registry.BorrowPair(keys.transient(), kTransientConfigName, keys.quota(),
                                         kQuotaConfigName, coarse_now)};
  if (!c.lent.first || !c.lent.second) [[unlikely]]
    AddTemplatesAndBorrow(registry, keys, coarse_now, c.lent);
  return c;
}

}  // namespace internal

ProviderCircuitKeys::ProviderCircuitKeys(std::string_view key)
    : key_(key),
      transient_(std::string(key).append(internal::kTransientSuffix)),
      quota_(std::string(key).append(internal::kQuotaSuffix)) {
  assert(!key.empty() && "a provider call needs a key (ProviderCircuitKey)");
}

ProviderCircuits GetProviderCircuits(Registry& registry, std::string_view key) {
  internal::CircuitNames names(key);
  ProviderCircuits c;
  const std::string_view transient = names.Transient();
  c.transient = *internal::OrAddTemplate(
      registry, kTransientConfigName, &TransientCircuitConfig,
      [&](std::string_view name) { return registry.Get(transient, name); });
  const std::string_view quota = names.Quota();
  c.quota =
      *internal::OrAddTemplate(registry, kQuotaConfigName, &QuotaCircuitConfig,
                               [&](std::string_view name) { return registry.Get(quota, name); });
  return c;
}

ProviderCircuits GetProviderCircuits(Registry& registry, const ProviderCircuitKeys& keys) {
  ProviderCircuits c;
  c.transient = *internal::OrAddTemplate(
      registry, kTransientConfigName, &TransientCircuitConfig,
      [&](std::string_view name) { return registry.Get(keys.transient(), name); });
  c.quota = *internal::OrAddTemplate(
      registry, kQuotaConfigName, &QuotaCircuitConfig,
      [&](std::string_view name) { return registry.Get(keys.quota(), name); });
  return c;
}

std::variant<ProviderCall, ProviderError> ProviderCall::From(
    ProviderCircuits circuits, std::variant<internal::ProviderPermits, ProviderError> admitted) {
  if (ProviderError* refused = std::get_if<ProviderError>(&admitted)) return *refused;
  return ProviderCall(std::move(circuits),
                      std::get<internal::ProviderPermits>(std::move(admitted)));
}

std::variant<ProviderCall, ProviderError> ProviderCall::Start(Registry& registry,
                                                              std::string_view key) {
  assert(!key.empty() && "a provider call needs a key (ProviderCircuitKey)");
  return StartOn(registry, GetProviderCircuits(registry, key));
}

std::variant<ProviderCall, ProviderError> ProviderCall::Start(Registry& registry,
                                                              const ProviderCircuitKeys& keys) {
  return StartOn(registry, GetProviderCircuits(registry, keys));
}

std::variant<ProviderCall, ProviderError> ProviderCall::StartOn(Registry& registry,
                                                                ProviderCircuits circuits) {
  std::variant<internal::ProviderPermits, ProviderError> admitted = internal::Admit(
      *circuits.transient, *circuits.quota, registry.clock(), registry.clock().CoarseNow());
  return From(std::move(circuits), std::move(admitted));
}

std::variant<ProviderCall, ProviderError, PendingProviderCall> ProviderCall::StartWithoutBlocking(
    Registry& registry, std::string_view key) {
  assert(!key.empty() && "a provider call needs a key (ProviderCircuitKey)");
  return StartWithoutBlockingOn(registry, GetProviderCircuits(registry, key));
}

std::variant<ProviderCall, ProviderError, PendingProviderCall> ProviderCall::StartWithoutBlocking(
    Registry& registry, const ProviderCircuitKeys& keys) {
  return StartWithoutBlockingOn(registry, GetProviderCircuits(registry, keys));
}

std::variant<ProviderCall, ProviderError, PendingProviderCall> ProviderCall::StartWithoutBlockingOn(
    Registry& registry, ProviderCircuits circuits) {
  std::optional<Permit> transient_permit;
  std::optional<std::variant<internal::ProviderPermits, ProviderError>> admitted =
      internal::AdmitFrom(*circuits.transient, *circuits.quota, registry.clock(),
                          registry.clock().CoarseNow(), transient_permit,
                          internal::StoreWait::kNever);
  if (!admitted) return PendingProviderCall(std::move(circuits), std::move(transient_permit));
  using Started = std::variant<ProviderCall, ProviderError, PendingProviderCall>;
  return std::visit(
      [](auto&& decided) -> Started { return std::forward<decltype(decided)>(decided); },
      From(std::move(circuits), *std::move(admitted)));
}

std::variant<ProviderCall, ProviderError> PendingProviderCall::Complete() && {
  // The registry may be gone by now; its clock, which its breakers use,
  // outlives them.
  CircuitBreaker& transient = *circuits_.transient;
  std::optional<std::variant<internal::ProviderPermits, ProviderError>> admitted =
      internal::AdmitFrom(transient, *circuits_.quota, transient.clock(),
                          transient.clock().CoarseNow(), transient_permit_,
                          internal::StoreWait::kAllowed);
  return ProviderCall::From(std::move(circuits_), *std::move(admitted));
}

std::optional<ProviderError> RejectIfOpen(Registry& registry, std::string_view key) {
  internal::CircuitNames names(key);
  std::shared_ptr<CircuitBreaker> transient = registry.Find(names.Transient());
  std::shared_ptr<CircuitBreaker> quota = registry.Find(names.Quota());
  if (transient == nullptr || quota == nullptr) return std::nullopt;
  return internal::RejectWithoutPermit(*transient, *quota, registry.clock());
}

}  // namespace fusebox::meta
