// fusebox/redis/options.h: where and how to connect to Redis.
//
// ConnectionOptions is a plain struct; ParseRedisUrl() fills one from a URL
// such as "redis://:s3cret@cache.internal:6380/2", or over TLS
// "rediss://:s3cret@cache.internal:6380/2?ca_file=/etc/fusebox/redis-ca.pem".
// A Sentinel-managed primary is named instead of addressed:
// "redis-sentinel://:s3cret@sentinel-a:26379,sentinel-b:26379/mymaster/2":
// every connect asks the sentinels where the primary is (see `sentinels`).
// A Redis Cluster is named by some of its nodes:
// "redis-cluster://:s3cret@10.0.0.1:7000,10.0.0.2:7000": every connect asks
// one of them for the slot map and each command goes to the node that
// serves its key (see `cluster_nodes`).
// The password is a secret: it never appears in an error message, in
// Describe() or in anything this module logs.
//
//   fusebox::Result<fusebox::redis::ConnectionOptions> options =
//       fusebox::redis::ParseRedisUrl(std::getenv("REDIS_URL"));
//   if (!options) return options.error();  // names what is wrong, not the password
//   options->command_timeout = std::chrono::milliseconds(50);
//
// Thread-safe: the functions are pure.
#ifndef FUSEBOX_REDIS_OPTIONS_H_
#define FUSEBOX_REDIS_OPTIONS_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::redis {

// Where one Redis Sentinel listens.
struct SentinelAddress {
  // Host name or IP address (IPv6 without brackets).
  std::string host;
  // TCP port, 1..65535. Default: 26379, Sentinel's own.
  int port = 26379;

  // "host:port" ("[v6]:port"), as ConnectionOptions::Endpoint().
  std::string Endpoint() const;
};

// At most this many sentinels in ConnectionOptions::sentinels (a Sentinel
// deployment has 3 or 5; the list is tried in turn within one connect).
inline constexpr std::size_t kMaxSentinels = 16;
// Where one Redis Cluster node listens (a seed of ConnectionOptions::
// cluster_nodes).
struct NodeAddress {
  // Host name or IP address (IPv6 without brackets).
  std::string host;
  // TCP port, 1..65535. Default: 6379.
  int port = 6379;

  // "host:port" ("[v6]:port"), as ConnectionOptions::Endpoint().
  std::string Endpoint() const;
};

// At most this many seeds in ConnectionOptions::cluster_nodes (any one that
// answers gives the whole slot map).
inline constexpr std::size_t kMaxClusterSeeds = 16;
// MOVED and ASK replies followed for one command before it fails with
// kUnavailable (a slot map that keeps changing, or nodes that disagree).
inline constexpr int kMaxRedirects = 5;
// A master name is 1..kMaxMasterNameLength of letters, digits, '.', '_', '-'.
inline constexpr std::size_t kMaxMasterNameLength = 64;
// Bounds of ConnectionOptions::wait_replicas and wait_timeout.
inline constexpr int kMaxWaitReplicas = 16;
inline constexpr Duration kMaxWaitTimeout = std::chrono::seconds(10);

struct ConnectionOptions {
  // Host name or IP address (IPv6 without brackets). Default: "127.0.0.1".
  // With sentinels: ignored when connecting (leave it empty, as
  // ParseRedisUrl does, so that messages name the master instead); a
  // Connection's options() show the primary it found here.
  std::string host = "127.0.0.1";
  // TCP port, 1..65535. Default: 6379.
  int port = 6379;
  // ACL user name (Redis 6+). Empty: AUTH with the password alone, which
  // authenticates as the "default" user. Default: empty.
  std::string username;
  // Password for AUTH. Empty: no AUTH is sent. A secret: never logged.
  // Default: empty.
  std::string password;
  // Database selected with SELECT after connecting, 0..(databases - 1).
  // Default: 0 (no SELECT is sent).
  int db = 0;
  // Bounds the TCP connect, and separately each command of the handshake
  // (AUTH, SELECT). Default: 500 ms.
  Duration connect_timeout = std::chrono::milliseconds(500);
  // Bounds each read and each write of a command's reply (SO_RCVTIMEO and
  // SO_SNDTIMEO): a command against a paused or dead server fails with
  // kUnavailable after about this long. Default: 250 ms, far above a loopback
  // or same-zone round trip (well under 1 ms) and short enough that a caller
  // guarded by its own breaker does not stall.
  Duration command_timeout = std::chrono::milliseconds(250);
  // Sends TCP keepalive probes (hiredis' 15 s interval), so that a peer that
  // vanished without a FIN is noticed on an idle subscriber connection.
  // Default: true.
  bool tcp_keepalive = true;

