#include "apps/gateway/upstream_client.h"

#include <sys/socket.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <optional>

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
  if (ec == beast::error::timeout) {
    return Status(StatusCode::kTimeout, where + ": deadline passed during " + std::string(during));
  }
  return Status::Unavailable(where + ": " + std::string(during) + ": " + ec.message());
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

  // An idle connection the upstream has not closed meanwhile, or null.
  std::unique_ptr<C> Take() FUSEBOX_EXCLUDES(mu_) {
    for (;;) {
      std::unique_ptr<C> c;
      {
        internal::MutexLock lock(&mu_);
        if (idle_.empty()) return nullptr;
        c = std::move(idle_.back());
        idle_.pop_back();
      }
      if (StillOpen(c->stream.socket())) return c;
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
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;

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
      idle_(std::make_unique<IdleConnections<Connection>>(config_.pool_size)) {}

UpstreamPool::~UpstreamPool() = default;

Result<UpstreamReply> UpstreamPool::Send(const UpstreamRequest& request) {
  auto fail = [&](beast::error_code ec, std::string_view during) {
    return ErrorStatus(config_, ec, during);
  };
  http::request<http::string_body> req = ToBeast(config_, request);

  std::unique_ptr<Connection> conn = idle_->Take();
  if (!conn) {
    conn = std::make_unique<Connection>();
    beast::error_code ec;
    tcp::resolver resolver(conn->ioc);
    tcp::resolver::results_type endpoints =
        resolver.resolve(config_.host, std::to_string(config_.port), ec);
    if (ec) return fail(ec, "resolve");
    conn->stream.expires_after(Steady(std::min(config_.connect_timeout, request.timeout)));
    conn->stream.async_connect(endpoints,
                               [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    conn->Run();
    if (ec) return fail(ec, "connect");
    conn->stream.socket().set_option(tcp::no_delay(true), ec);
    opened_.fetch_add(1, std::memory_order_relaxed);
  }

  // One deadline for writing the request and reading the whole reply.
  conn->stream.expires_after(Steady(request.timeout));
  beast::error_code ec;
  http::async_write(conn->stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
  conn->Run();
  if (ec) return fail(ec, "write");

  http::response_parser<http::string_body> parser;
  LimitReply(parser);
  http::async_read(conn->stream, conn->buffer, parser,
                   [&](beast::error_code e, std::size_t) { ec = e; });
  conn->Run();
  if (ec) return fail(ec, "read");

  http::response<http::string_body> res = parser.release();
  UpstreamReply reply = ToReply(res);
  if (res.keep_alive()) {
    conn->stream.expires_never();
    idle_->Put(std::move(conn));
  }
  return reply;
}

// --- AsyncUpstreamPool -----------------------------------------------------

struct AsyncUpstreamPool::Impl : std::enable_shared_from_this<AsyncUpstreamPool::Impl> {
  // One keep-alive connection, on a strand of its own (a concrete executor
  // type: a type-erased one allocates a copy of the strand per operation).
  struct Connection {
    using Strand = asio::strand<asio::io_context::executor_type>;
    explicit Connection(asio::io_context& ioc) : stream(asio::make_strand(ioc)) {}
    beast::basic_stream<tcp, Strand> stream;
    beast::flat_buffer buffer;
  };

  // One call: its connection, request, parser and callback, kept alive by
  // the operation in progress.
  struct Exchange : std::enable_shared_from_this<Exchange> {
    std::shared_ptr<Impl> pool;
    std::unique_ptr<Connection> conn;
    http::request<http::string_body> req;
    std::optional<http::response_parser<http::string_body>> parser;
    Duration timeout{};
    Done done;

    void Fail(beast::error_code ec, std::string_view during) {
      done(ErrorStatus(pool->config, ec, during));
    }

    void Connect() {
      conn->stream.expires_after(Steady(std::min(pool->config.connect_timeout, timeout)));
      conn->stream.async_connect(
          pool->endpoints, [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
            if (ec) return self->Fail(ec, "connect");
            self->conn->stream.socket().set_option(tcp::no_delay(true), ec);
            self->pool->opened.fetch_add(1, std::memory_order_relaxed);
            self->Write();
          });
    }

    void Write() {
      // One deadline for writing the request and reading the whole reply,
      // as UpstreamPool::Send (Beast's timer bounds every operation started
      // until it is changed).
      conn->stream.expires_after(Steady(timeout));
      http::async_write(conn->stream, req,
                        [self = shared_from_this()](beast::error_code ec, std::size_t) {
                          if (ec) return self->Fail(ec, "write");
                          self->Read();
                        });
    }

    void Read() {
      parser.emplace();
      LimitReply(*parser);
      http::async_read(conn->stream, conn->buffer, *parser,
                       [self = shared_from_this()](beast::error_code ec, std::size_t) {
                         if (ec) return self->Fail(ec, "read");
                         http::response<http::string_body> res = self->parser->release();
                         UpstreamReply reply = ToReply(res);
                         if (res.keep_alive()) {
                           self->conn->stream.expires_never();
                           self->pool->idle.Put(std::move(self->conn));
                         }
                         self->done(std::move(reply));
                       });
    }
  };

  Impl(asio::io_context& io, UpstreamConfig c) : ioc(io), config(std::move(c)) {}

  asio::io_context& ioc;
  const UpstreamConfig config;
  // Resolved once, by the first call that needs a connection (a numeric
  // host resolves at once); written under `mu`, read-only once `resolved`.
  tcp::resolver::results_type endpoints;
  std::atomic<std::uint64_t> opened{0};
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

void AsyncUpstreamPool::Send(UpstreamRequest request, Done done) {
  auto x = std::make_shared<Impl::Exchange>();
  x->pool = impl_;
  x->req = ToBeast(impl_->config, request);
  x->timeout = request.timeout;
  x->done = std::move(done);
  x->conn = impl_->idle.Take();
  if (x->conn) {
    // Onto the connection's strand: its operations never run concurrently.
    asio::dispatch(x->conn->stream.get_executor(), [x] { x->Write(); });
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
  x->conn = std::make_unique<Impl::Connection>(impl_->ioc);
  asio::dispatch(x->conn->stream.get_executor(), [x] { x->Connect(); });
}

}  // namespace fusebox::gateway
