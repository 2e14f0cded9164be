// fusebox/shared_state.h: what instances of a fleet tell each other about a
// circuit.
//
// Many instances of a service call the same dependency (seed 000: many API
// servers, one rate-limited Meta account). When one of them learns "stop for
// D" (a 429 with Retry-After, or its window trips), every instance should stop,
// and when the wait ends exactly one of them should probe. A SharedState
// carries only those rare facts, never per-call counts:
//
//   - OPEN for a duration: Trip(). A later trip extends it only if it is
//     longer; a trip also ends any probe lease in flight (fencing).
//   - After OPEN, a recovery marker: the circuit is neither open nor closed
//     until one instance holds the probe lease (AcquireProbe()) and reports
//     success (Close(lease token)) or trips again. The marker expires after a
//     grace period if nobody probes, and the circuit is then closed.
//   - Changes are pushed to every subscriber (Subscribe()), so each instance
//     keeps its breaker in step without asking on every call.
//
// Nothing here is a timestamp of this process: durations only, measured by
// whoever keeps the state (Redis' own clock for the Redis store).
//
// A CircuitBreaker uses it when CircuitBreakerConfig::shared_state is set:
// local decisions first (its own window trips it at once, then it calls
// Trip()), a pushed OPEN honoured, the fleet's single probe lease taken before
// HALF_OPEN admits a call, and every failure of the store treated as "no
// news": the breaker goes on as a local one (fail-open). See
// docs/distributed.md.
//
// Implementations: testing::InProcessSharedState (several breakers in one
// process: tests, the simulator, one host) and redis::RedisSharedState
// (fusebox::redis).
//
// Thread-safe: every method may be called from any thread.
#ifndef FUSEBOX_SHARED_STATE_H_
#define FUSEBOX_SHARED_STATE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/result.h"

namespace fusebox {

// An operator override (CircuitBreaker::ForceOpen, ForceClosed, Disable,
// MetricsOnly, Reset) shared with every instance: an operator acts on one
// instance, or through any gateway, and the whole fleet follows.
struct SharedOverride {
  enum class Kind : std::uint8_t {
    // The override was lifted (Reset): back to CLOSED.
    kLifted,
    kForcedOpen,
    kForcedClosed,
    kDisabled,
    kMetricsOnly,
  };
  Kind kind = Kind::kLifted;
  // What is left of it; zero: until changed.
  Duration expires_after = Duration::zero();
  std::string reason{};
  std::string actor{};

