#include "apps/gateway/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>
#include <utility>

#include "apps/gateway/route.h"
#include "fusebox/config_names.h"
#include "fusebox/yaml/config.h"

namespace fusebox::gateway {
namespace {

// Collects every fault of a file, each "source:line:column: path: rule", so
// that one run shows them all (as `fusebox config check` does).
class Parser {
 public:
  Parser(std::string source, const GetEnv& getenv) : source_(std::move(source)), getenv_(getenv) {}

  void Error(const YAML::Node& at, std::string_view path, std::string_view rule) {
    std::ostringstream os;
    const YAML::Mark mark = at.IsDefined() ? at.Mark() : YAML::Mark::null_mark();
    os << source_ << ':';
    if (mark.line >= 0) {
      os << (mark.line + 1) << ':' << (mark.column + 1) << ':';
    }
    os << ' ' << path << ": " << rule;
    errors_.push_back(os.str());
  }

  // Reports keys of `map` not in `known`.
  void CheckKeys(const YAML::Node& map, std::string_view path,
                 std::initializer_list<std::string_view> known) {
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>("");
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string expected;
        for (std::string_view k : known) {
          if (!expected.empty()) expected += ", ";
          expected += k;
        }
        Error(kv.first, Join(path, key), "unknown key; expected one of " + expected);
      }
    }
  }

  static std::string Join(std::string_view parent, std::string_view key) {
    if (parent.empty()) return std::string(key);
    return std::string(parent) + "." + std::string(key);
  }

  bool IsMap(const YAML::Node& node, std::string_view path) {
    if (node.IsMap()) return true;
    Error(node, path, "expected a map");
    return false;
  }

  std::optional<std::string> String(const YAML::Node& parent, std::string_view key,
                                    std::string_view path, bool required) {
    const YAML::Node node = parent[std::string(key)];
    const std::string p = Join(path, key);
    if (!node.IsDefined() || node.IsNull()) {
      if (required) Error(parent, p, "required");
      return std::nullopt;
    }
    if (!node.IsScalar()) {
      Error(node, p, "expected a string");
      return std::nullopt;
    }
    return node.Scalar();
  }

  std::optional<Duration> DurationValue(const YAML::Node& parent, std::string_view key,
                                        std::string_view path, bool positive = true) {
    std::optional<std::string> text = String(parent, key, path, false);
    if (!text) return std::nullopt;
    Result<Duration> d = ParseDuration(*text);
    if (!d) {
      Error(parent[std::string(key)], Join(path, key),
            "expected a duration such as 5s, 250ms or 1m, got \"" + *text + "\"");
      return std::nullopt;
    }
    if (positive && *d <= Duration::zero()) {
      Error(parent[std::string(key)], Join(path, key), "must be > 0");
      return std::nullopt;
    }
    return *d;
  }

  std::optional<long long> Integer(const YAML::Node& parent, std::string_view key,
                                   std::string_view path, long long min, long long max) {
    std::optional<std::string> text = String(parent, key, path, false);
    if (!text) return std::nullopt;
    long long v = 0;
    const char* end = text->data() + text->size();
    auto [p, ec] = std::from_chars(text->data(), end, v);
    if (ec != std::errc() || p != end) {
      Error(parent[std::string(key)], Join(path, key),
            "expected an integer, got \"" + *text + "\"");
      return std::nullopt;
    }
    if (v < min || v > max) {
      Error(parent[std::string(key)], Join(path, key),
            "must be in [" + std::to_string(min) + ", " + std::to_string(max) + "], got " + *text);
      return std::nullopt;
    }
    return v;
  }

  std::optional<bool> Bool(const YAML::Node& parent, std::string_view key, std::string_view path) {
    std::optional<std::string> text = String(parent, key, path, false);
    if (!text) return std::nullopt;
    if (*text == "true") return true;
    if (*text == "false") return false;
    Error(parent[std::string(key)], Join(path, key),
          "expected true or false, got \"" + *text + "\"");
    return std::nullopt;
  }

  const GetEnv& getenv() const { return getenv_; }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  const GetEnv& getenv_;
  std::vector<std::string> errors_;
};

