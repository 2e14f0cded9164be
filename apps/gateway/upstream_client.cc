#include "apps/gateway/upstream_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>

#include "fusebox/meta/response.h"

namespace fusebox::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct UpstreamPool::Connection {
  asio::io_context ioc{1};
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;

  // Runs the operations started on this connection's io_context to completion.
  void Run() {
    ioc.restart();
    ioc.run();
  }

  // An idle keep-alive connection may have been closed by the upstream while
  // it waited; a non-blocking peek tells (would_block: still open).
  bool StillOpen() {
    beast::error_code ec;
    tcp::socket& s = stream.socket();
    if (!s.is_open()) return false;
    s.non_blocking(true, ec);
    if (ec) return false;
    char byte;
    s.receive(asio::buffer(&byte, 1), tcp::socket::message_peek, ec);
    // Its own error code: reusing `ec` here overwrote the peek's would_block
    // with success, so every idle connection looked closed and was dropped
    // (one new upstream connection per request).
    beast::error_code restore;
    s.non_blocking(false, restore);
    // Data on an idle connection is a protocol error too: drop it.
    return ec == asio::error::would_block && !restore;
  }
};

std::string UpstreamReply::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (meta::EqualsIgnoreCase(k, name)) return v;
  }
  return "";
}

UpstreamPool::UpstreamPool(UpstreamConfig config) : config_(std::move(config)) {}

UpstreamPool::~UpstreamPool() = default;

std::unique_ptr<UpstreamPool::Connection> UpstreamPool::TakeIdle() {
  for (;;) {
    std::unique_ptr<Connection> c;
    {
      internal::MutexLock lock(&mu_);
      if (idle_.empty()) return nullptr;
      c = std::move(idle_.back());
      idle_.pop_back();
    }
    if (c->StillOpen()) return c;
  }
}

void UpstreamPool::GiveBack(std::unique_ptr<Connection> c) {
  internal::MutexLock lock(&mu_);
  if (idle_.size() < static_cast<std::size_t>(config_.pool_size)) idle_.push_back(std::move(c));
}

Result<UpstreamReply> UpstreamPool::Send(const UpstreamRequest& request) {
  const std::string where = "upstream " + config_.name;
  auto fail = [&](beast::error_code ec, std::string_view during) -> Status {
    if (ec == beast::error::timeout) {
      return Status(StatusCode::kTimeout,
                    where + ": deadline passed during " + std::string(during));
    }
    return Status::Unavailable(where + ": " + std::string(during) + ": " + ec.message());
  };

  http::request<http::string_body> req;
  req.method_string(request.method);
  req.target(request.target);
  req.version(11);
  for (const auto& [k, v] : request.headers) req.insert(k, v);
  req.set(http::field::host, config_.host + ":" + std::to_string(config_.port));
  req.keep_alive(true);
  req.body() = request.body;
  req.prepare_payload();

  std::unique_ptr<Connection> conn = TakeIdle();
  if (!conn) {
    conn = std::make_unique<Connection>();
    beast::error_code ec;
    tcp::resolver resolver(conn->ioc);
    tcp::resolver::results_type endpoints =
        resolver.resolve(config_.host, std::to_string(config_.port), ec);
    if (ec) return fail(ec, "resolve");
    conn->stream.expires_after(std::min(config_.connect_timeout, request.timeout));
    conn->stream.async_connect(endpoints,
                               [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
    conn->Run();
    if (ec) return fail(ec, "connect");
    conn->stream.socket().set_option(tcp::no_delay(true), ec);
    opened_.fetch_add(1, std::memory_order_relaxed);
  }

  // One deadline for writing the request and reading the whole reply.
  conn->stream.expires_after(request.timeout);
  beast::error_code ec;
  http::async_write(conn->stream, req, [&](beast::error_code e, std::size_t) { ec = e; });
  conn->Run();
  if (ec) return fail(ec, "write");

  http::response_parser<http::string_body> parser;
  parser.body_limit(kMaxReplyBytes);
  parser.header_limit(64 * 1024);
  http::async_read(conn->stream, conn->buffer, parser,
                   [&](beast::error_code e, std::size_t) { ec = e; });
  conn->Run();
  if (ec) return fail(ec, "read");

  http::response<http::string_body> res = parser.release();
  UpstreamReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    reply.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  reply.body = std::move(res.body());
  if (res.keep_alive()) {
    conn->stream.expires_never();
    GiveBack(std::move(conn));
  }
  return reply;
}

}  // namespace fusebox::gateway
