// Redis Cluster: the slot map, the key of a command, and redirects.
#include "src/cluster.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <utility>

#include "fusebox/redis/keyspace.h"

namespace fusebox::redis {
namespace internal {
namespace {

constexpr std::size_t kMaxHostBytes = 255;

// An integer element of a CLUSTER SLOTS entry in [lo, hi].
std::optional<std::int64_t> IntegerIn(const Reply& r, std::int64_t lo, std::int64_t hi) {
  if (!r.is_integer() || r.integer < lo || r.integer > hi) return std::nullopt;
  return r.integer;
}

Status SlotsError(std::size_t entry, std::string_view what) {
  return Status::Internal("CLUSTER SLOTS: entry " + std::to_string(entry + 1) + ": " +
                          std::string(what));
}

}  // namespace

bool EqualsNoCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

std::optional<std::uint16_t> SlotMap::IndexOf(const NodeAddress& node) {
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].host == node.host && nodes_[i].port == node.port) {
      return static_cast<std::uint16_t>(i);
    }
  }
  if (nodes_.size() >= kMaxClusterNodes) return std::nullopt;
  nodes_.push_back(node);
  return static_cast<std::uint16_t>(nodes_.size() - 1);
}

// Over 40 lines on purpose: each check of a hostile reply says what it found.
Result<SlotMap> SlotMap::Parse(const Reply& reply, const NodeAddress& asked) {
  if (!reply.is_array())
    return Status::Internal("CLUSTER SLOTS: not an array: " + reply.ToString());
  if (reply.elements.size() > kClusterSlots) {
    return Status::Internal("CLUSTER SLOTS: " + std::to_string(reply.elements.size()) +
                            " ranges, more than there are slots");
  }
  SlotMap map;
  for (std::size_t i = 0; i < reply.elements.size(); ++i) {
    const Reply& entry = reply.elements[i];
    if (!entry.is_array() || entry.elements.size() < 3) {
      return SlotsError(i, "not [start, end, primary, ...]");
    }
    const std::optional<std::int64_t> start = IntegerIn(entry.elements[0], 0, kClusterSlots - 1);
    const std::optional<std::int64_t> end = IntegerIn(entry.elements[1], 0, kClusterSlots - 1);
    if (!start || !end || *start > *end) return SlotsError(i, "a slot range not in 0..16383");
    const Reply& primary = entry.elements[2];
    if (!primary.is_array() || primary.elements.size() < 2) {
      return SlotsError(i, "the primary is not [host, port, ...]");
    }
    const Reply& host = primary.elements[0];
    const std::optional<std::int64_t> port = IntegerIn(primary.elements[1], 1, 65535);
    if (!(host.is_string() || host.is_nil()) || host.str.size() > kMaxHostBytes || !port) {
      return SlotsError(i, "the primary's host or port is not usable");
    }
    if (host.str == "?") continue;  // Endpoint unknown: the range stays unserved.
    NodeAddress node{host.str.empty() ? asked.host : host.str, static_cast<int>(*port)};
    const std::optional<std::uint16_t> index = map.IndexOf(node);
    if (!index) {
      return Status::Internal("CLUSTER SLOTS: more than " + std::to_string(kMaxClusterNodes) +
                              " primaries");
    }
    std::fill(map.owner_.begin() + *start, map.owner_.begin() + *end + 1, *index);
  }
  return map;
}

const NodeAddress* SlotMap::Owner(std::uint16_t slot) const {
  if (slot >= kClusterSlots || owner_[slot] == kNone) return nullptr;
  return &nodes_[owner_[slot]];
}

bool SlotMap::Assign(std::uint16_t slot, const NodeAddress& node) {
  if (slot >= kClusterSlots) return false;
  const std::optional<std::uint16_t> index = IndexOf(node);
  if (!index) return false;
  owner_[slot] = *index;
  return true;
}

std::optional<std::string_view> RoutingKey(std::span<const std::string_view> args) {
  // The single-key commands of this module's stores (and the usual reads and
  // writes a caller may add); anything else is sent where the map came from.
  static constexpr std::string_view kKeyFirst[] = {
      "GET",    "SET",   "DEL",  "UNLINK",  "EXISTS",  "PTTL",    "TTL",     "PEXPIRE",
      "EXPIRE", "TYPE",  "INCR", "INCRBY",  "DECR",    "GETDEL",  "HGET",    "HSET",
      "HDEL",   "HMGET", "HLEN", "HGETALL", "HSCAN",   "HINCRBY", "HEXISTS", "ZADD",
      "ZRANGE", "ZREM",  "SADD", "SREM",    "SMEMBERS"};
  if (args.empty()) return std::nullopt;
  if (EqualsNoCase(args[0], "EVALSHA") || EqualsNoCase(args[0], "EVAL")) {
    if (args.size() < 4) return std::nullopt;
    int numkeys = 0;
    const auto [end, ec] =
        std::from_chars(args[2].data(), args[2].data() + args[2].size(), numkeys);
    if (ec != std::errc() || end != args[2].data() + args[2].size() || numkeys < 1) {
      return std::nullopt;
    }
    return args[3];
  }
  if (args.size() < 2) return std::nullopt;
  for (std::string_view name : kKeyFirst) {
    if (EqualsNoCase(args[0], name)) return args[1];
  }
  return std::nullopt;
}

std::optional<Redirect> ParseRedirect(const Reply& reply) {
  if (!reply.is_error()) return std::nullopt;
  Redirect out;
  std::string_view text = reply.str;
  if (text.starts_with("MOVED ")) {
    text.remove_prefix(6);
  } else if (text.starts_with("ASK ")) {
    out.ask = true;
    text.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  const std::string_view slot_text = text.substr(0, space);
  const auto [slot_end, slot_ec] =
      std::from_chars(slot_text.data(), slot_text.data() + slot_text.size(), slot);
  if (slot_ec != std::errc() || slot_end != slot_text.data() + slot_text.size() ||
      slot >= kClusterSlots) {
    return std::nullopt;
  }
  out.slot = static_cast<std::uint16_t>(slot);
  const std::string_view endpoint = text.substr(space + 1);
  const std::size_t colon = endpoint.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon > kMaxHostBytes) return std::nullopt;
  std::string_view host = endpoint.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  const std::string_view port_text = endpoint.substr(colon + 1);
  int port = 0;
  const auto [port_end, port_ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (port_ec != std::errc() || port_end != port_text.data() + port_text.size() || port < 1 ||
      port > 65535 || host.empty()) {
    return std::nullopt;
  }
  out.node = NodeAddress{std::string(host), port};
  return out;
}

}  // namespace internal
}  // namespace fusebox::redis
