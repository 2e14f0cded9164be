// apps/gateway/config.h: the gateway's configuration file (gateway.yaml).
//
// docs/gateway.md describes the format. LoadGatewayConfig() reads and
// validates the whole file and reports every fault it finds, one a line, each
// naming the file, line, column and key:
//
//   gateway.yaml:14:5: routes[1].workload: expected one of read, publish, reply,
//   token-refresh, got "write"
//
// The admin token is never in the file: the file names an environment
// variable (admin.token_env), which LoadGatewayConfig() reads through the
// `getenv` function it is given, so tests need not touch the process
// environment. The token never appears in an error message.
//
//   fusebox::Result<fusebox::gateway::GatewayConfig> config =
//       fusebox::gateway::LoadGatewayConfig("gateway.yaml", fusebox::gateway::ProcessEnv());
//
// Thread-safe: the functions are pure but for ProcessEnv()'s function, which
// reads the process environment.
#ifndef FUSEBOX_APPS_GATEWAY_CONFIG_H_
#define FUSEBOX_APPS_GATEWAY_CONFIG_H_

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/result.h"

namespace fusebox::gateway {

// Looks up an environment variable; nullopt when unset.
using GetEnv = std::function<std::optional<std::string>(std::string_view name)>;

// The real process environment.
GetEnv ProcessEnv();

// How the gateway speaks TLS to an https:// upstream (docs/gateway.md,
// "Upstreams over HTTPS"). The files are PEM; they are read when the gateway
// starts (tls_client.h), and every upstream with the same settings shares one
// OpenSSL context.
struct TlsClientSettings {
  // Trusted in addition to the system's trust store (a private CA).
  std::string ca_file{};
  // The client certificate (chain) and its key, for an upstream that asks for
  // one (mTLS); both or neither.
  std::string client_cert{};
  std::string client_key{};
  // Accept any certificate for any name. Never silent: a WARNING at start,
  // "insecure_upstreams" on /readyz and on the dashboard.
  bool insecure_skip_verify = false;