bool ParseBaseUrl(std::string_view url, UpstreamConfig& up, std::string& why) {
  constexpr std::string_view kHttp = "http://";
  constexpr std::string_view kHttps = "https://";
  if (url.substr(0, kHttps.size()) == kHttps) {
    up.https = true;
    url.remove_prefix(kHttps.size());
  } else if (url.substr(0, kHttp.size()) == kHttp) {
    url.remove_prefix(kHttp.size());
  } else {
    why = "expected http://host[:port][/prefix] or https://host[:port][/prefix]";
    return false;
  }
  const std::size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.remove_suffix(1);
  if (prefix.find_first_of("?#") != std::string_view::npos) {
    why = "a query or fragment is not allowed";
    return false;
  }
  std::string host;
  int port = up.https ? 443 : 80;
  if (authority.find(':') == std::string_view::npos && !authority.empty()) {
    host = std::string(authority);
  } else if (Status s = ParseListen(authority, host, port); !s.ok()) {
    why = std::string(s.message());
    return false;
  }
  if (host.empty() || port == 0) {
    why = "needs a host and a non-zero port";
    return false;
  }
  up.host = host;
  up.port = port;
  up.path_prefix = std::string(prefix);
  return true;
}

// A file the gateway reads at start: it must be there and readable now, so
// that a typo stops the start with the key and the file named.
void CheckReadable(Parser& p, const YAML::Node& node, const std::string& path,
                   const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  char byte = 0;
  if (!in || !in.get(byte)) {
    p.Error(node, path, "cannot read \"" + file + "\"" + (in ? " (empty)" : ""));
  }
}

// upstreams[i].tls: the TLS client settings of an https:// upstream.
void ParseUpstreamTls(Parser& p, const YAML::Node& n, const std::string& path, UpstreamConfig& up) {
  if (!p.IsMap(n, path)) return;
  p.CheckKeys(n, path, {"ca_file", "client_cert", "client_key", "insecure_skip_verify"});
  if (!up.https) {
    // Named one by one: a client key meant for TLS must not go out in clear.
    for (const auto& kv : n) {
      const std::string key = kv.first.as<std::string>("");
      std::string value = kv.second.IsScalar() ? kv.second.as<std::string>("") : "";
      p.Error(kv.first, path + "." + key,
              "set on an http:// base_url (\"" + value + "\"): TLS settings need https://");
    }
    return;
  }
  TlsClientSettings& tls = up.tls;
  for (auto [key, field] :
       {std::pair{"ca_file", &tls.ca_file}, std::pair{"client_cert", &tls.client_cert},
        std::pair{"client_key", &tls.client_key}}) {
    if (auto file = p.String(n, key, path, false)) {
      *field = *file;
      CheckReadable(p, n[key], path + "." + key, *file);
    }
  }
  if (tls.client_cert.empty() != tls.client_key.empty()) {
    p.Error(n, path, "client_cert and client_key go together (mTLS needs both)");
  }
  if (auto b = p.Bool(n, "insecure_skip_verify", path)) tls.insecure_skip_verify = *b;
}

void ParseUpstreams(Parser& p, const YAML::Node& list, GatewayConfig& config) {
  if (!list.IsSequence()) {
    p.Error(list, "upstreams", "expected a list of upstreams");
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string path = "upstreams[" + std::to_string(i) + "]";
    if (!p.IsMap(n, path)) continue;
    p.CheckKeys(n, path,
                {"name", "base_url", "connect_timeout", "request_timeout", "pool_size", "tls"});
    UpstreamConfig up;
    if (auto name = p.String(n, "name", path, true)) {
      up.name = *name;
      if (!names.insert(*name).second) p.Error(n["name"], path + ".name", "duplicate name");
    }
    if (auto url = p.String(n, "base_url", path, true)) {
      std::string why;
      if (!ParseBaseUrl(*url, up, why)) p.Error(n["base_url"], path + ".base_url", why);
    }
    if (auto d = p.DurationValue(n, "connect_timeout", path)) up.connect_timeout = *d;
    if (auto d = p.DurationValue(n, "request_timeout", path)) up.request_timeout = *d;
    if (auto v = p.Integer(n, "pool_size", path, 0, 4096)) up.pool_size = static_cast<int>(*v);
    if (n["tls"]) ParseUpstreamTls(p, n["tls"], path + ".tls", up);
    config.upstreams.push_back(std::move(up));
  }
}

std::optional<meta::Workload> WorkloadByName(std::string_view name) {
  for (meta::Workload w : {meta::Workload::kRead, meta::Workload::kPublish, meta::Workload::kReply,
                           meta::Workload::kTokenRefresh}) {
    if (meta::WorkloadName(w) == name) return w;
  }
  return std::nullopt;
}

