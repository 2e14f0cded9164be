// Recording outcomes: the general path of Permit::Success/Failure/Record, the
// successes counted without the lock and folded in later, the verdicts of
// CLOSED and HALF_OPEN, the metrics, and the state word's flags.
#include <algorithm>
#include <limits>

#include "circuit_breaker_core.h"

namespace fusebox {

using cb_internal::IsOverrideState;
using cb_internal::kLow32;
using cb_internal::kOwnedSlots;
using cb_internal::kSharedSlot;
using cb_internal::kStripes;
using cb_internal::RatePercent;
using cb_internal::SecondOf;
using internal::kFastSuccessBit;
using internal::kProbeMetricsBit;
using internal::kRejectionListenersBit;
using internal::kStripedSuccessBit;

namespace {

int Clamp(std::int64_t v) {
  return static_cast<int>(std::min<std::int64_t>(v, std::numeric_limits<int>::max()));
}

// The stripe this thread adds its fast TIME_BASED successes to. Threads start
// spread round-robin and move to the next stripe whenever they meet another
// writer on theirs (as Java's LongAdder rehashes on contention), so that two
// busy threads settle on different cache lines.
thread_local unsigned t_stripe = [] {
  static std::atomic<unsigned> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) % kStripes;
}();

}  // namespace

void CircuitBreaker::RecordGeneral(std::uint32_t epoch, bool half_open_slot,
                                   const Outcome& outcome) noexcept {
  const bool failed = outcome.kind == OutcomeKind::kFailure;
  const bool slow = outcome.kind != OutcomeKind::kIgnored && outcome.duration > slow_threshold_;
  OutcomeEvent event{name_, State::kClosed, outcome.kind, outcome.duration, slow, false};
  bool notify = false;
  // kRelaxed folds slot by slot, under the lock.
  const std::uint64_t successes_seen = core_->stripes || relaxed_order_ ? 0 : core_->SumSuccesses();
  {
    // The closed window's two hot lines, which the last lock holder (another
    // thread, when two fail at once) has most likely written: asked for, for
    // writing, while the lock's own line is on its way, rather than one after
    // the other under the lock (docs/performance.md, "Three lines a grant").
    const char* window = reinterpret_cast<const char*>(&core_->closed_window);
    __builtin_prefetch(window, 1);
    __builtin_prefetch(window + 64, 1);
    // When the outcome was reported: read before the lock, not while the
    // other threads wait for it.
    const std::int64_t second = SecondOf(CoarseNow());
    internal::SpinMutexLock lock(&core_->mu);
    const std::uint64_t word = word_.load(std::memory_order_relaxed);
    const State state = StateOf(word);
    const bool stale = EpochOf(word) != epoch;
    event.state = state;
    if (slow) ++core_->slow_calls[failed ? 1 : 0];
    if (state == State::kHalfOpen && (!stale || resilience4j_)) {
      ++core_->probe_calls[static_cast<std::size_t>(outcome.kind)];
    }
    notify = core_->Listening(CircuitBreakerListener::kOutcomeEvents);
    if (stale && !resilience4j_) {
      // kDefault: the outcome's state epoch has ended; it decides nothing.
      ++core_->late_outcomes;
      event.late = true;
    } else {
      core_->RecordInStateLocked(word, second, outcome.kind, slow, half_open_slot, successes_seen);
    }
    // A rate-limit signal still opens, late or not (see docs/semantics.md).
    if (outcome.open_for > Duration::zero()) {
      core_->OpenForHintLocked(clock_.Now(), outcome.open_for);
    }
    core_->Republish(second);
  }
  core_->Dispatch();
  if (notify) core_->NotifyOutcome(event);
}

