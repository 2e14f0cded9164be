// fusebox/redis/connection.h: one synchronous connection to a Redis server.
//
// Its own non-blocking socket, plain or TLS (rediss://, OpenSSL), with
// hiredis 0.14's reply parser and command encoder (RESP2); every wait is a
// poll() bounded by the connect or command timeout:
//
//   - Connect() connects within options.connect_timeout (each wait of the
//     TCP connect, the TLS handshake and the handshake's commands), enables
//     TCP keepalive, sends AUTH (password, or user + password for an ACL
//     user) and SELECT, then bounds every later wait for the socket by
//     options.command_timeout. Over TLS a PING is sent when neither AUTH nor
//     SELECT is, so that a server refusing the client certificate (which TLS
//     1.3 says only after the handshake) is refused at Connect().
//   - With options.sentinels, Connect() and Reconnect() first ask the
//     sentinels where the primary is, connect there and check with ROLE that
//     it is a master, all within options.connect_timeout; a READONLY reply
//     (the primary was demoted) breaks the connection, so that the next
//     Reconnect() finds the new primary. options().host and port are the
//     primary found.
//   - Command() sends one binary-safe command built from string_views and
//     returns an owning Reply. A Redis error reply (-ERR ...) is a Reply of
//     type kError, not a failed Result: only the connection can fail a Result.
//   - Append() + ReadReply(), or Pipeline(), send several commands in one
//     round trip.
//   - After any I/O error or timeout the connection is broken: every call
//     returns kUnavailable at once, without I/O, until Reconnect() succeeds.
//     Nothing reconnects behind the caller's back, so a dead Redis costs the
//     caller one timeout, not one per call, and the caller decides when to
//     try again.
//   - With options.cluster_nodes (Redis Cluster), Connect() and Reconnect()
//     ask a seed for the slot map (CLUSTER SLOTS); Command() and Pipeline()
//     then send each keyed command to the primary serving its slot, over a
//     connection to that node made when first needed, and follow MOVED and
//     ASK; SCAN walks every primary. Keyless commands, Append(), Ping() and
//     subscriptions stay on the node the map came from. An I/O error on any
//     node breaks the whole connection, so that Reconnect() reads the map
//     afresh. A pipeline's keyed commands must share one slot.
//   - Subscriber mode: after Subscribe(), only ReadMessage() and Ping() are
//     allowed (RESP2 forbids other commands on a subscribed connection), so a
//     subscriber needs a connection of its own.
//
// Errors are fusebox::Status: kUnavailable for connection trouble and
// timeouts, kInvalidArgument for bad options or a call the mode forbids,
// kInternal for a reply of an unexpected shape. Messages name host:port and
// the command ("redis 127.0.0.1:6379: EVALSHA: timed out after 250 ms"); they
// never contain the password, nor any command argument.
//
//   auto conn = fusebox::redis::Connection::Connect(*options);
//   if (!conn) return conn.error();
//   fusebox::Result<fusebox::redis::Reply> r = (*conn)->Command({"PTTL", key});
//
// Plain writes use send(MSG_NOSIGNAL); OpenSSL writes with write(2), which
// raises SIGPIPE when the server has gone, so TLS I/O blocks SIGPIPE on the
// calling thread for its duration and discards a SIGPIPE it caused: the
// process' disposition is left alone.
//
// A refused AUTH is reported through options.Warn("redis_auth_failed", ...)
// (never with the password) as well as returned.
//
// Not thread-safe: a Connection is used by one thread at a time. Use one per
// thread, or a pool.
#ifndef FUSEBOX_REDIS_CONNECTION_H_
#define FUSEBOX_REDIS_CONNECTION_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/clock.h"
#include "fusebox/redis/options.h"
#include "fusebox/redis/reply.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

struct redisReader;  // hiredis; kept out of the API.

namespace fusebox::redis {

namespace internal {
class Transport;
struct ClusterRoute;
}  // namespace internal

// A message received on a subscribed channel.
struct PubSubMessage {
  std::string channel;
  std::string payload;

