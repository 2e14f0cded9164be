// fusebox/call_kind.h: CallKind, whether a protected call reads or writes.
//
// Fallback (fallback.h) and StaleIfErrorReader (stale_cache.h) both decide by
// it: a degraded or stale answer may stand in for a read, never silently for
// a write. Defined once, here, so that both headers can be included together.
//
// Thread-safe: a plain enum and a pure function.
#ifndef FUSEBOX_CALL_KIND_H_
#define FUSEBOX_CALL_KIND_H_

#include <cstdint>
#include <string_view>

namespace fusebox {

// What a protected call does to the dependency.
enum class CallKind : std::uint8_t {
  // Reads, changes nothing: a degraded answer is a product decision.
  kRead,
  // Changes something: a fabricated answer is a lie unless designed as one.
  kWrite,
};

// "read", "write".
std::string_view CallKindName(CallKind kind) noexcept;

}  // namespace fusebox

#endif  // FUSEBOX_CALL_KIND_H_
