// gateway.yaml: a full file loads; every fault is reported with
// file:line:column and key; the admin token comes from the environment and
// never appears in a message.
#include "apps/gateway/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace fusebox::gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

GetEnv Env(std::optional<std::string> token) {
  return [token](std::string_view name) -> std::optional<std::string> {
    if (name == "TOKEN_VAR") return token;
    return std::nullopt;
  };
}

constexpr char kGood[] = R"(listen: 0.0.0.0:8080
io_threads: 4
workers: 32
redis: redis://127.0.0.1:6379/0
fail_open_ready: true
limits:
  max_body_bytes: 4096
  read_timeout: 5s
admin:
  token_env: TOKEN_VAR
  audit_log: /tmp/audit.jsonl
breakers:
  max_breakers: 300
  max_breakers_hard: 900
  transient:
    window: 20s
    minimum_calls: 5
    failure_rate: 40
    open_for: 15s
  quota:
    default_wait: 60s
upstreams:
  - name: graph
    base_url: http://graph.local:9000/v19.0/
    connect_timeout: 250ms
    pool_size: 8
routes:
  - name: insights
    method: GET
    path: /v1/{provider}/accounts/{account}/insights
    upstream: graph
    upstream_path: /{account}/insights
    workload: read
    provider: "{provider}"
    subject: "{account}"
    classifier: meta
    timeout: 2s
    cache:
      fresh_for: 30s
      max_stale: 1h
)";

TEST(GatewayConfig, LoadsEveryField) {
  Result<GatewayConfig> c = ParseGatewayConfig(kGood, "gw.yaml", Env("tok"));
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->listen_host, "0.0.0.0");
  EXPECT_EQ(c->listen_port, 8080);
  EXPECT_EQ(c->io_threads, 4);
  EXPECT_EQ(c->workers, 32);
  EXPECT_EQ(c->redis_url, "redis://127.0.0.1:6379/0");
  EXPECT_FALSE(c->strict_ready);
  EXPECT_EQ(c->limits.max_body_bytes, 4096u);
  EXPECT_EQ(c->limits.read_timeout, std::chrono::seconds(5));
  ASSERT_TRUE(c->admin.has_value());
  EXPECT_EQ(c->admin->token, "tok");
  EXPECT_EQ(c->breakers.transient_minimum_calls, 5);
  EXPECT_EQ(c->breakers.quota_default_wait, std::chrono::seconds(60));
  EXPECT_EQ(c->breakers.max_breakers, 300u);
  EXPECT_EQ(c->breakers.max_breakers_hard, 900u);
  ASSERT_EQ(c->upstreams.size(), 1u);
  EXPECT_EQ(c->upstreams[0].host, "graph.local");
  EXPECT_EQ(c->upstreams[0].port, 9000);
  EXPECT_EQ(c->upstreams[0].path_prefix, "/v19.0");
  EXPECT_EQ(c->upstreams[0].pool_size, 8);
  ASSERT_EQ(c->routes.size(), 1u);
  const RouteConfig& r = c->routes[0];
  EXPECT_EQ(r.workload, meta::Workload::kRead);
  EXPECT_EQ(r.classifier, Classifier::kMeta);
  EXPECT_EQ(r.timeout, std::chrono::seconds(2));
  ASSERT_TRUE(r.cache.has_value());
  EXPECT_EQ(r.cache->fresh_for, std::chrono::seconds(30));

  CircuitBreakerConfig t = TransientTemplate(c->breakers);
  EXPECT_EQ(t.sliding_window_size, 20);
  EXPECT_EQ(t.minimum_number_of_calls, 5);
  EXPECT_GT(t.failure_rate_threshold, 40.0f);
  EXPECT_LT(t.failure_rate_threshold, 40.001f);
  EXPECT_EQ(t.wait_duration_in_open_state, std::chrono::seconds(15));
}

TEST(GatewayConfig, RegistryBoundsAreChecked) {
  const auto parse = [](const std::string& breakers) {
    return ParseGatewayConfig("breakers:\n" + breakers + "upstreams: []\nroutes: []\n", "gw.yaml",
                              Env("tok"));
  };
  Result<GatewayConfig> defaults = parse("  quota:\n    default_wait: 60s\n");
  ASSERT_TRUE(defaults.has_value()) << defaults.error();
  EXPECT_EQ(defaults->breakers.max_breakers, 5000u);
  EXPECT_EQ(defaults->breakers.max_breakers_hard, 0u) << "0: the registry's 4 x max_breakers";
  Result<GatewayConfig> below = parse("  max_breakers: 100\n  max_breakers_hard: 99\n");
  ASSERT_FALSE(below.has_value());
  EXPECT_THAT(std::string(below.error().message()), HasSubstr("breakers.max_breakers_hard"));
  Result<GatewayConfig> zero = parse("  max_breakers: 0\n");
  ASSERT_FALSE(zero.has_value());
  EXPECT_THAT(std::string(zero.error().message()), HasSubstr("breakers.max_breakers"));
}

