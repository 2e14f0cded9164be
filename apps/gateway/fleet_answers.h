// apps/gateway/fleet_answers.h: what the gateway answers about the fleet and
// about a snapshot's age, apart from Handler's flow (handler.h):
//
//   - SnapshotAgeAndTtl(): the Age header and Cache-Status ttl of a snapshot,
//     which never disagree (RFC 9211 section 2.4, RFC 9111);
//   - ForcedOpenOverride() and ForcedOpenResponse(): a key an operator forced
//     open answers 503 CIRCUIT_FORCED_OPEN, with the override's reason,
//     actor and expiry (docs/status-codes.md), not as a transient OPEN;
//   - FleetEntriesJson(): the rows of /admin/circuits?scope=fleet;
//   - HeartbeatJson() and InstancesJson(): the figures each instance
//     publishes to the fleet, and the dashboard's table of them.
//
// Thread-safe (no state).
#ifndef FUSEBOX_APPS_GATEWAY_FLEET_ANSWERS_H_
#define FUSEBOX_APPS_GATEWAY_FLEET_ANSWERS_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/gateway/dashboard_stats.h"
#include "apps/gateway/handler.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/registry.h"

namespace fusebox::gateway {

// A snapshot's Age and Cache-Status ttl in whole seconds: ttl is the
// freshness lifetime minus the age, negative exactly when the snapshot is
// stale, and ttl == floor(fresh_for) - age always. A fresh copy's age is
// rounded down, a stale one's up, so that 0.4 s past a 60 s lifetime reads
// Age 61 and ttl=-1, never ttl=0 (which would read as fresh).
struct AgeAndTtl {
  std::chrono::seconds age;
  long long ttl = 0;
};
AgeAndTtl SnapshotAgeAndTtl(Duration age, Duration fresh_for);

// The override of a FORCED_OPEN breaker of circuit key `key` (its transient
// or quota breaker), if one is in force.
std::optional<OverrideInfo> ForcedOpenOverride(Registry& registry, std::string_view key);

// 503 CIRCUIT_FORCED_OPEN: who forced it, why, and until when (expires_in_ms,
// Retry-After and retry_after_seconds when it expires), at `now` on the
// breakers' clock.
HttpResponse ForcedOpenResponse(const OverrideInfo& forced, std::string_view key, TimePoint now);

// {"circuits":[...],"truncated":...,"max_entries":...}: one row per entry,
// with "here" saying whether `registry` has that breaker.
std::string FleetEntriesJson(const FleetEntries& fleet, Registry& registry);

// The fleet heartbeat (docs/gateway.md, "Instances"): sent every
// kHeartbeatPeriod; an entry older than kHeartbeatStaleAfter is not shown
// (and deleted from Redis), and the hash itself expires after it. The
// dashboard lists kMaxDashboardInstances instances at most.
inline constexpr Duration kHeartbeatPeriod = std::chrono::seconds(2);
inline constexpr Duration kHeartbeatStaleAfter = 3 * kHeartbeatPeriod;
inline constexpr std::size_t kMaxDashboardInstances = 200;

// This instance's figures for its heartbeat, from `frame` (Frame::recent):
// {"calls_per_s":..,"failures_per_s":..,"rejections_per_s":..,
// "stale_per_s":..,"open_circuits":..,"circuits":..,"time_ms":..}, rates
// over DashboardStats::kRecent, time_ms its wall clock (shown, never used
// to age the entry: Redis' clock does that).
std::string HeartbeatJson(const Frame& frame, std::chrono::system_clock::time_point wall);

// One heartbeat read back from Redis: written by another process, so `json`
// is parsed as hostile input.
struct InstanceHeartbeat {
  std::string id;
  std::string json;
  Duration age = Duration::zero();
};

// {"instances":[{"id":..,"age_ms":..,"self":..,<HeartbeatJson's numbers,
// each a number or null>},...],"truncated":..,"max_instances":..,
// "heartbeat_ms":..}: only the known fields, only as numbers, whatever the
// heartbeat held; `self` is this instance's id.
std::string InstancesJson(const std::vector<InstanceHeartbeat>& instances, bool truncated,
                          std::string_view self);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_FLEET_ANSWERS_H_
