// OutcomeOrder::kRelaxed: failures counted without the breaker's lock.
//
// With OutcomeOrder::kRelaxed, a non-slow failure into CLOSED's full
// COUNT_BASED window may be counted by its thread in a log of that thread's
// own (one per owned writer slot), within an allowance granted under the
// breaker's lock, and applied to the window later, under the lock, by the next
// thread that folds. This class owns the atomics of that protocol and every
// memory order on them; the breaker's Core (circuit_breaker_relaxed.cc) owns
// the window arithmetic around it: how large an allowance may be, and what
// applying a failure does.
//
// The protocol, stated once. "The lock" is the breaker's Core::mu; "the owner"
// of slot i is the one thread that holds writer slot i
// (internal::WriterSlot()); "the word" is CircuitBreaker::word_.
//
//  1. An allowance is a promise about the window, not about time: while the
//     word carries kDeferFailureBit for epoch E, the failures granted and not
//     yet applied, over all slots, cannot together bring CLOSED's window of
//     epoch E to the failure-rate threshold, each replacing a success
//     (Core::GrantLocked()). So a failure counted within its allowance never
//     trips the window, and every trip is decided under the lock, by the
//     failure that crosses.
//  2. Each logged failure is applied exactly once, and under the lock: slot
//     i's failures are applied in count order, and the lock holder's
//     slot_folds[i].failures_applied is the number applied so far. It is
//     advanced before the failure is applied (a transition the failure
//     causes folds again and must not apply it twice).
//  3. A slot's failures enter among its own successes where its thread
//     reported them: entry n holds the slot's deferred-success count when
//     failure n was counted (its place). A fold reads the successes (acquire)
//     before the failure count (seq_cst), applies the successes before each
//     failure's place, then the failure, and leaves a failure whose place lies
//     beyond the successes it read for the next fold. Different slots'
//     outcomes enter in slot order: their threads reported them concurrently.
//  4. The two-sided store-then-load handshake (Dekker): the owner stores its
//     count, then loads the word and the withdrawal count; a withdrawing lock
//     holder stores the withdrawal count and the word, then loads every count.
//     All four are seq_cst, so at least one side sees the other's store:
//     either the withdrawal's fold applies the failure (and decides on it,
//     as its own call would have), or the owner sees the withdrawal and
//     settles the failure under the lock itself (Core::SettleDeferred()).
//     Both seeing each other is harmless: invariant 2.
//  5. The withdrawal counter rules out ABA: an owner that read its limit
//     before a withdrawal, and counts after a new grant has published a word
//     identical to the one it read (same state, same epoch, kDeferFailureBit
//     set again), sees the counter moved and settles. Without it, the failure
//     would ride on an allowance that no longer exists, outside invariant 1
//     (commit 06781ce; CircuitBreakerRelaxedRace.AbaRegrant... in
//     src/relaxed_outcome_log_test.cc).
//  6. A withdrawal sets every limit to 0 before the word changes; a grant
//     (under the lock) raises only the granting thread's own limit. So a
//     limit an owner reads is never larger than the allowance of the latest
//     grant it could have been written by, until the next withdrawal, which
//     invariant 5 catches.
//
// Shared variables and their memory orders:
//
//   variable                 writer           order   why
//   ------------------------ ---------------- ------- -------------------------------
//   Slot::entry[k]           owner            relaxed published by the count store after it
//   Slot::count              owner (store)    seq_cst owner's half of the handshake (4); it
//                                                     also releases the entries and the
//                                                     slot's successes written before it
//   Slot::count              fold (load)      seq_cst lock holder's half of the handshake (4)
//   limits_[i]               lock holder      relaxed read by the owner only to decide whether
//                                                     to count; a stale value is caught by (4)
//                                                     and (5), never trusted alone
//   withdrawals_             lock holder      seq_cst store: before the word, part of (4);
//                                                     owner's first load acquire (the limit it
//                                                     reads next is at least as new), second
//                                                     load seq_cst, part of (4)
//   word (CircuitBreaker)    lock holder      seq_cst on a withdrawal (4); release otherwise
//   slot successes (counters_[i].successes)   release by the owner, acquire by the fold (3)
//
// Test-only interleaving points (RelaxedLogHook) sit where another thread's
// withdrawal or grant changes the outcome: after the owner read its
// allowance, and after it stored its count. They are a null function pointer
// in production: one predictable branch on the deferred-failure path.
//
// Thread-safe as described above; the "lock holder" methods require the
// breaker's lock.
#ifndef FUSEBOX_SRC_RELAXED_OUTCOME_LOG_H_
#define FUSEBOX_SRC_RELAXED_OUTCOME_LOG_H_

