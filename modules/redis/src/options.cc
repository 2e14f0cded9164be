#include "fusebox/redis/options.h"

#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "fusebox/config_names.h"

namespace fusebox::redis {
namespace {

constexpr std::string_view kScheme = "redis://";
constexpr std::string_view kTlsScheme = "rediss://";
constexpr std::string_view kSentinelScheme = "redis-sentinel://";
constexpr std::string_view kClusterScheme = "redis-cluster://";
constexpr int kSentinelPort = 26379;
constexpr int kRedisPort = 6379;

enum class Scheme { kPlain, kTls, kSentinel, kCluster };

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

bool IsKeyChar(char c) { return (c >= 'a' && c <= 'z') || c == '_'; }

// A query key is echoed only when it looks like one (lower-case letters and
// '_', at most 32): never a stray piece of a secret.
std::string ShownKey(std::string_view key) {
  if (key.empty() || key.size() > 32) return "a query parameter";
  for (char c : key) {
    if (!IsKeyChar(c)) return "a query parameter";
  }
  return "query parameter '" + std::string(key) + "'";
}

// A timeout value is echoed only when it is shaped like a duration (a sign,
// digits and '.', then at most two letters of a unit: "0ms", "-5s", "1.5s"):
// a mistyped password can land in the query ("redis://h:pa?connect_timeout=
// ss3cret"), and its text must not reach a log.
bool LooksLikeDuration(std::string_view v) {
  std::size_t i = (!v.empty() && (v[0] == '+' || v[0] == '-')) ? 1 : 0;
  const std::size_t digits_start = i;
  while (i < v.size() && ((v[i] >= '0' && v[i] <= '9') || v[i] == '.')) ++i;
  if (i == digits_start || i > 24) return false;
  const std::size_t letters = v.size() - i;
  if (letters > 2) return false;
  for (; i < v.size(); ++i) {
    if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z'))) return false;
  }
  return true;
}

std::optional<bool> ParseBool(std::string_view v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return std::nullopt;
}

// "key=value&key=value" into `options` (the TLS settings, the timeouts, the
// sentinels' password). Values are percent-decoded; paths are not secrets and
// may be echoed, a password never is.
Status ApplyQuery(std::string_view query, Scheme scheme, ConnectionOptions& options) {
  constexpr std::size_t kCount = 9;
  constexpr std::string_view kKeys[kCount] = {
      "ca_file", "client_cert",       "client_key",    "insecure_skip_verify", "connect_timeout",
      "timeout", "sentinel_password", "wait_replicas", "wait_timeout"};
  bool seen[kCount] = {};
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    const std::size_t eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    if (eq == std::string_view::npos) return UrlError(ShownKey(key) + " has no '=value'");
    std::size_t index = 0;
    while (index < kCount && kKeys[index] != key) ++index;
    if (index == kCount) {
      return UrlError("unknown " + ShownKey(key) +
                      " (known: ca_file, client_cert, client_key, insecure_skip_verify, "
                      "connect_timeout, timeout, sentinel_password, wait_replicas, "
                      "wait_timeout)");
    }
    if (seen[index]) return UrlError(ShownKey(key) + " is given twice");
    seen[index] = true;
    if (index == 7) {
      const std::optional<std::int64_t> n = ParseDecimal(pair.substr(eq + 1), kMaxWaitReplicas);
      if (!n) {
        return UrlError(ShownKey(key) + ": expected an integer in 0.." +
                        std::to_string(kMaxWaitReplicas));
      }
      options.wait_replicas = static_cast<int>(*n);
      continue;
    }
    if (index == 4 || index == 5 || index == 8) {
      // The timeouts, as durations (ParseDuration's syntax); a value is
      // echoed only for these, and only when shaped like a duration
      // (LooksLikeDuration: a mistyped password may land here).
      const std::string_view value = pair.substr(eq + 1);
      Result<Duration> d = ParseDuration(value);
      if (!d || *d <= Duration::zero()) {
        std::string message = ShownKey(key) + ": expected a positive duration such as 250ms";
        if (LooksLikeDuration(value)) message += ", got \"" + std::string(value) + "\"";
        return UrlError(message);
      }
      if (index == 8 && *d > kMaxWaitTimeout) {
        return UrlError(ShownKey(key) + ": at most 10s (it holds the store's thread)");
      }
      (index == 4   ? options.connect_timeout
       : index == 5 ? options.command_timeout
                    : options.wait_timeout) = *d;
      continue;
    }
    if (index == 6 && scheme != Scheme::kSentinel) {
      return UrlError(ShownKey(key) + " is a Sentinel setting: it needs redis-sentinel://");
    }
    if (index < 4 && (scheme == Scheme::kSentinel || scheme == Scheme::kCluster)) {
      return UrlError(ShownKey(key) + " is a TLS setting: not supported on " +
                      (scheme == Scheme::kSentinel ? "redis-sentinel://" : "redis-cluster://"));
    }
    if (index < 4 && scheme != Scheme::kTls) {
      return UrlError(ShownKey(key) + " is a TLS setting: it needs rediss://");
    }
    std::optional<std::string> value = PercentDecode(pair.substr(eq + 1));
    if (!value) return UrlError("malformed percent-encoding in " + ShownKey(key));
    if (value->empty()) return UrlError(ShownKey(key) + " is empty");
    if (index == 3) {
      const std::optional<bool> b = ParseBool(*value);
      if (!b) return UrlError("insecure_skip_verify must be true or false");
      options.insecure_skip_verify = *b;
    } else {
      (index == 0   ? options.ca_file
       : index == 1 ? options.client_cert
       : index == 2 ? options.client_key
                    : options.sentinel_password) = std::move(*value);
    }
  }
  return Status();
}

// OK when `path` can be opened for reading; else names `key` and the file.
Status CheckReadable(std::string_view key, const std::string& path) {
  if (path.find('\0') != std::string::npos) {
    return Status::InvalidArgument("redis options: " + std::string(key) + " has a NUL byte");
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    return Status::InvalidArgument("redis options: " + std::string(key) + " '" + path +
                                   "' cannot be read");
  }
  std::fclose(f);
  return Status();
}

bool IsHostChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

bool IsMasterNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_';
}

