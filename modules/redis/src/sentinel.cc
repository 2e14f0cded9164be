#include "src/sentinel.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

namespace fusebox::redis::internal {
namespace {

constexpr std::string_view kSwitchMaster = "+switch-master";
constexpr Duration kFirstPause = std::chrono::seconds(1);
constexpr Duration kMaxPause = std::chrono::seconds(8);

}  // namespace

ConnectionOptions SentinelOptions(const ConnectionOptions& data, std::size_t index,
                                  Duration timeout) {
  ConnectionOptions o;
  o.host = data.sentinels[index].host;
  o.port = data.sentinels[index].port;
  o.password = data.sentinel_password;
  o.connect_timeout = timeout;
  o.command_timeout = timeout;
  o.tcp_keepalive = data.tcp_keepalive;
  o.tls = data.tls;
  o.ca_file = data.ca_file;
  o.client_cert = data.client_cert;
  o.client_key = data.client_key;
  o.insecure_skip_verify = data.insecure_skip_verify;
  o.warn = data.warn;
  return o;
}

Result<SentinelAddress> AskSentinel(const ConnectionOptions& data, std::size_t index,
                                    Duration timeout) {
  Result<std::unique_ptr<Connection>> sentinel =
      Connection::Connect(SentinelOptions(data, index, timeout));
  if (!sentinel) return sentinel.error();
  Connection& conn = **sentinel;
  Result<Reply> r = conn.Command({"SENTINEL", "get-master-addr-by-name", data.master_name});
  if (!r) return r.error();
  if (r->is_error()) return conn.ErrorReplyStatus("SENTINEL get-master-addr-by-name", *r);
  const std::string where = "redis " + conn.options().Endpoint() + ": ";
  if (r->is_nil()) {
    return Status::Unavailable(where + "does not monitor a master named '" + data.master_name +
                               "'");
  }
  int port = 0;
  if (r->is_array() && r->elements.size() == 2 && r->elements[0].is_string() &&
      r->elements[1].is_string()) {
    const std::string& text = r->elements[1].str;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
    if (ec == std::errc() && end == text.data() + text.size() && port > 0 && port <= 65535 &&
        !r->elements[0].str.empty()) {
      return SentinelAddress{r->elements[0].str, port};
    }
  }
  return Status::Internal(where + "SENTINEL get-master-addr-by-name: unexpected reply " +
                          r->ToString());
}

Status CheckIsPrimary(Connection& conn) {
  Result<Reply> r = conn.Command({"ROLE"});
  if (!r) return r.error();
  if (r->is_error()) return conn.ErrorReplyStatus("ROLE", *r);
  if (r->is_array() && !r->elements.empty() && r->elements[0].is_string()) {
    if (r->elements[0].str == "master") return Status();
    return Status::Unavailable("redis " + conn.options().Endpoint() + ": ROLE: a " +
                               r->elements[0].str + ", not the primary");
  }
  return Status::Internal("redis " + conn.options().Endpoint() + ": ROLE: unexpected reply " +
                          r->ToString());
}

SentinelWatch::SentinelWatch(ConnectionOptions data) : data_(std::move(data)) {}

SentinelWatch::~SentinelWatch() = default;

std::optional<std::string> SentinelWatch::Subscribe(TimePoint now) {
  if (now < retry_at_) return std::nullopt;
  const std::size_t i = next_;
  next_ = (next_ + 1) % data_.sentinels.size();
  Result<std::unique_ptr<Connection>> c =
      Connection::Connect(SentinelOptions(data_, i, data_.connect_timeout));
  const std::vector<std::string> channels{std::string(kSwitchMaster)};
  // Subscribed before asking, so that no announcement falls in between.
  if (c && (*c)->Subscribe(channels).ok()) {
    Result<SentinelAddress> primary = AskSentinel(data_, i, data_.connect_timeout);
    if (primary) {
      conn_ = std::move(*c);
      next_ = i;  // Back to this one if it breaks.
      pause_ = Duration::zero();
      return primary->Endpoint();
    }
  }
  // Growing pauses: an unreachable sentinel is tried again, not hammered.
  pause_ = std::clamp(pause_ * 2, kFirstPause, kMaxPause);
  retry_at_ = now + pause_;
  return std::nullopt;
}

std::optional<std::string> SentinelWatch::Poll(TimePoint now) {
  if (conn_ == nullptr || conn_->broken()) {
    conn_.reset();
    return Subscribe(now);
  }
  std::optional<std::string> moved;
  for (;;) {
    Result<std::optional<PubSubMessage>> m = conn_->ReadMessage(Duration::zero());
    if (!m) {
      conn_.reset();
      return moved;
    }
    if (!m->has_value()) return moved;
    // "<master name> <old ip> <old port> <new ip> <new port>".
    const std::string& payload = (*m)->payload;
    if (!payload.starts_with(data_.master_name + " ")) continue;
    std::vector<std::string_view> words;
    std::string_view rest = payload;
    while (!rest.empty()) {
      const std::size_t space = rest.find(' ');
      words.push_back(rest.substr(0, space));
      rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
    }
    int port = 0;
    if (words.size() != 5) continue;
    const auto [end, ec] =
        std::from_chars(words[4].data(), words[4].data() + words[4].size(), port);
    if (ec != std::errc() || end != words[4].data() + words[4].size()) continue;
    moved = SentinelAddress{std::string(words[3]), port}.Endpoint();
  }
}

}  // namespace fusebox::redis::internal
