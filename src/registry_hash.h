// registry_hash.h: the registry's key hash and key compare, inline so that a
// hit hashes, probes and compares in one frame (Registry::Borrow()).
#ifndef FUSEBOX_SRC_REGISTRY_HASH_H_
#define FUSEBOX_SRC_REGISTRY_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace fusebox::internal {

inline std::uint64_t Load64(const unsigned char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline std::uint64_t Load32(const unsigned char* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// 64x64 -> 128 multiply, folded: wyhash's mixing step.
__extension__ typedef unsigned __int128 U128;
inline std::uint64_t Mix(std::uint64_t a, std::uint64_t b) noexcept {
  const U128 r = static_cast<U128>(a) * b;
  return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
}

// Whether n bytes are equal, without a call for the keys the registry holds
// (a probe compares bytes only after a 64-bit hash match, so they almost
// always are): 8 bytes a step, the last 8 overlapping.
[[gnu::always_inline]] inline bool SameBytes(const char* a, const char* b, std::size_t n) noexcept {
  if (n < 8) return std::memcmp(a, b, n) == 0;
  const auto* p = reinterpret_cast<const unsigned char*>(a);
  const auto* q = reinterpret_cast<const unsigned char*>(b);
  std::uint64_t diff = Load64(p + n - 8) ^ Load64(q + n - 8);
  for (std::size_t i = 0; i + 8 < n; i += 8) diff |= Load64(p + i) ^ Load64(q + i);
  return diff == 0;
}

inline constexpr std::uint64_t kK0 = 0xa0761d6478bd642full;
inline constexpr std::uint64_t kK1 = 0xe7037ed1a0b428dbull;
inline constexpr std::uint64_t kK2 = 0x8ebc6af09c88c6e3ull;
inline constexpr std::uint64_t kK3 = 0x589965cc75374cc3ull;

// The key of the hash: two words that no one outside the process knows.
// Keys come from outside (a subject in a request), and with a hash anyone
// can compute, a client can pick keys that share their low bits and pile
// them into one probe run: every lookup among them then walks the run
// (1,000 such keys: 340 ns a hit instead of 19 ns; docs/performance.md).
// With the secret in both operands of every multiply, no key can zero an
// operand or swap two without knowing it.
struct HashSecret {
  std::uint64_t a;
  std::uint64_t b;
};

// Fresh random words (getrandom(2); the clock and addresses if that fails).
HashSecret NewHashSecret() noexcept;

// This process's secret: chosen once, on first use, so that every hash of
// the process (a RegistryKey's, a registry's) agrees.
inline const HashSecret& ProcessHashSecret() noexcept {
  static const HashSecret kSecret = NewHashSecret();
  return kSecret;
}

// Keys of up to 48 bytes (seed 000's "provider:workload:subject" keys are
// 30-45) are hashed in at most three independent lanes of 16 bytes and one
// final fold: two multiplies deep, not one per 16 bytes in a chain. Longer keys
// go 48 bytes a step, then the last 48 (overlapping: fine for a hash).
[[gnu::always_inline]] inline std::uint64_t HashKey(std::string_view key,
                                                    const HashSecret& secret) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  const std::size_t size = key.size();
  const std::uint64_t seed = secret.b ^ (static_cast<std::uint64_t>(size) * kK1);
  const std::uint64_t k1 = secret.a ^ kK1;
  const std::uint64_t k2 = secret.a ^ kK2;
  const std::uint64_t k3 = secret.a ^ kK3;
  if (size <= 16) {
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    if (size >= 8) {
      a = Load64(p);
      b = Load64(p + size - 8);
    } else if (size >= 4) {
      a = Load32(p);
      b = Load32(p + size - 4);
    } else if (size > 0) {
      a = (std::uint64_t{p[0]} << 16) | (std::uint64_t{p[size / 2]} << 8) | p[size - 1];
    }
    return Mix(Mix(a ^ k1, b ^ seed) ^ k2, static_cast<std::uint64_t>(size) ^ secret.b ^ kK0);
  }
  const unsigned char* const end = p + size;
  std::uint64_t h0 = seed;
  std::uint64_t h1 = seed ^ kK2;
  std::uint64_t h2 = seed ^ kK3;
  if (size > 48) {
    for (; end - p > 48; p += 48) {
      h0 = Mix(Load64(p) ^ k1, Load64(p + 8) ^ h0);
      h1 = Mix(Load64(p + 16) ^ k2, Load64(p + 24) ^ h1);
      h2 = Mix(Load64(p + 32) ^ k3, Load64(p + 40) ^ h2);
    }
    p = end - 48;
    h0 = Mix(Load64(p) ^ k1, Load64(p + 8) ^ h0);
    h1 = Mix(Load64(p + 16) ^ k2, Load64(p + 24) ^ h1);
    h2 = Mix(Load64(p + 32) ^ k3, Load64(p + 40) ^ h2);
  } else {
    h0 = Mix(Load64(p) ^ k1, Load64(p + 8) ^ h0);
    h1 = Mix(Load64(end - 16) ^ k2, Load64(end - 8) ^ h1);
    if (size > 32) h2 = Mix(Load64(p + 16) ^ k3, Load64(p + 24) ^ h2);
  }
  return Mix(h0 ^ h2 ^ k2, h1 ^ static_cast<std::uint64_t>(size) ^ kK0);
}

// The hash every key of this process gets.
[[gnu::always_inline]] inline std::uint64_t HashKey(std::string_view key) noexcept {
  return HashKey(key, ProcessHashSecret());
}

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_REGISTRY_HASH_H_
