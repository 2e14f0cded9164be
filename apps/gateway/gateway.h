// apps/gateway/gateway.h: the HTTP gateway (docs/gateway.md), as a library
// that `fusebox gateway` runs and tests start in-process.
//
// A Gateway listens as soon as Create() returns, serving seed 000's flow for
// each configured route (snapshot cache -> quota and transient circuits ->
// upstream), plus /healthz, /readyz, /metrics, the admin API and /dashboard.
//
//   auto gw = fusebox::gateway::Gateway::Create({.config = *config});
//   if (!gw) { std::cerr << gw.error() << '\n'; return 1; }
//   std::cout << "listening on " << (*gw)->port() << '\n';
//   ...
//   (*gw)->Shutdown();  // graceful: in-flight requests finish (bounded)
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_GATEWAY_H_
#define FUSEBOX_APPS_GATEWAY_GATEWAY_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "apps/gateway/config.h"
#include "fusebox/clock.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"
#include "fusebox/shared_state.h"
#include "fusebox/snapshot_store.h"

namespace fusebox::gateway {

struct GatewayOptions {
  GatewayConfig config;
  // Times the breakers and the snapshots' ages (not network deadlines).
  // Default: SystemClock(). Must outlive the gateway.
  Clock* clock = nullptr;
  // Where lifecycle lines go ("fusebox gateway: ..."). Default: stderr.
  std::ostream* log = nullptr;
  // Tests only: called with each request's target just before it is
  // handled, on the I/O thread (`worker` false) and again if it goes to a
  // worker. It may throw, to show what any exception there becomes: a 500
  // INTERNAL_ERROR for that request, a log line, and nothing else.
  std::function<void(std::string_view target, bool worker)> before_handling_for_testing = nullptr;
};

class Gateway {
 public:
  // Builds everything (Redis clients when config.redis_url is set, audit log,
  // upstream pools), binds the listener and starts serving. Fails with
  // kInvalidArgument or kUnavailable naming what is wrong (a port in use, an
  // audit log that cannot be opened, a bad Redis URL; never a secret).
  static Result<std::unique_ptr<Gateway>> Create(GatewayOptions options);

  // Shuts down (as Shutdown()) if still running.
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // The port actually bound (useful with port 0).
  int port() const;
  // "host:port" actually bound.
  std::string address() const;

  // Graceful shutdown: stops accepting, lets in-flight requests finish for at
  // most limits.shutdown_grace, closes idle keep-alive and SSE connections,
  // stops the threads, then releases the breakers (and with them any probe
  // lease) and flushes the shared state. Idempotent; returns when done.
  void Shutdown();

  // The breakers (for tests and the command's final report).
  Registry& registry();

  // Blocks until `n` requests wait on the single-flight call for snapshot
  // key `key` (SnapshotKey("gw:<route>:<upstream path>", query)).
  void AwaitSingleFlightWaitersForTesting(std::string_view key, std::size_t n);

  struct Impl;

 private:
  explicit Gateway(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// `fusebox gateway`: loads `config_path`, applies --redis and --listen when
// non-empty, serves until SIGTERM or SIGINT, then shuts down gracefully.
// Prints "fusebox gateway: listening on HOST:PORT" on `out` once listening.
// Returns the exit status: 0 after a clean shutdown, 1 on a bad
// configuration or a failed start (the message on `err`).
int RunGateway(const std::string& config_path, const std::string& redis_url,
               const std::string& listen, std::ostream& out, std::ostream& err);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_GATEWAY_H_
