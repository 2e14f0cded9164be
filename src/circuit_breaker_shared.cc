// The fleet link (config.shared_state, docs/distributed.md): what this breaker
// tells the fleet, what it hears from it, and the fleet's probe lease that
// ends OPEN.
#include <algorithm>
#include <utility>

#include "circuit_breaker_core.h"

namespace fusebox {

using cb_internal::IsOverrideState;
using cb_internal::SecondOf;

namespace {

std::optional<SharedOverride::Kind> OverrideKindOf(State s) {
  switch (s) {
    case State::kForcedOpen:
      return SharedOverride::Kind::kForcedOpen;
    case State::kForcedClosed:
      return SharedOverride::Kind::kForcedClosed;
    case State::kDisabled:
      return SharedOverride::Kind::kDisabled;
    case State::kMetricsOnly:
      return SharedOverride::Kind::kMetricsOnly;
    default:
      return std::nullopt;
  }
}

State StateOfOverride(SharedOverride::Kind k) {
  switch (k) {
    case SharedOverride::Kind::kForcedOpen:
      return State::kForcedOpen;
    case SharedOverride::Kind::kForcedClosed:
      return State::kForcedClosed;
    case SharedOverride::Kind::kDisabled:
      return State::kDisabled;
    case SharedOverride::Kind::kMetricsOnly:
      return State::kMetricsOnly;
    case SharedOverride::Kind::kLifted:
      break;
  }
  return State::kClosed;
}

}  // namespace

// Lets the shared state reach the breaker only while it is alive: the store
// holds a shared_ptr to it, and ~CircuitBreaker() detaches it, waiting for
// deliveries in flight. Unlike TimerLink no lock is held while delivering:
// a delivery may cause another on the same thread (an in-process store
// echoing a trip back to its sender).
class CircuitBreaker::Core::FleetLink final : public SharedStateListener {
 public:
  void OnSharedOpen(Duration remaining) override {
    Deliver([&](Core& c) { c.OnSharedOpen(remaining); });
  }
  void OnSharedClosed() override {
    Deliver([](Core& c) { c.OnSharedClosed(); });
  }
  void OnSharedResync() override {
    Deliver([](Core& c) { c.OnSharedResync(); });
  }
  void OnSharedOverride(const SharedOverride& o) override {
    Deliver([&](Core& c) { c.OnSharedOverride(o); });
  }
  void OnSharedRefresh() override {
    Deliver([](Core& c) { c.SyncShared(); });
  }
  void Attach(CircuitBreaker* b) {
    std::lock_guard<std::mutex> guard(mu_);
    breaker_ = b;
  }
  void Detach() {
    std::unique_lock<std::mutex> lock(mu_);
    breaker_ = nullptr;
    idle_.wait(lock, [&] { return in_flight_ == 0; });
  }

