#include "apps/gateway/fake_upstream.h"

#include <openssl/ssl.h>

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "apps/gateway/fake_upstream_internal.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "src/tls_certificate_caches.h"

namespace fusebox::gateway {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using Json = nlohmann::json;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// Bounds on what a client may send: a fake need not be generous, only safe.
constexpr std::uint32_t kHeaderLimit = 16 * 1024;
constexpr std::uint64_t kBodyLimit = 1024 * 1024;

struct RouteState {
  FakeRoute route;
  std::size_t next = 0;  // index of the next response (clamped to the last)
  std::int64_t calls = 0;
};

// What a request gets: a response to send (after a latency), or a drop.
struct Answer {
  Response response;
  Duration latency{0};
  bool drop = false;
};

Response JsonResponse(http::status status, const Json& body, unsigned version, bool keep_alive) {
  Response res{status, version};
  res.set(http::field::content_type, "application/json; charset=UTF-8");
  res.body() = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  res.keep_alive(keep_alive);
  res.prepare_payload();
  return res;
}

}  // namespace

// The routes and their counts. Separate from Impl so that Clock timers (which
// may outlive a Stop() race by a few instructions) hold a shared_ptr to
// something that owns no I/O object.
class FakeUpstreamCore {
 public:
  explicit FakeUpstreamCore(Clock& clock) : clock_(clock) {}

  Clock& clock() { return clock_; }

  Status SetRoutes(std::vector<FakeRoute> routes) FUSEBOX_EXCLUDES(mu_) {
    for (const FakeRoute& r : routes) {
      if (Status s = ValidateFakeRoute(r); !s.ok()) return s;
    }
    internal::MutexLock lock(&mu_);
    routes_.clear();
    for (FakeRoute& r : routes) routes_.push_back(RouteState{std::move(r)});
    return Status();
  }

  Status SetRoute(FakeRoute route) FUSEBOX_EXCLUDES(mu_) {
    if (Status s = ValidateFakeRoute(route); !s.ok()) return s;
    internal::MutexLock lock(&mu_);
    for (RouteState& state : routes_) {
      if (state.route.method == route.method && state.route.path == route.path) {
        state = RouteState{std::move(route)};
        return Status();
      }
    }
    routes_.push_back(RouteState{std::move(route)});
    return Status();
  }

  Status MergeRoutes(std::vector<FakeRoute> routes) FUSEBOX_EXCLUDES(mu_) {
    for (const FakeRoute& r : routes) {
      if (Status s = ValidateFakeRoute(r); !s.ok()) return s;
    }
    for (FakeRoute& r : routes) {
      if (Status s = SetRoute(std::move(r)); !s.ok()) return s;
    }
    return Status();
  }

