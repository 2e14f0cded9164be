// The gateway's HTTP server (Boost.Asio + Beast) and its lifecycle. What the
// gateway answers is Handler's business (handler.h); this file reads requests,
// hands the ones that may block to the worker pool, writes responses, streams
// the dashboard's events and shuts down gracefully.
//
// Threads: each of the `io_threads` runs an io_context of its own (loop 0 also
// holds the acceptor and the timers); connections are spread over the loops
// in turn, and a loop is run by its one thread only, so a connection's
// handlers never run concurrently (no strand needed). What can be answered
// without blocking is answered on the I/O thread (Handler::Dispatch: health,
// metrics, unknown routes, fresh snapshots of the in-memory store, refusals by
// an OPEN circuit), and without Redis an uncached call or a write runs there
// too, its upstream exchange asynchronous on the connection's loop. Work that
// may block (a call whose breakers ask Redis, a single-flight wait, the Redis
// snapshot store, an admin override that talks to Redis) runs on a fixed pool
// of `workers` threads and posts its response back to the connection's loop.
// The asynchronous path is not for everything: a lease from Redis and a
// SingleFlight wait are blocking by design, and keeping them off the I/O
// threads is what keeps /healthz, /metrics and the dashboard responsive
// while Redis or the upstream is slow.
//
// Over 1,000 lines on purpose: the connection (Session) and the server
// (Gateway::Impl) share SessionTable and ServerContext, private to this file;
// apart, those would become a header that only these two use.
#include "apps/gateway/gateway.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <deque>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "apps/gateway/dashboard.h"
#include "apps/gateway/dashboard_stats.h"
#include "apps/gateway/fleet_answers.h"
#include "apps/gateway/fleet_watch.h"
#include "apps/gateway/handler.h"
#include "apps/gateway/tls_client.h"
#include "fusebox/audit_log.h"
#include "fusebox/config_names.h"
#include "fusebox/event_log.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/metrics.h"
#include "fusebox/observer.h"
#ifdef FUSEBOX_GATEWAY_WITH_REDIS
#include "fusebox/redis/options.h"
#include "fusebox/redis/shared_state.h"
#include "fusebox/redis/snapshot_store.h"
#endif

namespace fusebox::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class Session;

// The live connections, for shutdown and for the dashboard's broadcasts. It
// is shared with every session so that a session destroyed late (its last
// handler dropped by a stopped io_context) never touches a dead gateway.
struct SessionTable {
  internal::Mutex mu;
  std::map<std::uint64_t, std::weak_ptr<Session>> sessions FUSEBOX_GUARDED_BY(mu);
  std::uint64_t next_id FUSEBOX_GUARDED_BY(mu) = 0;
  // Set before draining starts; called (from any thread) when the last
  // session ends while draining.
  std::function<void()> on_empty_while_draining;
  std::atomic<bool> draining{false};
  // Set once the server's threads are gone: nothing may be posted any more.
  std::atomic<bool> closed{false};

  std::uint64_t Add(std::weak_ptr<Session> s) FUSEBOX_EXCLUDES(mu) {
    internal::MutexLock lock(&mu);
    const std::uint64_t id = ++next_id;
    sessions.emplace(id, std::move(s));
    return id;
  }
  void Remove(std::uint64_t id) FUSEBOX_EXCLUDES(mu) {
    bool now_empty = false;
    {
      internal::MutexLock lock(&mu);
      sessions.erase(id);
      now_empty = sessions.empty();
    }
    if (now_empty && draining.load() && !closed.load() && on_empty_while_draining) {
      on_empty_while_draining();
    }
  }
  std::vector<std::shared_ptr<Session>> All() FUSEBOX_EXCLUDES(mu) {
    std::vector<std::shared_ptr<Session>> out;
    internal::MutexLock lock(&mu);
    for (auto& [id, weak] : sessions) {
      if (std::shared_ptr<Session> s = weak.lock()) out.push_back(std::move(s));
    }
    return out;
  }
  bool empty() FUSEBOX_EXCLUDES(mu) {
    internal::MutexLock lock(&mu);
    return sessions.empty();
  }
  std::size_t size() FUSEBOX_EXCLUDES(mu) {
    internal::MutexLock lock(&mu);
    return sessions.size();
  }
};

// `text` (an exception's message) for a log line: at most 200 bytes, every
// byte outside printable ASCII as \xNN.
std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : text.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// What a Session needs from the gateway.
struct ServerContext {
  const GatewayConfig* config = nullptr;
  Handler* handler = nullptr;
  DashboardFeed* feed = nullptr;
  // The dashboard's groups: the last frame, and the streams by filter.
  DashboardStats* stats = nullptr;
  // Shared: a session destroyed late (see SessionTable) still unsubscribes.
  std::shared_ptr<DashboardStreams> streams;
  asio::thread_pool* workers = nullptr;
  std::shared_ptr<SessionTable> table;
  std::string instance;
  // Counts and logs (rate-limited) an exception caught around a request.
  std::function<void(std::string_view what)> internal_error;
  // GatewayOptions::before_handling_for_testing.
  std::function<void(std::string_view target, bool worker)> before_handling;
  // The fleet's last listing for the dashboard (a JSON object), "null"
  // before the first; refreshed on a worker while a dashboard is open.
  std::function<std::string()> fleet_json;
};

std::string SnapshotEvent(const ServerContext& ctx) {
  return "event: snapshot\ndata: {\"instance\":" +
         nlohmann::json(ctx.instance)
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         ",\"transitions\":" + ctx.feed->RecentJson() + ",\"insecure_upstreams\":" +
         nlohmann::json(InsecureUpstreams(*ctx.config))
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
         ",\"fleet\":" + (ctx.fleet_json ? ctx.fleet_json() : std::string("null")) + "}\n\n";
}

// One client connection: HTTP/1.1 keep-alive, or an SSE stream once it asks
// for /dashboard/events. Every method runs on the connection's loop (one
// thread).
class Session : public std::enable_shared_from_this<Session> {
 public:
  enum class Phase : std::uint8_t { kIdle, kReading, kBusy, kWriting, kSse, kClosed };

  // The connection's loop, as a concrete executor type: a type-erased one
  // (beast::tcp_stream's any_io_executor) allocates a copy of it for every
  // operation it starts. Not a strand: the loop's single thread already
  // serialises the connection's handlers, and a strand's lock and reference
  // counts cost every step of every request (a tenth of the gateway's CPU in
  // a pass-through profile). Other threads reach the connection only by
  // post() or dispatch() onto this executor.
  using Executor = asio::io_context::executor_type;
  using Stream = beast::basic_stream<tcp, Executor>;
  using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                           asio::wait_traits<std::chrono::steady_clock>, Executor>;

  // `loop`: the index of the event loop the socket is on (its executor).
  Session(Stream::socket_type socket, ServerContext& ctx, std::size_t loop)
      : ctx_(ctx),
        table_(ctx.table),
        streams_(ctx.streams),
        loop_(loop),
        stream_(std::move(socket)),
        timer_(stream_.get_executor()) {}

  ~Session() {
    if (subscription_ != 0) streams_->Unsubscribe(subscription_);
    table_->Remove(id_);
  }

  void Start() {
    id_ = table_->Add(weak_from_this());
    WaitForRequest();
  }

