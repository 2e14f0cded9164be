#include "fusebox/redis/circuit_scripts.h"

#include <chrono>
#include <cstdio>
#include <random>

namespace fusebox::redis {
namespace {

using std::chrono::milliseconds;

// KEYS: open, trip, lease. ARGV: open_ms, grace_ms, reason, channel, circuit.
// PTTL of `open` is -2 when absent and -1 when it has no TTL: both are below
// any open_ms, so an absent key opens and a persistent one is repaired.
constexpr const char* kTripLua = R"lua(
local open_ms, grace_ms = tonumber(ARGV[1]), tonumber(ARGV[2])
local cur = redis.call('PTTL', KEYS[1])
local action, gen
if cur < open_ms then
  gen = redis.call('HINCRBY', KEYS[2], 'gen', 1)
  redis.call('SET', KEYS[1], gen, 'PX', open_ms)
  if cur == -2 then action = 'opened' else action = 'extended' end
  cur = open_ms
  redis.call('HSET', KEYS[2], 'reason', ARGV[3])
  redis.call('DEL', KEYS[3])
else
  action = 'kept'
  gen = tonumber(redis.call('HGET', KEYS[2], 'gen') or '0')
end
local want = cur + grace_ms
local trip_pttl = redis.call('PTTL', KEYS[2])
if trip_pttl == -2 then
  redis.call('HSET', KEYS[2], 'gen', gen)
  trip_pttl = -1
end
if trip_pttl < want then redis.call('PEXPIRE', KEYS[2], want) end
if action ~= 'kept' then
  redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' open ' .. gen .. ' ' .. cur)
end
return {action, gen, cur}
)lua";

// KEYS: open, trip, lease. ARGV: token, lease_ms.
// PTTL 0 means "less than 1 ms left": still OPEN, so that a probe never
// starts while the open key exists (Close() would then say reopened).
constexpr const char* kAcquireLua = R"lua(
local p = redis.call('PTTL', KEYS[1])
if p ~= -2 then return {'open', p} end
if redis.call('EXISTS', KEYS[2]) == 0 then return {'closed', 0} end
local lease_ms = tonumber(ARGV[2])
if redis.call('SET', KEYS[3], ARGV[1], 'NX', 'PX', lease_ms) then
  return {'probe', lease_ms}
end
return {'busy', redis.call('PTTL', KEYS[3])}
)lua";

// KEYS: open, trip, lease. ARGV: token, channel, circuit.
// GET of an absent key is false in Lua, never equal to a token.
constexpr const char* kCloseLua = R"lua(
if redis.call('GET', KEYS[3]) ~= ARGV[1] then return 'lost' end
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('DEL', KEYS[3])
  return 'reopened'
end
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' closed')
return 'closed'
)lua";

// KEYS: lease. ARGV: token.
constexpr const char* kReleaseLua = R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
)lua";

// KEYS: override. ARGV: kind, px_ms (0: until changed), actor hex, reason
// hex, channel, event. Replaces any override in force (or, LIFTED, removes
// it) and publishes the event, in one step.
constexpr const char* kOverrideLua = R"lua(
redis.call('DEL', KEYS[1])
if ARGV[1] ~= 'LIFTED' then
  redis.call('HSET', KEYS[1], 'kind', ARGV[1], 'actor', ARGV[3], 'reason', ARGV[4])
  local px = tonumber(ARGV[2])
  if px > 0 then redis.call('PEXPIRE', KEYS[1], px) end
end
redis.call('PUBLISH', ARGV[5], ARGV[6])
return 1
)lua";

Status ArgumentError(std::string_view operation, std::string_view circuit,
                     const std::string& what) {
  std::string shown(circuit.substr(0, 64));
  return Status::InvalidArgument("redis " + std::string(operation) + " of circuit \"" + shown +
                                 "\": " + what);
}