// Each bound includes its limit, as docs/gateway.md writes it: max_breakers_hard
// ">= max_breakers", a window of "[1s, 1d]", max_stale ">= fresh_for"; the
// quota waits are whole seconds, rounded up (never a shorter wait than asked).
TEST(GatewayConfig, BoundsIncludeTheirLimitsAndQuotaWaitsRoundUp) {
  std::string text = kGood;
  const auto replace = [&](const std::string& from, const std::string& to) {
    const std::size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
  };
  replace("  max_breakers_hard: 900\n", "  max_breakers_hard: 300\n");
  replace("    window: 20s\n", "    window: 1s\n");
  replace("    default_wait: 60s\n", "    default_wait: 1500ms\n    max_wait: 100ms\n");
  replace("      max_stale: 1h\n", "      max_stale: 30s\n");
  Result<GatewayConfig> c = ParseGatewayConfig(text, "gw.yaml", Env("tok"));
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->breakers.max_breakers_hard, 300u);
  EXPECT_EQ(c->breakers.transient_window, std::chrono::seconds(1));
  EXPECT_EQ(c->breakers.quota_default_wait, std::chrono::seconds(2));
  EXPECT_EQ(c->breakers.quota_max_wait, std::chrono::seconds(1));
  ASSERT_EQ(c->routes.size(), 1u);
  ASSERT_TRUE(c->routes[0].cache.has_value());
  EXPECT_EQ(c->routes[0].cache->max_stale, std::chrono::seconds(30));
  EXPECT_EQ(c->routes[0].cache->fresh_for, std::chrono::seconds(30));
}

// fleet: every setting, its default, and the probe lease's rule (refused,
// not raised, when it is not longer than the longest route deadline: 2s in
// kGood, the upstream's 10s default request_timeout unused there).
TEST(GatewayConfig, FleetSettingsAndTheProbeLeaseRule) {
  Result<GatewayConfig> defaults = ParseGatewayConfig(kGood, "gw.yaml", Env("tok"));
  ASSERT_TRUE(defaults.has_value()) << defaults.error();
  EXPECT_FALSE(defaults->fleet.connect_timeout.has_value());
  EXPECT_FALSE(defaults->fleet.command_timeout.has_value());
  EXPECT_EQ(defaults->fleet.heartbeat, std::chrono::seconds(1));
  EXPECT_EQ(defaults->fleet.down_for, std::chrono::seconds(5));
  EXPECT_EQ(defaults->fleet.pool_size, 0);
  EXPECT_EQ(LongestRouteDeadline(*defaults), std::chrono::seconds(2));
  EXPECT_EQ(ProbeLease(*defaults), std::chrono::seconds(30)) << "at least 30 s";

  std::string text = kGood;
  text.replace(text.find("fail_open_ready: true\n"), 22, "");
  text +=
      "fleet:\n  connect_timeout: 2s\n  command_timeout: 80ms\n  heartbeat: 200ms\n"
      "  down_for: 1s\n  probe_lease: 3s\n  pool_size: 3\nstrict_ready: true\n";
  Result<GatewayConfig> c = ParseGatewayConfig(text, "gw.yaml", Env("tok"));
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->fleet.connect_timeout, std::chrono::seconds(2));
  EXPECT_EQ(c->fleet.command_timeout, std::chrono::milliseconds(80));
  EXPECT_EQ(c->fleet.heartbeat, std::chrono::milliseconds(200));
  EXPECT_EQ(c->fleet.down_for, std::chrono::seconds(1));
  EXPECT_EQ(ProbeLease(*c), std::chrono::seconds(3));
  EXPECT_EQ(c->fleet.pool_size, 3);
  EXPECT_TRUE(c->strict_ready);

  // A route deadline of 60 s raises the default lease past it.
  std::string slow = kGood;
  slow.replace(slow.find("    timeout: 2s\n"), 16, "    timeout: 60s\n");
  Result<GatewayConfig> s = ParseGatewayConfig(slow, "gw.yaml", Env("tok"));
  ASSERT_TRUE(s.has_value()) << s.error();
  EXPECT_EQ(ProbeLease(*s), std::chrono::seconds(65));

  // Equal to the deadline: refused, naming both.
  Result<GatewayConfig> short_lease =
      ParseGatewayConfig(std::string(kGood) + "fleet:\n  probe_lease: 2s\n", "gw.yaml", Env("tok"));
  ASSERT_FALSE(short_lease.has_value());
  EXPECT_THAT(std::string(short_lease.error().message()),
              HasSubstr("fleet.probe_lease: must be longer than the longest route deadline (2s)"));

  // The former spelling still means what it meant; both at odds are refused.
  std::string former = kGood;
  former.replace(former.find("fail_open_ready: true"), 21, "fail_open_ready: false");
  Result<GatewayConfig> f = ParseGatewayConfig(former, "gw.yaml", Env("tok"));
  ASSERT_TRUE(f.has_value()) << f.error();
  EXPECT_TRUE(f->strict_ready);
  Result<GatewayConfig> both =
      ParseGatewayConfig(std::string(kGood) + "strict_ready: false\n", "gw.yaml", Env("tok"));
  EXPECT_TRUE(both.has_value()) << "fail_open_ready: true is strict_ready: false";
  Result<GatewayConfig> odds =
      ParseGatewayConfig(std::string(kGood) + "strict_ready: true\n", "gw.yaml", Env("tok"));
  ASSERT_FALSE(odds.has_value());
  EXPECT_THAT(std::string(odds.error().message()), HasSubstr("contradicts strict_ready"));

  for (const char* bad : {"  pool_size: 0\n", "  heartbeat: 0s\n", "  bogus: 1\n"}) {
    Result<GatewayConfig> b =
        ParseGatewayConfig(std::string(kGood) + "fleet:\n" + bad, "gw.yaml", Env("tok"));
    EXPECT_FALSE(b.has_value()) << bad;
  }
}