  friend bool operator==(const SharedOverride&, const SharedOverride&) = default;
};

// "LIFTED", "FORCED_OPEN", "FORCED_CLOSED", "DISABLED", "METRICS_ONLY".
std::string_view SharedOverrideKindName(SharedOverride::Kind kind) noexcept;

// How a store is doing, for metrics and readiness. Counters are since the
// store was made.
struct SharedStateHealth {
  // The store is reachable and its pushes arrive (a connected subscriber).
  bool healthy = true;
  // Commands that failed (I/O error, timeout, error reply).
  std::int64_t errors = 0;
  // Times the store stopped contacting its backend for a while after
  // repeated failures (fail-open periods).
  std::int64_t fail_open_periods = 0;
  // Calls answered "unavailable" without contacting the backend.
  std::int64_t refused_calls = 0;
  // Probe leases granted, and asked for while another instance held one.
  std::int64_t leases_granted = 0;
  std::int64_t lease_contention = 0;
  // Changes pushed to this instance.
  std::int64_t events = 0;
  // Trips, closes, releases or overrides that could not be sent.
  std::int64_t dropped = 0;
  // Trips and overrides not sent because their time ran out while they
  // waited to be (a late OPEN must not outlast the one the breaker meant).
  std::int64_t expired_in_queue = 0;
  // Ops sent a second time on a new connection because the backend had
  // dropped the one they were first sent on.
  std::int64_t resent = 0;
  // Probe closes that found the lease lost (expired, or fenced by a trip).
  std::int64_t closes_lost = 0;
  // How long ago the store last proved that its pushes arrive (a message, or
  // an answer to its heartbeat): at most about heartbeat + command timeout
  // while healthy, growing while not. Zero for a store that pushes as it
  // changes (in-process).
  Duration staleness = Duration::zero();
  // Times every breaker was asked to re-read the fleet (after a reconnect,
  // or when trips that could not be sent are replayed).
  std::int64_t resyncs = 0;
  // Trips and overrides acknowledged by the replicas the store asks for
  // (Redis' wait_replicas), and those not acknowledged in time. Zero for a
  // store that does not ask.
  std::int64_t replica_acks = 0;
  std::int64_t replica_ack_shortfalls = 0;
};

// What the fleet knows about one circuit.
struct SharedCircuitView {
  enum class Kind : std::uint8_t {
    // Neither open nor recovering.
    kClosed,
    // OPEN for `open_remaining` more.
    kOpen,
    // The OPEN time is over and nobody has closed it yet: one instance must
    // take the probe lease and probe.
    kRecovering,
  };
  Kind kind = Kind::kClosed;
  Duration open_remaining = Duration::zero();
  // An operator override in force, if any (never kLifted).
  std::optional<SharedOverride> override_in_force{};
};

// The answer to AcquireProbe().
struct ProbeLease {
  enum class Verdict : std::uint8_t {
    // This instance holds the lease: it may probe. Pass `token` to Close() or
    // Release().
    kProbe,
    // Another instance holds it, for `remaining` more at most.
    kBusy,
    // Someone tripped it again: OPEN for `remaining` more.
    kOpen,
    // Nothing to recover: the circuit is closed in the fleet.
    kClosed,
    // The store could not answer (down, timed out, not connected): decide
    // locally.
    kUnavailable,
  };
  Verdict verdict = Verdict::kUnavailable;
  Duration remaining = Duration::zero();
  std::string token{};
};

// Receives the changes of the circuits it subscribed to, on a thread of the
// store (the Redis subscriber) or on the thread that caused the change
// (InProcessSharedState). Must not block.
class SharedStateListener {
 public:
  virtual ~SharedStateListener() = default;
  // The circuit is OPEN for `remaining` more (a trip somewhere in the fleet,
  // possibly this instance's own).
  virtual void OnSharedOpen(Duration remaining) = 0;
  // A probe succeeded somewhere: the circuit is closed.
  virtual void OnSharedClosed() = 0;
  // Changes may have been missed (the store reconnected): re-read the circuit
  // before trusting the local view again, and re-send any OPEN the fleet may
  // not know about (Trip() never shortens a longer one).
  virtual void OnSharedResync() = 0;
  // An operator set (or lifted) an override on the circuit somewhere.
  virtual void OnSharedOverride(const SharedOverride& /*setting*/) {}
  // Read the circuit now (Read()), unless that was done already: a store
  // calls it from its own thread right after Subscribe(), so that a new
  // breaker shows the fleet's state (an override, an OPEN) before its first
  // call needs it. Default: nothing.
  virtual void OnSharedRefresh() {}
};

// Hears every override the fleet sets or lifts, on any circuit, including
// those no breaker here has subscribed to: an application that keeps its
// breakers in a Registry creates the circuit's breaker on hearing it, so that
// an operator's override is applied, listed and audited on every instance at
// once rather than when the instance first serves that circuit. Called on a
// thread of the store, before the circuit's own subscribers hear the same
// override (a breaker created here hears it too). Must not block on the
// store.
class SharedOverrideWatcher {
 public:
  virtual ~SharedOverrideWatcher() = default;
  virtual void OnFleetOverride(std::string_view circuit, const SharedOverride& setting) = 0;
};

// Bounds the blocking calls of a shared state (Read(), AcquireProbe()) that
// this thread makes while the object lives, by a request's deadline: a
// breaker that reads the fleet or asks for the probe lease on behalf of a
// request must not spend more of the request's time than it has left.
//
//   const fusebox::SharedStateDeadline bound(fusebox::SystemClock().Now() + 1s);
//   auto call = fusebox::meta::ProviderCall::Start(registry, key);  // <= 1 s
//
// Real time (SystemClock), since it bounds real I/O. Scopes nest; an inner one
// can only shorten the bound. A store finds what is left with
// SharedStateBudget() and answers "unavailable" (fail-open) when it is gone;
// a breaker waiting for another thread's answer stops waiting then too.
class SharedStateDeadline {
 public:
  explicit SharedStateDeadline(TimePoint deadline) noexcept;
  ~SharedStateDeadline();
  SharedStateDeadline(const SharedStateDeadline&) = delete;
  SharedStateDeadline& operator=(const SharedStateDeadline&) = delete;

