#include "tests/redis/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <thread>

namespace fusebox::redis::testing {
namespace {

using std::chrono::milliseconds;

}  // namespace

std::string FindInPath(std::string_view name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  dirs += ":/usr/sbin:/usr/bin";
  std::stringstream ss(dirs);
  for (std::string dir; std::getline(ss, dir, ':');) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + std::string(name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

namespace {

std::string FindRedisServer() {
  if (const char* env = std::getenv("FUSEBOX_REDIS_SERVER"); env != nullptr && *env != '\0') {
    return env;
  }
  return FindInPath("redis-server");
}

}  // namespace

// A port that was free a moment ago: bind 127.0.0.1:0 and read what the
// kernel chose. Another process may take it before redis-server binds it;
// Start() then tries another.
Result<int> FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int e = errno;
    close(fd);
    return Status::Internal(std::string("bind 127.0.0.1:0: ") + std::strerror(e));
  }
  close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

namespace {

bool Bindable(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

}  // namespace

// A cluster node also listens on its port + 10000 (the cluster bus), so its
// port must be at most 55535: the kernel's choice (often above, and the
// next ones near it) will not do. Random ports below, both ends free.
Result<int> FreeClusterPort() {
  thread_local std::minstd_rand random(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 55535);
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = pick(random);
    if (Bindable(port) && Bindable(port + 10000)) return port;
  }
  return Status::Internal("no free 127.0.0.1 port pair (p, p + 10000) with p in [20000, 55535]");
}

bool PollUntil(const std::function<bool()>& done, Duration bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return done();
    std::this_thread::sleep_for(milliseconds(1));
  }
}

std::int64_t Pttl(Connection& conn, std::string_view key) {
  Result<Reply> r = conn.Command({"PTTL", key});
  if (!r || !r->is_integer()) return -3;
  return r->integer;
}

RedisServer::RedisServer(RedisServerOptions options, std::string dir)
    : options_(std::move(options)), dir_(std::move(dir)) {}

RedisServer::~RedisServer() {
  admin_.reset();
  (void)Resume();  // A suspended server would keep its port after the test.
  if (pid_ > 0) (void)Kill();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

Result<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions options) {
  if (FindRedisServer().empty()) {
    return Status::Unavailable(
        "redis-server not found in PATH: install it (apt-get install redis-server, or "
        "`make deps`), or set FUSEBOX_REDIS_SERVER to its path");
  }
  char tmpl[] = "/tmp/fusebox-redis-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return Status::Internal(std::string("mkdtemp: ") + std::strerror(errno));
  }
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options), tmpl));
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    Result<int> port = server->options_.cluster_enabled ? FreeClusterPort() : FreeLoopbackPort();
    if (!port) return port.error();
    server->port_ = *port;
    last = server->Spawn();
    if (last.ok()) return server;
  }
  return last;
}

Result<std::vector<std::string>> RedisServer::SentinelArgs() const {
  const RedisSentinelConfig& c = *options_.sentinel;
  const std::string conf = dir_ + "/sentinel.conf";
  std::ofstream out(conf);
  const auto ms = [](Duration d) {
    return std::to_string(std::chrono::ceil<milliseconds>(d).count());
  };
  out << "port " << port_ << "\nbind 127.0.0.1\ndaemonize no\ndir " << dir_ << "\nlogfile " << dir_
      << "/redis.log\nsentinel monitor " << c.master_name << " 127.0.0.1 " << c.primary_port << " "
      << c.quorum << "\nsentinel down-after-milliseconds " << c.master_name << " "
      << ms(c.down_after) << "\nsentinel failover-timeout " << c.master_name << " "
      << ms(c.failover_timeout) << "\n";
  out.close();
  if (!out) return Status::Internal("cannot write " + conf);
  // Sentinel rewrites its config file: a fresh one per start keeps a
  // restarted sentinel from remembering another test's state.
  if (const std::string sentinel = FindInPath("redis-sentinel"); !sentinel.empty()) {
    return std::vector<std::string>{sentinel, conf};
  }
  return std::vector<std::string>{FindRedisServer(), conf, "--sentinel"};
}

