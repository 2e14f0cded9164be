#include "apps/gateway/handler.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <utility>
#include <variant>

#include "apps/gateway/admin.h"
#include "apps/gateway/fleet_answers.h"
#include "apps/gateway/tls_client.h"
#include "fusebox/clock.h"
#include "fusebox/config_names.h"
#include "fusebox/meta/classify.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/meta/response.h"
#include "fusebox/prometheus.h"
// The UTF-8 check of fusebox's own JSON writers (JsonStringBytes).
#include "src/json_line.h"

namespace fusebox::gateway {
namespace {

using Json = nlohmann::json;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using std::chrono::seconds;

Duration Left(std::chrono::steady_clock::time_point deadline) {
  if (deadline == std::chrono::steady_clock::time_point::max()) return Duration::max();
  return deadline - SystemClock().Now();
}

// Hop-by-hop headers (RFC 9110 section 7.6.1) and the ones the upstream
// request sets itself.
bool Forwardable(std::string_view name) {
  static constexpr std::string_view kDropped[] = {"connection",
                                                  "keep-alive",
                                                  "proxy-authenticate",
                                                  "proxy-authorization",
                                                  "proxy-connection",
                                                  "te",
                                                  "trailer",
                                                  "transfer-encoding",
                                                  "upgrade",
                                                  "host",
                                                  "content-length",
                                                  "expect"};
  for (std::string_view d : kDropped) {
    if (meta::EqualsIgnoreCase(name, d)) return false;
  }
  return true;
}

bool IsJsonContentType(std::string_view ct) {
  const std::size_t semi = ct.find(';');
  std::string_view type = ct.substr(0, semi);
  while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
  if (meta::EqualsIgnoreCase(type, "application/json")) return true;
  return type.size() > 5 && meta::EqualsIgnoreCase(type.substr(type.size() - 5), "+json");
}

bool IsJsonBody(const UpstreamReply& reply) {
  return IsJsonContentType(reply.Header("Content-Type")) && Json::accept(reply.body);
}

// A snapshot's stored form: "j\n<json>" or "t\n<text>", so that a fresh hit
// knows how to embed it without parsing it again.
std::string EncodeSnapshot(const UpstreamReply& reply) {
  return std::string(IsJsonBody(reply) ? "j\n" : "t\n") + reply.body;
}

// Every JSON text the handler writes: bytes from outside that are not UTF-8
// (an upstream body, a name from a request) become U+FFFD instead of
// nlohmann's exception (type_error 316), which nothing would catch.
std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string JsonString(std::string_view text) { return Dump(Json(std::string(text))); }

// The size of JsonString(text), at most: escapes are 2 bytes (\" \\ \b \f \n
// \r \t) or 6 (\u00XX), an invalid byte becomes U+FFFD (3 bytes).
std::size_t JsonStringBytes(std::string_view text) {
  std::size_t n = 2;
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t') {
      n += 2;
      ++i;
    } else if (c < 0x20) {
      n += 6;
      ++i;
    } else if (c < 0x80) {
      ++n;
      ++i;
    } else if (const std::size_t len = internal::Utf8SequenceLength(text, i); len > 0) {
      n += len;
      i += len;
    } else {
      n += 3;
      ++i;
    }
  }
  return n;
}

// The JSON text for "data": the body itself when it is JSON, else a string.
std::string DataJson(std::string_view encoded) {
  if (encoded.size() >= 2 && encoded[0] == 'j' && encoded[1] == '\n') {
    return std::string(encoded.substr(2));
  }
  if (encoded.size() >= 2 && encoded[0] == 't' && encoded[1] == '\n') encoded.remove_prefix(2);
  return JsonString(encoded);
}

std::string Envelope(std::string_view data_json, bool stale, seconds age,
                     const meta::ProviderError* hidden) {
  std::string out;
  out.reserve(data_json.size() + 64);
  out += "{\"data\":";
  out += data_json;
  out += stale ? ",\"stale\":true" : ",\"stale\":false";
  out += ",\"age_seconds\":" + std::to_string(age.count());
  if (hidden != nullptr) {
    Json reason = {{"code", std::string(meta::ConnCodeName(hidden->code))}};
    if (hidden->retry_after) reason["retry_after_seconds"] = hidden->retry_after->count();
    out += ",\"stale_reason\":" + Dump(reason);
  }
  out += '}';
  return out;
}

// The envelope of a reply just received (not stale, age 0), with its body
// copied once.
std::string ReplyEnvelope(const UpstreamReply& reply) {
  if (IsJsonBody(reply)) return Envelope(reply.body, false, seconds(0), nullptr);
  return Envelope(JsonString(reply.body), false, seconds(0), nullptr);
}

int StatusClass(int status) {
  if (status >= 200 && status < 300) return 0;
  if (status >= 300 && status < 400) return 1;
  if (status >= 400 && status < 500) return 2;
  return 3;
}