Status CheckDuration(std::string_view operation, std::string_view circuit, std::string_view name,
                     Duration d, bool allow_zero) {
  if (d < Duration::zero() || (!allow_zero && d == Duration::zero())) {
    return ArgumentError(operation, circuit,
                         std::string(name) + (allow_zero ? " must be >= 0" : " must be > 0"));
  }
  if (d > kMaxScriptDuration) {
    return ArgumentError(operation, circuit, std::string(name) + " is longer than 30 days");
  }
  return Status();
}

Status CheckToken(std::string_view operation, std::string_view circuit, std::string_view token) {
  if (token.empty() || token.size() > 128) {
    return ArgumentError(operation, circuit, "the lease token must be 1..128 bytes");
  }
  return Status();
}

std::string Ms(Duration d) { return std::to_string(std::chrono::ceil<milliseconds>(d).count()); }

// A PTTL-like reply value as a Duration: -1 (no TTL) becomes kNoExpiry.
Duration FromPttl(std::int64_t ms) {
  if (ms == -1) return kNoExpiry;
  return milliseconds(ms < 0 ? 0 : ms);
}

Status Unexpected(std::string_view operation, const Reply& r) {
  return Status::Internal("redis " + std::string(operation) + ": unexpected script reply " +
                          r.ToString());
}

// {word, integer} replies of trip/acquire: checks the shape.
bool IsWordAndInteger(const Reply& r, std::size_t n) {
  if (!r.is_array() || r.elements.size() != n || !r.elements[0].is_string()) return false;
  for (std::size_t i = 1; i < n; ++i) {
    if (!r.elements[i].is_integer()) return false;
  }
  return true;
}

}  // namespace

std::string_view TripActionName(TripResult::Action action) {
  switch (action) {
    case TripResult::Action::kOpened:
      return "opened";
    case TripResult::Action::kExtended:
      return "extended";
    case TripResult::Action::kKept:
      return "kept";
  }
  return "?";
}

std::string_view AcquireOutcomeName(AcquireResult::Outcome outcome) {
  switch (outcome) {
    case AcquireResult::Outcome::kProbe:
      return "probe";
    case AcquireResult::Outcome::kBusy:
      return "busy";
    case AcquireResult::Outcome::kOpen:
      return "open";
    case AcquireResult::Outcome::kClosed:
      return "closed";
  }
  return "?";
}

std::string_view CloseResultName(CloseResult result) {
  switch (result) {
    case CloseResult::kClosed:
      return "closed";
    case CloseResult::kLost:
      return "lost";
    case CloseResult::kReopened:
      return "reopened";
  }
  return "?";
}

std::string_view ReadStateName(ReadResult::State state) {
  switch (state) {
    case ReadResult::State::kOpen:
      return "open";
    case ReadResult::State::kHalfOpen:
      return "half_open";
    case ReadResult::State::kClosed:
      return "closed";
  }
  return "?";
}

std::string NewToken() {
  // A fresh random_device per call: tokens are taken once per recovery, and
  // no generator state is shared between threads.
  std::random_device rd;
  std::string out;
  out.reserve(32);
  for (int i = 0; i < 4; ++i) {
    char buf[9];
    std::snprintf(buf, sizeof buf, "%08x", static_cast<unsigned>(rd()));
    out += buf;
  }
  return out;
}

const Script& CircuitScripts::TripScript() {
  static const Script* const kScript = new Script(kTripLua);
  return *kScript;
}
const Script& CircuitScripts::AcquireScript() {
  static const Script* const kScript = new Script(kAcquireLua);
  return *kScript;
}
const Script& CircuitScripts::CloseScript() {
  static const Script* const kScript = new Script(kCloseLua);
  return *kScript;
}
const Script& CircuitScripts::ReleaseScript() {
  static const Script* const kScript = new Script(kReleaseLua);
  return *kScript;
}
const Script& CircuitScripts::OverrideScript() {
  static const Script* const kScript = new Script(kOverrideLua);
  return *kScript;
}

