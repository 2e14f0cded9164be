// libFuzzer target for the gateway's request path: raw bytes through Beast's
// request parser with the gateway's limits, then the Handler's answers, on
// the I/O thread (Dispatch) and on a worker (Handle): route matching,
// percent-decoding and the path parameters' checks, query parsing, snapshot
// keys, the admin API's token check and JSON bodies, /metrics. The routes
// take their provider and subject from path parameters, so decoded bytes
// reach circuit keys, breaker names, the shared state (Redis keys, in the
// gateway), metrics labels and the error envelopes. A fake fleet state holds
// every circuit FORCED_OPEN, so no input reaches the network, and checks
// every circuit name it is given; every JSON answer must parse.
#include <algorithm>
#include <atomic>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>

#include "apps/gateway/config.h"
#include "apps/gateway/dashboard_stats.h"
#include "apps/gateway/handler.h"
#include "fusebox/config_names.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/metrics.h"
#include "fusebox/registry.h"
#include "fusebox/shared_state.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/testing/manual_clock.h"

namespace {

namespace beast = boost::beast;
namespace bhttp = beast::http;     // (fusebox::http is the classifier module)
using namespace fusebox;           // NOLINT
using namespace fusebox::gateway;  // NOLINT

using Json = nlohmann::json;

// Text that a Redis key, a log line and a JSON string can all hold as it
// is: valid UTF-8 (nlohmann's strict dump throws otherwise) without control
// characters. Anything else from outside must have been refused before.
void CheckText(std::string_view text) {
  for (char c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) std::abort();
  }
  try {
    (void)Json(std::string(text)).dump();
  } catch (const Json::exception&) {
    std::abort();
  }
}

// The fleet's state as Redis would hold it, with every circuit under a
// FORCED_OPEN override: each breaker reads it before its first call.
class ForcedOpenFleet : public SharedState {
 public:
  SubscriptionId Subscribe(std::string_view circuit,
                           std::shared_ptr<SharedStateListener>) override {
    CheckText(circuit);
    return ++next_;
  }
  void Unsubscribe(SubscriptionId) override {}
  Result<SharedCircuitView> Read(std::string_view circuit) override {
    CheckText(circuit);
    return SharedCircuitView{
        .override_in_force = SharedOverride{
            .kind = SharedOverride::Kind::kForcedOpen, .reason = "fuzz", .actor = "fuzz"}};
  }
  void Trip(std::string_view circuit, Duration, std::string_view) override { CheckText(circuit); }
  fusebox::ProbeLease AcquireProbe(std::string_view circuit, Duration) override {
    CheckText(circuit);
    return {.verdict = fusebox::ProbeLease::Verdict::kBusy, .remaining = std::chrono::hours(1)};
  }
  void Close(std::string_view, std::string_view) override {}
  void Release(std::string_view, std::string_view) override {}

 private:
  std::atomic<SubscriptionId> next_{0};
};

struct World {
  testing::ManualClock clock;
  GatewayConfig config;
  std::shared_ptr<ForcedOpenFleet> fleet = std::make_shared<ForcedOpenFleet>();
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
    provider: "{provider}"
    subject: "{account}"
    cache:
      fresh_for: 1s
  - name: media
    method: GET
    path: /v1/{provider}/accounts/{account}/media
    upstream: u
    upstream_path: /{account}/media
    workload: read
    provider: "{provider}"
    subject: "{account}:{provider}"
  - name: w
    method: POST
    path: /v1/{provider}/accounts/{account}/media_publish
    upstream: u
    upstream_path: /{account}/media_publish
    workload: publish
    provider: "{provider}"
    subject: "{account}"
)",
        "fuzz.yaml", [](std::string_view) { return std::optional<std::string>("token"); });
    if (!c) std::abort();
    config = std::move(*c);
    store = std::move(*MemorySnapshotStore::Create({.clock = &clock, .max_entries = 64}));
    registry = std::move(*Registry::Create({.clock = &clock, .max_breakers = 64}));
    CircuitBreakerConfig transient = TransientTemplate(config.breakers);
    CircuitBreakerConfig quota = QuotaTemplate(config.breakers);
    transient.shared_state = fleet;
    quota.shared_state = fleet;
    if (!registry->AddConfig(std::string(meta::kTransientConfigName), transient).ok() ||
        !registry->AddConfig(std::string(meta::kQuotaConfigName), quota).ok()) {
      std::abort();
    }
    handler = std::make_unique<Handler>(Handler::Deps{.config = &config,
                                                      .registry = registry.get(),
                                                      .store = store.get(),
                                                      .metrics = &metrics,
                                                      .shared_state_healthy = nullptr,
                                                      .instance = "fuzz",
                                                      .store_may_block = false,
                                                      .circuits_may_block = true});
  }
};

// An answer must be a status the server can write, and JSON when it says so.
void CheckAnswer(const HttpResponse& r) {
  if (r.status < 200 || r.status > 599) std::abort();
  if (r.content_type == "application/json" && !Json::accept(r.body)) std::abort();
  if (r.content_type != "application/json") {
    // /metrics: line by line.
    std::string_view rest = r.body;
    while (!rest.empty()) {
      const std::size_t eol = std::min(rest.find('\n'), rest.size());
      CheckText(rest.substr(0, eol));
      rest.remove_prefix(std::min(eol + 1, rest.size()));
    }
  }
  for (const auto& [name, value] : r.headers) CheckText(value);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A new world now and then: every distinct key is a pair of breakers,
  // kept while FORCED_OPEN.
  static World* world = new World();
  static std::uint64_t runs = 0;
  if (++runs % 4096 == 0) {
    delete world;
    world = new World();
  }
  bhttp::request_parser<bhttp::string_body> parser;
  parser.header_limit(8192);
  parser.body_limit(1 << 16);
  parser.eager(true);
  beast::error_code ec;
  parser.put(boost::asio::buffer(data, size), ec);
  if (ec || !parser.is_done()) return 0;
  bhttp::request<bhttp::string_body> req = parser.release();
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
  std::function<void(HttpResponse)> later = [](HttpResponse) { std::abort(); };
  if (world->handler->Dispatch(request, 0, now, later) == Handler::Dispatched::kAnswered) {
    CheckAnswer(now);
  }
  // The worker's.
  CheckAnswer(world->handler->Handle(request));
  // The dashboard stream's filter (/dashboard/events?q=...&top=N): parsed
  // from the same target; its canonical form names a channel and must parse.
  const std::size_t q = request.target.find('?');
  Result<DashboardFilter> filter =
      DashboardFilter::Parse(q == std::string::npos ? "" : request.target.substr(q + 1));
  if (filter.has_value()) {
    if (filter->top < 1 || filter->top > DashboardFilter::kMaxTop) std::abort();
    if (!Json::accept(filter->Canonical())) std::abort();
  }
  return 0;
}
