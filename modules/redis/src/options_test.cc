#include "fusebox/redis/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace fusebox::redis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Status ParseError(std::string_view url) {
  Result<ConnectionOptions> r = ParseRedisUrl(url);
  EXPECT_FALSE(r.has_value()) << url;
  return r ? Status() : r.error();
}

TEST(ParseRedisUrl, HostOnlyTakesDefaults) {
  Result<ConnectionOptions> r = ParseRedisUrl("redis://cache.internal");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->host, "cache.internal");
  EXPECT_EQ(r->port, 6379);
  EXPECT_EQ(r->db, 0);
  EXPECT_EQ(r->username, "");
  EXPECT_EQ(r->password, "");
  EXPECT_EQ(r->connect_timeout, ConnectionOptions{}.connect_timeout);
  EXPECT_EQ(r->command_timeout, ConnectionOptions{}.command_timeout);
}

TEST(ParseRedisUrl, PasswordPortAndDb) {
  Result<ConnectionOptions> r = ParseRedisUrl("redis://:s3cret@10.0.0.7:6380/2");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->host, "10.0.0.7");
  EXPECT_EQ(r->port, 6380);
  EXPECT_EQ(r->db, 2);
  EXPECT_EQ(r->username, "");
  EXPECT_EQ(r->password, "s3cret");
}

TEST(ParseRedisUrl, AclUserAndPassword) {
  Result<ConnectionOptions> r = ParseRedisUrl("redis://alice:pw@host/0");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->username, "alice");
  EXPECT_EQ(r->password, "pw");
}

TEST(ParseRedisUrl, PercentEncodedAndRawAtInPassword) {
  Result<ConnectionOptions> r = ParseRedisUrl("redis://:p%3Aw%2Fd%40x@host");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->password, "p:w/d@x");
  // An unencoded '@' in the password still parses: the last '@' ends it.
  r = ParseRedisUrl("redis://:a@b@host:7000");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->password, "a@b");
  EXPECT_EQ(r->host, "host");
  EXPECT_EQ(r->port, 7000);
}

TEST(ParseRedisUrl, BracketedIpv6) {
  Result<ConnectionOptions> r = ParseRedisUrl("redis://[::1]:6390/3");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->host, "::1");
  EXPECT_EQ(r->port, 6390);
  EXPECT_EQ(r->db, 3);
  EXPECT_EQ(r->Endpoint(), "[::1]:6390");
}

TEST(ParseRedisUrl, TrailingSlashMeansDbZero) {
  Result<ConnectionOptions> r = ParseRedisUrl("redis://host:1/");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->port, 1);
  EXPECT_EQ(r->db, 0);
}

TEST(ParseRedisUrl, TlsWithItsSettings) {
  Result<ConnectionOptions> plain = ParseRedisUrl("rediss://:pw@cache.internal:6380/2");
  ASSERT_TRUE(plain.has_value()) << plain.error();
  EXPECT_TRUE(plain->tls);
  EXPECT_EQ(plain->host, "cache.internal");
  EXPECT_EQ(plain->port, 6380);
  EXPECT_EQ(plain->db, 2);
  EXPECT_EQ(plain->password, "pw");
  EXPECT_TRUE(plain->ca_file.empty());
  EXPECT_FALSE(plain->insecure_skip_verify);
  EXPECT_FALSE(ParseRedisUrl("redis://h")->tls);

  Result<ConnectionOptions> r = ParseRedisUrl(
      "rediss://u:pw@h/0?ca_file=/etc/ca%20dir/ca.pem&client_cert=/c.pem&client_key=/k.pem"
      "&insecure_skip_verify=true");
  ASSERT_TRUE(r.has_value()) << r.error();
  EXPECT_EQ(r->ca_file, "/etc/ca dir/ca.pem");
  EXPECT_EQ(r->client_cert, "/c.pem");
  EXPECT_EQ(r->client_key, "/k.pem");
  EXPECT_TRUE(r->insecure_skip_verify);
  EXPECT_EQ(r->Describe(),
            "rediss://u:***@h:6379/0?ca_file=/etc/ca dir/ca.pem&client_cert=/c.pem&client_key=/"
            "k.pem&insecure_skip_verify=true");
  EXPECT_FALSE(ParseRedisUrl("rediss://h?insecure_skip_verify=0")->insecure_skip_verify);
  // A '?' in a password, percent-encoded, stays in the password.
  EXPECT_EQ(ParseRedisUrl("rediss://:a%3Fb@h")->password, "a?b");
}

