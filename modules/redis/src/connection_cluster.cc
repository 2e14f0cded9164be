// Connection's cluster mode (ConnectionOptions::cluster_nodes): the connect
// that reads the slot map, and the routing of each command to its slot's
// primary. The map and the routing rules are in cluster.{h,cc}.
#include <algorithm>
#include <charconv>
#include <string>
#include <utility>

#include "fusebox/redis/connection.h"
#include "fusebox/redis/keyspace.h"
#include "src/cluster.h"

namespace fusebox::redis {

std::int64_t Connection::cluster_redirects() const {
  return cluster_ == nullptr ? 0 : cluster_->redirects;
}

Status Connection::OpenCluster() {
  internal::ClusterRoute& route = *cluster_;
  const TimePoint deadline = SystemClock().Now() + options_.connect_timeout;  // real I/O
  // The seeds, then the primaries of the last map: a cluster whose seeds
  // have all been replaced is still found.
  std::vector<NodeAddress> candidates = options_.cluster_nodes;
  for (const NodeAddress& node : route.map.nodes()) {
    if (candidates.size() >= kMaxClusterSeeds * 2) break;
    if (std::none_of(candidates.begin(), candidates.end(), [&](const NodeAddress& c) {
          return c.host == node.host && c.port == node.port;
        })) {
      candidates.push_back(node);
    }
  }
  const std::size_t n = candidates.size();
  std::string tried;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (route.preferred + k) % n;
    if (deadline - SystemClock().Now() <= Duration::zero()) {
      tried += (tried.empty() ? "" : "; ") + std::string("out of time (connect timeout ") +
               std::to_string(
                   std::chrono::ceil<std::chrono::milliseconds>(options_.connect_timeout).count()) +
               " ms)";
      break;
    }
    options_.host = candidates[i].host;
    options_.port = candidates[i].port;
    Status s = Handshake(deadline - SystemClock().Now());
    if (s.ok()) {
      io_timeout_ = deadline - SystemClock().Now();
      s = io_timeout_ > Duration::zero()
              ? LoadSlotMap()
              : Error(StatusCode::kUnavailable, "CLUSTER SLOTS", "out of time");
      if (transport_ != nullptr) io_timeout_ = options_.command_timeout;
    }
    if (s.ok()) {
      route.preferred = i;
      route.refreshed_for_moved = false;
      return s;
    }
    Drop();
    tried += (tried.empty() ? "" : "; ") + std::string(s.message());
  }
  route.preferred = (route.preferred + 1) % n;
  options_.host.clear();  // Endpoint() names the seeds again.
  broken_reason_ = "no cluster node gave a slot map";
  return Status::Unavailable("redis " + options_.Endpoint() + ": no node gave a slot map (" +
                             tried + ")");
}

Status Connection::LoadSlotMap() {
  static constexpr std::string_view kClusterSlots[] = {"CLUSTER", "SLOTS"};
  Result<Reply> r = CommandHere(kClusterSlots);
  if (!r) return r.error();
  if (r->is_error()) {
    return Error(StatusCode::kUnavailable, "CLUSTER SLOTS",
                 r->str + (r->str.find("cluster support disabled") != std::string::npos
                               ? " (not a cluster node: use redis:// for a single server)"
                               : ""));
  }
  Result<internal::SlotMap> map = internal::SlotMap::Parse(*r, {options_.host, options_.port});
  if (!map) return Break("CLUSTER SLOTS", map.error().message());
  if (map->empty()) return Break("CLUSTER SLOTS", "no slot is served (cluster not set up?)");
  cluster_->map = std::move(*map);
  cluster_->stale = false;
  cluster_->refreshed_at = SystemClock().Now();
  return Status();
}

Result<Connection*> Connection::NodeConnection(const NodeAddress& node) {
  if (node.host == options_.host && node.port == options_.port) return this;
  const std::string endpoint = node.Endpoint();
  auto& nodes = cluster_->nodes;
  auto it = nodes.find(endpoint);
  if (it != nodes.end() && !it->second->broken()) {
    if (Status s = it->second->SetCommandTimeout(io_timeout_); !s.ok()) return s;
    return it->second.get();
  }
  // Redirects name nodes a hostile server chose: the set stays bounded.
  if (nodes.size() >= internal::kMaxClusterNodes) nodes.clear();
  ConnectionOptions at = options_;
  at.cluster_nodes.clear();
  at.host = node.host;
  at.port = node.port;
  at.connect_timeout = std::min(options_.connect_timeout, io_timeout_);
  at.command_timeout = io_timeout_;
  Result<std::unique_ptr<Connection>> conn = Connect(std::move(at));
  if (!conn) {
    (void)Break("connect " + endpoint, conn.error().message());
    return conn.error();
  }
  Connection* out = conn->get();
  nodes[endpoint] = std::move(*conn);
  return out;
}

Result<std::vector<Reply>> Connection::SendTo(
    Connection& node, std::span<const std::vector<std::string_view>> commands, bool asking) {
  std::vector<std::vector<std::string_view>> with_asking;
  if (asking) {
    // ASKING holds for the next command only.
    for (const std::vector<std::string_view>& c : commands) {
      with_asking.push_back({"ASKING"});
      with_asking.push_back(c);
    }
    commands = with_asking;
  }
  Result<std::vector<Reply>> r = node.PipelineHere(commands);
  if (!r) {
    // A failed node breaks the whole connection: the next Reconnect() reads
    // the map afresh.
    if (&node != this) {
      const bool ran_out = node.broken_by_timeout_;  // Break() frees `node`.
      (void)Break("pipeline", r.error().message());
      broken_by_timeout_ = ran_out;
    }
    return r;
  }
  if (!asking) return r;
  std::vector<Reply> replies;
  for (std::size_t i = 0; i < r->size(); i += 2) {
    // A refused ASKING stands for the command's reply.
    replies.push_back(std::move((*r)[(*r)[i].is_error() ? i : i + 1]));
  }
  return replies;
}