  // TLS (rediss://): TLS 1.2 or later, SNI, the server's chain verified
  // against the system trust store plus ca_file, and its certificate against
  // `host` (a name or an IP address). Default: false (plain TCP).
  bool tls = false;
  // PEM file of extra trusted CAs (a private CA), added to the system store.
  // Default: empty (system store only). Only with tls.
  std::string ca_file;
  // PEM client certificate (chain) and its private key, for servers that
  // demand one (mutual TLS, redis-server --tls-auth-clients yes). Both or
  // neither. Default: empty (no client certificate). Only with tls.
  std::string client_cert;
  std::string client_key;
  // Accepts any server certificate: no chain or hostname check. For tests
  // and emergencies only; every TLS context made with it logs a WARNING
  // ("redis_tls_insecure"). Default: false. Only with tls.
  bool insecure_skip_verify = false;

  // Receives this module's warnings as (event, message): "redis_auth_failed"
  // when the server refuses AUTH, "redis_tls_insecure" for
  // insecure_skip_verify. Messages never contain the password. Default
  // (empty): one line on stderr, "fusebox redis WARNING <event>: <message>".
  // Called on the thread that connects; must be thread-safe.
  std::function<void(std::string_view event, std::string_view message)> warn;

  // Sentinel (redis-sentinel://). Non-empty: the primary is found through
  // these sentinels, and host and port are only where the last connect found
  // it. Each connect (and so each reconnect) asks them in turn, starting with
  // the last one that answered, `SENTINEL get-master-addr-by-name
  // master_name`, connects to the address named, authenticates, selects db
  // and checks with ROLE that the server is a master: a stale answer or a
  // demoted primary is refused and the next sentinel asked. The whole of it,
  // every sentinel included, is bounded by connect_timeout. A connection
  // whose server answers READONLY (its primary was demoted) is broken, so
  // that the next use finds the new primary. At most kMaxSentinels.
  // Default: empty (connect to host:port).
  std::vector<SentinelAddress> sentinels;
  // The name the sentinels monitor the primary under ("sentinel monitor
  // <name> ..."); required with sentinels, 1..kMaxMasterNameLength of
  // letters, digits, '.', '_' and '-'. Default: empty.
  std::string master_name;
  // Password for AUTH to the sentinels (their requirepass), which need not be
  // the data password. Empty: no AUTH to sentinels. A secret: never logged.
  // Default: empty.
  std::string sentinel_password;

  // Durability of the fleet's writes across a failover (RedisSharedState;
  // the snapshot store, a cache, ignores it). A trip or override acknowledged
  // by the primary alone is lost if the primary dies before replicating it.
  // With wait_replicas > 0, once the trips and overrides queued are written
  // (the queue drained, or 64 of them sent) the store's background thread
  // sends `WAIT wait_replicas wait_timeout` on the same connection, once per
  // node written, and counts whether that many replicas acknowledged them
  // (SharedStateStats::replica_acks, replica_ack_shortfalls, per op; a
  // shortfall is also warned through Warn("redis_replica_ack_short"), at
  // most once per 10 s). The caller who tripped never waits for it; the
  // store's thread does, one round trip per burst and node, and up to
  // wait_timeout while replicas lag: ops queued meanwhile reach Redis that
  // much later (with what is left of their time: expired_in_queue). WAIT
  // does not make Redis strongly consistent: a failover may still promote a
  // replica that was not among those that acknowledged (docs/distributed.md).
  // 0..kMaxWaitReplicas; 0: no WAIT is sent. Default: 0.
  int wait_replicas = 0;
  // Redis Cluster (redis-cluster://). Non-empty: some nodes of the cluster
  // (seeds), and host and port are only the node the last connect asked for
  // the slot map (leave host empty, as ParseRedisUrl does). Each connect (and
  // so each reconnect) asks the seeds in turn, then the nodes of the last
  // map, for CLUSTER SLOTS, all within connect_timeout. Then:
  //   - a command with a key (GET, SET, DEL, PTTL, the hash commands, EVAL
  //     and EVALSHA by their first key) goes to the primary serving the
  //     key's slot, on a connection to that node made when first needed;
  //     keyless commands (PING, PUBLISH, ...) and subscriptions go to the
  //     node the map came from, and WAIT to the node of the last keyed
  //     command;
  //   - a MOVED reply updates the map and the command is sent again there;
  //     an ASK reply (a slot being migrated) sends ASKING then the command to
  //     the node named, without changing the map; at most kMaxRedirects;
  //   - SCAN walks every primary in turn, with a cursor of its own.
  // Pub/sub uses classic SUBSCRIBE, which Redis Cluster delivers from every
  // node (docs/distributed.md says why not SSUBSCRIBE). Only database 0;
  // TLS is not supported in this mode. At most kMaxClusterSeeds. Default:
  // empty (not a cluster).
  std::vector<NodeAddress> cluster_nodes;