// What the client gets for a failed call (docs/gateway.md, client contract).
HttpResponse ErrorFor(const Fetched& f, std::string_view key) {
  const meta::ProviderError& e = f.error;
  const std::optional<UpstreamReply>& reply = f.reply;
  int status = 400;
  std::string message;
  switch (e.code) {
    case meta::ConnCode::kConn008RateLimit:
      status = 429;
      message = e.circuit_open ? "the quota circuit is open: the upstream is not called"
                               : "rate limited by the upstream";
      break;
    case meta::ConnCode::kConn003Transient:
      status = 502;
      message = e.circuit_open ? "the transient circuit is open: the upstream is not called"
                               : (reply ? "the upstream failed" : "the upstream did not answer");
      break;
    case meta::ConnCode::kConn009Authorization:
      status = 401;
      message = "the upstream refused the credentials";
      break;
    case meta::ConnCode::kConn010Invalid:
      status = 400;
      message = "the upstream rejected the request as invalid";
      break;
  }
  if (f.reply_too_large) {
    status = 502;
    message = "the upstream's reply is larger than the gateway's limit (16 MiB)";
  }
  std::string code = f.reply_too_large ? std::string("UPSTREAM_REPLY_TOO_LARGE")
                                       : std::string(meta::ConnCodeName(e.code));
  if (!f.tls_failure.empty()) {
    status = 502;
    code = "UPSTREAM_TLS_ERROR";
    message = std::string(TlsFailureMessage(f.tls_failure));
  }
  Json err = {{"code", code},
              {"message", message},
              {"circuit", std::string(key)},
              {"circuit_open", e.circuit_open}};
  if (!f.tls_failure.empty()) err["tls_check"] = std::string(TlsCheckName(f.tls_failure));
  if (reply) err["upstream_status"] = reply->status;
  HttpResponse r;
  r.status = status;
  const bool with_retry = status == 429 || (status == 502 && e.circuit_open);
  if (with_retry && e.retry_after) {
    const long long s = std::max<long long>(1, e.retry_after->count());
    err["retry_after_seconds"] = s;
    r.headers.emplace_back("Retry-After", std::to_string(s));
  }
  r.body = Dump(Json{{"error", err}});
  return r;
}

long long MillisUntil(std::optional<TimePoint> at, TimePoint now) {
  if (!at) return -1;
  return std::max<long long>(0, duration_cast<milliseconds>(*at - now).count());
}

}  // namespace

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

std::optional<std::string_view> HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (meta::EqualsIgnoreCase(k, name)) return std::string_view(v);
  }
  return std::nullopt;
}

HttpResponse ErrorResponse(int status, std::string_view code, std::string_view message) {
  HttpResponse r;
  r.status = status;
  r.body = Dump(Json{{"error", {{"code", std::string(code)}, {"message", std::string(message)}}}});
  return r;
}

HttpResponse InternalErrorResponse() {
  return ErrorResponse(500, "INTERNAL_ERROR", "the gateway failed to answer this request");
}

std::string CurrentExceptionWhat() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "a non-standard exception";
  }
}

bool TokenEquals(std::string_view presented, std::string_view expected) noexcept {
  // Every byte of the longer string is visited whatever matches, so the time
  // says nothing about where the first difference is.
  const std::size_t n = std::max(presented.size(), expected.size());
  unsigned diff = presented.size() == expected.size() ? 0u : 1u;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char a = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    const unsigned char b = i < expected.size() ? static_cast<unsigned char>(expected[i]) : 0;
    diff |= static_cast<unsigned>(a ^ b);
  }
  return diff == 0;
}

std::string FoldSubject(std::string_view name) {
  // provider:<p>:<w>:<subject...>:<circuit>; the subject may itself hold ':'.
  constexpr std::string_view kPrefix = "provider:";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::string(name);
  std::size_t pos = kPrefix.size();
  for (int i = 0; i < 2; ++i) {
    pos = name.find(':', pos);
    if (pos == std::string_view::npos) return std::string(name);
    ++pos;
  }
  const std::size_t last = name.rfind(':');
  if (last < pos) return std::string(name);
  return std::string(name.substr(0, pos)) + "*" + std::string(name.substr(last));
}

