// fusebox/meta/provider_call.h: seed 000's provider call contract: CONN_*
// errors, circuit keys, and RunProviderCall() with its two circuits.
//
// Each key `provider:<provider>:<workload>:<subject>` (seed 000's
// providerCircuitKey; workloads read / publish / reply / token-refresh kept
// apart) has two breakers in a fusebox::Registry, nested as the seed does:
//   <key>:transient  outside. Opens when, among the calls of the last 10 s,
//                    at least 3 were made and more than 50 % failed
//                    transiently (CONN_003, or an exception); stays open
//                    30 s; one probe decides.
//   <key>:quota      inside. Opens on the first rate-limit signal (CONN_008)
//                    for its recovery time (recovery.h) through
//                    fusebox::Outcome::OpenFor; one probe decides.
// Authorization (CONN_009) and invalid (CONN_010) answers count as successes
// in both (Meta answered; the quota is not exhausted) and reach the caller
// unchanged. A rejected call never runs `fn`: the transient circuit rejects
// with CONN_003, the quota circuit with CONN_008, both carrying the time left.
//
//   auto key = fusebox::meta::ProviderCircuitKey("instagram", Workload::kRead, account_id);
//   fusebox::meta::ProviderResult<Posts> posts = fusebox::meta::RunProviderCall(
//       *registry, *key, [&]() -> fusebox::meta::ProviderResult<Posts> {
//         HttpReply reply = http.Get(url);               // token stays in here
//         if (reply.status == 200) return ParsePosts(reply.body);
//         return fusebox::meta::ProviderError::FromResponse(ToMetaResponse(reply));
//       });
//   if (!posts.has_value() && posts.error().code == ConnCode::kConn008RateLimit) {
//     ReplyTooManyRequests(posts.error().retry_after);
//   }
//
// Thread-safe: RunProviderCall may run concurrently on one registry and key.
// ProviderError and ProviderResult are plain values (thread-compatible).
#ifndef FUSEBOX_META_PROVIDER_CALL_H_
#define FUSEBOX_META_PROVIDER_CALL_H_

#include <cassert>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/meta/classify.h"
#include "fusebox/meta/response.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::meta {

// Seed 000's error contract.
enum class ConnCode : std::uint8_t {
  // CONN_003: transient (network, 408, 5xx, or the transient circuit open).
  // Do not retry at once; idempotent reads may back off with jitter.
  kConn003Transient,
  // CONN_008: rate limit (or the quota circuit open); exposed as HTTP 429
  // with retry_after. Do not retry before it.
  kConn008RateLimit,
  // CONN_009: authorization; send the user to reconnect the account.
  kConn009Authorization,
  // CONN_010: invalid request; do not repeat it.
  kConn010Invalid,
};

// "CONN_003", "CONN_008", "CONN_009", "CONN_010".
std::string_view ConnCodeName(ConnCode code) noexcept;

// The CONN_* code of a classification kind.
ConnCode ConnCodeFor(Kind kind) noexcept;

// A failed provider call, as the caller and the logs see it. Carries numbers
// only: never the access token, client secret, OAuth code, message or body.
struct ProviderError {
  ConnCode code = ConnCode::kConn010Invalid;
  // The HTTP status, or 0 when no response was received (circuit open).
  int http_status = 0;
  // Meta's error.code and error.error_subcode, when the body had them.
  std::optional<std::int64_t> meta_code{};
  std::optional<std::int64_t> meta_subcode{};
  // CONN_008: how long to wait. Circuit rejections: the time left open.
  std::optional<std::chrono::seconds> retry_after{};
  // True when a circuit rejected the call and the provider was not called.
  bool circuit_open = false;

  // The error for `response` under `rules` (Classify()).
  static ProviderError FromResponse(const Response& response, const Rules& rules = Rules{});

  // The loggable one-line summary (redact.h's LogSummary).
  std::string message() const;

