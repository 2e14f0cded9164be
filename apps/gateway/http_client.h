// A small blocking HTTP/1.1 client for the gateway's demo and tests: one
// request per connection, loopback in mind. Not the gateway's upstream client
// (upstream_client.h), which pools connections and enforces deadlines.
//
//   fusebox::Result<fusebox::gateway::HttpReply> reply =
//       fusebox::gateway::HttpFetch("127.0.0.1:8080", "GET", "/healthz");
//
// Thread-safe (nothing shared between calls).
#ifndef FUSEBOX_APPS_GATEWAY_HTTP_CLIENT_H_
#define FUSEBOX_APPS_GATEWAY_HTTP_CLIENT_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/result.h"

namespace fusebox::gateway {

struct HttpReply {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // The first header named `name` (case-insensitive), or "" when absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

struct HttpFetchOptions {
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};
  // Socket send/receive timeout (SO_SNDTIMEO/SO_RCVTIMEO), so that a hung
  // server fails the caller instead of blocking it forever.
  int io_timeout_ms = 10'000;
};

// Connects to `host_port` ("127.0.0.1:8080"), sends one request with
// Connection: close, reads the whole response. kUnavailable naming the step
// that failed (connect, write, read).
Result<HttpReply> HttpFetch(const std::string& host_port, std::string_view method,
                            std::string_view target, const HttpFetchOptions& options = {});

}  // namespace fusebox::gateway

#endif  // FUSEBOX_APPS_GATEWAY_HTTP_CLIENT_H_
