#include "fusebox/redis/connection.h"

#include <hiredis/hiredis.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <chrono>
#include <climits>
#include <utility>

namespace fusebox::redis {
namespace {

using std::chrono::ceil;
using std::chrono::microseconds;
using std::chrono::milliseconds;

// SO_RCVTIMEO/SO_SNDTIMEO read a zero timeval as "no timeout", so the
// shortest timeout is 1 µs, never 0.
timeval ToTimeval(Duration d) {
  const long long us = std::max<long long>(1, ceil<microseconds>(d).count());
  return timeval{.tv_sec = static_cast<time_t>(us / 1'000'000),
                 .tv_usec = static_cast<suseconds_t>(us % 1'000'000)};
}

std::string MsText(Duration d) { return std::to_string(ceil<milliseconds>(d).count()) + " ms"; }

// Blocks SIGPIPE on this thread while hiredis may write, and swallows a
// SIGPIPE that the write raised, so that a server that went away yields EPIPE
// (a broken connection) instead of killing the process. The process-wide
// disposition of SIGPIPE belongs to the application and is not touched.
class ScopedSigpipeBlock {
 public:
  ScopedSigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~ScopedSigpipeBlock() {
    if (!blocked_) return;
    const int saved_errno = errno;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    errno = saved_errno;
  }
  ScopedSigpipeBlock(const ScopedSigpipeBlock&) = delete;
  ScopedSigpipeBlock& operator=(const ScopedSigpipeBlock&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
  bool blocked_ = false;
};

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

Connection::Connection(ConnectionOptions options) : options_(std::move(options)) {}

Connection::~Connection() {
  if (context_ != nullptr) redisFree(context_);
}

Result<std::unique_ptr<Connection>> Connection::Connect(ConnectionOptions options) {
  if (Status s = options.Validate(); !s.ok()) return s;
  std::unique_ptr<Connection> conn(new Connection(std::move(options)));
  if (Status s = conn->Open(); !s.ok()) return s;
  return conn;
}

Status Connection::Reconnect() {
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  pending_ = 0;
  subscribed_ = false;
  queued_.clear();
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

Status Connection::Break(std::string_view operation, int saved_errno) {
  std::string detail;
  if (context_ != nullptr && context_->err == REDIS_ERR_IO &&
      (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK)) {
    detail = "timed out after " + MsText(io_timeout_);
  } else if (context_ != nullptr && context_->err == REDIS_ERR_EOF) {
    detail = "server closed the connection";
  } else if (context_ != nullptr && context_->err != 0) {
    detail = context_->errstr;
  } else {
    detail = "I/O error";
  }
  if (context_ != nullptr) {
    redisFree(context_);
    context_ = nullptr;
  }
  broken_reason_ = std::string(operation) + ": " + detail;
  pending_ = 0;
  subscribed_ = false;
  queued_.clear();
  return Error(StatusCode::kUnavailable, operation, detail);
}

Status Connection::Open() {
  ScopedSigpipeBlock no_sigpipe;
  redisContext* c = redisConnectWithTimeout(options_.host.c_str(), options_.port,
                                            ToTimeval(options_.connect_timeout));
  if (c == nullptr) {
    broken_reason_ = "connect: out of memory";
    return Error(StatusCode::kUnavailable, "connect", "out of memory");
  }
  if (c->err != 0) {
    std::string detail = c->errstr;
    redisFree(c);
    broken_reason_ = "connect: " + detail;
    return Error(StatusCode::kUnavailable, "connect",
                 detail + " (connect timeout " + MsText(options_.connect_timeout) + ")");
  }
  context_ = c;
  // The handshake is part of connecting: bounded by the connect timeout.
  io_timeout_ = options_.connect_timeout;
  if (redisSetTimeout(c, ToTimeval(options_.connect_timeout)) != REDIS_OK ||
      (options_.tcp_keepalive && redisEnableKeepAlive(c) != REDIS_OK)) {
    return Break("connect", errno);
  }
  if (!options_.password.empty()) {
    std::vector<std::string_view> args = {"AUTH"};
    if (!options_.username.empty()) args.push_back(options_.username);
    args.push_back(options_.password);
    Result<Reply> r = Command(args);
    if (!r) return r.error();
    if (r->is_error()) {
      // Redis' AUTH errors ("WRONGPASS invalid username-password pair ...")
      // do not echo the password; masking it anyway costs nothing.
      std::string text = r->str;
      for (std::size_t pos; (pos = text.find(options_.password)) != std::string::npos;) {
        text.replace(pos, options_.password.size(), "***");
      }
      redisFree(context_);
      context_ = nullptr;
      broken_reason_ = "AUTH failed";
      return Error(StatusCode::kUnavailable, "AUTH",
                   text + (options_.username.empty() ? "" : " (user " + options_.username + ")"));
    }
  }
  if (options_.db != 0) {
    const std::string db = std::to_string(options_.db);
    Result<Reply> r = Command({"SELECT", db});
    if (!r) return r.error();
    if (r->is_error()) {
      redisFree(context_);
      context_ = nullptr;
      broken_reason_ = "SELECT failed";
      return Error(StatusCode::kInvalidArgument, "SELECT " + db, r->str);
    }
  }
  io_timeout_ = options_.command_timeout;
  if (redisSetTimeout(c, ToTimeval(io_timeout_)) != REDIS_OK) return Break("connect", errno);
  broken_reason_.clear();
  return Status();
}

Status Connection::SetCommandTimeout(Duration timeout) {
  if (broken()) return BrokenStatus("set timeout");
  if (timeout == io_timeout_) return Status();
  if (redisSetTimeout(context_, ToTimeval(timeout)) != REDIS_OK) return Break("set timeout", errno);
  io_timeout_ = timeout;
  return Status();
}

Status Connection::Append(std::span<const std::string_view> args) {
  const std::string_view op = OperationName(args);
  if (args.empty()) return Error(StatusCode::kInvalidArgument, op, "no command given");
  if (context_ == nullptr) return BrokenStatus(op);
  std::vector<const char*> argv;
  std::vector<std::size_t> argvlen;
  argv.reserve(args.size());
  argvlen.reserve(args.size());
  for (std::string_view a : args) {
    argv.push_back(a.data());
    argvlen.push_back(a.size());
  }
  // Only formats into the output buffer: no I/O, fails only on OOM.
  if (redisAppendCommandArgv(context_, static_cast<int>(args.size()), argv.data(),
                             argvlen.data()) != REDIS_OK) {
    return Break(op, errno);
  }
  ++pending_;
  return Status();
}

Result<Reply> Connection::GetReply(std::string_view operation) {
  ScopedSigpipeBlock no_sigpipe;
  void* raw = nullptr;
  if (redisGetReply(context_, &raw) != REDIS_OK || raw == nullptr) {
    return Break(operation, errno);
  }
  return TakeReply(raw);
}

Result<Reply> Connection::ReadReply() {
  if (context_ == nullptr) return BrokenStatus("read reply");
  if (pending_ == 0) {
    return Error(StatusCode::kInvalidArgument, "read reply", "no command was appended");
  }
  Result<Reply> r = GetReply("read reply");
  if (r) --pending_;
  return r;
}

Result<Reply> Connection::Command(std::span<const std::string_view> args) {
  const std::string_view op = OperationName(args);
  if (context_ == nullptr) return BrokenStatus(op);
  if (subscribed_) {
    return Error(StatusCode::kInvalidArgument, op,
                 "not allowed on a subscribed connection (RESP2); use another connection");
  }
  if (pending_ != 0) {
    return Error(StatusCode::kInvalidArgument, op,
                 std::to_string(pending_) + " pipelined replies are unread; ReadReply() first");
  }
  if (Status s = Append(args); !s.ok()) return s;
  Result<Reply> r = GetReply(op);
  if (r) --pending_;
  return r;
}

Result<std::vector<Reply>> Connection::Pipeline(
    const std::vector<std::vector<std::string_view>>& commands) {
  const std::string_view op = "pipeline";
  if (context_ == nullptr) return BrokenStatus(op);
  if (subscribed_) {
    return Error(StatusCode::kInvalidArgument, op, "not allowed on a subscribed connection");
  }
  if (pending_ != 0) {
    return Error(StatusCode::kInvalidArgument, op,
                 std::to_string(pending_) + " pipelined replies are unread; ReadReply() first");
  }
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
  if (context_ == nullptr) return BrokenStatus("PING");
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
  (void)Break(operation, 0);
  broken_reason_ = std::string(operation) + ": unexpected reply in subscriber mode";
  return Error(StatusCode::kInternal, operation, "unexpected reply in subscriber mode: " + shown);
}

Status Connection::Subscribe(std::span<const std::string> channels) {
  if (context_ == nullptr) return BrokenStatus("SUBSCRIBE");
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
  if (context_ == nullptr) return BrokenStatus(kOp);
  if (!subscribed_) {
    return Error(StatusCode::kInvalidArgument, kOp, "Subscribe() first");
  }
  for (;;) {
    if (!queued_.empty()) {
      PubSubMessage m = std::move(queued_.front());
      queued_.pop_front();
      return std::optional<PubSubMessage>(std::move(m));
    }
    void* raw = nullptr;
    if (redisGetReplyFromReader(context_, &raw) != REDIS_OK) return Break(kOp, errno);
    if (raw != nullptr) {
      // Already buffered: run it through the same checks as a fresh read.
      Reply r = TakeReply(raw);
      if (PushKind(r) == "message" && r.elements.size() == 3 && r.elements[1].is_string() &&
          r.elements[2].is_string()) {
        return std::optional<PubSubMessage>(
            PubSubMessage{std::move(r.elements[1].str), std::move(r.elements[2].str)});
      }
      const std::string shown = r.ToString();
      (void)Break(kOp, 0);
      broken_reason_ = "read message: unexpected reply in subscriber mode";
      return Error(StatusCode::kInternal, kOp, "unexpected reply in subscriber mode: " + shown);
    }
    // Nothing buffered: wait for the socket without reading a clock. poll()
    // takes whole milliseconds; round up so that a short timeout still waits.
    const long long wait_ms =
        std::clamp<long long>(ceil<milliseconds>(timeout).count(), 0, INT_MAX);
    pollfd p{.fd = context_->fd, .events = POLLIN, .revents = 0};
    const int n = poll(&p, 1, static_cast<int>(wait_ms));
    if (n == 0 || (n < 0 && errno == EINTR)) return std::optional<PubSubMessage>();
    if (n < 0) return Break(kOp, errno);
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
  return Error(
      transient ? StatusCode::kUnavailable : StatusCode::kInternal, operation,
      error_reply.is_error() ? error_reply.str : "unexpected reply " + error_reply.ToString());
}

}  // namespace fusebox::redis
