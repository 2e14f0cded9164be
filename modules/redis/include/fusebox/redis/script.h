// fusebox/redis/script.h: a Lua script run with EVALSHA, falling back to EVAL.
//
// Redis caches scripts by the SHA-1 of their body. The cache is empty after a
// restart, a failover to a replica and SCRIPT FLUSH, and EVALSHA then fails
// with NOSCRIPT. Script::Run() sends EVALSHA (the body is not resent on every
// call) and, on NOSCRIPT only, sends EVAL once, which runs the script and
// caches it again. A script must therefore be safe to run again after a
// NOSCRIPT reply, which it is: NOSCRIPT means it did not run at all.
//
// The SHA-1 is computed in C++ at construction (src/sha1.h says why, tested
// against the FIPS 180 vectors and against SCRIPT LOAD on a real server).
//
//   static const fusebox::redis::Script kGetOrZero(
//       "return tonumber(redis.call('GET', KEYS[1]) or '0')");
//   fusebox::Result<fusebox::redis::Reply> r = kGetOrZero.Run(conn, {key}, {});
//
// Thread-safe: a Script is immutable; Run() uses only the given Connection
// (which is not thread-safe itself).
#ifndef FUSEBOX_REDIS_SCRIPT_H_
#define FUSEBOX_REDIS_SCRIPT_H_

#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "fusebox/redis/connection.h"
#include "fusebox/redis/reply.h"
#include "fusebox/result.h"

namespace fusebox::redis {

class Script {
 public:
  explicit Script(std::string body);

  const std::string& body() const { return body_; }
  // 40 lower-case hex digits.
  const std::string& sha1() const { return sha1_; }

  // EVALSHA sha1 len(keys) keys... args...; on NOSCRIPT, EVAL body with the
  // same keys and args. Every key the script touches must be in `keys` (Redis
  // Cluster routes and checks by them). A Redis error reply, including a
  // runtime error of the script, becomes a Status (see
  // Connection::ErrorReplyStatus); connection failures are kUnavailable.
  Result<Reply> Run(Connection& conn, std::span<const std::string_view> keys,
                    std::span<const std::string_view> args) const;
  Result<Reply> Run(Connection& conn, std::initializer_list<std::string_view> keys,
                    std::initializer_list<std::string_view> args) const {
    return Run(conn, std::span<const std::string_view>(keys.begin(), keys.size()),
               std::span<const std::string_view>(args.begin(), args.size()));
  }

 private:
  std::string body_;
  std::string sha1_;
};

}  // namespace fusebox::redis

#endif  // FUSEBOX_REDIS_SCRIPT_H_
