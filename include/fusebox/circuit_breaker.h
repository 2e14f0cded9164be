// fusebox/circuit_breaker.h: the circuit breaker.
//
// A CircuitBreaker watches the outcomes of calls to one dependency and, when
// they go bad, refuses further calls for a while so that callers fail fast and
// the dependency gets room to recover; then it lets a few probe calls through
// and closes again when they succeed. It makes the decisions Resilience4j 2.x
// makes for the same sequence of calls (see docs/semantics.md), under the same
// configuration names in snake_case.
//
// States: CLOSED (calls pass, outcomes are recorded in a sliding window),
// OPEN (calls are rejected until the wait ends), HALF_OPEN (a limited number of
// probe calls pass and decide), and the operator states DISABLED (everything
// passes, nothing is recorded), METRICS_ONLY and FORCED_CLOSED (everything
// passes and is recorded, nothing trips), FORCED_OPEN (everything is
// rejected). An operator state may carry an expiry, after which the breaker
// returns to CLOSED by itself.
//
// Two ways to use it:
//
//   // 1. Let the breaker run the call, time it and classify it.
//   fusebox::Result<Receipt> r = breaker->Call([&] { return payments.Charge(order); });
//   if (!r && r.error().code() == fusebox::StatusCode::kCircuitOpen) return PayLater(order);
//
//   // 2. Take a permit, make the call yourself, report the outcome.
//   fusebox::Result<fusebox::Permit> permit = breaker->TryAcquire();
//   if (!permit) return Reject(permit.error());   // kCircuitOpen, with retry_at()
//   auto reply = http.Get(url);
//   if (reply.status >= 500) permit->Failure(reply.elapsed);
//   else permit->Success(reply.elapsed);
//
// Rejections are values (Status kCircuitOpen with a reason and retry_at),
// never exceptions. Exceptions thrown by a callable given to Call() are
// classified, recorded, and propagate unchanged.
//
// Blocking: without a shared state, TryAcquire(), TryReject() and recording
// an outcome never block on I/O, and wait for another thread only for a
// critical section of a few dozen nanoseconds (a spin lock), plus whatever
// the code you supply does: listeners run on the thread that caused the
// event, after the lock; wait_interval_function runs under it. With a shared
// state (config.shared_state), TryAcquire() may ask the store, and so block
// for at most the store's own timeout: the first call of a new breaker and
// the first after the store reconnected re-read the fleet's view
// (SharedState::Read()), and the call that ends an OPEN asks for the fleet's
// probe lease (SharedState::AcquireProbe()). One call per breaker asks at a
// time; the others meanwhile wait for that Read() answer, or are rejected as
// OPEN while the lease is asked for. A SharedStateDeadline on the calling
// thread (a request's deadline) bounds both the asking and the waiting: past
// it the call is decided on the local view. TryReject() never asks the store; what
// a transition tells the store is sent without waiting (SharedState::Trip()
// and friends do not block). The destructor waits for a timer callback or a
// store delivery that is running.
//
// Cost: in CLOSED, TryAcquire() plus Success() is two atomic loads and no
// write when the window holds no failure and no slow call (see
// docs/performance.md); an OPEN rejection reads the coarse clock once and
// bumps one counter. No call allocates.
//
// Thread-safe.
#ifndef FUSEBOX_CIRCUIT_BREAKER_H_
#define FUSEBOX_CIRCUIT_BREAKER_H_

#include <atomic>
#include <cassert>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "fusebox/backoff.h"
#include "fusebox/clock.h"
#include "fusebox/internal/circuit_breaker_word.h"
#include "fusebox/internal/system_clock.h"
#include "fusebox/result.h"
#include "fusebox/shared_state.h"
#include "fusebox/status.h"

