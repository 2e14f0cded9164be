// fusebox/prometheus_http/metrics_server.h: a minimal HTTP endpoint serving
// Prometheus text (GET /metrics), started in one line.
//
//   auto server = fusebox::prometheus_http::MetricsServer::Start(
//       *metrics, *registry, {.port = 9464});   // 0.0.0.0 is opt-in: .address
//   // curl http://127.0.0.1:9464/metrics
//
// It runs one thread with a Boost.Asio event loop (Boost.Beast's HTTP/1.1
// parser) and answers each connection with one response, then closes it
// (Connection: close): scrapes are seconds apart, so keep-alive buys nothing.
//
// Hostile input: a request line and headers over max_header_bytes (8 KiB), any
// request body over max_body_bytes (0: a scrape has none), a client that
// does not finish its request within read_timeout (5 s), or more than
// max_connections (16) open connections are refused or closed; a malformed
// request gets 400, a method other than GET or HEAD 405, a path other than
// Options::path (the query string ignored) 404. The render function runs on
// the server's thread; an exception from it becomes a 500 and is never
// propagated.
//
// Thread-safe: Stop() may be called from any thread (not from render).
#ifndef FUSEBOX_PROMETHEUS_HTTP_METRICS_SERVER_H_
#define FUSEBOX_PROMETHEUS_HTTP_METRICS_SERVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fusebox/metrics.h"
#include "fusebox/prometheus.h"
#include "fusebox/registry.h"
#include "fusebox/result.h"

namespace fusebox::prometheus_http {

struct MetricsServerOptions {
  // Loopback by default: exposing metrics beyond the host is a decision.
  std::string address = "127.0.0.1";
  // 0: any free port (port() says which). Default: 9464 (the OpenTelemetry
  // Prometheus exporter's port).
  std::uint16_t port = 9464;
  // The one path served. Default: "/metrics".
  std::string path = "/metrics";
  std::size_t max_header_bytes = std::size_t{8} << 10;
  std::size_t max_body_bytes = 0;
  std::chrono::milliseconds read_timeout = std::chrono::seconds(5);
  int max_connections = 16;
  // How the collector's snapshot is rendered (prefix, name_label, constant
  // labels).
  PrometheusOptions prometheus{};
};

class MetricsServer {
 public:
  // Serves what `render` returns (Prometheus text). kInvalidArgument for bad
  // options (address, path not starting with '/', max_connections < 1,
  // read_timeout <= 0, invalid prometheus options), kUnavailable when the
  // port cannot be bound.
  static Result<std::unique_ptr<MetricsServer>> Start(std::function<std::string()> render,
                                                      MetricsServerOptions options = {});
  // Serves RenderPrometheus(collector.Collect(registry), options.prometheus).
  // `collector` and `registry` must outlive the server.
  static Result<std::unique_ptr<MetricsServer>> Start(const MetricsCollector& collector,
                                                      const Registry& registry,
                                                      MetricsServerOptions options = {});

  // Stop()s.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::uint16_t port() const;
  // "http://ADDRESS:PORT/metrics".
  std::string url() const;
  // Scrapes answered 200 so far.
  std::uint64_t scrapes() const;

  // Closes the listener and every connection and joins the thread.
  // Idempotent.
  void Stop();

 private:
  class Impl;
  explicit MetricsServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusebox::prometheus_http

#endif  // FUSEBOX_PROMETHEUS_HTTP_METRICS_SERVER_H_