  // Shutdown: an idle keep-alive or SSE connection closes now; one with a
  // request in progress finishes it and closes after its response.
  void Drain() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] {
      if (self->phase_ == Phase::kIdle || self->phase_ == Phase::kSse) self->Close();
    });
  }

  // Shutdown grace exceeded: close whatever the connection is doing.
  void ForceClose() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Close(); });
  }

  // Queues one server-sent event (a no-op unless this is an SSE stream, and
  // unless its filter's channel is `channel` when that is set).
  void SendEvent(std::shared_ptr<const std::string> event,
                 std::shared_ptr<const std::string> channel = nullptr) {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this(), event = std::move(event),
                                            channel = std::move(channel)]() mutable {
      if (self->phase_ != Phase::kSse) return;
      if (channel != nullptr && *channel != self->channel_) return;
      // A client that does not keep up is dropped rather than buffered for.
      if (self->sse_queue_.size() >= 64) {
        self->Close();
        return;
      }
      self->sse_queue_.push_back(std::move(event));
      if (self->sse_queue_.size() == 1) self->WriteNextEvent();
    });
  }

  bool is_sse() const { return sse_.load(std::memory_order_relaxed); }

 private:
  void ArmTimer(Duration d) {
    const std::uint64_t gen = ++timer_gen_;
    timer_.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
    timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->OnTimeout();
    });
  }
  void DisarmTimer() {
    ++timer_gen_;
    timer_.cancel();
  }

  // One timer per connection, re-armed (never merely cancelled) as the
  // connection moves on: idle_timeout while idle, read_timeout while a
  // request arrives or its response is written. While the request is
  // handled (kBusy) the last deadline may fire and is ignored: the response
  // re-arms it. Each cancelled wait costs a completion through the loop,
  // so a request that arrives whole costs two waits, not four.
  void OnTimeout() {
    if (phase_ == Phase::kIdle || phase_ == Phase::kWriting) {
      // Idle too long, or a client that does not read its response.
      Close();
    } else if (phase_ == Phase::kReading) {
      // Cancelling the read makes OnRead answer 408 (slowloris).
      timed_out_ = true;
      beast::error_code ec;
      stream_.socket().cancel(ec);
    }
  }

  void WaitForRequest() {
    if (table_->draining.load()) return Close();
    phase_ = Phase::kIdle;
    if (buffer_.size() > 0) return ReadRequest();  // a pipelined request
    ArmTimer(ctx_.config->limits.idle_timeout);
    // The read timeout starts with the first byte: an idle keep-alive
    // connection waits idle_timeout, a started request gets read_timeout.
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->buffer_.commit(n);
                              if (ec) return self->Close();
                              self->ReadRequest();
                            });
  }

  void ReadRequest() {
    phase_ = Phase::kReading;
    deadline_armed_ = false;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(ctx_.config->limits.max_header_bytes));
    parser_->body_limit(ctx_.config->limits.max_body_bytes);
    // The header first (not eager: put() stops after it), so that its
    // framing is checked and an Expect: 100-continue answered before any of
    // the body is read. A request usually arrives whole in its first
    // segment: parse what is buffered first, as http::async_read would, and
    // go asynchronous (under read_timeout) only for the rest.
    parser_->eager(false);
    header_bytes_ = 0;
    ReadHeader();
  }

  // The header section, from what is buffered, then read under read_timeout
  // while more is needed. Not http::async_read_header: Beast (1.74) applies
  // header_limit only while it waits for the end of the section, and to what
  // follows the request line as if that were the whole, so a section that
  // ends within one read passes at any size and one that never ends is read
  // until read_timeout; ParseBuffered measures line and section itself.
  void ReadHeader() {
    if (!ParseBuffered([this] { return parser_->is_header_done(); })) return;
    if (parser_->is_header_done()) return OnHeader({});
    ArmReadDeadline();
    stream_.async_read_some(buffer_.prepare(4096),
                            [self = shared_from_this()](beast::error_code ec, std::size_t n) {
                              self->buffer_.commit(n);
                              if (ec) return self->OnHeader(ec);
                              self->ReadHeader();
                            });
  }

  // Puts what is buffered into the parser until `enough()` or it needs more
  // bytes. False when it failed (OnRead has the error).
  template <typename Enough>
  bool ParseBuffered(Enough enough) {
    while (!enough() && buffer_.size() > 0) {
      beast::error_code ec;
      const bool in_header = !parser_->is_header_done();
      const std::size_t used = parser_->put(buffer_.data(), ec);
      buffer_.consume(used);
      if (in_header) {
        // The request line and header section: what the parser took, and,
        // while it waits for the section's end, all that is buffered.
        header_bytes_ += used;
        const std::size_t pending = parser_->is_header_done() ? 0 : buffer_.size();
        if ((!ec || ec == http::error::need_more) &&
            header_bytes_ + pending > ctx_.config->limits.max_header_bytes) {
          ec = http::error::header_limit;
        }
      }
      if (ec == http::error::need_more) break;
      if (ec) {
        OnRead(ec);
        return false;
      }
      if (used == 0) break;
    }
    return true;
  }

  // read_timeout runs from the first byte of a request to its last.
  void ArmReadDeadline() {
    if (deadline_armed_) return;
    deadline_armed_ = true;
    ArmTimer(ctx_.config->limits.read_timeout);
  }

  void OnHeader(beast::error_code ec) {
    if (ec || timed_out_) return OnRead(ec);
    const http::request_parser<http::string_body>::value_type& req = parser_->get();
    // RFC 9112 section 6.1: a request whose length is ambiguous is refused
    // (Beast would take the Content-Length beside "gzip", and read no body
    // at all for "gzip" alone: a smuggled second request).
    if (const auto te = req.find(http::field::transfer_encoding); te != req.end()) {
      if (!beast::iequals(te->value(), "chunked") || req.count(http::field::content_length) > 0) {
        return WriteResponse(
            ErrorResponse(400, "BAD_REQUEST",
                          "Transfer-Encoding must be exactly \"chunked\", without Content-Length"),
            false);
      }
    }
    if (const auto expect = req.find(http::field::expect); expect != req.end()) {
      if (!beast::iequals(expect->value(), "100-continue")) {
        return WriteResponse(
            ErrorResponse(417, "EXPECTATION_FAILED", "the only expectation met is 100-continue"),
            false);
      }
      // The client waits for this before it sends the body (RFC 9110
      // section 10.1.1); an HTTP/1.0 client gets none.
      if (!parser_->is_done() && req.version() == 11) {
        static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
        ArmReadDeadline();
        asio::async_write(stream_, asio::buffer(kContinue.data(), kContinue.size()),
                          [self = shared_from_this()](beast::error_code ec2, std::size_t) {
                            if (ec2) return self->OnRead(ec2);
                            self->ReadBody();
                          });
        return;
      }
    }
    ReadBody();
  }

  void ReadBody() {
    parser_->eager(true);  // as http::async_read sets it
    if (!ParseBuffered([this] { return parser_->is_done(); })) return;
    if (parser_->is_done()) return OnRead({});
    ArmReadDeadline();
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (timed_out_ || ec) return OnReadError(ec);
    http::request<http::string_body>& req = parser_->get();
    const bool keep_alive = req.keep_alive();
    HttpRequest request = TakeRequest(req);
    parser_.reset();
    const std::string_view path =
        std::string_view(request.target).substr(0, request.target.find('?'));

    if (path == "/dashboard" && request.method == "GET") {
      HttpResponse r;
      r.content_type = "text/html; charset=utf-8";
      r.body = std::string(DashboardHtml());
      return WriteResponse(std::move(r), keep_alive);
    }
    if (path == "/dashboard/events" && request.method == "GET") {
      const std::size_t q = request.target.find('?');
      Result<DashboardStreams::Subscription> sub = streams_->Subscribe(
          q == std::string::npos ? std::string_view()
                                 : std::string_view(request.target).substr(q + 1),
          *ctx_.stats->frame());
      if (!sub) {
        const bool full = sub.error().code() == StatusCode::kUnavailable;
        HttpResponse r = ErrorResponse(full ? 503 : 400, full ? "TOO_MANY_STREAMS" : "BAD_REQUEST",
                                       sub.error().message());
        if (full) r.headers.emplace_back("Retry-After", "10");
        return WriteResponse(std::move(r), keep_alive);
      }
      subscription_ = sub->id;
      channel_ = std::move(sub->channel);
      DisarmTimer();
      return StartSse(std::move(sub->first_event));
    }
    Dispatch(std::move(request), keep_alive);
  }

  // A request that could not be read: answered when the client can be told
  // why (too slow, too large, malformed), else the connection is closed.
  void OnReadError(beast::error_code ec) {
    // The timer is left armed (see OnTimeout): WriteResponse re-arms it.
    if (timed_out_) {
      return WriteResponse(ErrorResponse(408, "REQUEST_TIMEOUT", "the request took too long"),
                           false);
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return Close();
    if (ec == http::error::header_limit) {
      return WriteResponse(
          ErrorResponse(431, "HEADERS_TOO_LARGE", "the request header section is too large"),
          false);
    }
    if (ec == http::error::body_limit) {
      return WriteResponse(ErrorResponse(413, "PAYLOAD_TOO_LARGE", "the request body is too large"),
                           false);
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_target).category()) {
      return WriteResponse(ErrorResponse(400, "BAD_REQUEST", "malformed HTTP request"), false);
    }
    return Close();
  }

  static HttpRequest TakeRequest(http::request<http::string_body>& req) {
    HttpRequest request;
    request.method = std::string(req.method_string());
    request.target = std::string(req.target());
    request.headers.reserve(static_cast<std::size_t>(std::distance(req.begin(), req.end())));
    for (const auto& field : req) {
      request.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    request.body = std::move(req.body());
    return request;
  }

  void Dispatch(HttpRequest request, bool keep_alive) {
    phase_ = Phase::kBusy;
    // A fresh hit or a fail-fast is answered here, without a thread hop; an
    // uncached call without Redis runs its upstream exchange on this event
    // loop too, and its answer is posted back to it; anything that may
    // block goes to a worker. One route match for all three.
    HttpResponse now;
    std::function<void(HttpResponse)> later = [self = shared_from_this(),
                                               keep_alive](HttpResponse response) {
      asio::post(self->stream_.get_executor(),
                 [self, response = std::move(response), keep_alive]() mutable {
                   self->WriteResponse(std::move(response), keep_alive);
                 });
    };
    // The last line of defence, here and on the worker: whatever throws
    // while a request is answered becomes a 500 for that request alone.
    Handler::Dispatched dispatched = Handler::Dispatched::kAnswered;
    try {
      if (ctx_.before_handling) ctx_.before_handling(request.target, false);
      dispatched = ctx_.handler->Dispatch(request, loop_, now, later);
    } catch (...) {
      ctx_.internal_error(CurrentExceptionWhat());
      // Dispatch() takes `later` only when it returns kStarted.
      return WriteResponse(InternalErrorResponse(), false);
    }
    switch (dispatched) {
      case Handler::Dispatched::kAnswered:
        return WriteResponse(std::move(now), keep_alive);
      case Handler::Dispatched::kStarted:
        return;
      case Handler::Dispatched::kToWorker:
        break;
    }
    ToWorker(std::move(request), keep_alive);
  }

  // Handler::Handle on a worker thread; the answer is written on this
  // connection's loop.
  void ToWorker(HttpRequest request, bool keep_alive) {
    asio::post(*ctx_.workers,
               [self = shared_from_this(),
                request = std::make_shared<const HttpRequest>(std::move(request)), keep_alive] {
                 // An exception leaving a worker's task would end the process.
                 HttpResponse response;
                 bool keep = keep_alive;
                 try {
                   if (self->ctx_.before_handling)
                     self->ctx_.before_handling(request->target, true);
                   response = self->ctx_.handler->Handle(*request);
                 } catch (...) {
                   self->ctx_.internal_error(CurrentExceptionWhat());
                   response = InternalErrorResponse();
                   keep = false;
                 }
                 asio::post(self->stream_.get_executor(),
                            [self, response = std::move(response), keep]() mutable {
                              self->WriteResponse(std::move(response), keep);
                            });
               });
  }

  void WriteResponse(HttpResponse r, bool keep_alive) {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kWriting;
    keep_alive = keep_alive && !table_->draining.load();
    // A client that does not read its response is cut off like a slow one
    // (OnTimeout, kWriting).
    ArmTimer(ctx_.config->limits.read_timeout);
    const auto status = static_cast<unsigned>(r.status);
    if (status < 200 || status == 204 || status == 304) {
      // No body allowed (an upstream's 204 or 304 passed on: its envelope is
      // dropped); Beast's rules (prepare_payload) for these rare ones.
      r.body.clear();
      auto res = std::make_shared<http::response<http::string_body>>();
      res->result(status);
      res->version(11);
      res->set(http::field::server, "fusebox-gateway");
      res->set(http::field::content_type, r.content_type);
      for (const auto& [k, v] : r.headers) res->insert(k, v);
      res->body() = std::move(r.body);
      res->keep_alive(keep_alive);
      res->prepare_payload();
      http::async_write(
          stream_, *res,
          [self = shared_from_this(), res, keep_alive](beast::error_code ec, std::size_t) {
            if (ec || !keep_alive) return self->Close();
            self->WaitForRequest();
          });
      return;
    }
    // The bytes Beast's serializer would send for this response, written in
    // one buffer that the connection keeps (its capacity is reused): the
    // serializer's buffer sequences cost more than the copy.
    std::string& out = out_;
    out.clear();
    out += "HTTP/1.1 ";
    out += std::to_string(status);
    out += ' ';
    const beast::string_view reason = http::obsolete_reason(http::int_to_status(status));
    out.append(reason.data(), reason.size());
    out += "\r\nServer: fusebox-gateway\r\nContent-Type: ";
    out += r.content_type;
    out += "\r\n";
    AppendFieldLines(out, r.headers);
    if (!keep_alive) out += "Connection: close\r\n";
    out += "Content-Length: ";
    out += std::to_string(r.body.size());
    out += "\r\n\r\n";
    out += r.body;
    asio::async_write(stream_, asio::buffer(out),
                      [self = shared_from_this(), keep_alive](beast::error_code ec, std::size_t) {
                        if (ec || !keep_alive) return self->Close();
                        self->WaitForRequest();
                      });
  }

  void StartSse(std::string first_groups) {
    phase_ = Phase::kSse;
    sse_.store(true, std::memory_order_relaxed);
    static const std::string kHead =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Connection: keep-alive\r\nServer: fusebox-gateway\r\n\r\n";
    sse_queue_.push_back(std::make_shared<const std::string>(kHead));
    sse_queue_.push_back(std::make_shared<const std::string>(SnapshotEvent(ctx_)));
    sse_queue_.push_back(std::make_shared<const std::string>(std::move(first_groups)));
    WriteNextEvent();
    // Reads (and drops) whatever the client sends, to notice it leaving.
    ReadUntilClosed();
  }

  void ReadUntilClosed() {
    stream_.async_read_some(buffer_.prepare(512),
                            [self = shared_from_this()](beast::error_code ec, std::size_t) {
                              self->buffer_.clear();
                              if (ec) return self->Close();
                              self->ReadUntilClosed();
                            });
  }

  void WriteNextEvent() {
    if (sse_queue_.empty() || phase_ != Phase::kSse) return;
    std::shared_ptr<const std::string> next = sse_queue_.front();
    asio::async_write(stream_, asio::buffer(*next),
                      [self = shared_from_this(), next](beast::error_code ec, std::size_t) {
                        if (ec) return self->Close();
                        if (!self->sse_queue_.empty()) self->sse_queue_.pop_front();
                        self->WriteNextEvent();
                      });
  }

  void Close() {
    if (phase_ == Phase::kClosed) return;
    phase_ = Phase::kClosed;
    sse_.store(false, std::memory_order_relaxed);
    if (subscription_ != 0) streams_->Unsubscribe(std::exchange(subscription_, 0));
    DisarmTimer();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
    sse_queue_.clear();
  }

  ServerContext& ctx_;
  const std::shared_ptr<SessionTable> table_;
  const std::shared_ptr<DashboardStreams> streams_;
  const std::size_t loop_;
  Stream stream_;
  Timer timer_;
  std::uint64_t timer_gen_ = 0;
  bool timed_out_ = false;
  // The request being read has its read_timeout running.
  bool deadline_armed_ = false;
  beast::flat_buffer buffer_;
  // Bytes of the current request's line and header section parsed so far.
  std::size_t header_bytes_ = 0;
  std::optional<http::request_parser<http::string_body>> parser_;
  // The response being written.
  std::string out_;
  Phase phase_ = Phase::kIdle;
  std::atomic<bool> sse_{false};
  std::deque<std::shared_ptr<const std::string>> sse_queue_;
  // The dashboard stream's subscription (0: none) and its filter's channel.
  std::uint64_t subscription_ = 0;
  std::string channel_;
  std::uint64_t id_ = 0;
};