TEST(GatewayConfig, ErrorsNameFileLineColumnAndKey) {
  const std::string text = R"(listen: 127.0.0.1:8080
upstreams:
  - name: graph
    base_url: ftp://graph.local
routes:
  - name: r
    method: FETCH
    path: /v1/{account}/x
    upstream: nope
    upstream_path: /{acount}/x
    workload: write
    provider: meta
    subject: "{account}"
    cache:
      fresh_for: 10m
      max_stale: 1m
    colour: blue
)";
  Result<GatewayConfig> c = ParseGatewayConfig(text, "gw.yaml", Env(std::nullopt));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
  const std::string m(c.error().message());
  EXPECT_THAT(
      m, HasSubstr("gw.yaml:4:15: upstreams[0].base_url: expected http://host[:port][/prefix]"));
  EXPECT_THAT(m, HasSubstr("gw.yaml:7:13: routes[0].method: expected one of GET, POST, PUT, PATCH, "
                           "DELETE, got \"FETCH\""));
  EXPECT_THAT(m, HasSubstr("gw.yaml:9:15: routes[0].upstream: no upstream named \"nope\""));
  EXPECT_THAT(m, HasSubstr("gw.yaml:10:20: routes[0].upstream_path: {acount} is not a parameter"));
  EXPECT_THAT(m, HasSubstr("gw.yaml:11:15: routes[0].workload: expected one of read, publish, "
                           "reply, token-refresh, got \"write\""));
  EXPECT_THAT(m, HasSubstr("routes[0].cache.max_stale: must be >= fresh_for"));
  EXPECT_THAT(m, HasSubstr("routes[0].cache: only GET routes may be cached"));
  EXPECT_THAT(m, HasSubstr("gw.yaml:17:5: routes[0].colour: unknown key"));
}

// The transient circuit's window is TIME_BASED seconds: a size the window
// could not allocate is refused where it is written, not by bad_alloc.
TEST(GatewayConfig, TransientWindowHasAMaximum) {
  for (const char* window : {"2147483647s", "4294967306s", "86401s"}) {
    const std::string text = std::string("breakers:\n  transient:\n    window: ") + window + "\n";
    Result<GatewayConfig> c = ParseGatewayConfig(text, "gw.yaml", Env(std::nullopt));
    ASSERT_FALSE(c.has_value()) << window;
    EXPECT_THAT(std::string(c.error().message()),
                HasSubstr("gw.yaml:3:13: breakers.transient.window: must be a whole number of "
                          "seconds in [1s, 1d]"))
        << window;
  }
  Result<GatewayConfig> day =
      ParseGatewayConfig("breakers:\n  transient:\n    window: 1d\n", "gw.yaml", Env(std::nullopt));
  if (day.has_value()) {
    EXPECT_TRUE(TransientTemplate(day->breakers).Validate().ok());
  } else {
    // Other settings (no routes, say) may be required; the window is not the fault.
    EXPECT_THAT(std::string(day.error().message()), Not(HasSubstr("transient.window")));
  }
}

