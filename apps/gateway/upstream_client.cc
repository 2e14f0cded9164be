#include "apps/gateway/upstream_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cerrno>
#include <chrono>
#include <optional>

#include "apps/gateway/tls_client.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/meta/response.h"

namespace fusebox::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// An idle keep-alive connection may have been closed by the upstream while it
// waited; a non-blocking peek tells: EAGAIN means still open, 0 bytes means
// closed, data on an idle connection is a protocol error (drop it too). One
// recv(MSG_PEEK | MSG_DONTWAIT): toggling the socket's blocking mode around a
// peek cost two more system calls per request.
template <typename Socket>
bool StillOpen(Socket& s) {
  if (!s.is_open()) return false;
  char byte;
  const ssize_t n = ::recv(s.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

Status ErrorStatus(const UpstreamConfig& config, beast::error_code ec, std::string_view during) {
  const std::string where = "upstream " + config.name;
  if (ec == http::error::body_limit) {
    // Not a connection problem: the handler tells the client what it was.
    return Status::Rejected(StatusCode::kUnavailable, UpstreamPool::kReplyTooLarge);
  }
  if (ec == beast::error::timeout) {
    return Status(StatusCode::kTimeout, where + ": deadline passed during " + std::string(during));
  }
  return Status::Unavailable(where + ": " + std::string(during) + ": " + ec.message());
}

// A failure on a connection to `config`'s upstream: a TLS failure that is the
// certificates' or the settings' doing (kUnauthenticated, its reason naming
// the check: tls_client.h), else ErrorStatus. `handshake`: whether it
// happened before the TLS handshake completed.
Status FailureStatus(const UpstreamConfig& config, const TlsClientContext* tls, SSL* ssl,
                     beast::error_code ec, std::string_view during, bool handshake) {
  if (tls != nullptr) {
    if (const char* reason = tls->FailureReason(ec, ssl, handshake)) {
      return Status::Rejected(StatusCode::kUnauthenticated, reason);
    }
  }
  return ErrorStatus(config, ec, during);
}

// Before a TLS connection is dropped without a close_notify (an idle one the
// upstream closed, one beyond pool_size, one after `Connection: close`):
// OpenSSL would otherwise take its session for a broken one and mark it not
// resumable (SSL_free -> ssl_clear_bad_session), and the next connection to
// the upstream would make a full handshake. A connection that ended with a
// fatal alert had its session invalidated when the alert passed.
void KeepSessionResumable(SSL* ssl) {
  if (ssl != nullptr) SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
}

// The pool's TLS context: the process's one for the upstream's settings
// (null for http://), or the error that made it impossible (every call then
// fails with it; Gateway::Create refuses to start first).
Result<std::shared_ptr<TlsClientContext>> TlsFor(const UpstreamConfig& config) {
  if (!config.https) return std::shared_ptr<TlsClientContext>();
  Result<std::shared_ptr<TlsClientContext>> made = TlsClientContext::Shared(config.tls);
  if (!made) {
    return Status::Unavailable("upstream " + config.name + ": " +
                               std::string(made.error().message()));
  }
  return made;
}

http::request<http::string_body> ToBeast(const UpstreamConfig& config,
                                         const UpstreamRequest& request) {
  http::request<http::string_body> req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  for (const auto& [k, v] : request.headers) req.insert(k, v);
  req.set(http::field::host, config.host + ":" + std::to_string(config.port));
  req.keep_alive(true);
  req.body() = request.body;
  req.prepare_payload();
  return req;
}

}  // namespace

void AppendFieldLines(std::string& out, const Headers& headers) {
  for (const auto& [name, value] : headers) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
  }
}

