// CircuitBreaker's state word and per-thread counter slots.
//
// Internal: read by the inline fast paths of fusebox/circuit_breaker.h, so
// shipped with it, but not part of the API.
//
// The state word (CircuitBreaker::word_): the State in bits 0-3
// (kStateMask), flags in bits 4-31 (k*Bit below), the state epoch in bits
// 32-63 (kEpochShift). Every transition starts a new epoch and publishes the
// word under the breaker's lock; the hot paths only read it.
#ifndef FUSEBOX_INTERNAL_CIRCUIT_BREAKER_WORD_H_
#define FUSEBOX_INTERNAL_CIRCUIT_BREAKER_WORD_H_

#include <atomic>
#include <bit>
#include <cstdint>

namespace fusebox::internal {

inline constexpr std::uint64_t kStateMask = 0xF;
inline constexpr int kEpochShift = 32;
// A non-slow success of the current epoch changes nothing (COUNT_BASED window
// full and holding no failure or slow call; no outcome listener): no write.
inline constexpr std::uint64_t kFastSuccessBit = 1u << 4;
// A non-slow success may be counted in the striped success counters
// (TIME_BASED window holding no failure or slow call; no outcome listener).
inline constexpr std::uint64_t kStripedSuccessBit = 1u << 5;
// The current metrics are the half-open probe window's.
inline constexpr std::uint64_t kProbeMetricsBit = 1u << 6;
// Rejections must be reported to listeners.
inline constexpr std::uint64_t kRejectionListenersBit = 1u << 7;
// A non-slow success of the current epoch only needs counting, not ordering:
// COUNT_BASED window full but holding failures or slow calls, no listener. A
// success into a full window can never trip it, and successes applied in a
// batch just before the next locked operation (which applies them first) give
// exactly the ring that applying them one by one gives.
inline constexpr std::uint64_t kDeferSuccessBit = 1u << 8;
// The shared state may know something this breaker does not (it was just
// created, or the store reconnected): the next call re-reads it first. In the
// CLOSED test of TryAcquire() it costs nothing: the same one-instruction mask.
inline constexpr std::uint64_t kSharedStaleBit = 1u << 9;
// A listener wants every outcome, in order: successes take the locked path.
inline constexpr std::uint64_t kOutcomeListenersBit = 1u << 10;
// OutcomeOrder::kRelaxed: a non-slow failure of the current epoch may be
// counted in the thread's own slot, within the allowance the lock holder
// granted that slot (set only together with kDeferSuccessBit).
inline constexpr std::uint64_t kDeferFailureBit = 1u << 11;

// Writer slots of CircuitBreaker's per-thread counters: up to
// kOwnedWriterSlots threads at a time each own one slot index (the same in
// every breaker) and update it with plain loads and stores; further threads
// share the last slot with atomic read-modify-writes. See circuit_breaker.cc.
inline constexpr int kOwnedWriterSlots = 8;
inline constexpr int kSharedWriterSlot = kOwnedWriterSlots;
// This thread's slot, -1 until claimed. Constant-initialized, so reading it
// is a plain TLS load with no initialization guard.
inline thread_local int t_writer_slot = -1;
int ClaimWriterSlot() noexcept;
inline int WriterSlot() noexcept {
  const int slot = t_writer_slot;
  return slot >= 0 ? slot : ClaimWriterSlot();
}
// Adds `n` to a counter of slot `slot`: a plain add for an owned slot.
inline void AddToSlot(std::atomic<std::uint64_t>& counter, int slot, std::uint64_t n) noexcept {
  if (slot != kSharedWriterSlot) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  } else {
    counter.fetch_add(n, std::memory_order_relaxed);
  }
}

// The layout the code relies on (masks, shifts and the 16 low epoch bits
// OutcomeOrder::kRelaxed logs with each failure).
inline constexpr std::uint64_t kAllFlagBits =
    kFastSuccessBit | kStripedSuccessBit | kProbeMetricsBit | kRejectionListenersBit |
    kDeferSuccessBit | kSharedStaleBit | kOutcomeListenersBit | kDeferFailureBit;
static_assert((kAllFlagBits & kStateMask) == 0, "flags above the state bits");
static_assert(kAllFlagBits < (std::uint64_t{1} << kEpochShift), "flags below the epoch");
static_assert(kEpochShift == 32, "the epoch is the word's high 32 bits (EpochOf)");
static_assert(std::popcount(kAllFlagBits) == 8, "each flag a bit of its own");
static_assert(kOwnedWriterSlots < 32,
              "slot ownership is a bit of a 32-bit mask (circuit_breaker.cc)");

}  // namespace fusebox::internal

#endif  // FUSEBOX_INTERNAL_CIRCUIT_BREAKER_WORD_H_