#include <atomic>
#include <cstdint>

#include "fusebox/circuit_breaker.h"

namespace fusebox::internal {

// Where a test may stop the owner of a slot (see the protocol above).
enum class RelaxedLogPoint : std::uint8_t {
  // The owner read the withdrawal count and its limit and is within its
  // allowance; it has written nothing yet.
  kAllowanceRead,
  // The owner stored its count; it has not yet read the word back.
  kCounted,
};
using RelaxedLogHook = void (*)(RelaxedLogPoint point);
// Null except in tests.
inline std::atomic<RelaxedLogHook> g_relaxed_log_hook{nullptr};

class RelaxedOutcomeLog {
 public:
  // Failures a slot may have counted and not yet applied: its allowance is
  // capped at this, so that entries are never overwritten before a fold.
  static constexpr int kEntries = 31;
  static constexpr int kSlots = kOwnedWriterSlots;
  // An entry: the place (low 48 bits of the slot's deferred-success count)
  // << 16 | the low 16 bits of the state epoch.
  static constexpr int kEpochBits = 16;
  static constexpr int kPositionBits = 48;
  static constexpr std::uint64_t kEpochLowMask = (std::uint64_t{1} << kEpochBits) - 1;
  static constexpr std::uint64_t kPositionMask = (std::uint64_t{1} << kPositionBits) - 1;

  static_assert(kPositionBits + kEpochBits == 64, "an entry is one 64-bit word");
  static_assert(kEntries >= 1 && kEntries <= 31,
                "an allowance (<= kEntries) must fit the log without overwriting an entry");
  // The epoch compared against an entry is the word's epoch field.
  static_assert(kEpochShift + 32 == 64, "the word's epoch is its high 32 bits");

  // --- The owner's side, without the lock ---

  enum class Counted : std::uint8_t {
    // No allowance left (or none granted): take the lock.
    kNoAllowance,
    // Counted; the next fold applies it.
    kCounted,
    // Counted, but the allowance was withdrawn meanwhile (protocol 4 and 5):
    // the caller must settle it under the lock now.
    kUnsettled,
  };

  // Counts a failure of slot `slot`'s owner, reported with the word `word`
  // (which carried kDeferFailureBit), at the place `successes` (the slot's
  // deferred-success counter) says. `state_word` is the breaker's word.
  Counted Count(int slot, const std::atomic<std::uint64_t>& successes, std::uint64_t word,
                const std::atomic<std::uint64_t>& state_word) noexcept {
    Slot& s = slots_[slot];
    // Acquire: the limit read below is at least as new as this count.
    const std::uint64_t withdrawals = withdrawals_.load(std::memory_order_acquire);
    const std::uint64_t n = s.count.load(std::memory_order_relaxed);
    if (n >= limits_[slot].value.load(std::memory_order_relaxed)) return Counted::kNoAllowance;
    Hook(RelaxedLogPoint::kAllowanceRead);
    const std::uint64_t position = successes.load(std::memory_order_relaxed);
    s.entry[n % kEntries].store(
        ((position & kPositionMask) << kEpochBits) | (Epoch(word) & kEpochLowMask),
        std::memory_order_relaxed);
    // seq_cst store, then seq_cst loads of the word and the withdrawal count:
    // the owner's half of the handshake (protocol 4); the count catches a
    // withdrawal since the limit was read that a new grant has hidden from
    // the word (protocol 5).
    s.count.store(n + 1, std::memory_order_seq_cst);
    Hook(RelaxedLogPoint::kCounted);
    const std::uint64_t now = state_word.load(std::memory_order_seq_cst);
    if ((now & kDeferFailureBit) && Epoch(now) == Epoch(word) &&
        withdrawals_.load(std::memory_order_seq_cst) == withdrawals) {
      return Counted::kCounted;
    }
    return Counted::kUnsettled;
  }