Status CircuitScripts::Override(Connection& conn, std::string_view circuit,
                                const SharedOverride& o) const {
  if (Status s = ValidateCircuitId(circuit); !s.ok()) {
    return ArgumentError("override", circuit, std::string(s.message()));
  }
  if (Status s = CheckDuration("override", circuit, "expires_after", o.expires_after, true);
      !s.ok()) {
    return s;
  }
  const CircuitKeys keys = keyspace_.Keys(circuit);
  Result<Reply> r = OverrideScript().Run(
      conn, {keys.overrides},
      {SharedOverrideKindName(o.kind), Ms(o.expires_after), HexEncode(o.actor), HexEncode(o.reason),
       keyspace_.channel(), FormatOverrideEvent(circuit, o)});
  if (!r) return std::move(r).error();
  if (!r->is_integer()) return Unexpected("override", *r);
  return Status();
}

CircuitScripts::CircuitScripts() = default;
CircuitScripts::CircuitScripts(Keyspace keyspace) : keyspace_(std::move(keyspace)) {}

Result<TripResult> CircuitScripts::Trip(Connection& conn, std::string_view circuit,
                                        Duration open_for, Duration grace,
                                        std::string_view reason) const {
  if (Status s = ValidateCircuitId(circuit); !s.ok()) {
    return ArgumentError("trip", circuit, std::string(s.message()));
  }
  if (Status s = CheckDuration("trip", circuit, "open_for", open_for, false); !s.ok()) return s;
  if (Status s = CheckDuration("trip", circuit, "grace", grace, true); !s.ok()) return s;
  const CircuitKeys keys = keyspace_.Keys(circuit);
  const std::string open_ms = Ms(open_for);
  const std::string grace_ms = Ms(grace);
  Result<Reply> r = TripScript().Run(conn, {keys.open, keys.trip, keys.lease},
                                     {open_ms, grace_ms, reason, keyspace_.channel(), circuit});
  if (!r) return std::move(r).error();
  if (!IsWordAndInteger(*r, 3)) return Unexpected("trip", *r);
  TripResult out;
  const std::string& action = r->elements[0].str;
  if (action == "opened") {
    out.action = TripResult::Action::kOpened;
  } else if (action == "extended") {
    out.action = TripResult::Action::kExtended;
  } else if (action == "kept") {
    out.action = TripResult::Action::kKept;
  } else {
    return Unexpected("trip", *r);
  }
  out.gen = r->elements[1].integer;
  out.remaining = FromPttl(r->elements[2].integer);
  return out;
}

Result<AcquireResult> CircuitScripts::Acquire(Connection& conn, std::string_view circuit,
                                              std::string_view token, Duration lease_for) const {
  if (Status s = ValidateCircuitId(circuit); !s.ok()) {
    return ArgumentError("acquire", circuit, std::string(s.message()));
  }
  if (Status s = CheckToken("acquire", circuit, token); !s.ok()) return s;
  if (Status s = CheckDuration("acquire", circuit, "lease_for", lease_for, false); !s.ok()) {
    return s;
  }
  const CircuitKeys keys = keyspace_.Keys(circuit);
  const std::string lease_ms = Ms(lease_for);
  Result<Reply> r =
      AcquireScript().Run(conn, {keys.open, keys.trip, keys.lease}, {token, lease_ms});
  if (!r) return std::move(r).error();
  if (!IsWordAndInteger(*r, 2)) return Unexpected("acquire", *r);
  const std::string& word = r->elements[0].str;
  AcquireResult out;
  out.remaining = FromPttl(r->elements[1].integer);
  if (word == "probe") {
    out.outcome = AcquireResult::Outcome::kProbe;
  } else if (word == "busy") {
    out.outcome = AcquireResult::Outcome::kBusy;
  } else if (word == "open") {
    out.outcome = AcquireResult::Outcome::kOpen;
  } else if (word == "closed") {
    out.outcome = AcquireResult::Outcome::kClosed;
    out.remaining = Duration::zero();
  } else {
    return Unexpected("acquire", *r);
  }
  return out;
}