// Checks that every {param} of `tmpl` is one of the route path's.
void CheckTemplate(Parser& p, const YAML::Node& at, const std::string& path, std::string_view tmpl,
                   const std::vector<std::string>& params) {
  std::vector<std::string> used;
  std::string why;
  if (!TemplateParameters(tmpl, used, why)) {
    p.Error(at, path, why);
    return;
  }
  for (const std::string& u : used) {
    if (std::find(params.begin(), params.end(), u) == params.end()) {
      p.Error(at, path, "{" + u + "} is not a parameter of the route's path");
    }
  }
}

// routes[i].cache: what the route's snapshots are fresh and stale for.
void ParseRouteCache(Parser& p, const YAML::Node& cache, const std::string& cpath, RouteConfig& r) {
  if (p.IsMap(cache, cpath)) {
    p.CheckKeys(cache, cpath, {"fresh_for", "max_stale"});
    CacheConfig cc;
    if (auto d = p.DurationValue(cache, "fresh_for", cpath, false)) cc.fresh_for = *d;
    if (auto d = p.DurationValue(cache, "max_stale", cpath, false)) cc.max_stale = *d;
    if (cc.fresh_for < Duration::zero() || cc.max_stale < cc.fresh_for) {
      p.Error(cache, cpath + ".max_stale", "must be >= fresh_for");
    }
    if (r.method != "GET") {
      p.Error(cache, cpath, "only GET routes may be cached (writes are never cached)");
    }
    r.cache = cc;
  }
}

// routes[i]: its upstream (by name, among config.upstreams) and the
// templates of its upstream path and circuit key, checked against its path.
RouteConfig ParseRoute(Parser& p, const YAML::Node& n, const std::string& path,
                       const GatewayConfig& config, std::set<std::string>& names) {
  RouteConfig r;
  if (auto name = p.String(n, "name", path, true)) {
    r.name = *name;
    if (!names.insert(*name).second) p.Error(n["name"], path + ".name", "duplicate name");
  }
  if (auto m = p.String(n, "method", path, true)) {
    static constexpr std::string_view kMethods[] = {"GET", "POST", "PUT", "PATCH", "DELETE"};
    if (std::find(std::begin(kMethods), std::end(kMethods), *m) == std::end(kMethods)) {
      p.Error(n["method"], path + ".method",
              "expected one of GET, POST, PUT, PATCH, DELETE, got \"" + *m + "\"");
    }
    r.method = *m;
  }
  std::vector<std::string> params;
  if (auto rp = p.String(n, "path", path, true)) {
    std::string why;
    if (!PathPattern::Parse(*rp, params, why)) p.Error(n["path"], path + ".path", why);
    r.path = *rp;
  }
  if (auto up = p.String(n, "upstream", path, true)) {
    auto it = std::find_if(config.upstreams.begin(), config.upstreams.end(),
                           [&](const UpstreamConfig& u) { return u.name == *up; });
    if (it == config.upstreams.end()) {
      p.Error(n["upstream"], path + ".upstream", "no upstream named \"" + *up + "\"");
    } else {
      r.upstream = static_cast<std::size_t>(it - config.upstreams.begin());
    }
  }
  if (auto t = p.String(n, "upstream_path", path, true)) {
    if (t->empty() || (*t)[0] != '/') {
      p.Error(n["upstream_path"], path + ".upstream_path", "must start with '/'");
    }
    CheckTemplate(p, n["upstream_path"], path + ".upstream_path", *t, params);
    r.upstream_path = *t;
  }
  if (auto w = p.String(n, "workload", path, true)) {
    if (auto workload = WorkloadByName(*w)) {
      r.workload = *workload;
    } else {
      p.Error(n["workload"], path + ".workload",
              "expected one of read, publish, reply, token-refresh, got \"" + *w + "\"");
    }
  }
  for (auto [key, field] : {std::pair{"provider", &r.provider}, {"subject", &r.subject}}) {
    if (auto t = p.String(n, key, path, true)) {
      CheckTemplate(p, n[key], path + "." + key, *t, params);
      if (t->empty()) p.Error(n[key], path + "." + key, "must not be empty");
      *field = *t;
    }
  }
  if (!r.provider.empty() && r.provider.find('{') == std::string::npos &&
      r.provider.find(':') != std::string::npos) {
    p.Error(n["provider"], path + ".provider", "must not contain ':'");
  }
  if (auto c = p.String(n, "classifier", path, false)) {
    if (*c == "meta") {
      r.classifier = Classifier::kMeta;
    } else if (*c == "http") {
      r.classifier = Classifier::kHttp;
    } else {
      p.Error(n["classifier"], path + ".classifier", "expected meta or http, got \"" + *c + "\"");
    }
  }
  if (auto d = p.DurationValue(n, "timeout", path)) r.timeout = *d;
  if (const YAML::Node cache = n["cache"]; cache.IsDefined() && !cache.IsNull()) {
    ParseRouteCache(p, cache, path + ".cache", r);
  }
  return r;
}

