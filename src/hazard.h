// hazard.h: hazard slots with asymmetric barriers, for lock-free readers.
//
// A reader that finds an object through a shared structure and must keep
// using it after the lookup publishes its address in one of its thread's
// hazard slots, runs LightBarrier(), and checks that the structure still
// leads to the object; from then on a writer will not free it. A writer
// first unlinks the object, runs HeavyBarrier(), then looks at every slot
// (CollectHazards()): an address found there is in use. Either the writer
// sees the reader's slot, or the reader sees the unlink: the two barriers
// together are a Dekker handshake (Michael's hazard pointers, 2004).
//
// The heavy barrier is membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) when the
// kernel offers it, so that the light one is only a compiler barrier and a
// lookup writes nothing but its own thread's slot; otherwise both are
// seq_cst fences. EnableAsymmetricBarriers() decides once per process and
// must run before the first reader or writer (Registry::Create() calls it).
//
// Slots are per thread, kHazardsPerThread of them; a thread's record is
// reused by a later thread once it exits. A slot may be cleared from any
// thread (a lent breaker can be given back elsewhere).
#ifndef FUSEBOX_SRC_HAZARD_H_
#define FUSEBOX_SRC_HAZARD_H_

#include <atomic>
#include <cstddef>
#include <vector>

// ThreadSanitizer does not see membarrier: under it both sides use fences.
#if defined(__SANITIZE_THREAD__)
#define FUSEBOX_HAZARD_FENCES_ONLY 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FUSEBOX_HAZARD_FENCES_ONLY 1
#endif
#endif

namespace fusebox::internal {

inline constexpr std::size_t kHazardsPerThread = 4;

using HazardSlot = std::atomic<const void*>;

// Whether the heavy barrier is membarrier (read by the light barrier).
extern std::atomic<bool> asymmetric_barriers;

// Decides the barrier flavour (once; later calls return the first answer).
bool EnableAsymmetricBarriers() noexcept;

// One thread's slots, on a cache line of their own: a lookup writes only
// here. Records are never freed; a thread that exits gives its record back.
struct alignas(64) ThreadRecord {
  HazardSlot slots[kHazardsPerThread] = {};
  std::atomic<bool> owned{true};
  ThreadRecord* next = nullptr;  // set before the record is published
};

// The calling thread's record, or nullptr before its first lookup.
// constinit: reading it needs no TLS guard or wrapper call.
extern constinit thread_local ThreadRecord* this_thread_record;

// Gives the calling thread a record (its first lookup).
ThreadRecord& AttachThisThread();

// A free slot of the calling thread, or nullptr when all are taken. The
// caller stores into it at once (only this thread fills its slots).
inline HazardSlot* FreeHazardSlot() {
  ThreadRecord* r = this_thread_record;
  if (r == nullptr) [[unlikely]]
    r = &AttachThisThread();
  for (HazardSlot& s : r->slots) {
    if (s.load(std::memory_order_relaxed) == nullptr) return &s;
  }
  return nullptr;
}

// Two free slots of the calling thread, or false (neither filled) when
// fewer than two are free. The caller stores into both at once.
inline bool FreeHazardSlots(HazardSlot*& first, HazardSlot*& second) {
  ThreadRecord* r = this_thread_record;
  if (r == nullptr) [[unlikely]]
    r = &AttachThisThread();
  HazardSlot* found = nullptr;
  for (HazardSlot& s : r->slots) {
    if (s.load(std::memory_order_relaxed) != nullptr) continue;
    if (found != nullptr) {
      first = found;
      second = &s;
      return true;
    }
    found = &s;
  }
  return false;
}

inline void LightBarrier() noexcept {
#if defined(FUSEBOX_HAZARD_FENCES_ONLY)
  std::atomic_thread_fence(std::memory_order_seq_cst);
#else
  if (asymmetric_barriers.load(std::memory_order_relaxed)) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
#endif
}

void HeavyBarrier() noexcept;

// Every address held in any thread's slots, sorted (for binary_search).
void CollectHazards(std::vector<const void*>& out);

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_HAZARD_H_
