// RedisSharedState::ListFleet(): the fleet's OPEN circuits and overrides as
// Redis holds them, for an operator's view (the gateway's
// /admin/circuits?scope=fleet and its dashboard).
//
// Bounded three ways: SCAN with COUNT (Redis does a bounded amount of work
// per call, never a KEYS), at most kMaxFleetScanSteps calls, and at most
// `max_circuits` circuits read; the caller's budget bounds the whole.
#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "fusebox/redis/shared_state.h"
#include "src/guarded_client.h"

namespace fusebox::redis {
namespace {

constexpr std::string_view kScanCount = "512";

// The circuit id of `key` ("<prefix>{C}:open", ":trip" or ":override"), or
// empty for any other key under the prefix (a lease, a snapshot).
std::string CircuitOf(std::string_view key, std::string_view prefix) {
  if (!key.starts_with(prefix)) return {};
  key.remove_prefix(prefix.size());
  if (!key.starts_with('{')) return {};
  for (std::string_view suffix : {"}:open", "}:trip", "}:override"}) {
    if (key.size() > suffix.size() + 1 && key.ends_with(suffix)) {
      return std::string(key.substr(1, key.size() - suffix.size() - 1));
    }
  }
  return {};
}

}  // namespace

Result<FleetListing> RedisSharedState::ListFleet(std::size_t max_circuits, Duration budget) {
  max_circuits = std::min(max_circuits, kMaxFleetCircuits);
  const std::string& prefix = scripts_.keyspace().prefix();
  // '*', '?', '[' and '\' in the prefix are glob characters: escaped.
  std::string pattern;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
    pattern += c;
  }
  pattern += "{*";
  // Each command is bounded by the command timeout (and the budget, when
  // shorter); the budget also ends the walk: what was read by then is
  // answered, marked truncated.
  const TimePoint now = SystemClock().Now();
  const TimePoint deadline = budget >= TimePoint::max() - now ? TimePoint::max() : now + budget;
  const auto out_of_time = [&] { return SystemClock().Now() >= deadline; };
  return client_->Run<FleetListing>(
      [&](Connection& conn) -> Result<FleetListing> {
        FleetListing out;
        std::set<std::string> found;
        std::string cursor = "0";
        int steps = 0;
        do {
          if (++steps > kMaxFleetScanSteps || found.size() >= max_circuits || out_of_time()) {
            out.truncated = true;
            break;
          }
          Result<Reply> r = conn.Command({"SCAN", cursor, "MATCH", pattern, "COUNT", kScanCount});
          if (!r) return std::move(r).error();
          if (r->is_error()) return conn.ErrorReplyStatus("SCAN", *r);
          if (!r->is_array() || r->elements.size() != 2 || !r->elements[1].is_array()) {
            return Status(StatusCode::kInternal, "redis: SCAN: unexpected reply");
          }
          cursor = r->elements[0].str;
          for (const Reply& key : r->elements[1].elements) {
            std::string circuit = CircuitOf(key.str, prefix);
            if (circuit.empty() || found.contains(circuit)) continue;
            if (found.size() >= max_circuits) {
              out.truncated = true;
              break;
            }
            found.insert(std::move(circuit));
          }
        } while (cursor != "0");
        for (const std::string& circuit : found) {
          if (out_of_time()) {
            out.truncated = true;
            break;
          }
          Result<ReadResult> view = scripts_.Read(conn, circuit);
          if (!view) {
            if (view.error().code() == StatusCode::kInvalidArgument) continue;  // not an id
            return std::move(view).error();
          }
          // A key may have expired between the scan and the read.
          if (view->state == ReadResult::State::kClosed && !view->override_in_force) continue;
          out.circuits.push_back({circuit, *std::move(view)});
        }
        return out;
      },
      budget);
}

}  // namespace fusebox::redis
