// apps/gateway/handler.h: what the gateway answers, without the network.
//
// Handler turns one parsed HTTP request into one response: route matching,
// the snapshot cache, the two circuits around the upstream call, the client
// contract of docs/gateway.md, /healthz, /readyz, /metrics and the admin API.
// The server (gateway.cc) parses requests, answers on its I/O thread what
// can be answered without blocking, starts there what only waits for the
// upstream, runs Handle() on a worker thread for the rest, and writes the
// response.
//
//   switch (handler.Dispatch(request, now, done)) {
//     case Handler::Dispatched::kAnswered: Write(now); break;  // on the I/O thread
//     case Handler::Dispatched::kStarted: break;               // done(answer) later
//     case Handler::Dispatched::kToWorker:
//       Write(handler.Handle(request));                        // on a worker: may block
//   }
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_HANDLER_H_
#define FUSEBOX_APPS_GATEWAY_HANDLER_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/gateway/config.h"
#include "apps/gateway/group_latencies.h"
#include "apps/gateway/route.h"
#include "apps/gateway/upstream_client.h"
#include "fusebox/audit_log.h"
#include "fusebox/http/classify.h"
#include "fusebox/metrics.h"
#include "fusebox/registry.h"
#include "fusebox/shared_state.h"
#include "fusebox/snapshot_store.h"
#include "fusebox/stale_cache.h"

namespace fusebox::gateway {

struct HttpRequest {
  std::string method;
  // Path and query as received.
  std::string target;
  Headers headers;
  std::string body;
  // The first header named `name` (case-insensitive), or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  Headers headers;
  std::string body;
};

// A JSON error answer {"error":{"code":...,"message":...}}.
HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message);

// The answer to a request whose handling threw (the last line of defence,
// here and in gateway.cc): 500 INTERNAL_ERROR, saying nothing of the cause.
HttpResponse InternalErrorResponse();

// A JSON answer: `body` as is, with `status`.
HttpResponse JsonResponse(int status, std::string body);

// Inside a catch block: what() of the exception being handled, or
// "a non-standard exception".
std::string CurrentExceptionWhat();

// What the gateway made of one upstream call (or of its refusal), copied to
// every request merged into it by single-flight.
struct Fetched {
  bool ok = false;
  // The upstream's answer when there was one (success or error).
  std::optional<UpstreamReply> reply;
  // When !ok.
  meta::ProviderError error{};
  // When !ok: the reply was over the gateway's limit (UpstreamPool::
  // kMaxReplyBytes, or a non-JSON body whose JSON string would be), a
  // transient failure for the circuits, UPSTREAM_REPLY_TOO_LARGE for the
  // client.
  bool reply_too_large = false;
  // When !ok: TLS refused the upstream or the upstream refused the gateway's
  // certificate (a reason of tls_client.h, "tls_hostname_mismatch"...): a
  // fault of the configuration or of the certificates, recorded in neither
  // circuit, UPSTREAM_TLS_ERROR for the client (docs/gateway.md).
  std::string_view tls_failure;
};

class DashboardFeed;

// The names of the https:// upstreams whose certificates are not verified
// (tls.insecure_skip_verify), in configuration order: /readyz, the dashboard
// and the start's WARNING show them.
std::vector<std::string> InsecureUpstreams(const GatewayConfig& config);

// One circuit of the fleet as Redis holds it (/admin/circuits?scope=fleet).
struct FleetEntry {
  std::string circuit;
  // "open" or "half_open" (a trip awaiting its probe), or "closed" when only
  // an override is held.
  std::string state;
  // What is left of that state (OPEN time, or the grace for a probe).
  Duration remaining = Duration::zero();
  std::optional<SharedOverride> override_in_force;
};

struct FleetEntries {
  std::vector<FleetEntry> entries;
  // The cap or the scan's bound was reached: there may be more.
  bool truncated = false;
};