Status CheckMasterName(std::string_view name, std::string_view what) {
  if (name.empty()) return Status::InvalidArgument(std::string(what) + " is empty");
  if (name.size() > kMaxMasterNameLength) {
    return Status::InvalidArgument(std::string(what) + " is longer than " +
                                   std::to_string(kMaxMasterNameLength) + " characters");
  }
  for (char c : name) {
    // Not echoed: only names of the allowed characters would be safe to show.
    if (!IsMasterNameChar(c)) {
      return Status::InvalidArgument(std::string(what) +
                                     " has a character other than letters, digits, '.', '_' "
                                     "and '-'");
    }
  }
  return Status();
}

// A list of addresses (sentinels, cluster seeds): at most `max`, each with
// a host and a port in range; `what` names one ("sentinel").
template <typename Address>
Status CheckAddresses(const std::vector<Address>& list, std::size_t max, const std::string& what) {
  if (list.size() > max) {
    return Status::InvalidArgument("redis options: " + std::to_string(list.size()) + " " + what +
                                   "s, at most " + std::to_string(max));
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string which = "redis options: " + what + " " + std::to_string(i + 1) + ": ";
    if (list[i].host.empty()) return Status::InvalidArgument(which + "host is empty");
    if (list[i].port < 1 || list[i].port > 65535) {
      return Status::InvalidArgument(which + "port " + std::to_string(list[i].port) +
                                     " is not in 1..65535");
    }
  }
  return Status();
}

// The sentinel fields, when there are sentinels (host and port are then
// where the last connect found the primary, if it has run).
Status ValidateSentinels(const ConnectionOptions& o) {
  if (Status s = CheckAddresses(o.sentinels, kMaxSentinels, "sentinel"); !s.ok()) return s;
  return CheckMasterName(o.master_name, "redis options: master_name");
}

// The cluster fields, when there are cluster nodes.
Status ValidateCluster(const ConnectionOptions& o) {
  if (Status s = CheckAddresses(o.cluster_nodes, kMaxClusterSeeds, "cluster node"); !s.ok()) {
    return s;
  }
  if (!o.sentinels.empty()) {
    return Status::InvalidArgument("redis options: cluster_nodes and sentinels exclude each other");
  }
  if (o.db != 0) {
    return Status::InvalidArgument("redis options: db " + std::to_string(o.db) +
                                   ": a Redis Cluster has only database 0");
  }
  if (o.tls) return Status::InvalidArgument("redis options: TLS is not supported with a cluster");
  return Status();
}

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

}  // namespace