// An outcome of the current epoch (or any epoch, kResilience4j) into the
// state of `word`.
void CircuitBreaker::Core::RecordInStateLocked(std::uint64_t word, std::int64_t second,
                                               OutcomeKind kind, bool slow, bool half_open_slot,
                                               std::uint64_t successes_seen) {
  const bool failed = kind == OutcomeKind::kFailure;
  const bool ignored = kind == OutcomeKind::kIgnored;
  switch (StateOf(word)) {
    case State::kClosed:
      if (ignored) break;
      if (failed && !slow && (word & internal::kDeferFailureBit)) {
        FoldForFailureLocked(second);
      } else {
        FoldDeferredSuccessesLocked(second, successes_seen);
      }
      closed_window.Record(second, failed, slow);
      consecutive_failures = failed ? consecutive_failures + 1 : 0;
      CheckClosedLocked(second, failed);
      break;
    case State::kOpen:
      // Resilience4j records it into the window that tripped (or the probe
      // window that reopened); no transition.
      if (!ignored) MetricsWindowLocked(word).Record(second, failed, slow);
      break;
    case State::kHalfOpen:
      if (ignored) {
        // Gives the slot back: any permit in kResilience4j, only this
        // epoch's own half-open slot in kDefault.
        if (cb.resilience4j_ || half_open_slot) ++half_open_available;
        break;
      }
      probe_window.Record(0, failed, slow);
      CheckHalfOpenLocked(cb.clock_.Now(), failed, slow);
      break;
    case State::kMetricsOnly:
    case State::kForcedClosed:
      if (ignored) break;
      FoldDeferredSuccessesLocked(second);
      closed_window.Record(second, failed, slow);
      break;
    case State::kDisabled:
    case State::kForcedOpen:
      break;
  }
}

bool CircuitBreaker::RecordClosedSuccess(std::uint64_t word) noexcept {
  // A non-slow success into a CLOSED window that holds failures. Under
  // contention a std::mutex or even a spinning wait costs more than the work:
  // two threads on one breaker with 10 % failures got a quarter of one
  // thread's throughput. So a success that finds the lock busy does not wait:
  // it is counted without the lock (striped counters for TIME_BASED, one
  // deferred counter for COUNT_BASED) and the lock holder, or the next one,
  // applies it before anything reads the window. Successes racing each other
  // have no order a caller could observe, and applying one a moment later
  // can only delay a trip that crossing minimum_number_of_calls would cause.
  if (!core_->mu.TryLock()) {
    if (config_.sliding_window_type == SlidingWindowType::kTimeBased) return StripeSuccess();
    DeferSuccess();
    return true;
  }
  const std::uint64_t now_word = word_.load(std::memory_order_relaxed);
  if (StateOf(now_word) != State::kClosed ||
      (!resilience4j_ && EpochOf(now_word) != EpochOf(word))) {
    core_->mu.Unlock();
    return false;  // Moved on meanwhile: the general path sorts it out.
  }
  const std::int64_t second = SecondOf(CoarseNow());
  core_->FoldDeferredSuccessesLocked(second);
  core_->closed_window.Record(second, /*failed=*/false, /*slow=*/false);
  core_->consecutive_failures = 0;
  core_->CheckClosedLocked(second, /*failed=*/false);
  core_->Republish(second);
  core_->mu.Unlock();
  core_->Dispatch();
  return true;
}

