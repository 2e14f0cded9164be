// FakeUpstream: a scriptable stand-in for an upstream HTTP API (Meta's Graph
// API in seed 000), for the gateway's tests, its demo and its load test.
//
// It listens on 127.0.0.1 (port 0: the kernel picks one; port() says which),
// speaks HTTP/1.1 with keep-alive, and answers each route (method + path
// pattern, `*` matching one path segment) with a programmed sequence of
// responses {status, headers, body, latency}: the first call gets the first
// response, and so on; the last one repeats forever. Every call is counted
// per route, so that a test can assert that the upstream was *not* called,
// which is the point of a circuit breaker (seed 000: "expect(nextAction).not
// .toHaveBeenCalled()").
//
// Routes are set from C++ (SetRoutes, SetRoute) or over HTTP under /_fake/
// (docs/gateway.md, "Fake upstream"):
//   PUT    /_fake/routes   {"routes": [...]}  replace every route
//   POST   /_fake/routes   {"routes": [...]}  add or replace these routes
//   GET    /_fake/routes                      the routes, as JSON
//   DELETE /_fake/routes                      no route at all
//   GET    /_fake/calls                       {"total", "unmatched", "routes": [...]}
//   POST   /_fake/reset                       counts to 0, sequences rewound
// `fusebox fake-upstream --script FILE.yaml` loads the same routes from YAML.
//
//   auto upstream = FakeUpstream::Start();
//   (*upstream)->SetRoute({"GET", "/v19.0/*/insights",
//                          {{.status = 429, .headers = {{"Retry-After", "60"}}},
//                           {.status = 200, .body = R"({"data": []})"}}});
//   ... point the gateway at (*upstream)->url() ...
//   EXPECT_EQ((*upstream)->Calls("GET", "/v19.0/*/insights"), 1);
//
// Latency is waited on the injected Clock (Options::clock): with a
// testing::ManualClock a delayed response is sent only when the test advances
// the clock, so tests hold a response in flight without sleeping.
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_FAKE_UPSTREAM_H_
#define FUSEBOX_APPS_GATEWAY_FAKE_UPSTREAM_H_

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::gateway {

// One programmed answer.
struct FakeResponse {
  int status = 200;
  // In order; a Content-Type here replaces the default (application/json).
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};
  // Waited on the upstream's Clock before the response is sent.
  Duration latency{0};
  // Close the connection without answering (a network failure, which a
  // gateway sees as a transient error).
  bool drop = false;
};

// A route: requests whose method and path match get `responses` in turn.
struct FakeRoute {
  // "GET", "POST", ...; "*" matches any method.
  std::string method;
  // "/v19.0/*/insights": each `*` matches exactly one non-empty segment; a
  // final "/**" matches any rest, even none. The query string is ignored.
  std::string path;
  // At least one; the last repeats.
  std::vector<FakeResponse> responses;
};

// How often one route was called.
struct FakeRouteCalls {
  std::string method;
  std::string path;
  std::int64_t calls = 0;
};

struct FakeUpstreamOptions {
  // Loopback only by default: a fake has no business on a real network.
  std::string address = "127.0.0.1";
  // 0: any free port.
  std::uint16_t port = 0;
  // Threads running the event loop (more for a load test).
  int threads = 1;
  // The time source of `latency`; SystemClock() when null.
  Clock* clock = nullptr;
  std::vector<FakeRoute> routes{};
  // HTTPS: the server's certificate chain and key (PEM files); both or
  // neither. TLS 1.2 at least, 1.3 when the client offers it.
  std::string tls_cert_file{};
  std::string tls_key_file{};
  // With HTTPS: require a client certificate issued by this CA (mTLS).
  std::string tls_client_ca_file{};
  // With HTTPS: at most TLS 1.2 (to test what a 1.2 server does).
  bool tls_max_version_1_2 = false;
};

class FakeUpstream {
 public:
  // Validates the routes, binds and starts serving. kInvalidArgument for a bad
  // route or address, kUnavailable when the port cannot be bound.
  static Result<std::unique_ptr<FakeUpstream>> Start(FakeUpstreamOptions options = {});

  // Stop()s.
  ~FakeUpstream();
  FakeUpstream(const FakeUpstream&) = delete;
  FakeUpstream& operator=(const FakeUpstream&) = delete;

  std::uint16_t port() const;
  // "127.0.0.1:PORT".
  std::string host_port() const;
  // "http://127.0.0.1:PORT", or https:// when serving HTTPS.
  std::string url() const;
  // TCP connections accepted, TLS handshakes completed, and those of them
  // that resumed a session (SSL_session_reused): how a test sees that a
  // client pools and resumes.
  std::int64_t AcceptedConnections() const;
  std::int64_t TlsHandshakes() const;
  std::int64_t TlsSessionsResumed() const;

  // Replaces every route (call counts start again at 0).
  Status SetRoutes(std::vector<FakeRoute> routes);
  // Adds `route`, or replaces the route with the same method and path (its
  // count starts again at 0, its sequence from the first response).
  Status SetRoute(FakeRoute route);
  // Removes every route.
  void ClearRoutes();
  std::vector<FakeRoute> Routes() const;

  // Calls to the route with exactly this method and path pattern (as given
  // to SetRoute), 0 when there is no such route.
  std::int64_t Calls(std::string_view method, std::string_view path) const;
  std::vector<FakeRouteCalls> AllCalls() const;
  // Every request outside /_fake/, matched or not.
  std::int64_t TotalCalls() const;
  // Requests that matched no route (answered 404).
  std::int64_t UnmatchedCalls() const;
  // Counts to 0 and every sequence back to its first response.
  void Reset();

  // Stops accepting, closes every connection and joins the threads; delayed
  // responses are never sent. Idempotent.
  void Stop();

 private:
  class Impl;
  explicit FakeUpstream(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;
};

// The route table of PUT /_fake/routes: {"routes": [{"method", "path",
// "responses": [{"status", "headers": {name: value}, "body": string or any
// JSON value, "latency_ms", "drop", "repeat"}]}]}. Errors name the field, e.g.
// "routes[0].responses[1].status: expected an integer 100..599, got \"x\"".
Result<std::vector<FakeRoute>> ParseFakeRoutesJson(std::string_view json);

// The same table from YAML text (a `fusebox fake-upstream --script` file);
// errors start with "line:column: ".
Result<std::vector<FakeRoute>> ParseFakeRoutesYaml(std::string_view yaml);

// Reads and parses a script file; errors start with "PATH:line:column: " (or
// "PATH: " when the file cannot be read).
Result<std::vector<FakeRoute>> LoadFakeScript(const std::string& path);

// The routes as the JSON of GET /_fake/routes (which ParseFakeRoutesJson reads
// back).
std::string FakeRoutesToJson(const std::vector<FakeRoute>& routes);

// Whether `path` (no query string) matches the route pattern `pattern`.
bool FakePathMatches(std::string_view pattern, std::string_view path);

// `fusebox fake-upstream`: serves the routes of the YAML `script` (none when
// empty; PUT /_fake/routes can set them later) on `listen` (HOST:PORT, port 0
// for any), over HTTPS when `tls_cert` and `tls_key` name PEM files, prints
// "fusebox fake-upstream: listening on HOST:PORT" on `out` once listening,
// and serves until SIGTERM or SIGINT. Returns the exit status: 0 after a
// signal, 1 on a bad script, address or certificate (the message on `err`).
int RunFakeUpstream(const std::string& listen, const std::string& script, int threads,
                    std::ostream& out, std::ostream& err, const std::string& tls_cert = "",
                    const std::string& tls_key = "");

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_FAKE_UPSTREAM_H_