Result<CloseResult> CircuitScripts::Close(Connection& conn, std::string_view circuit,
                                          std::string_view token) const {
  if (Status s = ValidateCircuitId(circuit); !s.ok()) {
    return ArgumentError("close", circuit, std::string(s.message()));
  }
  if (Status s = CheckToken("close", circuit, token); !s.ok()) return s;
  const CircuitKeys keys = keyspace_.Keys(circuit);
  Result<Reply> r = CloseScript().Run(conn, {keys.open, keys.trip, keys.lease},
                                      {token, keyspace_.channel(), circuit});
  if (!r) return std::move(r).error();
  if (r->is_string()) {
    if (r->str == "closed") return CloseResult::kClosed;
    if (r->str == "lost") return CloseResult::kLost;
    if (r->str == "reopened") return CloseResult::kReopened;
  }
  return Unexpected("close", *r);
}

Result<bool> CircuitScripts::Release(Connection& conn, std::string_view circuit,
                                     std::string_view token) const {
  if (Status s = ValidateCircuitId(circuit); !s.ok()) {
    return ArgumentError("release", circuit, std::string(s.message()));
  }
  if (Status s = CheckToken("release", circuit, token); !s.ok()) return s;
  const CircuitKeys keys = keyspace_.Keys(circuit);
  Result<Reply> r = ReleaseScript().Run(conn, {keys.lease}, {token});
  if (!r) return std::move(r).error();
  if (!r->is_integer()) return Unexpected("release", *r);
  return r->integer == 1;
}

Result<ReadResult> CircuitScripts::Read(Connection& conn, std::string_view circuit) const {
  if (Status s = ValidateCircuitId(circuit); !s.ok()) {
    return ArgumentError("read", circuit, std::string(s.message()));
  }
  const CircuitKeys keys = keyspace_.Keys(circuit);
  // Two reads in one round trip. Not atomic, and it need not be: the open key
  // never outlives the trip key, so the pair can only be seen older, never
  // in a state that did not exist.
  // The override (kind, actor, reason and its PTTL) rides along.
  Result<std::vector<Reply>> r =
      conn.Pipeline({{"PTTL", keys.open},
                     {"PTTL", keys.trip},
                     {"HMGET", keys.overrides, "kind", "actor", "reason"},
                     {"PTTL", keys.overrides}});
  if (!r) return std::move(r).error();
  for (const Reply& reply : *r) {
    if (reply.is_error()) return conn.ErrorReplyStatus("read", reply);
  }
  for (int i : {0, 1, 3}) {
    if (!(*r)[i].is_integer()) return Unexpected("read", (*r)[i]);
  }
  const Reply& fields = (*r)[2];
  if (!fields.is_array() || fields.elements.size() != 3) return Unexpected("read", fields);
  ReadResult out;
  if (fields.elements[0].is_string()) {
    std::optional<std::string> actor, reason;
    if (fields.elements[1].is_string()) actor = HexDecode(fields.elements[1].str);
    if (fields.elements[2].is_string()) reason = HexDecode(fields.elements[2].str);
    std::optional<SharedOverride::Kind> kind;
    for (auto k : {SharedOverride::Kind::kForcedOpen, SharedOverride::Kind::kForcedClosed,
                   SharedOverride::Kind::kDisabled, SharedOverride::Kind::kMetricsOnly}) {
      if (SharedOverrideKindName(k) == fields.elements[0].str) kind = k;
    }
    // A hash that is not ours (written by hand) is ignored, not fatal.
    if (kind && actor && reason) {
      SharedOverride o;
      o.kind = *kind;
      o.actor = std::move(*actor);
      o.reason = std::move(*reason);
      const std::int64_t px = (*r)[3].integer;
      o.expires_after = px > 0 ? Duration(milliseconds(px)) : Duration::zero();
      out.override_in_force = std::move(o);
    }
  }
  const std::int64_t open_ms = (*r)[0].integer;
  const std::int64_t trip_ms = (*r)[1].integer;
  if (open_ms != -2) {
    out.state = ReadResult::State::kOpen;
    out.remaining = FromPttl(open_ms);
  } else if (trip_ms != -2) {
    out.state = ReadResult::State::kHalfOpen;
    out.remaining = FromPttl(trip_ms);
  }
  return out;
}

}  // namespace fusebox::redis