  // The error as a fusebox::Status, for code that speaks Status (the
  // stale-if-error reader, the pipeline, a gateway): a circuit rejection is
  // kCircuitOpen, CONN_003 kUnavailable, CONN_008 kRateLimited, CONN_009 and
  // CONN_010 kInvalidArgument (so that DefaultMayServeStale never hides them
  // behind a stale snapshot). The message is message() (redacted), and
  // retry_at is `now` + retry_after when there is one.
  Status ToStatus(TimePoint now) const;

  friend bool operator==(const ProviderError&, const ProviderError&) = default;
};

// A value or a ProviderError, named as std::expected.
template <typename T>
class [[nodiscard]] ProviderResult {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, ProviderError>);

 public:
  using value_type = T;
  ProviderResult(T value) : v_(std::in_place_index<0>, std::move(value)) {}              // NOLINT
  ProviderResult(ProviderError error) : v_(std::in_place_index<1>, std::move(error)) {}  // NOLINT

  bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }
  T& value() & { return assert(has_value()), std::get<0>(v_); }
  const T& value() const& { return assert(has_value()), std::get<0>(v_); }
  T&& value() && { return assert(has_value()), std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const ProviderError& error() const { return assert(!has_value()), std::get<1>(v_); }

 private:
  std::variant<T, ProviderError> v_;
};

enum class Workload : std::uint8_t { kRead, kPublish, kReply, kTokenRefresh };

// "read", "publish", "reply", "token-refresh".
std::string_view WorkloadName(Workload workload) noexcept;

// "provider:<provider>:<workload>:<subject>", e.g.
// "provider:instagram:read:17841400008460056". kInvalidArgument when provider
// or subject is empty, or provider contains ':'.
Result<std::string> ProviderCircuitKey(std::string_view provider, Workload workload,
                                       std::string_view subject);

// The registry templates RunProviderCall uses.
inline constexpr std::string_view kTransientConfigName = "meta.provider.transient";
inline constexpr std::string_view kQuotaConfigName = "meta.provider.quota";

// Seed 000's transient circuit: TIME_BASED 10 s window (Opossum's rolling
// window), at least 3 calls, failure rate "more than 50 %", 30 s open, one
// probe whose failure reopens.
CircuitBreakerConfig TransientCircuitConfig();
// Seed 000's quota circuit: opened by OpenFor hints (the recovery time, 120 s
// when Meta gave none), for exactly that long; one probe decides.
CircuitBreakerConfig QuotaCircuitConfig();

// Adds both templates to `registry` (replacing them). RunProviderCall adds
// each itself when missing; to change one, add it before the first call.
Status AddProviderCircuitConfigs(Registry& registry);

// The two circuit names of a provider circuit key ("<key>:transient" and
// "<key>:quota"), built and hashed once, for a caller that calls for the same
// account repeatedly (a poller, a worker per account):
// RunProviderCall(registry, keys, fn) then builds no names, hashes nothing,
// and looks for each breaker first where it found it last (RegistryKey).
// The same circuits as RunProviderCall(registry, keys.key(), fn), whichever
// overload a call takes; ProviderCall::Start() and GetProviderCircuits() take
// them too. Thread-safe to share; a copy starts afresh.
//
//   const ProviderCircuitKeys keys(*ProviderCircuitKey("instagram", Workload::kRead, id));
//   for (;;) { auto posts = RunProviderCall(*registry, keys, fetch_posts); ... }
class ProviderCircuitKeys {
 public:
  // `key` (ProviderCircuitKey) must not be empty.
  explicit ProviderCircuitKeys(std::string_view key);

  const std::string& key() const noexcept { return key_; }
  const RegistryKey& transient() const noexcept { return transient_; }
  const RegistryKey& quota() const noexcept { return quota_; }

 private:
  std::string key_;
  RegistryKey transient_;
  RegistryKey quota_;
};