void ParseRoutes(Parser& p, const YAML::Node& list, GatewayConfig& config) {
  if (!list.IsSequence()) {
    p.Error(list, "routes", "expected a list of routes");
    return;
  }
  std::set<std::string> names;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const YAML::Node n = list[i];
    const std::string path = "routes[" + std::to_string(i) + "]";
    if (!p.IsMap(n, path)) continue;
    p.CheckKeys(n, path,
                {"name", "method", "path", "upstream", "upstream_path", "workload", "provider",
                 "subject", "classifier", "timeout", "cache"});
    config.routes.push_back(ParseRoute(p, n, path, config, names));
  }
}

// limits: what a client may send, and for how long.
void ParseLimits(Parser& p, const YAML::Node& l, GatewayConfig& c) {
  p.CheckKeys(
      l, "limits",
      {"max_header_bytes", "max_body_bytes", "read_timeout", "idle_timeout", "shutdown_grace"});
  if (auto v = p.Integer(l, "max_header_bytes", "limits", 256, 1 << 20)) {
    c.limits.max_header_bytes = static_cast<std::size_t>(*v);
  }
  if (auto v = p.Integer(l, "max_body_bytes", "limits", 0, 1LL << 30)) {
    c.limits.max_body_bytes = static_cast<std::size_t>(*v);
  }
  if (auto d = p.DurationValue(l, "read_timeout", "limits")) c.limits.read_timeout = *d;
  if (auto d = p.DurationValue(l, "idle_timeout", "limits")) c.limits.idle_timeout = *d;
  if (auto d = p.DurationValue(l, "shutdown_grace", "limits", false)) {
    c.limits.shutdown_grace = *d;
  }
}

// admin: the token (read from the environment) and the audit log.
void ParseAdmin(Parser& p, const YAML::Node& a, GatewayConfig& c) {
  p.CheckKeys(a, "admin", {"token_env", "audit_log"});
  AdminConfig admin;
  if (auto v = p.String(a, "token_env", "admin", true)) {
    admin.token_env = *v;
    std::optional<std::string> token = p.getenv()(*v);
    if (!token || token->empty()) {
      // Names the variable, never a value.
      p.Error(a["token_env"], "admin.token_env",
              "environment variable " + *v + " is not set or empty (it holds the admin token)");
    } else {
      admin.token = std::move(*token);
    }
  }
  if (auto v = p.String(a, "audit_log", "admin", true)) admin.audit_log = *v;
  c.admin = std::move(admin);
}

// cache: the in-process snapshot tier's bounds.
void ParseCacheLimits(Parser& p, const YAML::Node& cache, GatewayConfig& c) {
  p.CheckKeys(cache, "cache", {"max_entries", "max_bytes"});
  if (auto v = p.Integer(cache, "max_entries", "cache", 1, 100000000)) {
    c.cache_max_entries = static_cast<std::size_t>(*v);
  }
  // At most 64 GiB: a bound, not a wish.
  if (auto v = p.Integer(cache, "max_bytes", "cache", 1024, std::int64_t{1} << 36)) {
    c.cache_max_bytes = static_cast<std::size_t>(*v);
  }
}

// breakers.quota: the waits when Meta names none, and at most.
void ParseQuotaTemplate(Parser& p, const YAML::Node& q, GatewayConfig& c) {
  const std::string qp = "breakers.quota";
  p.CheckKeys(q, qp, {"default_wait", "max_wait"});
  if (auto d = p.DurationValue(q, "default_wait", qp)) {
    c.breakers.quota_default_wait =
        std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(*d));
  }
  if (auto d = p.DurationValue(q, "max_wait", qp)) {
    c.breakers.quota_max_wait =
        std::max(std::chrono::seconds(1), std::chrono::ceil<std::chrono::seconds>(*d));
  }
}

