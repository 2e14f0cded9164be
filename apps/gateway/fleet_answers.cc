#include "apps/gateway/fleet_answers.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Bytes from outside that are not UTF-8 (a name, a reason) become U+FFFD
// rather than an exception.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

}  // namespace

AgeAndTtl SnapshotAgeAndTtl(Duration age, Duration fresh_for) {
  const seconds lifetime = std::chrono::floor<seconds>(fresh_for);
  if (age <= fresh_for) {
    const seconds a = std::min(lifetime, std::chrono::floor<seconds>(age));
    return {.age = a, .ttl = (lifetime - a).count()};
  }
  const seconds a = std::max(lifetime + seconds(1), std::chrono::ceil<seconds>(age));
  return {.age = a, .ttl = (lifetime - a).count()};
}

std::optional<OverrideInfo> ForcedOpenOverride(Registry& registry, std::string_view key) {
  for (std::string_view circuit : {":transient", ":quota"}) {
    std::shared_ptr<CircuitBreaker> b = registry.Find(std::string(key) + std::string(circuit));
    if (b == nullptr) continue;
    if (std::optional<OverrideInfo> o = b->active_override()) {
      if (o->state == State::kForcedOpen) return o;
    }
  }
  return std::nullopt;
}

HttpResponse ForcedOpenResponse(const OverrideInfo& forced, std::string_view key, TimePoint now) {
  long long left = -1;  // until lifted
  if (forced.expires_at) {
    left = std::max<long long>(0, duration_cast<milliseconds>(*forced.expires_at - now).count());
  }
  const long long left_s = std::max<long long>(1, (left + 999) / 1000);
  std::string message =
      "the circuit is forced open by an operator (" + forced.actor + "): " + forced.reason;
  message += left < 0 ? "; until lifted" : "; for " + std::to_string(left_s) + " s more";
  Json err = {{"code", "CIRCUIT_FORCED_OPEN"},
              {"message", message},
              {"circuit", std::string(key)},
              {"circuit_open", true},
              {"reason", forced.reason},
              {"actor", forced.actor},
              {"expires_in_ms", left < 0 ? Json(nullptr) : Json(left)}};
  HttpResponse r;
  r.status = 503;
  if (left >= 0) {
    err["retry_after_seconds"] = left_s;
    r.headers.emplace_back("Retry-After", std::to_string(left_s));
  }
  r.body = Dump(Json{{"error", err}});
  return r;
}

std::string FleetEntriesJson(const FleetEntries& fleet, Registry& registry) {
  Json rows = Json::array();
  for (const FleetEntry& e : fleet.entries) {
    Json j = {{"name", e.circuit},
              {"state", e.state},
              {"remaining_ms", duration_cast<milliseconds>(e.remaining).count()},
              {"here", registry.Find(e.circuit) != nullptr}};
    if (e.override_in_force) {
      const SharedOverride& o = *e.override_in_force;
      const long long left = duration_cast<milliseconds>(o.expires_after).count();
      j["override"] = {{"state", std::string(SharedOverrideKindName(o.kind))},
                       {"reason", o.reason},
                       {"actor", o.actor},
                       {"expires_in_ms", left > 0 ? Json(left) : Json(nullptr)}};
    } else {
      j["override"] = nullptr;
    }
    rows.push_back(std::move(j));
  }
  return Dump(Json{{"circuits", rows},
                   {"truncated", fleet.truncated},
                   {"max_entries", Handler::kMaxFleetEntries}});
}

namespace {

// The heartbeat's numbers, in the order the page shows them.
constexpr std::string_view kHeartbeatFields[] = {
    "calls_per_s",   "failures_per_s", "rejections_per_s", "stale_per_s",
    "open_circuits", "circuits",       "time_ms"};

}  // namespace

std::string HeartbeatJson(const Frame& frame, std::chrono::system_clock::time_point wall) {
  const double secs = std::chrono::duration<double>(DashboardStats::kRecent).count();
  const auto per_s = [secs](std::int64_t n) { return static_cast<double>(n) / secs; };
  return Dump(Json{{"calls_per_s", per_s(frame.recent.calls)},
                   {"failures_per_s", per_s(frame.recent.failures)},
                   {"rejections_per_s", per_s(frame.recent.rejections)},
                   {"stale_per_s", per_s(frame.recent.stale)},
                   {"open_circuits", frame.open_circuits},
                   {"circuits", frame.circuits},
                   {"time_ms", duration_cast<milliseconds>(wall.time_since_epoch()).count()}});
}

std::string InstancesJson(const std::vector<InstanceHeartbeat>& instances, bool truncated,
                          std::string_view self) {
  Json rows = Json::array();
  for (const InstanceHeartbeat& h : instances) {
    if (rows.size() >= kMaxDashboardInstances) {
      truncated = true;
      break;
    }
    // Not an exception on bad input: a discarded (null) value.
    const Json figures = Json::parse(h.json, nullptr, false);
    Json row = {{"id", h.id},
                {"age_ms", duration_cast<milliseconds>(h.age).count()},
                {"self", h.id == self}};
    for (std::string_view field : kHeartbeatFields) {
      const std::string name(field);
      const bool number = figures.is_object() && figures.contains(name) &&
                          figures[name].is_number() && std::isfinite(figures[name].get<double>());
      row[name] = number ? figures[name] : Json(nullptr);
    }
    rows.push_back(std::move(row));
  }
  return Dump(Json{{"instances", rows},
                   {"truncated", truncated},
                   {"max_instances", kMaxDashboardInstances},
                   {"heartbeat_ms", duration_cast<milliseconds>(kHeartbeatPeriod).count()},
                   {"stale_after_ms", duration_cast<milliseconds>(kHeartbeatStaleAfter).count()}});
}

}  // namespace fusebox::gateway
