#include "fusebox/redis/connection.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "src/cluster.h"
#include "src/sentinel.h"
#include "src/transport.h"

namespace fusebox::redis {
namespace {

using std::chrono::ceil;
using std::chrono::milliseconds;

std::string MsText(Duration d) { return std::to_string(ceil<milliseconds>(d).count()) + " ms"; }

// Bytes asked of the socket per read.
constexpr std::size_t kReadChunk = std::size_t{16} * 1024;

Reply Copy(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_INTEGER:
      return Reply::Integer(r.integer);
    case REDIS_REPLY_STRING:
      return Reply::String(std::string(r.str, r.len));
    case REDIS_REPLY_STATUS:
      return Reply::StatusReply(std::string(r.str, r.len));
    case REDIS_REPLY_ERROR:
      return Reply::Error(std::string(r.str, r.len));
    case REDIS_REPLY_ARRAY: {
      std::vector<Reply> elements;
      elements.reserve(r.elements);
      for (std::size_t i = 0; i < r.elements; ++i) elements.push_back(Copy(*r.element[i]));
      return Reply::Array(std::move(elements));
    }
    case REDIS_REPLY_NIL:
    default:
      return Reply::Nil();
  }
}

// Takes ownership of a hiredis reply, copies it, frees it.
Reply TakeReply(void* raw) {
  Reply out = Copy(*static_cast<redisReply*>(raw));
  freeReplyObject(raw);
  return out;
}

// The kind of a subscriber-mode push ("message", "subscribe", "pong"), or ""
// when the reply is not shaped like one.
std::string_view PushKind(const Reply& r) {
  if (!r.is_array() || r.elements.empty() || !r.elements[0].is_string()) return "";
  return r.elements[0].str;
}

// Only the command name is ever put into a message: arguments may be secrets
// (AUTH) or large.
std::string_view OperationName(std::span<const std::string_view> args) {
  if (args.empty()) return "(empty command)";
  return args[0].substr(0, 32);
}

}  // namespace

Connection::Connection(ConnectionOptions options) : options_(std::move(options)) {
  if (!options_.cluster_nodes.empty()) {
    cluster_ = std::make_unique<internal::ClusterRoute>();
    // Each connection starts at a seed of its own, so that a fleet's
    // subscribers spread over the nodes instead of all landing on the first.
    cluster_->preferred = std::random_device()() % options_.cluster_nodes.size();
  }
}

Connection::~Connection() { Drop(); }

Result<std::unique_ptr<Connection>> Connection::Connect(ConnectionOptions options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  std::unique_ptr<Connection> conn(new Connection(std::move(options)));
  if (Status s = conn->Open(); !s.ok()) return s;
  return conn;
}

void Connection::Drop() {
  transport_.reset();
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
  out_.clear();
  pending_ = 0;
  subscribed_ = false;
  queued_.clear();
  if (cluster_ != nullptr) {
    cluster_->nodes.clear();
    cluster_->last_node.reset();
  }
}

Status Connection::Reconnect() {
  Drop();
  return Open();
}

Status Connection::Error(StatusCode code, std::string_view operation,
                         std::string_view detail) const {
  std::string message = "redis " + options_.Endpoint() + ": ";
  message += operation;
  message += ": ";
  message += detail;
  return Status(code, std::move(message));
}

Status Connection::BrokenStatus(std::string_view operation) const {
  return Error(StatusCode::kUnavailable, operation,
               "connection is broken (" + broken_reason_ + "); call Reconnect()");
}

Status Connection::Break(std::string_view operation, std::string_view detail) {
  Drop();
  broken_reason_ = std::string(operation) + ": " + std::string(detail);
  broken_by_timeout_ = false;
  return Error(StatusCode::kUnavailable, operation, detail);
}

Status Connection::BreakAfterIo(std::string_view operation, const Status& io_error) {
  const bool ran_out = transport_->timed_out();
  Status s = Break(operation, io_error.message());
  broken_by_timeout_ = ran_out;
  return s;
}