  friend bool operator==(const PubSubMessage&, const PubSubMessage&) = default;
};

class Connection {
 public:
  // Validates `options`, connects and authenticates. kInvalidArgument for bad
  // options or a SELECT the server refuses; kUnavailable when the server
  // cannot be reached in time or refuses AUTH (a wrong password cannot be told
  // from a rotated one, and both leave the store unusable until fixed).
  static Result<std::unique_ptr<Connection>> Connect(ConnectionOptions options);

  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  const ConnectionOptions& options() const { return options_; }

  // True after an I/O error or timeout, until Reconnect() succeeds.
  bool broken() const { return transport_ == nullptr; }
  // True when broken because a wait for the server ran out: the server may
  // still run what was sent. False when it closed the connection (restart,
  // CLIENT KILL, an idle timeout, a demoted primary), or on another error.
  bool broken_by_timeout() const { return broken() && broken_by_timeout_; }

  // Bounds each later wait for the socket by `timeout` (> 0) instead of
  // options().command_timeout, until called again: how a caller's deadline
  // bounds one command. kUnavailable when broken.
  Status SetCommandTimeout(Duration timeout);
  Duration command_timeout() const { return io_timeout_; }

  // Drops the current socket (if any) and connects again with the same
  // options. Subscriptions and unread pipelined replies are gone: subscribe
  // again.
  Status Reconnect();

  // Sends one command and waits for its reply, for at most
  // options.command_timeout per read or write. `args` is the command and its
  // arguments, binary-safe; args must not be empty. Not allowed while
  // replies of Append() are unread or in subscriber mode (kInvalidArgument).
  Result<Reply> Command(std::span<const std::string_view> args);
  Result<Reply> Command(std::initializer_list<std::string_view> args) {
    return Command(std::span<const std::string_view>(args.begin(), args.size()));
  }

  // Pipelining: Append() queues a command in the output buffer (no I/O);
  // ReadReply() flushes the buffer and reads the next reply in order.
  Status Append(std::span<const std::string_view> args);
  Status Append(std::initializer_list<std::string_view> args) {
    return Append(std::span<const std::string_view>(args.begin(), args.size()));
  }
  Result<Reply> ReadReply();
  // Replies queued by Append() and not read yet.
  std::size_t pending_replies() const { return pending_; }

  // Sends all `commands` in one write and reads their replies, in order.
  Result<std::vector<Reply>> Pipeline(const std::vector<std::vector<std::string_view>>& commands);

  // PING, in either mode; OK when the server answered PONG in time. In
  // subscriber mode the pong comes as ["pong", ""] after any messages already
  // on the way, which are kept for ReadMessage().
  Status Ping();

  // Subscribes to `channels` (non-empty) and waits for the server's
  // confirmations. The connection is in subscriber mode from then on, until
  // Reconnect().
  Status Subscribe(std::span<const std::string> channels);
  bool subscribed() const { return subscribed_; }

  // Waits up to `timeout` for the next message on a subscribed channel
  // (timeout <= 0: only what has already arrived). nullopt when none arrived
  // in time, which leaves the connection usable; kUnavailable when the
  // connection broke. Once a reply has begun to arrive, reading the rest of it
  // is bounded by options.command_timeout.
  Result<std::optional<PubSubMessage>> ReadMessage(Duration timeout);

  // Cluster mode: MOVED and ASK replies followed since Connect(). 0 otherwise.
  std::int64_t cluster_redirects() const;

  // Where a command with `key` goes: in cluster mode the primary that the
  // slot map says serves the key's slot ("host:port", "" when none does);
  // otherwise options().Endpoint(). Commands for keys with the same answer
  // share a connection, so one WAIT there covers them all.
  std::string ServerOf(std::string_view key) const;
  // Command(args) for a command without a key (WAIT), sent where a command
  // with `key` goes (ServerOf()); Command(args) outside cluster mode.
  Result<Reply> CommandBeside(std::string_view key, std::span<const std::string_view> args);