// The two breakers of one provider circuit key: what RunProviderCall and
// ProviderCall::Start acquire, and what a caller that reports on them (an
// admin page, a gateway's fail-fast from its event loop) reads.
struct ProviderCircuits {
  std::shared_ptr<CircuitBreaker> transient;
  std::shared_ptr<CircuitBreaker> quota;
};
// The two breakers of `key` (ProviderCircuitKey), named "<key>:transient" and
// "<key>:quota" in `registry`, adding the templates (AddProviderCircuitConfigs)
// when missing. `key` must not be empty.
ProviderCircuits GetProviderCircuits(Registry& registry, std::string_view key);
// The same for kept keys.
ProviderCircuits GetProviderCircuits(Registry& registry, const ProviderCircuitKeys& keys);

namespace internal {

// The error for a rejection by `circuit` (CONN_003 or CONN_008).
ProviderError RejectionError(ConnCode code, const Status& rejection, Clock& clock);
// The refusal of a circuit that refuses without a permit (OPEN before its
// wait ends, FORCED_OPEN; CircuitBreaker::TryReject), transient first, or
// nullopt. Records the rejection; blocks on nothing.
std::optional<ProviderError> RejectWithoutPermit(CircuitBreaker& transient, CircuitBreaker& quota,
                                                 Clock& clock);
// What an error means to each circuit.
Outcome TransientOutcome(const ProviderError* error, Duration elapsed);
Outcome QuotaOutcome(const ProviderError* error, Duration elapsed);

// One provider call's two permits, from Admit(): what RunProviderCall and
// ProviderCall share. The breakers must outlive it. It times the call as the
// breakers' Call() would (CallTiming): with Clock::Now() only when one of
// them wants precise timing, else with CoarseNow() (the provider templates'
// slow-call threshold is 60 s; a coarse read costs a sixth of a precise one).
// A coarse start is `coarse_now`, the caller's read taken before admission:
// RunProviderCall reads the clock once for its lookups and the start.
class ProviderPermits {
 public:
  // `coarse_now` is the circuits' clock's CoarseNow(), read by the caller.
  ProviderPermits(Permit outer, Permit inner, TimePoint coarse_now)
      : outer_(std::move(outer)),
        inner_(std::move(inner)),
        timer_(inner_.breaker()->precise_call_timing() ? inner_.breaker() : outer_.breaker()),
        precise_(timer_->precise_call_timing()),
        start_(precise_ ? timer_->CallTime() : coarse_now) {}

  // Records the call's result in both circuits: nullptr for a success. Once.
  void Finish(const ProviderError* error);
  // Finish(nullptr), inline: both circuits take it as a success. Flattened:
  // both breakers' success paths inline here (gcc would call each), ~2 ns of
  // a ~25 ns call (docs/performance.md, "The seed-000 call").
  [[gnu::flatten]] void FinishSuccess() noexcept {
    const TimePoint end = Now();
    const Duration elapsed = end - start_;
    const TimePoint coarse_end = precise_ ? TimePoint{} : end;
    inner_.Success(elapsed, coarse_end);
    outer_.Success(elapsed, coarse_end);
  }
  // Records a call that ended in an exception (a transient failure).
  void FinishWithException();

 private:
  // Precise when either circuit times precisely: the timer_'s CallTime().
  TimePoint Now() const noexcept { return timer_->CallTime(); }

