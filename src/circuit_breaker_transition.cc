// Transitions: moving between states (a new state epoch each time), the OPEN
// duration, the timers that end a state, and delivering what happened to
// listeners and to the fleet, in order, after the lock.
#include <utility>

#include "circuit_breaker_core.h"

namespace fusebox {

using cb_internal::AddSaturated;
using cb_internal::IsOverrideState;
using cb_internal::SecondOf;
using internal::kProbeMetricsBit;

namespace {

std::uint64_t SplitMix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

// What entering a state decided: the metrics it uses and when it ends.
struct CircuitBreaker::Core::Entered {
  bool probe = false;
  // deadline_ns_'s new value (0: no end).
  Duration::rep deadline = 0;
  std::optional<TimePoint> retry_at;
  // OPEN: how long.
  Duration opened_for = Duration::zero();
};

void CircuitBreaker::Core::TransitionLocked(State to, TransitionReason reason, TimePoint now,
                                            Duration open_for, const OperatorInfo* op) {
  const std::uint64_t old_word = cb.word_.load(std::memory_order_relaxed);
  const State from = StateOf(old_word);
  const std::int64_t second = SecondOf(cb.clock_.CoarseNow());
  const bool listening = Listening(CircuitBreakerListener::kTransitionEvents);
  // kRelaxed: failures counted without the lock and not yet applied go in
  // after the transition, as outcomes reported after it (the withdrawal in
  // PublishLocked() applies them): the failure that tripped the window is
  // the last one in it, as it is in every order of the calls.
  hold_deferred_failures = true;
  awaiting_fleet_probe = false;
  CircuitBreakerMetrics counts;
  if (listening) counts = MetricsLocked(second);

  CancelTimerLocked(open_timer);
  CancelTimerLocked(half_open_timer);
  CancelTimerLocked(override_timer);
  // Successes striped in the ending epoch belong to the window being left.
  FoldDeferredSuccessesLocked(second);

  const std::uint32_t epoch = EpochOf(old_word) + 1;
  override_info.reset();
  Entered e;
  e.probe = (old_word & kProbeMetricsBit) != 0;
  EnterLocked(to, now, open_for, op, epoch, e);
  state_since = now;
  cb.deadline_ns_.store(e.deadline, std::memory_order_relaxed);
  if (shared) ShareTransitionLocked(from, to, reason, e.opened_for, op);
  hold_deferred_failures = false;
  PublishLocked(to, epoch, e.probe, second);

  // Resilience4j publishes no event for a move to the state it is in
  // (StateTransition.isInternalTransition), though the state starts afresh.
  if (listening && !(cb.resilience4j_ && from == to)) {
    PendingTransition p;
    p.event.from = from;
    p.event.to = to;
    p.event.reason = reason;
    p.event.counts = counts;
    p.event.at = now;
    p.event.retry_at = e.retry_at;
    if (op != nullptr) {
      p.detail = op->reason;
      p.actor = op->actor;
    }
    QueueTransitionLocked(std::move(p));
  }
}

// The state-specific half of TransitionLocked(): windows, counters, timers.
void CircuitBreaker::Core::EnterLocked(State to, TimePoint now, Duration open_for,
                                       const OperatorInfo* op, std::uint32_t epoch, Entered& e) {
  const CircuitBreakerConfig& c = cb.config_;
  switch (to) {
    case State::kClosed:
      ResetClosedLocked();
      e.probe = false;
      return;
    case State::kOpen: {
      ++open_attempts;
      const Duration wait =
          open_for > Duration::zero() ? open_for : OpenDurationLocked(open_attempts);
      const TimePoint until = AddSaturated(now, wait);
      e.deadline = until.time_since_epoch().count();
      e.retry_at = until;
      e.opened_for = wait;
      // With a shared state, OPEN ends on a call, which takes the fleet's
      // probe lease (a timer thread must not wait for the store).
      if (c.automatic_transition_from_open_to_half_open_enabled && !shared) {
        open_timer = ScheduleLocked(until, TimerKind::kOpenEnd, epoch);
      }
      return;
    }
    case State::kHalfOpen:
      probe_window.Reset();
      rejected_base[1] = SumRejected(1);
      half_open_available = c.permitted_number_of_calls_in_half_open_state;
      half_open_successes = 0;
      e.probe = true;
      if (c.max_wait_duration_in_half_open_state > Duration::zero()) {
        half_open_timer = ScheduleLocked(AddSaturated(now, c.max_wait_duration_in_half_open_state),
                                         TimerKind::kHalfOpenMaxWait, epoch);
      }
      return;
    case State::kDisabled:
    case State::kMetricsOnly:
    case State::kForcedOpen:
    case State::kForcedClosed: {
      // Resilience4j's ForcedOpenState counts as one more OPEN period
      // (attempts + 1), which the next OPEN's wait interval continues from;
      // its DISABLED and METRICS_ONLY start from 0, as CLOSED does.
      const int attempts = open_attempts;
      ResetClosedLocked();
      if (cb.resilience4j_ && to == State::kForcedOpen) open_attempts = attempts + 1;
      e.probe = false;
      OverrideInfo info;
      info.state = to;
      info.since = now;
      if (op != nullptr) {
        info.reason = op->reason;
        info.actor = op->actor;
        if (op->expires_after > Duration::zero()) {
          const TimePoint until = AddSaturated(now, op->expires_after);
          info.expires_at = until;
          e.deadline = until.time_since_epoch().count();
          e.retry_at = until;
          override_timer = ScheduleLocked(until, TimerKind::kOverrideExpiry, epoch);
        }
      }
      override_info = std::move(info);
      return;
    }
  }
}

void CircuitBreaker::Core::ResetClosedLocked() {
  closed_window.Reset();
  // The rejection count of the closed metrics starts afresh too.
  rejected_base[0] = SumRejected(0);
  consecutive_failures = 0;
  open_attempts = 0;
}

Duration CircuitBreaker::Core::OpenDurationLocked(int attempt) {
  const CircuitBreakerConfig& c = cb.config_;
  Duration wait =
      c.wait_interval_function ? c.wait_interval_function(attempt) : c.wait_duration_in_open_state;
  if (wait < Duration::zero()) wait = Duration::zero();
  if (c.open_duration_jitter > 0) {
    const double u = static_cast<double>(SplitMix(jitter_state) >> 11) * 0x1.0p-53;
    const double factor = 1.0 - c.open_duration_jitter + 2.0 * c.open_duration_jitter * u;
    const long double ns = static_cast<long double>(wait.count()) * factor;
    wait = ns >= static_cast<long double>(Duration::max().count())
               ? Duration::max()
               : Duration(static_cast<Duration::rep>(ns));
  }
  return wait;
}

// Extends an OPEN state to `until` when that is later (a shorter hint never
// shortens a longer open). `share`: tell the fleet (not when the extension
// came from it).
void CircuitBreaker::Core::ExtendOpenLocked(TimePoint now, Duration open_for, bool share) {
  const TimePoint until = AddSaturated(now, open_for);
  const TimePoint current(Duration(cb.deadline_ns_.load(std::memory_order_relaxed)));
  if (until <= current) return;
  cb.deadline_ns_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
  awaiting_fleet_probe = false;  // An OPEN again.
  if (shared && share) {
    QueueSharedLocked({SharedAction::Kind::kTrip,
                       open_for,
                       TransitionReasonName(TransitionReason::kOpenForHint),
                       {}});
  }
  // The automatic-transition timer, if any, re-checks the deadline and
  // reschedules itself.
  if (Listening(CircuitBreakerListener::kTransitionEvents)) {
    PendingTransition p;
    p.event.from = State::kOpen;
    p.event.to = State::kOpen;
    p.event.reason = TransitionReason::kOpenForHint;
    p.event.counts = MetricsLocked(SecondOf(cb.clock_.CoarseNow()));
    p.event.at = now;
    p.event.retry_at = until;
    QueueTransitionLocked(std::move(p));
  }
}

// A rate-limit signal is news about the dependency, not about an epoch: it
// opens (or extends OPEN) whatever epoch its permit came from (see
// docs/semantics.md). An operator state stays as the operator set it.
void CircuitBreaker::Core::OpenForHintLocked(TimePoint now, Duration open_for) {
  const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
  if (state == State::kOpen) {
    ExtendOpenLocked(now, open_for);
  } else if (state == State::kClosed || state == State::kHalfOpen) {
    TransitionLocked(State::kOpen, TransitionReason::kOpenForHint, now, open_for);
  }
}

void CircuitBreaker::Core::QueueTransitionLocked(PendingTransition p) {
  pending.push_back(std::move(p));
  has_pending.store(true, std::memory_order_relaxed);
}

void CircuitBreaker::Core::CancelTimerLocked(TimerId& id) {
  if (id != 0) {
    cb.clock_.Cancel(id);
    id = 0;
  }
}

TimerId CircuitBreaker::Core::ScheduleLocked(TimePoint at, TimerKind kind, std::uint32_t epoch) {
  return cb.clock_.ScheduleAt(at, [l = link, kind, epoch] {
    std::lock_guard<std::mutex> guard(l->mu);
    if (l->breaker != nullptr) l->breaker->core_->OnTimer(kind, epoch);
  });
}

void CircuitBreaker::Core::OnTimer(TimerKind kind, std::uint32_t epoch) {
  {
    internal::SpinMutexLock lock(&mu);
    const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
    if (EpochOf(word) != epoch) return;  // The state it was for has ended.
    const State state = StateOf(word);
    const TimePoint now = cb.clock_.Now();
    switch (kind) {
      case TimerKind::kOpenEnd: {
        open_timer = 0;
        if (state != State::kOpen) return;
        const TimePoint until(Duration(cb.deadline_ns_.load(std::memory_order_relaxed)));
        if (now < until) {  // Extended by a hint since it was scheduled.
          open_timer = ScheduleLocked(until, TimerKind::kOpenEnd, epoch);
          return;
        }
        TransitionLocked(State::kHalfOpen, TransitionReason::kWaitElapsed, now);
        break;
      }
      case TimerKind::kHalfOpenMaxWait:
        half_open_timer = 0;
        if (state != State::kHalfOpen) return;
        TransitionLocked(cb.config_.transition_to_state_after_wait_duration,
                         TransitionReason::kHalfOpenTimeout, now);
        break;
      case TimerKind::kOverrideExpiry:
        override_timer = 0;
        if (!IsOverrideState(state)) return;
        TransitionLocked(State::kClosed, TransitionReason::kOverrideExpired, now);
        break;
    }
  }
  Dispatch();
}

// Delivers queued transitions, in order, one thread at a time, with no lock
// held while a listener runs.
void CircuitBreaker::Core::Dispatch() {
  // Relaxed: a thread that queued an event set the flag itself, earlier in
  // its own program order; any other thread that misses it is not the one
  // responsible for delivering.
  if (!has_pending.load(std::memory_order_relaxed)) return;
  std::vector<PendingTransition> batch;
  std::vector<SharedAction> actions;
  internal::SpinMutexLock lock(&mu);
  if (dispatching || (pending.empty() && shared_pending.empty())) return;
  dispatching = true;
  while (!pending.empty() || !shared_pending.empty()) {
    batch.clear();
    batch.swap(pending);
    actions.clear();
    actions.swap(shared_pending);
    mu.Unlock();
    // The fleet first: it should hear of an OPEN before listeners run.
    for (SharedAction& a : actions) RunShared(a);
    for (PendingTransition& p : batch) {
      p.event.breaker = cb.name_;
      p.event.detail = p.detail;
      p.event.actor = p.actor;
      ForEachListener(CircuitBreakerListener::kTransitionEvents,
                      [&](CircuitBreakerListener& l) { l.OnTransition(p.event); });
    }
    mu.Lock();
  }
  has_pending.store(false, std::memory_order_relaxed);
  dispatching = false;
}

}  // namespace fusebox