TEST(ParseRedisUrl, TlsSettingsErrorsNameTheKey) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"redis://h?ca_file=/ca.pem", "'ca_file' is a TLS setting: it needs rediss://"},
      {"redis://h?insecure_skip_verify=true", "'insecure_skip_verify' is a TLS setting"},
      {"rediss://h?ca_file=/a&ca_file=/b", "'ca_file' is given twice"},
      {"rediss://h?ca_file=", "'ca_file' is empty"},
      {"rediss://h?ca_file", "'ca_file' has no '=value'"},
      {"rediss://h?insecure_skip_verify=maybe", "insecure_skip_verify must be true or false"},
      {"rediss://h?timeout=soon", "positive duration such as 250ms"},
      {"rediss://h?db=1", "unknown query parameter 'db'"},
      {"rediss://h?ca_file=%zz", "percent-encoding in query parameter 'ca_file'"},
  };
  for (const Case& c : cases) {
    const Status s = ParseError(c.url);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.url;
  }
}

TEST(ConnectionOptions, ValidateChecksTlsSettings) {
  ConnectionOptions o;
  o.ca_file = "/etc/hostname";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("ca_file is a TLS setting"));
  o.tls = true;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.ca_file = "/nonexistent/fusebox-ca.pem";
  EXPECT_THAT(std::string(o.Validate().message()),
              HasSubstr("ca_file '/nonexistent/fusebox-ca.pem' cannot be read"));
  o.ca_file.clear();
  o.client_cert = "/etc/hostname";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("client_cert and client_key"));
  o.client_key = "/nonexistent/key.pem";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("client_key '/nonexistent/key.pem'"));
  o.tls = false;
  o.client_cert.clear();
  o.client_key.clear();
  o.insecure_skip_verify = true;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("insecure_skip_verify"));
}

TEST(ParseRedisUrl, NamesWhatIsWrong) {
  struct Case {
    const char* url;
    const char* says;
  } cases[] = {
      {"http://host", "must start with redis://, rediss://, redis-sentinel:// or redis-cluster://"},
      {"redis://", "host is empty"},
      {"redis://:6379", "host is empty"},
      {"redis://host:", "port after ':' is empty"},
      {"redis://host:0", "port 0 is not in 1..65535"},
      {"redis://host:65536", "port 65536 is not in 1..65535"},
      {"redis://host:-1", "port is not a number"},
      {"redis://host/x", "database number"},
      {"redis://host/-1", "database number"},
      {"redis://host?timeout=1x", "positive duration such as 250ms, got \"1x\""},
      {"redis://host?timeout=0ms", "positive duration such as 250ms, got \"0ms\""},
      {"redis://host?connect_timeout=-1.5s", "got \"-1.5s\""},
      {"redis://host?connect_timeout", "has no '=value'"},
      {"redis://host?db=2", "unknown query parameter 'db'"},
      {"redis://:a?b@host", "must be percent-encoded"},
      {"redis://host#frag", "fragment"},
      {"redis://ho st", "host has a character"},
      {"redis://[::1", "not closed"},
      {"redis://[::1]x", "after the IPv6 host"},
      {"redis://:%zz@host", "percent-encoding in the password"},
      {"redis://%g@host", "no ':'"},
      {"redis://u%1:pw@host", "percent-encoding in the user name"},
      {"redis://:@host", "password after ':' is empty"},
  };
  for (const Case& c : cases) {
    const Status s = ParseError(c.url);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.url;
  }
}

TEST(ParseRedisUrl, QuerySetsTheTimeouts) {
  Result<ConnectionOptions> o =
      ParseRedisUrl("redis://:pw@host:6380/2?connect_timeout=2s&timeout=40ms");
  ASSERT_TRUE(o.has_value()) << o.error().message();
  EXPECT_EQ(o->connect_timeout, std::chrono::seconds(2));
  EXPECT_EQ(o->command_timeout, std::chrono::milliseconds(40));
  EXPECT_EQ(o->port, 6380);
  EXPECT_EQ(o->db, 2);
  EXPECT_EQ(o->password, "pw");
  // One alone leaves the other at its default.
  Result<ConnectionOptions> only = ParseRedisUrl("redis://host?timeout=1s");
  ASSERT_TRUE(only.has_value());
  EXPECT_EQ(only->command_timeout, std::chrono::seconds(1));
  EXPECT_EQ(only->connect_timeout, ConnectionOptions{}.connect_timeout);
}

