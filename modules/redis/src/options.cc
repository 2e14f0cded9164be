#include "fusebox/redis/options.h"

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>

#include "fusebox/config_names.h"

namespace fusebox::redis {
namespace {

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";

Status UrlError(std::string_view what) {
  return Status::InvalidArgument("redis URL: " + std::string(what));
}

// Digits only, no sign, no overflow past `max`.
std::optional<std::int64_t> ParseDecimal(std::string_view s, std::int64_t max) {
  if (s.empty() || s.size() > 18) return std::nullopt;
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// RFC 3986 percent-decoding. nullopt on a malformed escape; the caller
// reports which component, never its text (it may be the password).
std::optional<std::string> PercentDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return std::nullopt;
    const int hi = HexValue(s[i + 1]);
    const int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

// "?connect_timeout=500ms&timeout=250ms": the two timeouts, as durations
// (ParseDuration's syntax). Any other parameter is refused rather than
// ignored; a value is echoed only for those two (never a secret).
Status ParseQuery(std::string_view query, ConnectionOptions& options) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = pair.find('=');
    const std::string_view name = pair.substr(0, eq);
    Duration* field = nullptr;
    if (name == "connect_timeout") {
      field = &options.connect_timeout;
    } else if (name == "timeout") {
      field = &options.command_timeout;
    } else {
      return UrlError(
          "unknown query parameter (expected connect_timeout or timeout, e.g. "
          "?connect_timeout=500ms&timeout=250ms)");
    }
    if (eq == std::string_view::npos) {
      return UrlError("query parameter " + std::string(name) + " needs a value");
    }
    const std::string_view value = pair.substr(eq + 1);
    Result<Duration> d = ParseDuration(value);
    if (!d || *d <= Duration::zero()) {
      return UrlError("query parameter " + std::string(name) +
                      ": expected a positive duration such as 250ms, got \"" +
                      std::string(value.substr(0, 32)) + "\"");
    }
    *field = *d;
  }
  return Status();
}

}  // namespace

std::string ConnectionOptions::Endpoint() const {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string ConnectionOptions::Describe() const {
  std::string out(kScheme);
  if (!username.empty() || !password.empty()) {
    out += username;
    if (!password.empty()) out += ":***";
    out += "@";
  }
  out += Endpoint();
  out += "/" + std::to_string(db);
  return out;
}

Status ConnectionOptions::Validate() const {
  if (host.empty()) return Status::InvalidArgument("redis options: host is empty");
  if (port < 1 || port > 65535) {
    return Status::InvalidArgument("redis options: port " + std::to_string(port) +
                                   " is not in 1..65535");
  }
  if (db < 0) {
    return Status::InvalidArgument("redis options: db " + std::to_string(db) + " is negative");
  }
  if (connect_timeout <= Duration::zero()) {
    return Status::InvalidArgument("redis options: connect_timeout must be > 0");
  }
  if (command_timeout <= Duration::zero()) {
    return Status::InvalidArgument("redis options: command_timeout must be > 0");
  }
  if (!username.empty() && password.empty()) {
    return Status::InvalidArgument("redis options: a username needs a password");
  }
  return Status();
}

// Over 80 lines on purpose: one left-to-right pass over the URL (scheme,
// userinfo, host, port, database), each error naming its part and never
// echoing what may be a secret; its stages are marked where they begin.
Result<ConnectionOptions> ParseRedisUrl(std::string_view url) {
  if (url.starts_with(kTlsScheme)) {
    return UrlError(
        "rediss:// (TLS) is not supported: hiredis 0.14 has no TLS; use redis:// through a TLS "
        "tunnel such as stunnel");
  }
  if (!url.starts_with(kScheme)) {
    return UrlError("must start with redis://");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find('#') != std::string_view::npos) {
    return UrlError("a fragment (#...) is not supported");
  }
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  ConnectionOptions options;
  if (Status s = ParseQuery(query, options); !s.ok()) return s;

  // The authority ends at the first '/'; the userinfo ends at the last '@' in
  // it, so that an unencoded '@' in a password still parses (a '/' in a
  // password must be written %2F).
  std::string_view authority = rest;
  std::string_view path;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  std::string_view hostport = authority;
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    hostport = authority.substr(at + 1);
    const std::size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      // Most likely a password written without its leading ':': do not echo it.
      return UrlError(
          "the part before '@' has no ':'; write redis://:PASSWORD@host for a password "
          "alone or redis://USER:PASSWORD@host");
    }
    std::optional<std::string> user = PercentDecode(userinfo.substr(0, colon));
    if (!user) return UrlError("malformed percent-encoding in the user name");
    std::optional<std::string> password = PercentDecode(userinfo.substr(colon + 1));
    if (!password) return UrlError("malformed percent-encoding in the password");
    if (password->empty()) return UrlError("the password after ':' is empty");
    options.username = std::move(*user);
    options.password = std::move(*password);
  }

  std::string_view host = hostport;
  std::string_view port_text;
  bool has_port = false;
  if (hostport.starts_with('[')) {
    const std::size_t close = hostport.find(']');
    if (close == std::string_view::npos) return UrlError("'[' of an IPv6 host is not closed");
    host = hostport.substr(1, close - 1);
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return UrlError("unexpected text after the IPv6 host");
      port_text = after.substr(1);
      has_port = true;
    }
    for (char c : host) {
      if (HexValue(c) < 0 && c != ':' && c != '.') {
        return UrlError("the IPv6 host has a character other than hex digits, ':' and '.'");
      }
    }
  } else {
    const std::size_t colon = hostport.find(':');
    if (colon != std::string_view::npos) {
      host = hostport.substr(0, colon);
      port_text = hostport.substr(colon + 1);
      has_port = true;
    }
    for (char c : host) {
      if (!IsHostChar(c)) {
        return UrlError(
            "the host has a character other than letters, digits, '-', '.' and '_' (an IPv6 "
            "address goes in brackets)");
      }
    }
  }
  if (host.empty()) return UrlError("the host is empty");
  options.host = std::string(host);
  if (has_port) {
    // The port text is echoed only when it is a number: a password typed
    // where the port goes ("redis://host:s3cret") must not reach a log.
    const std::optional<std::int64_t> port = ParseDecimal(port_text, 65535);
    if (!port || *port == 0) {
      if (!port_text.empty() && ParseDecimal(port_text, INT64_MAX / 10)) {
        return UrlError("port " + std::string(port_text) + " is not in 1..65535");
      }
      return UrlError(port_text.empty() ? "the port after ':' is empty"
                                        : "the port is not a number in 1..65535");
    }
    options.port = static_cast<int>(*port);
  }
  if (!path.empty()) {
    const std::optional<std::int64_t> db = ParseDecimal(path, 1 << 20);
    if (!db) return UrlError("the path must be a database number (e.g. /0), not anything else");
    options.db = static_cast<int>(*db);
  }
  return options;
}

}  // namespace fusebox::redis
