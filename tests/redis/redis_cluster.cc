#include "tests/redis/redis_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace fusebox::redis::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// The primary's port in a CLUSTER SLOTS reply for `slot`, or 0.
int PortServing(const Reply& slots, std::uint16_t slot) {
  if (!slots.is_array()) return 0;
  for (const Reply& range : slots.elements) {
    if (!range.is_array() || range.elements.size() < 3) continue;
    if (range.elements[0].integer <= slot && slot <= range.elements[1].integer &&
        range.elements[2].is_array() && range.elements[2].elements.size() >= 2) {
      return static_cast<int>(range.elements[2].elements[1].integer);
    }
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<RedisCluster>> RedisCluster::Start() {
  if (FindInPath("redis-cli").empty()) {
    return Status::Unavailable("redis-cli not found in PATH: install redis-tools (`make deps`)");
  }
  std::unique_ptr<RedisCluster> cluster(new RedisCluster());
  for (int i = 0; i < kPrimaries * 2; ++i) {
    auto server = RedisServer::Start(
        RedisServerOptions{.cluster_enabled = true,
                           .extra_args = {"--cluster-node-timeout", "1000",
                                          "--cluster-replica-validity-factor", "0"}});
    if (!server) return server.error();
    cluster->nodes_.push_back(std::move(*server));
  }
  std::vector<std::string> args = {"--cluster", "create"};
  for (auto& n : cluster->nodes_) args.push_back("127.0.0.1:" + std::to_string(n->port()));
  args.insert(args.end(), {"--cluster-replicas", "1", "--cluster-yes"});
  if (Status s = cluster->RedisCli(args, seconds(60)); !s.ok()) return s;
  if (Status s = cluster->WaitConverged(seconds(30)); !s.ok()) return s;
  // Each replica synced, so that WAIT can be acknowledged from the start.
  const bool synced = PollUntil(
      [&] {
        for (auto& n : cluster->nodes_) {
          Result<Reply> info = n->Admin({"INFO", "replication"});
          if (!info || !info->is_string()) return false;
          const bool primary = info->str.find("role:master") != std::string::npos;
          if (info->str.find(primary ? "connected_slaves:1" : "master_link_status:up") ==
              std::string::npos) {
            return false;
          }
        }
        return true;
      },
      seconds(30));
  if (!synced) return Status::Unavailable("the cluster's replicas did not sync in 30 s");
  return cluster;
}

RedisServer* RedisCluster::ByPort(int port) {
  for (auto& n : nodes_) {
    if (n->port() == port) return n.get();
  }
  return nullptr;
}

std::string RedisCluster::Url(std::string_view query) const {
  std::string url = "redis-cluster://";
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    url += (i == 0 ? "" : ",") + std::string("127.0.0.1:") + std::to_string(nodes_[i]->port());
  }
  return url + std::string(query);
}

ConnectionOptions RedisCluster::options() const {
  Result<ConnectionOptions> o = ParseRedisUrl(Url("?connect_timeout=500ms&timeout=500ms"));
  return o ? *o : ConnectionOptions{};
}

int RedisCluster::OwnerPort(std::uint16_t slot, std::size_t asker) {
  if (asker >= nodes_.size() || !nodes_[asker]->running()) return 0;
  Result<Reply> r = nodes_[asker]->Admin({"CLUSTER", "SLOTS"});
  return r ? PortServing(*r, slot) : 0;
}

Result<std::string> RedisCluster::NodeId(int port) {
  RedisServer* node = ByPort(port);
  if (node == nullptr) return Status::InvalidArgument("no node on port " + std::to_string(port));
  Result<Reply> r = node->Admin({"CLUSTER", "MYID"});
  if (!r) return r.error();
  if (!r->is_string()) return Status::Internal("CLUSTER MYID: " + r->ToString());
  return r->str;
}

Status RedisCluster::Reshard(int from_port, int to_port, int slots) {
  Result<std::string> from = NodeId(from_port);
  if (!from) return from.error();
  Result<std::string> to = NodeId(to_port);
  if (!to) return to.error();
  return RedisCli(
      {"--cluster", "reshard", "127.0.0.1:" + std::to_string(from_port), "--cluster-from", *from,
       "--cluster-to", *to, "--cluster-slots", std::to_string(slots), "--cluster-yes"},
      seconds(60));
}

Status RedisCluster::WaitConverged(Duration bound) {
  std::string last;
  const bool ok = PollUntil(
      [&] {
        int first[3] = {0, 0, 0};
        bool seen = false;
        for (std::size_t i = 0; i < nodes_.size(); ++i) {
          if (!nodes_[i]->running()) continue;
          Result<Reply> info = nodes_[i]->Admin({"CLUSTER", "INFO"});
          if (!info || !info->is_string() ||
              info->str.find("cluster_state:ok") == std::string::npos) {
            last = "node " + std::to_string(nodes_[i]->port()) + " is not cluster_state:ok";
            return false;
          }
          const int ports[3] = {OwnerPort(0, i), OwnerPort(8191, i), OwnerPort(16383, i)};
          for (int k = 0; k < 3; ++k) {
            if (ports[k] == 0 || (seen && ports[k] != first[k]) || ByPort(ports[k]) == nullptr ||
                !ByPort(ports[k])->running()) {
              last =
                  "the nodes do not agree on who serves slot " + std::to_string(k == 0   ? 0
                                                                                : k == 1 ? 8191
                                                                                         : 16383);
              return false;
            }
            first[k] = ports[k];
          }
          seen = true;
        }
        return seen;
      },
      bound);
  if (ok) return Status();
  return Status::Unavailable("the cluster did not converge: " + last);
}

Status RedisCluster::RedisCli(const std::vector<std::string>& args, Duration bound) {
  const std::string cli = FindInPath("redis-cli");
  std::vector<std::string> all = {cli};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  char path[] = "/tmp/fusebox-redis-cli-XXXXXX";
  const int out = mkstemp(path);
  if (out < 0) return Status::Internal(std::string("mkstemp: ") + std::strerror(errno));
  const pid_t pid = fork();
  if (pid < 0) {
    close(out);
    return Status::Internal(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    dup2(out, 1);
    dup2(out, 2);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out);
  int wstatus = 0;
  const bool exited = PollUntil([&] { return waitpid(pid, &wstatus, WNOHANG) == pid; }, bound);
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &wstatus, 0);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  tool_output_ = text.str();
  std::remove(path);
  if (!exited) return Status::Unavailable("redis-cli " + args[1] + " did not finish in time");
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::Internal("redis-cli " + args[1] + " failed:\n" + tool_output_);
  }
  return Status();
}

}  // namespace fusebox::redis::testing
