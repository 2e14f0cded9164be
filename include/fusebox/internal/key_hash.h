// KeyHash: the hash for containers keyed by strings that come from outside
// (subjects, cache keys, breaker names), keyed by a secret chosen at random
// when the process starts.
//
// std::hash<std::string> is one fixed function that anyone can compute, so a
// client that picks its keys can put thousands of them in one bucket, and
// every lookup among them then walks the whole chain (hash flooding). KeyHash
// is the registry's hash (src/registry_hash.h) keyed by this process's
// secret: the same key hashes alike within a process and differently in the
// next one. Transparent: a map keyed by std::string finds by
// std::string_view without building a string (with std::equal_to<>).
//
// Thread-safe.
//
// Internal: shipped because public headers use it, but not part of the API.
#ifndef FUSEBOX_INTERNAL_KEY_HASH_H_
#define FUSEBOX_INTERNAL_KEY_HASH_H_

#include <cstddef>
#include <string_view>

namespace fusebox::internal {

struct KeyHash {
  using is_transparent = void;  // NOLINT(readability-identifier-naming): the standard's name
  std::size_t operator()(std::string_view key) const noexcept;
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_INTERNAL_KEY_HASH_H_