  void ClearRoutes() FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    routes_.clear();
  }

  std::vector<FakeRoute> Routes() const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    std::vector<FakeRoute> out;
    for (const RouteState& s : routes_) out.push_back(s.route);
    return out;
  }

  std::int64_t Calls(std::string_view method, std::string_view path) const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    for (const RouteState& s : routes_) {
      if (s.route.method == method && s.route.path == path) return s.calls;
    }
    return 0;
  }

  std::vector<FakeRouteCalls> AllCalls() const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    std::vector<FakeRouteCalls> out;
    for (const RouteState& s : routes_) out.push_back({s.route.method, s.route.path, s.calls});
    return out;
  }

  std::int64_t TotalCalls() const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    return total_;
  }
  std::int64_t UnmatchedCalls() const FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    return unmatched_;
  }

  void Reset() FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    total_ = 0;
    unmatched_ = 0;
    for (RouteState& s : routes_) s.next = 0, s.calls = 0;
  }

  // The programmed answer to a request outside /_fake/, counted.
  Answer Respond(const Request& req) FUSEBOX_EXCLUDES(mu_) {
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const std::string_view method(req.method_string().data(), req.method_string().size());
    internal::MutexLock lock(&mu_);
    ++total_;
    for (RouteState& s : routes_) {
      if ((s.route.method == "*" || s.route.method == method) &&
          FakePathMatches(s.route.path, path)) {
        ++s.calls;
        const FakeResponse& r = s.route.responses[std::min(s.next, s.route.responses.size() - 1)];
        if (s.next < s.route.responses.size()) ++s.next;
        Answer answer;
        answer.latency = r.latency;
        answer.drop = r.drop;
        Response& res = answer.response;
        res.version(req.version());
        res.result(static_cast<unsigned>(r.status));
        bool has_content_type = false;
        for (const auto& [name, value] : r.headers) {
          res.insert(name, value);
          has_content_type = has_content_type || beast::iequals(name, "Content-Type");
        }
        if (!has_content_type)
          res.set(http::field::content_type, "application/json; charset=UTF-8");
        res.body() = r.body;
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        return answer;
      }
    }
    ++unmatched_;
    Answer answer;
    // Shaped like a Graph API error, so that a gateway classifies it as an
    // invalid request rather than choking on it.
    answer.response =
        JsonResponse(http::status::not_found,
                     {{"error",
                       {{"message", "fake-upstream: no route for " + std::string(method) + " " +
                                        std::string(path)},
                        {"type", "FakeUpstreamNoRoute"},
                        {"code", 100}}}},
                     req.version(), req.keep_alive());
    return answer;
  }

  // The control API under /_fake/.
  Response Control(const Request& req) FUSEBOX_EXCLUDES(mu_) {
    const std::string_view target(req.target().data(), req.target().size());
    const std::string_view path = target.substr(0, target.find('?'));
    const unsigned version = req.version();
    const bool keep_alive = req.keep_alive();
    auto error = [&](http::status status, const std::string& message) {
      return JsonResponse(status, {{"error", message}}, version, keep_alive);
    };
    if (path == "/_fake/routes") {
      switch (req.method()) {
        case http::verb::get:
          return JsonResponse(http::status::ok, Json::parse(FakeRoutesToJson(Routes())), version,
                              keep_alive);
        case http::verb::put:
        case http::verb::post: {
          Result<std::vector<FakeRoute>> routes = ParseFakeRoutesJson(req.body());
          if (!routes)
            return error(http::status::bad_request, std::string(routes.error().message()));
          const std::size_t n = routes->size();
          Status s = req.method() == http::verb::put ? SetRoutes(std::move(*routes))
                                                     : MergeRoutes(std::move(*routes));
          if (!s.ok()) return error(http::status::bad_request, std::string(s.message()));
          return JsonResponse(http::status::ok, {{"routes", n}}, version, keep_alive);
        }
        case http::verb::delete_:
          ClearRoutes();
          return JsonResponse(http::status::ok, {{"routes", 0}}, version, keep_alive);
        default:
          return error(http::status::method_not_allowed, "use GET, PUT, POST or DELETE");
      }
    }
    if (path == "/_fake/calls") {
      if (req.method() != http::verb::get) {
        return error(http::status::method_not_allowed, "use GET");
      }
      Json routes = Json::array();
      for (const FakeRouteCalls& c : AllCalls()) {
        routes.push_back({{"method", c.method}, {"path", c.path}, {"calls", c.calls}});
      }
      return JsonResponse(
          http::status::ok,
          {{"total", TotalCalls()}, {"unmatched", UnmatchedCalls()}, {"routes", routes}}, version,
          keep_alive);
    }
    if (path == "/_fake/reset") {
      if (req.method() != http::verb::post) {
        return error(http::status::method_not_allowed, "use POST");
      }
      Reset();
      return JsonResponse(http::status::ok, {{"reset", true}}, version, keep_alive);
    }
    return error(http::status::not_found,
                 "unknown control path " + std::string(path) +
                     "; expected /_fake/routes, /_fake/calls or /_fake/reset");
  }

  // Delayed responses: a Clock timer callback finds its work here by key, so
  // that Stop() can take every pending one back and drop it while the I/O
  // objects still exist.
  // After Stop() nothing is kept (key 0, which FireDelayed() never finds): a
  // send kept then would hold its connection, which holds this core, forever.
  std::uint64_t AddDelayed(std::function<void()> send) FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    if (stopped_) return 0;
    const std::uint64_t key = ++next_delayed_;
    delayed_.emplace(key, Delayed{std::move(send), 0});
    return key;
  }
  void SetDelayedTimer(std::uint64_t key, TimerId timer) FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    auto it = delayed_.find(key);
    if (it != delayed_.end()) it->second.timer = timer;
  }
  // Runs the delayed send of `key` unless Stop() came first. The send only
  // posts to the connection's strand; it runs under mu_ so that Stop() cannot
  // destroy the I/O context between the check and the post.
  void FireDelayed(std::uint64_t key) FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    auto it = delayed_.find(key);
    if (stopped_ || it == delayed_.end()) return;
    std::function<void()> send = std::move(it->second.send);
    delayed_.erase(it);
    send();
  }
  // Marks the core stopped and returns what was pending (to be destroyed by
  // the caller while the I/O context is alive).
  std::vector<std::pair<TimerId, std::function<void()>>> StopDelayed() FUSEBOX_EXCLUDES(mu_) {
    internal::MutexLock lock(&mu_);
    stopped_ = true;
    std::vector<std::pair<TimerId, std::function<void()>>> out;
    for (auto& [key, d] : delayed_) out.emplace_back(d.timer, std::move(d.send));
    delayed_.clear();
    return out;
  }

 private:
  struct Delayed {
    std::function<void()> send;
    TimerId timer = 0;
  };

  Clock& clock_;
  mutable internal::Mutex mu_;
  std::vector<RouteState> routes_ FUSEBOX_GUARDED_BY(mu_);
  std::int64_t total_ FUSEBOX_GUARDED_BY(mu_) = 0;
  std::int64_t unmatched_ FUSEBOX_GUARDED_BY(mu_) = 0;
  std::map<std::uint64_t, Delayed> delayed_ FUSEBOX_GUARDED_BY(mu_);
  std::uint64_t next_delayed_ FUSEBOX_GUARDED_BY(mu_) = 0;
  bool stopped_ FUSEBOX_GUARDED_BY(mu_) = false;
};