  Permit outer_;  // the transient circuit's
  Permit inner_;  // the quota circuit's
  // The circuit whose rule times the call: the quota's when it times
  // precisely, else the transient's (both read the registry's clock).
  const CircuitBreaker* timer_;
  bool precise_;
  TimePoint start_;
};

// Asks both circuits, transient then quota: the call's permits or the refusal.
// `coarse_now` is clock.CoarseNow(), read by the caller (ProviderPermits).
std::variant<ProviderPermits, ProviderError> Admit(CircuitBreaker& transient, CircuitBreaker& quota,
                                                   Clock& clock, TimePoint coarse_now);

// Whether an admission may wait for a circuit's shared state.
enum class StoreWait : std::uint8_t { kAllowed, kNever };

// Admit(), resumable: from the start while `transient_permit` is empty, else
// from the quota circuit with that permit taken. With StoreWait::kNever each
// circuit is asked with TryAcquireWithoutBlocking(), and where one would ask
// its store the admission stops there: nullopt, with `transient_permit`
// holding the transient permit once it was taken. With kAllowed it always
// decides. `transient_permit` is empty whenever a decision is returned.
std::optional<std::variant<ProviderPermits, ProviderError>> AdmitFrom(
    CircuitBreaker& transient, CircuitBreaker& quota, Clock& clock, TimePoint coarse_now,
    std::optional<Permit>& transient_permit, StoreWait wait);

// The two breakers of a key, lent for one synchronous call (Registry::Borrow).
// Each stays in the Result that Borrow() built it in: moved out right after
// the out-of-line Borrow() returned, it was read in 16-byte loads that the
// store buffer cannot forward from Borrow()'s 8-byte stores, a stall of a
// fifth of a hot call (docs/performance.md, "The seed-000 call").
struct BorrowedCircuits {
  CircuitBreaker& transient() const noexcept { return **lent.first; }
  CircuitBreaker& quota() const noexcept { return **lent.second; }

  // The transient circuit first, then the quota one. Always values
  // (BorrowProviderCircuits aborts otherwise).
  Registry::BorrowedPair lent;
};
// As GetProviderCircuits(), borrowed at `coarse_now` (registry.clock()
// .CoarseNow(), read by the caller: Registry::Borrow); allocates nothing on a
// hit (the two names are built on the stack unless `key` is very long).
BorrowedCircuits BorrowProviderCircuits(Registry& registry, std::string_view key,
                                        TimePoint coarse_now);
// The same for kept keys: no name built, no hash, each looked for first
// where it was found last.
BorrowedCircuits BorrowProviderCircuits(Registry& registry, const ProviderCircuitKeys& keys,
                                        TimePoint coarse_now);

// Records, as it unwinds, an exception that stops a call
// (ProviderPermits::FinishWithException()), unless disarmed.
class FinishOnException {
 public:
  explicit FinishOnException(ProviderPermits& permits) noexcept : permits_(&permits) {}
  FinishOnException(const FinishOnException&) = delete;
  FinishOnException& operator=(const FinishOnException&) = delete;
  ~FinishOnException() {
    if (permits_ != nullptr) permits_->FinishWithException();
  }
  void Disarm() noexcept { permits_ = nullptr; }

 private:
  ProviderPermits* permits_;
};

// `fn` under `permits`, its result recorded in both circuits. A guard, not
// a try block, records an exception: so `r` is built in the caller's return
// slot, not copied there from a local (a 16-byte read of what `fn` had just
// written in 8-byte stores, which stalls). Inline in RunOnCircuits: `permits`
// then stays in its frame, not passed to a call.
template <typename F>
[[gnu::always_inline]] inline auto RunAdmitted(ProviderPermits& permits, F& fn)
    -> std::invoke_result_t<F&> {
  using R = std::invoke_result_t<F&>;
  FinishOnException on_exception(permits);
  R r = fn();
  if (r.has_value()) {
    permits.FinishSuccess();
  } else {
    permits.Finish(&r.error());
  }
  on_exception.Disarm();
  return r;
}

// RunProviderCall's body once its circuits are found at `now` (the read
// that also starts the call).
template <typename F>
auto RunOnCircuits(CircuitBreaker& transient, CircuitBreaker& quota, Clock& clock, TimePoint now,
                   F& fn) -> std::invoke_result_t<F&> {
  // Both CLOSED (the common case): Admit()'s answer from the state words,
  // inline. Otherwise the transient permit (if taken) holds nothing and is
  // dropped, and Admit() decides as if it had not been asked.
  if (std::optional<Permit> outer = transient.TryAcquireIfClosed()) {
    if (std::optional<Permit> inner = quota.TryAcquireIfClosed()) {
      ProviderPermits permits(*std::move(outer), *std::move(inner), now);
      return RunAdmitted(permits, fn);
    }
  }
  std::variant<ProviderPermits, ProviderError> admitted = Admit(transient, quota, clock, now);
  if (ProviderError* refused = std::get_if<ProviderError>(&admitted)) return *refused;
  return RunAdmitted(std::get<ProviderPermits>(admitted), fn);
}

}  // namespace internal

