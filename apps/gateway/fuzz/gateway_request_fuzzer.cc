// libFuzzer target for the gateway's request path: raw bytes through Beast's
// request parser with the gateway's limits, then the Handler's answers, on
// the I/O thread (Dispatch) and on a worker (Handle): route matching,
// percent-decoding, query parsing, snapshot keys, the admin API's token check
// and JSON bodies, /metrics. The only route's circuits are forced open, so no
// input reaches the network.
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string_view>

#include "apps/gateway/config.h"
#include "apps/gateway/handler.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/metrics.h"
#include "fusebox/registry.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/testing/manual_clock.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace fusebox;           // NOLINT
using namespace fusebox::gateway;  // NOLINT

struct World {
  testing::ManualClock clock;
  GatewayConfig config;
  std::unique_ptr<MemorySnapshotStore> store;
  MetricsCollector metrics;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<Handler> handler;

  World() {
    Result<GatewayConfig> c = ParseGatewayConfig(
        R"(admin:
  token_env: T
  audit_log: /dev/null
upstreams:
  - name: u
    base_url: http://127.0.0.1:9
routes:
  - name: r
    method: GET
    path: /v1/{provider}/accounts/{account}/insights
    upstream: u
    upstream_path: /{account}/insights
    workload: read
    provider: fuzz
    subject: fixed
    cache:
      fresh_for: 1s
)",
        "fuzz.yaml", [](std::string_view) { return std::optional<std::string>("token"); });
    if (!c) std::abort();
    config = std::move(*c);
    store = std::move(*MemorySnapshotStore::Create({.clock = &clock, .max_entries = 64}));
    registry = std::move(*Registry::Create({.clock = &clock, .max_breakers = 64}));
    meta::ProviderCircuits circuits =
        meta::GetProviderCircuits(*registry, "provider:fuzz:read:fixed");
    circuits.transient->ForceOpen({.reason = "fuzz", .actor = "fuzz"});
    circuits.quota->ForceOpen({.reason = "fuzz", .actor = "fuzz"});
    handler = std::make_unique<Handler>(Handler::Deps{.config = &config,
                                                      .registry = registry.get(),
                                                      .store = store.get(),
                                                      .metrics = &metrics,
                                                      .shared_state_healthy = nullptr,
                                                      .instance = "fuzz"});
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* world = new World();
  http::request_parser<http::string_body> parser;
  parser.header_limit(8192);
  parser.body_limit(1 << 16);
  parser.eager(true);
  beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_done()) return 0;
  http::request<http::string_body> req = parser.release();
  HttpRequest request;
  request.method = std::string(req.method_string());
  request.target = std::string(req.target());
  for (const auto& field : req) {
    request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  request.body = req.body();
  // Admin actions other than reset would change the forced circuits; keep
  // the world stable by not letting them through.
  if (request.target.find("/admin/circuits/") != std::string::npos) request.method = "GET";
  // The I/O thread's path (one route match: an answer now, or a worker's).
  HttpResponse now;
  std::function<void(HttpResponse)> later = [](HttpResponse) {};
  if (world->handler->Dispatch(request, 0, now, later) == Handler::Dispatched::kAnswered &&
      (now.status < 200 || now.status > 599)) {
    std::abort();
  }
  // The worker's.
  HttpResponse response = world->handler->Handle(request);
  if (response.status < 200 || response.status > 599) std::abort();
  return 0;
}