// What the breakers share with the fleet, and how /readyz asks whether that
// link is up: both empty without Redis.
struct FleetLink {
  std::shared_ptr<SharedState> shared_state;
  std::function<bool()> healthy;
  // Handler::Deps::fleet and fleet_instances.
  std::function<Result<FleetEntries>(Duration budget)> list;
  std::function<Result<std::string>(Duration budget)> instances;
  // Writes this instance's heartbeat (HeartbeatJson()) within the budget.
  std::function<Status(std::string_view figures, Duration budget)> publish;
};

}  // namespace

struct Gateway::Impl {
  // The event loops are declared first, destroyed last: handlers still
  // queued in them (holding sessions) are dropped after everything else is
  // gone, and a session's destructor only touches the shared SessionTable.
  // Loop 0: the acceptor, the timers and a share of the connections.
  asio::io_context ioc{1};
  // Loops 1 .. io_threads - 1. Each loop is run by one I/O thread, as an
  // nginx worker runs its own event loop: a connection and its upstream
  // exchanges stay on one thread, and no two threads share one scheduler's
  // lock and epoll. (One io_context run by every thread cost more CPU per
  // proxied request, and much more throughput when the cores are shared:
  // docs/performance.md.)
  std::vector<std::unique_ptr<asio::io_context>> more_loops;
  // Keep loops 1.. running while they have no connection; released at
  // shutdown, after the acceptor is closed.
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> loop_guards;
  GatewayConfig config;
  Clock* clock = nullptr;
  std::ostream* log = nullptr;
  // Adopts the fleet's overrides, logs transitions and Redis' trouble as
  // JSON lines (fleet_watch.h). Before the store, which calls it.
  std::shared_ptr<FleetWatch> fleet_watch;
  // The TLS contexts of the https:// upstreams, made (and checked) before
  // anything starts; the upstream pools share them (TlsClientContext::Shared).
  std::vector<std::shared_ptr<TlsClientContext>> tls_contexts;
#ifdef FUSEBOX_GATEWAY_WITH_REDIS
  std::shared_ptr<redis::RedisSharedState> redis_state;
  std::unique_ptr<redis::RedisSnapshotStore> redis_store;
#endif
  // The in-process snapshot tier; alone without Redis, in front of it with.
  std::unique_ptr<MemorySnapshotStore> local_store;
  std::unique_ptr<TieredSnapshotStore> tiered_store;
  // What the handler reads and writes: local_store or tiered_store.
  SnapshotStore* store = nullptr;
  std::function<std::string()> store_metrics;
  std::shared_ptr<MetricsCollector> metrics;
  std::shared_ptr<AuditLog> audit;
  std::shared_ptr<DashboardFeed> feed;
  DashboardStats dashboard_stats{{}};
  std::shared_ptr<DashboardStreams> dashboard_streams =
      std::make_shared<DashboardStreams>(kMaxDashboardStreams);
  // The last snapshot event sent: a new one goes out only when it differs.
  std::string last_snapshot;
  std::unique_ptr<Registry> registry;
  std::unique_ptr<Handler> handler;
  std::unique_ptr<asio::thread_pool> workers;
  std::shared_ptr<SessionTable> table = std::make_shared<SessionTable>();
  ServerContext ctx;
  // The acceptor and the timers live on one strand, so that shutdown (which
  // closes and cancels them) never races their handlers.
  asio::strand<asio::io_context::executor_type> control = asio::make_strand(ioc);
  tcp::acceptor acceptor{control};
  asio::steady_timer ticker{control};
  asio::steady_timer grace{control};
  std::vector<std::thread> io_threads;
  // The loop of the next connection (round robin; on the control strand).
  std::size_t next_loop = 0;
  // After an accept failed for want of descriptors or memory, the wait
  // before the next try (zero: none failed); on the control strand.
  asio::steady_timer accept_pause{control};
  std::chrono::milliseconds accept_backoff{0};
  // Accept failures: out of descriptors or memory (EMFILE, ENFILE, ENOBUFS,
  // ENOMEM), and any other.
  std::atomic<std::uint64_t> accept_errors_exhausted{0};
  std::atomic<std::uint64_t> accept_errors_other{0};
  std::atomic<std::uint64_t> accept_backoffs{0};
  // Exceptions caught around a request; the last log line about one.
  std::atomic<std::uint64_t> internal_errors{0};
  internal::Mutex log_mu;
  TimePoint last_error_line FUSEBOX_GUARDED_BY(log_mu) = {};
  std::uint64_t unlogged_errors FUSEBOX_GUARDED_BY(log_mu) = 0;
  std::string address;
  int port = 0;
  internal::Mutex shutdown_mu;
  bool shut_down FUSEBOX_GUARDED_BY(shutdown_mu) = false;

