#include "fusebox/redis/keyspace.h"

#include <charconv>
#include <chrono>
#include <optional>
#include <system_error>

namespace fusebox::redis {
namespace {

constexpr std::string_view kOpenWord = " open ";
constexpr std::string_view kClosedSuffix = " closed";

// Longest remaining time an event may carry: 10^12 ms (about 31 years), far
// above any TTL the scripts write and far below what a nanosecond Duration
// can hold (about 292 years).
constexpr std::int64_t kMaxEventPttlMs = 1'000'000'000'000;

std::optional<std::int64_t> ParseCount(std::string_view s) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return std::nullopt;
  return v;
}

Status EventError(std::string_view payload, std::string_view what) {
  std::string shown(payload.substr(0, 64));
  if (payload.size() > 64) shown += "...";
  return Status::InvalidArgument("redis event \"" + shown + "\": " + std::string(what));
}

}  // namespace

Keyspace::Keyspace() : Keyspace(std::string(kDefaultPrefix)) {}

Keyspace::Keyspace(std::string prefix) : prefix_(std::move(prefix)), channel_(prefix_ + "events") {}

Result<Keyspace> Keyspace::Create(std::string_view prefix) {
  if (prefix.find_first_of("{}") != std::string_view::npos) {
    return Status::InvalidArgument(
        "redis key prefix must not contain '{' or '}': the circuit id is the hash tag");
  }
  if (prefix.size() > 256) {
    return Status::InvalidArgument("redis key prefix is longer than 256 bytes");
  }
  return Keyspace(std::string(prefix));
}

CircuitKeys Keyspace::Keys(std::string_view circuit) const {
  std::string base = prefix_;
  base += '{';
  base += circuit;
  base += "}:";
  return CircuitKeys{.open = base + "open",
                     .trip = base + "trip",
                     .lease = base + "lease",
                     .overrides = base + "override"};
}

Status ValidateCircuitId(std::string_view circuit) {
  if (circuit.empty()) return Status::InvalidArgument("circuit id is empty");
  if (circuit.size() > kMaxCircuitIdBytes) {
    return Status::InvalidArgument("circuit id is longer than " +
                                   std::to_string(kMaxCircuitIdBytes) + " bytes");
  }
  if (circuit.front() == '}') {
    return Status::InvalidArgument(
        "circuit id must not start with '}' (it would make an empty Redis Cluster hash tag)");
  }
  return Status();
}

std::uint16_t KeySlot(std::string_view key) {
  // Only the part between the first '{' and the next '}' is hashed, when
  // that part is non-empty (Redis Cluster specification, "Hash tags").
  if (const std::size_t open = key.find('{'); open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  // CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection.
  std::uint16_t crc = 0;
  for (unsigned char byte : key) {
    crc ^= static_cast<std::uint16_t>(byte) << 8;
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc & 16383;
}

std::string HexEncode(std::string_view bytes) {
  if (bytes.empty()) return "-";
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 0xF];
  }
  return out;
}

std::optional<std::string> HexDecode(std::string_view hex) {
  if (hex == "-") return std::string();
  if (hex.empty() || hex.size() % 2 != 0) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  std::string out;
  out.reserve(hex.size() / 2);
  for (std::size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi << 4 | lo);
  }
  return out;
}

