// fusebox/curl/perform.h: one libcurl easy transfer as a call a breaker, a
// Pipeline or a Timeout can run: cancellable through a std::stop_token, its
// response classified by fusebox::http, its Retry-After carried as the
// failure's retry_at().
//
//   CURL* easy = curl_easy_init();            // the caller's, reused freely
//   curl_easy_setopt(easy, CURLOPT_URL, "http://127.0.0.1:8080/v1/items");
//   fusebox::curl::Reply reply;
//   fusebox::Status s = pipeline->Execute([&](const std::stop_token& stop) {
//     return fusebox::curl::Perform(easy, stop, reply);
//   });
//   // s.ok(): reply.status is 2xx/3xx, reply.body the body.
//   // kRateLimited with retry_at (429, 503 + Retry-After): the pipeline's
//   // breaker opened until then (RetryAfter::kOpensBreaker).
//   // kTimeout: the Timeout stopped the transfer; it was aborted at once.
//
// Cancellation: the transfer runs on the calling thread inside a private
// curl multi handle; a std::stop_callback wakes its poll (curl_multi_wakeup)
// and the transfer is removed at once, so a stop ends the call within
// microseconds, not at libcurl's next progress tick. A stop requested before
// the call starts means no request is sent.
//
// Classification: a response is fusebox::http::Classify()'d with
// Options::rules (2xx/3xx success; 429 and 503 + Retry-After rate limit;
// 408/5xx transient; 401/403 authorization; other 4xx invalid); a transfer
// error is ClassifyTransport()'d (connect, reset, deadline, cancelled,
// other). The Status is fusebox::http::ToStatus()'s, so that
// fusebox::http::BreakerOutcomeKind tells a breaker which failures count.
//
// Limits: the body is capped at Options::max_body_bytes and the headers at
// Options::max_header_bytes (a larger response fails the call, transient,
// "response too large"); header lines are kept only for the final response
// (not for 1xx or redirects followed by libcurl). Perform() installs its own
// WRITEFUNCTION, HEADERFUNCTION, XFERINFOFUNCTION and NOPROGRESS on `easy`;
// every other option is the caller's.
//
// Cost: the multi handle is made once per thread and reused; per call,
// Perform() adds a stop_callback registration and the parsing of headers
// (docs/performance.md has the figure against a bare curl_easy_perform).
//
// Thread-compatible: one easy handle per concurrent call, as libcurl
// requires. curl_global_init() is the application's (before threads start).
#ifndef FUSEBOX_CURL_PERFORM_H_
#define FUSEBOX_CURL_PERFORM_H_

#include <curl/curl.h>

#include <cstddef>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/http/classify.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::curl {

// The final response of one transfer.
struct Reply {
  // The HTTP status, or 0 when no response arrived.
  int status = 0;
  // The final response's header lines as name/value pairs, values trimmed.
  std::vector<std::pair<std::string, std::string>> headers{};
  std::string body{};
  // How the call was classified.
  http::Classification classification{};

  // The value of the first header named `name` (ASCII case-insensitive).
  std::optional<std::string_view> Header(std::string_view name) const;
};

struct Options {
  // The classifier's rules (fusebox/http/classify.h). When rules.now is
  // unset, an HTTP-date Retry-After without a Date header is measured against
  // the wall clock (WallClockNow()).
  http::Rules rules{};
  // retry_at() of a rate limit is this clock's Now() + the wait: give it the
  // pipeline's clock. Default: SystemClock().
  const Clock* clock = nullptr;
  // Largest body kept; a larger one fails the call. Default: 8 MiB.
  std::size_t max_body_bytes = std::size_t{8} << 20;
  // Largest total size of the final response's header lines. Default: 64 KiB.
  std::size_t max_header_bytes = std::size_t{64} << 10;
};

// Runs `easy` once and fills `reply` (cleared first), whatever the outcome.
// Returns OK for a success, else the classified failure (see above): never
// throws, blocks at most until the transfer ends, libcurl's own timeouts
// (CURLOPT_TIMEOUT_MS, CURLOPT_CONNECTTIMEOUT_MS) fire, or `stop` is
// requested. kInvalidArgument when `easy` is null.
Status Perform(CURL* easy, const std::stop_token& stop, Reply& reply, const Options& options = {});

// The same, returning the Reply on success (the reply of a failure is lost;
// use Perform() to keep it).
Result<Reply> Fetch(CURL* easy, const std::stop_token& stop, const Options& options = {});

// How a libcurl error code reads to fusebox::http: couldn't resolve/connect
// and TLS handshake failures kConnect; CURLE_OPERATION_TIMEDOUT kDeadline;
// send/receive errors, an empty reply or a partial body kReset; everything
// else kOther.
http::Transport TransportOf(CURLcode code) noexcept;

}  // namespace fusebox::curl

#endif  // FUSEBOX_CURL_PERFORM_H_