void CircuitBreaker::DeferSuccess() noexcept {
  const int slot = internal::WriterSlot();
  std::atomic<std::uint64_t>& n = counters_[slot].successes;
  if (slot == cb_internal::kSharedSlot) {
    n.fetch_add(1, std::memory_order_relaxed);
  } else {
    // Release (a plain store on x86): a fold that reads this count also sees
    // every failure the thread counted before it (OutcomeOrder::kRelaxed;
    // relaxed_outcome_log.h, invariant 3).
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
}

bool CircuitBreaker::StripeSuccess(TimePoint coarse_now) noexcept {
  // A TIME_BASED success needs the epoch second it is reported in: the coarse
  // clock (~3 ns) is plenty for one-second buckets, and the caller's read of
  // it as the call ended (Permit::Success) is as good as one taken here. A
  // read from a second the counter has left fails the compare below: the
  // general path then reads the clock itself, folds, and re-arms the counter.
  const std::uint32_t second =
      static_cast<std::uint32_t>(SecondOf(coarse_now != TimePoint{} ? coarse_now : CoarseNow()));
  const int slot = internal::WriterSlot();
  if (slot != kSharedSlot) [[likely]] {
    // The slot's own word: only this thread writes it (here, and when a
    // fold under the lock re-arms it for a new second), so a plain load and
    // store count the success, with no locked read-modify-write (~6 ns, a
    // quarter of seed 000's two breakers). Folds read it under the lock and
    // take what it gained since they last applied it.
    std::atomic<std::uint64_t>& own = counters_[slot].successes;
    const std::uint64_t v = own.load(std::memory_order_relaxed);
    if (static_cast<std::uint32_t>(v >> 32) != second || (v & kLow32) == kLow32) return false;
    own.store(v + 1, std::memory_order_release);
    return true;
  }
  std::atomic<std::uint64_t>& stripe = core_->stripes[t_stripe].word;
  std::uint64_t v = stripe.load(std::memory_order_relaxed);
  while (static_cast<std::uint32_t>(v >> 32) == second && (v & kLow32) != kLow32) {
    // Relaxed: the count is folded under the lock, which orders it; nothing
    // else is published through it.
    const std::uint64_t seen = v;
    if (stripe.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) return true;
    if (v != seen) t_stripe = (t_stripe + 1) % kStripes;  // Someone else writes here.
  }
  return false;  // A new second: the general path folds the stripe and re-arms it.
}

// Brings into the closed window the successes that were counted without the
// lock: TIME_BASED slot words (this thread's re-armed for `second`) and
// striped counters (re-armed for `second`), and COUNT_BASED deferred
// successes. Every locked path that reads or changes the closed
// window calls it first, so none of them is ever lost.
//
// `seen`, when given, is SumSuccesses() read before the lock was taken:
// reading other threads' counter lines costs a cache line transfer each,
// better paid before the lock than while the other thread waits for it. It
// still includes every success reported before the caller's outcome.
void CircuitBreaker::Core::FoldDeferredSuccessesLocked(std::int64_t second, std::uint64_t seen) {
  if (!stripes) {
    if (cb.relaxed_order_) {
      FoldSlotsLocked(second, /*decide=*/false);
      return;
    }
    const std::uint64_t sum = seen != 0 ? seen : SumSuccesses();
    // Another thread may have applied a later sum already.
    if (sum <= successes_applied) return;
    AddDeferredSuccessesLocked(sum - successes_applied);
    successes_applied = sum;
    return;
  }
  const std::uint64_t armed = static_cast<std::uint64_t>(second) << 32;
  // Slot words: each written by its owner alone, which changes its second
  // only here, under the lock, from `armed` below; so a word holds the
  // second it held when last applied, with a count at least as large.
  // `own` is this thread's slot, if it has one (a thread that only reads
  // the metrics does not claim one).
  const int own = internal::t_writer_slot;
  for (int i = 0; i < kOwnedSlots; ++i) {
    std::atomic<std::uint64_t>& w = cb.counters_[i].successes;
    const std::uint64_t v = w.load(std::memory_order_acquire);
    std::uint64_t& applied = slot_folds[i].successes_applied;
    if (v != applied) {
      // A new owner of a slot keeps its predecessor's word: same rule.
      const std::int64_t n = static_cast<std::int64_t>((v & kLow32) - (applied & kLow32));
      const std::uint32_t lag =
          static_cast<std::uint32_t>(second) - static_cast<std::uint32_t>(v >> 32);
      closed_window.AddSuccesses(second - lag, n);
      applied = v;
    }
    if (i == own && v != armed) {
      w.store(armed, std::memory_order_relaxed);
      applied = armed;
    }
  }
  for (int i = 0; i < kStripes; ++i) {
    std::atomic<std::uint64_t>& w = stripes[i].word;
    std::uint64_t v = w.load(std::memory_order_relaxed);
    // Leave an already armed, empty stripe alone: writing it would take its
    // line away from the thread that owns it.
    while (v != armed && !w.compare_exchange_weak(v, armed, std::memory_order_relaxed)) {
    }
    const std::int64_t n = static_cast<std::int64_t>(v & kLow32);
    if (n == 0) continue;
    // Rebuild the full second from its low 32 bits; it is at most `second`.
    const std::uint32_t lag =
        static_cast<std::uint32_t>(second) - static_cast<std::uint32_t>(v >> 32);
    closed_window.AddSuccesses(second - lag, n);
  }
}

// `n` successes counted without the lock, into the COUNT_BASED closed
// window, a word of the ring at a time.
void CircuitBreaker::Core::AddDeferredSuccessesLocked(std::uint64_t n) {
  if (n == 0) return;
  // More successes than the ring holds leave the same ring as `size` of
  // them would.
  closed_window.RecordSuccesses(
      static_cast<std::int64_t>(std::min<std::uint64_t>(n, closed_window.size())));
  consecutive_failures = 0;
}

internal::SlidingWindow& CircuitBreaker::Core::MetricsWindowLocked(std::uint64_t word) {
  return (word & kProbeMetricsBit) ? probe_window : closed_window;
}

int CircuitBreaker::Core::MinimumCalls(bool probe) const {
  const CircuitBreakerConfig& c = cb.config_;
  if (probe)
    return std::min(c.minimum_number_of_calls, c.permitted_number_of_calls_in_half_open_state);
  if (c.sliding_window_type == SlidingWindowType::kCountBased) {
    return std::min(c.minimum_number_of_calls, c.sliding_window_size);
  }
  return c.minimum_number_of_calls;  // Not capped for TIME_BASED (note point 8).
}

CircuitBreakerMetrics CircuitBreaker::Core::MetricsLocked(std::int64_t second) {
  const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
  const bool probe = (word & kProbeMetricsBit) != 0;
  if (!probe) FoldDeferredSuccessesLocked(second);
  const internal::WindowTotals& t = MetricsWindowLocked(word).Totals(second);
  CircuitBreakerMetrics m;
  m.state = StateOf(word);
  m.buffered_calls = Clamp(t.calls);
  m.failed_calls = Clamp(t.failed);
  m.successful_calls = Clamp(t.calls - t.failed);
  m.slow_calls = Clamp(t.slow);
  m.slow_failed_calls = Clamp(t.slow_failed);
  m.slow_successful_calls = Clamp(t.slow - t.slow_failed);
  if (t.calls > 0 && t.calls >= MinimumCalls(probe)) {
    m.failure_rate = RatePercent(t.failed, t.calls);
    m.slow_call_rate = RatePercent(t.slow, t.calls);
  }
  m.not_permitted_calls =
      static_cast<std::int64_t>(SumRejected(probe ? 1 : 0) - rejected_base[probe ? 1 : 0]);
  const State s = m.state;
  const Duration::rep deadline = cb.deadline_ns_.load(std::memory_order_relaxed);
  if (s == State::kOpen || (IsOverrideState(s) && deadline != 0)) {
    m.retry_at = TimePoint(Duration(deadline));
  }
  m.open_attempts = open_attempts;
  m.late_outcomes = late_outcomes;
  m.listener_errors = listener_errors.load(std::memory_order_relaxed);
  return m;
}

// The flags derived from the state and the window; stores the word only when
// it changes, so that the unhealthy path does not keep invalidating the line
// every CLOSED call reads.
void CircuitBreaker::Core::PublishLocked(State state, std::uint32_t epoch, bool probe,
                                         std::int64_t second) {
  std::uint64_t word = static_cast<std::uint64_t>(state) |
                       (static_cast<std::uint64_t>(epoch) << internal::kEpochShift) |
                       (probe ? kProbeMetricsBit : 0);
  const cb_internal::ListenerList* l = listeners.load(std::memory_order_relaxed);
  const unsigned interests = l != nullptr ? l->interests : 0;
  if (interests & CircuitBreakerListener::kRejectionEvents) word |= kRejectionListenersBit;
  const bool ordered = (interests & CircuitBreakerListener::kOutcomeEvents) != 0;
  if (ordered) word |= internal::kOutcomeListenersBit;
  if (shared_stale) word |= internal::kSharedStaleBit;
  if (state == State::kClosed && !ordered) {
    internal::SlidingWindow& w = closed_window;
    const internal::WindowTotals& t = w.Totals(second);
    if (w.type() == SlidingWindowType::kCountBased) {
      if (w.full() && t.clean()) {
        word |= kFastSuccessBit;
      } else if (w.full()) {
        word |= internal::kDeferSuccessBit;
        if (cb.relaxed_order_ && GrantLocked(t)) word |= internal::kDeferFailureBit;
      }
    } else if (t.clean()) {
      word |= kStripedSuccessBit;
    }
  }
  const std::uint64_t old = cb.word_.load(std::memory_order_relaxed);
  if (old == word) return;
  const bool withdraw = (old & internal::kDeferFailureBit) &&
                        (!(word & internal::kDeferFailureBit) || EpochOf(old) != EpochOf(word));
  if (!withdraw) {
    cb.word_.store(word, std::memory_order_release);
    return;
  }
  // Failures may no longer be counted without the lock. A thread that read
  // the old word may be counting one right now: the handshake
  // (relaxed_outcome_log.h, invariant 4) makes sure that either this fold
  // finds it or its thread settles it (SettleDeferred()).
  log().WithdrawAndPublish(cb.word_, word);
  for (SlotFold& fold : slot_folds) fold.limit = 0;
  allowance_seekers = 0;  // Learnt again from the threads that come back.
  // Failures counted over an allowance withdrawn for being too large could
  // reach the threshold: decided on as they go in.
  if (FoldSlotsLocked(second, /*decide=*/true) > 0) Republish(second);
}

void CircuitBreaker::Core::Republish(std::int64_t second) {
  const std::uint64_t w = cb.word_.load(std::memory_order_relaxed);
  PublishLocked(StateOf(w), EpochOf(w), (w & kProbeMetricsBit) != 0, second);
}

// Whether a half-open verdict is due, and which; then transitions.
void CircuitBreaker::Core::CheckHalfOpenLocked(TimePoint now, bool failed, bool slow) {
  const CircuitBreakerConfig& c = cb.config_;
  if (c.half_open_policy == HalfOpenPolicy::kAnyFailureReopens) {
    if (failed || slow) {
      TransitionLocked(State::kOpen, TransitionReason::kProbesFailed, now);
    } else if (++half_open_successes >= c.permitted_number_of_calls_in_half_open_state) {
      TransitionLocked(State::kClosed, TransitionReason::kProbesSucceeded, now);
    }
    return;
  }
  const internal::WindowTotals& t = probe_window.Totals(0);
  if (t.calls == 0 || t.calls < MinimumCalls(/*probe=*/true)) return;
  if (RatePercent(t.failed, t.calls) >= c.failure_rate_threshold ||
      RatePercent(t.slow, t.calls) >= c.slow_call_rate_threshold) {
    TransitionLocked(State::kOpen, TransitionReason::kProbesFailed, now);
  } else {
    TransitionLocked(State::kClosed, TransitionReason::kProbesSucceeded, now);
  }
}

void CircuitBreaker::Core::CheckClosedLocked(std::int64_t second, bool failed) {
  const CircuitBreakerConfig& c = cb.config_;
  const internal::WindowTotals& t = closed_window.Totals(second);
  if (t.calls > 0 && t.calls >= MinimumCalls(false)) {
    if (RatePercent(t.failed, t.calls) >= c.failure_rate_threshold) {
      TransitionLocked(State::kOpen, TransitionReason::kFailureRate, cb.clock_.Now());
      return;
    }
    if (RatePercent(t.slow, t.calls) >= c.slow_call_rate_threshold) {
      TransitionLocked(State::kOpen, TransitionReason::kSlowCallRate, cb.clock_.Now());
      return;
    }
  }
  if (failed && c.consecutive_failure_threshold > 0 &&
      consecutive_failures >= c.consecutive_failure_threshold) {
    TransitionLocked(State::kOpen, TransitionReason::kConsecutiveFailures, cb.clock_.Now());
  }
}

void CircuitBreaker::Core::NotifyOutcome(const OutcomeEvent& event) {
  ForEachListener(CircuitBreakerListener::kOutcomeEvents,
                  [&](CircuitBreakerListener& l) { l.OnOutcome(event); });
}

}  // namespace fusebox