Status RedisServer::Spawn() {
  const std::string binary = FindRedisServer();
  const bool tls = options_.tls.has_value();
  std::vector<std::string> args = {binary,
                                   "--port",
                                   tls ? "0" : std::to_string(port_),
                                   "--bind",
                                   "127.0.0.1",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--dir",
                                   dir_,
                                   "--logfile",
                                   dir_ + "/redis.log"};
  if (!options_.password.empty()) {
    args.insert(args.end(), {"--requirepass", options_.password});
  }
  if (tls) {
    const RedisServerTls& t = *options_.tls;
    args.insert(args.end(), {"--tls-port", std::to_string(port_), "--tls-cert-file", t.cert_file,
                             "--tls-key-file", t.key_file, "--tls-ca-cert-file", t.ca_cert_file,
                             "--tls-auth-clients", t.auth_clients});
  }
  if (options_.cluster_enabled) {
    args.insert(args.end(),
                {"--cluster-enabled", "yes", "--cluster-config-file", dir_ + "/nodes.conf"});
  }
  if (options_.replica_of != 0) {
    args.insert(args.end(), {"--replicaof", "127.0.0.1", std::to_string(options_.replica_of)});
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());
  if (options_.sentinel) {
    Result<std::vector<std::string>> sentinel = SentinelArgs();
    if (!sentinel) return sentinel.error();
    args = std::move(*sentinel);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const std::string stdio_log = dir_ + "/stdio.log";
  const pid_t pid = fork();
  if (pid < 0) return Status::Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. Its stdout and stderr
    // (what it says before its logfile is open) go to a file, not to the
    // test's: a test process that dies without stopping it (a sanitizer's
    // halt) must not leave ctest waiting on a pipe the server holds open.
    if (const int out = open(stdio_log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600); out >= 0) {
      dup2(out, STDOUT_FILENO);
      dup2(out, STDERR_FILENO);
      if (out > STDERR_FILENO) close(out);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  pid_ = pid;
  Status ready = WaitReady();
  if (!ready.ok() && pid_ > 0) (void)Kill();
  return ready;
}

Status RedisServer::WaitReady() {
  ConnectionOptions options = connection_options(milliseconds(200));
  options.connect_timeout = milliseconds(200);
  Status last = Status::Unavailable("not tried");
  const bool ok = PollUntil(
      [&] {
        int wstatus = 0;
        if (waitpid(pid_, &wstatus, WNOHANG) == pid_) {
          pid_ = -1;
          last = Status::Unavailable("redis-server on port " + std::to_string(port_) +
                                     " exited during start-up; log:\n" + LogTail());
          return true;
        }
        Result<std::unique_ptr<Connection>> conn = Connection::Connect(options);
        if (!conn) {
          last = conn.error();
          return false;
        }
        last = (*conn)->Ping();
        return last.ok();
      },
      std::chrono::seconds(10));
  if (!ok) {
    return Status::Unavailable("redis-server on port " + std::to_string(port_) +
                               " did not answer PING within 10 s (" + last.ToString() +
                               "); log:\n" + LogTail());
  }
  return last;
}

Status RedisServer::WaitExit(Duration bound) {
  bool exited = PollUntil(
      [&] {
        int wstatus = 0;
        const pid_t r = waitpid(pid_, &wstatus, WNOHANG);
        return r == pid_ || (r < 0 && errno == ECHILD);
      },
      bound);
  if (!exited) return Status::Unavailable("redis-server did not exit in time");
  pid_ = -1;
  return Status();
}

Status RedisServer::Stop() {
  if (pid_ <= 0) return Status();
  admin_.reset();
  kill(pid_, SIGTERM);
  if (WaitExit(std::chrono::seconds(5)).ok()) return Status();
  return Kill();
}

Status RedisServer::Kill() {
  if (pid_ <= 0) return Status();
  admin_.reset();
  kill(pid_, SIGKILL);
  return WaitExit(std::chrono::seconds(10));
}

Status RedisServer::Suspend() {
  if (pid_ <= 0) return Status::Unavailable("redis-server is not running");
  if (kill(pid_, SIGSTOP) != 0)
    return Status::Unavailable("SIGSTOP: " + std::string(strerror(errno)));
  return Status();
}

Status RedisServer::Resume() {
  if (pid_ <= 0) return Status();
  if (kill(pid_, SIGCONT) != 0)
    return Status::Unavailable("SIGCONT: " + std::string(strerror(errno)));
  return Status();
}

Status RedisServer::Restart() {
  if (Status s = Stop(); !s.ok()) return s;
  // The port may linger in TIME_WAIT from our own connections; redis-server
  // binds with SO_REUSEADDR, but give a refused bind a few more tries.
  Status last;
  for (int attempt = 0; attempt < 20; ++attempt) {
    last = Spawn();
    if (last.ok()) return last;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return last;
}

ConnectionOptions RedisServer::connection_options(Duration command_timeout) const {
  ConnectionOptions options;
  options.host = "127.0.0.1";
  options.port = port_;
  options.password = options_.password;
  options.command_timeout = command_timeout;
  options.connect_timeout = std::chrono::seconds(2);
  if (options_.tls) {
    const RedisServerTls& t = *options_.tls;
    options.host = t.host;
    options.tls = true;
    options.ca_file = t.client_ca_file;
    options.client_cert = t.client_cert;
    options.client_key = t.client_key;
    options.insecure_skip_verify = t.insecure_skip_verify;
    options.warn = [](std::string_view, std::string_view) {};  // the harness' own
  }
  return options;
}

Result<std::unique_ptr<Connection>> RedisServer::Connect(Duration command_timeout) const {
  return Connection::Connect(connection_options(command_timeout));
}

Result<Reply> RedisServer::Admin(std::initializer_list<std::string_view> args) {
  if (admin_ == nullptr || admin_->broken()) {
    Result<std::unique_ptr<Connection>> conn = Connect(std::chrono::seconds(10));
    if (!conn) return std::move(conn).error();
    admin_ = std::move(*conn);
  }
  return admin_->Command(args);
}

Status RedisServer::Pause(Duration d) {
  const std::string ms = std::to_string(std::chrono::ceil<milliseconds>(d).count());
  Result<Reply> r = Admin({"CLIENT", "PAUSE", ms, "ALL"});
  if (!r) return r.error();
  if (r->is_error()) return Status::Internal("CLIENT PAUSE: " + r->str);
  return Status();
}

Result<std::int64_t> RedisServer::KillPubSubClients() {
  Result<Reply> r = Admin({"CLIENT", "KILL", "TYPE", "pubsub"});
  if (!r) return std::move(r).error();
  if (!r->is_integer()) return Status::Internal("CLIENT KILL: " + r->ToString());
  return r->integer;
}

Result<std::int64_t> RedisServer::KillNormalClients() {
  // SKIPME yes (the default): the harness' connection stays.
  Result<Reply> r = Admin({"CLIENT", "KILL", "TYPE", "normal"});
  if (!r) return std::move(r).error();
  if (!r->is_integer()) return Status::Internal("CLIENT KILL: " + r->ToString());
  return r->integer;
}

Result<std::map<std::string, std::int64_t>> RedisServer::CommandCalls() {
  Result<Reply> r = Admin({"INFO", "commandstats"});
  if (!r) return std::move(r).error();
  if (!r->is_string()) return Status::Internal("INFO: " + r->ToString());
  // Lines like "cmdstat_evalsha:calls=3,usec=41,usec_per_call=13.67,...".
  std::map<std::string, std::int64_t> calls;
  std::stringstream ss(r->str);
  constexpr std::string_view kPrefix = "cmdstat_";
  for (std::string line; std::getline(ss, line);) {
    if (!line.starts_with(kPrefix)) continue;
    const std::size_t colon = line.find(':');
    const std::size_t eq = line.find("calls=", colon);
    if (colon == std::string::npos || eq == std::string::npos) continue;
    calls[line.substr(kPrefix.size(), colon - kPrefix.size())] =
        std::strtoll(line.c_str() + eq + 6, nullptr, 10);
  }
  return calls;
}

Status RedisServer::ResetStats() {
  Result<Reply> r = Admin({"CONFIG", "RESETSTAT"});
  if (!r) return r.error();
  return r->is_error() ? Status::Internal("CONFIG RESETSTAT: " + r->str) : Status();
}

Status RedisServer::ScriptFlush() {
  Result<Reply> r = Admin({"SCRIPT", "FLUSH"});
  if (!r) return r.error();
  return r->is_error() ? Status::Internal("SCRIPT FLUSH: " + r->str) : Status();
}

std::string RedisServer::LogTail() const {
  std::string text;
  for (const char* name : {"/stdio.log", "/redis.log"}) {
    std::ifstream in(dir_ + name);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (text.size() > 2000) text = text.substr(text.size() - 2000);
  return text;
}

}  // namespace fusebox::redis::testing