 private:
  template <typename F>
  void Deliver(F&& f) {
    CircuitBreaker* b;
    {
      std::lock_guard<std::mutex> guard(mu_);
      if ((b = breaker_) == nullptr) return;
      ++in_flight_;
    }
    f(*b->core_);
    std::lock_guard<std::mutex> guard(mu_);
    if (--in_flight_ == 0) idle_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable idle_;
  CircuitBreaker* breaker_ = nullptr;
  int in_flight_ = 0;
};

void CircuitBreaker::Core::AttachFleet(std::shared_ptr<SharedState> store) {
  shared = std::move(store);
  shared_link = std::make_shared<FleetLink>();
  shared_link->Attach(&cb);
}

void CircuitBreaker::Core::SubscribeFleet() {
  subscription = shared->Subscribe(cb.name_, shared_link);
}

void CircuitBreaker::Core::DetachFleet() {
  shared_link->Detach();
  shared->Unsubscribe(subscription);
  std::string token;
  {
    internal::SpinMutexLock lock(&mu);
    token = std::exchange(lease_token, std::string());
  }
  if (!token.empty()) shared->Release(cb.name_, token);
}

// OPEN's wait is over and a shared state is set: one call per breaker asks
// the store for the fleet's probe lease (it may block for the store's
// timeout); calls meanwhile are rejected as OPEN, as they would be anywhere
// in the fleet while one instance probes.
Result<Permit> CircuitBreaker::AcquireSharedProbe(std::uint64_t word) noexcept {
  if (core_->shared_busy.exchange(true, std::memory_order_acquire)) {
    return core_->Reject(word, "open",
                         TimePoint(Duration(deadline_ns_.load(std::memory_order_relaxed))));
  }
  ProbeLease lease = core_->shared->AcquireProbe(name_, config_.shared_probe_lease);
  const char* reject_reason = nullptr;
  std::optional<TimePoint> retry_at;
  std::uint32_t epoch = 0;
  bool half_open_slot = false;
  std::string unused_token;
  {
    internal::SpinMutexLock lock(&core_->mu);
    const std::uint64_t now_word = word_.load(std::memory_order_relaxed);
    if (StateOf(now_word) != State::kOpen || EpochOf(now_word) != EpochOf(word)) {
      // Something else ended this OPEN while we asked (a close or trip from the
      // fleet, an operator): the lease, if any, is not needed.
      if (lease.verdict == ProbeLease::Verdict::kProbe) unused_token = std::move(lease.token);
    } else {
      core_->ApplyLeaseLocked(lease, clock_.Now());
    }
    word = word_.load(std::memory_order_relaxed);
    epoch = EpochOf(word);
    reject_reason = core_->AdmitLocked(word, half_open_slot, retry_at);
  }
  core_->shared_busy.store(false, std::memory_order_release);
  core_->shared_busy.notify_all();
  if (!unused_token.empty()) core_->shared->Release(name_, unused_token);
  core_->Dispatch();
  if (reject_reason != nullptr) return core_->Reject(word, reject_reason, retry_at);
  return Permit(this, epoch, half_open_slot);
}

// The store's answer to AcquireProbe(), for the OPEN it was asked in.
void CircuitBreaker::Core::ApplyLeaseLocked(ProbeLease& lease, TimePoint now) {
  switch (lease.verdict) {
    case ProbeLease::Verdict::kProbe:
    case ProbeLease::Verdict::kClosed:
    case ProbeLease::Verdict::kUnavailable:
      // Ours to probe; or nothing to wait for in the fleet; or no fleet to
      // ask (fail-open): HALF_OPEN as a local breaker would.
      TransitionLocked(State::kHalfOpen, TransitionReason::kWaitElapsed, now);
      if (lease.verdict == ProbeLease::Verdict::kProbe) lease_token = std::move(lease.token);
      return;
    case ProbeLease::Verdict::kOpen:
      ExtendOpenLocked(now, lease.remaining, /*share=*/false);
      return;
    case ProbeLease::Verdict::kBusy: {
      // Another instance probes. Its close or trip will be pushed; ask
      // again after its lease ends at the latest, or in a second if the
      // push is lost.
      const Duration recheck =
          std::clamp(lease.remaining, Duration(1), Duration(std::chrono::seconds(1)));
      cb.deadline_ns_.store(cb_internal::AddSaturated(now, recheck).time_since_epoch().count(),
                            std::memory_order_relaxed);
      awaiting_fleet_probe = true;
      return;
    }
  }
}

void CircuitBreaker::Core::QueueSharedLocked(SharedAction action) {
  shared_pending.push_back(std::move(action));
  has_pending.store(true, std::memory_order_relaxed);
}

// What the fleet must hear of a transition: every OPEN this breaker decides
// (which also fences its own lease, if it held one), and the end of its
// lease otherwise. Transitions the fleet caused are not echoed back.
void CircuitBreaker::Core::ShareTransitionLocked(State from, State to, TransitionReason reason,
                                                 Duration opened_for, const OperatorInfo* op) {
  std::string token = std::exchange(lease_token, std::string());
  // An operator's override (or its Reset) is the fleet's, unless it came
  // from the fleet.
  if (op != nullptr && !op->from_fleet && reason == TransitionReason::kOperator &&
      (OverrideKindOf(to) || to == State::kClosed)) {
    SharedAction a;
    a.kind = SharedAction::Kind::kOverride;
    a.override_.kind = OverrideKindOf(to).value_or(SharedOverride::Kind::kLifted);
    a.override_.expires_after = op->expires_after;
    a.override_.reason = op->reason;
    a.override_.actor = op->actor;
    QueueSharedLocked(std::move(a));
  }
  if (reason == TransitionReason::kSharedOpen || reason == TransitionReason::kSharedClosed) {
    return;  // A trip or close elsewhere has already ended any lease held here.
  }
  if (to == State::kOpen) {
    QueueSharedLocked({SharedAction::Kind::kTrip, opened_for, TransitionReasonName(reason), {}});
    return;
  }
  if (token.empty()) return;
  const bool closed_by_probes = from == State::kHalfOpen && to == State::kClosed &&
                                reason == TransitionReason::kProbesSucceeded;
  QueueSharedLocked({closed_by_probes ? SharedAction::Kind::kClose : SharedAction::Kind::kRelease,
                     Duration::zero(),
                     {},
                     std::move(token)});
}

void CircuitBreaker::Core::RunShared(const SharedAction& a) {
  switch (a.kind) {
    case SharedAction::Kind::kTrip:
      shared->Trip(cb.name_, a.open_for, a.reason);
      break;
    case SharedAction::Kind::kClose:
      shared->Close(cb.name_, a.token);
      break;
    case SharedAction::Kind::kRelease:
      shared->Release(cb.name_, a.token);
      break;
    case SharedAction::Kind::kOverride:
      shared->PublishOverride(cb.name_, a.override_);
      break;
  }
}

// An override set elsewhere, applied here as the operator set it (with a
// new expiry of what was left of it); the same override already in force
// (our own, echoed back) changes nothing.
void CircuitBreaker::Core::ApplySharedOverrideLocked(const SharedOverride& o, TimePoint now) {
  const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
  if (o.kind == SharedOverride::Kind::kLifted) {
    if (!IsOverrideState(state)) return;
  } else if (override_info && override_info->state == StateOfOverride(o.kind) &&
             override_info->reason == o.reason && override_info->actor == o.actor) {
    return;
  }
  const OperatorInfo info{o.reason, o.actor, o.expires_after, /*from_fleet=*/true};
  TransitionLocked(StateOfOverride(o.kind), TransitionReason::kOperator, now, Duration::zero(),
                   &info);
}

void CircuitBreaker::Core::OnSharedOverride(const SharedOverride& o) {
  {
    internal::SpinMutexLock lock(&mu);
    ApplySharedOverrideLocked(o, cb.clock_.Now());
  }
  Dispatch();
}

void CircuitBreaker::Core::OnSharedOpen(Duration remaining) {
  {
    internal::SpinMutexLock lock(&mu);
    const TimePoint now = cb.clock_.Now();
    const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
    if (state == State::kClosed || state == State::kHalfOpen) {
      TransitionLocked(State::kOpen, TransitionReason::kSharedOpen, now,
                       std::max(remaining, Duration(1)));
    } else if (state == State::kOpen) {
      ExtendOpenLocked(now, remaining, /*share=*/false);
    }
    // An operator state stays as the operator set it.
  }
  Dispatch();
}

void CircuitBreaker::Core::OnSharedClosed() {
  {
    internal::SpinMutexLock lock(&mu);
    const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
    if (state == State::kOpen || state == State::kHalfOpen) {
      TransitionLocked(State::kClosed, TransitionReason::kSharedClosed, cb.clock_.Now());
    }
  }
  Dispatch();
}

void CircuitBreaker::Core::OnSharedResync() {
  {
    internal::SpinMutexLock lock(&mu);
    shared_stale = true;
    // Replays a local OPEN the fleet may have missed; Trip() never shortens
    // a longer one. Not the wait for another instance's probe.
    if (StateOf(cb.word_.load(std::memory_order_relaxed)) == State::kOpen &&
        !awaiting_fleet_probe) {
      const TimePoint until(Duration(cb.deadline_ns_.load(std::memory_order_relaxed)));
      const TimePoint now = cb.clock_.Now();
      if (until > now) {
        QueueSharedLocked({SharedAction::Kind::kTrip, until - now, "replay", {}});
      }
    }
    Republish(SecondOf(cb.clock_.CoarseNow()));
  }
  Dispatch();
}

// Re-reads the fleet's view (kSharedStaleBit), once at a time. Bounded by the
// store's own timeout (SharedState::Read()).
void CircuitBreaker::Core::SyncShared() {
  // Already read (by a call, or by the store's refresh): nothing to do.
  if (!(cb.word_.load(std::memory_order_relaxed) & internal::kSharedStaleBit)) return;
  if (shared_busy.exchange(true, std::memory_order_acquire)) {
    // Another thread is asking the store (a call, or the store's own
    // refresh of a new breaker): wait for its answer, bounded by the
    // store's timeout, rather than decide on a view known to be stale.
    AwaitSharedAnswer();
    return;
  }
  const Result<SharedCircuitView> view = shared->Read(cb.name_);
  {
    internal::SpinMutexLock lock(&mu);
    // Kept stale when the store did not answer: the next call asks again.
    // That costs nothing while the store is down (its own breaker refuses
    // at once) and does not lose an OPEN the fleet may hold.
    if (view.has_value()) ApplySharedViewLocked(*view);
  }
  shared_busy.store(false, std::memory_order_release);
  shared_busy.notify_all();
  Dispatch();
}

// Waits until no thread is asking the store for this breaker; within what is
// left of the caller's SharedStateDeadline, if it set one: past it the call
// is decided on the local view, as when the store does not answer.
void CircuitBreaker::Core::AwaitSharedAnswer() {
  const Duration budget = SharedStateBudget();
  if (budget == Duration::max()) {
    shared_busy.wait(true, std::memory_order_acquire);
    return;
  }
  // Real time: the deadline bounds real I/O. Polled (atomic waits have no
  // timeout); the answer is at most one store round trip away.
  Clock& real = SystemClock();
  const TimePoint until = real.Now() + budget;
  while (shared_busy.load(std::memory_order_acquire) && real.Now() < until) {
    real.SleepFor(std::chrono::microseconds(100));
  }
}

// What the fleet says can open this breaker, extend its OPEN, or put it
// under an operator's override; never close it: a close arrives as
// OnSharedClosed(), or comes from this breaker's own probe.
void CircuitBreaker::Core::ApplySharedViewLocked(const SharedCircuitView& view) {
  shared_stale = false;
  const TimePoint now = cb.clock_.Now();
  if (view.override_in_force) ApplySharedOverrideLocked(*view.override_in_force, now);
  const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
  if (view.kind == SharedCircuitView::Kind::kOpen) {
    if (state == State::kClosed || (state == State::kHalfOpen && lease_token.empty())) {
      TransitionLocked(State::kOpen, TransitionReason::kSharedOpen, now,
                       std::max(view.open_remaining, Duration(1)));
    } else if (state == State::kOpen) {
      ExtendOpenLocked(now, view.open_remaining, /*share=*/false);
    }
  } else if (view.kind == SharedCircuitView::Kind::kRecovering && state == State::kClosed) {
    // The fleet waits for a probe: join it as OPEN-and-over, so that the
    // next call competes for the lease.
    TransitionLocked(State::kOpen, TransitionReason::kSharedOpen, now, Duration(1));
  }
  Republish(SecondOf(cb.clock_.CoarseNow()));
}

}  // namespace fusebox