  asio::io_context& Loop(std::size_t i) { return i == 0 ? ioc : *more_loops[i - 1]; }

  void Accept() {
    const std::size_t loop = next_loop;
    next_loop = (next_loop + 1) % (more_loops.size() + 1);
    acceptor.async_accept(Loop(loop).get_executor(),
                          [this, loop](beast::error_code ec, Session::Stream::socket_type s) {
                            if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
                            if (ec) return OnAcceptError(ec);
                            accept_backoff = std::chrono::milliseconds(0);
                            if (!table->draining.load()) {
                              std::make_shared<Session>(std::move(s), ctx, loop)->Start();
                            }
                            Accept();
                          });
  }

  // Out of descriptors or memory, the connection stays in the listen queue
  // and the next accept fails at once: trying again at once spins a core.
  // Wait 50 ms, doubling to 1 s while it lasts; anything else (a client
  // that reset before it was accepted) is retried at once.
  void OnAcceptError(beast::error_code ec) {
    const bool exhausted = ec == asio::error::no_descriptors || ec.value() == ENFILE ||
                           ec == asio::error::no_buffer_space || ec == asio::error::no_memory;
    if (!exhausted) {
      accept_errors_other.fetch_add(1, std::memory_order_relaxed);
      return Accept();
    }
    accept_errors_exhausted.fetch_add(1, std::memory_order_relaxed);
    accept_backoffs.fetch_add(1, std::memory_order_relaxed);
    if (accept_backoff.count() == 0) {
      LogLine("fusebox gateway: accept: " + ec.message() + "; pausing accepts (50 ms to 1 s)");
    }
    accept_backoff = std::clamp(accept_backoff * 2, std::chrono::milliseconds(50),
                                std::chrono::milliseconds(1000));
    accept_pause.expires_after(accept_backoff);
    accept_pause.async_wait([this](beast::error_code e) {
      if (e || !acceptor.is_open()) return;
      Accept();
    });
  }