Handler::Handler(Deps deps) : deps_(std::move(deps)) {
  const GatewayConfig& config = *deps_.config;
  for (const UpstreamConfig& up : config.upstreams) {
    pools_.push_back(std::make_unique<UpstreamPool>(up));
    if (!deps_.loops.empty()) {
      std::vector<std::unique_ptr<AsyncUpstreamPool>>& per_loop = async_pools_.emplace_back();
      for (boost::asio::io_context* loop : deps_.loops) {
        per_loop.push_back(std::make_unique<AsyncUpstreamPool>(*loop, up));
      }
    }
    upstream_counts_.push_back(std::make_unique<std::array<std::atomic<std::uint64_t>, 5>>());
    upstream_load_.push_back(std::make_unique<UpstreamLoad>());
  }
  for (const RouteConfig& rc : config.routes) {
    Result<PathPattern> pattern = PathPattern::Create(rc.path);
    if (!pattern) continue;  // validated by the config loader
    auto route = std::make_unique<CompiledRoute>();
    route->config = &rc;
    route->pattern = std::move(*pattern);
    route->one_group = rc.provider.find('{') == std::string::npos;
    route->rules.recovery.default_wait = config.breakers.quota_default_wait;
    route->rules.recovery.max_wait = config.breakers.quota_max_wait;
    // The generic classifier (fusebox::http): 429 rate limit, 408/5xx
    // transient, 401/403 authorization, else invalid; never Meta's body
    // codes. A 503 stays transient whatever its Retry-After, as it always
    // was on this gateway (its quota circuit is for 429s).
    route->http_rules.unavailable_with_retry_after_is_rate_limit = false;
    route->http_rules.default_wait = config.breakers.quota_default_wait;
    route->http_rules.max_wait = config.breakers.quota_max_wait;
    routes_.push_back(std::move(route));
  }
}

namespace {

struct Target {
  std::string_view path;
  std::string_view query;
};

Target SplitTarget(std::string_view target) {
  const std::size_t q = target.find('?');
  return {target.substr(0, q), q == std::string_view::npos ? "" : target.substr(q + 1)};
}

}  // namespace

Handler::Matched Handler::Match(const HttpRequest& request, std::string_view path) {
  Matched m;
  for (auto& route : routes_) {
    std::optional<Result<Params>> params = route->pattern.Match(path);
    if (!params) continue;
    if (route->config->method != request.method) {
      m.path_matched = true;
      continue;
    }
    if (!*params) {
      m.bad_parameter = std::move(*params).error();
      return m;
    }
    m.route = route.get();
    m.params = *std::move(*params);
    return m;
  }
  return m;
}

HttpResponse Handler::Unmatched(const Matched& m) {
  if (!m.bad_parameter.ok()) {
    return ErrorResponse(400, "INVALID_PATH_PARAMETER", m.bad_parameter.message());
  }
  if (m.path_matched) {
    return ErrorResponse(405, "METHOD_NOT_ALLOWED", "no route for this method on this path");
  }
  return ErrorResponse(404, "NOT_FOUND", "no route matches this path");
}

std::optional<HttpResponse> Handler::Endpoint(std::string_view path) const {
  if (path == "/healthz") return JsonResponse(200, R"({"status":"ok"})");
  if (path == "/readyz") return Ready();
  if (path == "/metrics") return Metrics();
  return std::nullopt;
}

std::optional<HttpResponse> Handler::TryAnswerNow(const HttpRequest& request) {
  const auto [path, query] = SplitTarget(request.target);
  if (std::optional<HttpResponse> r = Endpoint(path)) return r;
  if (path == "/admin" || path.substr(0, 7) == "/admin/") return std::nullopt;  // may ask Redis
  Matched m = Match(request, path);
  if (m.route == nullptr) return Unmatched(m);
  return TryAnswerRouteNow(*m.route, m.params, request, query);
}

HttpResponse Handler::Handle(const HttpRequest& request) {
  const auto [path, query] = SplitTarget(request.target);
  if (std::optional<HttpResponse> r = Endpoint(path)) return *std::move(r);
  if (path == "/admin" || path.substr(0, 7) == "/admin/") return HandleAdmin(request, path);
  Matched m = Match(request, path);
  if (m.route == nullptr) return Unmatched(m);
  return HandleRoute(*m.route, m.params, request, query);
}

namespace {

// A failed response under fusebox::http's rules, as the CONN_* error the
// gateway answers with. Meta's codes, when the body has them, are reported
// but decide nothing.
meta::ProviderError HttpProviderError(const meta::Response& response, const http::Rules& rules) {
  const http::Classification c = http::Classify({.status = response.status,
                                                 .retry_after = response.Header("Retry-After"),
                                                 .date = response.Header("Date")},
                                                rules);
  meta::ProviderError e;
  switch (c.kind) {
    case http::Kind::kRateLimit:
      e.code = meta::ConnCode::kConn008RateLimit;
      break;
    case http::Kind::kTransient:
      e.code = meta::ConnCode::kConn003Transient;
      break;
    case http::Kind::kAuthorization:
      e.code = meta::ConnCode::kConn009Authorization;
      break;
    case http::Kind::kSuccess:
    case http::Kind::kInvalid:
      e.code = meta::ConnCode::kConn010Invalid;
      break;
  }
  e.http_status = response.status;
  const meta::ErrorBody body = meta::ParseErrorBody(response.body);
  e.meta_code = body.code;
  e.meta_subcode = body.subcode;
  e.retry_after = c.retry_after;
  return e;
}

}  // namespace

