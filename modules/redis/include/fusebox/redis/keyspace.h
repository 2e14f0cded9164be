// fusebox/redis/keyspace.h: the Redis keys and channel of the circuits, their
// Cluster slot, and the change events published on the channel.
//
// Per circuit id C, with the default prefix "fusebox:v1:":
//
//   fusebox:v1:{C}:open    STRING  gen               PX = remaining OPEN time
//   fusebox:v1:{C}:trip    HASH    gen, reason       PX = OPEN + half-open grace
//   fusebox:v1:{C}:lease   STRING  probe token       PX = probe budget
//   channel fusebox:v1:events   "<C> open <gen> <pttl_ms>" | "<C> closed"
//
// OPEN <=> `open` exists; HALF_OPEN <=> `open` absent and `trip` present;
// CLOSED <=> neither, so a closed circuit costs no memory in Redis. The braces
// make C a Redis Cluster hash tag: the three keys of a circuit share a slot,
// which Lua scripts touching all three need (else CROSSSLOT). Circuit ids may
// contain ':' and spaces; events are parsed from their end.
//
//   fusebox::redis::Keyspace keyspace;  // "fusebox:v1:"
//   fusebox::redis::CircuitKeys keys = keyspace.Keys("meta:ig:1784");
//   // keys.open == "fusebox:v1:{meta:ig:1784}:open"
//
// Thread-safe: Keyspace is immutable and the functions are pure.
#ifndef FUSEBOX_REDIS_KEYSPACE_H_
#define FUSEBOX_REDIS_KEYSPACE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/shared_state.h"
#include "fusebox/status.h"

namespace fusebox::redis {

struct CircuitKeys {
  std::string open;
  std::string trip;
  std::string lease;
  // HASH kind, actor, reason (hex); PX = what is left of the override.
  std::string overrides;
};

class Keyspace {
 public:
  static constexpr std::string_view kDefaultPrefix = "fusebox:v1:";

  // The default prefix, "fusebox:v1:".
  Keyspace();

  // Another prefix, e.g. "myapp:fusebox:v1:" to share a Redis between
  // applications. kInvalidArgument if it contains '{' or '}' (it would steal
  // the hash tag) or is longer than 256 bytes. May be empty.
  static Result<Keyspace> Create(std::string_view prefix);

  const std::string& prefix() const { return prefix_; }

  // The keys of `circuit`; check it with ValidateCircuitId() first.
  CircuitKeys Keys(std::string_view circuit) const;

  // The channel every change of every circuit is published on: prefix +
  // "events".
  const std::string& channel() const { return channel_; }

 private:
  explicit Keyspace(std::string prefix);

  std::string prefix_;
  std::string channel_;
};

// Longest circuit id accepted, in bytes.
inline constexpr std::size_t kMaxCircuitIdBytes = 1024;

// OK for a usable circuit id: non-empty, at most kMaxCircuitIdBytes, not
// starting with '}' (then "{}" would be an empty hash tag and Redis would hash
// each whole key, putting the three keys in different slots). Any other byte
// is allowed, ':' and spaces included; a '}' later in the id only shortens the
// hash tag, which is the same for the three keys. kInvalidArgument otherwise.
Status ValidateCircuitId(std::string_view circuit);

// The Redis Cluster slot of `key`, 0..16383: CRC16 (XMODEM) of the key, or of
// the substring between the first '{' and the next '}' when that is non-empty,
// modulo 16384 (the Redis Cluster specification's HASH_SLOT).
std::uint16_t KeySlot(std::string_view key);

// A change of a circuit, as published on Keyspace::channel().
struct CircuitEvent {
  enum class Kind : std::uint8_t {
    // OPEN for `remaining` from when the trip ran (opened or extended).
    kOpen,
    // A probe succeeded: closed.
    kClosed,
    // An operator set or lifted an override: `override_`.
    kOverride,
  };
  std::string circuit;
  Kind kind = Kind::kClosed;
  // kOpen: the trip generation (informational, increases per opened or
  // extended trip). 0 for kClosed.
  std::int64_t gen = 0;
  // kOpen: the OPEN time left when the trip ran. Zero for kClosed.
  Duration remaining = Duration::zero();
  // kOverride: what was set, its expires_after the PX it was set with.
  SharedOverride override_{};

  friend bool operator==(const CircuitEvent&, const CircuitEvent&) = default;
};

// Parses "<C> open <gen> <pttl_ms>" or "<C> closed", reading from the end so
// that C may contain spaces. kInvalidArgument naming what is wrong otherwise
// (the payload is not a secret; at most 64 bytes of it are shown).
Result<CircuitEvent> ParseEvent(std::string_view payload);

// The payloads ParseEvent() reads, as the scripts publish them.
std::string FormatOpenEvent(std::string_view circuit, std::int64_t gen, Duration remaining);
std::string FormatClosedEvent(std::string_view circuit);
// "<C> override <KIND> <px_ms> <hex actor or -> <hex reason or ->": free text
// travels hex-encoded, so that the event still parses from its end.
std::string FormatOverrideEvent(std::string_view circuit, const SharedOverride& setting);

// Lower-case hex of `bytes`, or "-" for none; HexDecode reverses it (nullopt
// for anything else).
std::string HexEncode(std::string_view bytes);
std::optional<std::string> HexDecode(std::string_view hex);

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_KEYSPACE_H_
