// RedisSharedState::PublishInstance() and ListInstances(): each instance's
// own figures, for an operator's per-instance view (the gateway's dashboard).
//
// One hash per prefix, "<prefix>{instances}": a single key lives in a single
// Redis Cluster slot, so neither call needs a SCAN of the keyspace nor a
// command across slots. Each call is one script, so the stamp and the
// expiry (or the listing and its clean-up) are one step on the server.
//
// Time is the Redis server's (TIME, inside the script), never this
// process's: heartbeats from hosts whose clocks disagree still age
// correctly (docs/distributed.md, "Nothing written is a timestamp of this
// process").
#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

#include "fusebox/redis/script.h"
#include "fusebox/redis/shared_state.h"
#include "src/guarded_client.h"

namespace fusebox::redis {
namespace {

// Redis before 5 replicates scripts verbatim and refuses a write after TIME
// unless effects replication is asked for; 5+ does that anyway (7 ignores
// the call).
constexpr std::string_view kEffects =
    "if redis.replicate_commands then redis.replicate_commands() end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n";

// KEYS[1] the hash; ARGV: id, figures (a JSON object), ttl in ms.
const Script& PublishScript() {
  static const Script* const kScript = new Script(std::string(kEffects) + R"lua(
redis.call('HSET', KEYS[1], ARGV[1], '{"at_ms":' .. string.format('%d', now) .. ',"figures":' .. ARGV[2] .. '}')
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
)lua");
  return *kScript;
}

// KEYS[1] the hash; ARGV: max age in ms, entries answered at most, entries
// read at most, longest id, longest value. Answers {dropped, truncated,
// {id, age_ms, value, ...}}. An entry too old, without a stamp or too long
// is deleted: no writer of this version makes one, and it would stay forever
// (the hash's TTL is renewed by every live instance).
const Script& ListScript() {
  static const Script* const kScript = new Script(std::string(kEffects) + R"lua(
local max_age, cap, scan_cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local max_id, max_value = tonumber(ARGV[4]), tonumber(ARGV[5])
local out, answered, scanned, dropped, truncated = {}, 0, 0, 0, 0
local cursor = '0'
repeat
  local r = redis.call('HSCAN', KEYS[1], cursor, 'COUNT', 100)
  cursor = r[1]
  local kv = r[2]
  for i = 1, #kv, 2 do
    scanned = scanned + 1
    local id, value = kv[i], kv[i + 1]
    local at = tonumber(string.match(value, '^{"at_ms":(%d+),'))
    if at == nil or now - at > max_age or #id > max_id or #value > max_value then
      redis.call('HDEL', KEYS[1], id)
      dropped = dropped + 1
    elseif answered >= cap then
      truncated = 1
    else
      answered = answered + 1
      out[#out + 1] = id
      out[#out + 1] = math.max(0, now - at)
      out[#out + 1] = value
    end
  end
until cursor == '0' or scanned >= scan_cap
if cursor ~= '0' then truncated = 1 end
return {dropped, truncated, out}
)lua");
  return *kScript;
}

constexpr std::string_view kStampPrefix = R"({"at_ms":)";
constexpr std::string_view kFiguresField = R"(,"figures":)";

// The figures of a stored value ({"at_ms":N,"figures":F}), or empty.
std::string_view FiguresOf(std::string_view value) {
  if (!value.starts_with(kStampPrefix) || !value.ends_with('}')) return {};
  const std::size_t at = value.find(kFiguresField);
  if (at == std::string_view::npos) return {};
  return value.substr(at + kFiguresField.size(), value.size() - 1 - (at + kFiguresField.size()));
}

std::string Millis(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

Status ValidInstanceId(std::string_view id) {
  if (id.empty() || id.size() > RedisSharedState::kMaxInstanceIdBytes) {
    return Status::InvalidArgument("instance id: must be 1 to " +
                                   std::to_string(RedisSharedState::kMaxInstanceIdBytes) +
                                   " bytes, got " + std::to_string(id.size()));
  }
  for (char c : id) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return Status::InvalidArgument("instance id: control bytes are not allowed");
    }
  }
  return Status();
}

}  // namespace

Status RedisSharedState::PublishInstance(std::string_view id, std::string_view json, Duration ttl,
                                         Duration budget) {
  if (Status s = ValidInstanceId(id); !s.ok()) return s;
  if (json.size() < 2 || json.size() > kMaxInstanceJsonBytes || !json.starts_with('{') ||
      !json.ends_with('}')) {
    return Status::InvalidArgument("instance figures: must be a JSON object of at most " +
                                   std::to_string(kMaxInstanceJsonBytes) + " bytes");
  }
  if (ttl < std::chrono::milliseconds(1)) {
    return Status::InvalidArgument("instance heartbeat ttl: must be at least 1 ms");
  }
  const std::string key = scripts_.keyspace().prefix() + "{instances}";
  const std::string ttl_ms = Millis(ttl);
  Result<bool> done = client_->Run<bool>(
      [&](Connection& conn) -> Result<bool> {
        Result<Reply> r = PublishScript().Run(conn, {key}, {id, json, ttl_ms});
        if (!r) return std::move(r).error();
        return true;
      },
      budget);
  return done ? Status() : std::move(done).error();
}

Result<InstanceListing> RedisSharedState::ListInstances(Duration max_age, std::size_t max_instances,
                                                        Duration budget) {
  max_instances = std::min(max_instances, kMaxInstances);
  const std::string key = scripts_.keyspace().prefix() + "{instances}";
  const std::string args[] = {Millis(max_age), std::to_string(max_instances),
                              std::to_string(kMaxInstancesScanned),
                              std::to_string(kMaxInstanceIdBytes),
                              // The stamp and the wrapper around the figures.
                              std::to_string(kMaxInstanceJsonBytes + 64)};
  Result<InstanceListing> got = client_->Run<InstanceListing>(
      [&](Connection& conn) -> Result<InstanceListing> {
        Result<Reply> r =
            ListScript().Run(conn, {key}, {args[0], args[1], args[2], args[3], args[4]});
        if (!r) return std::move(r).error();
        const auto bad = [] {
          return Status(StatusCode::kInternal, "redis: instance listing: unexpected reply");
        };
        if (!r->is_array() || r->elements.size() != 3 || !r->elements[0].is_integer() ||
            !r->elements[1].is_integer() || !r->elements[2].is_array() ||
            r->elements[2].elements.size() % 3 != 0) {
          return bad();
        }
        InstanceListing out;
        out.dropped = r->elements[0].integer;
        out.truncated = r->elements[1].integer != 0;
        const std::vector<Reply>& rows = r->elements[2].elements;
        for (std::size_t i = 0; i + 2 < rows.size(); i += 3) {
          if (!rows[i].is_string() || !rows[i + 1].is_integer() || !rows[i + 2].is_string()) {
            return bad();
          }
          // Another instance wrote it: checked again here, whatever the
          // script let through.
          const std::string_view figures = FiguresOf(rows[i + 2].str);
          if (!ValidInstanceId(rows[i].str).ok() || figures.empty()) continue;
          out.instances.push_back({.id = rows[i].str,
                                   .json = std::string(figures),
                                   .age = std::chrono::milliseconds(rows[i + 1].integer)});
        }
        std::sort(out.instances.begin(), out.instances.end(),
                  [](const InstanceFigures& a, const InstanceFigures& b) { return a.id < b.id; });
        return out;
      },
      budget);
  return got;
}

}  // namespace fusebox::redis
