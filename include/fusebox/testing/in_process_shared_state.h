// fusebox/testing/in_process_shared_state.h: a SharedState kept in this
// process.
//
// Several breakers of one process that share a name behave as instances of a
// fleet sharing a Redis store would: one trip opens them all, one probe per
// recovery, a probe's success closes them all. The rules are those of the
// Redis store's scripts (extend-only trip that fences the lease, lease with a
// token and an expiry, fenced close, recovery marker with a grace period),
// timed by the Clock given, so a test drives them with a ManualClock. Changes
// are pushed synchronously, on the thread that made them, after the store's
// lock is released.
//
// Uses: tests, the simulator, and a single host running several "instances"
// in one process. Test controls make the store unavailable (to check
// fail-open) and announce a reconnect (Resync()).
//
//   auto fleet = std::make_shared<fusebox::testing::InProcessSharedState>(clock);
//   config.shared_state = fleet;
//   auto a = *fusebox::CircuitBreaker::Create("meta:read:1784:quota", config, clock);
//   auto b = *fusebox::CircuitBreaker::Create("meta:read:1784:quota", config, clock);
//
// Thread-safe.
#ifndef FUSEBOX_TESTING_IN_PROCESS_SHARED_STATE_H_
#define FUSEBOX_TESTING_IN_PROCESS_SHARED_STATE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/shared_state.h"

namespace fusebox::testing {

class InProcessSharedState final : public SharedState {
 public:
  struct Counters {
    std::int64_t reads = 0;
    // Trips that opened or extended the circuit, and those that did not.
    std::int64_t trips = 0;
    std::int64_t trips_kept = 0;
    std::int64_t probes_granted = 0;
    std::int64_t probes_busy = 0;
    std::int64_t closes = 0;
    std::int64_t closes_lost = 0;
    std::int64_t releases = 0;
    std::int64_t overrides = 0;
    // Calls made while unavailable.
    std::int64_t unavailable = 0;
  };

  // `min_grace`: how long at least a recovery marker outlives the OPEN time
  // before an unprobed circuit counts as closed (the Redis store's default:
  // max(OPEN time, 60 s)). `clock` must outlive the store.
  explicit InProcessSharedState(Clock& clock = SystemClock(),
                                Duration min_grace = std::chrono::seconds(60));

  SubscriptionId Subscribe(std::string_view circuit,
                           std::shared_ptr<SharedStateListener> listener) override;
  void Unsubscribe(SubscriptionId id) override;
  Result<SharedCircuitView> Read(std::string_view circuit) override;
  void Trip(std::string_view circuit, Duration open_for, std::string_view reason) override;
  ProbeLease AcquireProbe(std::string_view circuit, Duration lease_for) override;
  void Close(std::string_view circuit, std::string_view token) override;
  void Release(std::string_view circuit, std::string_view token) override;
  void PublishOverride(std::string_view circuit, const SharedOverride& setting) override;
  // healthy while available; leases and contention counted.
  SharedStateHealth health() const override;

  // While false, every call fails (Read, AcquireProbe: kUnavailable; Trip,
  // Close, Release: dropped) and nothing is pushed, as with a Redis that is
  // down. Default: true.
  void SetAvailable(bool available);
  // While false, changes are made but not pushed, as when a store's
  // subscription is down. Default: true.
  void SetPushes(bool pushes);
  // Tells every subscriber that changes may have been missed, as a store does
  // after reconnecting (OnSharedResync()).
  void Resync();

  Counters counters() const;
  // The reason given with the latest trip of `circuit`, if it is not closed.
  std::string trip_reason(std::string_view circuit) const;

 private:
  struct Circuit {
    TimePoint open_until{};
    TimePoint recovery_until{};
    std::string lease_token;
    TimePoint lease_until{};
    std::string reason;
    // The operator override in force until override_until (TimePoint::max():
    // until changed).
    std::optional<SharedOverride> override_;
    TimePoint override_until{};
  };
  using Listeners = std::vector<std::shared_ptr<SharedStateListener>>;

  Listeners ListenersLocked(std::string_view circuit) const FUSEBOX_REQUIRES(mu_);
  // Counts and refuses a call while unavailable.
  bool RefusedLocked() FUSEBOX_REQUIRES(mu_);
  // The state of `circuit`, created empty if there is none.
  Circuit& CircuitLocked(std::string_view circuit) FUSEBOX_REQUIRES(mu_);
  // Drops the state of `circuit` once nothing of it is alive.
  void ExpireLocked(std::map<std::string, Circuit, std::less<>>::iterator it, TimePoint now)
      FUSEBOX_REQUIRES(mu_);

  Clock& clock_;
  const Duration min_grace_;
  mutable internal::Mutex mu_;
  bool available_ FUSEBOX_GUARDED_BY(mu_) = true;
  bool pushes_ FUSEBOX_GUARDED_BY(mu_) = true;
  std::uint64_t next_token_ FUSEBOX_GUARDED_BY(mu_) = 1;
  SubscriptionId next_id_ FUSEBOX_GUARDED_BY(mu_) = 1;
  std::map<std::string, Circuit, std::less<>> circuits_ FUSEBOX_GUARDED_BY(mu_);
  std::map<SubscriptionId, std::pair<std::string, std::shared_ptr<SharedStateListener>>>
      subscribers_ FUSEBOX_GUARDED_BY(mu_);
  Counters counters_ FUSEBOX_GUARDED_BY(mu_);
};

}  // namespace fusebox::testing

#endif  // FUSEBOX_TESTING_IN_PROCESS_SHARED_STATE_H_