class Handler {
 public:
  struct Deps {
    const GatewayConfig* config = nullptr;
    Registry* registry = nullptr;
    SnapshotStore* store = nullptr;
    MetricsCollector* metrics = nullptr;
    // Null without Redis.
    std::function<bool()> shared_state_healthy = nullptr;
    // The instance name.
    std::string instance;
    // Whether `store` may block (Redis): then only a fresh hit it holds in
    // memory (SnapshotStore::GetInMemory) is answered on an I/O thread.
    bool store_may_block = true;
    // More /metrics text about the store (its tiers, its Redis pool); null:
    // none.
    std::function<std::string()> store_metrics = nullptr;
    // Whether a breaker may ask a shared state (Redis) when a call starts.
    bool circuits_may_block = true;
    // The event loops, each run by one I/O thread, of the upstream calls
    // that Dispatch() starts: an AsyncUpstreamPool per upstream and loop, so
    // that an exchange runs on its client connection's thread. Empty: none.
    std::vector<boost::asio::io_context*> loops;
    // Told of an exception caught around a call finished on an event loop
    // (answered InternalErrorResponse()); the gateway counts and logs it.
    // Null: nothing.
    std::function<void(std::string_view what)> on_internal_error = nullptr;
    // The fleet's OPEN circuits and overrides, read from Redis within the
    // budget given (at most kMaxFleetEntries). Null without Redis.
    std::function<Result<FleetEntries>(Duration budget)> fleet = nullptr;
    // The fleet's instances as their heartbeats say (InstancesJson() in
    // fleet_answers.h), read from Redis within the budget. Null: none.
    std::function<Result<std::string>(Duration budget)> fleet_instances = nullptr;
    // Appends the server's own families (the accept loop's) to /metrics.
    // Null: none.
    std::function<void(std::string& out)> more_metrics = nullptr;
    // Told of each stale answer (stale-if-error served), with its circuit
    // key: the dashboard's stale counts. Null: nothing.
    std::function<void(std::string_view key)> on_stale = nullptr;
    // Where each upstream call the circuits record is timed, by group (the
    // dashboard's p99). Null: not timed.
    GroupLatencies* latencies = nullptr;
  };

  explicit Handler(Deps deps);

  // The answer to `request` if it can be given without blocking: /healthz,
  // /readyz, /metrics, an unknown route or method, a malformed key, a fresh
  // snapshot this process holds (SnapshotStore::GetInMemory), or a refusal by an OPEN or
  // FORCED_OPEN circuit (with its stale snapshot when there is one), each
  // exactly as Handle() answers it. nullopt: run Handle() on a worker.
  std::optional<HttpResponse> TryAnswerNow(const HttpRequest& request);

  // What Dispatch() did with a request.
  enum class Dispatched : std::uint8_t {
    // Answered now, in `answer` (TryAnswerNow's cases, and a call refused
    // before it started).
    kAnswered,
    // Started on event loop `loop` (Deps::loops), because nothing but the
    // upstream exchange would wait: an uncached route or a write, with
    // circuits that never ask Redis. `done` was taken and gets the answer
    // Handle() would give, later, once, on the loop's thread.
    kStarted,
    // Neither: run Handle() on a worker (`done` is left as it was).
    kToWorker,
  };

  // What the I/O thread of loop `loop` (an index into Deps::loops) calls:
  // TryAnswerNow(), else the start of a call on that loop, in one pass (the
  // route is matched and the circuit key built once).
  Dispatched Dispatch(const HttpRequest& request, std::size_t loop, HttpResponse& answer,
                      std::function<void(HttpResponse)>& done);

  // The answer to `request`. May block (the upstream, single-flight, Redis).
  HttpResponse Handle(const HttpRequest& request);

  // Set when shutdown begins: /readyz answers 503.
  void SetDraining() { draining_.store(true, std::memory_order_relaxed); }

  // The circuits as JSON (an array), for the admin API and the dashboard.
  std::string CircuitsJson() const;

  // Entries listed by /admin/circuits?scope=fleet at most (documented in
  // docs/gateway.md): one read each; the walk ends after kFleetBudget.
  static constexpr std::size_t kMaxFleetEntries = 1000;
  static constexpr Duration kFleetBudget = std::chrono::seconds(5);
  static constexpr Duration kInstancesBudget = std::chrono::seconds(1);