Fetched Handler::Judge(const CompiledRoute& route, Result<UpstreamReply> reply) {
  const std::size_t up = route.config->upstream;
  UpstreamLoad& load = *upstream_load_[up];
  load.in_flight.fetch_sub(1, std::memory_order_relaxed);
  Fetched f;
  if (!reply) {
    (*upstream_counts_[up])[4].fetch_add(1, std::memory_order_relaxed);
    f.error = meta::ProviderError{.code = meta::ConnCode::kConn003Transient};
    if (IsTlsFailure(reply.error())) {
      f.tls_failure = reply.error().reason();
      load.tls_failures.fetch_add(1, std::memory_order_relaxed);
      return f;
    }
    f.reply_too_large = reply.error().reason() == UpstreamPool::kReplyTooLarge;
    if (f.reply_too_large) load.too_large.fetch_add(1, std::memory_order_relaxed);
    return f;
  }
  (*upstream_counts_[up])[StatusClass(reply->status)].fetch_add(1, std::memory_order_relaxed);
  bool failed = reply->status >= 400;
  // Meta may answer an error object with a 200 (rare); its classifier
  // looks at the body then too.
  if (!failed && route.config->classifier == Classifier::kMeta &&
      reply->body.find("\"error\"") != std::string::npos &&
      meta::ParseErrorBody(reply->body).code.has_value()) {
    failed = true;
  }
  // A success is answered in an envelope: a body that is not JSON becomes a
  // JSON string there, which escapes control bytes six-fold. The envelope is
  // bounded as the reply is.
  // (Checked only for a body that could grow past it: most are small.)
  if (!failed && reply->body.size() > UpstreamPool::kMaxReplyBytes / 6 && !IsJsonBody(*reply) &&
      JsonStringBytes(reply->body) > UpstreamPool::kMaxReplyBytes) {
    f.error = meta::ProviderError{.code = meta::ConnCode::kConn003Transient};
    f.reply_too_large = true;
    load.too_large.fetch_add(1, std::memory_order_relaxed);
    f.reply = std::move(*reply);
    return f;
  }
  f.ok = !failed;
  if (failed) {
    const meta::Response response{
        .status = reply->status, .headers = reply->headers, .body = reply->body};
    f.error = route.config->classifier == Classifier::kHttp
                  ? HttpProviderError(response, route.http_rules)
                  : meta::ProviderError::FromResponse(response, route.rules);
  }
  f.reply = std::move(*reply);
  return f;
}

Fetched Handler::CallUpstream(const CompiledRoute& route, std::string_view key,
                              const UpstreamRequest& upstream_request, Deadline deadline) {
  std::variant<meta::ProviderCall, meta::ProviderError> call = [&] {
    // The circuits may ask the fleet (a new breaker's first read, the probe
    // lease): within the request's deadline, never the store's whole timeout.
    const SharedStateDeadline bound(deadline);
    return meta::ProviderCall::Start(*deps_.registry, key);
  }();
  if (meta::ProviderError* refused = std::get_if<meta::ProviderError>(&call)) {
    Fetched f;
    f.error = *refused;
    return f;
  }
  meta::ProviderCall& started = std::get<meta::ProviderCall>(call);
  // What the request spent before (the snapshot store, the circuits' shared
  // state) comes off the upstream's time: the route's deadline bounds all.
  if (Left(deadline) <= Duration::zero()) {
    // Spent before the upstream was asked: a transport failure for the
    // client (a stale copy may still answer), nothing for the circuits. The
    // call is dropped unfinished, which gives its permits back.
    upstream_load_[route.config->upstream]->out_of_time.fetch_add(1, std::memory_order_relaxed);
    Fetched f;
    f.error = meta::ProviderError{.code = meta::ConnCode::kConn003Transient};
    return f;
  }
  upstream_calls_.fetch_add(1, std::memory_order_relaxed);
  // The exchange's time, on real time as its deadline (the dashboard's p99).
  const TimePoint sent = SystemClock().Now();
  UpstreamRequest bounded = upstream_request;
  bounded.timeout = std::max<Duration>(milliseconds(1), std::min(bounded.timeout, Left(deadline)));
  Fetched f;
  try {
    std::atomic<std::int64_t>& in_flight = upstream_load_[route.config->upstream]->in_flight;
    in_flight.fetch_add(1, std::memory_order_relaxed);
    Result<UpstreamReply> reply = [&] {
      try {
        return pools_[route.config->upstream]->Send(bounded);
      } catch (...) {
        in_flight.fetch_sub(1, std::memory_order_relaxed);  // Judge() will not run
        throw;
      }
    }();
    f = Judge(route, std::move(reply));
  } catch (...) {
    std::move(started).FinishWithException();
    throw;
  }
  // A TLS failure is recorded in neither circuit: dropped unfinished, the
  // call gives its permits back (docs/gateway.md, "How a TLS failure counts").
  if (f.tls_failure.empty()) {
    std::move(started).Finish(f.ok ? nullptr : &f.error);
    RecordLatency(route, key, SystemClock().Now() - sent);
  }
  return f;
}