namespace {

std::optional<SharedOverride::Kind> OverrideKindFromName(std::string_view name) {
  for (auto k : {SharedOverride::Kind::kLifted, SharedOverride::Kind::kForcedOpen,
                 SharedOverride::Kind::kForcedClosed, SharedOverride::Kind::kDisabled,
                 SharedOverride::Kind::kMetricsOnly}) {
    if (SharedOverrideKindName(k) == name) return k;
  }
  return std::nullopt;
}

// "<C> override <KIND> <px_ms> <actor> <reason>", or nullopt when `payload`
// does not have exactly that shape (then it may be an open or closed event
// of a circuit whose id contains " override ").
std::optional<CircuitEvent> ParseOverrideEvent(std::string_view payload) {
  std::string_view rest = payload;
  std::string_view tokens[4];
  for (int i = 3; i >= 0; --i) {
    const std::size_t space = rest.rfind(' ');
    if (space == std::string_view::npos) return std::nullopt;
    tokens[i] = rest.substr(space + 1);
    rest = rest.substr(0, space);
  }
  constexpr std::string_view kWord = " override";
  if (!rest.ends_with(kWord)) return std::nullopt;
  CircuitEvent event;
  event.kind = CircuitEvent::Kind::kOverride;
  event.circuit = std::string(rest.substr(0, rest.size() - kWord.size()));
  const std::optional<SharedOverride::Kind> kind = OverrideKindFromName(tokens[0]);
  if (!kind) return std::nullopt;
  const std::optional<std::int64_t> px = ParseCount(tokens[1]);
  if (!px || *px > kMaxEventPttlMs) {
    return std::nullopt;
  }
  std::optional<std::string> actor = HexDecode(tokens[2]);
  std::optional<std::string> reason = HexDecode(tokens[3]);
  if (!actor || !reason) {
    return std::nullopt;
  }
  event.override_.kind = *kind;
  event.override_.expires_after = std::chrono::milliseconds(*px);
  event.override_.actor = std::move(*actor);
  event.override_.reason = std::move(*reason);
  return event;
}

}  // namespace

std::string FormatOverrideEvent(std::string_view circuit, const SharedOverride& o) {
  std::string out(circuit);
  out += " override ";
  out += SharedOverrideKindName(o.kind);
  out += ' ';
  out += std::to_string(std::chrono::ceil<std::chrono::milliseconds>(o.expires_after).count());
  out += ' ';
  out += HexEncode(o.actor);
  out += ' ';
  out += HexEncode(o.reason);
  return out;
}

Result<CircuitEvent> ParseEvent(std::string_view payload) {
  CircuitEvent event;
  if (std::optional<CircuitEvent> o = ParseOverrideEvent(payload)) {
    event = std::move(*o);
  } else if (payload.ends_with(kClosedSuffix)) {
    event.kind = CircuitEvent::Kind::kClosed;
    event.circuit = std::string(payload.substr(0, payload.size() - kClosedSuffix.size()));
  } else {
    // "<C> open <gen> <pttl_ms>": two numbers, then " open ", from the end.
    const std::size_t last_space = payload.rfind(' ');
    if (last_space == std::string_view::npos) {
      return EventError(payload,
                        "expected \"<circuit> open <gen> <pttl_ms>\" or \"<circuit> closed\"");
    }
    const std::optional<std::int64_t> pttl = ParseCount(payload.substr(last_space + 1));
    if (!pttl) return EventError(payload, "the remaining time is not a non-negative number");
    if (*pttl > kMaxEventPttlMs) {
      return EventError(payload, "the remaining time is above 10^12 ms");
    }
    const std::string_view head = payload.substr(0, last_space);
    const std::size_t gen_space = head.rfind(' ');
    if (gen_space == std::string_view::npos) {
      return EventError(payload, "expected \"<circuit> open <gen> <pttl_ms>\"");
    }
    const std::optional<std::int64_t> gen = ParseCount(head.substr(gen_space + 1));
    if (!gen) return EventError(payload, "the generation is not a non-negative number");
    // `head` up to and including the space before gen must end in " open ".
    const std::string_view with_word = payload.substr(0, gen_space + 1);
    if (!with_word.ends_with(kOpenWord)) {
      return EventError(payload, "expected the word \"open\" or \"closed\" after the circuit id");
    }
    event.kind = CircuitEvent::Kind::kOpen;
    event.circuit = std::string(with_word.substr(0, with_word.size() - kOpenWord.size()));
    event.gen = *gen;
    event.remaining = std::chrono::milliseconds(*pttl);
  }
  if (Status s = ValidateCircuitId(event.circuit); !s.ok()) {
    return EventError(payload, s.message());
  }
  return event;
}

std::string FormatOpenEvent(std::string_view circuit, std::int64_t gen, Duration remaining) {
  std::string out(circuit);
  out += kOpenWord;
  out += std::to_string(gen);
  out += ' ';
  out += std::to_string(std::chrono::ceil<std::chrono::milliseconds>(remaining).count());
  return out;
}

std::string FormatClosedEvent(std::string_view circuit) {
  return std::string(circuit) + std::string(kClosedSuffix);
}

}  // namespace fusebox::redis
