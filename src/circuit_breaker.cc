// CircuitBreaker's construction, observation, operator transitions and
// listeners, and the writer slots its per-thread counters use. The concurrency
// design, and where each concern lives, is at the top of
// circuit_breaker_core.h.
#include "fusebox/circuit_breaker.h"

#include <functional>
#include <mutex>
#include <string>
#include <utility>

#include "circuit_breaker_core.h"
#include "fusebox/call_timer.h"

namespace fusebox {
namespace {

using cb_internal::kSharedSlot;
using cb_internal::SecondOf;
using internal::kOwnedWriterSlots;

// Writer slots for CircuitBreaker::counters_ (internal::WriterSlot(),
// circuit_breaker.h). Up to kOwnedWriterSlots threads at a time each own one
// slot index, the same in every breaker, and are its only writer: they add
// with a relaxed load and store, which costs a plain add instead of a locked
// one. Threads beyond that share the last slot and use fetch_add. A slot is
// handed back when its thread exits; the release and the next claim (acq_rel
// on g_slots) order the old owner's last store before the new owner's first
// load, so counts carry over exactly. Readers only sum slots; they never write
// them (a reset subtracts a remembered base instead).
std::atomic<std::uint32_t> g_slots{0};

struct SlotRelease {
  ~SlotRelease() {
    const int slot = internal::t_writer_slot;
    if (slot >= 0 && slot < kOwnedWriterSlots) {
      g_slots.fetch_and(~(1u << slot), std::memory_order_acq_rel);
    }
  }
};

}  // namespace

int internal::ClaimWriterSlot() noexcept {
  thread_local SlotRelease release;  // Its destructor hands the slot back.
  (void)release;
  std::uint32_t bits = g_slots.load(std::memory_order_relaxed);
  for (;;) {
    int free = -1;
    for (int i = 0; i < kOwnedWriterSlots; ++i) {
      if (!(bits & (1u << i))) {
        free = i;
        break;
      }
    }
    if (free < 0) return t_writer_slot = kSharedSlot;
    if (g_slots.compare_exchange_weak(bits, bits | (1u << free), std::memory_order_acq_rel)) {
      return t_writer_slot = free;
    }
  }
}

Result<std::unique_ptr<CircuitBreaker>> CircuitBreaker::Create(std::string name,
                                                               CircuitBreakerConfig config,
                                                               Clock& clock) {
  Status s = config.Validate();
  if (!s.ok()) return s;
  std::unique_ptr<CircuitBreaker> b(new CircuitBreaker(std::move(name), std::move(config), clock));
  b->JoinFleet();
  return b;
}

Result<std::unique_ptr<CircuitBreaker>> CircuitBreaker::CreateUnjoined(std::string name,
                                                                       CircuitBreakerConfig config,
                                                                       Clock& clock) {
  Status s = config.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<CircuitBreaker>(
      new CircuitBreaker(std::move(name), std::move(config), clock));
}

// From here on the store may call in (from its own thread) and read the
// fleet's state: whatever that changes reaches the listeners added before.
void CircuitBreaker::JoinFleet() {
  if (core_->shared) core_->SubscribeFleet();
}

CircuitBreaker::CircuitBreaker(std::string name, CircuitBreakerConfig config, Clock& clock)
    : word_(static_cast<std::uint64_t>(State::kClosed)),
      slow_threshold_(config.slow_call_duration_threshold),
      precise_call_timing_(config.call_timing == CallTiming::kPrecise ||
                           (config.call_timing == CallTiming::kAuto &&
                            config.slow_call_duration_threshold < std::chrono::seconds(1))),
      resilience4j_(config.compatibility == Compatibility::kResilience4j),
      relaxed_order_(config.outcome_order == OutcomeOrder::kRelaxed &&
                     config.sliding_window_type == SlidingWindowType::kCountBased &&
                     config.consecutive_failure_threshold == 0),
      system_clock_(internal::IsSystemClock(clock)),
      clock_(clock),
      counters_(std::make_unique<SlotCounters[]>(kSharedSlot + 1)),
      relaxed_log_(relaxed_order_ ? std::make_unique<internal::RelaxedOutcomeLog>() : nullptr),
      name_(std::move(name)),
      config_(std::move(config)),
      core_(std::make_unique<Core>(*this, config_)) {
  core_->link->breaker = this;
  core_->jitter_state =
      config_.jitter_seed != 0 ? config_.jitter_seed : std::hash<std::string>{}(name_);
  if (config_.sliding_window_type == SlidingWindowType::kTimeBased) {
    core_->stripes = std::make_unique<cb_internal::Stripe[]>(cb_internal::kStripes);
  }
  if (config_.shared_state) core_->AttachFleet(config_.shared_state);
  const TimePoint now = clock_.Now();
  {
    internal::SpinMutexLock lock(&core_->mu);
    core_->state_since = now;
    // A new breaker knows nothing of the fleet yet: its first call reads it.
    core_->shared_stale = core_->shared != nullptr;
    core_->PublishLocked(State::kClosed, 0, false, SecondOf(clock_.CoarseNow()));
  }
  // The fleet is joined by Create() (or the registry, after on_create).
}

CircuitBreaker::~CircuitBreaker() {
  if (core_->shared) core_->DetachFleet();
  {
    // Waits for a running timer callback; later ones find no breaker.
    std::lock_guard<std::mutex> guard(core_->link->mu);
    core_->link->breaker = nullptr;
  }
  internal::SpinMutexLock lock(&core_->mu);
  core_->CancelTimerLocked(core_->open_timer);
  core_->CancelTimerLocked(core_->half_open_timer);
  core_->CancelTimerLocked(core_->override_timer);
  delete core_->listeners.load(std::memory_order_relaxed);
}

bool CircuitBreaker::SetCallTimer(std::shared_ptr<CallTimer> timer) {
  if (timer == nullptr) return false;
  CallTimer* expected = nullptr;
  // Only the thread that wins this exchange writes the owner.
  if (!call_timer_.compare_exchange_strong(expected, timer.get(), std::memory_order_acq_rel)) {
    return false;
  }
  call_timer_owner_ = std::move(timer);
  return true;
}

void CircuitBreaker::RecordCallTime(CallTimer& timer, OutcomeKind kind, Duration d) noexcept {
  timer.Record(kind, d);
}

CircuitBreaker::Core::Core(CircuitBreaker& breaker, const CircuitBreakerConfig& c)
    : closed_window(c.sliding_window_type, c.sliding_window_size),
      probe_window(SlidingWindowType::kCountBased, c.permitted_number_of_calls_in_half_open_state),
      cb(breaker) {}

std::uint64_t CircuitBreaker::Core::SumSuccesses() const {
  std::uint64_t n = 0;
  for (int i = 0; i <= kSharedSlot; ++i) {
    n += cb.counters_[i].successes.load(std::memory_order_relaxed);
  }
  return n;
}

std::uint64_t CircuitBreaker::Core::SumRejected(int k) const {
  std::uint64_t n = 0;
  for (int i = 0; i <= kSharedSlot; ++i) {
    n += cb.counters_[i].rejected[k].load(std::memory_order_relaxed);
  }
  return n;
}

bool CircuitBreaker::Core::Listening(unsigned interest) const {
  const cb_internal::ListenerList* l = listeners.load(std::memory_order_acquire);
  return l != nullptr && (l->interests & interest) != 0;
}

CircuitBreakerTotals CircuitBreaker::totals() const {
  CircuitBreakerMetrics m;
  CircuitBreakerTotals t;
  Observe(m, t);
  return t;
}

void CircuitBreaker::Observe(CircuitBreakerMetrics& m, CircuitBreakerTotals& t) const {
  t = CircuitBreakerTotals{};
  std::uint64_t rejected = 0;
  for (int i = 0; i <= kSharedSlot; ++i) {
    const SlotCounters& c = counters_[i];
    for (std::size_t k = 0; k < 3; ++k) {
      t.calls[k] += static_cast<std::int64_t>(c.calls[k].load(std::memory_order_relaxed));
      t.call_time[k] +=
          Duration(static_cast<Duration::rep>(c.call_ns[k].load(std::memory_order_relaxed)));
    }
    rejected += c.rejected[0].load(std::memory_order_relaxed) +
                c.rejected[1].load(std::memory_order_relaxed);
  }
  t.not_permitted_calls = static_cast<std::int64_t>(rejected);
  internal::SpinMutexLock lock(&core_->mu);
  t.slow_successful_calls = core_->slow_calls[0];
  t.slow_failed_calls = core_->slow_calls[1];
  for (std::size_t k = 0; k < 3; ++k) t.probe_calls[k] = core_->probe_calls[k];
  m = core_->MetricsLocked(SecondOf(clock_.CoarseNow()));
}

CircuitBreakerMetrics CircuitBreaker::metrics() const {
  internal::SpinMutexLock lock(&core_->mu);
  return core_->MetricsLocked(SecondOf(clock_.CoarseNow()));
}

Outcome CircuitBreaker::ClassifyException(const std::exception_ptr& e) const noexcept {
  if (!config_.exception_classifier) return Outcome::Failure();
  try {
    return config_.exception_classifier(e);
  } catch (...) {
    return Outcome::Failure();  // A classifier that throws cannot hide a failure.
  }
}

namespace {
// Resilience4j 2.4.0's CircuitBreaker.StateTransition has no entry for these
// (from, to) pairs: transitionTo*State() throws
// IllegalStateTransitionException and leaves the state as it was.
// FORCED_CLOSED is fusebox's own and moves anywhere.
bool IllegalInResilience4j(State from, State to) {
  return (from == State::kClosed && to == State::kHalfOpen) ||
         (from == State::kMetricsOnly && (to == State::kOpen || to == State::kHalfOpen));
}
}  // namespace

Status CircuitBreaker::Core::OperatorTransition(State to, const OperatorInfo* op) {
  State from;
  bool refused;
  {
    internal::SpinMutexLock lock(&mu);
    from = StateOf(cb.word_.load(std::memory_order_relaxed));
    refused = cb.resilience4j_ && IllegalInResilience4j(from, to);
    if (!refused) {
      TransitionLocked(to, TransitionReason::kOperator, cb.clock_.Now(), Duration::zero(), op);
    }
  }
  if (refused) {
    // The message is built after the lock is released.
    return Status::InvalidArgument("illegal state transition from " + std::string(StateName(from)) +
                                   " to " + std::string(StateName(to)) + " (breaker \"" + cb.name_ +
                                   "\")");
  }
  Dispatch();
  return Status();
}

namespace {
cb_internal::OperatorInfo ToOperatorInfo(OverrideOptions&& o) {
  return cb_internal::OperatorInfo{std::move(o.reason), std::move(o.actor), o.expires_after};
}
}  // namespace

void CircuitBreaker::ForceOpen(OverrideOptions options) {
  const auto info = ToOperatorInfo(std::move(options));
  (void)core_->OperatorTransition(State::kForcedOpen, &info);  // Legal from every state.
}

void CircuitBreaker::ForceClosed(OverrideOptions options) {
  const auto info = ToOperatorInfo(std::move(options));
  (void)core_->OperatorTransition(State::kForcedClosed, &info);  // Legal from every state.
}

void CircuitBreaker::Disable(OverrideOptions options) {
  const auto info = ToOperatorInfo(std::move(options));
  (void)core_->OperatorTransition(State::kDisabled, &info);  // Legal from every state.
}

void CircuitBreaker::MetricsOnly(OverrideOptions options) {
  const auto info = ToOperatorInfo(std::move(options));
  (void)core_->OperatorTransition(State::kMetricsOnly, &info);  // Legal from every state.
}

void CircuitBreaker::Reset(std::string reason, std::string actor) {
  const Core::OperatorInfo info{reason.empty() ? std::string("reset") : std::move(reason),
                                std::move(actor), Duration::zero()};
  (void)core_->OperatorTransition(State::kClosed, &info);  // Legal from every state.
}

void CircuitBreaker::TransitionToClosed() {
  // Every state may move to CLOSED, in both modes.
  (void)core_->OperatorTransition(State::kClosed, nullptr);
}

Status CircuitBreaker::TransitionToOpen() {
  return core_->OperatorTransition(State::kOpen, nullptr);
}

Status CircuitBreaker::TransitionToHalfOpen() {
  return core_->OperatorTransition(State::kHalfOpen, nullptr);
}

std::optional<OverrideInfo> CircuitBreaker::active_override() const {
  internal::SpinMutexLock lock(&core_->mu);
  return core_->override_info;
}

std::uint64_t CircuitBreaker::AddListener(std::shared_ptr<CircuitBreakerListener> listener) {
  const unsigned interests = listener->interests() & CircuitBreakerListener::kAllEvents;
  internal::SpinMutexLock lock(&core_->mu);
  const cb_internal::ListenerList* old = core_->listeners.load(std::memory_order_relaxed);
  auto next = std::make_unique<cb_internal::ListenerList>();
  if (old != nullptr) *next = *old;
  const std::uint64_t id = core_->next_listener_id++;
  next->items.push_back({id, interests, std::move(listener)});
  next->interests |= interests;
  // Release: a reader that sees the new list sees it fully built.
  core_->listeners.store(next.release(), std::memory_order_release);
  if (old != nullptr) core_->retired.emplace_back(const_cast<cb_internal::ListenerList*>(old));
  core_->Republish(SecondOf(clock_.CoarseNow()));
  return id;
}

bool CircuitBreaker::RemoveListener(std::uint64_t id) {
  internal::SpinMutexLock lock(&core_->mu);
  const cb_internal::ListenerList* old = core_->listeners.load(std::memory_order_relaxed);
  if (old == nullptr) return false;
  auto next = std::make_unique<cb_internal::ListenerList>();
  bool found = false;
  for (const cb_internal::ListenerItem& item : old->items) {
    if (item.id == id) {
      found = true;
    } else {
      next->items.push_back(item);
      next->interests |= item.interests;
    }
  }
  if (!found) return false;
  core_->listeners.store(next.release(), std::memory_order_release);
  core_->retired.emplace_back(const_cast<cb_internal::ListenerList*>(old));
  core_->Republish(SecondOf(clock_.CoarseNow()));
  return true;
}

bool CircuitBreaker::IsQuiescent() const {
  internal::SpinMutexLock lock(&core_->mu);
  const State s = StateOf(word_.load(std::memory_order_relaxed));
  if (s != State::kClosed) return false;
  const std::int64_t second = SecondOf(clock_.CoarseNow());
  core_->FoldDeferredSuccessesLocked(second);
  return core_->closed_window.Totals(second).clean() && core_->consecutive_failures == 0;
}

}  // namespace fusebox