void Handler::RecordLatency(const CompiledRoute& route, std::string_view key, Duration took) const {
  if (deps_.latencies == nullptr) return;
  // Acquire/release: a thread that finds the pointer sees the histogram
  // that Find() made under its lock on another thread.
  LatencyHistogram* h = route.latency.load(std::memory_order_acquire);
  if (h == nullptr) {
    h = deps_.latencies->Find(GroupLatencies::GroupOfKey(key));
    if (route.one_group) route.latency.store(h, std::memory_order_release);
  }
  LatencyHistogram::Record(h, took);
}

// Counts a request as in flight while it is alive.
// Shares the counter: an asynchronous call dropped by a stopped event loop
// may outlive the handler.
class Handler::InFlight {
 public:
  explicit InFlight(std::shared_ptr<std::atomic<std::int64_t>> n) : n_(std::move(n)) {
    n_->fetch_add(1, std::memory_order_relaxed);
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  ~InFlight() { n_->fetch_sub(1, std::memory_order_relaxed); }

 private:
  const std::shared_ptr<std::atomic<std::int64_t>> n_;
};

Result<std::string> Handler::CircuitKey(CompiledRoute& route, const Params& params) {
  const RouteConfig& rc = *route.config;
  Result<std::string> key = meta::ProviderCircuitKey(
      Expand(rc.provider, params, false), rc.workload, Expand(rc.subject, params, false));
  if (!key) Count(route, kError);
  return key;
}

std::string Handler::SnapshotKeyOf(const CompiledRoute& route, const Params& params,
                                   std::string_view query) const {
  return SnapshotKey(
      "gw:" + route.config->name + ":" + Expand(route.config->upstream_path, params, true),
      ParseQuery(query));
}

HttpResponse Handler::Finish(HttpResponse r, std::string_view key) const {
  r.headers.emplace_back("X-Fusebox-Instance", deps_.instance);
  r.headers.emplace_back("X-Fusebox-Circuit", std::string(key));
  return r;
}

std::optional<Snapshot> Handler::LookUpSnapshot(const std::string& snap_key,
                                                const CompiledRoute& route, Deadline deadline) {
  Result<std::optional<Snapshot>> got = deps_.store->GetWithin(snap_key, Left(deadline));
  if (!got) {
    // Not a miss: the store could not look. The call decides, once per key.
    CountSnapshot(got.error().code() == StatusCode::kTimeout ? kSnapshotTimeout
                                                             : kSnapshotUnavailable);
    return std::nullopt;
  }
  if (!*got) {
    CountSnapshot(kSnapshotMiss);
  } else {
    CountSnapshot((*got)->age <= route.config->cache->fresh_for ? kSnapshotFresh
                                                                : kSnapshotExpired);
  }
  return std::move(*got);
}

HttpResponse Handler::FreshHit(CompiledRoute& route, std::string_view key, const Snapshot& snap) {
  Count(route, kFresh);
  const AgeAndTtl at = SnapshotAgeAndTtl(snap.age, route.config->cache->fresh_for);
  HttpResponse r;
  r.body = Envelope(DataJson(snap.value), false, at.age, nullptr);
  r.headers.emplace_back("Cache-Status", "fusebox; hit; ttl=" + std::to_string(at.ttl));
  r.headers.emplace_back("Age", std::to_string(at.age.count()));
  return Finish(std::move(r), key);
}

HttpResponse Handler::Failed(CompiledRoute& route, std::string_view key, const Fetched& f,
                             const Snapshot* snap, Duration waited) {
  // Rate limits and transient failures (a refusal by either circuit
  // included) may hide behind a snapshot; authorization, invalid and a TLS
  // failure (a configuration to fix, not an outage to ride out) never.
  const bool may_hide =
      f.tls_failure.empty() && (f.error.code == meta::ConnCode::kConn008RateLimit ||
                                f.error.code == meta::ConnCode::kConn003Transient);
  const CacheConfig* cache = route.config->cache ? &*route.config->cache : nullptr;
  if (may_hide && snap != nullptr && cache != nullptr) {
    const Duration age = snap->age + waited;
    if (age <= cache->max_stale) {
      Count(route, kStale);
      if (deps_.on_stale) deps_.on_stale(key);
      const AgeAndTtl at = SnapshotAgeAndTtl(age, cache->fresh_for);
      const seconds age_s = at.age;
      const std::string ttl = std::to_string(at.ttl);
      HttpResponse r;
      r.body = Envelope(DataJson(snap->value), true, age_s, &f.error);
      std::string cs;
      if (f.error.circuit_open) {
        // Not forwarded: a stale hit (RFC 9211 section 2.1, negative ttl).
        cs = "fusebox; hit; ttl=" + ttl + "; detail=circuit-open";
      } else {
        cs = "fusebox; fwd=stale";
        if (f.reply) cs += "; fwd-status=" + std::to_string(f.reply->status);
        cs += "; ttl=" + ttl + "; detail=stale-if-error";
      }
      r.headers.emplace_back("Cache-Status", cs);
      r.headers.emplace_back("Age", std::to_string(age_s.count()));
      return Finish(std::move(r), key);
    }
  }
  Count(route, f.error.circuit_open ? kRejected : kError);
  if (f.error.circuit_open) {
    // An operator's FORCED_OPEN is not the transient circuit's OPEN.
    if (std::optional<OverrideInfo> forced = ForcedOpenOverride(*deps_.registry, key)) {
      return Finish(ForcedOpenResponse(*forced, key, deps_.registry->clock().Now()), key);
    }
  }
  return Finish(ErrorFor(f, key), key);
}

std::optional<HttpResponse> Handler::TryAnswerRouteNow(CompiledRoute& route, const Params& params,
                                                       const HttpRequest& request,
                                                       std::string_view query) {
  const bool cached = request.method == "GET" && route.config->cache;
  // What this process holds, found without I/O; the look-up is counted by
  // whoever answers: here, or the worker that looks again.
  std::optional<Snapshot> snap;
  if (cached) snap = deps_.store->GetInMemory(SnapshotKeyOf(route, params, query));
  const bool fresh = snap && snap->age <= route.config->cache->fresh_for;
  // A snapshot only Redis may have is a round trip away: a worker's job.
  if (cached && deps_.store_may_block && !fresh) return std::nullopt;
  InFlight in_flight(in_flight_);
  Result<std::string> key = CircuitKey(route, params);
  if (!key) return ErrorResponse(400, "BAD_REQUEST", key.error().message());
  if (fresh) {
    CountSnapshot(kSnapshotFresh);
    return FreshHit(route, *key, *snap);
  }
  // An OPEN circuit refuses here, recorded as RunProviderCall records it;
  // anything that may call the upstream or ask Redis goes to a worker.
  std::optional<meta::ProviderError> refused = meta::RejectIfOpen(*deps_.registry, *key);
  if (!refused) return std::nullopt;
  if (cached) CountSnapshot(snap ? kSnapshotExpired : kSnapshotMiss);
  Fetched f;
  f.error = *refused;
  return Failed(route, *key, f, snap ? &*snap : nullptr, Duration::zero());
}

UpstreamRequest Handler::UpstreamRequestFor(const CompiledRoute& route, const Params& params,
                                            const HttpRequest& request,
                                            std::string_view query) const {
  const RouteConfig& rc = *route.config;
  const UpstreamConfig& up = deps_.config->upstreams[rc.upstream];
  UpstreamRequest ur;
  ur.method = request.method;
  ur.target = up.path_prefix + Expand(rc.upstream_path, params, true);
  if (!query.empty()) ur.target += "?" + std::string(query);
  for (const auto& [k, v] : request.headers) {
    if (Forwardable(k)) ur.headers.emplace_back(k, v);
  }
  ur.body = request.body;
  ur.timeout = rc.timeout > Duration::zero() ? rc.timeout : up.request_timeout;
  return ur;
}

HttpResponse Handler::Forwarded(CompiledRoute& route, std::string_view key, const Fetched& f,
                                bool get) {
  if (!f.ok) return Failed(route, key, f, nullptr, Duration::zero());
  Count(route, kMiss);
  HttpResponse r;
  r.status = f.reply->status;
  r.body = ReplyEnvelope(*f.reply);
  r.headers.emplace_back("Cache-Status", get ? "fusebox; fwd=bypass" : "fusebox; fwd=method");
  return Finish(std::move(r), key);
}

Handler::Dispatched Handler::Dispatch(const HttpRequest& request, std::size_t loop,
                                      HttpResponse& answer,
                                      std::function<void(HttpResponse)>& done) {
  const auto [path, query] = SplitTarget(request.target);
  if (std::optional<HttpResponse> r = Endpoint(path)) {
    answer = *std::move(r);
    return Dispatched::kAnswered;
  }
  if (path == "/admin" || path.substr(0, 7) == "/admin/") return Dispatched::kToWorker;
  Matched m = Match(request, path);
  if (m.route == nullptr) {
    answer = Unmatched(m);
    return Dispatched::kAnswered;
  }
  CompiledRoute& route = *m.route;
  // An uncached call on the loop refuses as TryAnswerRouteNow would
  // (ProviderCall::Start asks the circuits first), so it goes there directly.
  if (CanRunAsync() && !(request.method == "GET" && route.config->cache)) {
    return StartAsync(route, m.params, request, query, loop, answer, done);
  }
  if (std::optional<HttpResponse> r = TryAnswerRouteNow(route, m.params, request, query)) {
    answer = *std::move(r);
    return Dispatched::kAnswered;
  }
  return Dispatched::kToWorker;
}

Handler::Dispatched Handler::StartAsync(CompiledRoute& route, const Params& params,
                                        const HttpRequest& request, std::string_view query,
                                        std::size_t loop, HttpResponse& answer,
                                        std::function<void(HttpResponse)>& done) {
  auto in_flight = std::make_shared<InFlight>(in_flight_);
  Result<std::string> key = CircuitKey(route, params);
  if (!key) {
    answer = ErrorResponse(400, "BAD_REQUEST", key.error().message());
    return Dispatched::kAnswered;
  }
  std::variant<meta::ProviderCall, meta::ProviderError> call =
      meta::ProviderCall::Start(*deps_.registry, *key);
  if (meta::ProviderError* refused = std::get_if<meta::ProviderError>(&call)) {
    Fetched f;
    f.error = *refused;
    answer = Failed(route, *key, f, nullptr, Duration::zero());
    return Dispatched::kAnswered;
  }
  upstream_calls_.fetch_add(1, std::memory_order_relaxed);
  const bool get = request.method == "GET";
  upstream_load_[route.config->upstream]->in_flight.fetch_add(1, std::memory_order_relaxed);
  async_pools_[route.config->upstream][loop]->Send(
      UpstreamRequestFor(route, params, request, query),
      [this, &route, key = *std::move(key), get, in_flight = std::move(in_flight),
       sent = SystemClock().Now(),
       started =
           std::make_shared<meta::ProviderCall>(std::get<meta::ProviderCall>(std::move(call))),
       done = std::move(done)](Result<UpstreamReply> reply) mutable {
        // This runs in the event loop's completion handler: an exception
        // would leave the client without an answer and end the loop's run().
        HttpResponse answer;
        bool recorded = false;
        try {
          Fetched f = Judge(route, std::move(reply));
          recorded = true;
          // A TLS failure is recorded in neither circuit (as in CallUpstream).
          if (f.tls_failure.empty()) {
            std::move(*started).Finish(f.ok ? nullptr : &f.error);
            RecordLatency(route, key, SystemClock().Now() - sent);
          }
          answer = Forwarded(route, key, f, get);
        } catch (...) {
          if (!recorded) std::move(*started).FinishWithException();
          if (deps_.on_internal_error) deps_.on_internal_error(CurrentExceptionWhat());
          answer = InternalErrorResponse();
        }
        done(std::move(answer));
      });
  return Dispatched::kStarted;
}

HttpResponse Handler::HandleRoute(CompiledRoute& route, const Params& params,
                                  const HttpRequest& request, std::string_view query) {
  InFlight in_flight(in_flight_);
  const RouteConfig& rc = *route.config;
  Result<std::string> key = CircuitKey(route, params);
  if (!key) return ErrorResponse(400, "BAD_REQUEST", key.error().message());
  const UpstreamRequest ur = UpstreamRequestFor(route, params, request, query);
  // The route's deadline, on real time since it bounds real I/O.
  const Deadline deadline = SystemClock().Now() + ur.timeout;

  if (request.method != "GET" || !rc.cache) {
    // Writes and uncached reads: straight through the circuits, never stale.
    return Forwarded(route, *key, CallUpstream(route, *key, ur, deadline), request.method == "GET");
  }

  Clock& clock = deps_.registry->clock();
  const TimePoint t0 = clock.Now();
  const std::string snap_key = SnapshotKeyOf(route, params, query);
  std::optional<Snapshot> snap = LookUpSnapshot(snap_key, route, deadline);
  if (snap && snap->age <= rc.cache->fresh_for) return FreshHit(route, *key, *snap);

  // A miss, an expired snapshot, or a store that could not answer in time:
  // one upstream call per key, whichever it was.
  bool leader = false;
  fusebox::Result<Fetched> flown = flight_.Do(snap_key, [&]() -> fusebox::Result<Fetched> {
    leader = true;
    Fetched f = CallUpstream(route, *key, ur, deadline);
    // A store error loses a snapshot (in Redis; the in-process tier has it),
    // never the answer.
    if (f.ok) (void)deps_.store->PutWithin(snap_key, EncodeSnapshot(*f.reply), Left(deadline));
    return f;
  });
  if (!leader) merged_.fetch_add(1, std::memory_order_relaxed);
  const Fetched& f = *flown;
  if (f.ok) {
    Count(route, kMiss);
    HttpResponse r;
    r.status = f.reply->status;
    r.body = ReplyEnvelope(*f.reply);
    std::string cs =
        "fusebox; fwd=miss; fwd-status=" + std::to_string(f.reply->status) + "; stored";
    if (!leader) cs += "; collapsed";
    r.headers.emplace_back("Cache-Status", cs);
    return Finish(std::move(r), *key);
  }
  return Failed(route, *key, f, snap ? &*snap : nullptr, clock.Now() - t0);
}

namespace {

// One breaker's row of /admin/circuits, of an admin action's answer and of
// the dashboard's snapshots; `name` is its name in the registry.
Json CircuitRow(const std::string& name, CircuitBreaker& b, TimePoint now) {
  const CircuitBreakerMetrics m = b.metrics();
  std::string key = name;
  std::string circuit;
  const std::size_t colon = name.rfind(':');
  if (colon != std::string::npos) {
    std::string_view last = std::string_view(name).substr(colon + 1);
    if (last == "quota" || last == "transient") {
      key = name.substr(0, colon);
      circuit = std::string(last);
    }
  }
  Json j = {{"name", name},
            {"key", key},
            {"circuit", circuit},
            {"state", std::string(StateLabel(m.state))},
            {"failure_rate", m.failure_rate},
            {"buffered_calls", m.buffered_calls},
            {"failed_calls", m.failed_calls},
            {"not_permitted_calls", m.not_permitted_calls}};
  const long long retry = MillisUntil(m.retry_at, now);
  j["retry_in_ms"] = retry < 0 ? Json(nullptr) : Json(retry);
  if (std::optional<OverrideInfo> o = b.active_override()) {
    const long long exp = MillisUntil(o->expires_at, now);
    j["override"] = {{"state", std::string(StateLabel(o->state))},
                     {"reason", o->reason},
                     {"actor", o->actor},
                     {"expires_in_ms", exp < 0 ? Json(nullptr) : Json(exp)}};
  } else {
    j["override"] = nullptr;
  }
  return j;
}

}  // namespace

std::string Handler::CircuitsJson() const {
  struct Row {
    std::string name;
    Json json;
  };
  std::vector<Row> rows;
  const TimePoint now = deps_.registry->clock().Now();
  deps_.registry->ForEach([&](const std::string& name, CircuitBreaker& b) {
    rows.push_back({name, CircuitRow(name, b, now)});
  });
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.name < b.name; });
  Json out = Json::array();
  for (Row& r : rows) out.push_back(std::move(r.json));
  return Dump(out);
}