// breakers.transient: the window, the threshold and the wait in OPEN.
void ParseTransientTemplate(Parser& p, const YAML::Node& t, GatewayConfig& c) {
  const std::string tp = "breakers.transient";
  p.CheckKeys(t, tp, {"window", "minimum_calls", "failure_rate", "open_for"});
  if (auto d = p.DurationValue(t, "window", tp)) {
    constexpr auto kMax = std::chrono::seconds(CircuitBreakerConfig::kMaxTimeBasedWindowSeconds);
    if (*d < std::chrono::seconds(1) || *d > kMax ||
        *d % std::chrono::seconds(1) != Duration::zero()) {
      p.Error(t["window"], tp + ".window",
              "must be a whole number of seconds in [1s, " + FormatDuration(kMax) + "]");
    } else {
      c.breakers.transient_window = *d;
    }
  }
  if (auto v = p.Integer(t, "minimum_calls", tp, 1, 1000000)) {
    c.breakers.transient_minimum_calls = static_cast<int>(*v);
  }
  if (auto v = p.Integer(t, "failure_rate", tp, 0, 99)) {
    c.breakers.transient_failure_rate = static_cast<float>(*v);
  }
  if (auto d = p.DurationValue(t, "open_for", tp)) c.breakers.transient_open_for = *d;
}

// breakers: the registry's bounds and the two circuit templates.
void ParseBreakers(Parser& p, const YAML::Node& b, GatewayConfig& c) {
  p.CheckKeys(b, "breakers", {"transient", "quota", "max_breakers", "max_breakers_hard"});
  if (auto v = p.Integer(b, "max_breakers", "breakers", 1, 10000000)) {
    c.breakers.max_breakers = static_cast<std::size_t>(*v);
  }
  if (auto v = p.Integer(b, "max_breakers_hard", "breakers", 0, 40000000)) {
    if (*v != 0 && static_cast<std::size_t>(*v) < c.breakers.max_breakers) {
      p.Error(b["max_breakers_hard"], "breakers.max_breakers_hard",
              "must be 0 (4 x max_breakers) or >= max_breakers");
    } else {
      c.breakers.max_breakers_hard = static_cast<std::size_t>(*v);
    }
  }
  if (const YAML::Node t = b["transient"]; t.IsDefined() && p.IsMap(t, "breakers.transient")) {
    ParseTransientTemplate(p, t, c);
  }
  if (const YAML::Node q = b["quota"]; q.IsDefined() && p.IsMap(q, "breakers.quota")) {
    ParseQuotaTemplate(p, q, c);
  }
}

// fleet.tls: how to reach a rediss:// Redis (keys win over the URL's).
void ParseFleetTls(Parser& p, const YAML::Node& t, GatewayConfig& c) {
  p.CheckKeys(t, "fleet.tls", {"ca_file", "client_cert", "client_key", "insecure_skip_verify"});
  c.fleet_tls.ca_file = p.String(t, "ca_file", "fleet.tls", false);
  c.fleet_tls.client_cert = p.String(t, "client_cert", "fleet.tls", false);
  c.fleet_tls.client_key = p.String(t, "client_key", "fleet.tls", false);
  c.fleet_tls.insecure_skip_verify = p.Bool(t, "insecure_skip_verify", "fleet.tls");
}

// fleet: Redis' timeouts, heartbeat, probe lease, pool and TLS.
void ParseFleet(Parser& p, const YAML::Node& f, GatewayConfig& c) {
  const std::string fp = "fleet";
  p.CheckKeys(f, fp,
              {"connect_timeout", "command_timeout", "heartbeat", "down_for", "probe_lease",
               "pool_size", "tls"});
  if (const YAML::Node t = f["tls"]; t.IsDefined() && p.IsMap(t, "fleet.tls")) {
    ParseFleetTls(p, t, c);
  }
  if (auto d = p.DurationValue(f, "connect_timeout", fp)) c.fleet.connect_timeout = *d;
  if (auto d = p.DurationValue(f, "command_timeout", fp)) c.fleet.command_timeout = *d;
  if (auto d = p.DurationValue(f, "heartbeat", fp)) c.fleet.heartbeat = *d;
  if (auto d = p.DurationValue(f, "down_for", fp)) c.fleet.down_for = *d;
  if (auto d = p.DurationValue(f, "probe_lease", fp)) c.fleet.probe_lease = *d;
  if (auto v = p.Integer(f, "pool_size", fp, 1, 4096)) c.fleet.pool_size = static_cast<int>(*v);
}

