#include "apps/gateway/http_client.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <charconv>

namespace fusebox::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

std::string HttpReply::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (beast::iequals(n, beast::string_view(name.data(), name.size()))) return v;
  }
  return "";
}

bool HttpReply::HasHeader(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (beast::iequals(n, beast::string_view(name.data(), name.size()))) return true;
  }
  return false;
}

Result<HttpReply> HttpFetch(const std::string& host_port, std::string_view method,
                            std::string_view target, const HttpFetchOptions& options) {
  const std::size_t colon = host_port.rfind(':');
  unsigned port = 0;
  const char* end = host_port.data() + host_port.size();
  if (colon == std::string::npos ||
      std::from_chars(host_port.data() + colon + 1, end, port).ptr != end || port > 65535) {
    return Status::InvalidArgument("\"" + host_port + "\" is not HOST:PORT");
  }
  beast::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host_port.substr(0, colon), ec);
  if (ec) return Status::InvalidArgument("\"" + host_port + "\": " + ec.message());
  asio::io_context ioc;
  tcp::socket socket(ioc);
  auto fail = [&](const char* step) {
    return Status::Unavailable(std::string(step) + " " + host_port + ": " + ec.message());
  };
  if (socket.connect(tcp::endpoint(address, static_cast<unsigned short>(port)), ec); ec) {
    return fail("connect to");
  }
  timeval tv{options.io_timeout_ms / 1000, (options.io_timeout_ms % 1000) * 1000};
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  http::request<http::string_body> req;
  req.method_string(beast::string_view(method.data(), method.size()));
  req.target(beast::string_view(target.data(), target.size()));
  req.version(11);
  req.set(http::field::host, host_port);
  for (const auto& [name, value] : options.headers) req.insert(name, value);
  req.keep_alive(false);
  if (!options.body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    req.body() = options.body;
    req.prepare_payload();
  }
  if (http::write(socket, req, ec); ec) return fail("write to");
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  if (http::read(socket, buffer, parser, ec); ec) return fail("read from");
  http::response<http::string_body> res = parser.release();
  HttpReply reply;
  reply.status = static_cast<int>(res.result_int());
  for (const auto& field : res) {
    reply.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  }
  reply.body = std::move(res.body());
  socket.shutdown(tcp::socket::shutdown_both, ec);
  return reply;
}

}  // namespace fusebox::gateway