Result<std::string> Handler::FleetJson() const {
  if (!deps_.fleet) return Status::Unavailable("this gateway shares no state (no redis)");
  Result<FleetEntries> got = deps_.fleet(kFleetBudget);
  if (!got) return got.error();
  std::string out = FleetEntriesJson(*got, *deps_.registry);
  if (!deps_.fleet_instances) return out;
  Result<std::string> instances = deps_.fleet_instances(kInstancesBudget);
  out.pop_back();  // the object's '}'
  out += ",\"instances\":" +
         (instances ? *instances : "{\"error\":" + JsonString(instances.error().message()) + "}") +
         "}";
  return out;
}

bool Handler::degraded() const {
  return deps_.shared_state_healthy != nullptr && !deps_.shared_state_healthy();
}

HttpResponse Handler::HandleAdmin(const HttpRequest& request, std::string_view path) {
  if (!deps_.config->admin) return ErrorResponse(404, "NOT_FOUND", "the admin API is not enabled");
  if (std::optional<HttpResponse> r = AdminUnauthorized(request, deps_.config->admin->token)) {
    return *std::move(r);
  }
  if (path == "/admin/circuits") {
    if (request.method != "GET") {
      return ErrorResponse(405, "METHOD_NOT_ALLOWED", "GET /admin/circuits");
    }
    std::string scope = "instance";
    for (auto& [name, value] : ParseQuery(SplitTarget(request.target).query)) {
      if (name == "scope") scope = value;
    }
    if (scope == "fleet") {
      Result<std::string> fleet = FleetJson();
      if (!fleet) return ErrorResponse(503, "FLEET_UNAVAILABLE", fleet.error().message());
      return JsonResponse(200, "{\"instance\":" + JsonString(deps_.instance) +
                                   ",\"scope\":\"fleet\"," + fleet->substr(1));
    }
    if (scope != "instance") {
      return ErrorResponse(400, "BAD_REQUEST", "scope: expected instance or fleet");
    }
    return JsonResponse(200, "{\"instance\":" + JsonString(deps_.instance) +
                                 ",\"circuits\":" + CircuitsJson() + "}");
  }
  std::variant<AdminAction, HttpResponse> action = ParseAdminAction(request, path);
  if (HttpResponse* r = std::get_if<HttpResponse>(&action)) return std::move(*r);
  using Breakers = std::vector<std::shared_ptr<CircuitBreaker>>;
  std::variant<Breakers, HttpResponse> targets =
      ResolveAdminTargets(*deps_.registry, std::get<AdminAction>(action).name);
  if (HttpResponse* r = std::get_if<HttpResponse>(&targets)) return std::move(*r);
  Breakers& changed = std::get<Breakers>(targets);
  ApplyAdminAction(std::get<AdminAction>(action), changed);
  // The changed breakers' rows of /admin/circuits, in its order (by name),
  // read from them alone.
  std::sort(changed.begin(), changed.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  const TimePoint now = deps_.registry->clock().Now();
  Json rows = Json::array();
  for (const std::shared_ptr<CircuitBreaker>& b : changed) {
    rows.push_back(CircuitRow(b->name(), *b, now));
  }
  return JsonResponse(200, Dump(Json{{"circuits", rows}}));
}

}  // namespace fusebox::gateway
