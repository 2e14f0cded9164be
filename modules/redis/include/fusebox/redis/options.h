// fusebox/redis/options.h: where and how to connect to Redis.
//
// ConnectionOptions is a plain struct; ParseRedisUrl() fills one from a URL
// such as "redis://:s3cret@cache.internal:6380/2". The password is a secret:
// it never appears in an error message, in Describe() or in anything this
// module logs.
//
//   fusebox::Result<fusebox::redis::ConnectionOptions> options =
//       fusebox::redis::ParseRedisUrl(std::getenv("REDIS_URL"));
//   if (!options) return options.error();  // names what is wrong, not the password
//   options->command_timeout = std::chrono::milliseconds(50);
//
// Thread-safe: the functions are pure.
#ifndef FUSEBOX_REDIS_OPTIONS_H_
#define FUSEBOX_REDIS_OPTIONS_H_

#include <chrono>
#include <string>
#include <string_view>

#include "fusebox/clock.h"
#include "fusebox/result.h"
#include "fusebox/status.h"

namespace fusebox::redis {

struct ConnectionOptions {
  // Host name or IP address (IPv6 without brackets). Default: "127.0.0.1".
  std::string host = "127.0.0.1";
  // TCP port, 1..65535. Default: 6379.
  int port = 6379;
  // ACL user name (Redis 6+). Empty: AUTH with the password alone, which
  // authenticates as the "default" user. Default: empty.
  std::string username;
  // Password for AUTH. Empty: no AUTH is sent. A secret: never logged.
  // Default: empty.
  std::string password;
  // Database selected with SELECT after connecting, 0..(databases - 1).
  // Default: 0 (no SELECT is sent).
  int db = 0;
  // Bounds the TCP connect, and separately each command of the handshake
  // (AUTH, SELECT). Default: 500 ms.
  Duration connect_timeout = std::chrono::milliseconds(500);
  // Bounds each read and each write of a command's reply (SO_RCVTIMEO and
  // SO_SNDTIMEO): a command against a paused or dead server fails with
  // kUnavailable after about this long. Default: 250 ms, far above a loopback
  // or same-zone round trip (well under 1 ms) and short enough that a caller
  // guarded by its own breaker does not stall.
  Duration command_timeout = std::chrono::milliseconds(250);
  // Sends TCP keepalive probes (hiredis' 15 s interval), so that a peer that
  // vanished without a FIN is noticed on an idle subscriber connection.
  // Default: true.
  bool tcp_keepalive = true;

  // "host:port", for messages.
  std::string Endpoint() const;

  // "redis://[user:***@]host:port/db": safe to log, the password is masked
  // (and a user name alone is shown as "user@").
  std::string Describe() const;

  // Checks the fields: host non-empty, port 1..65535, db >= 0, timeouts > 0.
  // Errors are kInvalidArgument and name the field.
  Status Validate() const;
};

// Parses "redis://[[user]:password@]host[:port][/db][?connect_timeout=D&timeout=D]".
//
// - user and password may be percent-encoded (RFC 3986), so that a password
//   can contain ':', '@' or '/'; "redis://:pw@h" has a password and no user,
//   "redis://user:pw@h" both, "redis://user@h" is rejected (a user needs a
//   password).
// - host is a name, an IPv4 address or a bracketed IPv6 address
//   ("redis://[::1]:6380").
// - port defaults to 6379; db (the path) defaults to 0.
// - "rediss://" (TLS) is rejected: hiredis 0.14, the Debian 12 version, has
//   no TLS. Fragments are rejected rather than ignored.
// - The query may set connect_timeout and timeout (the command timeout), each
//   a positive duration such as 250ms or 2s; any other parameter is
//   rejected. What it leaves out keeps its default, as does keepalive.
//
// Errors are kInvalidArgument and say which part is wrong. They never contain
// the password, not even part of it.
Result<ConnectionOptions> ParseRedisUrl(std::string_view url);

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_OPTIONS_H_