// Readiness: strict_ready, or the former fail_open_ready (its negation).
void ParseReadiness(Parser& p, const YAML::Node& root, GatewayConfig& c) {
  const std::optional<bool> strict = p.Bool(root, "strict_ready", "");
  const std::optional<bool> fail_open = p.Bool(root, "fail_open_ready", "");
  if (strict && fail_open && *strict == *fail_open) {
    p.Error(root["fail_open_ready"], "fail_open_ready",
            "contradicts strict_ready (fail_open_ready is its former, negated spelling; keep "
            "strict_ready alone)");
  }
  if (strict) {
    c.strict_ready = *strict;
  } else if (fail_open) {
    c.strict_ready = !*fail_open;
  }
}

// A probe lease no longer than a route's deadline would let a second
// instance probe while the first one's probe still runs.
void CheckProbeLease(Parser& p, const YAML::Node& root, const GatewayConfig& c) {
  if (!c.fleet.probe_lease) return;
  const Duration longest = LongestRouteDeadline(c);
  if (*c.fleet.probe_lease <= longest) {
    p.Error(root["fleet"]["probe_lease"], "fleet.probe_lease",
            "must be longer than the longest route deadline (" + FormatDuration(longest) +
                "), got " + FormatDuration(*c.fleet.probe_lease) +
                ": a probe that takes its whole deadline would let another instance probe too");
  }
}

void ParseTop(Parser& p, const YAML::Node& root, GatewayConfig& c) {
  p.CheckKeys(root, "",
              {"listen", "instance", "io_threads", "workers", "redis", "fleet", "strict_ready",
               "fail_open_ready", "limits", "admin", "cache", "breakers", "upstreams", "routes"});
  if (auto l = p.String(root, "listen", "", false)) {
    if (Status s = ParseListen(*l, c.listen_host, c.listen_port); !s.ok()) {
      p.Error(root["listen"], "listen", s.message());
    }
  }
  if (auto v = p.String(root, "instance", "", false)) {
    // It names this instance in the fleet's heartbeat hash (and on every
    // other instance's dashboard): bounded, one line.
    const bool control = std::any_of(v->begin(), v->end(), [](char ch) {
      return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
    });
    if (v->size() > 128 || control) {
      p.Error(root["instance"], "instance",
              "expected at most 128 bytes without control characters");
    } else {
      c.instance = *v;
    }
  }
  if (auto v = p.Integer(root, "io_threads", "", 1, 256)) c.io_threads = static_cast<int>(*v);
  if (auto v = p.Integer(root, "workers", "", 1, 4096)) c.workers = static_cast<int>(*v);
  if (auto v = p.String(root, "redis", "", false)) c.redis_url = *v;
  ParseReadiness(p, root, c);
  if (const YAML::Node f = root["fleet"]; f.IsDefined() && p.IsMap(f, "fleet")) {
    ParseFleet(p, f, c);
  }

  if (const YAML::Node l = root["limits"]; l.IsDefined() && p.IsMap(l, "limits")) {
    ParseLimits(p, l, c);
  }

  if (const YAML::Node a = root["admin"]; a.IsDefined() && p.IsMap(a, "admin")) {
    ParseAdmin(p, a, c);
  }

  if (const YAML::Node cache = root["cache"]; cache.IsDefined() && p.IsMap(cache, "cache")) {
    ParseCacheLimits(p, cache, c);
  }

  if (const YAML::Node b = root["breakers"]; b.IsDefined() && p.IsMap(b, "breakers")) {
    ParseBreakers(p, b, c);
  }

  const YAML::Node ups = root["upstreams"];
  if (!ups.IsDefined() || ups.IsNull()) {
    p.Error(root, "upstreams", "required");
  } else {
    ParseUpstreams(p, ups, c);
  }
  const YAML::Node routes = root["routes"];
  if (!routes.IsDefined() || routes.IsNull()) {
    p.Error(root, "routes", "required");
  } else {
    ParseRoutes(p, routes, c);
  }
  CheckProbeLease(p, root, c);
}

}  // namespace