TEST(GatewayConfig, TheSnapshotTierIsBoundedInEntriesAndBytes) {
  const std::string base =
      "upstreams:\n  - {name: g, base_url: \"http://127.0.0.1:1\"}\n"
      "routes:\n  - {name: r, method: GET, path: /x, upstream: g, upstream_path: /x,\n"
      "     workload: read, provider: p, subject: s}\n";
  Result<GatewayConfig> defaults = ParseGatewayConfig(base, "gw.yaml", Env(std::nullopt));
  ASSERT_TRUE(defaults.has_value()) << defaults.error();
  EXPECT_EQ(defaults->cache_max_entries, 10000u);
  EXPECT_EQ(defaults->cache_max_bytes, std::size_t{64} << 20);
  Result<GatewayConfig> set = ParseGatewayConfig(
      base + "cache: {max_entries: 50, max_bytes: 1048576}\n", "gw.yaml", Env(std::nullopt));
  ASSERT_TRUE(set.has_value()) << set.error();
  EXPECT_EQ(set->cache_max_entries, 50u);
  EXPECT_EQ(set->cache_max_bytes, 1048576u);
  Result<GatewayConfig> tiny =
      ParseGatewayConfig(base + "cache: {max_bytes: 10}\n", "gw.yaml", Env(std::nullopt));
  ASSERT_FALSE(tiny.has_value());
  EXPECT_THAT(std::string(tiny.error().message()), HasSubstr("cache.max_bytes"));
}

TEST(GatewayConfig, TheAdminTokenComesFromTheEnvironmentAndIsNeverShown) {
  const std::string text = R"(admin:
  token_env: TOKEN_VAR
  audit_log: /tmp/a.jsonl
upstreams: []
routes: []
)";
  Result<GatewayConfig> missing = ParseGatewayConfig(text, "gw.yaml", Env(std::nullopt));
  ASSERT_FALSE(missing.has_value());
  EXPECT_THAT(
      std::string(missing.error().message()),
      HasSubstr("gw.yaml:2:14: admin.token_env: environment variable TOKEN_VAR is not set"));
  Result<GatewayConfig> bad =
      ParseGatewayConfig(std::string(text) + "workers: many\n", "gw.yaml", Env("hunter2-secret"));
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(std::string(bad.error().message()), Not(HasSubstr("hunter2-secret")));
}

TEST(GatewayConfig, YamlSyntaxErrorsHaveAPosition) {
  Result<GatewayConfig> c = ParseGatewayConfig("routes: [\n  - a\n", "gw.yaml", Env(std::nullopt));
  ASSERT_FALSE(c.has_value());
  EXPECT_THAT(std::string(c.error().message()), ::testing::StartsWith("gw.yaml:"));
}

TEST(GatewayConfig, MissingFileIsNamed) {
  Result<GatewayConfig> c = LoadGatewayConfig("/no/such/gateway.yaml", Env(std::nullopt));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message(), "/no/such/gateway.yaml: cannot read the file");
}

// The loader's byte limit holds for the file read itself: /dev/zero is never
// done, and is refused after 1 MiB and one byte instead of filling memory.
TEST(GatewayConfig, AFileOverOneMiBIsRefusedUnread) {
  Result<GatewayConfig> c = LoadGatewayConfig("/dev/zero", Env(std::nullopt));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().message(), "/dev/zero: larger than 1 MiB");
}

TEST(GatewayConfig, FleetTlsKeysAreReadOneByOne) {
  const std::string yaml = std::string(kGood) + R"(fleet:
  tls:
    ca_file: /etc/fusebox/redis-ca.pem
    insecure_skip_verify: false
)";
  Result<GatewayConfig> c = ParseGatewayConfig(yaml, "gw.yaml", Env("tok"));
  ASSERT_TRUE(c.has_value()) << c.error();
  EXPECT_EQ(c->fleet_tls.ca_file, "/etc/fusebox/redis-ca.pem");
  EXPECT_EQ(c->fleet_tls.insecure_skip_verify, false);
  EXPECT_FALSE(c->fleet_tls.client_cert.has_value()) << "unset keys leave the URL's";
  EXPECT_FALSE(c->fleet_tls.client_key.has_value());

  Result<GatewayConfig> bad =
      ParseGatewayConfig(std::string(kGood) + "fleet:\n  tls:\n    ca: x\n", "gw.yaml", Env("tok"));
  ASSERT_FALSE(bad.has_value());
  EXPECT_THAT(std::string(bad.error().message()), HasSubstr("fleet.tls"));
}

TEST(GatewayConfig, ParseListen) {
  std::string host;
  int port = 0;
  EXPECT_TRUE(ParseListen("[::1]:8080", host, port).ok());
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 8080);
  EXPECT_FALSE(ParseListen("localhost", host, port).ok());
  EXPECT_FALSE(ParseListen("h:70000", host, port).ok());
}

}  // namespace
}  // namespace fusebox::gateway
