// registry_race.h: what the registry's race tests share: the writers and
// lookups a thread mixes in, and what counts as a wrong answer.
#ifndef FUSEBOX_SRC_REGISTRY_RACE_H_
#define FUSEBOX_SRC_REGISTRY_RACE_H_

#include <atomic>
#include <memory>
#include <string>

#include "fusebox/registry.h"

namespace fusebox::testing {

// Whether a Get answered with the key's breaker or the overflow breaker.
inline bool IsKeysBreaker(const Result<std::shared_ptr<CircuitBreaker>>& b,
                          const std::string& key) {
  return b && ((*b)->name() == key || (*b)->name() == "overflow:default");
}

// The same for a borrow.
inline bool IsKeysBreaker(const Result<BorrowedBreaker>& b, const std::string& key) {
  return b && ((*b)->name() == key || (*b)->name() == "overflow:default");
}

// For op in [0, 100) past a test's own operations: Find (below 85), Remove
// (below 97) or Sweep; a Find that answers another key's breaker is wrong.
inline void FindRemoveOrSweep(Registry& registry, const std::string& key, unsigned op,
                              std::atomic<int>& wrong) {
  if (op < 85) {
    std::shared_ptr<CircuitBreaker> b = registry.Find(key);
    if (b && b->name() != key) ++wrong;
  } else if (op < 97) {
    registry.Remove(key);
  } else {
    registry.Sweep();
  }
}

}  // namespace fusebox::testing

#endif  // FUSEBOX_SRC_REGISTRY_RACE_H_