TEST(ParseRedisUrl, QuerySetsTheReplicaAcknowledgement) {
  Result<ConnectionOptions> o = ParseRedisUrl("redis://host?wait_replicas=2&wait_timeout=150ms");
  ASSERT_TRUE(o.has_value()) << o.error();
  EXPECT_EQ(o->wait_replicas, 2);
  EXPECT_EQ(o->wait_timeout, std::chrono::milliseconds(150));
  EXPECT_TRUE(o->Validate().ok());
  EXPECT_EQ(o->Describe(), "redis://host:6379/0?wait_replicas=2&wait_timeout=150ms");
  Result<ConnectionOptions> sentinel =
      ParseRedisUrl("redis-sentinel://s1,s2/mymaster?wait_replicas=1&timeout=40ms");
  ASSERT_TRUE(sentinel.has_value()) << sentinel.error();
  EXPECT_EQ(sentinel->wait_replicas, 1);
  EXPECT_EQ(sentinel->wait_timeout, ConnectionOptions{}.wait_timeout);
  // Off by default.
  EXPECT_EQ(ParseRedisUrl("redis://host")->wait_replicas, 0);
  for (const auto& [url, expected] : std::vector<std::pair<std::string, std::string>>{
           {"redis://host?wait_replicas=17", "wait_replicas': expected an integer in 0..16"},
           {"redis://host?wait_replicas=-1", "expected an integer in 0..16"},
           {"redis://host?wait_replicas=one", "expected an integer in 0..16"},
           {"redis://host?wait_timeout=0ms", "wait_timeout': expected a positive duration"},
           {"redis://host?wait_timeout=11s", "wait_timeout': at most 10s"},
           {"redis://host?wait_replicas=1&wait_replicas=1", "given twice"},
       }) {
    Result<ConnectionOptions> r = ParseRedisUrl(url);
    ASSERT_FALSE(r.has_value()) << url;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(r.error().message()), HasSubstr(expected)) << url;
  }
  ConnectionOptions bad;
  bad.wait_replicas = 17;
  EXPECT_THAT(std::string(bad.Validate().message()), HasSubstr("wait_replicas 17"));
  bad.wait_replicas = 1;
  bad.wait_timeout = std::chrono::seconds(11);
  EXPECT_THAT(std::string(bad.Validate().message()), HasSubstr("wait_timeout"));
}

TEST(ParseRedisUrl, ErrorsNeverContainThePassword) {
  // Each URL is wrong somewhere and holds the secret where a password (or a
  // mistyped one) would be.
  const std::string secret = "Tr0ub4dor3xyz";
  const std::string urls[] = {
      "redis://:" + secret + "@host:99999",
      "redis://:" + secret + "@host/db",
      "redis://:" + secret + "@ho st",
      "redis://:" + secret + "%zz@host",
      "redis://" + secret + "@host",  // the ':' forgotten
      "redis://host:" + secret,       // the password typed as the port
      "redis://host/" + secret,
      "redis://:" + secret + "@host?x=1",
      "rediss://:" + secret + "@host:0",
      "rediss://:ab?" + secret + "@host",
      "rediss://:ab#" + secret + "@host",
      "rediss://:" + secret + "@host?" + secret + "=1",
      // A password with a '?' typed as the port: its tail lands in a
      // timeout's value (found by redis_parsers_fuzzer).
      "redis://host:ab?connect_timeout=;" + secret,
      "redis://host:ab?timeout=" + secret,
  };
  for (const std::string& url : urls) {
    const Status s = ParseError(url);
    EXPECT_THAT(s.ToString(), Not(HasSubstr(secret))) << s;
    EXPECT_THAT(s.ToString(), Not(HasSubstr("Tr0ub"))) << s;
  }
}

TEST(ConnectionOptions, DescribeMasksThePassword) {
  ConnectionOptions o;
  o.host = "h";
  o.port = 7;
  o.db = 1;
  EXPECT_EQ(o.Describe(), "redis://h:7/1");
  o.password = "s3cret";
  EXPECT_EQ(o.Describe(), "redis://:***@h:7/1");
  o.username = "alice";
  EXPECT_EQ(o.Describe(), "redis://alice:***@h:7/1");
}

TEST(ConnectionOptions, ValidateNamesTheField) {
  ConnectionOptions o;
  EXPECT_TRUE(o.Validate().ok());
  o.port = 0;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("port 0"));
  o.port = 65536;  // set directly, not through a URL
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("port 65536 is not in 1..65535"));
  o.port = 65535;
  EXPECT_TRUE(o.Validate().ok());
  o = {};
  o.host = "";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("host is empty"));
  o = {};
  o.command_timeout = Duration::zero();
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("command_timeout"));
  o = {};
  o.connect_timeout = -std::chrono::milliseconds(1);
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("connect_timeout"));
  o = {};
  o.db = -1;
  EXPECT_EQ(o.Validate().code(), StatusCode::kInvalidArgument);
  o = {};
  o.username = "alice";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("username needs a password"));
}