  // {"circuits":[...],"truncated":...,"instances":...}: the fleet's OPEN
  // circuits and active overrides as Redis holds them, each saying whether
  // this instance has the breaker, and the instances' heartbeats
  // (InstancesJson(), or {"error":...} when they could not be read).
  // kUnavailable without Redis or when it cannot answer. May block (for at
  // most kFleetBudget, then kInstancesBudget): call it on a worker.
  Result<std::string> FleetJson() const;

  // Whether the fleet's shared state is unreachable while this instance
  // serves on its own (fail-open): /readyz's "degraded".
  bool degraded() const;

  void AwaitSingleFlightWaitersForTesting(std::string_view key, std::size_t n) {
    flight_.AwaitWaitersForTesting(key, n);
  }

  // Upstream calls made (for tests).
  std::uint64_t upstream_calls() const { return upstream_calls_.load(); }

  // Results counted in fusebox_gateway_requests_total.
  enum Answer : std::uint8_t { kFresh, kMiss, kStale, kError, kRejected, kAnswerCount };

  // Outcomes of snapshot look-ups (fusebox_gateway_snapshot_lookups_total):
  // fresh or expired snapshot, a miss, or a store that could not answer
  // (down or busy; out of the request's time), which is not a miss.
  enum SnapshotOutcome : std::uint8_t {
    kSnapshotFresh,
    kSnapshotExpired,
    kSnapshotMiss,
    kSnapshotUnavailable,
    kSnapshotTimeout,
    kSnapshotOutcomeCount
  };
  std::uint64_t snapshot_lookups(SnapshotOutcome o) const {
    return snapshot_lookups_[o].load(std::memory_order_relaxed);
  }

 private:
  struct CompiledRoute {
    const RouteConfig* config;
    PathPattern pattern;
    // Classifier::kMeta routes.
    meta::Rules rules;
    // Classifier::kHttp routes: fusebox::http's generic rules.
    http::Rules http_rules;
    std::array<std::atomic<std::uint64_t>, kAnswerCount> counts{};
    // The route's provider is a literal: every call has one group, whose
    // histogram is found once and kept in `latency` (null until the first
    // call). A templated provider's group is looked up per call.
    bool one_group = false;
    mutable std::atomic<LatencyHistogram*> latency{nullptr};
  };

  // The route a request is for, or why none is.
  struct Matched {
    CompiledRoute* route = nullptr;
    Params params;
    // No route, but some route has this path with another method (405).
    bool path_matched = false;
    // No route: the first one with this path and method has a parameter
    // that is not valid (route.h, CheckParameter): 400 naming it.
    Status bad_parameter;
  };
  class InFlight;
  // A request's deadline: real time, since it bounds real I/O.
  using Deadline = std::chrono::steady_clock::time_point;