Status Connection::Open() {
  if (cluster_ != nullptr) return OpenCluster();
  if (options_.sentinels.empty()) return Handshake(options_.connect_timeout);
  // Sentinel mode: each sentinel in turn, from the last one that answered,
  // all within one connect timeout.
  const TimePoint deadline = SystemClock().Now() + options_.connect_timeout;  // real I/O
  const std::size_t n = options_.sentinels.size();
  std::string tried;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (preferred_sentinel_ + k) % n;
    const Duration left = deadline - SystemClock().Now();
    if (left <= Duration::zero()) {
      tried += (tried.empty() ? "" : "; ") + std::string("out of time (connect timeout ") +
               MsText(options_.connect_timeout) + ")";
      break;
    }
    Result<SentinelAddress> primary = internal::AskSentinel(options_, i, left);
    Status s = primary.has_value() ? Status() : primary.error();
    if (s.ok()) {
      options_.host = primary->host;
      options_.port = primary->port;
      s = Handshake(deadline - SystemClock().Now());
      // A sentinel that has not seen the failover yet, or a primary demoted
      // since, names a replica: refused, as writes there would fail. The
      // question is part of the connect, within its deadline.
      if (s.ok()) {
        io_timeout_ = deadline - SystemClock().Now();
        s = io_timeout_ > Duration::zero() ? internal::CheckIsPrimary(*this)
                                           : Error(StatusCode::kUnavailable, "ROLE", "out of time");
        io_timeout_ = options_.command_timeout;
      }
      if (s.ok()) {
        preferred_sentinel_ = i;
        return s;
      }
      Drop();
    }
    tried += (tried.empty() ? "" : "; ") + std::string(s.message());
  }
  // Start the next attempt one further on, so that a sentinel that eats the
  // whole timeout (a lost host) cannot starve the others.
  preferred_sentinel_ = (preferred_sentinel_ + 1) % n;
  broken_reason_ = "no primary found through the sentinels";
  return Status::Unavailable("redis sentinel master '" + options_.master_name +
                             "': no sentinel named a reachable primary (" + tried + ")");
}

// Over 60 lines on purpose: the handshake in order (connect, AUTH, SELECT,
// the TLS PING), each refusal with its own status.
Status Connection::Handshake(Duration timeout) {
  if (timeout <= Duration::zero()) {
    broken_reason_ = "connect: out of time";
    return Error(StatusCode::kUnavailable, "connect", "out of time");
  }
  ConnectionOptions at = options_;
  at.connect_timeout = timeout;
  Result<std::unique_ptr<internal::Transport>> t = internal::Transport::Connect(at);
  if (!t) {
    const std::string detail(t.error().message());
    broken_reason_ = "connect: " + detail;
    return Error(t.error().code(), "connect",
                 detail + " (connect timeout " + MsText(timeout) + ")");
  }
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) {
    transport_.reset();
    broken_reason_ = "connect: out of memory";
    return Error(StatusCode::kUnavailable, "connect", "out of memory");
  }
  transport_ = std::move(*t);
  // The handshake is part of connecting: bounded by the connect timeout.
  io_timeout_ = timeout;
  bool round_trip = false;
  if (!options_.password.empty()) {
    std::vector<std::string_view> args = {"AUTH"};
    if (!options_.username.empty()) args.push_back(options_.username);
    args.push_back(options_.password);
    Result<Reply> r = Command(args);
    if (!r) return r.error();
    round_trip = true;
    if (r->is_error()) {
      // Redis' AUTH errors ("WRONGPASS invalid username-password pair ...")
      // do not echo the password; masking it anyway costs nothing.
      std::string text = r->str;
      for (std::size_t pos; (pos = text.find(options_.password)) != std::string::npos;) {
        text.replace(pos, options_.password.size(), "***");
      }
      Drop();
      broken_reason_ = "AUTH failed";
      Status refused =
          Error(StatusCode::kUnavailable, "AUTH",
                text + (options_.username.empty() ? "" : " (user " + options_.username + ")"));
      options_.Warn("redis_auth_failed", refused.message());
      return refused;
    }
  }
  if (options_.db != 0) {
    const std::string db = std::to_string(options_.db);
    Result<Reply> r = Command({"SELECT", db});
    if (!r) return r.error();
    round_trip = true;
    if (r->is_error()) {
      Drop();
      broken_reason_ = "SELECT failed";
      return Error(StatusCode::kInvalidArgument, "SELECT " + db, r->str);
    }
  }
  if (options_.tls && !round_trip) {
    // TLS 1.3 servers refuse a client certificate after the handshake: ask
    // something now so that Connect() reports it.
    if (Status s = Ping(); !s.ok()) return s;
  }
  io_timeout_ = options_.command_timeout;
  broken_reason_.clear();
  return Status();
}

