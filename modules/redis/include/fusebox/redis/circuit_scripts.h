// fusebox/redis/circuit_scripts.h: the atomic operations on a circuit's keys.
//
// Four Lua scripts (trip, acquire, close, release) and one pipelined read, on
// the keys of keyspace.h. Each script touches only the keys of one circuit,
// all passed in KEYS (one Cluster slot), and runs atomically on the server.
// Only durations are written (PX, PEXPIRE): nothing stored is a timestamp of
// this process, so the clocks of the instances never meet; every TTL runs on
// the Redis server's clock. What each guarantees:
//
//   Trip     extend-only: the OPEN time left becomes max(left, open_for); a
//            shorter trip changes nothing ("kept"). A trip that opens or
//            extends bumps gen, deletes the probe lease (fencing: the holder's
//            Close() then returns kLost), keeps the trip key for OPEN + grace,
//            and publishes "<C> open <gen> <pttl_ms>". A persistent open key
//            (no TTL, e.g. set by hand) is repaired to open_for.
//   Acquire  at most one probe lease per circuit at a time: SET NX PX, only
//            when OPEN is over and the trip key still exists (HALF_OPEN).
//   Close    compare-token-then-delete: closes (deletes trip and lease,
//            publishes "<C> closed") only if the caller still holds the lease
//            and nobody re-opened meanwhile.
//   Release  compare-and-delete of the lease: gives it back without a verdict.
//   Read     PTTL open + PTTL trip in one round trip (read-only, no script).
//
//   fusebox::redis::CircuitScripts scripts;  // default keyspace
//   auto trip = scripts.Trip(conn, "meta:ig:1784", 120s, 60s, "rate_limited");
//   auto lease = scripts.Acquire(conn, "meta:ig:1784", token, 30s);
//
// Each call is one round trip (EVALSHA), or two after the server lost its
// script cache (EVAL fallback, see script.h); none retries on a connection
// error: the caller's breaker decides.
//
// Thread-safe: CircuitScripts is immutable; each call uses only the given
// Connection, which is not thread-safe itself.
#ifndef FUSEBOX_REDIS_CIRCUIT_SCRIPTS_H_
#define FUSEBOX_REDIS_CIRCUIT_SCRIPTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/redis/connection.h"
#include "fusebox/redis/keyspace.h"
#include "fusebox/redis/script.h"
#include "fusebox/result.h"

namespace fusebox::redis {

// The `remaining` of a key that exists without a TTL (set by hand or by an
// older writer). Only reported, never written; the next Trip() repairs it.
inline constexpr Duration kNoExpiry = Duration::max();

// Longest duration accepted by Trip() and Acquire(): 30 days.
inline constexpr Duration kMaxScriptDuration = std::chrono::hours(24 * 30);

struct TripResult {
  enum class Action : std::uint8_t {
    kOpened,    // was not OPEN (closed or half-open): now OPEN for open_for
    kExtended,  // was OPEN for less: now OPEN for open_for
    kKept,      // was OPEN for at least open_for: unchanged
  };
  Action action = Action::kKept;
  // The trip generation after the call (increments on kOpened and kExtended).
  std::int64_t gen = 0;
  // The OPEN time left after the call: open_for, or more when kept.
  Duration remaining = Duration::zero();
};

struct AcquireResult {
  enum class Outcome : std::uint8_t {
    kProbe,   // the caller holds the lease for lease_for: it may probe
    kBusy,    // another holder has it for `remaining` more
    kOpen,    // still (or again) OPEN for `remaining` (kNoExpiry: no TTL)
    kClosed,  // neither open nor half-open: nothing to probe
  };
  Outcome outcome = Outcome::kClosed;
  Duration remaining = Duration::zero();
};

enum class CloseResult : std::uint8_t {
  kClosed,    // the caller held the lease: trip and lease deleted, "closed" published
  kLost,      // the caller no longer holds the lease (expired, or fenced by a trip)
  kReopened,  // the caller held it but the circuit is OPEN again: lease dropped, still open
};

struct ReadResult {
  enum class State : std::uint8_t { kOpen, kHalfOpen, kClosed };
  State state = State::kClosed;
  // kOpen: OPEN time left (kNoExpiry: no TTL). kHalfOpen: grace left before
  // the trip key expires and the circuit is closed. kClosed: zero.
  Duration remaining = Duration::zero();
  // The operator override in force, whatever the state (expires_after: what
  // is left of it, zero for none).
  std::optional<SharedOverride> override_in_force{};
};

std::string_view TripActionName(TripResult::Action action);
std::string_view AcquireOutcomeName(AcquireResult::Outcome outcome);
std::string_view CloseResultName(CloseResult result);
std::string_view ReadStateName(ReadResult::State state);

// A fresh probe-lease token: 128 random bits from std::random_device as 32
// lower-case hex digits. Unique per call with overwhelming probability, which
// is all the fencing in Close() needs.
std::string NewToken();

class CircuitScripts {
 public:
  // The default keyspace ("fusebox:v1:").
  CircuitScripts();
  explicit CircuitScripts(Keyspace keyspace);

  const Keyspace& keyspace() const { return keyspace_; }

  // OPEN `circuit` for `open_for` unless it is already open for longer; the
  // trip key outlives the OPEN time by `grace` (how long HALF_OPEN waits for a
  // probe before the circuit silently closes). `reason` is stored for
  // operators when the trip opens or extends. Durations are rounded up to
  // whole milliseconds. kInvalidArgument for a bad circuit id, open_for <= 0,
  // grace < 0, or either above kMaxScriptDuration.
  Result<TripResult> Trip(Connection& conn, std::string_view circuit, Duration open_for,
                          Duration grace, std::string_view reason) const;

  // Asks for the probe lease of `circuit`, held for `lease_for` (rounded up
  // to whole ms) under `token` (from NewToken()). kInvalidArgument for a bad
  // circuit id or token (empty or over 128 bytes), or lease_for <= 0.
  Result<AcquireResult> Acquire(Connection& conn, std::string_view circuit, std::string_view token,
                                Duration lease_for) const;

  // The probe holding `token` succeeded.
  Result<CloseResult> Close(Connection& conn, std::string_view circuit,
                            std::string_view token) const;

  // Gives the lease back if `token` still holds it. True when it was deleted.
  Result<bool> Release(Connection& conn, std::string_view circuit, std::string_view token) const;

  // The fleet's view of `circuit`: one round trip (four pipelined reads).
  Result<ReadResult> Read(Connection& conn, std::string_view circuit) const;

  // Sets the operator override of `circuit` (expires_after zero: until
  // changed), or removes it (kLifted), and publishes an override event.
  Status Override(Connection& conn, std::string_view circuit, const SharedOverride& o) const;

  // The scripts themselves, for tests and docs/distributed.md.
  static const Script& TripScript();
  static const Script& AcquireScript();
  static const Script& CloseScript();
  static const Script& ReleaseScript();
  static const Script& OverrideScript();

 private:
  Keyspace keyspace_;
};

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_CIRCUIT_SCRIPTS_H_