  // /healthz, /readyz, /metrics; nullopt for any other path.
  std::optional<HttpResponse> Endpoint(std::string_view path) const;
  Matched Match(const HttpRequest& request, std::string_view path);
  static HttpResponse Unmatched(const Matched& m);
  // Whether an uncached call can run on the event loop (Dispatch).
  bool CanRunAsync() const { return !async_pools_.empty() && !deps_.circuits_may_block; }
  // Starts a matched route that CanRunAsync() and that is not a cached
  // read on loop `loop`: kAnswered (a bad key or a refusal, in `answer`) or
  // kStarted (`done` taken).
  Dispatched StartAsync(CompiledRoute& route, const Params& params, const HttpRequest& request,
                        std::string_view query, std::size_t loop, HttpResponse& answer,
                        std::function<void(HttpResponse)>& done);
  std::optional<HttpResponse> TryAnswerRouteNow(CompiledRoute& route, const Params& params,
                                                const HttpRequest& request, std::string_view query);
  HttpResponse HandleRoute(CompiledRoute& route, const Params& params, const HttpRequest& request,
                           std::string_view query);
  // The route's circuit key; a bad one is counted as an error.
  static Result<std::string> CircuitKey(CompiledRoute& route, const Params& params);
  std::string SnapshotKeyOf(const CompiledRoute& route, const Params& params,
                            std::string_view query) const;
  static void Count(CompiledRoute& route, Answer answer) {
    route.counts[answer].fetch_add(1, std::memory_order_relaxed);
  }
  // Adds the instance and circuit headers.
  HttpResponse Finish(HttpResponse r, std::string_view key) const;
  HttpResponse FreshHit(CompiledRoute& route, std::string_view key, const Snapshot& snap);
  // The snapshot of `snap_key` read within `deadline`, counted; nullopt for
  // a miss and for a store that could not answer (counted apart).
  std::optional<Snapshot> LookUpSnapshot(const std::string& snap_key, const CompiledRoute& route,
                                         Deadline deadline);
  void CountSnapshot(SnapshotOutcome o) {
    snapshot_lookups_[o].fetch_add(1, std::memory_order_relaxed);
  }
  // A failed or refused call: its stale snapshot if allowed (`waited` is how
  // long ago `snap` was read), else the error of the client contract.
  HttpResponse Failed(CompiledRoute& route, std::string_view key, const Fetched& f,
                      const Snapshot* snap, Duration waited);
  // The upstream's time is what is left of `deadline` (at most the route's).
  Fetched CallUpstream(const CompiledRoute& route, std::string_view key,
                       const UpstreamRequest& upstream_request, Deadline deadline);
  // A call of `key` that took `took`, into its group's histogram.
  void RecordLatency(const CompiledRoute& route, std::string_view key, Duration took) const;
  // What the upstream's reply (or its absence) means for `route`; counted.
  Fetched Judge(const CompiledRoute& route, Result<UpstreamReply> reply);
  UpstreamRequest UpstreamRequestFor(const CompiledRoute& route, const Params& params,
                                     const HttpRequest& request, std::string_view query) const;
  // The answer to an uncached read (`get`) or a write, once called.
  HttpResponse Forwarded(CompiledRoute& route, std::string_view key, const Fetched& f, bool get);
  // GET /admin/circuits, or an action in admin.h's four steps (authorize,
  // parse, resolve, apply) answered with the changed breakers' rows.
  HttpResponse HandleAdmin(const HttpRequest& request, std::string_view path);
  HttpResponse Metrics() const;
  HttpResponse Ready() const;

  const Deps deps_;
  std::vector<std::unique_ptr<CompiledRoute>> routes_;
  std::vector<std::unique_ptr<UpstreamPool>> pools_;
  // Per upstream, one per Deps::loops entry: [upstream][loop].
  std::vector<std::vector<std::unique_ptr<AsyncUpstreamPool>>> async_pools_;
  // Per upstream: 2xx, 3xx, 4xx, 5xx, error.
  std::vector<std::unique_ptr<std::array<std::atomic<std::uint64_t>, 5>>> upstream_counts_;
  // Per upstream: calls sent and not yet judged; replies refused as too
  // large; calls not sent because the request's deadline had passed.
  struct UpstreamLoad {
    std::atomic<std::int64_t> in_flight{0};
    std::atomic<std::uint64_t> too_large{0};
    std::atomic<std::uint64_t> out_of_time{0};
    std::atomic<std::uint64_t> tls_failures{0};
  };
  std::vector<std::unique_ptr<UpstreamLoad>> upstream_load_;
  SingleFlight<Fetched> flight_;
  std::atomic<std::uint64_t> merged_{0};
  std::array<std::atomic<std::uint64_t>, kSnapshotOutcomeCount> snapshot_lookups_{};
  std::shared_ptr<std::atomic<std::int64_t>> in_flight_ =
      std::make_shared<std::atomic<std::int64_t>>(0);
  std::atomic<std::uint64_t> upstream_calls_{0};
  std::atomic<bool> draining_{false};
};

// Constant-time comparison of a presented token with the expected one (the
// time depends on the lengths only).
bool TokenEquals(std::string_view presented, std::string_view expected) noexcept;

// The "name" label of a breaker in /metrics: the subject of
// "provider:<p>:<w>:<subject>:<circuit>" folded to "*".
std::string FoldSubject(std::string_view breaker_name);

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_HANDLER_H_
