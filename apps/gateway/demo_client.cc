#include "apps/gateway/demo_client.h"

#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "apps/gateway/http_client.h"
#include "apps/gateway/upstream_client.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;

constexpr char kAccount[] = "/v1/instagram/accounts/178";
constexpr char kQuota[] = "provider:instagram:read:178:quota";

class Demo {
 public:
  Demo(const GatewayDemoOptions& options, std::ostream& out)
      : options_(options), out_(out), clock_(options.clock ? *options.clock : SystemClock()) {}

  std::int64_t UpstreamCalls() {
    std::string body;
    if (options_.upstream_ca.empty()) {
      Result<HttpReply> r = HttpFetch(options_.upstream, "GET", "/_fake/calls");
      if (!r || r->status != 200) return -1;
      body = std::move(r->body);
    } else {
      if (!https_) https_ = std::make_unique<UpstreamPool>(HttpsUpstream());
      UpstreamRequest calls;
      calls.target = "/_fake/calls";
      Result<UpstreamReply> r = https_->Send(calls);
      if (!r || r->status != 200) return -1;
      body = std::move(r->body);
    }
    const Json j = Json::parse(body, nullptr, false);
    return j.is_discarded() ? -1 : j.value("total", std::int64_t{-1});
  }

  // The fake upstream over HTTPS, as the gateways see it.
  UpstreamConfig HttpsUpstream() const {
    UpstreamConfig c;
    c.name = "fake-graph";
    const std::size_t colon = options_.upstream.rfind(':');
    c.host = options_.upstream.substr(0, colon);
    c.port = colon == std::string::npos ? 443 : std::atoi(options_.upstream.c_str() + colon + 1);
    c.https = true;
    c.tls.ca_file = options_.upstream_ca;
    return c;
  }

  std::string CircuitState(const std::string& gateway) {
    if (options_.admin_token.empty()) return "?";
    Result<HttpReply> r =
        HttpFetch(gateway, "GET", "/admin/circuits",
                  {.headers = {{"Authorization", "Bearer " + options_.admin_token}}});
    if (!r || r->status != 200) return "?";
    const Json j = Json::parse(r->body, nullptr, false);
    if (j.is_discarded()) return "?";
    for (const Json& c : j["circuits"]) {
      if (c.value("name", "") == kQuota) return c.value("state", "?");
    }
    return "none yet";
  }

