// OutcomeOrder::kRelaxed, the lock holder's side: how large an allowance may
// be, and how logged failures enter the window. The protocol itself (its
// invariants, numbered below as "invariant N", and every memory order) is
// stated once, in relaxed_outcome_log.h.
#include <algorithm>
#include <cstdint>

#include "circuit_breaker_core.h"

namespace fusebox {

using cb_internal::kOwnedSlots;
using cb_internal::kSharedSlot;
using cb_internal::RatePercent;
using cb_internal::SecondOf;
using internal::RelaxedOutcomeLog;

namespace {

// Bits set in a byte, without the library call std::popcount() becomes on the
// baseline x86-64 target (no POPCNT): GrantLocked() runs under the lock.
int BitsSet(std::uint32_t x) {
  x = x - ((x >> 1) & 0x55u);
  x = (x & 0x33u) + ((x >> 2) & 0x33u);
  return static_cast<int>((x + (x >> 4)) & 0x0Fu);
}

}  // namespace

// A fast failure into CLOSED's full COUNT_BASED window: counted in this
// thread's own slot, within the allowance the last lock holder granted it
// (GrantLocked()), so that it writes nothing another core reads until the
// next fold. Without an allowance left it takes the lock (RecordGeneral()),
// which grants the next one.
bool CircuitBreaker::DeferFailureToLog(std::uint64_t word) noexcept {
  const int slot = internal::WriterSlot();
  if (slot == kSharedSlot) return false;  // Shared by threads: no log.
  switch (relaxed_log_->Count(slot, counters_[slot].successes, word, word_)) {
    case RelaxedOutcomeLog::Counted::kNoAllowance:
      return false;
    case RelaxedOutcomeLog::Counted::kCounted:
      return true;
    case RelaxedOutcomeLog::Counted::kUnsettled:
      break;
  }
  core_->SettleDeferred();
  return true;
}

// A thread that counted a failure without the lock and then found the
// allowance withdrawn makes sure it is in the window and decided on
// (invariant 4).
void CircuitBreaker::Core::SettleDeferred() {
  {
    internal::SpinMutexLock lock(&mu);
    const std::int64_t second = SecondOf(cb.clock_.CoarseNow());
    FoldSlotsLocked(second, /*decide=*/true);
    Republish(second);
  }
  Dispatch();
}

// Brings in each owned slot's deferred successes and failures in that slot's
// order (different slots' in slot order: their threads reported them
// concurrently), then the shared slot's successes. Returns how many failures
// it applied.
//
// Within their allowances deferred failures cannot trip the window
// (invariant 1). Only after a withdrawal can one reach the threshold (an
// allowance outgrown, or a failure counted as it was withdrawn); then the fold
// that applies it must decide there and then, as its own call would have.
// `decide`: this fold trips the breaker at that failure, and the failures
// after it go in after the transition. Otherwise it leaves such a failure
// (and what its thread reported after it) for a deciding fold: the
// withdrawal's, or its own thread's (SettleDeferred()).
int CircuitBreaker::Core::FoldSlotsLocked(std::int64_t second, bool decide) {
  int failures = 0;
  for (int i = 0; i < kOwnedSlots; ++i) failures += FoldSlotLocked(i, second, decide);
  const std::uint64_t shared_slot =
      cb.counters_[kSharedSlot].successes.load(std::memory_order_relaxed);
  if (shared_slot > successes_applied) {
    AddDeferredSuccessesLocked(shared_slot - successes_applied);
    successes_applied = shared_slot;
  }
  return failures;
}

// FoldSlotsLocked() for owned slot `i` alone (invariants 2 and 3).
int CircuitBreaker::Core::FoldSlotLocked(int i, std::int64_t second, bool decide) {
  int failures = 0;
  const RelaxedOutcomeLog::Snapshot snap = log().Read(i, cb.counters_[i].successes);
  if (!decide) {
    const int bulk = FoldSlotInBulkLocked(i, snap, second);
    if (bulk >= 0) return bulk;
  }
  std::uint64_t& done = slot_folds[i].successes_applied;
  std::uint64_t& next = slot_folds[i].failures_applied;
  while (next < snap.failures) {
    const RelaxedOutcomeLog::Failure f = log().Entry(i, next, done);
    if (f.place > snap.successes) break;
    AddDeferredSuccessesLocked(f.place - done);
    done = f.place;
    // Held: the thread's later successes stay behind its failure.
    if (hold_deferred_failures) return failures;
    const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
    const bool current =
        StateOf(word) == State::kClosed && RelaxedOutcomeLog::EpochLow(word) == f.epoch_low;
    if (current && !decide && ReachesThresholdLocked(second)) return failures;
    // Counted as applied first: a transition it causes folds again.
    ++next;
    ApplyDeferredFailureLocked(second, f.epoch_low);
    ++failures;
    if (current && decide) CheckClosedLocked(second, /*failed=*/true);
  }
  if (snap.successes > done) {
    AddDeferredSuccessesLocked(snap.successes - done);
    done = snap.successes;
  }
  return failures;
}

// FoldSlotLocked()'s common case in one pass over the window: the slot's
// failures are all of CLOSED's current epoch, nothing holds them back, and
// even if no success evicted a failure none of them could reach the
// threshold, so the replay would neither stop nor decide at any of them.
// Then only the window's end state matters, which the window builds at once
// (a thread's allowance brings a ring's worth of outcomes or more). Returns
// the failures applied, or -1 if the slot needs the replay.
int CircuitBreaker::Core::FoldSlotInBulkLocked(int i, const RelaxedOutcomeLog::Snapshot& snap,
                                               std::int64_t second) {
  std::uint64_t& done = slot_folds[i].successes_applied;
  std::uint64_t& next = slot_folds[i].failures_applied;
  const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
  if (hold_deferred_failures || StateOf(word) != State::kClosed ||
      closed_window.type() != SlidingWindowType::kCountBased || !closed_window.full() ||
      snap.failures <= next || snap.failures - next > RelaxedOutcomeLog::kEntries) {
    return -1;
  }
  // Successes before each failure, in the slot's order (invariant 3).
  std::uint64_t before[RelaxedOutcomeLog::kEntries];
  int n = 0;
  std::uint64_t place = done;
  for (; next + static_cast<std::uint64_t>(n) < snap.failures; ++n) {
    const RelaxedOutcomeLog::Failure f = log().Entry(i, next + n, place);
    if (f.place > snap.successes) break;
    if (f.epoch_low != RelaxedOutcomeLog::EpochLow(word)) return -1;  // Late: replayed.
    before[n] = f.place - place;
    place = f.place;
  }
  // The replay asks ReachesThresholdLocked() before each failure, of a full
  // window holding at most `n - 1` more failures than now.
  const internal::WindowTotals& t = closed_window.Totals(second);
  if (n == 0 || RatePercent(t.failed + n, t.calls) >= cb.config_.failure_rate_threshold) {
    return -1;
  }
  const std::uint64_t after = snap.successes - place;
  closed_window.RecordFailuresAmongSuccesses({before, static_cast<std::size_t>(n)}, after);
  // As AddDeferredSuccessesLocked() and ApplyDeferredFailureLocked() count.
  for (int k = 0; k < n; ++k) consecutive_failures = before[k] > 0 ? 1 : consecutive_failures + 1;
  if (after > 0) consecutive_failures = 0;
  done = snap.successes;
  next += static_cast<std::uint64_t>(n);  // Invariant 2: each applied once.
  return n;
}

// Before a fast failure recorded under the lock (its thread's allowance is
// used up): its own thread's outcomes must go in first; other threads' may go
// in later, as they would had they reported just after it, unless this
// failure could trip the window, which then decides with every outcome
// reported so far. So the common case reads no line another thread writes.
void CircuitBreaker::Core::FoldForFailureLocked(std::int64_t second) {
  const int self = internal::t_writer_slot;
  if (self >= 0 && self < kOwnedSlots) {
    FoldSlotLocked(self, second, /*decide=*/false);
    if (!ReachesThresholdLocked(second)) return;
  }
  FoldSlotsLocked(second, /*decide=*/false);
}

// Whether one more failure, replacing a success, would bring CLOSED's full
// window to the failure-rate threshold.
bool CircuitBreaker::Core::ReachesThresholdLocked(std::int64_t second) {
  const internal::WindowTotals& t = closed_window.Totals(second);
  return RatePercent(t.failed + 1, t.calls) >= cb.config_.failure_rate_threshold;
}

// A failure counted without the lock, of the state epoch whose low bits are
// `epoch_low`. Normally CLOSED's current epoch, within an allowance: it cannot
// trip the window. One that raced a transition is late: kDefault counts it
// as such; kResilience4j records it into the current metrics, as
// Resilience4j records an outcome reported after a transition (not into a
// half-open verdict: it is no probe).
void CircuitBreaker::Core::ApplyDeferredFailureLocked(std::int64_t second,
                                                      std::uint64_t epoch_low) {
  const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
  const State state = StateOf(word);
  if (state == State::kClosed && RelaxedOutcomeLog::EpochLow(word) == epoch_low) {
    closed_window.Record(second, /*failed=*/true, /*slow=*/false);
    ++consecutive_failures;
    return;
  }
  if (!cb.resilience4j_) {
    ++late_outcomes;
    return;
  }
  if (state == State::kClosed || state == State::kMetricsOnly || state == State::kForcedClosed ||
      state == State::kOpen) {
    MetricsWindowLocked(word).Record(second, /*failed=*/true, /*slow=*/false);
  } else {
    ++late_outcomes;
  }
}

// Whether failures may be counted without the lock now, into CLOSED's full
// COUNT_BASED window with totals `t`; grants the calling thread's slot its
// share. The allowances outstanding (granted and not yet applied, counted or
// not) never exceed the failures that could join the window, each replacing
// a success, without reaching the failure-rate threshold (invariant 1).
bool CircuitBreaker::Core::GrantLocked(const internal::WindowTotals& t) {
  constexpr int kEntries = RelaxedOutcomeLog::kEntries;
  const std::int64_t room = AllowanceLocked(t, std::int64_t{kOwnedSlots} * kEntries);
  const int self = internal::t_writer_slot;
  std::int64_t others = 0;
  std::int64_t mine = 0;
  const bool owned = self >= 0 && self < kOwnedSlots;
  if (owned) allowance_seekers |= static_cast<std::uint8_t>(1u << self);
  // The slots that share the room: those holding an allowance, and those
  // that sought one since the last withdrawal (a thread that found nothing
  // free must get its share at the others' next grants, not starve).
  std::uint32_t sharing = allowance_seekers;
  for (int i = 0; i < kOwnedSlots; ++i) {
    const std::uint64_t limit = slot_folds[i].limit;
    const std::uint64_t applied = slot_folds[i].failures_applied;
    const std::int64_t out = limit > applied ? static_cast<std::int64_t>(limit - applied) : 0;
    if (i == self) {
      mine = out;
    } else {
      others += out;
      if (out > 0) sharing |= std::uint32_t{1} << i;
    }
  }
  if (others + mine > room) return false;  // Over-granted: withdraw them all.
  if (owned) {
    // An equal share of the room among the sharing slots, and never fewer
    // than two (a thread alone leaves half for the next to come); never less
    // than it had, never more than is free (room - others >= mine). A thread
    // takes the lock again when its share is used up, and the others' shares
    // then still count in full (their failures are not in the window until
    // their own next fold): with two threads, half of what is free settled at
    // a third of the room each, an equal share settles at half of it, and the
    // lock is taken that much less often (docs/performance.md, "At the
    // default threshold").
    const std::int64_t free = room - others;
    const std::int64_t holders = std::max(BitsSet(sharing), 2);
    const std::int64_t fair = std::min<std::int64_t>(kEntries, (room + holders - 1) / holders);
    const std::int64_t share = std::min(free, std::max(mine, fair));
    slot_folds[self].limit = slot_folds[self].failures_applied + static_cast<std::uint64_t>(share);
    log().SetLimit(self, slot_folds[self].limit);
  }
  return room > 0;
}

// How many more failures (up to `cap`), each replacing a success in a full
// window with totals `t`, keep the failure rate below its threshold, in
// Resilience4j's float32 arithmetic.
std::int64_t CircuitBreaker::Core::AllowanceLocked(const internal::WindowTotals& t,
                                                   std::int64_t cap) {
  const float threshold = cb.config_.failure_rate_threshold;
  const auto below = [&](std::int64_t k) { return RatePercent(t.failed + k, t.calls) < threshold; };
  if (!below(0)) return 0;
  std::int64_t k = static_cast<std::int64_t>(static_cast<double>(threshold) *
                                             static_cast<double>(t.calls) / 100.0) -
                   t.failed;
  k = std::clamp<std::int64_t>(k, 0, std::min(cap, t.calls - t.failed));
  while (k > 0 && !below(k)) --k;
  while (k < cap && k < t.calls - t.failed && below(k + 1)) ++k;
  return k;
}

}  // namespace fusebox