namespace {

// The bytes Beast would send for ToBeast(config, request), in one string:
// Beast's serializer walks a sequence of buffers per header, which costs
// more than the copy. nullopt for a TRACE (Beast refuses a body there) and
// for a request carrying a header ToBeast() replaces (the gateway drops them
// before: Forwardable() in handler.cc), which Beast then writes.
std::optional<std::string> Serialize(const UpstreamConfig& config, const UpstreamRequest& request) {
  if (request.method == "TRACE") return std::nullopt;
  for (const auto& [k, v] : request.headers) {
    if (beast::iequals(k, "host") || beast::iequals(k, "content-length") ||
        beast::iequals(k, "transfer-encoding") || beast::iequals(k, "connection")) {
      return std::nullopt;
    }
  }
  std::string out;
  out.reserve(64 + request.target.size() + config.host.size() + request.body.size());
  out += request.method;
  out += ' ';
  out += request.target;
  out += " HTTP/1.1\r\n";
  AppendFieldLines(out, request.headers);
  out += "Host: ";
  out += config.host;
  out += ':';
  out += std::to_string(config.port);
  out += "\r\n";
  // As prepare_payload: a length for a body, or for an empty one where a
  // body is expected.
  if (!request.body.empty() || request.method == "OPTIONS" || request.method == "PUT" ||
      request.method == "POST") {
    out += "Content-Length: ";
    out += std::to_string(request.body.size());
    out += "\r\n";
  }
  out += "\r\n";
  out += request.body;
  return out;
}

// The reply's limits. Read the header on its own (async_read_header) before
// the body: Boost 1.74's parser, when eager and handed the header with some
// of the body, clears the body_limit error that a Content-Length over the
// limit raised and reads the whole body (basic_parser::put goes on to the
// next element with ec reset); not eager, it stops with the error.
void LimitReply(http::response_parser<http::string_body>& parser) {
  parser.body_limit(UpstreamPool::kMaxReplyBytes);
  parser.header_limit(64 * 1024);
}

UpstreamReply ToReply(http::response<http::string_body>& res) {
  UpstreamReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    reply.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  reply.body = std::move(res.body());
  return reply;
}

std::chrono::steady_clock::duration Steady(Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(d);
}

}  // namespace

// At most `limit` idle connections; one taken from here is still open.
template <typename C>
class IdleConnections {
 public:
  explicit IdleConnections(int limit) : limit_(static_cast<std::size_t>(limit)) {}

  // An idle connection, or null. kPeek: one the upstream has not closed
  // meanwhile (a system call each); kUnchecked: the caller copes with a
  // closed one (AsyncUpstreamPool retries an idempotent request).
  enum class Check : std::uint8_t { kPeek, kUnchecked };
  std::unique_ptr<C> Take(Check check = Check::kPeek) FUSEBOX_EXCLUDES(mu_) {
    for (;;) {
      std::unique_ptr<C> c;
      {
        internal::MutexLock lock(&mu_);
        if (idle_.empty()) return nullptr;
        c = std::move(idle_.back());
        idle_.pop_back();
      }
      if (check == Check::kUnchecked || StillOpen(c->tcp_layer().socket())) return c;
    }
  }

  void Put(std::unique_ptr<C> c) FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    if (idle_.size() < limit_) idle_.push_back(std::move(c));
  }

 private:
  const std::size_t limit_;
  internal::Mutex mu_;
  std::vector<std::unique_ptr<C>> idle_ FUSEBOX_GUARDED_BY(mu_);
};

struct UpstreamPool::Connection {
  asio::io_context ioc{1};
  // http://: the stream; https://: unused, `tls` has a TCP stream of its own.
  beast::tcp_stream plain{ioc};
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  ~Connection() { KeepSessionResumable(ssl()); }

  beast::tcp_stream& tcp_layer() { return tls ? tls->next_layer() : plain; }
  SSL* ssl() { return tls ? tls->native_handle() : nullptr; }
  // Calls f(stream) with the stream requests go over.
  template <typename F>
  void With(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(plain);
    }
  }

  // Runs the operations started on this connection's io_context to completion.
  void Run() {
    ioc.restart();
    ioc.run();
  }
};