// --- Sentinel (redis-sentinel://) --------------------------------------------------

TEST(ParseRedisUrl, SentinelListMasterAndDb) {
  Result<ConnectionOptions> o = ParseRedisUrl(
      "redis-sentinel://:pw@s1:26380,s2,[::1]:26381/my-master.1/3?timeout=100ms&"
      "sentinel_password=s%40p");
  ASSERT_TRUE(o.has_value()) << o.error();
  ASSERT_EQ(o->sentinels.size(), 3u);
  EXPECT_EQ(o->sentinels[0].host, "s1");
  EXPECT_EQ(o->sentinels[0].port, 26380);
  EXPECT_EQ(o->sentinels[1].host, "s2");
  EXPECT_EQ(o->sentinels[1].port, 26379);  // Sentinel's default port
  EXPECT_EQ(o->sentinels[2].host, "::1");
  EXPECT_EQ(o->master_name, "my-master.1");
  EXPECT_EQ(o->db, 3);
  EXPECT_EQ(o->password, "pw");
  EXPECT_EQ(o->sentinel_password, "s@p");
  EXPECT_EQ(o->command_timeout, std::chrono::milliseconds(100));
  EXPECT_FALSE(o->tls);
  EXPECT_TRUE(o->Validate().ok()) << o->Validate();
  // Messages name the master, not a host nobody configured.
  EXPECT_EQ(o->Endpoint(), "sentinel master 'my-master.1'");
  EXPECT_EQ(o->Describe(), "redis-sentinel://:***@s1:26380,s2:26379,[::1]:26381/my-master.1/3");
  EXPECT_EQ(ParseRedisUrl("redis-sentinel://s/m")->db, 0);
}

TEST(ParseRedisUrl, SentinelErrorsNameThePart) {
  std::string seventeen = "redis-sentinel://";
  for (int i = 0; i < 17; ++i) seventeen += (i == 0 ? "h" : ",h");
  seventeen += "/m";
  struct Case {
    std::string url;
    const char* says;
  } cases[] = {
      {"redis-sentinel://s1:26379", "the master name is missing"},
      {"redis-sentinel://s1:26379/", "the master name is missing"},
      {"redis-sentinel://s1,s2:0/m", "sentinel 2: port 0 is not in 1..65535"},
      {"redis-sentinel://s1,,s3/m", "sentinel 2: the host is empty"},
      {"redis-sentinel://s1,s 2/m", "sentinel 2: the host has a character"},
      {"redis-sentinel://s1/m/x", "after the master name the path must be a database number"},
      {"redis-sentinel://s1/m!x", "the master name has a character other than"},
      {"redis-sentinel://s1/" + std::string(65, 'm'), "the master name is longer than 64"},
      {seventeen, "more than 16 sentinels"},
      {"redis-sentinel://s1/m?ca_file=/ca", "not supported on redis-sentinel://"},
      {"redis://h?sentinel_password=x", "is a Sentinel setting: it needs redis-sentinel://"},
      {"redis-sentinel://s1/m?sentinel_password=", "'sentinel_password' is empty"},
      {"redis-sentinel://s1/m?sentinel_password=%zz", "percent-encoding in query parameter"},
      {"sentinel://s1/m",
       "must start with redis://, rediss://, redis-sentinel:// or redis-cluster://"},
  };
  for (const Case& c : cases) {
    const Status s = ParseError(c.url);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.url;
  }
}

TEST(ParseRedisUrl, SentinelErrorsNeverContainAPassword) {
  const std::string secret = "Tr0ub4dor3xyz";
  const std::string urls[] = {
      "redis-sentinel://:" + secret + "@s1:99999/m",
      "redis-sentinel://:" + secret + "@s1/m/x",
      "redis-sentinel://" + secret + "@s1/m",
      "redis-sentinel://s1:" + secret + "/m",
      "redis-sentinel://s1," + secret + ":x/m",
      "redis-sentinel://s1/" + secret + "!",
      "redis-sentinel://s1/m?sentinel_password=" + secret + "%z",
      "redis-sentinel://s1/m?sentinel_password=" + secret + "&sentinel_password=" + secret,
      "redis://h?sentinel_password=" + secret,
  };
  for (const std::string& url : urls) {
    const Status s = ParseError(url);
    EXPECT_THAT(s.ToString(), Not(HasSubstr(secret))) << s;
    EXPECT_THAT(s.ToString(), Not(HasSubstr("Tr0ub"))) << s;
  }
  // Describe() shows neither password.
  ConnectionOptions o =
      *ParseRedisUrl("redis-sentinel://:" + secret + "@s/m?sentinel_password=" + secret);
  EXPECT_THAT(o.Describe(), Not(HasSubstr(secret)));
}