  // --- The lock holder's side (the breaker's lock held) ---

  // Slot `slot` may count failure number n only while n < limit. The lock
  // holder keeps its own copy of every slot's limit (Core::slot_folds) and
  // never reads these back.
  void SetLimit(int slot, std::uint64_t limit) noexcept {
    limits_[slot].value.store(limit, std::memory_order_relaxed);
  }

  // Withdraws every allowance and publishes `word` (without
  // kDeferFailureBit, or of a new epoch): the lock holder's stores of the
  // handshake (protocol 4). The caller then folds every slot (Snapshot()).
  void WithdrawAndPublish(std::atomic<std::uint64_t>& state_word, std::uint64_t word) noexcept {
    for (LimitLine& limit : limits_) limit.value.store(0, std::memory_order_relaxed);
    withdrawals_.store(withdrawals_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
    state_word.store(word, std::memory_order_seq_cst);
  }

  // What a fold of slot `slot` may apply: the slot's deferred successes and
  // the failures counted before them (protocol 3).
  struct Snapshot {
    std::uint64_t successes = 0;
    std::uint64_t failures = 0;
  };
  Snapshot Read(int slot, const std::atomic<std::uint64_t>& successes) const noexcept {
    Snapshot snap;
    snap.successes = successes.load(std::memory_order_acquire);
    // seq_cst: the lock holder's load of the handshake (protocol 4); a plain
    // load on x86.
    snap.failures = slots_[slot].count.load(std::memory_order_seq_cst);
    return snap;
  }

  // Failure number `n` of slot `slot`: its place among the slot's successes
  // (rebuilt from 48 bits, given that `applied_successes` are already in the
  // window and the place is not before them) and the low bits of its epoch.
  struct Failure {
    std::uint64_t place = 0;
    std::uint64_t epoch_low = 0;
  };
  Failure Entry(int slot, std::uint64_t n, std::uint64_t applied_successes) const noexcept {
    const std::uint64_t e = slots_[slot].entry[n % kEntries].load(std::memory_order_relaxed);
    return Failure{applied_successes + (((e >> kEpochBits) - applied_successes) & kPositionMask),
                   e & kEpochLowMask};
  }

  static std::uint64_t EpochLow(std::uint64_t word) noexcept { return Epoch(word) & kEpochLowMask; }

 private:
  static std::uint64_t Epoch(std::uint64_t word) noexcept { return word >> kEpochShift; }

  static void Hook(RelaxedLogPoint point) noexcept {
    if (const RelaxedLogHook hook = g_relaxed_log_hook.load(std::memory_order_relaxed))
        [[unlikely]] {
      hook(point);
    }
  }

  // Written only by the slot's owner, on lines of their own: the owner keeps
  // them in its cache, and other threads read them only when they fold.
  struct alignas(64) Slot {
    // Failures counted so far.
    std::atomic<std::uint64_t> count{0};
    // Failure n at entry[n % kEntries].
    std::atomic<std::uint64_t> entry[kEntries] = {};
  };
  static_assert(sizeof(Slot) == 256, "count + 31 entries: four cache lines exactly");

  Slot slots_[kSlots];
  // Slot i's limit, read by its owner on every deferred failure and written
  // under the lock by its owner's own grants (GrantLocked() raises only the
  // granting thread's) and by withdrawals; no other thread reads it (the
  // lock holder has its copy). So each on a line of its own, apart from the
  // slots (the fold reads those): in steady state the owner's copy of the
  // line stays valid. With one line for all limits, each grant took the line
  // from the other core and the other thread's next failure took it back
  // (docs/performance.md, "Three lines a grant").
  struct alignas(64) LimitLine {
    std::atomic<std::uint64_t> value{0};
  };
  static_assert(sizeof(LimitLine) == 64, "a limit per cache line");
  LimitLine limits_[kSlots];
  std::atomic<std::uint64_t> withdrawals_{0};
  [[maybe_unused]] char pad_after_withdrawals_[64 - sizeof(std::atomic<std::uint64_t>)] = {};
};

}  // namespace fusebox::internal

#endif  // FUSEBOX_SRC_RELAXED_OUTCOME_LOG_H_