GetEnv ProcessEnv() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Status ParseListen(std::string_view text, std::string& host, int& port) {
  std::string_view h;
  std::string_view p;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Status::InvalidArgument("expected [IPv6]:PORT, got \"" + std::string(text) + "\"");
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return Status::InvalidArgument("expected HOST:PORT, got \"" + std::string(text) + "\"");
    }
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  int v = -1;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (h.empty() || ec != std::errc() || end != p.data() + p.size() || v < 0 || v > 65535) {
    return Status::InvalidArgument("expected HOST:PORT with a port in [0, 65535], got \"" +
                                   std::string(text) + "\"");
  }
  host = std::string(h);
  port = v;
  return Status();
}

Result<GatewayConfig> ParseGatewayConfig(std::string_view text, std::string_view source,
                                         const GetEnv& getenv) {
  Parser p(std::string(source), getenv);
  GatewayConfig config;
  config.source = std::string(source);
  YAML::Node root;
  // yaml-cpp throws on syntax errors; they stop here.
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    std::ostringstream os;
    os << source << ':' << (e.mark.line + 1) << ':' << (e.mark.column + 1) << ": " << e.msg;
    return Status::InvalidArgument(os.str());
  }
  try {
    if (!root.IsMap()) {
      p.Error(root, "(document)", "expected a map of settings");
    } else {
      ParseTop(p, root, config);
    }
  } catch (const YAML::Exception& e) {
    std::ostringstream os;
    os << source << ':' << (e.mark.line + 1) << ':' << (e.mark.column + 1) << ": " << e.msg;
    return Status::InvalidArgument(os.str());
  }
  if (!p.errors().empty()) {
    std::string all;
    for (const std::string& e : p.errors()) {
      if (!all.empty()) all += '\n';
      all += e;
    }
    return Status::InvalidArgument(all);
  }
  return config;
}

Duration LongestRouteDeadline(const GatewayConfig& config) {
  Duration longest = Duration::zero();
  for (const RouteConfig& r : config.routes) {
    Duration d = r.timeout;
    if (d <= Duration::zero() && r.upstream < config.upstreams.size()) {
      d = config.upstreams[r.upstream].request_timeout;
    }
    longest = std::max(longest, d);
  }
  return longest;
}

Duration ProbeLeaseDefault(const GatewayConfig& config) {
  return std::max<Duration>(std::chrono::seconds(30),
                            LongestRouteDeadline(config) + std::chrono::seconds(5));
}

Duration ProbeLease(const GatewayConfig& config) {
  return config.fleet.probe_lease ? *config.fleet.probe_lease : ProbeLeaseDefault(config);
}

Result<GatewayConfig> LoadGatewayConfig(const std::string& path, const GetEnv& getenv) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument(path + ": cannot read the file");
  // The configuration loader's limit (fusebox/yaml/config.h); one byte past
  // it is enough to refuse the file, no more is read (a --config /dev/zero
  // must not fill the memory).
  std::string text(yaml::kMaxYamlBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::InvalidArgument(path + ": cannot read the file");
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > yaml::kMaxYamlBytes) {
    return Status::InvalidArgument(path + ": larger than " +
                                   std::to_string(yaml::kMaxYamlBytes >> 20) + " MiB");
  }
  return ParseGatewayConfig(text, path, getenv);
}

CircuitBreakerConfig TransientTemplate(const BreakersConfig& b) {
  CircuitBreakerConfig c = meta::TransientCircuitConfig();
  // "More than N %", as meta::TransientCircuitConfig() explains for 50.
  c.failure_rate_threshold = std::nextafter(b.transient_failure_rate, 100.0f);
  // Clamped, not wrapped: a window of 2^32 + 10 s must fail validation, not
  // become 10 s.
  c.sliding_window_size = static_cast<int>(std::min<std::int64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(b.transient_window).count(),
      std::numeric_limits<int>::max()));
  c.minimum_number_of_calls = b.transient_minimum_calls;
  c.wait_duration_in_open_state = b.transient_open_for;
  return c;
}

CircuitBreakerConfig QuotaTemplate(const BreakersConfig& /*breakers*/) {
  // The quota circuit's OPEN time is the recovery hint of each rate limit
  // (default_wait when there is none), computed by the classifier.
  return meta::QuotaCircuitConfig();
}

}  // namespace fusebox::gateway
