// A real Redis Cluster for tests: three primaries and three replicas, each a
// RedisServer on a free loopback port, joined by `redis-cli --cluster
// create` and resharded by `redis-cli --cluster reshard`, as an operator
// would. cluster-node-timeout is 1000 ms, so that a killed primary's replica
// takes over within a few seconds.
//
// Test-only, like RedisServer: it waits with bounded polls and fails (never
// skips) when redis-server or redis-cli is missing.
//
//   auto cluster = RedisCluster::Start();
//   ASSERT_TRUE(cluster.has_value()) << cluster.error();
//   ConnectionOptions o = (*cluster)->options();  // redis-cluster:// seeds
//
// Not thread-safe.
#ifndef FUSEBOX_TESTS_REDIS_REDIS_CLUSTER_H_
#define FUSEBOX_TESTS_REDIS_REDIS_CLUSTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusebox/redis/options.h"
#include "fusebox/result.h"
#include "tests/redis/redis_server.h"

namespace fusebox::redis::testing {

class RedisCluster {
 public:
  static constexpr int kPrimaries = 3;

  static Result<std::unique_ptr<RedisCluster>> Start();

  // Every node, primaries first as created (roles change after a failover).
  std::vector<std::unique_ptr<RedisServer>>& nodes() { return nodes_; }
  RedisServer* ByPort(int port);

  // A redis-cluster:// URL naming every node as a seed, its query extended
  // by `query` ("?timeout=200ms...").
  std::string Url(std::string_view query = "") const;
  ConnectionOptions options() const;

  // The port of the primary serving `slot` as node `asker` sees it (0 when
  // none or on error).
  int OwnerPort(std::uint16_t slot, std::size_t asker = 0);
  // CLUSTER MYID of the node on `port`.
  Result<std::string> NodeId(int port);

  // redis-cli --cluster reshard: `slots` slots from the primary on
  // `from_port` to the one on `to_port`.
  Status Reshard(int from_port, int to_port, int slots);
  // Until every running node says cluster_state:ok and names the same
  // primary for slots 0, 8191 and 16383, within `bound`.
  Status WaitConverged(Duration bound);

  // The output of the last redis-cli run, for failure messages.
  const std::string& tool_output() const { return tool_output_; }

 private:
  RedisCluster() = default;
  // Runs redis-cli with `args`, within `bound`; its output in tool_output_.
  Status RedisCli(const std::vector<std::string>& args, Duration bound);

  std::vector<std::unique_ptr<RedisServer>> nodes_;
  std::string tool_output_;
};

}  // namespace fusebox::redis::testing

#endif  // FUSEBOX_TESTS_REDIS_REDIS_CLUSTER_H_