  // The Status for a Redis error reply to `operation` (a command name): the
  // server's text after "redis host:port: operation: ". kUnavailable for
  // errors that mean "not now" (LOADING, BUSY, READONLY after a failover,
  // MASTERDOWN, TRYAGAIN, CLUSTERDOWN, NOAUTH, OOM), kInternal otherwise.
  Status ErrorReplyStatus(std::string_view operation, const Reply& error_reply) const;

 private:
  explicit Connection(ConnectionOptions options);

  // Connects and runs the handshake (through the sentinels first, if any);
  // on failure transport_ stays null.
  Status Open();
  // Connects to options_.host:port and runs the handshake, each wait bounded
  // by `timeout`.
  Status Handshake(Duration timeout);
  // Cluster mode (cluster.cc): connects to a seed (or a node of the last
  // map) that gives a slot map, within the connect timeout.
  Status OpenCluster();
  // Reads CLUSTER SLOTS on this connection into the route's map.
  Status LoadSlotMap();
  // Sends `commands` (keyed ones sharing a slot) where their slot is served,
  // following redirects; keyless ones here (WAIT: where the last keyed
  // command went).
  // `beside`, when set, is the slot keyless commands go to instead.
  Result<std::vector<Reply>> Route(std::span<const std::vector<std::string_view>> commands,
                                   std::optional<std::uint16_t> beside = std::nullopt);
  // `commands` on `node` (this connection or another node's), with ASKING
  // before each when `asking`.
  Result<std::vector<Reply>> SendTo(Connection& node,
                                    std::span<const std::vector<std::string_view>> commands,
                                    bool asking);
  // This connection or the route's connection to `node`, made if need be.
  Result<Connection*> NodeConnection(const NodeAddress& node);
  // SCAN over every primary in turn: the cursor is "<node>:<cursor>".
  Result<Reply> ScanCluster(std::span<const std::string_view> args);
  // Command() and Pipeline() on this connection's own socket.
  Result<Reply> CommandHere(std::span<const std::string_view> args);
  Result<std::vector<Reply>> PipelineHere(std::span<const std::vector<std::string_view>> commands);
  // Breaks the connection on a READONLY reply in Sentinel mode.
  void BreakIfDemoted(std::string_view operation, const Reply& reply);
  // Break() after the transport failed with `io_error`, remembering whether
  // it timed out.
  Status BreakAfterIo(std::string_view operation, const Status& io_error);
  // Marks the connection broken (drops the socket) and returns the
  // kUnavailable status saying why.
  Status Break(std::string_view operation, std::string_view detail);
  // Drops the socket, the parser and every buffered byte.
  void Drop();
  Status BrokenStatus(std::string_view operation) const;
  Status Error(StatusCode code, std::string_view operation, std::string_view detail) const;
  // A reply already parsed from the bytes received, if any (nullopt: none
  // complete yet); a protocol error breaks the connection.
  Result<std::optional<Reply>> BufferedReply(std::string_view operation);
  // Flushes the output buffer, then reads until one reply is complete.
  Result<Reply> GetReply(std::string_view operation);
  // A subscriber-mode push: a message to queue, the awaited pong, or a
  // protocol surprise.
  Result<Reply> GetPush(std::string_view operation);

  ConnectionOptions options_;
  std::unique_ptr<internal::Transport> transport_;  // Null when broken.
  redisReader* reader_ = nullptr;                   // Owned; null when broken.
  std::string out_;                                 // Encoded commands not sent yet.
  std::string broken_reason_;                       // Why transport_ is null.
  bool broken_by_timeout_ = false;                  // broken_reason_ is a timeout.
  Duration io_timeout_{};                           // Bounds each wait for the socket.
  std::size_t pending_ = 0;
  std::size_t preferred_sentinel_ = 0;  // Asked first by the next Open().
  bool subscribed_ = false;
  std::deque<PubSubMessage> queued_;                 // Messages read while waiting for a pong.
  std::unique_ptr<internal::ClusterRoute> cluster_;  // Set in cluster mode.
};

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_CONNECTION_H_
