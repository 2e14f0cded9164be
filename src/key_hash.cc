#include "fusebox/internal/key_hash.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>

#include "fusebox/clock.h"
#include "registry_hash.h"

namespace fusebox::internal {

HashSecret NewHashSecret() noexcept {
  HashSecret secret{};
  unsigned char* const out = reinterpret_cast<unsigned char*>(&secret);
  std::size_t got = 0;
  while (got < sizeof secret) {
    const ssize_t n = getrandom(out + got, sizeof secret - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // no entropy source (an old kernel, a seccomp filter)
    got += static_cast<std::size_t>(n);
  }
  if (got < sizeof secret) {
    // Still not a constant: where this process was loaded, its stack, and
    // the time, mixed. Weaker than getrandom(), but unknown to a client.
    const auto now = static_cast<std::uint64_t>(SystemClock().Now().time_since_epoch().count());
    const auto here = reinterpret_cast<std::uintptr_t>(&NewHashSecret);
    const auto stack = reinterpret_cast<std::uintptr_t>(&secret);
    secret.a ^= Mix(now ^ kK0, static_cast<std::uint64_t>(here) ^ kK1);
    secret.b ^= Mix(static_cast<std::uint64_t>(stack) ^ kK2, secret.a ^ kK3);
  }
  return secret;
}

std::size_t KeyHash::operator()(std::string_view key) const noexcept {
  return static_cast<std::size_t>(HashKey(key));
}

}  // namespace fusebox::internal