 private:
  TimePoint previous_;
};

// What is left of this thread's innermost SharedStateDeadline (zero or less
// when it has passed); Duration::max() when none is set.
Duration SharedStateBudget() noexcept;

class SharedState {
 public:
  using SubscriptionId = std::uint64_t;

  virtual ~SharedState() = default;

  // Pushes the changes of `circuit` to `listener` until Unsubscribe(). The
  // store keeps the listener alive while it may call it.
  virtual SubscriptionId Subscribe(std::string_view circuit,
                                   std::shared_ptr<SharedStateListener> listener) = 0;
  // After it returns, the listener is not called again by this store, except
  // by a call already running on another thread.
  virtual void Unsubscribe(SubscriptionId id) = 0;

  // The fleet's view of `circuit`. May block, for at most the store's own
  // timeout and what is left of the calling thread's SharedStateDeadline;
  // kUnavailable (or kTimeout) when the store cannot answer in that time.
  virtual Result<SharedCircuitView> Read(std::string_view circuit) = 0;

  // OPEN for `open_for` unless already open for longer; ends any probe lease
  // in flight. `reason` is kept for operators ("failure_rate_exceeded"). Does
  // not block: a store that needs I/O queues it. Errors are the store's to
  // count; the caller has already opened locally.
  virtual void Trip(std::string_view circuit, Duration open_for, std::string_view reason) = 0;

  // Asks for the single probe of a recovering circuit, held for at most
  // `lease_for`. May block, for at most the store's timeout and what is left
  // of the calling thread's SharedStateDeadline (kUnavailable after it).
  virtual ProbeLease AcquireProbe(std::string_view circuit, Duration lease_for) = 0;

  // The probe holding `token` succeeded: closes the circuit for the fleet,
  // unless the lease was lost (expired, or fenced by a trip). Does not block.
  virtual void Close(std::string_view circuit, std::string_view token) = 0;

  // Gives the lease back without a verdict. Does not block.
  virtual void Release(std::string_view circuit, std::string_view token) = 0;

  // Sets (or, kLifted, clears) the operator override of `circuit` for the
  // fleet and pushes it to every subscriber. Does not block. Default: not
  // shared (a store that keeps no overrides).
  virtual void PublishOverride(std::string_view circuit, const SharedOverride& setting) {
    (void)circuit;
    (void)setting;
  }

  // Pushes every override set or lifted anywhere in the fleet to `watcher` until Unsubscribe(id).
  // Default: 0, nothing pushed (no overrides, or only to their subscribers).
  // NOLINTNEXTLINE(performance-unnecessary-value-param): implementations keep it.
  virtual SubscriptionId WatchOverrides(std::shared_ptr<SharedOverrideWatcher> watcher) {
    (void)watcher;
    return 0;
  }

  // How the store is doing. Default: healthy, nothing counted.
  virtual SharedStateHealth health() const { return {}; }
};

}  // namespace fusebox

#endif  // FUSEBOX_SHARED_STATE_H_