namespace {

// What the tests count of the connections themselves (relaxed: counters).
struct ConnectionCounts {
  std::atomic<std::int64_t> accepted{0};
  std::atomic<std::int64_t> handshakes{0};
  std::atomic<std::int64_t> resumed{0};
};

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

// One keep-alive connection: read a request, answer it, read the next.
// Stream: beast::tcp_stream (http://) or TlsStream (https://, a TLS
// handshake first).
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
 public:
  template <typename... StreamArgs>
  Session(std::shared_ptr<FakeUpstreamCore> core, std::shared_ptr<ConnectionCounts> counts,
          StreamArgs&&... args)
      : stream_(std::forward<StreamArgs>(args)...),
        core_(std::move(core)),
        counts_(std::move(counts)) {}

  void Start() {
    if constexpr (std::is_same_v<Stream, TlsStream>) {
      // A client that never finishes its handshake is dropped after 10 s.
      beast::get_lowest_layer(stream_).expires_after(std::chrono::seconds(10));
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                if (ec) return self->Close();
                                beast::get_lowest_layer(self->stream_).expires_never();
                                self->counts_->handshakes.fetch_add(1, std::memory_order_relaxed);
                                if (SSL_session_reused(self->stream_.native_handle()) == 1) {
                                  self->counts_->resumed.fetch_add(1, std::memory_order_relaxed);
                                }
                                self->ReadNext();
                              });
    } else {
      ReadNext();
    }
  }

 private:
  using std::enable_shared_from_this<Session<Stream>>::shared_from_this;

  void ReadNext() {
    parser_.emplace();
    parser_->header_limit(kHeaderLimit);
    parser_->body_limit(kBodyLimit);
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, std::size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return Close();
    if (ec) {
      // Malformed or oversized: say so once, then hang up.
      if (&ec.category() != &http::make_error_code(http::error::bad_method).category()) {
        return Close();
      }
      const http::status status = ec == http::error::header_limit
                                      ? http::status::request_header_fields_too_large
                                  : ec == http::error::body_limit ? http::status::payload_too_large
                                                                  : http::status::bad_request;
      response_ = JsonResponse(status, {{"error", "fake-upstream: " + ec.message()}}, 11, false);
      return Write();
    }
    Request req = parser_->release();
    const std::string_view target(req.target().data(), req.target().size());
    if (target.starts_with("/_fake/") || target == "/_fake") {
      response_ = core_->Control(req);
      return Write();
    }
    Answer answer = core_->Respond(req);
    if (answer.latency <= Duration::zero()) {
      if (answer.drop) return Close();
      response_ = std::move(answer.response);
      return Write();
    }
    // Wait on the Clock, then continue on this connection's strand.
    auto pending = std::make_shared<Answer>(std::move(answer));
    const std::uint64_t key = core_->AddDelayed([self = shared_from_this(), pending] {
      asio::post(self->stream_.get_executor(), [self, pending] {
        if (pending->drop) return self->Close();
        self->response_ = std::move(pending->response);
        self->Write();
      });
    });
    Clock& clock = core_->clock();
    const TimerId timer = clock.ScheduleAt(clock.Now() + pending->latency,
                                           [core = core_, key] { core->FireDelayed(key); });
    core_->SetDelayedTimer(key, timer);
  }

  void Write() {
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code ec, std::size_t) {
                        if (ec || !self->response_.keep_alive()) return self->Close();
                        self->ReadNext();
                      });
  }

  void Close() {
    beast::error_code ignored;
    tcp::socket& socket = beast::get_lowest_layer(stream_).socket();
    socket.shutdown(tcp::socket::shutdown_send, ignored);
    socket.close(ignored);
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  Response response_;
  std::shared_ptr<FakeUpstreamCore> core_;
  std::shared_ptr<ConnectionCounts> counts_;
};