std::string Connection::ServerOf(std::string_view key) const {
  if (cluster_ == nullptr) return options_.Endpoint();
  const NodeAddress* owner = cluster_->map.Owner(KeySlot(key));
  return owner == nullptr ? std::string() : owner->Endpoint();
}

Result<Reply> Connection::CommandBeside(std::string_view key,
                                        std::span<const std::string_view> args) {
  if (cluster_ == nullptr || args.empty() || transport_ == nullptr || subscribed_ ||
      pending_ != 0) {
    return Command(args);  // Its checks name what is wrong.
  }
  const std::vector<std::string_view> command(args.begin(), args.end());
  Result<std::vector<Reply>> r = Route(std::span(&command, 1), KeySlot(key));
  if (!r) return std::move(r).error();
  return std::move(r->front());
}

Result<std::vector<Reply>> Connection::Route(
    std::span<const std::vector<std::string_view>> commands, std::optional<std::uint16_t> beside) {
  internal::ClusterRoute& route = *cluster_;
  std::optional<std::uint16_t> slot = beside;
  for (const std::vector<std::string_view>& c : commands) {
    if (beside) break;
    const std::optional<std::string_view> key = internal::RoutingKey(c);
    if (!key) continue;
    const std::uint16_t s = KeySlot(*key);
    if (slot && *slot != s) {
      return Error(StatusCode::kInvalidArgument, "pipeline",
                   "its keys are in different cluster slots (" + std::to_string(*slot) + ", " +
                       std::to_string(s) + "); send them separately");
    }
    slot = s;
  }
  if (!slot) {
    // WAIT goes where the last write went; anything else stays here.
    if (!route.last_node) return PipelineHere(commands);
    Result<Connection*> node = NodeConnection(*route.last_node);
    if (!node) return node.error();
    return SendTo(**node, commands, false);
  }
  // A MOVED after a map read at connect has the map read at once; after a
  // map read for an earlier MOVED, at most once per kRefreshInterval, so that
  // nodes that disagree cannot make every command read the map.
  if (route.stale && (!route.refreshed_for_moved ||
                      SystemClock().Now() - route.refreshed_at >= internal::kRefreshInterval)) {
    if (Status s = LoadSlotMap(); !s.ok()) return s;
    route.refreshed_for_moved = true;
  }
  const NodeAddress* owner = route.map.Owner(*slot);
  if (owner == nullptr) {
    return Error(StatusCode::kUnavailable, "route",
                 "slot " + std::to_string(*slot) + " is served by no node of the cluster's map");
  }
  NodeAddress target = *owner;
  bool asking = false;
  for (int hop = 0;; ++hop) {
    Result<Connection*> node = NodeConnection(target);
    if (!node) return node.error();
    Result<std::vector<Reply>> r = SendTo(**node, commands, asking);
    if (!r) return r;
    // The keyed commands share a slot: the first reply says for all.
    const std::optional<internal::Redirect> redirect =
        r->empty() ? std::nullopt : internal::ParseRedirect(r->front());
    if (!redirect) {
      route.last_node = target;
      return r;
    }
    if (hop >= kMaxRedirects) {
      return Error(StatusCode::kUnavailable, "route",
                   "more than " + std::to_string(kMaxRedirects) + " MOVED/ASK redirects for slot " +
                       std::to_string(*slot) + " (last: " + r->front().str + ")");
    }
    ++route.redirects;
    if (!redirect->ask) {
      (void)route.map.Assign(redirect->slot, redirect->node);
      route.stale = true;
    }
    asking = redirect->ask;
    target = redirect->node;
  }
}

Result<Reply> Connection::ScanCluster(std::span<const std::string_view> args) {
  if (args.size() < 2) return CommandHere(args);
  // "0" starts at the first primary; "<node>:<cursor>" goes on there.
  std::size_t index = 0;
  std::string_view cursor = args[1];
  if (const std::size_t colon = cursor.find(':'); colon != std::string_view::npos) {
    const auto [end, ec] = std::from_chars(cursor.data(), cursor.data() + colon, index);
    if (ec != std::errc() || end != cursor.data() + colon) {
      return Error(StatusCode::kInvalidArgument, "SCAN", "not a cluster cursor");
    }
    cursor.remove_prefix(colon + 1);
  }
  const std::vector<NodeAddress> nodes = cluster_->map.nodes();
  if (index >= nodes.size()) return Reply::Array({Reply::String("0"), Reply::Array({})});
  Result<Connection*> node = NodeConnection(nodes[index]);
  if (!node) return node.error();
  std::vector<std::string_view> command(args.begin(), args.end());
  command[1] = cursor;
  Result<std::vector<Reply>> r = SendTo(**node, std::span(&command, 1), false);
  if (!r) return std::move(r).error();
  Reply reply = std::move(r->front());
  if (!reply.is_array() || reply.elements.size() != 2 || !reply.elements[0].is_string()) {
    return reply;  // An error reply, or a shape the caller reports.
  }
  std::string& next = reply.elements[0].str;
  if (next != "0") {
    next = std::to_string(index) + ":" + next;
  } else if (index + 1 < nodes.size()) {
    next = std::to_string(index + 1) + ":0";
  }
  return reply;
}

}  // namespace fusebox::redis
