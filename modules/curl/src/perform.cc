#include "fusebox/curl/perform.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "fusebox/http/retry_after.h"

namespace fusebox::curl {
namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

// The state libcurl's callbacks share with one Perform().
struct Transfer {
  Reply* reply;
  const Options* options;
  const std::stop_token* stop;
  std::size_t header_bytes = 0;
  bool too_large = false;
};

std::size_t OnHeader(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * n;
  std::string_view line(data, bytes);
  // A status line starts a response: only the final one's headers are kept
  // (1xx and followed redirects come before it).
  if (line.substr(0, 5) == "HTTP/") {
    t->reply->headers.clear();
    t->header_bytes = 0;
    return bytes;
  }
  t->header_bytes += bytes;
  if (t->header_bytes > t->options->max_header_bytes) {
    t->too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0) return bytes;  // blank line, obs-fold
  t->reply->headers.emplace_back(std::string(line.substr(0, colon)),
                                 std::string(http::TrimOws(line.substr(colon + 1))));
  return bytes;
}

std::size_t OnBody(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * n;
  if (t->reply->body.size() + bytes > t->options->max_body_bytes) {
    t->too_large = true;
    return 0;  // CURLE_WRITE_ERROR
  }
  t->reply->body.append(data, bytes);
  return bytes;
}

int OnProgress(void* user, curl_off_t /*dltotal*/, curl_off_t /*dlnow*/, curl_off_t /*ultotal*/,
               curl_off_t /*ulnow*/) {
  return static_cast<Transfer*>(user)->stop->stop_requested() ? 1 : 0;  // 1 aborts
}

// This thread's multi handle, made on first use and reused by every call.
class ThreadMulti {
 public:
  ThreadMulti() : handle_(curl_multi_init()) {}
  ThreadMulti(const ThreadMulti&) = delete;
  ThreadMulti& operator=(const ThreadMulti&) = delete;
  ~ThreadMulti() {
    if (handle_ != nullptr) curl_multi_cleanup(handle_);
  }
  CURLM* get() const { return handle_; }

 private:
  CURLM* const handle_;
};

CURLM* ThisThreadMulti() {
  thread_local ThreadMulti multi;
  return multi.get();
}

// Runs `easy` to its end inside this thread's multi handle, or until `stop`.
CURLcode Run(CURL* easy, const std::stop_token& stop) {
  CURLM* multi = ThisThreadMulti();
  if (multi == nullptr) return curl_easy_perform(easy);
  if (curl_multi_add_handle(multi, easy) != CURLM_OK) return CURLE_FAILED_INIT;
  CURLcode result = CURLE_ABORTED_BY_CALLBACK;
  {
    // Wakes the poll below at once when a stop is requested (thread-safe).
    const std::stop_callback wake(stop, [multi] { curl_multi_wakeup(multi); });
    while (true) {
      int running = 0;
      if (curl_multi_perform(multi, &running) != CURLM_OK) {
        result = CURLE_FAILED_INIT;
        break;
      }
      bool done = false;
      int left = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi, &left)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == easy) {
          result = msg->data.result;
          done = true;
        }
      }
      if (done || stop.stop_requested()) break;
      if (curl_multi_poll(multi, nullptr, 0, 1000, nullptr) != CURLM_OK) {
        result = CURLE_FAILED_INIT;
        break;
      }
    }
  }
  curl_multi_remove_handle(multi, easy);
  return result;
}

}  // namespace

std::optional<std::string_view> Reply::Header(std::string_view name) const {
  for (const auto& [n, v] : headers) {
    if (EqualsIgnoreCase(n, name)) return std::string_view(v);
  }
  return std::nullopt;
}

http::Transport TransportOf(CURLcode code) noexcept {
  switch (code) {
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_SSL_CONNECT_ERROR:
      return http::Transport::kConnect;
    case CURLE_OPERATION_TIMEDOUT:
      return http::Transport::kDeadline;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
      return http::Transport::kReset;
    case CURLE_ABORTED_BY_CALLBACK:
      return http::Transport::kCancelled;
    default:
      return http::Transport::kOther;
  }
}

Status Perform(CURL* easy, const std::stop_token& stop, Reply& reply, const Options& options) {
  reply = Reply();
  const Clock& clock = options.clock != nullptr ? *options.clock : SystemClock();
  if (easy == nullptr) return Status::InvalidArgument("fusebox::curl::Perform: null easy handle");
  if (stop.stop_requested()) {
    reply.classification = http::ClassifyTransport(http::Transport::kCancelled, options.rules);
    return http::ToStatus(reply.classification, clock.Now());
  }
  Transfer t{.reply = &reply, .options = &options, .stop = &stop};
  curl_easy_setopt(easy, CURLOPT_HEADERFUNCTION, &OnHeader);
  curl_easy_setopt(easy, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, &OnBody);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(easy, CURLOPT_XFERINFOFUNCTION, &OnProgress);
  curl_easy_setopt(easy, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(easy, CURLOPT_NOPROGRESS, 0L);
  const CURLcode code = Run(easy, stop);
  if (t.too_large) {
    reply.classification = http::ClassifyTransport(http::Transport::kOther, options.rules);
    return Status(StatusCode::kUnavailable,
                  "HTTP response too large (over max_body_bytes or max_header_bytes)");
  }
  if (code != CURLE_OK) {
    const http::Transport transport =
        stop.stop_requested() ? http::Transport::kCancelled : TransportOf(code);
    reply.classification = http::ClassifyTransport(transport, options.rules);
    Status s = http::ToStatus(reply.classification, clock.Now());
    if (reply.classification.kind == http::Kind::kSuccess) return s;
    return Status(s.code(), std::string(s.message()) + " (" + curl_easy_strerror(code) + ")");
  }
  long status = 0;  // NOLINT(google-runtime-int): libcurl's type
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  reply.status = static_cast<int>(std::clamp<long>(status, 0, 999));  // NOLINT(google-runtime-int)
  http::Rules rules_now;
  const http::Rules* rules = &options.rules;
  if (!options.rules.now && reply.Header("Retry-After")) {
    rules_now = options.rules;
    rules_now.now = std::chrono::floor<std::chrono::seconds>(WallClockNow());
    rules = &rules_now;
  }
  reply.classification = http::Classify({.status = reply.status,
                                         .retry_after = reply.Header("Retry-After"),
                                         .date = reply.Header("Date")},
                                        *rules);
  return http::ToStatus(reply.classification, clock.Now());
}

Result<Reply> Fetch(CURL* easy, const std::stop_token& stop, const Options& options) {
  Reply reply;
  Status s = Perform(easy, stop, reply, options);
  if (!s.ok()) return s;
  return reply;
}

}  // namespace fusebox::curl