  // How long each WAIT may hold the store's thread, rounded up to whole
  // milliseconds, in (0, kMaxWaitTimeout]. Default: 100 ms.
  Duration wait_timeout = std::chrono::milliseconds(100);

  // "host:port", for messages; with sentinels and no primary found yet,
  // "sentinel master 'name'"; with cluster_nodes and no node asked yet,
  // "cluster h1:p1 (+N seeds)".
  std::string Endpoint() const;

  // "redis[s]://[user:***@]host:port/db[?tls settings]": safe to log, the
  // password is masked (and a user name alone is shown as "user@"). With
  // sentinels: "redis-sentinel://[user:***@]h1:26379,h2:26379/name/db"; and
  // "wait_replicas=N&wait_timeout=Dms" in the query when wait_replicas > 0.
  // With cluster_nodes: "redis-cluster://[user:***@]h1:7000,h2:7000".
  std::string Describe() const;

  // Checks the fields: host non-empty, port 1..65535, db >= 0, timeouts > 0;
  // TLS settings only with tls, client_cert and client_key together, each
  // file given readable; with sentinels, 1..kMaxSentinels of them, each host
  // non-empty and port in range, and a well-formed master_name (a
  // master_name or sentinel_password without sentinels is an error too);
  // wait_replicas in 0..kMaxWaitReplicas, wait_timeout in (0, kMaxWaitTimeout];
  // with cluster_nodes, 1..kMaxClusterSeeds of them with a non-empty host and
  // a port in range, no sentinels, no TLS and db 0.
  // Errors are kInvalidArgument and name the field (and the file).
  Status Validate() const;

  // Reports `event` through `warn`, or on stderr when it is empty.
  void Warn(std::string_view event, std::string_view message) const;
};

// Parses "redis[s]://[[user]:password@]host[:port][/db][?key=value&...]".
//
// - user and password may be percent-encoded (RFC 3986), so that a password
//   can contain ':', '@' or '/'; "redis://:pw@h" has a password and no user,
//   "redis://user:pw@h" both, "redis://user@h" is rejected (a user needs a
//   password).
// - host is a name, an IPv4 address or a bracketed IPv6 address
//   ("redis://[::1]:6380").
// - port defaults to 6379; db (the path) defaults to 0.
// - "rediss://" sets tls; its query may carry the TLS settings ca_file,
//   client_cert, client_key (paths, percent-encoded if need be) and
//   insecure_skip_verify (true/false/1/0). Any other key, a key given twice,
//   or a TLS key on "redis://" is an error naming the key; so is a fragment.
//   A '?' or '#' in a password must be percent-encoded.
// - On either scheme the query may set connect_timeout and timeout (the
//   command timeout), each a positive duration such as 250ms or 2s, and
//   wait_replicas (an integer) and wait_timeout (a duration), the fleet's
//   write acknowledgement: "?wait_replicas=1&wait_timeout=100ms".
// What the query leaves out keeps its default, as does keepalive. Files are
// not read here: Validate() checks them.
//
// Also parses the Sentinel form,
// "redis-sentinel://[[user]:password@]host[:port][,host[:port]...]/master[/db][?...]":
// - the user info is the data password (for the primary), as above;
// - each host[:port] is a sentinel (port defaults to 26379, IPv6 in
//   brackets), at most kMaxSentinels of them;
// - the path is the master name, then optionally the database;
// - the query may set connect_timeout, timeout, wait_replicas, wait_timeout
//   and sentinel_password (the sentinels' own password, percent-encoded);
//   TLS settings are refused.
//
// And the Cluster form, "redis-cluster://[[user]:password@]host[:port][,host[:port]...][?...]":
// the user info as above, each host[:port] a seed node (port defaults to
// 6379, IPv6 in brackets, at most kMaxClusterSeeds), no path (a cluster has
// only database 0, so "/0" alone is accepted), and the query may set
// connect_timeout, timeout, wait_replicas and wait_timeout.
//
// Errors are kInvalidArgument and say which part is wrong ("sentinel 2: the
// port is not a number in 1..65535"). They never contain the password (nor
// the sentinel password), not even part of it.
Result<ConnectionOptions> ParseRedisUrl(std::string_view url);

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_OPTIONS_H_