  // What one pod decides reaches Redis from a background thread and the other
  // pod through a push: a moment, not nothing. Waits (at most 2 s) until
  // `gateway` shows its quota circuit in `state`, so that the next step shows
  // the pod deciding on it rather than racing it.
  void AwaitState(const std::string& gateway, std::string_view state) {
    if (options_.admin_token.empty()) return;
    const TimePoint start = clock_.Now();
    while (CircuitState(gateway) != state) {
      if (clock_.Now() - start > std::chrono::seconds(2)) {
        out_ << "   !! the other pod did not see " << state << " within 2 s\n";
        ok_ = false;
        return;
      }
      clock_.SleepFor(std::chrono::milliseconds(5));
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(clock_.Now() - start).count();
    out_ << "   (Redis told the other pod within " << std::max<long long>(ms, 1) << " ms.)\n";
  }

  // One request and its line; `expect` is what the diagram says it answers.
  HttpReply Ask(const std::string& who, const std::string& gateway, const std::string& what,
                const std::string& path, int expect_status, const char* expect_kind,
                bool expect_call) {
    const std::int64_t before = UpstreamCalls();
    Result<HttpReply> reply = HttpFetch(gateway, "GET", path);
    const std::int64_t called = UpstreamCalls() - before;
    if (!reply) {
      out_ << "  !! " << who << " " << what << ": " << reply.error().message() << "\n";
      ok_ = false;
      return {};
    }
    Print(who, what, *reply, called, gateway);
    const std::string kind = Kind(*reply);
    if (reply->status != expect_status || kind != expect_kind || (called > 0) != expect_call) {
      out_ << "     !! expected " << expect_status << " " << expect_kind << ", upstream "
           << (expect_call ? "called" : "not called") << "\n";
      ok_ = false;
    }
    return *reply;
  }

  static std::string Kind(const HttpReply& r) {
    const std::string cs = r.Header("Cache-Status");
    const Json body = Json::parse(r.body, nullptr, false);
    if (r.status >= 400) {
      return body.is_object() && body.contains("error") &&
                     body["error"].value("circuit_open", false)
                 ? "fail-fast"
                 : "error";
    }
    if (body.is_object() && body.value("stale", false)) return "stale";
    if (cs.find("; hit") != std::string::npos) return "fresh";
    return "upstream";
  }

  void Print(const std::string& who, const std::string& what, const HttpReply& r,
             std::int64_t called, const std::string& gateway) {
    const Json body = Json::parse(r.body, nullptr, false);
    std::string detail;
    if (r.status >= 400 && body.is_object() && body.contains("error")) {
      detail = body["error"].value("code", "");
      if (r.HasHeader("Retry-After")) detail += ", Retry-After " + r.Header("Retry-After");
    } else if (body.is_object() && body.value("stale", false)) {
      detail = "stale: true, age " + r.Header("Age") + " s";
    } else if (body.is_object()) {
      detail = "stale: false";
    }
    out_ << "  " << who << " -> " << r.Header("X-Fusebox-Instance") << ": " << what << "\n"
         << "     " << r.status << " " << Kind(r) << " (" << detail << ")"
         << "; Meta called: " << (called > 0 ? "yes" : "no") << "; quota circuit on "
         << r.Header("X-Fusebox-Instance") << ": " << CircuitState(gateway) << "\n";
    if (r.HasHeader("Cache-Status"))
      out_ << "     Cache-Status: " << r.Header("Cache-Status") << "\n";
  }

  int Run() {
    const std::string& a = options_.gateway_a;
    const std::string& b = options_.gateway_b;
    out_ << "fusebox gateway demo: seed 000's sequence, two gateways sharing one Redis,\n"
         << "account 178 of a fake Graph API (" << options_.upstream << ")\n\n";

    out_ << "Before the incident: the screen has loaded posts and insights once.\n";
    Ask("Web", a, "posts (GET " + std::string(kAccount) + "/media)",
        std::string(kAccount) + "/media", 200, "upstream", true);
    Ask("Web", b, "insights", std::string(kAccount) + "/insights", 200, "upstream", true);
    // Posts are fresh for 1 s (gateway.yaml), insights for 10 min.
    clock_.SleepFor(std::chrono::milliseconds(1500));

    out_ << "\n1. Account stats: cache miss, circuit CLOSED, Meta answers 429 + Retry-After.\n"
         << "   Pod A stores the quota OPEN (TTL) in Redis.\n";
    Ask("Web", a, "account stats", kAccount, 429, "error", true);
    AwaitState(b, "open");

    out_ << "\n2. Posts, on the other pod: stale snapshot; pod B reads the OPEN from Redis\n"
         << "   and does not call Meta; the last good posts come back marked stale.\n";
    Ask("Web", b, "posts", std::string(kAccount) + "/media", 200, "stale", false);

    out_ << "\n3. Insights: fresh snapshot; neither the circuit nor Meta is involved.\n";
    Ask("Web", b, "insights", std::string(kAccount) + "/insights", 200, "fresh", false);

    out_ << "\n   (Comments have no snapshot: they fail fast, without calling Meta.)\n";
    Ask("Web", b, "comments", std::string(kAccount) + "/comments", 429, "fail-fast", false);

    out_ << "\n4. Retry-After (2 s) has passed: both pods try at once; Redis' probe lease\n"
         << "   lets exactly one recovery probe reach Meta.\n";
    clock_.SleepFor(std::chrono::milliseconds(2500));
    const std::int64_t before = UpstreamCalls();
    Result<HttpReply> probe_a = Status::Unavailable("not run");
    std::thread probe([&] { probe_a = HttpFetch(a, "GET", kAccount); });
    // The probe is slow (500 ms at the fake): ask B while it is in flight.
    clock_.SleepFor(std::chrono::milliseconds(150));
    Result<HttpReply> during_b = HttpFetch(b, "GET", kAccount);
    probe.join();
    const std::int64_t probes = UpstreamCalls() - before;
    if (probe_a) Print("Web", "account stats (the probe)", *probe_a, 1, a);
    if (during_b) Print("Web", "account stats (while the probe is in flight)", *during_b, 0, b);
    out_ << "   Meta calls during the recovery: " << probes << "\n";
    if (probes != 1) {
      out_ << "     !! expected exactly one probe\n";
      ok_ = false;
    }

    out_ << "\n5. The probe succeeded: the circuit is CLOSED again on both pods.\n";
    AwaitState(b, "closed");
    Ask("Web", b, "comments", std::string(kAccount) + "/comments", 200, "upstream", true);
    out_ << "\n"
         << (ok_ ? "Every step answered as in the diagram." : "Some steps did not (!! above).")
         << "\n";
    return ok_ ? 0 : 1;
  }

 private:
  const GatewayDemoOptions& options_;
  std::ostream& out_;
  Clock& clock_;
  // The fake upstream's HTTPS client, made on first use (options_.upstream_ca).
  std::unique_ptr<UpstreamPool> https_;
  bool ok_ = true;
};

}  // namespace

int RunGatewayDemo(const GatewayDemoOptions& options, std::ostream& out, std::ostream& err) {
  if (options.upstream.empty() || options.gateway_a.empty() || options.gateway_b.empty()) {
    err << "fusebox gateway-demo: --upstream and two --gateway addresses are needed\n";
    return 1;
  }
  Demo demo(options, out);
  return demo.Run();
}

}  // namespace fusebox::gateway