Status Connection::SetCommandTimeout(Duration timeout) {
  if (broken()) return BrokenStatus("set timeout");
  io_timeout_ = timeout;
  return Status();
}

Status Connection::Append(std::span<const std::string_view> args) {
  const std::string_view op = OperationName(args);
  if (args.empty()) return Error(StatusCode::kInvalidArgument, op, "no command given");
  if (transport_ == nullptr) return BrokenStatus(op);
  std::vector<const char*> argv;
  std::vector<std::size_t> argvlen;
  argv.reserve(args.size());
  argvlen.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    argvlen.push_back(a.size());
  }
  // Only formats into the output buffer: no I/O, fails only on OOM.
  char* cmd = nullptr;
  const int len =
      redisFormatCommandArgv(&cmd, static_cast<int>(args.size()), argv.data(), argvlen.data());
  if (len < 0 || cmd == nullptr) return Break(op, "out of memory");
  out_.append(cmd, static_cast<std::size_t>(len));
  redisFreeCommand(cmd);
  ++pending_;
  return Status();
}

Result<std::optional<Reply>> Connection::BufferedReply(std::string_view operation) {
  void* raw = nullptr;
  if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
    const std::string detail = std::string("protocol error: ") + reader_->errstr;
    return Break(operation, detail);
  }
  if (raw == nullptr) return std::optional<Reply>();
  return std::optional<Reply>(TakeReply(raw));
}

Result<Reply> Connection::GetReply(std::string_view operation) {
  if (!out_.empty()) {
    if (Status s = transport_->WriteAll(out_, io_timeout_); !s.ok()) {
      return BreakAfterIo(operation, s);
    }
    out_.clear();
  }
  char buf[kReadChunk];
  for (;;) {
    Result<std::optional<Reply>> r = BufferedReply(operation);
    if (!r) return std::move(r).error();
    if (r->has_value()) return std::move(**r);
    Result<std::size_t> n = transport_->Read(buf, sizeof buf, io_timeout_);
    if (!n) return BreakAfterIo(operation, n.error());
    if (redisReaderFeed(reader_, buf, *n) != REDIS_OK) return Break(operation, "out of memory");
  }
}

void Connection::BreakIfDemoted(std::string_view operation, const Reply& reply) {
  // In Sentinel mode a READONLY means the primary was demoted under this
  // connection: break it, so that the next use asks the sentinels again.
  if (options_.sentinels.empty() || !reply.IsErrorCode("READONLY")) return;
  (void)Break(operation, "the server is no longer the primary (READONLY)");
}

Result<Reply> Connection::ReadReply() {
  if (transport_ == nullptr) return BrokenStatus("read reply");
  if (pending_ == 0) {
    return Error(StatusCode::kInvalidArgument, "read reply", "no command was appended");
  }
  Result<Reply> r = GetReply("read reply");
  if (r) {
    --pending_;
    BreakIfDemoted("read reply", *r);
  }
  return r;
}