namespace fusebox {

class CircuitBreaker;
class Registry;
namespace internal {
class RelaxedOutcomeLog;
}  // namespace internal

enum class State : std::uint8_t {
  kClosed = 0,
  kOpen,
  kHalfOpen,
  kDisabled,
  kMetricsOnly,
  kForcedOpen,
  kForcedClosed,
};

// "CLOSED", "OPEN", "HALF_OPEN", "DISABLED", "METRICS_ONLY", "FORCED_OPEN",
// "FORCED_CLOSED": Resilience4j's names.
std::string_view StateName(State state) noexcept;

enum class SlidingWindowType : std::uint8_t {
  // The last sliding_window_size calls.
  kCountBased,
  // The calls of the last sliding_window_size seconds, in per-second buckets
  // keyed by the epoch second in which each outcome was reported.
  kTimeBased,
};

// Which decisions to reproduce where the reference and a stricter reading
// differ. docs/semantics.md lists every difference.
enum class Compatibility : std::uint8_t {
  // fusebox's default: a permit remembers the state epoch (each transition
  // starts a new one) it was issued in, and its outcome counts only in that
  // epoch. A call admitted in CLOSED and reported after the breaker went
  // HALF_OPEN does not decide the half-open verdict; an ignored or abandoned
  // permit gives back only a half-open slot it took itself.
  kDefault,
  // Exactly Resilience4j 2.4.0: an outcome is recorded into whatever state is
  // current when it is reported, and an ignored outcome in HALF_OPEN gives a
  // probe slot back wherever its permit came from.
  kResilience4j,
};

// How HALF_OPEN decides between OPEN and CLOSED.
enum class HalfOpenPolicy : std::uint8_t {
  // Resilience4j: after min(minimum_number_of_calls, permitted) probe results,
  // a failure or slow-call rate at or above its threshold reopens, anything
  // else closes (so 1 failure in 3 probes closes at a 50 % threshold).
  kFailureRate,
  // Seed 003, Opossum, gobreaker: the first failed (or slow) probe reopens at
  // once; permitted_number_of_calls_in_half_open_state successes close.
  kAnyFailureReopens,
};

// How Call() measures the duration of the callable.
enum class CallTiming : std::uint8_t {
  // kCoarse when slow_call_duration_threshold >= 1 s (the coarse clock's few
  // milliseconds are then below 0.5 % of any slow/not-slow decision), else
  // kPrecise.
  kAuto,
  // Clock::Now() twice: ~21 ns each on SystemClock here.
  kPrecise,
  // Clock::CoarseNow() twice: ~3 ns each, resolution a few milliseconds.
  kCoarse,
};

// How the outcomes that threads report at the same time are ordered before the
// window sees them (docs/semantics.md, "Outcome order").
enum class OutcomeOrder : std::uint8_t {
  // Linearizable: the window records outcomes in the order their reports
  // returned, so a sequence of calls made one after another, on any threads,
  // gets exactly Resilience4j's decisions. Each failure into a window holding
  // failures takes the lock and reads every other thread's counters: when
  // several threads report failures at once, a cache line crosses between
  // cores for each of them.
  kLinearizable,
  // A fast failure into a full COUNT_BASED window that it cannot trip, even
  // together with every other failure counted so, is counted in the reporting
  // thread's own slot and applied later, in that thread's order (a thread gets
  // an allowance of up to 31 such failures at a time, granted under the lock
  // so that the allowances together never reach the failure-rate threshold).
  // Every trip is still decided under the lock, on every outcome reported
  // before it, by the failure that crosses the threshold; what changes is only
  // the order in which concurrent threads' outcomes enter the ring, and so
  // which one leaves it first. One thread alone gets kLinearizable's decisions
  // exactly. TIME_BASED windows, a consecutive_failure_threshold, or an
  // outcome listener keep kLinearizable's order. Two threads failing at once
  // on one breaker get more than one thread's throughput instead of a
  // fraction of it (docs/performance.md).
  kRelaxed,
};

enum class OutcomeKind : std::uint8_t { kSuccess, kFailure, kIgnored };

// The durations of a breaker's calls (fusebox/call_timer.h).
class CallTimer;

std::string_view OutcomeKindName(OutcomeKind kind) noexcept;

// What a finished call means to a breaker.
struct Outcome {
  OutcomeKind kind = OutcomeKind::kSuccess;
  // How long the call took; decides slow or not.
  Duration duration = Duration::zero();
  // When positive: the dependency said "stop for this long" (a rate-limit
  // signal with its Retry-After). The breaker opens at once for open_for,
  // whatever the window says; a shorter hint never shortens a longer open.
  Duration open_for = Duration::zero();

  static Outcome Success(Duration d = Duration::zero()) { return {OutcomeKind::kSuccess, d}; }
  static Outcome Failure(Duration d = Duration::zero()) { return {OutcomeKind::kFailure, d}; }
  static Outcome Ignored(Duration d = Duration::zero()) { return {OutcomeKind::kIgnored, d}; }
  // A failure that carries "open now for `open_for`".
  static Outcome OpenFor(Duration open_for, Duration d = Duration::zero()) {
    return {OutcomeKind::kFailure, d, open_for};
  }
};

// Maps an exception thrown by a callable given to Call() to an outcome.
using ExceptionClassifier = std::function<Outcome(const std::exception_ptr&)>;

// Configuration of one breaker. Names and defaults are Resilience4j's
// CircuitBreakerConfig, in snake_case; the last group is fusebox's own.
// Fill it with designated initializers:
//
//   fusebox::CircuitBreakerConfig config{
//       .failure_rate_threshold = 50,
//       .sliding_window_size = 10,
//       .minimum_number_of_calls = 10,
//       .wait_duration_in_open_state = std::chrono::seconds(5),
//   };
struct CircuitBreakerConfig {
  // Failure rate, in percent (0, 100], at or above which CLOSED opens and
  // HALF_OPEN reopens. Default: 50.
  float failure_rate_threshold = 50;
  // Slow-call rate, in percent (0, 100], at or above which it opens.
  // Default: 100.
  float slow_call_rate_threshold = 100;
  // A call is slow when its duration is strictly longer than this (> 0).
  // Default: 60 s.
  Duration slow_call_duration_threshold = std::chrono::seconds(60);
  // The largest sliding_window_size (and permitted_number_of_calls_in_
  // half_open_state, whose probes fill a count-based window) Validate()
  // accepts. A window allocates per slot: 2 bits a call for kCountBased
  // (1,000,000 calls = 250 KB), 40 bytes a second for kTimeBased (one day =
  // 3.4 MB), so a size from a file or a flag must not reach the allocator
  // unchecked. docs/configuration.md states these limits.
  static constexpr int kMaxCountBasedWindowSize = 1'000'000;
  static constexpr int kMaxTimeBasedWindowSeconds = 86'400;

