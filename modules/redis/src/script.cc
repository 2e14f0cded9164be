#include "fusebox/redis/script.h"

#include <string>
#include <vector>

#include "src/sha1.h"

namespace fusebox::redis {

Script::Script(std::string body) : body_(std::move(body)), sha1_(internal::Sha1Hex(body_)) {}

Result<Reply> Script::Run(Connection& conn, std::span<const std::string_view> keys,
                          std::span<const std::string_view> args) const {
  const std::string numkeys = std::to_string(keys.size());
  std::vector<std::string_view> argv;
  argv.reserve(3 + keys.size() + args.size());
  argv.push_back("EVALSHA");
  argv.push_back(sha1_);
  argv.push_back(numkeys);
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  Result<Reply> r = conn.Command(argv);
  if (!r) return r;
  if (r->IsErrorCode("NOSCRIPT")) {
    // The server lost its script cache (restart, failover, SCRIPT FLUSH).
    // EVAL runs the script and caches it for the next EVALSHA.
    argv[0] = "EVAL";
    argv[1] = body_;
    r = conn.Command(argv);
    if (!r) return r;
    if (r->is_error()) return conn.ErrorReplyStatus("EVAL", *r);
    return r;
  }
  if (r->is_error()) return conn.ErrorReplyStatus("EVALSHA", *r);
  return r;
}

}  // namespace fusebox::redis
