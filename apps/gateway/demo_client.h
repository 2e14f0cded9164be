// `fusebox gateway-demo`: the client of `make demo`. It walks seed 000's last
// sequence diagram against two running gateway instances that share one
// Redis, in front of `fusebox fake-upstream --script
// apps/gateway/testdata/demo.yaml`, and prints each step: which instance
// answered, fresh / stale / from the upstream, the account's circuit state on
// that instance, and whether the upstream was called (counted by the fake's
// /_fake/calls).
//
// apps/gateway/demo.sh starts and stops the processes around it.
//
// Thread-compatible.
#ifndef FUSEBOX_APPS_GATEWAY_DEMO_CLIENT_H_
#define FUSEBOX_APPS_GATEWAY_DEMO_CLIENT_H_

#include <ostream>
#include <string>

#include "fusebox/clock.h"

namespace fusebox::gateway {

struct GatewayDemoOptions {
  // HOST:PORT of the fake upstream and of the two gateways.
  std::string upstream;
  std::string gateway_a;
  std::string gateway_b;
  // The fake upstream serves HTTPS, its certificate issued by this CA (a
  // PEM file): its call counts are read over HTTPS, verified. "" for HTTP.
  std::string upstream_ca;
  // The admin bearer token (to read circuit states), or "" to skip them.
  std::string admin_token;
  // Waits for Retry-After and snapshot ageing. Default: SystemClock().
  Clock* clock = nullptr;
};

// Returns 0 when every step answered as the diagram says, 1 otherwise (the
// unexpected step is marked on `out`).
int RunGatewayDemo(const GatewayDemoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_DEMO_CLIENT_H_
