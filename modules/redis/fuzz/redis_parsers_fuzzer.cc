// libFuzzer target: fusebox::redis' parsers of outside input on any bytes:
// ParseRedisUrl (a URL from configuration or the environment) and ParseEvent
// (a payload from the shared Pub/Sub channel, which anyone with access to the
// Redis server can publish on). Properties checked beyond "no crash, no
// sanitizer report":
//   - a URL error never contains the secret placed where a password goes
//     (or where a mistyped one would land), on redis://, rediss:// and
//     redis-sentinel:// (whose sentinel_password is a secret too);
//   - a parsed URL passes Validate(), and its Describe() depends on neither
//     password;
//   - a parsed event has a valid circuit id and formats back to a payload
//     that parses to the same event.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/redis/keyspace.h"
#include "fusebox/redis/options.h"
#include "fusebox/redis/reply.h"
#include "src/cluster.h"

namespace {

// A reply tree decoded from fuzz bytes: each byte picks a type (integer,
// string, nil, array) and the next ones its value, arrays at most 4 deep and
// 64 wide, so that CLUSTER SLOTS shapes (and wrong ones) are all reachable.
fusebox::redis::Reply Decode(std::string_view& in, int depth) {
  using fusebox::redis::Reply;
  if (in.empty()) return Reply::Nil();
  const auto op = static_cast<unsigned char>(in.front());
  in.remove_prefix(1);
  const auto next = [&]() -> unsigned {
    if (in.empty()) return 0;
    const auto b = static_cast<unsigned char>(in.front());
    in.remove_prefix(1);
    return b;
  };
  switch (op % 4) {
    case 0: {
      const unsigned hi = next();
      const unsigned lo = next();
      return Reply::Integer(static_cast<std::int64_t>((hi << 8) | lo) - (op & 0x80 ? 70000 : 0));
    }
    case 1: {
      const std::size_t n = std::min<std::size_t>(next() % 24, in.size());
      Reply r = Reply::String(std::string(in.substr(0, n)));
      in.remove_prefix(n);
      return r;
    }
    case 2: {
      if (depth >= 4) return Reply::Nil();
      std::vector<Reply> elements(next() % 64);
      for (Reply& e : elements) e = Decode(in, depth + 1);
      return Reply::Array(std::move(elements));
    }
    default:
      return Reply::Nil();
  }
}

void CheckCluster(std::string_view text) {
  namespace internal = fusebox::redis::internal;
  if (auto r = internal::ParseRedirect(fusebox::redis::Reply::Error(std::string(text)))) {
    if (r->slot >= internal::kClusterSlots || r->node.host.empty() || r->node.port < 1 ||
        r->node.port > 65535) {
      std::abort();
    }
  }
  std::string_view in = text;
  const fusebox::redis::Reply slots = Decode(in, 0);
  fusebox::Result<internal::SlotMap> map = internal::SlotMap::Parse(slots, {"seed", 7000});
  if (!map) return;
  if (map->nodes().size() > internal::kMaxClusterNodes) std::abort();
  for (std::size_t slot = 0; slot < internal::kClusterSlots; ++slot) {
    const fusebox::redis::NodeAddress* owner = map->Owner(static_cast<std::uint16_t>(slot));
    if (owner != nullptr && (owner->host.empty() || owner->port < 1 || owner->port > 65535)) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // As a whole URL, and as the userinfo part of one.
  (void)fusebox::redis::ParseRedisUrl(text);
  const std::string secret = "Zq7-fuzz-secret-Zq7";
  // An input that spells the secret itself may see it echoed where a path is
  // (ca_file): only the secret this target places must never be shown.
  const bool input_has_secret = text.find(secret) != std::string_view::npos;
  for (const std::string& url :
       {"redis://:" + secret + "@" + std::string(text),
        "redis://" + std::string(text) + ":" + secret + "@h",
        "redis://h:" + std::string(text) + secret,
        "rediss://:" + secret + "@h/0?" + std::string(text),
        "rediss://:" + secret + std::string(text) + "@h",
        "redis-sentinel://:" + secret + "@" + std::string(text),
        "redis-sentinel://h:" + std::string(text) + secret + "/m",
        "redis-sentinel://" + std::string(text) + "/m?sentinel_password=" + secret,
        "redis-sentinel://h/m?sentinel_password=" + secret + std::string(text),
        "redis-cluster://:" + secret + "@" + std::string(text),
        "redis-cluster://h:" + std::string(text) + secret + ",h2"}) {
    fusebox::Result<fusebox::redis::ConnectionOptions> r = fusebox::redis::ParseRedisUrl(url);
    if (r.has_value()) {
      if (const fusebox::Status v = r->Validate(); !v.ok()) {
        if (v.ToString().find("cannot be read") == std::string::npos &&
            v.ToString().find("NUL byte") == std::string::npos &&
            v.ToString().find("go together") == std::string::npos) {
          std::abort();
        }
        if (!input_has_secret && v.ToString().find(secret) != std::string::npos) std::abort();
      }
      // The passwords never influence Describe(): only their presence does.
      fusebox::redis::ConnectionOptions other = *r;
      if (!other.password.empty()) other.password = "x";
      other.sentinel_password = "y";
      if (r->Describe() != other.Describe()) std::abort();
    } else if (!input_has_secret && r.error().ToString().find(secret) != std::string::npos) {
      std::abort();
    }
  }

  CheckCluster(text);

  fusebox::Result<fusebox::redis::CircuitEvent> e = fusebox::redis::ParseEvent(text);
  if (e.has_value()) {
    if (!fusebox::redis::ValidateCircuitId(e->circuit).ok()) std::abort();
    std::string again;
    switch (e->kind) {
      case fusebox::redis::CircuitEvent::Kind::kOpen:
        again = fusebox::redis::FormatOpenEvent(e->circuit, e->gen, e->remaining);
        break;
      case fusebox::redis::CircuitEvent::Kind::kClosed:
        again = fusebox::redis::FormatClosedEvent(e->circuit);
        break;
      case fusebox::redis::CircuitEvent::Kind::kOverride:
        again = fusebox::redis::FormatOverrideEvent(e->circuit, e->override_);
        break;
    }
    fusebox::Result<fusebox::redis::CircuitEvent> back = fusebox::redis::ParseEvent(again);
    if (!back.has_value() || !(*back == *e)) std::abort();
  }
  return 0;
}
