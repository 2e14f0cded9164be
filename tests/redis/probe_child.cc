// One "instance" for RedisSharedStateTest.SeparateProcessesShareOneProbe: a
// process with its own RedisSharedState and breaker on circuit argv[2] of the
// Redis at 127.0.0.1:argv[1]. It calls until its breaker has asked Redis for
// the probe lease, prints "probe" or "rejected", and exits without running
// destructors, so that a lease it holds is neither used nor given back (as if
// it were still probing).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "fusebox/circuit_breaker.h"
#include "fusebox/redis/shared_state.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PORT CIRCUIT\n", argv[0]);
    return 2;
  }
  fusebox::redis::SharedStateOptions options;
  options.connection.port = std::atoi(argv[1]);
  auto store = fusebox::redis::RedisSharedState::Create(options);
  if (!store) {
    std::fprintf(stderr, "%s\n", std::string(store.error().message()).c_str());
    return 1;
  }
  for (int i = 0; i < 2000 && !(*store)->healthy(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  fusebox::CircuitBreakerConfig config;
  config.permitted_number_of_calls_in_half_open_state = 1;
  config.shared_state = *store;
  auto breaker = fusebox::CircuitBreaker::Create(argv[2], config);
  if (!breaker) return 1;
  for (int i = 0; i < 2000; ++i) {
    auto permit = (*breaker)->TryAcquire();
    if (permit) {
      std::printf("probe\n");
      std::fflush(stdout);
      _exit(0);
    }
    const auto stats = (*store)->stats();
    if (stats.leases_busy > 0) {
      std::printf("rejected\n");
      std::fflush(stdout);
      _exit(0);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::printf("undecided\n");
  std::fflush(stdout);
  _exit(3);
}