// RunProviderCall's refusal for `key` when one of its circuits refuses
// without a permit (OPEN before its wait ends, or FORCED_OPEN): the same
// error, recorded the same way, decided without blocking and without creating
// a circuit. nullopt when neither refuses so, or `key` has no circuits yet:
// RunProviderCall decides. For an event loop that answers fail-fasts itself
// and hands every other call to a thread that may block.
std::optional<ProviderError> RejectIfOpen(Registry& registry, std::string_view key);

// RunProviderCall in two halves, for a caller that calls the provider
// asynchronously: Start() asks both circuits (transient, then quota) and
// returns the call's permits or the refusal; the caller calls the provider
// and gives what it got to Finish(), which records it in both circuits
// exactly as RunProviderCall does. A ProviderCall dropped without Finish()
// gives both permits back (the call never happened). It holds its circuits,
// so it may outlive the registry.
//
//   std::variant<ProviderCall, ProviderError> call = ProviderCall::Start(registry, key);
//   if (auto* refused = std::get_if<ProviderError>(&call)) return Reply(*refused);
//   client.AsyncSend(..., [call = std::get<ProviderCall>(std::move(call))](Reply r) mutable {
//     ProviderError e = ...;                    // from r
//     call.Finish(r.ok() ? nullptr : &e);
//   });
//
// Start() may block where TryAcquire() may (a circuit with a shared state);
// without one it never blocks. A thread that must never wait (an event loop)
// uses StartWithoutBlocking() instead.
class PendingProviderCall;
class ProviderCall {
 public:
  static std::variant<ProviderCall, ProviderError> Start(Registry& registry, std::string_view key);

  // Start() for a thread that must never wait for a circuit's shared state
  // (the Node binding's event loop): the same decisions, in the same order,
  // recorded the same way, each circuit asked with TryAcquireWithoutBlocking().
  // Where a circuit would ask its store (a view to re-read, the probe lease
  // that ends OPEN), the start stops there and returns a PendingProviderCall,
  // whose Complete() on a thread that may block finishes it. Without a shared
  // state it never returns one.
  static std::variant<ProviderCall, ProviderError, PendingProviderCall> StartWithoutBlocking(
      Registry& registry, std::string_view key);

  // Both, with kept keys (ProviderCircuitKeys): the same circuits.
  static std::variant<ProviderCall, ProviderError> Start(Registry& registry,
                                                         const ProviderCircuitKeys& keys);
  static std::variant<ProviderCall, ProviderError, PendingProviderCall> StartWithoutBlocking(
      Registry& registry, const ProviderCircuitKeys& keys);

  ProviderCall(ProviderCall&&) = default;
  ProviderCall& operator=(ProviderCall&&) = default;

  // Records the call's result: nullptr for a success, else its error. Once.
  void Finish(const ProviderError* error) && { permits_.Finish(error); }
  // Records a call that ended in an exception (a transient failure).
  void FinishWithException() && { permits_.FinishWithException(); }

 private:
  friend class PendingProviderCall;
  ProviderCall(ProviderCircuits circuits, internal::ProviderPermits permits)
      : circuits_(std::move(circuits)), permits_(std::move(permits)) {}
  // Start() and StartWithoutBlocking() once the circuits are found.
  static std::variant<ProviderCall, ProviderError> StartOn(Registry& registry,
                                                           ProviderCircuits circuits);
  static std::variant<ProviderCall, ProviderError, PendingProviderCall> StartWithoutBlockingOn(
      Registry& registry, ProviderCircuits circuits);
  // The call, or the refusal, of an admission that decided.
  static std::variant<ProviderCall, ProviderError> From(
      ProviderCircuits circuits, std::variant<internal::ProviderPermits, ProviderError> admitted);