  // Probe calls admitted in HALF_OPEN, in [1, kMaxCountBasedWindowSize].
  // Default: 10.
  int permitted_number_of_calls_in_half_open_state = 10;
  // How long HALF_OPEN may wait for its verdict before it moves to
  // transition_to_state_after_wait_duration; zero means forever. Default: 0.
  Duration max_wait_duration_in_half_open_state = Duration::zero();
  // Where max_wait_duration_in_half_open_state leads: kOpen (with a new full
  // wait) or kClosed (with a fresh window). Default: kOpen.
  State transition_to_state_after_wait_duration = State::kOpen;
  // Default: kCountBased.
  SlidingWindowType sliding_window_type = SlidingWindowType::kCountBased;
  // Calls (kCountBased, at most kMaxCountBasedWindowSize) or seconds
  // (kTimeBased, at most kMaxTimeBasedWindowSeconds) in the window (>= 1).
  // Default: 100.
  int sliding_window_size = 100;
  // Calls the window must hold before a rate is computed (>= 1). Capped at
  // sliding_window_size for kCountBased only, as in Resilience4j.
  // Default: 100.
  int minimum_number_of_calls = 100;
  // How long OPEN lasts (> 0) unless wait_interval_function is set.
  // Default: 60 s.
  Duration wait_duration_in_open_state = std::chrono::seconds(60);
  // When set, the OPEN duration for attempt n (1 = first open after CLOSED,
  // 2 = first reopening from HALF_OPEN, ...), e.g. backoff::Exponential.
  // Called under the breaker's lock: keep it cheap and non-blocking.
  // Default: unset.
  IntervalFunction wait_interval_function = nullptr;
  // When true, OPEN moves to HALF_OPEN by a timer on the clock as soon as the
  // wait ends, instead of on the first call after it. Default: false.
  bool automatic_transition_from_open_to_half_open_enabled = false;

  // Classifies exceptions thrown by callables run with Call(). Default (unset):
  // every exception is a failure.
  ExceptionClassifier exception_classifier = nullptr;

  // --- fusebox's own ---
  // Opens after this many failures in a row in CLOSED, whatever the window and
  // the minimum number of calls say (gobreaker, Failsafe). 0 disables it.
  // Default: 0.
  int consecutive_failure_threshold = 0;
  // Spreads each OPEN duration uniformly over [w * (1 - j), w * (1 + j)], so
  // that a fleet of instances does not probe in lockstep. In [0, 1).
  // Not applied to an outcome's open_for hint. Default: 0.
  double open_duration_jitter = 0;
  // Seed of the jitter generator. Default: 0, meaning a seed derived from the
  // breaker's name (so instances with different names spread apart while a
  // test stays reproducible).
  std::uint64_t jitter_seed = 0;
  // Default: kFailureRate.
  HalfOpenPolicy half_open_policy = HalfOpenPolicy::kFailureRate;
  // Default: kDefault.
  Compatibility compatibility = Compatibility::kDefault;
  // Default: kAuto.
  CallTiming call_timing = CallTiming::kAuto;
  // How outcomes reported on several threads at once are ordered (see
  // OutcomeOrder). Default: kLinearizable.
  OutcomeOrder outcome_order = OutcomeOrder::kLinearizable;

  // --- Fleet (fusebox/shared_state.h, docs/distributed.md) ---
  // When set, the breaker shares its OPEN state and its recovery probe with
  // every breaker of the same name on this store: a local trip is sent to the
  // fleet, a trip elsewhere opens this breaker, and OPEN ends with at most one
  // probe in the whole fleet. With a store attached, OPEN -> HALF_OPEN always
  // happens on a call (it needs the lease), even with automatic transition.
  // Every store failure leaves the breaker working locally. Default: unset.
  std::shared_ptr<SharedState> shared_state = nullptr;
  // How long a probe lease lasts before another instance may probe, if its
  // holder neither closes nor trips (it crashed or hangs): the longest a probe
  // call may take, plus a margin (> 0). Default: 30 s.
  Duration shared_probe_lease = std::chrono::seconds(30);

  // OK, or kInvalidArgument naming the first field at fault and its rule,
  // e.g. "failure_rate_threshold must be in (0, 100], got 0".
  Status Validate() const;
};

// The window's counts, as Resilience4j's CircuitBreaker.Metrics reports them.
struct CircuitBreakerMetrics {
  State state = State::kClosed;
  // Percent, or -1 while fewer than the minimum number of calls are buffered.
  float failure_rate = -1;
  float slow_call_rate = -1;
  int buffered_calls = 0;
  int failed_calls = 0;
  int successful_calls = 0;
  int slow_calls = 0;
  int slow_successful_calls = 0;
  int slow_failed_calls = 0;
  // Calls rejected by the current state's metrics (see docs/semantics.md).
  std::int64_t not_permitted_calls = 0;
  // When OPEN or FORCED_OPEN with an expiry: when it ends.
  std::optional<TimePoint> retry_at{};
  // OPEN periods since the last CLOSED (attempt number of the interval
  // function).
  int open_attempts = 0;
  // Outcomes reported after their state epoch ended and dropped (kDefault).
  std::int64_t late_outcomes = 0;
  // Exceptions thrown by listeners and swallowed.
  std::int64_t listener_errors = 0;
};

enum class TransitionReason : std::uint8_t {
  kFailureRate,          // CLOSED -> OPEN: failure rate at or above threshold
  kSlowCallRate,         // CLOSED -> OPEN: slow-call rate at or above threshold
  kConsecutiveFailures,  // CLOSED -> OPEN: consecutive_failure_threshold
  kOpenForHint,          // -> OPEN (or OPEN extended): an outcome's open_for
  kWaitElapsed,          // OPEN -> HALF_OPEN
  kProbesSucceeded,      // HALF_OPEN -> CLOSED
  kProbesFailed,         // HALF_OPEN -> OPEN
  kHalfOpenTimeout,      // HALF_OPEN -> max_wait target
  kOverrideExpired,      // operator state -> CLOSED
  kOperator,             // ForceOpen, ForceClosed, Disable, MetricsOnly, Reset, TransitionTo*
  kSharedOpen,           // -> OPEN (or OPEN extended): another instance tripped the circuit
  kSharedClosed,         // OPEN or HALF_OPEN -> CLOSED: another instance's probe succeeded
};

// "failure_rate_exceeded", "slow_call_rate_exceeded", ...: stable snake_case
// words for logs and metrics labels.
std::string_view TransitionReasonName(TransitionReason reason) noexcept;

struct TransitionEvent {
  std::string_view breaker{};
  State from = State::kClosed;
  State to = State::kClosed;
  TransitionReason reason = TransitionReason::kOperator;
  // The window as it was when the transition was decided.
  CircuitBreakerMetrics counts{};
  TimePoint at{};
  // When the new state ends, if it has an end (OPEN, or an expiring override).
  std::optional<TimePoint> retry_at{};
  // The operator's reason and actor, for operator transitions.
  std::string_view detail{};
  std::string_view actor{};
};

struct RejectionEvent {
  std::string_view breaker{};
  State state = State::kOpen;
  // "open", "forced_open" or "half_open_full".
  std::string_view reason{};
  std::optional<TimePoint> retry_at{};
};

struct OutcomeEvent {
  std::string_view breaker{};
  // The state the outcome was recorded in.
  State state = State::kClosed;
  OutcomeKind kind = OutcomeKind::kSuccess;
  Duration duration = Duration::zero();
  bool slow = false;
  // True when the outcome came from an ended state epoch and was dropped.
  bool late = false;
};

// Counts since the breaker was created, never reset (Resilience4j's
// Micrometer counters): what a metrics exporter reads. Kept by the breaker at
// the cost of a few plain stores to a per-thread cache line per call.
struct CircuitBreakerTotals {
  // Calls by outcome, indexed by OutcomeKind (success, failure, ignored),
  // and the sum of their durations.
  std::int64_t calls[3] = {0, 0, 0};
  Duration call_time[3] = {Duration::zero(), Duration::zero(), Duration::zero()};
  std::int64_t slow_successful_calls = 0;
  std::int64_t slow_failed_calls = 0;
  // Calls rejected in OPEN, FORCED_OPEN, or HALF_OPEN with no probe slot left.
  std::int64_t not_permitted_calls = 0;
  // Outcomes of half-open probes, by OutcomeKind.
  std::int64_t probe_calls[3] = {0, 0, 0};
};

// Receives a breaker's events. Called on the thread that caused the event,
// after the breaker's lock is released; transitions are delivered one at a
// time and in order. Exceptions are caught and counted. A listener must not
// destroy the breaker it listens to.
class CircuitBreakerListener {
 public:
  // The callbacks a listener wants.
  enum Interest : unsigned {
    kTransitionEvents = 1u << 0,
    kRejectionEvents = 1u << 1,
    kOutcomeEvents = 1u << 2,
    kAllEvents = kTransitionEvents | kRejectionEvents | kOutcomeEvents,
  };

