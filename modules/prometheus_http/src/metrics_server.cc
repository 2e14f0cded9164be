#include "fusebox/prometheus_http/metrics_server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <thread>
#include <utility>

namespace fusebox::prometheus_http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Tcp = asio::ip::tcp;

namespace {

// One connection: read one request (bounded), write one response, close.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(Tcp::socket socket, const MetricsServerOptions& options,
          const std::function<std::string()>& render, std::atomic<int>& open,
          std::atomic<std::uint64_t>& scrapes)
      : stream_(std::move(socket)),
        options_(options),
        render_(render),
        open_(open),
        scrapes_(scrapes) {
    open_.fetch_add(1, std::memory_order_relaxed);
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { open_.fetch_sub(1, std::memory_order_relaxed); }

  void Run() {
    parser_.header_limit(static_cast<std::uint32_t>(options_.max_header_bytes));
    parser_.body_limit(options_.max_body_bytes);
    stream_.expires_after(options_.read_timeout);
    bhttp::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

 private:
  void OnRead(beast::error_code ec) {
    if (ec == beast::error::timeout || ec == bhttp::error::end_of_stream) return;  // closes
    if (ec) {
      Reply(bhttp::status::bad_request, "bad request\n", false);
      return;
    }
    const auto& req = parser_.get();
    const bool head = req.method() == bhttp::verb::head;
    if (req.method() != bhttp::verb::get && !head) {
      Reply(bhttp::status::method_not_allowed, "only GET and HEAD\n", head);
      return;
    }
    std::string_view target(req.target().data(), req.target().size());
    target = target.substr(0, target.find('?'));
    if (target != options_.path) {
      Reply(bhttp::status::not_found, "not found\n", head);
      return;
    }
    std::string body;
    try {
      body = render_();
    } catch (...) {  // the renderer's exception stops here
      Reply(bhttp::status::internal_server_error, "metrics unavailable\n", head);
      return;
    }
    scrapes_.fetch_add(1, std::memory_order_relaxed);
    Reply(bhttp::status::ok, std::move(body), head, kPrometheusContentType);
  }

  void Reply(bhttp::status status, std::string body, bool head,
             std::string_view content_type = "text/plain; charset=utf-8") {
    response_.result(status);
    response_.version(11);
    response_.set(bhttp::field::content_type,
                  beast::string_view(content_type.data(), content_type.size()));
    response_.set(bhttp::field::connection, "close");
    response_.body() = std::move(body);
    response_.prepare_payload();
    if (head) response_.body().clear();  // Content-Length stays the GET's
    stream_.expires_after(options_.read_timeout);
    bhttp::async_write(stream_, response_,
                       [self = shared_from_this()](beast::error_code, std::size_t) {
                         beast::error_code ignored;
                         self->stream_.socket().shutdown(Tcp::socket::shutdown_send, ignored);
                       });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bhttp::request_parser<bhttp::string_body> parser_;
  bhttp::response<bhttp::string_body> response_;
  const MetricsServerOptions& options_;
  const std::function<std::string()>& render_;
  std::atomic<int>& open_;
  std::atomic<std::uint64_t>& scrapes_;
};

}  // namespace

class MetricsServer::Impl {
 public:
  Impl(std::function<std::string()> render, MetricsServerOptions options)
      : render_(std::move(render)), options_(std::move(options)), acceptor_(loop_) {}

  Status Listen() {
    beast::error_code ec;
    const asio::ip::address address = asio::ip::make_address(options_.address, ec);
    if (ec) {
      return Status::InvalidArgument("MetricsServerOptions.address: not an IP address: \"" +
                                     options_.address + "\"");
    }
    const Tcp::endpoint endpoint(address, options_.port);
    if (acceptor_.open(endpoint.protocol(), ec) ||
        acceptor_.set_option(asio::socket_base::reuse_address(true), ec) ||
        acceptor_.bind(endpoint, ec) ||
        acceptor_.listen(asio::socket_base::max_listen_connections, ec)) {
      return Status::Unavailable("metrics server: cannot listen on " + options_.address + ":" +
                                 std::to_string(options_.port) + ": " + ec.message());
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    thread_ = std::thread([this] { loop_.run(); });
    return Status();
  }

  void Stop() {
    if (stopped_.exchange(true)) return;
    asio::post(loop_, [this] {
      beast::error_code ignored;
      acceptor_.close(ignored);
    });
    loop_.stop();
    if (thread_.joinable()) thread_.join();
  }

  std::uint16_t port() const { return port_; }
  const MetricsServerOptions& options() const { return options_; }
  std::uint64_t scrapes() const { return scrapes_.load(std::memory_order_relaxed); }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(loop_), [this](beast::error_code ec,
                                                            Tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        if (open_.load(std::memory_order_relaxed) >= options_.max_connections) {
          beast::error_code ignored;
          socket.close(ignored);  // over the bound: refused, not queued
        } else {
          std::make_shared<Session>(std::move(socket), options_, render_, open_, scrapes_)->Run();
        }
      }
      Accept();
    });
  }

  // Declared before the loop: sessions the loop still holds when it is
  // destroyed refer to them.
  const std::function<std::string()> render_;
  const MetricsServerOptions options_;
  // Written on the loop's one thread; atomics for scrapes() readers.
  std::atomic<int> open_{0};
  std::atomic<std::uint64_t> scrapes_{0};
  std::atomic<bool> stopped_{false};
  std::uint16_t port_ = 0;
  asio::io_context loop_{1};
  Tcp::acceptor acceptor_;
  std::thread thread_;
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(std::function<std::string()> render,
                                                            MetricsServerOptions options) {
  if (!render) return Status::InvalidArgument("MetricsServer::Start: render function is empty");
  if (options.path.empty() || options.path.front() != '/') {
    return Status::InvalidArgument("MetricsServerOptions.path: must start with '/'");
  }
  if (options.max_connections < 1) {
    return Status::InvalidArgument("MetricsServerOptions.max_connections: must be >= 1");
  }
  if (options.read_timeout <= std::chrono::milliseconds::zero()) {
    return Status::InvalidArgument("MetricsServerOptions.read_timeout: must be > 0");
  }
  if (Status s = ValidatePrometheusOptions(options.prometheus); !s.ok()) return s;
  auto impl = std::make_unique<Impl>(std::move(render), std::move(options));
  try {
    if (Status s = impl->Listen(); !s.ok()) return s;
  } catch (const std::exception& e) {  // Boost.Asio's, e.g. thread creation
    return Status::Unavailable(std::string("metrics server: ") + e.what());
  }
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::Start(const MetricsCollector& collector,
                                                            const Registry& registry,
                                                            MetricsServerOptions options) {
  PrometheusOptions prometheus = options.prometheus;
  return Start(
      [&collector, &registry, prometheus = std::move(prometheus)] {
        return RenderPrometheus(collector.Collect(registry), prometheus);
      },
      std::move(options));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() { Stop(); }
std::uint16_t MetricsServer::port() const { return impl_->port(); }
std::string MetricsServer::url() const {
  return "http://" + impl_->options().address + ":" + std::to_string(impl_->port()) +
         impl_->options().path;
}
std::uint64_t MetricsServer::scrapes() const { return impl_->scrapes(); }
void MetricsServer::Stop() { impl_->Stop(); }

}  // namespace fusebox::prometheus_http