Result<Reply> Connection::Command(std::span<const std::string_view> args) {
  const std::string_view op = OperationName(args);
  if (transport_ == nullptr) return BrokenStatus(op);
  if (subscribed_) {
    return Error(StatusCode::kInvalidArgument, op,
                 "not allowed on a subscribed connection (RESP2); use another connection");
  }
  if (pending_ != 0) {
    return Error(StatusCode::kInvalidArgument, op,
                 std::to_string(pending_) + " pipelined replies are unread; ReadReply() first");
  }
  if (cluster_ != nullptr && !args.empty()) {
    if (internal::EqualsNoCase(args[0], "SCAN")) return ScanCluster(args);
    if (internal::RoutingKey(args) || internal::EqualsNoCase(args[0], "WAIT")) {
      const std::vector<std::string_view> command(args.begin(), args.end());
      Result<std::vector<Reply>> r = Route(std::span(&command, 1));
      if (!r) return std::move(r).error();
      return std::move(r->front());
    }
  }
  return CommandHere(args);
}

Result<Reply> Connection::CommandHere(std::span<const std::string_view> args) {
  const std::string_view op = OperationName(args);
  if (Status s = Append(args); !s.ok()) return s;
  Result<Reply> r = GetReply(op);
  if (r) {
    --pending_;
    BreakIfDemoted(op, *r);
  }
  return r;
}

Result<std::vector<Reply>> Connection::Pipeline(
    const std::vector<std::vector<std::string_view>>& commands) {
  const std::string_view op = "pipeline";
  if (transport_ == nullptr) return BrokenStatus(op);
  if (subscribed_) {
    return Error(StatusCode::kInvalidArgument, op, "not allowed on a subscribed connection");
  }
  if (pending_ != 0) {
    return Error(StatusCode::kInvalidArgument, op,
                 std::to_string(pending_) + " pipelined replies are unread; ReadReply() first");
  }
  if (cluster_ != nullptr) return Route(commands);
  return PipelineHere(commands);
}

Result<std::vector<Reply>> Connection::PipelineHere(
    std::span<const std::vector<std::string_view>> commands) {
  for (const std::vector<std::string_view>& c : commands) {
    if (Status s = Append(c); !s.ok()) return s;
  }
  std::vector<Reply> replies;
  replies.reserve(commands.size());
  while (pending_ > 0) {
    Result<Reply> r = ReadReply();
    if (!r) return std::move(r).error();
    replies.push_back(std::move(*r));
  }
  return replies;
}

Status Connection::Ping() {
  if (transport_ == nullptr) return BrokenStatus("PING");
  if (!subscribed_) {
    Result<Reply> r = Command({"PING"});
    if (!r) return r.error();
    if (r->is_status() && r->str == "PONG") return Status();
    if (r->is_error()) return ErrorReplyStatus("PING", *r);
    return Error(StatusCode::kInternal, "PING", "unexpected reply " + r->ToString());
  }
  if (Status s = Append({"PING"}); !s.ok()) return s;
  for (;;) {
    Result<Reply> r = GetPush("PING");
    if (!r) return r.error();
    if (PushKind(*r) == "pong") {
      --pending_;
      return Status();
    }
  }
}

Result<Reply> Connection::GetPush(std::string_view operation) {
  Result<Reply> r = GetReply(operation);
  if (!r) return r;
  const std::string_view kind = PushKind(*r);
  if (kind == "message" && r->elements.size() == 3 && r->elements[1].is_string() &&
      r->elements[2].is_string()) {
    queued_.push_back({std::move(r->elements[1].str), std::move(r->elements[2].str)});
    return Reply::Nil();
  }
  if (kind == "pong" || kind == "subscribe") return r;
  // Anything else means the reply stream is not what this connection sent
  // for: nothing read later can be trusted.
  const std::string shown = r->ToString();
  (void)Break(operation, "unexpected reply in subscriber mode");
  return Error(StatusCode::kInternal, operation, "unexpected reply in subscriber mode: " + shown);
}