  virtual ~CircuitBreakerListener() = default;
  // Read once, by AddListener(). Ask only for what you use: while any
  // listener wants outcomes, every success takes the ordered (locked) path,
  // and every rejection a listener wants costs a virtual call. Counting calls
  // needs no listener at all: CircuitBreaker::totals(). Default: kAllEvents.
  virtual unsigned interests() const { return kAllEvents; }
  virtual void OnTransition(const TransitionEvent& /*event*/) {}
  virtual void OnRejection(const RejectionEvent& /*event*/) {}
  virtual void OnOutcome(const OutcomeEvent& /*event*/) {}
};

// An operator override (ForceOpen, ForceClosed, Disable, MetricsOnly).
struct OverrideOptions {
  // Why; carried in the transition event and the audit log.
  std::string reason{};
  // Who.
  std::string actor{};
  // After this long the breaker returns to CLOSED by itself (a timer on the
  // clock, and checked on every call); zero means until changed. Default: 0.
  Duration expires_after = Duration::zero();
};

// The operator state in force, if any.
struct OverrideInfo {
  State state = State::kForcedOpen;
  std::string reason{};
  std::string actor{};
  TimePoint since{};
  std::optional<TimePoint> expires_at{};
};

namespace internal {

template <typename R>
struct CallReturn {
  using type = Result<R>;
};
template <>
struct CallReturn<void> {
  using type = Status;
};
template <>
struct CallReturn<Status> {
  using type = Status;
};
template <typename U>
struct CallReturn<Result<U>> {
  using type = Result<U>;
};
}  // namespace internal

// Permission to make one call. Move-only. Record the outcome exactly once with
// Success(), Failure(), Ignore() or Record(); a permit destroyed without an
// outcome gives its half-open slot back, like Ignore(). A permit must not
// outlive its breaker.
//
// Thread-compatible: one thread at a time may use a permit.
class [[nodiscard]] Permit {
 public:
  Permit(Permit&& other) noexcept
      : breaker_(std::exchange(other.breaker_, nullptr)),
        epoch_(other.epoch_),
        half_open_slot_(other.half_open_slot_) {}
  Permit& operator=(Permit&& other) noexcept {
    if (this != &other) {
      Release();
      breaker_ = std::exchange(other.breaker_, nullptr);
      epoch_ = other.epoch_;
      half_open_slot_ = other.half_open_slot_;
    }
    return *this;
  }
  Permit(const Permit&) = delete;
  Permit& operator=(const Permit&) = delete;
  ~Permit() { Release(); }

  // The call succeeded after `duration`. `coarse_now`, when given, is the
  // breaker's clock().CoarseNow() that the caller read as the call ended: a
  // TIME_BASED window takes its second from it instead of reading the clock
  // again (one read fewer per call). TimePoint{} (the default): it reads.
  void Success(Duration duration, TimePoint coarse_now = TimePoint{}) noexcept;
  // The call failed after `duration`.
  void Failure(Duration duration) noexcept { Record(Outcome::Failure(duration)); }
  // The outcome says nothing about the dependency (a client error, a
  // cancellation): not recorded; a half-open slot is given back.
  void Ignore() noexcept { Record(Outcome::Ignored()); }
  // As Success() for `coarse_now`.
  void Record(const Outcome& outcome, TimePoint coarse_now = TimePoint{}) noexcept;

