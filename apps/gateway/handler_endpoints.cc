// The handler's own status endpoints: /metrics (the collector's families
// plus the gateway's) and /readyz. Split from handler.cc, which keeps the
// request path.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "apps/gateway/handler.h"
#include "fusebox/prometheus.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kResultNames[] = {"fresh", "miss", "stale", "error", "rejected"};
constexpr std::string_view kStatusClasses[] = {"2xx", "3xx", "4xx", "5xx", "error"};
constexpr std::string_view kSnapshotOutcomeNames[] = {"fresh", "expired", "miss", "unavailable",
                                                      "timeout"};

std::string EscapeLabel(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

HttpResponse Handler::Metrics() const {
  HttpResponse r;
  r.content_type = std::string(kPrometheusContentType);
  PrometheusOptions options;
  options.name_label = FoldSubject;
  r.body = RenderPrometheus(deps_.metrics->Collect(*deps_.registry), options);
  std::string& out = r.body;
  out +=
      "# HELP fusebox_gateway_requests_total Requests to proxied routes by how they were "
      "answered.\n# TYPE fusebox_gateway_requests_total counter\n";
  for (const auto& route : routes_) {
    for (int i = 0; i < kAnswerCount; ++i) {
      out += "fusebox_gateway_requests_total{route=\"" + EscapeLabel(route->config->name) +
             "\",result=\"" + std::string(kResultNames[i]) + "\"} " +
             std::to_string(route->counts[i].load(std::memory_order_relaxed)) + "\n";
    }
  }
  out +=
      "# HELP fusebox_gateway_upstream_requests_total Upstream calls by status class.\n"
      "# TYPE fusebox_gateway_upstream_requests_total counter\n";
  for (std::size_t u = 0; u < pools_.size(); ++u) {
    for (int i = 0; i < 5; ++i) {
      out += "fusebox_gateway_upstream_requests_total{upstream=\"" +
             EscapeLabel(pools_[u]->config().name) + "\",status=\"" +
             std::string(kStatusClasses[i]) + "\"} " +
             std::to_string((*upstream_counts_[u])[i].load(std::memory_order_relaxed)) + "\n";
    }
  }
  // The upstream pools' pressure: calls waiting for a reply, connections
  // opened (a pool too small for the load opens one per call), and replies
  // refused for their size.
  auto per_upstream = [&](std::string_view name, std::string_view type, std::string_view help,
                          auto value) {
    out += "# HELP " + std::string(name) + " " + std::string(help) + "\n# TYPE " +
           std::string(name) + " " + std::string(type) + "\n";
    for (std::size_t u = 0; u < pools_.size(); ++u) {
      out += std::string(name) + "{upstream=\"" + EscapeLabel(pools_[u]->config().name) + "\"} " +
             std::to_string(value(u)) + "\n";
    }
  };
  per_upstream("fusebox_gateway_upstream_in_flight_requests", "gauge",
               "Upstream calls sent and not yet answered.",
               [&](std::size_t u) { return upstream_load_[u]->in_flight.load(); });
  per_upstream("fusebox_gateway_upstream_connections_opened_total", "counter",
               "Connections opened to the upstream (keep-alive reuse keeps this low).",
               [&](std::size_t u) {
                 std::uint64_t n = pools_[u]->connections_opened();
                 if (u < async_pools_.size()) {
                   for (const auto& p : async_pools_[u]) n += p->connections_opened();
                 }
                 return n;
               });
  per_upstream("fusebox_gateway_upstream_replies_too_large_total", "counter",
               "Upstream replies refused for their size (UPSTREAM_REPLY_TOO_LARGE).",
               [&](std::size_t u) { return upstream_load_[u]->too_large.load(); });
  per_upstream("fusebox_gateway_upstream_tls_failures_total", "counter",
               "Upstream calls refused by TLS (certificate checks, client certificate): "
               "UPSTREAM_TLS_ERROR, counted in neither circuit.",
               [&](std::size_t u) { return upstream_load_[u]->tls_failures.load(); });
  per_upstream("fusebox_gateway_upstream_tls_handshakes_total", "counter",
               "TLS handshakes with the upstream (keep-alive reuse keeps this low).",
               [&](std::size_t u) {
                 std::uint64_t n = pools_[u]->tls_handshakes();
                 if (u < async_pools_.size()) {
                   for (const auto& p : async_pools_[u]) n += p->tls_handshakes();
                 }
                 return n;
               });
  per_upstream("fusebox_gateway_upstream_tls_sessions_resumed_total", "counter",
               "TLS handshakes with the upstream that resumed a session.", [&](std::size_t u) {
                 std::uint64_t n = pools_[u]->tls_sessions_resumed();
                 if (u < async_pools_.size()) {
                   for (const auto& p : async_pools_[u]) n += p->tls_sessions_resumed();
                 }
                 return n;
               });
  per_upstream("fusebox_gateway_upstream_calls_out_of_time_total", "counter",
               "Upstream calls not sent: the request's deadline passed before (snapshot "
               "store, the circuits' shared state).",
               [&](std::size_t u) { return upstream_load_[u]->out_of_time.load(); });
  out +=
      "# HELP fusebox_gateway_single_flight_merged_total Requests answered by another "
      "request's upstream call.\n# TYPE fusebox_gateway_single_flight_merged_total counter\n"
      "fusebox_gateway_single_flight_merged_total " +
      std::to_string(merged_.load()) + "\n";
  out +=
      "# HELP fusebox_gateway_snapshot_lookups_total Snapshot look-ups of cached reads by "
      "outcome (unavailable and timeout: the store could not answer; not misses).\n"
      "# TYPE fusebox_gateway_snapshot_lookups_total counter\n";
  for (int i = 0; i < kSnapshotOutcomeCount; ++i) {
    out += "fusebox_gateway_snapshot_lookups_total{result=\"" +
           std::string(kSnapshotOutcomeNames[i]) + "\"} " +
           std::to_string(snapshot_lookups_[i].load(std::memory_order_relaxed)) + "\n";
  }
  if (deps_.store_metrics) out += deps_.store_metrics();
  out +=
      "# HELP fusebox_gateway_in_flight_requests Proxied requests being handled.\n"
      "# TYPE fusebox_gateway_in_flight_requests gauge\n"
      "fusebox_gateway_in_flight_requests " +
      std::to_string(in_flight_->load()) + "\n";
  out +=
      "# HELP fusebox_gateway_degraded 1 while the fleet's shared state (Redis) is unreachable "
      "and this instance serves on its own circuits (fail-open), else 0.\n"
      "# TYPE fusebox_gateway_degraded gauge\nfusebox_gateway_degraded " +
      std::string(degraded() ? "1" : "0") + "\n";
  if (deps_.more_metrics) deps_.more_metrics(out);
  return r;
}

HttpResponse Handler::Ready() const {
  // Upstreams whose certificates are not verified, on every answer: never
  // silent (docs/gateway.md, "Upstreams over HTTPS").
  std::string insecure;
  if (std::vector<std::string> names = InsecureUpstreams(*deps_.config); !names.empty()) {
    insecure = R"(,"insecure_upstreams":)" + Json(names).dump();
  }
  auto answer = [&](int status, std::string_view json) {
    return JsonResponse(status, std::string(json.substr(0, json.size() - 1)) + insecure + "}");
  };
  if (draining_.load(std::memory_order_relaxed)) {
    return answer(503, R"({"ready":false,"reason":"shutting down"})");
  }
  if (deps_.shared_state_healthy) {
    // Redis down is every instance's trouble at once: each still serves on
    // its own circuits (fail-open), so by default each stays in its load
    // balancer and says it is degraded; strict_ready turns them away.
    const bool healthy = deps_.shared_state_healthy();
    if (!healthy && deps_.config->strict_ready) {
      return answer(503, R"({"ready":false,"degraded":true,"reason":"redis unavailable"})");
    }
    return answer(200, std::string(R"({"ready":true,"degraded":)") + (healthy ? "false" : "true") +
                           R"(,"redis":)" + (healthy ? "\"healthy\"" : "\"fail-open\"") + "}");
  }
  return answer(200, R"({"ready":true,"degraded":false,"redis":"none"})");
}

std::vector<std::string> InsecureUpstreams(const GatewayConfig& config) {
  std::vector<std::string> names;
  for (const UpstreamConfig& up : config.upstreams) {
    if (up.https && up.tls.insecure_skip_verify) names.push_back(up.name);
  }
  return names;
}

}  // namespace fusebox::gateway