Status Connection::Subscribe(std::span<const std::string> channels) {
  if (transport_ == nullptr) return BrokenStatus("SUBSCRIBE");
  if (channels.empty()) {
    return Error(StatusCode::kInvalidArgument, "SUBSCRIBE", "no channel given");
  }
  if (pending_ != 0) {
    return Error(StatusCode::kInvalidArgument, "SUBSCRIBE",
                 std::to_string(pending_) + " pipelined replies are unread; ReadReply() first");
  }
  std::vector<std::string_view> args = {"SUBSCRIBE"};
  args.insert(args.end(), channels.begin(), channels.end());
  if (Status s = Append(args); !s.ok()) return s;
  subscribed_ = true;
  // One confirmation per channel; messages of channels already subscribed may
  // arrive in between and are kept.
  std::size_t confirmed = 0;
  while (confirmed < channels.size()) {
    Result<Reply> r = GetPush("SUBSCRIBE");
    if (!r) return r.error();
    if (PushKind(*r) == "subscribe") ++confirmed;
  }
  pending_ = 0;
  return Status();
}

Result<std::optional<PubSubMessage>> Connection::ReadMessage(Duration timeout) {
  constexpr std::string_view kOp = "read message";
  if (transport_ == nullptr) return BrokenStatus(kOp);
  if (!subscribed_) {
    return Error(StatusCode::kInvalidArgument, kOp, "Subscribe() first");
  }
  for (;;) {
    if (!queued_.empty()) {
      PubSubMessage m = std::move(queued_.front());
      queued_.pop_front();
      return std::optional<PubSubMessage>(std::move(m));
    }
    Result<std::optional<Reply>> buffered = BufferedReply(kOp);
    if (!buffered) return std::move(buffered).error();
    if (buffered->has_value()) {
      // Already buffered: run it through the same checks as a fresh read.
      Reply r = std::move(**buffered);
      if (PushKind(r) == "message" && r.elements.size() == 3 && r.elements[1].is_string() &&
          r.elements[2].is_string()) {
        return std::optional<PubSubMessage>(
            PubSubMessage{std::move(r.elements[1].str), std::move(r.elements[2].str)});
      }
      if (PushKind(r) == "pong" || PushKind(r) == "subscribe") continue;
      const std::string shown = r.ToString();
      (void)Break(kOp, "unexpected reply in subscriber mode");
      return Error(StatusCode::kInternal, kOp, "unexpected reply in subscriber mode: " + shown);
    }
    // Nothing parsed yet: wait for the socket (or bytes TLS already holds)
    // without reading a clock.
    if (!transport_->WaitReadable(timeout)) return std::optional<PubSubMessage>();
    // Readable, or hung up (the read below then reports EOF). Reading the
    // rest of a reply that has begun is bounded by the command timeout.
    Result<Reply> r = GetPush(kOp);
    if (!r) return std::move(r).error();
    if (PushKind(*r) == "pong" || PushKind(*r) == "subscribe") {
      // Not awaited by anyone (Ping() and Subscribe() read their own):
      // harmless, skip it.
      continue;
    }
  }
}

Status Connection::ErrorReplyStatus(std::string_view operation, const Reply& error_reply) const {
  static constexpr std::string_view kTransient[] = {
      "LOADING",     "BUSY",   "READONLY", "MASTERDOWN", "TRYAGAIN",
      "CLUSTERDOWN", "NOAUTH", "OOM",      "NOREPLICAS",
  };
  const bool transient =
      std::any_of(std::begin(kTransient), std::end(kTransient),
                  [&](std::string_view c) { return error_reply.IsErrorCode(c); });
  std::string detail =
      error_reply.is_error() ? error_reply.str : "unexpected reply " + error_reply.ToString();
  if (cluster_ == nullptr && (error_reply.IsErrorCode("MOVED") || error_reply.IsErrorCode("ASK"))) {
    detail += " (the server is a Redis Cluster node: connect with redis-cluster://)";
  }
  return Error(transient ? StatusCode::kUnavailable : StatusCode::kInternal, operation, detail);
}

}  // namespace fusebox::redis