TEST(ConnectionOptions, ValidateChecksSentinelFields) {
  ConnectionOptions o;
  o.master_name = "m";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("need sentinels"));
  o.host.clear();
  o.sentinels = {{"s1", 26379}, {"", 26379}};
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("sentinel 2: host is empty"));
  o.sentinels[1] = {"s2", 0};
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("sentinel 2: port 0"));
  o.sentinels[1].port = 26379;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.master_name = "";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("master_name is empty"));
  o.master_name = "m";
  o.sentinels.resize(kMaxSentinels + 1, {"s", 26379});
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("at most 16"));
}

// --- Cluster (redis-cluster://) ----------------------------------------------------

TEST(ParseRedisUrl, ClusterSeedsAndQuery) {
  Result<ConnectionOptions> o =
      ParseRedisUrl("redis-cluster://:pw@n1:7000,n2,[::1]:7002?timeout=100ms&wait_replicas=1");
  ASSERT_TRUE(o.has_value()) << o.error();
  ASSERT_EQ(o->cluster_nodes.size(), 3u);
  EXPECT_EQ(o->cluster_nodes[0].host, "n1");
  EXPECT_EQ(o->cluster_nodes[0].port, 7000);
  EXPECT_EQ(o->cluster_nodes[1].port, 6379);  // Redis' default port
  EXPECT_EQ(o->cluster_nodes[2].host, "::1");
  EXPECT_TRUE(o->host.empty());
  EXPECT_EQ(o->password, "pw");
  EXPECT_EQ(o->command_timeout, std::chrono::milliseconds(100));
  EXPECT_EQ(o->wait_replicas, 1);
  EXPECT_TRUE(o->Validate().ok()) << o->Validate();
  EXPECT_EQ(o->Endpoint(), "cluster n1:7000 (+2 seeds)");
  EXPECT_EQ(o->Describe(),
            "redis-cluster://:***@n1:7000,n2:6379,[::1]:7002?wait_replicas=1&wait_timeout=100ms");
  EXPECT_TRUE(ParseRedisUrl("redis-cluster://n1/0").has_value());
}

TEST(ParseRedisUrl, ClusterErrorsNameThePartAndNeverThePassword) {
  std::string seventeen = "redis-cluster://";
  for (int i = 0; i < 17; ++i) seventeen += (i == 0 ? "h" : ",h");
  struct Case {
    std::string url;
    const char* says;
  } cases[] = {
      {"redis-cluster://n1,n2:0", "cluster node 2: port 0 is not in 1..65535"},
      {"redis-cluster://n1,,n3", "cluster node 2: the host is empty"},
      {"redis-cluster://n1/2", "a Redis Cluster has only database 0"},
      {"redis-cluster://n1?ca_file=/ca", "not supported on redis-cluster://"},
      {"redis-cluster://n1?sentinel_password=x", "it needs redis-sentinel://"},
      {seventeen, "more than 16 cluster nodes"},
      {"redis-cluster://:Tr0ub4dor3xyz@n1:99999", "port 99999 is not in 1..65535"},
      {"redis-cluster://n1:Tr0ub4dor3xyz,n2", "cluster node 1: the port is not a number"},
  };
  for (const Case& c : cases) {
    const Status s = ParseError(c.url);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.url;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says)) << c.url;
    EXPECT_THAT(s.ToString(), Not(HasSubstr("Tr0ub"))) << s;
  }
}

TEST(ConnectionOptions, ValidateChecksClusterFields) {
  ConnectionOptions o;
  o.host.clear();
  o.cluster_nodes = {{"n1", 7000}, {"", 7001}};
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("cluster node 2: host is empty"));
  o.cluster_nodes[1] = {"n2", 70000};
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("cluster node 2: port 70000"));
  o.cluster_nodes[1].port = 7001;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  o.db = 1;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("only database 0"));
  o.db = 0;
  o.tls = true;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("TLS is not supported"));
  o.tls = false;
  o.sentinels = {{"s", 26379}};
  o.master_name = "m";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("exclude each other"));
  o.sentinels.clear();
  o.master_name.clear();
  o.cluster_nodes.resize(kMaxClusterSeeds + 1, {"n", 7000});
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("at most 16"));
}

}  // namespace
}  // namespace fusebox::redis