  // False once an outcome was recorded or the permit was moved from.
  bool pending() const noexcept { return breaker_ != nullptr; }
  // The breaker that issued the permit while it is pending, else nullptr.
  const CircuitBreaker* breaker() const noexcept { return breaker_; }

 private:
  friend class CircuitBreaker;
  Permit(CircuitBreaker* breaker, std::uint32_t epoch, bool half_open_slot) noexcept
      : breaker_(breaker), epoch_(epoch), half_open_slot_(half_open_slot) {}
  void Release() noexcept;

  CircuitBreaker* breaker_;
  std::uint32_t epoch_;
  bool half_open_slot_;
};

class CircuitBreaker {
 public:
  // Validates `config` and builds a breaker named `name` on `clock`, which
  // must outlive it. Fails with kInvalidArgument naming the bad field.
  // With a shared_state, the breaker joins the fleet before Create()
  // returns: the store may already have applied an override or an OPEN the
  // fleet holds, before a listener added afterwards could hear it (a
  // Registry's on_create hook runs before its breakers join, so its
  // observers see every transition).
  static Result<std::unique_ptr<CircuitBreaker>> Create(std::string name,
                                                        CircuitBreakerConfig config,
                                                        Clock& clock = SystemClock());

  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;
  ~CircuitBreaker();

  // Asks to make one call. Returns a Permit, or a Status kCircuitOpen whose
  // reason() is "open", "forced_open" or "half_open_full" and whose retry_at()
  // is when OPEN ends (if it is known). Never allocates. Without a shared
  // state it never blocks; with one it may wait for the store, for at most
  // the store's timeout, on a new breaker's first call, after a reconnect,
  // and on the call that ends OPEN (see "Blocking" at the top of this file).
  Result<Permit> TryAcquire() noexcept;

  // A rejection without asking for a permit: when a call made now would be
  // refused because the breaker is OPEN (its wait not over) or FORCED_OPEN,
  // records that rejection exactly as TryAcquire() does (counted, listeners
  // told) and returns it. Otherwise changes nothing and returns nullopt, and
  // the caller goes on with TryAcquire(). Never blocks, even with a shared
  // state (TryAcquire() may ask the store when OPEN ends, or before the first
  // call of a breaker): an event loop can answer a fail-fast from its own
  // thread and hand everything else to a worker.
  std::optional<Status> TryReject() noexcept;

  // TryAcquire() for a thread that must never wait for the shared state (an
  // event loop: the Node binding's): the same decision, recorded the same
  // way, except that where TryAcquire() would ask the store — a view to
  // re-read, or the call that ends OPEN and asks for the fleet's probe lease
  // — it changes nothing and returns nullopt, and the caller makes that call
  // with TryAcquire() on a thread that may block. Without a shared state it
  // never returns nullopt. In CLOSED it costs what TryAcquire() costs.
  std::optional<Result<Permit>> TryAcquireWithoutBlocking() noexcept;

  // TryAcquire()'s permit when the state word alone grants it (CLOSED, and
  // nothing to re-read from a shared state); otherwise nullopt, with nothing
  // recorded or changed, and the caller goes on with TryReject() and
  // TryAcquire(). For a caller that asks several breakers per call (seed
  // 000's two circuits): the common case without building a refusal. A
  // CLOSED permit holds nothing, so dropping it unrecorded leaves no trace.
  std::optional<Permit> TryAcquireIfClosed() noexcept;

  // Runs `fn` under a permit, times it, records its outcome and returns what
  // it returned: a Result<R> for a value R, the Status or Result<U> it returned
  // itself (non-OK counts as a failure), or a Status for void. Rejections come
  // back as kCircuitOpen without running `fn`. An exception thrown by `fn` is
  // classified by config.exception_classifier, recorded, and rethrown.
  template <typename F>
  auto Call(F&& fn) -> typename internal::CallReturn<std::invoke_result_t<F&>>::type;

  // As Call(fn), with `classify(const R&)` returning an OutcomeKind or an
  // Outcome (whose duration, if zero, is filled in by the measurement).
  template <typename F, typename C>
  auto Call(F&& fn, C&& classify) -> typename internal::CallReturn<std::invoke_result_t<F&>>::type;

  // The current state. An expired OPEN stays OPEN here until a call (or the
  // automatic-transition timer) moves it; see docs/semantics.md.
  State state() const noexcept {
    return static_cast<State>(word_.load(std::memory_order_acquire) & internal::kStateMask);
  }
  const std::string& name() const noexcept { return name_; }
  const CircuitBreakerConfig& config() const noexcept { return config_; }
  Clock& clock() const noexcept { return clock_; }
  // Whether Call() times its callable with Clock::Now() (true) or
  // Clock::CoarseNow(): config().call_timing resolved as CallTiming says. A
  // caller that times its calls itself can follow the breaker's rule.
  bool precise_call_timing() const noexcept { return precise_call_timing_; }
  // A read of the breaker's clock as Call() times a call with it: Now() when
  // precise_call_timing(), else CoarseNow(); inline, without the virtual
  // call, when the clock is SystemClock(). For a caller that times its calls
  // itself (meta::RunProviderCall).
  TimePoint CallTime() const noexcept;

  // A consistent snapshot of the window and counters.
  CircuitBreakerMetrics metrics() const;