  // An exception caught around a request: counted, and logged at most once
  // a second (a client that found a way to make every request throw must
  // not flood the log). The message is an exception's, never a header,
  // body or query string.
  void InternalError(std::string_view what) {
    internal_errors.fetch_add(1, std::memory_order_relaxed);
    const TimePoint now = clock->Now();
    std::string line;
    {
      internal::MutexLock lock(&log_mu);
      if (now - last_error_line < std::chrono::seconds(1) && last_error_line != TimePoint{}) {
        ++unlogged_errors;
        return;
      }
      line = "fusebox gateway: internal error answering a request (answered 500 INTERNAL_ERROR): " +
             Printable(what);
      if (unlogged_errors > 0) {
        line += " (and " + std::to_string(unlogged_errors) + " more not logged)";
      }
      last_error_line = now;
      unlogged_errors = 0;
    }
    LogLine(line);
  }

  // One plain line on the log. Through the JSON line log's lock, which the
  // store's thread writes under too: two threads never write the stream at
  // once.
  void LogLine(std::string line) {
    line += '\n';
    fleet_watch->line_log()->WriteVerbatim(line);
  }

  // The accept loop's families for /metrics.
  void AppendMetrics(std::string& out) {
    out +=
        "# HELP fusebox_gateway_accept_errors_total Failed accepts: reason=\"exhausted\" when out "
        "of descriptors or memory (accepting pauses), else \"other\".\n"
        "# TYPE fusebox_gateway_accept_errors_total counter\n"
        "fusebox_gateway_accept_errors_total{reason=\"exhausted\"} " +
        std::to_string(accept_errors_exhausted.load()) +
        "\nfusebox_gateway_accept_errors_total{reason=\"other\"} " +
        std::to_string(accept_errors_other.load()) +
        "\n# HELP fusebox_gateway_accept_pauses_total Pauses of the accept loop (50 ms to 1 s) "
        "after an accept found no descriptor or memory.\n"
        "# TYPE fusebox_gateway_accept_pauses_total counter\n"
        "fusebox_gateway_accept_pauses_total " +
        std::to_string(accept_backoffs.load()) +
        "\n# HELP fusebox_gateway_connections Client connections open.\n"
        "# TYPE fusebox_gateway_connections gauge\n"
        "fusebox_gateway_connections " +
        std::to_string(table->size()) +
        "\n# HELP fusebox_gateway_internal_errors_total Requests answered 500 INTERNAL_ERROR "
        "because handling them threw.\n"
        "# TYPE fusebox_gateway_internal_errors_total counter\n"
        "fusebox_gateway_internal_errors_total " +
        std::to_string(internal_errors.load()) + "\n";
  }

  void Broadcast(const std::string& event) {
    auto shared = std::make_shared<const std::string>(event);
    for (const std::shared_ptr<Session>& s : table->All()) {
      if (s->is_sse()) s->SendEvent(shared);
    }
  }

  // Once a second: the breakers' counts into the dashboard's rings (always,
  // so that a page opened mid-incident has the last minutes), then, while a
  // dashboard is open, one render per filter in use, sent as deltas, and
  // the snapshot when it changed. On a worker, one tick at a time: with
  // 10,000 circuits a tick is about 20 ms of CPU (docs/performance.md), too
  // long to hold the loop that accepts.
  void Tick() {
    ticker.expires_after(std::chrono::seconds(1));
    ticker.async_wait([this](beast::error_code ec) {
      if (ec || table->draining.load()) return;
      if (!dashboard_ticking.exchange(true)) {
        asio::post(*workers, [this] {
          DashboardTick();
          dashboard_ticking.store(false);
        });
      }
      Tick();
    });
  }
  void DashboardTick() {
    if (table->draining.load()) return;
    dashboard_stats.Tick(clock->Now(), SampleBreakers(*registry));
    PublishHeartbeat();
    if (dashboard_streams->size() == 0) return;
    RefreshFleet();
    for (auto& [channel, event] : dashboard_streams->Publish(*dashboard_stats.frame())) {
      auto name = std::make_shared<const std::string>(channel);
      for (const std::shared_ptr<Session>& s : table->All()) {
        if (s->is_sse()) s->SendEvent(event, name);
      }
    }
    std::string snapshot = SnapshotEvent(ctx);
    if (snapshot != last_snapshot) {
      Broadcast(snapshot);
      last_snapshot = std::move(snapshot);
    }
  }
  // Set while a DashboardTick() is queued or runs; last_snapshot is its own.
  std::atomic<bool> dashboard_ticking{false};

  // Every kHeartbeatPeriod of ticks (dashboard open or not: other
  // instances' dashboards show it), this instance's figures to the fleet,
  // on a worker of its own: a slow Redis delays neither this tick nor a
  // call (fleet_answers.h). One at a time; a failure is only a gap in the
  // table, the store's breaker keeps a dead Redis from costing more.
  void PublishHeartbeat() {
    static constexpr auto kEvery = kHeartbeatPeriod / std::chrono::seconds(1);
    if (!fleet_publish || ++ticks_since_heartbeat < kEvery) return;
    if (heartbeat_sending.exchange(true)) return;
    ticks_since_heartbeat = 0;
    auto figures = std::make_shared<const std::string>(
        HeartbeatJson(*dashboard_stats.frame(), WallClockNow()));
    asio::post(*workers, [this, figures] {
      (void)fleet_publish(*figures, kHeartbeatPeriod);
      heartbeat_sending.store(false);
    });
  }
  std::function<Status(std::string_view, Duration)> fleet_publish;
  // config.instance, or "<host>:<port>" (set once listening).
  std::string instance_id;
  // DashboardTick()'s own.
  std::int64_t ticks_since_heartbeat = 0;
  std::atomic<bool> heartbeat_sending{false};

  // The dashboard's view of the fleet: read from Redis on a worker (it may
  // block for Handler::kFleetBudget), never on this loop, one read at a time;
  // the next tick's snapshot carries it.
  void RefreshFleet() {
    if (!fleet_listed || fleet_refreshing.exchange(true)) return;
    asio::post(*workers, [this] {
      Result<std::string> got = handler->FleetJson();
      {
        internal::MutexLock lock(&fleet_mu);
        fleet_last = got ? *got
                         : "{\"error\":" +
                               nlohmann::json(std::string(got.error().message()))
                                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                               "}";
      }
      fleet_refreshing.store(false);
    });
  }
  std::string FleetLast() FUSEBOX_EXCLUDES(fleet_mu) {
    internal::MutexLock lock(&fleet_mu);
    return fleet_last;
  }
  bool fleet_listed = false;
  std::atomic<bool> fleet_refreshing{false};
  internal::Mutex fleet_mu;
  std::string fleet_last FUSEBOX_GUARDED_BY(fleet_mu) = "null";