// The server side of https://: the certificate chain and key, TLS 1.2 at
// least, and client certificates required when a CA for them is given.
Result<std::unique_ptr<asio::ssl::context>> ServerTls(const FakeUpstreamOptions& options) {
  auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
  beast::error_code ec;
  auto fail = [&](std::string_view what, const std::string& file) {
    return Status::InvalidArgument(std::string(what) + ": cannot load \"" + file +
                                   "\": " + ec.message());
  };
  if (ctx->use_certificate_chain_file(options.tls_cert_file, ec); ec) {
    return fail("tls cert", options.tls_cert_file);
  }
  if (ctx->use_private_key_file(options.tls_key_file, asio::ssl::context::pem, ec); ec) {
    return fail("tls key", options.tls_key_file);
  }
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  if (options.tls_max_version_1_2) SSL_CTX_set_max_proto_version(native, TLS1_2_VERSION);
  // Resumption with client certificates needs a session id context.
  static constexpr unsigned char kContext[] = "fusebox-fake-upstream";
  SSL_CTX_set_session_id_context(native, kContext, sizeof(kContext) - 1);
  if (!options.tls_client_ca_file.empty()) {
    if (ctx->load_verify_file(options.tls_client_ca_file, ec); ec) {
      return fail("tls client CA", options.tls_client_ca_file);
    }
    ctx->set_verify_mode(asio::ssl::verify_peer | asio::ssl::verify_fail_if_no_peer_cert);
  }
  // Shared by the handshakes of every event-loop thread.
  fusebox::internal::FillCertificateCaches(native);
  return ctx;
}

}  // namespace

class FakeUpstream::Impl {
 public:
  Impl(Clock& clock, int threads, std::unique_ptr<asio::ssl::context> tls)
      : core_(std::make_shared<FakeUpstreamCore>(clock)),
        tls_(std::move(tls)),
        ioc_(threads),
        acceptor_(asio::make_strand(ioc_)),
        threads_(threads) {}

  ~Impl() { Stop(); }

  Status Listen(const std::string& address, std::uint16_t port) {
    beast::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(address, ec);
    if (ec) return Status::InvalidArgument("address \"" + address + "\": " + ec.message());
    const tcp::endpoint endpoint(ip, port);
    auto step = [&](const char* what) {
      return Status::Unavailable("cannot " + std::string(what) + " " + address + ":" +
                                 std::to_string(port) + ": " + ec.message());
    };
    if (acceptor_.open(endpoint.protocol(), ec); ec) return step("open");
    if (acceptor_.set_option(asio::socket_base::reuse_address(true), ec); ec) return step("bind");
    if (acceptor_.bind(endpoint, ec); ec) return step("bind");
    if (acceptor_.listen(asio::socket_base::max_listen_connections, ec); ec) return step("listen");
    port_ = acceptor_.local_endpoint(ec).port();
    if (ec) return step("bind");
    address_ = address;
    Accept();
    for (int i = 0; i < threads_; ++i) workers_.emplace_back([this] { ioc_.run(); });
    return Status();
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    // Pending delayed responses first, while the I/O context they post to and
    // the sockets they hold still exist.
    for (auto& [timer, send] : core_->StopDelayed()) {
      if (timer != 0) core_->clock().Cancel(timer);
      send = nullptr;
    }
    ioc_.stop();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
    // No thread runs the context any more: the acceptor is ours alone.
    beast::error_code ignored;
    acceptor_.close(ignored);
  }