  // Operator transitions. Each starts a new state epoch and a fresh window,
  // except TransitionToOpen/HalfOpen, which keep the window as Resilience4j's
  // transitionTo*State do. A move to the current state starts afresh too; in
  // Compatibility::kResilience4j it tells listeners nothing, as Resilience4j
  // publishes no event for it (docs/semantics.md).
  void ForceOpen(OverrideOptions options = {});
  void ForceClosed(OverrideOptions options = {});
  void Disable(OverrideOptions options = {});
  void MetricsOnly(OverrideOptions options = {});
  // Back to CLOSED with an empty window, whatever the state; ends overrides.
  void Reset(std::string reason = {}, std::string actor = {});
  void TransitionToClosed();
  // OK, or in Compatibility::kResilience4j kInvalidArgument "illegal state
  // transition from <from> to <to>" where Resilience4j throws
  // IllegalStateTransitionException: TransitionToHalfOpen() from CLOSED, and
  // either from METRICS_ONLY. Then nothing changes: state, window and
  // listeners are as before. kDefault takes every move.
  Status TransitionToOpen();
  Status TransitionToHalfOpen();

  // The operator state in force, if any.
  std::optional<OverrideInfo> active_override() const;

  // Adds a listener; returns an id for RemoveListener(). Listeners are kept
  // alive by the breaker until removed.
  std::uint64_t AddListener(std::shared_ptr<CircuitBreakerListener> listener);
  bool RemoveListener(std::uint64_t id);

  // Counts since creation (see CircuitBreakerTotals).
  CircuitBreakerTotals totals() const;
  // metrics() and totals() together, with one lock and one pass over the
  // per-thread counters: what an exporter scraping thousands of breakers
  // wants.
  void Observe(CircuitBreakerMetrics& metrics, CircuitBreakerTotals& totals) const;

  // The timer every call's duration is recorded into from now on (a
  // MetricsCollector sets one when it attaches the breaker). Set once: false,
  // and nothing changes, when a timer is set already. Without one a call costs
  // a load and a branch more.
  bool SetCallTimer(std::shared_ptr<CallTimer> timer);
  // The timer set, or nullptr.
  CallTimer* call_timer() const noexcept { return call_timer_.load(std::memory_order_acquire); }

  // True when the registry may drop this breaker: CLOSED (or DISABLED) with no
  // failure and no slow call in its window and no override in force.
  bool IsQuiescent() const;

  // ---- Implementation details follow; nothing below is part of the API. ----
  // The state word's bits and the per-thread writer slots are in
  // fusebox/internal/circuit_breaker_word.h; the private Core, and where each
  // concern lives, in src/circuit_breaker_core.h.

 private:
  struct Core;
  friend class Permit;
  friend class Registry;

  CircuitBreaker(std::string name, CircuitBreakerConfig config, Clock& clock);
  // For the Registry: Create() without joining the fleet, so that on_create
  // adds its listeners first; JoinFleet() then subscribes to the store.
  static Result<std::unique_ptr<CircuitBreaker>> CreateUnjoined(std::string name,
                                                                CircuitBreakerConfig config,
                                                                Clock& clock);
  void JoinFleet();

  static State StateOf(std::uint64_t word) noexcept {
    return static_cast<State>(word & internal::kStateMask);
  }
  static std::uint32_t EpochOf(std::uint64_t word) noexcept {
    return static_cast<std::uint32_t>(word >> internal::kEpochShift);
  }

  // The general paths (out of line) behind the inline fast paths below: every
  // state but a clean CLOSED for admission, and every outcome that needs the
  // lock for recording. "General", not "slow": a slow call is the domain's.
  // With `would_block` set, a path that would ask the store sets it instead
  // and returns an error that means nothing (TryAcquireWithoutBlocking()).
  Result<Permit> TryAcquireGeneral(std::uint64_t word, bool* would_block = nullptr) noexcept;
  std::optional<Status> TryRejectGeneral(std::uint64_t word) noexcept;
  Result<Permit> AcquireSharedProbe(std::uint64_t word) noexcept;
  Status RejectOpen(std::uint64_t word, Duration::rep deadline) noexcept;
  void RecordSuccess(std::uint32_t epoch, bool half_open_slot, Duration d,
                     TimePoint coarse_now) noexcept;
  void RecordGeneral(std::uint32_t epoch, bool half_open_slot, const Outcome& outcome) noexcept;
  void ReleasePermit(std::uint32_t epoch, bool half_open_slot) noexcept;
  bool StripeSuccess(TimePoint coarse_now = TimePoint{}) noexcept;
  bool RecordClosedSuccess(std::uint64_t word) noexcept;
  void CountOutcome(OutcomeKind kind, Duration d) noexcept;
  // timer.Record(kind, d), out of line (CallTimer is incomplete here).
  static void RecordCallTime(CallTimer& timer, OutcomeKind kind, Duration d) noexcept;
  void DeferSuccess() noexcept;
  bool DeferFailure(std::uint32_t epoch, Duration d) noexcept;
  bool DeferFailureToLog(std::uint64_t word) noexcept;
  // clock_.CoarseNow() and clock_.Now(), inline when clock_ is SystemClock().
  TimePoint CoarseNow() const noexcept { return internal::CoarseNow(clock_, system_clock_); }
  TimePoint PreciseNow() const noexcept { return internal::Now(clock_, system_clock_); }
  TimePoint CoarseOrNone(TimePoint end) const noexcept;
  Outcome ClassifyException(const std::exception_ptr& e) const noexcept;

  // --- Counters written without the lock (rejections; deferred successes,
  // see internal::kDeferSuccessBit), one cache line per writer slot, so that
  // threads never write the same line and the hot paths never write the line
  // of word_. A thread that owns a slot updates it with a plain load and
  // store, not a locked read-modify-write (~4 ns saved per rejection); see
  // circuit_breaker.cc. ---
  struct alignas(64) SlotCounters {
    // Rejections counted against the closed ([0]) and probe ([1]) metrics.
    std::atomic<std::uint64_t> rejected[2] = {};
    // Successes counted but not yet applied to the window. COUNT_BASED: how
    // many, ever. TIME_BASED: high 32 bits the epoch second (mod 2^32) they
    // were counted in, low 32 bits how many (CircuitBreaker::StripeSuccess()).
    std::atomic<std::uint64_t> successes{0};
    // Cumulative, for totals(): calls by OutcomeKind and their durations (ns).
    std::atomic<std::uint64_t> calls[3] = {};
    std::atomic<std::uint64_t> call_ns[3] = {};
  };

