// A real redis-server for tests: started on a free 127.0.0.1 port in a temp
// directory, with no persistence, and stopped, killed, restarted or paused
// on demand.
//
// Test-only (not installed, not part of fusebox::redis). It manages a
// process, so unlike library code it waits with real sleeps, always with a
// bound (tests/ is outside the no-direct-clock check). Start() fails, with a
// message saying what to install, when redis-server is missing: Redis tests
// fail, never skip.
//
//   auto server = RedisServer::Start();
//   ASSERT_TRUE(server.has_value()) << server.error();
//   auto conn = (*server)->Connect();
//
// Not thread-safe.
#ifndef FUSEBOX_TESTS_REDIS_REDIS_SERVER_H_
#define FUSEBOX_TESTS_REDIS_REDIS_SERVER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/redis/connection.h"
#include "fusebox/result.h"

namespace fusebox::redis::testing {

// A TLS-only server: --port 0 --tls-port N with these files, and what the
// harness' own connections (readiness, Admin()) present.
struct RedisServerTls {
  std::string cert_file;
  std::string key_file;
  // --tls-ca-cert-file: the CA client certificates must chain to.
  std::string ca_cert_file;
  // --tls-auth-clients: "no", "optional" or "yes".
  std::string auth_clients = "optional";
  // What the harness trusts and presents (client_* may be empty).
  std::string client_ca_file;
  std::string client_cert;
  std::string client_key;
  // The host the harness connects to (checked against the certificate).
  std::string host = "127.0.0.1";
  // For a certificate the harness cannot verify (the refusal tests).
  bool insecure_skip_verify = false;
};

// A Redis Sentinel instead of a data server: monitors `master_name` at
// 127.0.0.1:primary_port, with small timings so that a failover fits in a
// test. Runs redis-sentinel when installed (Debian's redis-sentinel), else
// redis-server --sentinel.
struct RedisSentinelConfig {
  int primary_port = 0;
  std::string master_name = "mymaster";
  int quorum = 2;
  // sentinel down-after-milliseconds / failover-timeout.
  Duration down_after = std::chrono::milliseconds(500);
  Duration failover_timeout = std::chrono::milliseconds(2000);
};

struct RedisServerOptions {
  // Started with --requirepass when non-empty.
  std::string password{};
  // --cluster-enabled yes (a single node with no slots assigned: enough for
  // CLUSTER KEYSLOT).
  bool cluster_enabled = false;
  // Appended to the command line, e.g. {"--maxmemory", "1mb"}.
  std::vector<std::string> extra_args{};
  // Set: TLS only (no plain port).
  std::optional<RedisServerTls> tls{};
  // Set: a replica of 127.0.0.1:replica_of (--replicaof).
  int replica_of = 0;
  // Set: a sentinel (the fields above but extra_args do not apply).
  std::optional<RedisSentinelConfig> sentinel{};
};

class RedisServer {
 public:
  static Result<std::unique_ptr<RedisServer>> Start(RedisServerOptions options = {});

  // Kills the server (SIGKILL) if it runs and removes its directory.
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  bool running() const { return pid_ > 0; }

  // Options to reach this server (with its password, and for a TLS server
  // the harness' TLS settings), with the given command timeout.
  ConnectionOptions connection_options(Duration command_timeout = std::chrono::seconds(2)) const;
  Result<std::unique_ptr<Connection>> Connect(
      Duration command_timeout = std::chrono::seconds(2)) const;

  // SIGTERM, then waits for the exit (SIGKILL after 5 s).
  Status Stop();
  // SIGKILL, then waits for the exit.
  Status Kill();
  // SIGSTOP: the server keeps its connections and answers nothing, as a
  // stuck process or a paused VM does. Resume() (SIGCONT) undoes it; the
  // destructor resumes a suspended server before killing it.
  Status Suspend();
  Status Resume();
  // Stops the server if it runs and starts a new one on the same port; its
  // data is gone (no persistence), and so is its script cache.
  Status Restart();

  // A command on the harness' own connection, reconnected when broken (e.g.
  // after Restart()). Error replies are returned as replies.
  Result<Reply> Admin(std::initializer_list<std::string_view> args);

  // CLIENT PAUSE <d> ALL: every client's commands wait (the harness' own
  // connection included), up to `d`.
  Status Pause(Duration d);
  // CLIENT KILL TYPE pubsub: drops every subscriber connection. Returns how
  // many were killed.
  Result<std::int64_t> KillPubSubClients();
  // CLIENT KILL TYPE normal: drops every command connection but the
  // harness' own, as the server's idle `timeout` would. Returns how many
  // were killed.
  Result<std::int64_t> KillNormalClients();
  // INFO commandstats as command -> calls ("evalsha" -> 3). Commands never
  // called are absent.
  Result<std::map<std::string, std::int64_t>> CommandCalls();
  // CONFIG RESETSTAT.
  Status ResetStats();
  // SCRIPT FLUSH.
  Status ScriptFlush();

  // The last bytes of the server's log, for failure messages.
  std::string LogTail() const;

 private:
  RedisServer(RedisServerOptions options, std::string dir);

  Status Spawn();
  // The command line of a sentinel (writes its config file).
  Result<std::vector<std::string>> SentinelArgs() const;
  Status WaitReady();
  Status WaitExit(Duration bound);

  RedisServerOptions options_;
  std::string dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<Connection> admin_;
};

// Calls `done` every millisecond until it returns true or `bound` has passed;
// returns its last answer. For waiting on Redis (a TTL to run out), never on
// a fixed sleep.
bool PollUntil(const std::function<bool()>& done, Duration bound = std::chrono::seconds(5));

// `name` in PATH (then /usr/sbin and /usr/bin), or "".
std::string FindInPath(std::string_view name);

// A 127.0.0.1 port that was free a moment ago (nothing listens on it).
Result<int> FreeLoopbackPort();
// The same for a cluster node: at most 55535, and its bus port (+ 10000)
// free too.
Result<int> FreeClusterPort();

// The Redis PTTL of `key` in ms (-2 absent, -1 no TTL), or -3 on error.
std::int64_t Pttl(Connection& conn, std::string_view key);

}  // namespace fusebox::redis::testing

#endif  // FUSEBOX_TESTS_REDIS_REDIS_SERVER_H_