  // Gateway::Create's steps, in order (each defined below, with what it does).
  Status OpenTls();
  Result<FleetLink> OpenStores();
#ifdef FUSEBOX_GATEWAY_WITH_REDIS
  Result<FleetLink> OpenRedis();
#endif
  Status MakeRegistry(const FleetLink& fleet);
  Status Listen();
  void MakeHandler(const FleetLink& fleet,
                   std::function<void(std::string_view, bool)> before_handling);
  void Start();

  void Shutdown();

#ifdef FUSEBOX_GATEWAY_WITH_REDIS
  // /metrics text of the snapshot tiers and of the Redis snapshot pool.
  std::string StoreMetrics() const {
    std::string out;
    auto metric = [&out](std::string_view name, std::string_view type, std::string_view help,
                         const std::vector<std::pair<std::string, std::int64_t>>& rows) {
      out += "# HELP " + std::string(name) + " " + std::string(help) + "\n# TYPE " +
             std::string(name) + " " + std::string(type) + "\n";
      for (const auto& [labels, value] : rows) {
        out += std::string(name) + labels + " " + std::to_string(value) + "\n";
      }
    };
    const TieredSnapshotStore::Stats t = tiered_store->stats();
    auto n = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    metric("fusebox_gateway_snapshot_tier_reads_total", "counter",
           "Snapshot reads by the tier that answered (local_on_redis_error: Redis failed, the "
           "in-process copy was served).",
           {{"{result=\"local_hit\"}", n(t.local_hits)},
            {"{result=\"redis_hit\"}", n(t.remote_hits)},
            {"{result=\"miss\"}", n(t.misses)},
            {"{result=\"redis_error\"}", n(t.remote_errors)},
            {"{result=\"redis_timeout\"}", n(t.remote_timeouts)},
            {"{result=\"local_on_redis_error\"}", n(t.local_on_remote_error)}});
    metric("fusebox_gateway_snapshot_redis_put_errors_total", "counter",
           "Snapshot writes Redis refused or missed (the in-process copy was kept).",
           {{"", n(t.remote_put_errors)}});
    metric("fusebox_gateway_snapshot_local_entries", "gauge",
           "Snapshots held by the in-process tier.",
           {{"", static_cast<std::int64_t>(local_store->size())}});
    metric("fusebox_gateway_snapshot_local_bytes", "gauge",
           "Bytes of keys and values held by the in-process tier.",
           {{"", static_cast<std::int64_t>(local_store->bytes())}});
    const redis::RedisSnapshotStore::Stats r = redis_store->stats();
    metric("fusebox_gateway_snapshot_redis_commands_total", "counter",
           "Redis snapshot store commands by outcome (refused: its breaker is open; timeout: out "
           "of the request's time).",
           {{"{result=\"sent\"}", r.commands},
            {"{result=\"error\"}", r.errors},
            {"{result=\"refused\"}", r.refused},
            {"{result=\"timeout\"}", r.timeouts}});
    metric("fusebox_gateway_snapshot_redis_pool_waits_total", "counter",
           "Callers of the Redis snapshot pool by how they got a connection: waited, waited in "
           "vain (timeout), or were refused because the queue was full.",
           {{"{result=\"waited\"}", r.pool_waits},
            {"{result=\"timeout\"}", r.pool_wait_timeouts},
            {"{result=\"queue_full\"}", r.pool_queue_full}});
    metric("fusebox_gateway_snapshot_redis_pool_connections", "gauge",
           "Redis snapshot pool connections: size, in use now, callers waiting now.",
           {{"{state=\"size\"}", r.pool_size},
            {"{state=\"in_use\"}", r.pool_in_use},
            {"{state=\"waiting\"}", r.pool_waiting}});
    return out;
  }
#endif
};

void Gateway::Impl::Shutdown() {
  {
    internal::MutexLock lock(&shutdown_mu);
    if (shut_down) return;
    shut_down = true;
  }
  LogLine("fusebox gateway: shutting down (in-flight requests get up to " +
          FormatDuration(config.limits.shutdown_grace) + ")");
  handler->SetDraining();
  table->draining.store(true);
  std::atomic<bool> forced{false};
  asio::post(control, [this, &forced] {
    beast::error_code ec;
    acceptor.close(ec);
    ticker.cancel();
    accept_pause.cancel();
    // No connection is accepted after this (accepts run on this strand):
    // loops 1.. may end once their connections have.
    loop_guards.clear();
    for (const std::shared_ptr<Session>& s : table->All()) s->Drain();
    if (table->empty()) return;
    grace.expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        config.limits.shutdown_grace));
    grace.async_wait([this, &forced](beast::error_code ec2) {
      if (ec2) return;  // cancelled: every connection ended in time
      forced.store(true);
      for (const std::shared_ptr<Session>& s : table->All()) s->ForceClose();
      ioc.stop();
      for (const std::unique_ptr<asio::io_context>& loop : more_loops) loop->stop();
    });
    // The last connection may have ended before the timer was armed.
    if (table->empty()) grace.cancel();
  });
  // The io threads return once nothing is left to do: acceptor closed, no
  // connection, no timer.
  for (std::thread& t : io_threads) t.join();
  io_threads.clear();
  table->closed.store(true);
  if (forced.load()) {
    LogLine("fusebox gateway: shutdown grace exceeded; remaining connections closed");
    workers->stop();
  }
  workers->join();
  // Destroying the breakers releases any probe lease they hold; then the
  // shared state's queue (trips, closes, releases) is sent.
  fleet_watch->AdoptInto(nullptr);  // No breaker is made for the fleet any more.
  handler.reset();
  registry.reset();
#ifdef FUSEBOX_GATEWAY_WITH_REDIS
  if (redis_state) redis_state->Flush();
#endif
  LogLine("fusebox gateway: stopped");
}