  // --- Read on every call; written only on transitions (or never), all in
  // word_'s cache line: a success reads nothing else of the breaker
  // itself, one line where there were two (docs/performance.md). ---
  // State (bits 0-3), flags (internal::k*Bit), state epoch (bits 32-63).
  // Written with release under Core::mu, read with acquire (or relaxed where
  // only the bits themselves matter); see src/circuit_breaker_core.h.
  alignas(64) std::atomic<std::uint64_t> word_;
  // OPEN: the end of the wait (strict: a call is admitted only after it).
  // FORCED_*/DISABLED/METRICS_ONLY with an expiry: when it reverts.
  std::atomic<Duration::rep> deadline_ns_{0};
  const Duration slow_threshold_;
  const bool precise_call_timing_;
  const bool resilience4j_;
  // OutcomeOrder::kRelaxed on a COUNT_BASED window without a
  // consecutive_failure_threshold: failures may be deferred (DeferFailure()).
  const bool relaxed_order_;
  // clock_ is SystemClock(): the hot paths read it without the virtual call
  // (internal/system_clock.h). Beside the flags above, in their padding.
  const bool system_clock_;
  Clock& clock_;
  // One SlotCounters per writer slot (kSharedSlot + 1).
  const std::unique_ptr<SlotCounters[]> counters_;
  // SetCallTimer(): written once, then read by every outcome.
  std::atomic<CallTimer*> call_timer_{nullptr};
  // OutcomeOrder::kRelaxed only: each owned slot's deferred failures, on
  // lines of their own (src/relaxed_outcome_log.h). Null otherwise.
  const std::unique_ptr<internal::RelaxedOutcomeLog> relaxed_log_;
  // --- Read off the hot paths. ---
  const std::string name_;
  const CircuitBreakerConfig config_;

  // SetCallTimer()'s timer, kept alive as long as the breaker.
  std::shared_ptr<CallTimer> call_timer_owner_;