std::string SentinelAddress::Endpoint() const { return HostPort(host, port); }

std::string NodeAddress::Endpoint() const { return HostPort(host, port); }

std::string ConnectionOptions::Endpoint() const {
  if (!sentinels.empty() && host.empty()) return "sentinel master '" + master_name + "'";
  if (!cluster_nodes.empty() && host.empty()) {
    std::string out = "cluster " + cluster_nodes[0].Endpoint();
    if (cluster_nodes.size() > 1) {
      out += " (+" + std::to_string(cluster_nodes.size() - 1) + " seeds)";
    }
    return out;
  }
  return HostPort(host, port);
}

std::string ConnectionOptions::Describe() const {
  std::string out(!sentinels.empty()       ? kSentinelScheme
                  : !cluster_nodes.empty() ? kClusterScheme
                  : tls                    ? kTlsScheme
                                           : kScheme);
  if (!username.empty() || !password.empty()) {
    out += username;
    if (!password.empty()) out += ":***";
    out += "@";
  }
  if (!cluster_nodes.empty()) {
    for (std::size_t i = 0; i < cluster_nodes.size(); ++i) {
      if (i > 0) out += ',';
      out += cluster_nodes[i].Endpoint();
    }
  } else if (sentinels.empty()) {
    out += Endpoint();
  } else {
    for (std::size_t i = 0; i < sentinels.size(); ++i) {
      if (i > 0) out += ',';
      out += sentinels[i].Endpoint();
    }
    out += "/" + master_name;
  }
  if (cluster_nodes.empty()) out += "/" + std::to_string(db);
  char sep = '?';
  for (const auto& [key, value] :
       {std::pair<std::string_view, std::string_view>{"ca_file", ca_file},
        {"client_cert", client_cert},
        {"client_key", client_key}}) {
    if (value.empty()) continue;
    out += sep;
    out += key;
    out += '=';
    out += value;
    sep = '&';
  }
  if (insecure_skip_verify) {
    out += sep;
    out += "insecure_skip_verify=true";
    sep = '&';
  }
  if (wait_replicas > 0) {
    // Whether trips are acknowledged by replicas, in the store's
    // "redis_connected" line.
    out += sep;
    out += "wait_replicas=" + std::to_string(wait_replicas) + "&wait_timeout=" +
           std::to_string(std::chrono::ceil<std::chrono::milliseconds>(wait_timeout).count()) +
           "ms";
  }
  return out;
}

