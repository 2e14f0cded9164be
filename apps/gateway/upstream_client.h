// apps/gateway/upstream_client.h: HTTP/1.1 calls to one upstream over a pool
// of keep-alive connections, each call bounded by a deadline.
//
// UpstreamPool's call is synchronous: it runs on one of the gateway's worker
// threads, under the breakers (RunProviderCall is a blocking call around a
// function). AsyncUpstreamPool (below) runs on the gateway's event loop.
// Each pooled connection owns a small io_context of its own, so that a call
// can use Beast's timed asynchronous operations (connect, write, read, each
// bounded by what is left of the deadline) from whatever worker thread holds
// the connection, without sharing an event loop between workers.
//
//   UpstreamPool pool(config);
//   Result<UpstreamReply> reply = pool.Send({.method = "GET", .target = "/178/insights",
//                                            .timeout = std::chrono::seconds(5)});
//   // kTimeout when the deadline passed, kUnavailable on a connect or I/O error.
//
// Network deadlines are measured by Boost.Asio's own steady clock: they bound
// real I/O, which a ManualClock cannot drive.
//
// Thread-safe.
#ifndef FUSEBOX_APPS_GATEWAY_UPSTREAM_CLIENT_H_
#define FUSEBOX_APPS_GATEWAY_UPSTREAM_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/gateway/config.h"
#include "fusebox/result.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

using SSL = struct ssl_st;

namespace fusebox::gateway {

using Headers = std::vector<std::pair<std::string, std::string>>;

// Appends `headers` to `out` as HTTP/1.1 field lines, "Name: value\r\n" each,
// in order, as Beast's serializer writes them: the gateway writes its
// responses and its upstream requests as one string (docs/performance.md).
void AppendFieldLines(std::string& out, const Headers& headers);

class TlsClientContext;

// A pool's idle keep-alive connections (upstream_client.cc).
template <typename C>
class IdleConnections;

struct UpstreamRequest {
  std::string method = "GET";
  // Path and query, e.g. "/178/insights?since=1".
  std::string target;
  // Sent as given (the caller drops hop-by-hop headers); Host is set here.
  Headers headers;
  std::string body;
  // The whole call's deadline, connect included (> 0).
  Duration timeout = std::chrono::seconds(10);
};

struct UpstreamReply {
  int status = 0;
  Headers headers;
  std::string body;
  // The first header named `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
};

class UpstreamPool {
 public:
  explicit UpstreamPool(UpstreamConfig config);
  ~UpstreamPool();
  UpstreamPool(const UpstreamPool&) = delete;
  UpstreamPool& operator=(const UpstreamPool&) = delete;

  // Sends `request` and reads the reply. kTimeout when the deadline passed,
  // kUnavailable on a connection or protocol error (the message names the
  // upstream and the error, never the request's headers or body) or a reply
  // over kMaxReplyBytes (reason() kReplyTooLarge), kUnauthenticated when TLS
  // refused the upstream or the upstream refused us (reason() names the
  // check: kTlsHostnameMismatch and the others of tls_client.h).
  Result<UpstreamReply> Send(const UpstreamRequest& request);

  const UpstreamConfig& config() const { return config_; }
  // Connections opened so far (for tests of keep-alive reuse).
  std::uint64_t connections_opened() const { return opened_.load(std::memory_order_relaxed); }
  // https://: TLS handshakes completed, and those that resumed a session.
  std::uint64_t tls_handshakes() const { return handshakes_.load(std::memory_order_relaxed); }
  std::uint64_t tls_sessions_resumed() const { return resumed_.load(std::memory_order_relaxed); }

  // Replies whose body is larger than this are refused, whether announced by
  // Content-Length (refused before any of it is read), chunked or read to
  // the end of the stream: kUnavailable with reason() kReplyTooLarge. 16 MiB.
  static constexpr std::uint64_t kMaxReplyBytes = 16u << 20;
  static constexpr char kReplyTooLarge[] = "reply_too_large";

 private:
  struct Connection;
  void CountHandshake(SSL* ssl);

  const UpstreamConfig config_;
  // https://: the TLS context (null for http://), or why there is none.
  std::shared_ptr<TlsClientContext> tls_;
  Status tls_error_;
  std::atomic<std::uint64_t> opened_{0};
  std::atomic<std::uint64_t> handshakes_{0};
  std::atomic<std::uint64_t> resumed_{0};
  const std::unique_ptr<IdleConnections<Connection>> idle_;
};

// The same calls on the gateway's event loop, for a call that nothing else
// blocks (an uncached route or a write, without Redis): connect, write and
// read are asynchronous operations on `ioc`, each exchange on a strand of its
// own, so a call costs no worker thread and no thread hop. Keep-alive
// connections are pooled as in UpstreamPool; the deadline is the same. An
// idempotent request (GET, HEAD, OPTIONS, TRACE, PUT, DELETE) takes an idle
// connection without checking it (a system call saved per request); if the
// upstream had closed it (the end of the stream or a reset before any byte
// of the reply), the request is sent once more on a new connection. Other
// requests take only a connection seen open, and are never sent twice.
//
//   AsyncUpstreamPool pool(ioc, config);
//   pool.Send(std::move(request), [](Result<UpstreamReply> reply) { ... });
//
// `done` runs once, on a thread running `ioc`; never if `ioc` stops first.
// Thread-safe; the pool must outlive the operations it started (stop `ioc`
// and join its threads first).
class AsyncUpstreamPool {
 public:
  using Done = std::function<void(Result<UpstreamReply>)>;

  AsyncUpstreamPool(boost::asio::io_context& ioc, UpstreamConfig config);
  ~AsyncUpstreamPool();
  AsyncUpstreamPool(const AsyncUpstreamPool&) = delete;
  AsyncUpstreamPool& operator=(const AsyncUpstreamPool&) = delete;

  void Send(UpstreamRequest request, Done done);

  const UpstreamConfig& config() const;
  std::uint64_t connections_opened() const;
  std::uint64_t tls_handshakes() const;
  std::uint64_t tls_sessions_resumed() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_UPSTREAM_CLIENT_H_