  // Everything else: the windows, half-open bookkeeping, listeners, timers.
  const std::unique_ptr<Core> core_;
};

// ---------------------------------------------------------------------------
// Implementation details follow: the inline fast paths, kept here so that a
// CLOSED call costs no function call.

inline Result<Permit> CircuitBreaker::TryAcquire() noexcept {
  // Acquire pairs with the release store of every transition: a permit issued
  // in CLOSED sees the window and config state of the epoch it carries.
  const std::uint64_t word = word_.load(std::memory_order_acquire);
  // kClosed is 0: CLOSED and nothing to re-read from the shared state.
  if ((word & (internal::kStateMask | internal::kSharedStaleBit)) == 0) [[likely]] {
    return Permit(this, EpochOf(word), /*half_open_slot=*/false);
  }
  return TryAcquireGeneral(word);
}

inline std::optional<Result<Permit>> CircuitBreaker::TryAcquireWithoutBlocking() noexcept {
  const std::uint64_t word = word_.load(std::memory_order_acquire);
  if ((word & (internal::kStateMask | internal::kSharedStaleBit)) == 0) [[likely]] {
    return Permit(this, EpochOf(word), /*half_open_slot=*/false);
  }
  bool would_block = false;
  Result<Permit> r = TryAcquireGeneral(word, &would_block);
  if (would_block) return std::nullopt;
  return r;
}

inline std::optional<Permit> CircuitBreaker::TryAcquireIfClosed() noexcept {
  // TryAcquire()'s fast path, and its memory order.
  const std::uint64_t word = word_.load(std::memory_order_acquire);
  if ((word & (internal::kStateMask | internal::kSharedStaleBit)) == 0) [[likely]] {
    return Permit(this, EpochOf(word), /*half_open_slot=*/false);
  }
  return std::nullopt;
}

inline std::optional<Status> CircuitBreaker::TryReject() noexcept {
  // Only OPEN and FORCED_OPEN refuse without a permit; every other state
  // answers nullopt from the word alone, without reading the clock (a call
  // that asks TryReject() before TryAcquire() pays one load for it).
  const std::uint64_t word = word_.load(std::memory_order_acquire);
  const State state = StateOf(word);
  if (state != State::kOpen && state != State::kForcedOpen) [[likely]]
    return std::nullopt;
  return TryRejectGeneral(word);
}

inline void CircuitBreaker::RecordSuccess(std::uint32_t epoch, bool half_open_slot, Duration d,
                                          TimePoint coarse_now) noexcept {
  // Relaxed is enough: the flag bits are only a hint that is re-derived under
  // the lock; acting on a stale "fast" bit linearizes this success just before
  // the transition or failure that cleared it, which leaves the window exactly
  // as a full, clean window is (a success replaces a success).
  CountOutcome(OutcomeKind::kSuccess, d);
  const std::uint64_t word = word_.load(std::memory_order_relaxed);
  if (d <= slow_threshold_ && (EpochOf(word) == epoch || resilience4j_)) [[likely]] {
    if (word & internal::kFastSuccessBit) return;
    if (word & internal::kDeferSuccessBit) {
      DeferSuccess();
      return;
    }
    if ((word & internal::kStripedSuccessBit) && StripeSuccess(coarse_now)) return;
    // CLOSED with failures in the window; listeners want every outcome seen
    // in order, so they keep the general path.
    if (StateOf(word) == State::kClosed && !(word & internal::kOutcomeListenersBit) &&
        RecordClosedSuccess(word)) {
      return;
    }
  }
  RecordGeneral(epoch, half_open_slot, Outcome::Success(d));
}

inline void Permit::Success(Duration duration, TimePoint coarse_now) noexcept {
  assert(breaker_ != nullptr && "outcome recorded twice, or permit moved from");
  std::exchange(breaker_, nullptr)->RecordSuccess(epoch_, half_open_slot_, duration, coarse_now);
}

inline void Permit::Record(const Outcome& outcome, TimePoint coarse_now) noexcept {
  assert(breaker_ != nullptr && "outcome recorded twice, or permit moved from");
  CircuitBreaker* b = std::exchange(breaker_, nullptr);
  if (outcome.kind == OutcomeKind::kSuccess && outcome.open_for <= Duration::zero()) {
    b->RecordSuccess(epoch_, half_open_slot_, outcome.duration, coarse_now);
  } else {
    b->CountOutcome(outcome.kind, outcome.duration);
    if (outcome.kind == OutcomeKind::kFailure && outcome.open_for <= Duration::zero() &&
        b->DeferFailure(epoch_, outcome.duration)) {
      return;
    }
    b->RecordGeneral(epoch_, half_open_slot_, outcome);
  }
}

inline bool CircuitBreaker::DeferFailure(std::uint32_t epoch, Duration d) noexcept {
  const std::uint64_t word = word_.load(std::memory_order_relaxed);
  if (!(word & internal::kDeferFailureBit) || d > slow_threshold_ || EpochOf(word) != epoch) {
    return false;
  }
  return DeferFailureToLog(word);
}

inline void CircuitBreaker::CountOutcome(OutcomeKind kind, Duration d) noexcept {
  const int slot = internal::WriterSlot();
  SlotCounters& c = counters_[slot];
  const auto k = static_cast<std::size_t>(kind);
  internal::AddToSlot(c.calls[k], slot, 1);
  if (d > Duration::zero())
    internal::AddToSlot(c.call_ns[k], slot, static_cast<std::uint64_t>(d.count()));
  if (CallTimer* timer = call_timer_.load(std::memory_order_acquire)) {
    RecordCallTime(*timer, kind, d);
  }
}

inline void Permit::Release() noexcept {
  if (breaker_ != nullptr) std::exchange(breaker_, nullptr)->ReleasePermit(epoch_, half_open_slot_);
}

namespace internal {
template <typename R>
Outcome DefaultClassify(const R& r) {
  if constexpr (std::is_same_v<R, Status>) {
    return r.ok() ? Outcome::Success() : Outcome::Failure();
  } else if constexpr (requires {
                         r.has_value();
                         r.error();
                       }) {
    return r.has_value() ? Outcome::Success() : Outcome::Failure();
  } else {
    return Outcome::Success();
  }
}

template <typename C, typename R>
Outcome ApplyClassifier(C& classify, const R& r) {
  using Out = std::invoke_result_t<C&, const R&>;
  if constexpr (std::is_same_v<Out, OutcomeKind>) {
    return Outcome{classify(r)};
  } else {
    static_assert(std::is_same_v<Out, Outcome>, "a classifier returns OutcomeKind or Outcome");
    return classify(r);
  }
}

inline void FillDuration(Outcome& o, Duration d) {
  if (o.duration == Duration::zero()) o.duration = d;
}

inline Duration Since(TimePoint start, TimePoint end) {
  return end > start ? end - start : Duration::zero();
}
}  // namespace internal

template <typename F>
auto CircuitBreaker::Call(F&& fn) -> typename internal::CallReturn<std::invoke_result_t<F&>>::type {
  using R = std::invoke_result_t<F&>;
  if constexpr (std::is_void_v<R>) {
    return Call(std::forward<F>(fn), [] {});
  } else {
    return Call(std::forward<F>(fn), [](const R& r) { return internal::DefaultClassify(r); });
  }
}

template <typename F, typename C>
auto CircuitBreaker::Call(F&& fn, C&& classify) ->
    typename internal::CallReturn<std::invoke_result_t<F&>>::type {
  using R = std::invoke_result_t<F&>;
  Result<Permit> permit = TryAcquire();
  if (!permit) return std::move(permit).error();
  const TimePoint start = CallTime();
  try {
    if constexpr (std::is_void_v<R>) {
      fn();
      const TimePoint end = CallTime();
      permit->Success(internal::Since(start, end), CoarseOrNone(end));
      return Status();
    } else {
      R r = fn();
      Outcome o = internal::ApplyClassifier(classify, r);
      const TimePoint end = CallTime();
      internal::FillDuration(o, internal::Since(start, end));
      permit->Record(o, CoarseOrNone(end));
      return r;
    }
  } catch (...) {
    Outcome o = ClassifyException(std::current_exception());
    internal::FillDuration(o, internal::Since(start, CallTime()));
    if (permit->pending()) permit->Record(o);
    throw;
  }
}

inline TimePoint CircuitBreaker::CallTime() const noexcept {
  // Call() reads the clock twice. Precise (~21 ns a read on SystemClock here)
  // only when the slow-call threshold is short enough for the coarse clock's
  // few milliseconds to matter; see CallTiming.
  return precise_call_timing_ ? PreciseNow() : CoarseNow();
}

inline TimePoint CircuitBreaker::CoarseOrNone(TimePoint end) const noexcept {
  // A coarse end is the read the record would take: handed on, it spares it.
  return precise_call_timing_ ? TimePoint{} : end;
}

}  // namespace fusebox

#endif  // FUSEBOX_CIRCUIT_BREAKER_H_