std::string UpstreamReply::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (meta::EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

UpstreamPool::UpstreamPool(UpstreamConfig config)
    : config_(std::move(config)),
      idle_(std::make_unique<IdleConnections<Connection>>(config_.pool_size)) {
  Result<std::shared_ptr<TlsClientContext>> tls = TlsFor(config_);
  if (tls) {
    tls_ = *std::move(tls);
  } else {
    tls_error_ = tls.error();
  }
}

UpstreamPool::~UpstreamPool() = default;

Result<UpstreamReply> UpstreamPool::Send(const UpstreamRequest& request) {
  if (!tls_error_.ok()) return tls_error_;
  std::unique_ptr<Connection> conn = idle_->Take();
  auto fail = [&](beast::error_code ec, std::string_view during, bool handshake = false) {
    return FailureStatus(config_, tls_.get(), conn->ssl(), ec, during, handshake);
  };
  http::request<http::string_body> req = ToBeast(config_, request);

  if (!conn) {
    conn = std::make_unique<Connection>();
    if (tls_) {
      conn->tls =
          std::make_unique<beast::ssl_stream<beast::tcp_stream>>(conn->ioc, tls_->context());
      if (Status s = tls_->Prepare(conn->ssl(), config_.host, config_.port); !s.ok()) return s;
    }
    beast::error_code ec;
    tcp::resolver resolver(conn->ioc);
    tcp::resolver::results_type endpoints =
        resolver.resolve(config_.host, std::to_string(config_.port), ec);
    if (ec) return fail(ec, "resolve");
    // connect_timeout bounds the TCP connect and the TLS handshake together.
    conn->tcp_layer().expires_after(Steady(std::min(config_.connect_timeout, request.timeout)));
    conn->tcp_layer().async_connect(endpoints,
                                    [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    conn->Run();
    if (ec) return fail(ec, "connect");
    conn->tcp_layer().socket().set_option(tcp::no_delay(true), ec);
    opened_.fetch_add(1, std::memory_order_relaxed);
    if (conn->tls) {
      conn->tls->async_handshake(asio::ssl::stream_base::client,
                                 [&](beast::error_code e) { ec = e; });
      conn->Run();
      if (ec) return fail(ec, "TLS handshake", true);
      CountHandshake(conn->ssl());
    }
  }

  // One deadline for writing the request and reading the whole reply.
  conn->tcp_layer().expires_after(Steady(request.timeout));
  beast::error_code ec;
  conn->With([&](auto& stream) {
    http::async_write(stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
  });
  conn->Run();
  if (ec) return fail(ec, "write");

  std::optional<http::response_parser<http::string_body>> parser;
  do {
    // An interim (1xx) response comes before the final one: skip it.
    parser.emplace();
    LimitReply(*parser);
    conn->With([&](auto& stream) {
      http::async_read_header(stream, conn->buffer, *parser, [&](beast::error_code e, std::size_t) {
        ec = e;
        if (e || parser->is_done()) return;
        http::async_read(stream, conn->buffer, *parser,
                         [&](beast::error_code e2, std::size_t) { ec = e2; });
      });
    });
    conn->Run();
    if (ec) return fail(ec, "read");
  } while (parser->get().result_int() / 100 == 1);

  http::response<http::string_body> res = parser->release();
  UpstreamReply reply = ToReply(res);
  if (res.keep_alive()) {
    conn->tcp_layer().expires_never();
    idle_->Put(std::move(conn));
  }
  return reply;
}

void UpstreamPool::CountHandshake(SSL* ssl) {
  handshakes_.fetch_add(1, std::memory_order_relaxed);
  if (SSL_session_reused(ssl) == 1) resumed_.fetch_add(1, std::memory_order_relaxed);
}

// --- AsyncUpstreamPool -----------------------------------------------------

struct AsyncUpstreamPool::Impl : std::enable_shared_from_this<AsyncUpstreamPool::Impl> {
  // One keep-alive connection, on a strand of its own (a concrete executor
  // type: a type-erased one allocates a copy of the strand per operation).
  struct Connection {
    using Strand = asio::strand<asio::io_context::executor_type>;
    using Timer = asio::basic_waitable_timer<std::chrono::steady_clock,
                                             asio::wait_traits<std::chrono::steady_clock>, Strand>;
    using Stream = beast::basic_stream<tcp, Strand>;
    explicit Connection(const Strand& strand) : plain(strand), deadline(strand) {}
    // http://: the stream; https://: unused, `tls` has a TCP stream of its own.
    Stream plain;
    std::unique_ptr<beast::ssl_stream<Stream>> tls;
    // The exchange's deadline, armed once for the write and the whole read:
    // Beast's own (stream.expires_after) arms and cancels a timer around
    // every read_some and write_some, each cancellation a completion through
    // the strand. Used for connect only.
    Timer deadline;
    beast::flat_buffer buffer;

    ~Connection() { KeepSessionResumable(ssl()); }
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    Stream& tcp_layer() { return tls ? tls->next_layer() : plain; }
    SSL* ssl() { return tls ? tls->native_handle() : nullptr; }
    // Calls f(stream) with the stream requests go over.
    template <typename F>
    void With(F&& f) {
      if (tls) {
        f(*tls);
      } else {
        f(plain);
      }
    }
  };

  // A new connection on `strand`, its TLS readied for the upstream when https.
  Result<std::unique_ptr<Connection>> NewConnection(const Connection::Strand& strand) {
    auto c = std::make_unique<Connection>(strand);
    if (tls) {
      c->tls = std::make_unique<beast::ssl_stream<Connection::Stream>>(strand, tls->context());
      if (Status s = tls->Prepare(c->ssl(), config.host, config.port); !s.ok()) return s;
    }
    return c;
  }

  // One call: its connection, request, parser and callback, kept alive by
  // the operation in progress.
  struct Exchange : std::enable_shared_from_this<Exchange> {
    std::shared_ptr<Impl> pool;
    std::unique_ptr<Connection> conn;
    // The request on the wire (Serialize), or else Beast's form of it.
    std::string wire;
    http::request<http::string_body> req;
    std::optional<http::response_parser<http::string_body>> parser;
    Duration timeout{};
    Done done;
    // Set by the deadline's handler (the socket is closed: the operation in
    // progress fails, and reports kTimeout).
    bool timed_out = false;
    // When the call's deadline passes, once armed: a retry on a new
    // connection keeps it.
    std::optional<Connection::Timer::time_point> expiry;
    // Set once `done` is called: a deadline that fired meanwhile is stale.
    bool finished = false;
    // GET, HEAD, OPTIONS, TRACE, PUT, DELETE (RFC 9110 section 9.2.2): may
    // be sent again if the connection turns out closed.
    bool idempotent = false;
    // The connection came from the pool without the idle check.
    bool unchecked = false;

    // A pooled connection the upstream closed while it was idle shows as the
    // end of the stream (or a reset) before any byte of the reply. An
    // idempotent request then gets one more try on a new connection, as a
    // browser or nginx (proxy_next_upstream) would, within the call's
    // deadline (connecting, within connect_timeout as well). Skipping the
    // peek saves one system call per request; a request that is not
    // idempotent keeps it (Send).
    bool RetriedOnNewConnection(beast::error_code ec) {
      if (!unchecked || timed_out) return false;
      if (parser && parser->got_some()) return false;
      // (TLS: the end of the stream without close_notify is stream_truncated.)
      if (ec != http::error::end_of_stream && ec != asio::error::eof &&
          ec != asio::error::connection_reset && ec != asio::error::broken_pipe &&
          ec != asio::ssl::error::stream_truncated) {
        return false;
      }
      unchecked = false;
      conn->deadline.cancel();
      parser.reset();
      // On the same strand: a deadline handler of the old connection that is
      // already queued runs after this, never concurrently (and, the
      // deadline being the call's, closes the new connection).
      Result<std::unique_ptr<Connection>> fresh = pool->NewConnection(conn->plain.get_executor());
      if (!fresh) {
        FailWith(fresh.error());
        return true;
      }
      conn = *std::move(fresh);
      ArmDeadline();  // The call's deadline bounds the new connect too.
      Connect();
      return true;
    }

    void FailWith(Status status) {
      finished = true;
      if (conn) conn->deadline.cancel();
      done(std::move(status));
    }

    void Fail(beast::error_code ec, std::string_view during, bool handshake = false) {
      if (timed_out) ec = beast::error::timeout;
      SSL* ssl = conn ? conn->ssl() : nullptr;
      FailWith(FailureStatus(pool->config, pool->tls.get(), ssl, ec, during, handshake));
    }

    void Connect() {
      // connect_timeout bounds the TCP connect and the TLS handshake together.
      conn->tcp_layer().expires_after(Steady(std::min(pool->config.connect_timeout, timeout)));
      conn->tcp_layer().async_connect(
          pool->endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
            if (ec) return self->Fail(ec, "connect");
            self->conn->tcp_layer().socket().set_option(tcp::no_delay(true), ec);
            self->pool->opened.fetch_add(1, std::memory_order_relaxed);
            if (self->conn->tls) return self->Handshake();
            self->conn->tcp_layer().expires_never();
            self->Write();
          });
    }

    void Handshake() {
      conn->tls->async_handshake(asio::ssl::stream_base::client,
                                 [self = shared_from_this()](beast::error_code ec) {
                                   if (ec) return self->Fail(ec, "TLS handshake", true);
                                   self->conn->tcp_layer().expires_never();
                                   self->pool->handshakes.fetch_add(1, std::memory_order_relaxed);
                                   if (SSL_session_reused(self->conn->ssl()) == 1) {
                                     self->pool->resumed.fetch_add(1, std::memory_order_relaxed);
                                   }
                                   self->Write();
                                 });
    }

    // One deadline for writing the request and reading the whole reply, as
    // UpstreamPool::Send: armed when the request is first written, kept by a
    // retry. Closing the socket fails the operation in progress.
    void ArmDeadline() {
      if (expiry) {
        conn->deadline.expires_at(*expiry);
      } else {
        conn->deadline.expires_after(Steady(timeout));
        expiry = conn->deadline.expiry();
      }
      conn->deadline.async_wait([self = shared_from_this()](beast::error_code ec) {
        if (ec || self->finished) return;
        self->timed_out = true;
        beast::error_code ignored;
        self->conn->tcp_layer().socket().close(ignored);
      });
    }

    void Write() {
      ArmDeadline();
      auto on_written = [self = shared_from_this()](beast::error_code ec, std::size_t) {
        if (ec && self->RetriedOnNewConnection(ec)) return;
        if (ec) return self->Fail(ec, "write");
        self->Read();
      };
      conn->With([&](auto& stream) {
        if (!wire.empty()) {
          asio::async_write(stream, asio::buffer(wire), std::move(on_written));
        } else {
          http::async_write(stream, req, std::move(on_written));
        }
      });
    }

    void Read() {
      parser.emplace();
      LimitReply(*parser);
      conn->With([&](auto& stream) {
        http::async_read_header(stream, conn->buffer, *parser,
                                [self = shared_from_this()](beast::error_code ec, std::size_t) {
                                  if (ec && self->RetriedOnNewConnection(ec)) return;
                                  if (ec) return self->Fail(ec, "read");
                                  self->ReadBody();
                                });
      });
    }

    void ReadBody() {
      if (parser->is_done()) return Received();
      conn->With([&](auto& stream) {
        http::async_read(stream, conn->buffer, *parser,
                         [self = shared_from_this()](beast::error_code ec, std::size_t) {
                           if (ec) return self->Fail(ec, "read");
                           self->Received();
                         });
      });
    }

    void Received() {
      // An interim (1xx) response comes before the final one: skip it.
      if (parser->get().result_int() / 100 == 1) return Read();
      finished = true;
      conn->deadline.cancel();
      http::response<http::string_body> res = parser->release();
      UpstreamReply reply = ToReply(res);
      if (res.keep_alive()) pool->idle.Put(std::move(conn));
      done(std::move(reply));
    }
  };

  Impl(asio::io_context& io, UpstreamConfig c) : ioc(io), config(std::move(c)) {
    Result<std::shared_ptr<TlsClientContext>> made = TlsFor(config);
    if (made) {
      tls = *std::move(made);
    } else {
      tls_error = made.error();
    }
  }

  asio::io_context& ioc;
  const UpstreamConfig config;
  // https://: the TLS context (null for http://), or why there is none.
  std::shared_ptr<TlsClientContext> tls;
  Status tls_error;
  // Resolved once, by the first call that needs a connection (a numeric
  // host resolves at once); written under `mu`, read-only once `resolved`.
  tcp::resolver::results_type endpoints;
  std::atomic<std::uint64_t> opened{0};
  std::atomic<std::uint64_t> handshakes{0};
  std::atomic<std::uint64_t> resumed{0};
  IdleConnections<Connection> idle{config.pool_size};
  internal::Mutex mu;
  bool resolved FUSEBOX_GUARDED_BY(mu) = false;
};

AsyncUpstreamPool::AsyncUpstreamPool(asio::io_context& ioc, UpstreamConfig config)
    : impl_(std::make_shared<Impl>(ioc, std::move(config))) {}

AsyncUpstreamPool::~AsyncUpstreamPool() = default;

const UpstreamConfig& AsyncUpstreamPool::config() const { return impl_->config; }

std::uint64_t AsyncUpstreamPool::connections_opened() const {
  return impl_->opened.load(std::memory_order_relaxed);
}

std::uint64_t AsyncUpstreamPool::tls_handshakes() const {
  return impl_->handshakes.load(std::memory_order_relaxed);
}

std::uint64_t AsyncUpstreamPool::tls_sessions_resumed() const {
  return impl_->resumed.load(std::memory_order_relaxed);
}

void AsyncUpstreamPool::Send(UpstreamRequest request, Done done) {
  auto x = std::make_shared<Impl::Exchange>();
  x->pool = impl_;
  if (std::optional<std::string> wire = Serialize(impl_->config, request)) {
    x->wire = *std::move(wire);
  } else {
    x->req = ToBeast(impl_->config, request);
  }
  x->timeout = request.timeout;
  x->done = std::move(done);
  const std::string& m = request.method;
  x->idempotent =
      m == "GET" || m == "HEAD" || m == "OPTIONS" || m == "TRACE" || m == "PUT" || m == "DELETE";
  using Check = IdleConnections<Impl::Connection>::Check;
  x->conn = impl_->idle.Take(x->idempotent ? Check::kUnchecked : Check::kPeek);
  x->unchecked = x->conn != nullptr && x->idempotent;
  if (x->conn) {
    // Onto the connection's strand: its operations never run concurrently.
    asio::dispatch(x->conn->plain.get_executor(), [x] { x->Write(); });
    return;
  }
  beast::error_code ec;
  {
    internal::MutexLock lock(&impl_->mu);
    if (!impl_->resolved) {
      tcp::resolver resolver(impl_->ioc);
      impl_->endpoints =
          resolver.resolve(impl_->config.host, std::to_string(impl_->config.port), ec);
      impl_->resolved = !ec;
    }
  }
  if (ec) {
    asio::post(impl_->ioc, [x, ec] { x->Fail(ec, "resolve"); });
    return;
  }
  if (!impl_->tls_error.ok()) {
    asio::post(impl_->ioc, [x] { x->FailWith(x->pool->tls_error); });
    return;
  }
  Result<std::unique_ptr<Impl::Connection>> conn =
      impl_->NewConnection(asio::make_strand(impl_->ioc));
  if (!conn) {
    asio::post(impl_->ioc, [x, s = conn.error()] { x->FailWith(s); });
    return;
  }
  x->conn = *std::move(conn);
  asio::dispatch(x->conn->plain.get_executor(), [x] { x->Connect(); });
}

}  // namespace fusebox::gateway