  // Kept alive while the call is pending (a registry may drop them meanwhile);
  // declared first, so destroyed after the permits.
  ProviderCircuits circuits_;
  internal::ProviderPermits permits_;
};

// A ProviderCall::StartWithoutBlocking() stopped where a circuit would ask
// its shared state. Complete() asks it (TryAcquire(), which may block for the
// store's timeout) and goes on exactly as Start() would from there: the call
// or the refusal. Dropped without Complete(), it gives back the transient
// permit it may hold. It holds its circuits, so it may outlive the registry.
//
//   auto started = ProviderCall::StartWithoutBlocking(registry, key);   // on the loop
//   if (auto* pending = std::get_if<PendingProviderCall>(&started)) {
//     pool.Run([p = std::move(*pending)]() mutable {
//       std::variant<ProviderCall, ProviderError> call = std::move(p).Complete();
//       loop.Post(...);                       // back to the loop with the call
//     });
//   }
//
// Thread-compatible: move it to the thread that completes it.
class PendingProviderCall {
 public:
  PendingProviderCall(PendingProviderCall&&) = default;
  PendingProviderCall& operator=(PendingProviderCall&& other) noexcept {
    // Our permit goes back while its circuits are still held.
    transient_permit_.reset();
    circuits_ = std::move(other.circuits_);
    transient_permit_ = std::move(other.transient_permit_);
    return *this;
  }

  // The rest of the admission, asking the store where needed. Once.
  std::variant<ProviderCall, ProviderError> Complete() &&;

 private:
  friend class ProviderCall;
  PendingProviderCall(ProviderCircuits circuits, std::optional<Permit> transient_permit)
      : circuits_(std::move(circuits)), transient_permit_(std::move(transient_permit)) {}

  // Declared first, so destroyed after the permit.
  ProviderCircuits circuits_;
  // The transient circuit's permit, when it was taken without blocking (the
  // quota circuit is the one that must ask its store).
  std::optional<Permit> transient_permit_;
};

// Runs `fn` (returning ProviderResult<T>) under the two circuits of `key`, as
// seed 000's runProviderCall: transient outside, quota inside. Returns what
// `fn` returned, unchanged, or a circuit's rejection (circuit_open == true;
// `fn` not called). An exception from `fn` counts as a transient failure and
// propagates unchanged. `key` must not be empty.
//
// The circuits are borrowed from the registry for the call (no reference
// count touched, not dropped meanwhile) and their names built on the stack:
// on a hit nothing is allocated (docs/performance.md, "The seed-000 call").
template <typename F>
auto RunProviderCall(Registry& registry, std::string_view key, F&& fn) -> std::invoke_result_t<F&> {
  // One clock read for both lookups and the call's coarse start.
  const TimePoint now = registry.CoarseNow();
  // Outlive the permits RunOnCircuits takes, so given back after them.
  const internal::BorrowedCircuits circuits = internal::BorrowProviderCircuits(registry, key, now);
  return internal::RunOnCircuits(circuits.transient(), circuits.quota(), registry.clock(), now, fn);
}

// The same with kept keys (ProviderCircuitKeys): the cheapest call.
template <typename F>
auto RunProviderCall(Registry& registry, const ProviderCircuitKeys& keys, F&& fn)
    -> std::invoke_result_t<F&> {
  const TimePoint now = registry.CoarseNow();
  const internal::BorrowedCircuits circuits = internal::BorrowProviderCircuits(registry, keys, now);
  return internal::RunOnCircuits(circuits.transient(), circuits.quota(), registry.clock(), now, fn);
}

}  // namespace fusebox::meta

#endif  // FUSEBOX_META_PROVIDER_CALL_H_