void ConnectionOptions::Warn(std::string_view event, std::string_view message) const {
  if (warn) {
    warn(event, message);
    return;
  }
  std::string line = "fusebox redis WARNING ";
  line += event;
  line += ": ";
  line += message;
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

Status ConnectionOptions::Validate() const {
  if (!cluster_nodes.empty()) {
    if (Status s = ValidateCluster(*this); !s.ok()) return s;
  }
  if (!cluster_nodes.empty() && host.empty()) {
    // The node to ask is found by each connect.
  } else if (sentinels.empty()) {
    if (!master_name.empty() || !sentinel_password.empty()) {
      return Status::InvalidArgument(
          "redis options: master_name and sentinel_password need sentinels");
    }
    if (host.empty()) return Status::InvalidArgument("redis options: host is empty");
    if (port < 1 || port > 65535) {
      return Status::InvalidArgument("redis options: port " + std::to_string(port) +
                                     " is not in 1..65535");
    }
  } else if (Status s = ValidateSentinels(*this); !s.ok()) {
    return s;
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
  if (wait_replicas < 0 || wait_replicas > kMaxWaitReplicas) {
    return Status::InvalidArgument("redis options: wait_replicas " + std::to_string(wait_replicas) +
                                   " is not in 0.." + std::to_string(kMaxWaitReplicas));
  }
  if (wait_timeout <= Duration::zero() || wait_timeout > kMaxWaitTimeout) {
    return Status::InvalidArgument("redis options: wait_timeout must be in (0, 10s]");
  }
  if (!username.empty() && password.empty()) {
    return Status::InvalidArgument("redis options: a username needs a password");
  }
  if (!tls) {
    for (const auto& [key, set] : {std::pair<std::string_view, bool>{"ca_file", !ca_file.empty()},
                                   {"client_cert", !client_cert.empty()},
                                   {"client_key", !client_key.empty()},
                                   {"insecure_skip_verify", insecure_skip_verify}}) {
      if (set) {
        return Status::InvalidArgument("redis options: " + std::string(key) +
                                       " is a TLS setting: it needs tls (rediss://)");
      }
    }
    return Status();
  }
  if (client_cert.empty() != client_key.empty()) {
    return Status::InvalidArgument(
        "redis options: client_cert and client_key go together (one is set, not the other)");
  }
  for (const auto& [key, path] :
       {std::pair<std::string_view, const std::string*>{"ca_file", &ca_file},
        {"client_cert", &client_cert},
        {"client_key", &client_key}}) {
    if (path->empty()) continue;
    if (Status s = CheckReadable(key, *path); !s.ok()) return s;
  }
  return Status();
}

namespace {

// The "[user]:password@" before the host(s), if any, into `options`; returns
// what follows it. The userinfo ends at the last '@', so that an unencoded
// '@' in a password still parses (a '/' in a password must be written %2F).
Result<std::string_view> TakeUserInfo(std::string_view authority, ConnectionOptions& options) {
  const std::size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return authority;
  const std::string_view userinfo = authority.substr(0, at);
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
  return authority.substr(at + 1);
}

// "host[:port]" or "[v6][:port]"; `what` starts each error ("" for the one
// host of redis://, "sentinel 2: " for an item of the sentinel list).
Result<SentinelAddress> ParseHostPort(std::string_view hostport, int default_port,
                                      const std::string& what) {
  std::string_view host = hostport;
  std::string_view port_text;
  bool has_port = false;
  if (hostport.starts_with('[')) {
    const std::size_t close = hostport.find(']');
    if (close == std::string_view::npos)
      return UrlError(what + "'[' of an IPv6 host is not closed");
    host = hostport.substr(1, close - 1);
    const std::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return UrlError(what + "unexpected text after the IPv6 host");
      port_text = after.substr(1);
      has_port = true;
    }
    for (char c : host) {
      if (HexValue(c) < 0 && c != ':' && c != '.') {
        return UrlError(what + "the IPv6 host has a character other than hex digits, ':' and '.'");
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
        return UrlError(what +
                        "the host has a character other than letters, digits, '-', '.' and '_' "
                        "(an IPv6 address goes in brackets)");
      }
    }
  }
  if (host.empty()) return UrlError(what + "the host is empty");
  SentinelAddress out{std::string(host), default_port};
  if (has_port) {
    // The port text is echoed only when it is a number: a password typed
    // where the port goes ("redis://host:s3cret") must not reach a log.
    const std::optional<std::int64_t> port = ParseDecimal(port_text, 65535);
    if (!port || *port == 0) {
      if (!port_text.empty() && ParseDecimal(port_text, INT64_MAX / 10)) {
        return UrlError(what + "port " + std::string(port_text) + " is not in 1..65535");
      }
      return UrlError(what + (port_text.empty() ? "the port after ':' is empty"
                                                : "the port is not a number in 1..65535"));
    }
    out.port = static_cast<int>(*port);
  }
  return out;
}

// "host:port,host:port" into options.sentinels (Sentinel) or
// options.cluster_nodes (Cluster).
Status ParseHostList(std::string_view list, Scheme scheme, ConnectionOptions& options) {
  const bool sentinel = scheme == Scheme::kSentinel;
  const std::size_t max = sentinel ? kMaxSentinels : kMaxClusterSeeds;
  const std::string what = sentinel ? "sentinel " : "cluster node ";
  for (std::size_t index = 1;; ++index) {
    const std::size_t comma = list.find(',');
    if (index > max) {
      return UrlError("more than " + std::to_string(max) +
                      (sentinel ? " sentinels" : " cluster nodes"));
    }
    Result<SentinelAddress> address =
        ParseHostPort(list.substr(0, comma), sentinel ? kSentinelPort : kRedisPort,
                      what + std::to_string(index) + ": ");
    if (!address) return address.error();
    if (sentinel) {
      options.sentinels.push_back(std::move(*address));
    } else {
      options.cluster_nodes.push_back({std::move(address->host), address->port});
    }
    if (comma == std::string_view::npos) return Status();
    list = list.substr(comma + 1);
  }
}

// The path of redis-sentinel://: "master[/db]".
Status ParseSentinelPath(std::string_view path, ConnectionOptions& options) {
  const std::size_t slash = path.find('/');
  const std::string_view name = path.substr(0, slash);
  if (name.empty()) {
    return UrlError("the master name is missing (redis-sentinel://host:26379/MASTER[/db])");
  }
  if (Status s = CheckMasterName(name, "the master name"); !s.ok()) {
    return UrlError(s.message());
  }
  options.master_name = std::string(name);
  if (slash == std::string_view::npos) return Status();
  const std::optional<std::int64_t> db = ParseDecimal(path.substr(slash + 1), 1 << 20);
  if (!db) return UrlError("after the master name the path must be a database number (e.g. /0)");
  options.db = static_cast<int>(*db);
  return Status();
}

}  // namespace

// One left-to-right pass over the URL (scheme, query, userinfo, host(s),
// path), each error naming its part and never echoing what may be a secret.
Result<ConnectionOptions> ParseRedisUrl(std::string_view url) {
  const Scheme scheme = url.starts_with(kTlsScheme)        ? Scheme::kTls
                        : url.starts_with(kSentinelScheme) ? Scheme::kSentinel
                        : url.starts_with(kClusterScheme)  ? Scheme::kCluster
                                                           : Scheme::kPlain;
  if (scheme == Scheme::kPlain && !url.starts_with(kScheme)) {
    return UrlError("must start with redis://, rediss://, redis-sentinel:// or redis-cluster://");
  }
  std::string_view rest = url.substr(scheme == Scheme::kTls        ? kTlsScheme.size()
                                     : scheme == Scheme::kSentinel ? kSentinelScheme.size()
                                     : scheme == Scheme::kCluster  ? kClusterScheme.size()
                                                                   : kScheme.size());
  if (const std::size_t q = rest.find_first_of("?#"); q != std::string_view::npos) {
    // A '@' after it means the '?' or '#' was inside the user info: most
    // likely a password, never echoed.
    if (rest.find('@', q) != std::string_view::npos) {
      return UrlError("a '?' or '#' before '@' must be percent-encoded (%3F, %23)");
    }
  }
  if (rest.find('#') != std::string_view::npos) {
    return UrlError("a fragment (#...) is not supported");
  }
  ConnectionOptions options;
  options.tls = scheme == Scheme::kTls;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    if (Status s = ApplyQuery(rest.substr(q + 1), scheme, options); !s.ok()) return s;
    rest = rest.substr(0, q);
  }
  // The authority ends at the first '/'.
  std::string_view authority = rest;
  std::string_view path;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    path = rest.substr(slash + 1);
  }
  Result<std::string_view> hosts = TakeUserInfo(authority, options);
  if (!hosts) return hosts.error();
  if (scheme == Scheme::kSentinel) {
    options.host.clear();  // Found by each connect.
    if (Status s = ParseHostList(*hosts, scheme, options); !s.ok()) return s;
    if (Status s = ParseSentinelPath(path, options); !s.ok()) return s;
    return options;
  }
  if (scheme == Scheme::kCluster) {
    options.host.clear();  // The node asked is chosen by each connect.
    if (Status s = ParseHostList(*hosts, scheme, options); !s.ok()) return s;
    if (!path.empty() && path != "0") {
      return UrlError("a Redis Cluster has only database 0: no path but /0 on redis-cluster://");
    }
    return options;
  }
  Result<SentinelAddress> address = ParseHostPort(*hosts, options.port, "");
  if (!address) return address.error();
  options.host = std::move(address->host);
  options.port = address->port;
  if (!path.empty()) {
    const std::optional<std::int64_t> db = ParseDecimal(path, 1 << 20);
    if (!db) return UrlError("the path must be a database number (e.g. /0), not anything else");
    options.db = static_cast<int>(*db);
  }
  return options;
}

}  // namespace fusebox::redis
