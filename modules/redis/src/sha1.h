// SHA-1 (FIPS 180-4), only to name Lua scripts for EVALSHA.
//
// Redis identifies a cached script by the SHA-1 of its body. Computing it
// here, rather than asking the server with SCRIPT LOAD, means a Script knows
// its name before any connection exists, the first call is a single EVALSHA,
// and nothing depends on per-server state that a restart or a failover
// silently drops (the NOSCRIPT fallback covers that). SHA-1's weakness to
// chosen-prefix collisions does not matter for naming our own scripts.
//
// Thread-safe: pure functions.
#ifndef FUSEBOX_REDIS_SRC_SHA1_H_
#define FUSEBOX_REDIS_SRC_SHA1_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace fusebox::redis::internal {

std::array<std::uint8_t, 20> Sha1(std::string_view data);

// 40 lower-case hex digits, as Redis prints script SHAs.
std::string Sha1Hex(std::string_view data);

}  // namespace fusebox::redis::internal

#endif  // FUSEBOX_REDIS_SRC_SHA1_H_
