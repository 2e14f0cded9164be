// apps/gateway/upstream_client.h: HTTP/1.1 calls to one upstream over a pool
// of keep-alive connections, each call bounded by a deadline.
//
// The call is synchronous: it runs on one of the gateway's worker threads,
// under the breakers (RunProviderCall is a blocking call around a function).
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
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "apps/gateway/config.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/result.h"

namespace fusebox::gateway {

using Headers = std::vector<std::pair<std::string, std::string>>;

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
  // upstream and the error, never the request's headers or body).
  Result<UpstreamReply> Send(const UpstreamRequest& request);

  const UpstreamConfig& config() const { return config_; }
  // Connections opened so far (for tests of keep-alive reuse).
  std::uint64_t connections_opened() const { return opened_.load(std::memory_order_relaxed); }

  // Replies larger than this are refused (kUnavailable). 16 MiB.
  static constexpr std::uint64_t kMaxReplyBytes = 16u << 20;

 private:
  struct Connection;
  std::unique_ptr<Connection> TakeIdle() FUSEBOX_EXCLUDES(mu_);
  void GiveBack(std::unique_ptr<Connection> c) FUSEBOX_EXCLUDES(mu_);

  const UpstreamConfig config_;
  std::atomic<std::uint64_t> opened_{0};
  internal::Mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_ FUSEBOX_GUARDED_BY(mu_);
};

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_UPSTREAM_CLIENT_H_
