// Admission: TryAcquire()'s general path (every state but a clean CLOSED),
// TryReject()'s (OPEN and FORCED_OPEN), rejections, and timers caught up with on a call.
#include <optional>

#include "circuit_breaker_core.h"

namespace fusebox {

using cb_internal::IsOverrideState;
using internal::kProbeMetricsBit;
using internal::kRejectionListenersBit;

namespace {

// When a state with deadline `d` (0: none) ends.
std::optional<TimePoint> EndOf(Duration::rep d) {
  if (d == 0) return std::nullopt;
  return TimePoint(Duration(d));
}

}  // namespace

namespace {

// What TryAcquireGeneral returns where it would have asked the store but may
// not: never seen by a caller (TryAcquireWithoutBlocking() returns nullopt).
Status WouldBlock(bool* would_block) noexcept {
  *would_block = true;
  return Status::Rejected(StatusCode::kUnavailable, "would_block");
}

}  // namespace

Result<Permit> CircuitBreaker::TryAcquireGeneral(std::uint64_t word, bool* would_block) noexcept {
  if (word & internal::kSharedStaleBit) [[unlikely]] {
    if (would_block != nullptr) return WouldBlock(would_block);
    core_->SyncShared();
    word = word_.load(std::memory_order_acquire);
    if (StateOf(word) == State::kClosed) return Permit(this, EpochOf(word), false);
  }
  const State state = StateOf(word);
  const Duration::rep deadline = deadline_ns_.load(std::memory_order_relaxed);
  switch (state) {
    case State::kOpen: {
      // The one clock read of a rejection: the coarse clock (~3 ns; steady_clock
      // ~21 ns) never runs ahead of the precise one, so OPEN never ends early; it
      // may end up to one tick (≤ 4 ms) late on SystemClock, never on
      // ManualClock.
      const TimePoint now = CoarseNow();
      if (now.time_since_epoch().count() <= deadline) [[likely]]
        return RejectOpen(word, deadline);
      // The wait is over: move to HALF_OPEN under the lock, or with a shared
      // state once the fleet's lease is ours.
      if (core_->shared) {
        if (would_block != nullptr) return WouldBlock(would_block);
        return AcquireSharedProbe(word);
      }
      break;
    }
    case State::kForcedOpen:
      if (deadline == 0 || clock_.CoarseNow().time_since_epoch().count() < deadline) {
        return core_->Reject(word, "forced_open", EndOf(deadline));
      }
      break;
    case State::kDisabled:
    case State::kMetricsOnly:
    case State::kForcedClosed:
      if (deadline == 0 || clock_.CoarseNow().time_since_epoch().count() < deadline) {
        return Permit(this, EpochOf(word), false);
      }
      break;
    case State::kClosed:
    case State::kHalfOpen:
      break;
  }

  // Decided under the lock, acted on after it (listeners run lock-free).
  const char* reject_reason = nullptr;
  std::optional<TimePoint> retry_at;
  std::uint32_t epoch = 0;
  bool half_open_slot = false;
  {
    internal::SpinMutexLock lock(&core_->mu);
    word = core_->CatchUpLocked(clock_.Now());
    epoch = EpochOf(word);
    reject_reason = core_->AdmitLocked(word, half_open_slot, retry_at);
  }
  core_->Dispatch();
  if (reject_reason != nullptr) return core_->Reject(word, reject_reason, retry_at);
  return Permit(this, epoch, half_open_slot);
}

// Written out rather than through Core::Reject: this is the path an outage
// runs millions of times, and it should touch nothing but this object's first
// two cache lines.
Status CircuitBreaker::RejectOpen(std::uint64_t word, Duration::rep deadline) noexcept {
  const int slot = internal::WriterSlot();
  internal::AddToSlot(counters_[slot].rejected[(word & kProbeMetricsBit) ? 1 : 0], slot, 1);
  const TimePoint until{Duration(deadline)};
  if (word & kRejectionListenersBit) [[unlikely]] {
    core_->NotifyRejection(State::kOpen, "open", until);
  }
  return Status::Rejected(StatusCode::kCircuitOpen, "open", until);
}

std::optional<Status> CircuitBreaker::TryRejectGeneral(std::uint64_t word) noexcept {
  // A view to re-read from the fleet first: TryAcquire() would ask the store.
  if (word & internal::kSharedStaleBit) return std::nullopt;
  const Duration::rep deadline = deadline_ns_.load(std::memory_order_relaxed);
  const Duration::rep now = CoarseNow().time_since_epoch().count();
  switch (StateOf(word)) {
    case State::kOpen:
      // The same test as TryAcquireGeneral's: once the wait is over, the call
      // that ends OPEN may take the fleet's lease (a store round trip).
      if (now <= deadline) return RejectOpen(word, deadline);
      return std::nullopt;
    case State::kForcedOpen:
      if (deadline == 0 || now < deadline) {
        return core_->Reject(word, "forced_open", EndOf(deadline)).error();
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

void CircuitBreaker::ReleasePermit(std::uint32_t epoch, bool half_open_slot) noexcept {
  const std::uint64_t word = word_.load(std::memory_order_relaxed);
  // Only HALF_OPEN counts permits; a CLOSED permit holds nothing.
  if (StateOf(word) != State::kHalfOpen) return;
  if (!resilience4j_ && !(half_open_slot && EpochOf(word) == epoch)) return;
  internal::SpinMutexLock lock(&core_->mu);
  const std::uint64_t now_word = word_.load(std::memory_order_relaxed);
  if (StateOf(now_word) != State::kHalfOpen) return;
  if (!resilience4j_ && EpochOf(now_word) != epoch) return;
  ++core_->half_open_available;
}

Result<Permit> CircuitBreaker::Core::Reject(std::uint64_t word, const char* reason,
                                            std::optional<TimePoint> retry_at) {
  const int slot = internal::WriterSlot();
  internal::AddToSlot(cb.counters_[slot].rejected[(word & kProbeMetricsBit) ? 1 : 0], slot, 1);
  if (word & kRejectionListenersBit) NotifyRejection(StateOf(word), reason, retry_at);
  return Status::Rejected(StatusCode::kCircuitOpen, reason, retry_at);
}

void CircuitBreaker::Core::NotifyRejection(State state, const char* reason,
                                           std::optional<TimePoint> retry_at) {
  const RejectionEvent event{cb.name_, state, reason, retry_at};
  ForEachListener(CircuitBreakerListener::kRejectionEvents,
                  [&](CircuitBreakerListener& l) { l.OnRejection(event); });
}

const char* CircuitBreaker::Core::AdmitLocked(std::uint64_t word, bool& half_open_slot,
                                              std::optional<TimePoint>& retry_at) {
  switch (StateOf(word)) {
    case State::kHalfOpen:
      if (half_open_available <= 0) return "half_open_full";
      --half_open_available;
      half_open_slot = true;
      return nullptr;
    case State::kOpen:
    case State::kForcedOpen:
      // Reopened by a max-wait timeout, or another thread got here first.
      retry_at = EndOf(cb.deadline_ns_.load(std::memory_order_relaxed));
      return StateOf(word) == State::kOpen ? "open" : "forced_open";
    default:
      return nullptr;  // CLOSED or an admitting operator state.
  }
}

// Lazily applies what a timer would have done by `now` (the timer may not
// have run yet: SystemClock's thread can be late, and with automatic
// transition off there is no OPEN timer at all).
std::uint64_t CircuitBreaker::Core::CatchUpLocked(TimePoint now) {
  const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
  const Duration::rep deadline = cb.deadline_ns_.load(std::memory_order_relaxed);
  if (state == State::kOpen) {
    // Strict, as Resilience4j's OpenState: admitted only after the deadline.
    // With a shared state only AcquireSharedProbe() ends OPEN.
    if (!shared && now.time_since_epoch().count() > deadline) {
      TransitionLocked(State::kHalfOpen, TransitionReason::kWaitElapsed, now);
    }
  } else if (state == State::kHalfOpen) {
    const Duration max_wait = cb.config_.max_wait_duration_in_half_open_state;
    if (max_wait > Duration::zero() && now >= cb_internal::AddSaturated(state_since, max_wait)) {
      TransitionLocked(cb.config_.transition_to_state_after_wait_duration,
                       TransitionReason::kHalfOpenTimeout, now);
    }
  } else if (IsOverrideState(state) && deadline != 0 &&
             now.time_since_epoch().count() >= deadline) {
    TransitionLocked(State::kClosed, TransitionReason::kOverrideExpired, now);
  }
  return cb.word_.load(std::memory_order_relaxed);
}

}  // namespace fusebox