Gateway::Gateway(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gateway::~Gateway() { Shutdown(); }

int Gateway::port() const { return impl_->port; }
std::string Gateway::address() const { return impl_->address; }
void Gateway::Shutdown() { impl_->Shutdown(); }
Registry& Gateway::registry() { return *impl_->registry; }
void Gateway::AwaitSingleFlightWaitersForTesting(std::string_view key, std::size_t n) {
  impl_->handler->AwaitSingleFlightWaitersForTesting(key, n);
}

// Fleet state and snapshots: Redis when configured, else this process.
// Snapshots always have an in-process tier, so that a fresh hit never
// waits for Redis and an outage still serves what this instance holds.
Result<FleetLink> Gateway::Impl::OpenStores() {
  // With Redis, a snapshot's age is real time (Redis measures it by its
  // TTL), so the local tier measures on real time too: a copy moved between
  // the tiers keeps a comparable age.
  Result<std::unique_ptr<MemorySnapshotStore>> local =
      MemorySnapshotStore::Create({.clock = config.redis_url.empty() ? clock : &SystemClock(),
                                   .max_entries = config.cache_max_entries,
                                   .max_bytes = config.cache_max_bytes});
  if (!local) return local.error();
  local_store = std::move(*local);
  store = local_store.get();
  if (config.redis_url.empty()) return FleetLink{};
#ifdef FUSEBOX_GATEWAY_WITH_REDIS
  return OpenRedis();
#else
  return Status::InvalidArgument(
      "redis is configured but this build has no fusebox::redis (libhiredis-dev)");
#endif
}

#ifdef FUSEBOX_GATEWAY_WITH_REDIS
namespace {
// fleet.tls over the URL's TLS settings, key by key.
void ApplyFleetTls(const FleetTlsConfig& tls, redis::ConnectionOptions& conn) {
  if (tls.ca_file) conn.ca_file = *tls.ca_file;
  if (tls.client_cert) conn.client_cert = *tls.client_cert;
  if (tls.client_key) conn.client_key = *tls.client_key;
  if (tls.insecure_skip_verify) conn.insecure_skip_verify = *tls.insecure_skip_verify;
}
}  // namespace

// The fleet's shared state, and the Redis snapshot tier behind the local one.
Result<FleetLink> Gateway::Impl::OpenRedis() {
  Result<redis::ConnectionOptions> conn = redis::ParseRedisUrl(config.redis_url);
  if (!conn) return Status::InvalidArgument("redis: " + std::string(conn.error().message()));
  ApplyFleetTls(config.fleet_tls, *conn);
  // fleet.*, unless the URL's query set the timeout itself.
  const std::string_view query = [&]() -> std::string_view {
    const std::size_t q = config.redis_url.find('?');
    return q == std::string::npos ? std::string_view()
                                  : std::string_view(config.redis_url).substr(q);
  }();
  if (config.fleet.connect_timeout && query.find("connect_timeout=") == std::string_view::npos) {
    conn->connect_timeout = *config.fleet.connect_timeout;
  }
  if (config.fleet.command_timeout && query.find("?timeout=") == std::string_view::npos &&
      query.find("&timeout=") == std::string_view::npos) {
    conn->command_timeout = *config.fleet.command_timeout;
  }
  if (Status s = conn->Validate(); !s.ok()) {
    return Status::InvalidArgument("redis (with fleet): " + std::string(s.message()));
  }
  const int pool = config.fleet.pool_size > 0 ? config.fleet.pool_size : config.workers;
  Result<std::shared_ptr<redis::RedisSharedState>> state = redis::RedisSharedState::Create(
      {.connection = *conn,
       .heartbeat = config.fleet.heartbeat,
       .down_for = config.fleet.down_for,
       .sync_connections = pool,
       .on_event = [watch = fleet_watch](const redis::SharedStateEvent& e) {
         watch->LogStoreEvent(redis::SharedStateEventKindName(e.kind), e.detail, e.recovered);
       }});
  if (!state) return state.error();
  redis_state = *state;
  Duration max_stale = std::chrono::hours(24);
  // A local copy younger than the shortest freshness of any route is
  // fresh for all of them: no round trip.
  Duration local_fresh_for = Duration::max();
  for (const RouteConfig& r : config.routes) {
    if (!r.cache) continue;
    max_stale = std::max(max_stale, r.cache->max_stale);
    local_fresh_for = std::min(local_fresh_for, r.cache->fresh_for);
  }
  if (local_fresh_for == Duration::max()) local_fresh_for = Duration::zero();
  // One connection per worker (only workers call it), and waiters queue
  // rather than being refused: a busy pool is not a miss.
  Result<std::unique_ptr<redis::RedisSnapshotStore>> remote = redis::RedisSnapshotStore::Create(
      {.connection = *conn,
       .max_age = std::chrono::ceil<std::chrono::milliseconds>(max_stale),
       .connections = pool,
       .max_waiters = config.workers * 4});
  if (!remote) return remote.error();
  redis_store = std::move(*remote);
  Result<std::unique_ptr<TieredSnapshotStore>> tiered =
      TieredSnapshotStore::Create({.local = local_store.get(),
                                   .remote = redis_store.get(),
                                   .local_fresh_for = local_fresh_for});
  if (!tiered) return tiered.error();
  tiered_store = std::move(*tiered);
  store = tiered_store.get();
  store_metrics = [this] { return StoreMetrics() + fleet_watch->Metrics(redis_state->health()); };
  LogLine("fusebox gateway: sharing circuits and snapshots through " + conn->Describe());
  return FleetLink{
      .shared_state = redis_state,
      .healthy = [state = redis_state] { return state->healthy(); },
      .list = [state = redis_state](Duration budget) -> Result<FleetEntries> {
        Result<redis::FleetListing> got = state->ListFleet(Handler::kMaxFleetEntries, budget);
        if (!got) return got.error();
        FleetEntries out{.entries = {}, .truncated = got->truncated};
        for (redis::FleetCircuit& c : got->circuits) {
          out.entries.push_back({.circuit = std::move(c.circuit),
                                 .state = std::string(redis::ReadStateName(c.view.state)),
                                 .remaining = c.view.remaining,
                                 .override_in_force = std::move(c.view.override_in_force)});
        }
        return out;
      },
      .instances = [this, state = redis_state](Duration budget) -> Result<std::string> {
        Result<redis::InstanceListing> got =
            state->ListInstances(kHeartbeatStaleAfter, kMaxDashboardInstances, budget);
        if (!got) return got.error();
        std::vector<InstanceHeartbeat> rows;
        for (redis::InstanceFigures& f : got->instances) {
          rows.push_back({.id = std::move(f.id), .json = std::move(f.json), .age = f.age});
        }
        return InstancesJson(rows, got->truncated, instance_id);
      },
      // instance_id is set by MakeHandler(), before the first tick.
      .publish = [this](std::string_view figures, Duration budget) -> Status {
        return redis_state->PublishInstance(instance_id, figures, kHeartbeatStaleAfter, budget);
      }};
}
#endif

// Observers (metrics, the audit log when the admin API is on, the
// dashboard's feed), then the registry and the two circuit templates, which
// share the fleet's state.
Status Gateway::Impl::MakeRegistry(const FleetLink& fleet) {
  // Calls timed (_calls_seconds_max): 9 ns against a request's microseconds.
  metrics = std::make_shared<MetricsCollector>(MetricsCollectorOptions{.time_calls = true});
  std::vector<std::shared_ptr<BreakerObserver>> observers = {metrics};
  if (config.admin) {
    Result<std::unique_ptr<FileLineSink>> sink = FileLineSink::Create(config.admin->audit_log);
    if (!sink) return sink.error();
    Result<std::unique_ptr<AuditLog>> made =
        AuditLog::Create({.sink = std::shared_ptr<LineSink>(std::move(*sink)),
                          .wall_clock = [] { return WallClockNow(); }});
    if (!made) return made.error();
    audit = std::move(*made);
    observers.push_back(audit);
  }
  // Every transition as a JSON line on the log; rejections only counted.
  Result<std::unique_ptr<EventLog>> transitions =
      EventLog::Create({.sink = fleet_watch->line_log(),
                        .wall_clock = [] { return WallClockNow(); },
                        .rejections_per_interval = 0,
                        .sampling_interval = std::chrono::minutes(1)});
  if (!transitions) return transitions.error();
  observers.push_back(std::shared_ptr<EventLog>(std::move(*transitions)));
  feed = std::make_shared<DashboardFeed>(
      *clock,
      [this](const std::string& json) {
        auto event = std::make_shared<std::string>("event: transition\ndata: " + json + "\n\n");
        asio::post(ioc, [this, event] { Broadcast(*event); });
      },
      [this](const TransitionEvent& e) { dashboard_stats.OnTransition(e); });
  observers.push_back(feed);

  RegistryOptions registry_options{.clock = clock,
                                   .max_breakers = config.breakers.max_breakers,
                                   .max_breakers_hard = config.breakers.max_breakers_hard};
  ObserveRegistry(registry_options, std::move(observers));
  Result<std::unique_ptr<Registry>> made = Registry::Create(std::move(registry_options));
  if (!made) return made.error();
  registry = std::move(*made);
  CircuitBreakerConfig transient = TransientTemplate(config.breakers);
  CircuitBreakerConfig quota = QuotaTemplate(config.breakers);
  transient.shared_state = fleet.shared_state;
  quota.shared_state = fleet.shared_state;
  transient.shared_probe_lease = ProbeLease(config);
  quota.shared_probe_lease = ProbeLease(config);
  if (Status s = registry->AddConfig(std::string(meta::kTransientConfigName), transient); !s.ok()) {
    return s;
  }
  if (Status s = registry->AddConfig(std::string(meta::kQuotaConfigName), quota); !s.ok()) {
    return s;
  }
  // An override set anywhere in the fleet makes its breaker here at once.
  if (fleet.shared_state) {
    fleet_watch->AdoptInto(registry.get());
    (void)fleet.shared_state->WatchOverrides(fleet_watch);
  }
  return Status();
}

// Loads every https:// upstream's certificates and keys (an unreadable or
// malformed file stops the start, naming the upstream, the key and the file),
// and warns, once each, of an upstream whose certificates go unverified.
Status Gateway::Impl::OpenTls() {
  for (std::size_t i = 0; i < config.upstreams.size(); ++i) {
    const UpstreamConfig& up = config.upstreams[i];
    if (!up.https) continue;
    Result<std::shared_ptr<TlsClientContext>> tls = TlsClientContext::Shared(up.tls);
    if (!tls) {
      return Status::InvalidArgument("upstreams[" + std::to_string(i) + "] (" + up.name +
                                     "): " + std::string(tls.error().message()));
    }
    tls_contexts.push_back(*std::move(tls));
    if (up.tls.insecure_skip_verify) {
      LogLine("fusebox gateway: WARNING: upstream " + up.name +
              ": tls.insecure_skip_verify is true: its certificate and host name are NOT "
              "verified; anyone on the path can impersonate it");
    }
  }
  return Status();
}

// Binds the listener (a host name is resolved, its first address taken) and
// records the port and "host:port" actually bound.
Status Gateway::Impl::Listen() {
  beast::error_code ec;
  asio::ip::address bind_address = asio::ip::make_address(config.listen_host, ec);
  if (ec) {
    tcp::resolver resolver(ioc);
    auto results = resolver.resolve(config.listen_host, std::to_string(config.listen_port), ec);
    if (ec || results.empty()) {
      return Status::InvalidArgument("listen: cannot resolve \"" + config.listen_host + "\"");
    }
    bind_address = results.begin()->endpoint().address();
  }
  const tcp::endpoint endpoint(bind_address, static_cast<unsigned short>(config.listen_port));
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return Status::Unavailable("listen on " + config.listen_host + ":" +
                               std::to_string(config.listen_port) + ": " + ec.message());
  }
  port = acceptor.local_endpoint().port();
  const bool v6 = bind_address.is_v6();
  address =
      (v6 ? "[" : "") + bind_address.to_string() + (v6 ? "]" : "") + ":" + std::to_string(port);
  return Status();
}

