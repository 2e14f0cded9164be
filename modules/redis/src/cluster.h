// Redis Cluster routing for Connection (ConnectionOptions::cluster_nodes):
// the slot map read with CLUSTER SLOTS, the key a command is routed by, and
// the MOVED / ASK redirects.
//
// A cluster Connection is an ordinary connection to one node (the one that
// gave the map: keyless commands and subscriptions go there) plus, in a
// ClusterRoute, connections to the other primaries, made when a command
// first needs them. Everything a node sends is checked before it is
// trusted: a CLUSTER SLOTS reply of the wrong shape, slots out of range, or
// more nodes than kMaxClusterNodes are refused with a message that says so.
//
// Private to fusebox::redis. Not thread-safe (one per Connection).
#ifndef FUSEBOX_REDIS_SRC_CLUSTER_H_
#define FUSEBOX_REDIS_SRC_CLUSTER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/redis/connection.h"
#include "fusebox/redis/options.h"
#include "fusebox/redis/reply.h"
#include "fusebox/result.h"

namespace fusebox::redis::internal {

inline constexpr std::size_t kClusterSlots = 16384;
// Distinct primaries a slot map may name; a larger map is refused.
inline constexpr std::size_t kMaxClusterNodes = 1024;

// Which primary serves each of the 16384 slots.
class SlotMap {
 public:
  // Parses a CLUSTER SLOTS reply. `asked` is the node that answered: a
  // range whose host is empty (Redis' "the endpoint you asked") is served
  // there. A range whose endpoint is "?" (unknown) is left unserved.
  // kInternal naming what is wrong for any other shape.
  static Result<SlotMap> Parse(const Reply& reply, const NodeAddress& asked);

  // The primary serving `slot`, or null when none does.
  const NodeAddress* Owner(std::uint16_t slot) const;
  // MOVED: `slot` is now served by `node`. False when that would make the
  // map name more than kMaxClusterNodes primaries (it is then unchanged).
  bool Assign(std::uint16_t slot, const NodeAddress& node);
  // The distinct primaries, in the order first seen.
  const std::vector<NodeAddress>& nodes() const { return nodes_; }
  bool empty() const { return nodes_.empty(); }

 private:
  static constexpr std::uint16_t kNone = 0xFFFF;
  // The index of `node` in nodes_, added when new; nullopt when full.
  std::optional<std::uint16_t> IndexOf(const NodeAddress& node);

  std::vector<NodeAddress> nodes_;
  std::vector<std::uint16_t> owner_ = std::vector<std::uint16_t>(kClusterSlots, kNone);
};

// The key a command is routed by: argument 1 of the single-key commands the
// stores send (GET, SET, DEL, PTTL, the hash commands, ...), the first key of
// EVAL / EVALSHA, or nullopt for keyless commands (PING, AUTH, PUBLISH, WAIT)
// and commands this routing does not know.
std::optional<std::string_view> RoutingKey(std::span<const std::string_view> args);

// ASCII case-insensitive equality, for command names.
bool EqualsNoCase(std::string_view a, std::string_view b);

// A MOVED or ASK error reply: "MOVED 3999 127.0.0.1:6381".
struct Redirect {
  bool ask = false;
  std::uint16_t slot = 0;
  NodeAddress node;
};
// The redirect `reply` asks for, or nullopt when it is not one (or is
// malformed: a slot out of range, no port).
std::optional<Redirect> ParseRedirect(const Reply& reply);

// What a cluster Connection keeps besides its own socket.
struct ClusterRoute {
  SlotMap map;
  // Connections to the other primaries, by endpoint ("host:port").
  std::map<std::string, std::unique_ptr<Connection>> nodes;
  // Where the last keyed command went (WAIT follows it).
  std::optional<NodeAddress> last_node;
  // Set by a MOVED: the map is re-read from the connected node before the
  // next keyed command; at most once per kRefreshInterval once a MOVED has
  // already had it re-read (refreshed_for_moved; a connect clears it).
  bool stale = false;
  bool refreshed_for_moved = false;
  TimePoint refreshed_at{};
  // Which seed the next connect asks first.
  std::size_t preferred = 0;
  // MOVED and ASK replies followed, for tests and stats.
  std::int64_t redirects = 0;
};

inline constexpr Duration kRefreshInterval = std::chrono::seconds(1);

}  // namespace fusebox::redis::internal

#endif  // FUSEBOX_REDIS_SRC_CLUSTER_H_