  FakeUpstreamCore& core() { return *core_; }
  const ConnectionCounts& counts() const { return *counts_; }
  bool https() const { return tls_ != nullptr; }
  std::uint16_t port() const { return port_; }
  const std::string& address() const { return address_; }

 private:
  void Accept() {
    acceptor_.async_accept(asio::make_strand(ioc_), [this](beast::error_code ec,
                                                           tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        counts_->accepted.fetch_add(1, std::memory_order_relaxed);
        if (tls_) {
          std::make_shared<Session<TlsStream>>(core_, counts_, std::move(socket), *tls_)->Start();
        } else {
          std::make_shared<Session<beast::tcp_stream>>(core_, counts_, std::move(socket))->Start();
        }
      }
      Accept();
    });
  }

  std::shared_ptr<FakeUpstreamCore> core_;
  std::shared_ptr<ConnectionCounts> counts_ = std::make_shared<ConnectionCounts>();
  // https://: the server's TLS context; null for http://.
  std::unique_ptr<asio::ssl::context> tls_;
  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  int threads_;
  std::vector<std::thread> workers_;
  std::uint16_t port_ = 0;
  std::string address_;
  bool stopped_ = false;
};

Result<std::unique_ptr<FakeUpstream>> FakeUpstream::Start(FakeUpstreamOptions options) {
  if (options.threads < 1 || options.threads > 64) {
    return Status::InvalidArgument("threads: expected 1..64, got " +
                                   std::to_string(options.threads));
  }
  std::unique_ptr<asio::ssl::context> tls;
  if (!options.tls_cert_file.empty() || !options.tls_key_file.empty()) {
    Result<std::unique_ptr<asio::ssl::context>> made = ServerTls(options);
    if (!made) return made.error();
    tls = *std::move(made);
  }
  auto impl = std::make_unique<Impl>(options.clock ? *options.clock : SystemClock(),
                                     options.threads, std::move(tls));
  if (Status s = impl->core().SetRoutes(std::move(options.routes)); !s.ok()) return s;
  if (Status s = impl->Listen(options.address, options.port); !s.ok()) return s;
  return std::unique_ptr<FakeUpstream>(new FakeUpstream(std::move(impl)));
}

FakeUpstream::FakeUpstream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FakeUpstream::~FakeUpstream() { Stop(); }

std::uint16_t FakeUpstream::port() const { return impl_->port(); }
std::string FakeUpstream::host_port() const {
  return impl_->address() + ":" + std::to_string(impl_->port());
}
std::string FakeUpstream::url() const {
  return (impl_->https() ? "https://" : "http://") + host_port();
}
std::int64_t FakeUpstream::AcceptedConnections() const {
  return impl_->counts().accepted.load(std::memory_order_relaxed);
}
std::int64_t FakeUpstream::TlsHandshakes() const {
  return impl_->counts().handshakes.load(std::memory_order_relaxed);
}
std::int64_t FakeUpstream::TlsSessionsResumed() const {
  return impl_->counts().resumed.load(std::memory_order_relaxed);
}

Status FakeUpstream::SetRoutes(std::vector<FakeRoute> routes) {
  return impl_->core().SetRoutes(std::move(routes));
}
Status FakeUpstream::SetRoute(FakeRoute route) { return impl_->core().SetRoute(std::move(route)); }
void FakeUpstream::ClearRoutes() { impl_->core().ClearRoutes(); }
std::vector<FakeRoute> FakeUpstream::Routes() const { return impl_->core().Routes(); }
std::int64_t FakeUpstream::Calls(std::string_view method, std::string_view path) const {
  return impl_->core().Calls(method, path);
}
std::vector<FakeRouteCalls> FakeUpstream::AllCalls() const { return impl_->core().AllCalls(); }
std::int64_t FakeUpstream::TotalCalls() const { return impl_->core().TotalCalls(); }
std::int64_t FakeUpstream::UnmatchedCalls() const { return impl_->core().UnmatchedCalls(); }
void FakeUpstream::Reset() { impl_->core().Reset(); }
void FakeUpstream::Stop() { impl_->Stop(); }

}  // namespace fusebox::gateway