// The I/O loops beyond loop 0, the handler, the worker pool and what every
// session shares (ServerContext).
void Gateway::Impl::MakeHandler(const FleetLink& fleet,
                                std::function<void(std::string_view, bool)> before_handling) {
  const std::string instance = config.instance.empty() ? address : config.instance;
  instance_id = instance;
  std::vector<asio::io_context*> loops = {&ioc};
  for (int i = 1; i < config.io_threads; ++i) {
    more_loops.push_back(std::make_unique<asio::io_context>(1));
    loop_guards.push_back(asio::make_work_guard(*more_loops.back()));
    loops.push_back(more_loops.back().get());
  }
  handler = std::make_unique<Handler>(
      Handler::Deps{.config = &config,
                    .registry = registry.get(),
                    .store = store,
                    .metrics = metrics.get(),
                    .shared_state_healthy = fleet.healthy,
                    .instance = instance,
                    .store_may_block = !config.redis_url.empty(),
                    .store_metrics = store_metrics,
                    .circuits_may_block = !config.redis_url.empty(),
                    .loops = loops,
                    .on_internal_error = [this](std::string_view what) { InternalError(what); },
                    .fleet = fleet.list,
                    .fleet_instances = fleet.instances,
                    .more_metrics = [this](std::string& out) { AppendMetrics(out); },
                    .on_stale = [this](std::string_view key) { dashboard_stats.CountStale(key); },
                    .latencies = &dashboard_stats.latencies()});
  workers = std::make_unique<asio::thread_pool>(static_cast<std::size_t>(config.workers));
  ctx = ServerContext{.config = &config,
                      .handler = handler.get(),
                      .feed = feed.get(),
                      .stats = &dashboard_stats,
                      .streams = dashboard_streams,
                      .workers = workers.get(),
                      .table = table,
                      .instance = instance,
                      .internal_error = [this](std::string_view what) { InternalError(what); },
                      .before_handling = std::move(before_handling),
                      .fleet_json = [this] { return FleetLast(); }};
  fleet_listed = fleet.list != nullptr;
  fleet_publish = fleet.publish;
  table->on_empty_while_draining = [this] { asio::post(control, [this] { grace.cancel(); }); };
}

// Accepting, the dashboard's ticker and the I/O threads: from here on the
// gateway serves.
void Gateway::Impl::Start() {
  Accept();
  Tick();
  for (int i = 0; i < config.io_threads; ++i) {
    io_threads.emplace_back([this, i] {
      // A completion handler that throws ends run(); the loop goes on with
      // the others (its connection is dropped with the handler).
      for (;;) {
        try {
          Loop(static_cast<std::size_t>(i)).run();
          return;
        } catch (...) {
          InternalError(CurrentExceptionWhat());
        }
      }
    });
  }
}

Result<std::unique_ptr<Gateway>> Gateway::Create(GatewayOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(options.config);
  impl->clock = options.clock != nullptr ? options.clock : &SystemClock();
  impl->log = options.log != nullptr ? options.log : &std::cerr;
  impl->fleet_watch = std::make_shared<FleetWatch>(*impl->log);
  if (Status s = impl->OpenTls(); !s.ok()) return s;
  Result<FleetLink> fleet = impl->OpenStores();
  if (!fleet) return fleet.error();
  if (Status s = impl->MakeRegistry(*fleet); !s.ok()) return s;
  if (Status s = impl->Listen(); !s.ok()) return s;
  impl->MakeHandler(*fleet, std::move(options.before_handling_for_testing));
  impl->Start();
  return std::unique_ptr<Gateway>(new Gateway(std::move(impl)));
}

int RunGateway(const std::string& config_path, const std::string& redis_url,
               const std::string& listen, std::ostream& out, std::ostream& err) {
  Result<GatewayConfig> config = LoadGatewayConfig(config_path, ProcessEnv());
  if (!config) {
    err << config.error().message() << "\nfusebox gateway: " << config_path
        << ": bad configuration, not started" << std::endl;
    return 1;
  }
  if (!redis_url.empty()) config->redis_url = redis_url;
  if (!listen.empty()) {
    if (Status s = ParseListen(listen, config->listen_host, config->listen_port); !s.ok()) {
      err << "fusebox gateway: --listen: " << s.message() << std::endl;
      return 1;
    }
  }
  // SIGTERM and SIGINT are blocked in every thread (the gateway's threads
  // inherit this mask) and taken synchronously by sigwait below, so no
  // signal handler runs concurrently with anything.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Result<std::unique_ptr<Gateway>> gateway =
      Gateway::Create({.config = std::move(*config), .log = &err});
  if (!gateway) {
    err << "fusebox gateway: " << gateway.error().message() << std::endl;
    return 1;
  }
  out << "fusebox gateway: listening on " << (*gateway)->address() << std::endl;
  int sig = 0;
  sigwait(&signals, &sig);
  err << "fusebox gateway: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT") << " received" << std::endl;
  (*gateway)->Shutdown();
  return 0;
}

}  // namespace fusebox::gateway