  friend bool operator==(const TlsClientSettings&, const TlsClientSettings&) = default;
};

struct UpstreamConfig {
  std::string name;
  // From base_url "http://host:port/prefix" or "https://host:port/prefix".
  std::string host;
  int port = 80;
  // base_url is https://: TLS 1.2 or later, as `tls` says.
  bool https = false;
  TlsClientSettings tls;
  // Path prefix put before every upstream_path ("" or "/v19.0"), no trailing '/'.
  std::string path_prefix;
  Duration connect_timeout = std::chrono::seconds(1);
  Duration request_timeout = std::chrono::seconds(10);
  // Idle keep-alive connections kept.
  int pool_size = 16;
};

enum class Classifier : std::uint8_t { kHttp, kMeta };

struct CacheConfig {
  Duration fresh_for = std::chrono::seconds(60);
  Duration max_stale = std::chrono::hours(24);
};

struct RouteConfig {
  std::string name;
  // Upper case: GET, POST, PUT, PATCH, DELETE.
  std::string method;
  // "/v1/{provider}/accounts/{account}/insights".
  std::string path;
  // Index into GatewayConfig::upstreams.
  std::size_t upstream = 0;
  std::string upstream_path;
  meta::Workload workload = meta::Workload::kRead;
  // Templates ("{provider}") or literals.
  std::string provider;
  std::string subject;
  Classifier classifier = Classifier::kHttp;
  // The upstream deadline; the upstream's request_timeout when not set.
  Duration timeout = Duration::zero();
  // GET routes only.
  std::optional<CacheConfig> cache;
};

struct LimitsConfig {
  std::size_t max_header_bytes = 8192;
  std::size_t max_body_bytes = 1 << 20;
  Duration read_timeout = std::chrono::seconds(10);
  Duration idle_timeout = std::chrono::seconds(60);
  Duration shutdown_grace = std::chrono::seconds(10);
};

struct AdminConfig {
  // The variable's name (for messages) and its value: a secret, never logged.
  std::string token_env;
  std::string token;
  std::string audit_log;
};

struct BreakersConfig {
  Duration transient_window = std::chrono::seconds(10);
  int transient_minimum_calls = 3;
  float transient_failure_rate = 50;
  Duration transient_open_for = std::chrono::seconds(30);
  std::chrono::seconds quota_default_wait{120};
  std::chrono::seconds quota_max_wait = std::chrono::hours(24);
  // The registry's bounds (RegistryOptions): breakers kept before the least
  // recently used are dropped, and the ceiling beyond which a new key shares
  // its template's overflow breaker (0: 4 x max_breakers).
  std::size_t max_breakers = 5000;
  std::size_t max_breakers_hard = 0;
};

// fleet.tls: the TLS settings of a rediss:// `redis` URL (see
// fusebox::redis::ConnectionOptions). Each key set here wins over the same
// key in the URL's query, key by key; unset keys leave the URL's. On a
// redis:// URL any of them is an error at start.
struct FleetTlsConfig {
  std::optional<std::string> ca_file;
  std::optional<std::string> client_cert;
  std::optional<std::string> client_key;
  std::optional<bool> insecure_skip_verify;
};

// fleet: how the gateway talks to Redis (docs/gateway.md, "The fleet").
struct FleetConfig {
  // Bound the TCP connect (and handshake) and each command's read and write.
  // Unset: the Redis URL's ?connect_timeout= and ?timeout=, else 500 ms and
  // 250 ms. The URL's query wins over these (it is often given per
  // deployment, with --redis).
  std::optional<Duration> connect_timeout;
  std::optional<Duration> command_timeout;
  // The subscriber PINGs after this long without a message: the bound on how
  // late a lost connection is noticed. Default: 1 s.
  Duration heartbeat = std::chrono::seconds(1);
  // After 3 failed commands in a row, Redis is left alone this long
  // (fail-open) before one command tries again. Default: 5 s.
  Duration down_for = std::chrono::seconds(5);
  // How long a probe lease lasts (CircuitBreakerConfig::shared_probe_lease).
  // Unset: ProbeLeaseDefault(). Set: must be longer than every route's
  // deadline (else refused): a slow probe must not let a second instance
  // probe at the same time.
  std::optional<Duration> probe_lease;
  // Redis connections of the snapshot store's pool and of the shared state's
  // pool for blocking calls (reads, probe leases). 0: `workers` (every
  // worker can hold one).
  int pool_size = 0;
};

struct GatewayConfig {
  // Where the file was read from, for messages.
  std::string source;
  std::string listen_host = "127.0.0.1";
  int listen_port = 8080;
  // Empty: "<host>:<port>" once listening.
  std::string instance;
  int io_threads = 2;
  int workers = 16;
  std::string redis_url;
  FleetTlsConfig fleet_tls;
  // While Redis is unreachable: false (default), /readyz stays 200 and says
  // "degraded" (every instance still serves, fail-open); true, 503.
  // `fail_open_ready: false` (the former setting) means strict_ready: true.
  bool strict_ready = false;
  FleetConfig fleet;
  LimitsConfig limits;
  std::optional<AdminConfig> admin;
  // The in-process snapshot tier (alone, or in front of Redis).
  std::size_t cache_max_entries = 10000;
  std::size_t cache_max_bytes = std::size_t{64} << 20;
  BreakersConfig breakers;
  std::vector<UpstreamConfig> upstreams;
  std::vector<RouteConfig> routes;
};

// The longest deadline of any route (its timeout, else its upstream's
// request_timeout); zero without routes.
Duration LongestRouteDeadline(const GatewayConfig& config);

// The probe lease used when fleet.probe_lease is unset: the longer of 30 s
// and the longest route deadline plus 5 s, so that a probe that takes its
// whole deadline still holds the lease when it reports.
Duration ProbeLeaseDefault(const GatewayConfig& config);

// The probe lease in force: fleet.probe_lease, else ProbeLeaseDefault().
Duration ProbeLease(const GatewayConfig& config);

// Parses "HOST:PORT" ("[::1]:8080" for IPv6). kInvalidArgument naming the
// problem.
Status ParseListen(std::string_view text, std::string& host, int& port);

// Reads `text` as a gateway.yaml named `source` (for messages). On error, the
// message lists every fault, one a line.
Result<GatewayConfig> ParseGatewayConfig(std::string_view text, std::string_view source,
                                         const GetEnv& getenv);

// Reads and parses the file at `path`.
Result<GatewayConfig> LoadGatewayConfig(const std::string& path, const GetEnv& getenv);

// The transient and quota breaker templates of `breakers`: seed 000's
// (fusebox::meta) with the configured numbers.
CircuitBreakerConfig TransientTemplate(const BreakersConfig& breakers);
CircuitBreakerConfig QuotaTemplate(const BreakersConfig& breakers);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_CONFIG_H_
