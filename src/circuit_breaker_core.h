// The private half of CircuitBreaker: everything behind its state word.
//
// Concurrency design (see also docs/performance.md):
//   - word_ holds the state, the state epoch and a few flag bits. Every
//     transition happens under Core::mu and publishes the new word with a
//     release store; readers load it with acquire. The hot paths only read it.
//   - CLOSED admission is one acquire load. A non-slow success into a window
//     that holds no failure and no slow call changes no rate and, for a full
//     COUNT_BASED window, no count either (a success replaces a success), so it
//     writes nothing (kFastSuccessBit). For TIME_BASED the count still matters
//     (it is the denominator of later rates), so such successes go to the
//     thread's own slot word, or striped counters for threads without an
//     owned slot (kStripedSuccessBit), folded into the window, under the
//     lock, before anything reads it.
//   - OutcomeOrder::kRelaxed lets a failure that cannot trip the window be
//     counted without the lock too; its protocol is stated once, in
//     relaxed_outcome_log.h.
//   - Everything else (failures, slow calls, successes into a window that holds
//     failures, half-open probes, transitions) runs under Core::mu: exact
//     Resilience4j arithmetic, one lock, no lock-free cleverness where a
//     decision depends on the whole window.
//   - Listeners are never called under the lock. Transitions are queued under
//     the lock and delivered in order by one thread at a time.
//
// Core's methods live in one file per concern:
//   circuit_breaker.cc            construction, observation, operators, listeners
//   circuit_breaker_admission.cc  TryAcquire's general path, rejections, timers caught up
//   circuit_breaker_record.cc     recording outcomes, verdicts, metrics, the word's flags
//   circuit_breaker_transition.cc transitions, timers, delivery after the lock
//   circuit_breaker_relaxed.cc    OutcomeOrder::kRelaxed: grants, folds, settling
//   circuit_breaker_shared.cc     the fleet link (config.shared_state)
//   circuit_breaker_config.cc     CircuitBreakerConfig::Validate() and the enum names
#ifndef FUSEBOX_SRC_CIRCUIT_BREAKER_CORE_H_
#define FUSEBOX_SRC_CIRCUIT_BREAKER_CORE_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/internal/spin_mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "relaxed_outcome_log.h"
#include "sliding_window.h"

namespace fusebox {
namespace cb_internal {

constexpr int kStripes = 4;
constexpr std::uint64_t kLow32 = 0xFFFFFFFFull;
constexpr int kSharedSlot = internal::kSharedWriterSlot;
constexpr int kOwnedSlots = internal::kOwnedWriterSlots;

// The states fit under the state word's mask (internal/circuit_breaker_word.h).
static_assert(static_cast<std::uint64_t>(State::kForcedClosed) <= internal::kStateMask &&
                  static_cast<std::uint64_t>(State::kClosed) == 0,
              "states under kStateMask; CLOSED is 0, so TryAcquire() tests it with one mask");

inline std::int64_t SecondOf(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Resilience4j computes rates as Java floats: numberOfFailedCalls * 100.0f /
// numberOfBufferedCalls. The same float arithmetic gives the same decisions at
// the edges (1 in 3 is 33.333332f, not 33.333333...).
inline float RatePercent(std::int64_t part, std::int64_t total) {
  return static_cast<float>(part) * 100.0f / static_cast<float>(total);
}

inline bool IsOverrideState(State s) {
  return s == State::kDisabled || s == State::kMetricsOnly || s == State::kForcedOpen ||
         s == State::kForcedClosed;
}

inline TimePoint AddSaturated(TimePoint t, Duration d) {
  if (d > TimePoint::max() - t) return TimePoint::max();
  return t + d;
}

struct ListenerItem {
  std::uint64_t id = 0;
  // CircuitBreakerListener::Interest bits, read once when added.
  unsigned interests = 0;
  std::shared_ptr<CircuitBreakerListener> listener;
};

struct ListenerList {
  std::vector<ListenerItem> items;
  // The union of the items' interests.
  unsigned interests = 0;
};

// A transition waiting to be delivered; owns the strings its event points to.
struct PendingTransition {
  TransitionEvent event;
  std::string detail;
  std::string actor;
};

enum class TimerKind : std::uint8_t { kOpenEnd, kHalfOpenMaxWait, kOverrideExpiry };

// Lets a timer callback reach the breaker only while it is alive. The breaker
// owns one; each scheduled callback holds a shared_ptr to it, so it outlives
// the breaker if a timer is in flight. ~CircuitBreaker() clears `breaker`
// under `mu`, which also waits for a callback that is running.
struct TimerLink {
  std::mutex mu;
  CircuitBreaker* breaker = nullptr;
};

// Something to tell the shared state, decided under the lock and sent after
// it, in the order decided (Core::Dispatch()).
struct SharedAction {
  enum class Kind : std::uint8_t { kTrip, kClose, kRelease, kOverride };
  Kind kind = Kind::kTrip;
  Duration open_for = Duration::zero();
  // TransitionReasonName(): static storage.
  std::string_view reason{};
  std::string token{};
  // kOverride.
  SharedOverride override_{};
};

// Fast TIME_BASED successes of the threads without an owned writer slot:
// high 32 bits the epoch second (mod 2^32) they were reported in, low 32
// bits their number.
struct alignas(64) Stripe {
  std::atomic<std::uint64_t> word{0};
};

// An operator's transition: who and why.
struct OperatorInfo {
  std::string reason;
  std::string actor;
  Duration expires_after = Duration::zero();
  // Set by another instance (OnSharedOverride): not published again.
  bool from_fleet = false;
};

}  // namespace cb_internal

// Aligned so that the lock and the closed window, which every locked path
// touches, start a cache line and share as few lines as possible.
struct alignas(64) CircuitBreaker::Core {
  using OperatorInfo = cb_internal::OperatorInfo;
  using PendingTransition = cb_internal::PendingTransition;
  using SharedAction = cb_internal::SharedAction;
  using TimerKind = cb_internal::TimerKind;
  class FleetLink;

  Core(CircuitBreaker& breaker, const CircuitBreakerConfig& c);

  // ======================================================================
  // Fields, grouped by what guards them.
  // ======================================================================

  // A spin lock: every critical section here is a few dozen nanoseconds of
  // arithmetic (plus, on transitions only, a clock timer call), and a
  // std::mutex made two contending threads 4x slower than one (futex calls).
  mutable internal::SpinMutex mu;

  // --- Protected by mu: the windows and what a failure in CLOSED touches
  // (first, so that it spans as few cache lines as possible: a line moving
  // between cores costs ~200 ns here). With mu, the four fields below and
  // owned slots 0 and 1 fill the first line (16 + 2 x 24 bytes), and the
  // closed window's hot fields (88 bytes) take two more: what a lock holder
  // writes with two threads is three lines, in either order (kRelaxed wrote
  // five before; docs/performance.md, "Three lines a grant"). Measured, not
  // guessed: the window one line further on (aligned to a line) left
  // kRelaxed as it is and cost the default order a third of its two-thread
  // throughput. ---
  // Set while TransitionLocked() runs: folds leave deferred failures (and
  // what their threads reported after them) for after the transition.
  bool hold_deferred_failures FUSEBOX_GUARDED_BY(mu) = false;
  // OutcomeOrder::kRelaxed: a bit per owned slot whose thread was granted an
  // allowance (or asked for one and found none free) since the last
  // withdrawal; GrantLocked() shares the room among them.
  std::uint8_t allowance_seekers FUSEBOX_GUARDED_BY(mu) = 0;
  static_assert(cb_internal::kOwnedSlots <= 8, "a bit per owned slot in allowance_seekers");
  int consecutive_failures FUSEBOX_GUARDED_BY(mu) = 0;
  // Sum of the slot counters' deferred successes already in the window
  // (OutcomeOrder::kRelaxed: the shared slot's only).
  std::uint64_t successes_applied FUSEBOX_GUARDED_BY(mu) = 0;
  // What the lock holder keeps of owned slot i, written by folds and grants.
  struct SlotFold {
    // OutcomeOrder::kRelaxed: the slot's deferred successes and failures
    // already in the window (relaxed_outcome_log.h, invariant 2). TIME_BASED:
    // the slot's successes word as the last fold applied it.
    std::uint64_t successes_applied = 0;
    std::uint64_t failures_applied = 0;
    // OutcomeOrder::kRelaxed: the slot's limit as the last grant or
    // withdrawal set it (what the log's limit holds): a grant reads these,
    // next to the fields it writes, rather than the other threads' limit
    // lines in the log.
    std::uint64_t limit = 0;
  };
  SlotFold slot_folds[cb_internal::kOwnedSlots] FUSEBOX_GUARDED_BY(mu) = {};
  internal::SlidingWindow closed_window FUSEBOX_GUARDED_BY(mu);
  // Resilience4j's half-open metrics: COUNT_BASED of size permitted, whatever
  // the closed window's type.
  internal::SlidingWindow probe_window FUSEBOX_GUARDED_BY(mu);
  int half_open_available FUSEBOX_GUARDED_BY(mu) = 0;
  int half_open_successes FUSEBOX_GUARDED_BY(mu) = 0;
  int open_attempts FUSEBOX_GUARDED_BY(mu) = 0;
  TimePoint state_since FUSEBOX_GUARDED_BY(mu){};
  std::optional<OverrideInfo> override_info FUSEBOX_GUARDED_BY(mu);
  std::uint64_t jitter_state FUSEBOX_GUARDED_BY(mu) = 0;
  std::int64_t late_outcomes FUSEBOX_GUARDED_BY(mu) = 0;
  // Cumulative, for totals(): slow calls (success, failure) and half-open
  // probe outcomes by OutcomeKind.
  std::int64_t slow_calls[2] FUSEBOX_GUARDED_BY(mu) = {0, 0};
  std::int64_t probe_calls[3] FUSEBOX_GUARDED_BY(mu) = {0, 0, 0};
  // Sums of the slot counters' rejections before the current metrics began.
  std::uint64_t rejected_base[2] FUSEBOX_GUARDED_BY(mu) = {};

  // --- Protected by mu: listeners, delivery, timers. ---
  // Replaced listener lists, retired rather than freed until the breaker dies
  // (see `listeners`).
  std::vector<std::unique_ptr<cb_internal::ListenerList>> retired FUSEBOX_GUARDED_BY(mu);
  std::uint64_t next_listener_id FUSEBOX_GUARDED_BY(mu) = 1;
  std::vector<PendingTransition> pending FUSEBOX_GUARDED_BY(mu);
  bool dispatching FUSEBOX_GUARDED_BY(mu) = false;
  TimerId open_timer FUSEBOX_GUARDED_BY(mu) = 0;
  TimerId half_open_timer FUSEBOX_GUARDED_BY(mu) = 0;
  TimerId override_timer FUSEBOX_GUARDED_BY(mu) = 0;

  // --- Protected by mu: the fleet (all unset without a shared state). ---
  // The fleet may know more than this breaker: re-read before the next call
  // (published as internal::kSharedStaleBit).
  bool shared_stale FUSEBOX_GUARDED_BY(mu) = false;
  // The fleet's probe lease, while this breaker holds it (HALF_OPEN only).
  std::string lease_token FUSEBOX_GUARDED_BY(mu);
  // OPEN's own wait is over and another instance probes: the deadline is
  // when to ask the fleet again, not an OPEN to replay at a resync (that
  // would fence the probe). Cleared by any transition or extension.
  bool awaiting_fleet_probe FUSEBOX_GUARDED_BY(mu) = false;
  std::vector<SharedAction> shared_pending FUSEBOX_GUARDED_BY(mu);

  // --- Atomics read without the lock, each with its protocol. ---
  // Relaxed counter: only ever summed for metrics.
  std::atomic<std::int64_t> listener_errors{0};
  // The list is replaced under mu, never modified, so that readers on the
  // hot path walk a snapshot without a lock: release store, acquire load (a
  // reader that sees the new list sees it fully built).
  std::atomic<const cb_internal::ListenerList*> listeners{nullptr};
  // Set with `pending` or `shared_pending` non-empty, under mu; lets
  // Dispatch() return without the lock in the common case of nothing to
  // deliver. Relaxed: the thread that queued sets it itself.
  std::atomic<bool> has_pending{false};
  // One Read() or AcquireProbe() at a time per breaker (single-flight):
  // exchange(acquire) to claim, store(release) + notify_all to hand back.
  // Calls that need a Read() meanwhile wait for its answer (std::atomic
  // wait); calls that meet an AcquireProbe() in flight are rejected as OPEN,
  // as they would be anywhere in the fleet while one instance probes.
  std::atomic<bool> shared_busy{false};

  // --- Constant after construction (set by CircuitBreaker's constructor,
  // before any other thread can see the breaker). ---
  CircuitBreaker& cb;
  std::shared_ptr<cb_internal::TimerLink> link = std::make_shared<cb_internal::TimerLink>();
  // kTimeBased only: for the threads that share kSharedSlot.
  std::unique_ptr<cb_internal::Stripe[]> stripes;
  // config.shared_state, and this breaker's subscription to it.
  std::shared_ptr<SharedState> shared;
  std::shared_ptr<FleetLink> shared_link;
  SharedState::SubscriptionId subscription = 0;

  // ======================================================================
  // Methods, by the file that defines them.
  // ======================================================================

  // --- circuit_breaker.cc ---
  std::uint64_t SumSuccesses() const;
  std::uint64_t SumRejected(int k) const;
  // Whether some listener wants `interest` (CircuitBreakerListener::Interest).
  bool Listening(unsigned interest) const;
  // Calls `call(listener)` for each listener that wants `interest`, without
  // the lock; counts what they throw.
  template <typename F>
  void ForEachListener(unsigned interest, F&& call) {
    const cb_internal::ListenerList* l = listeners.load(std::memory_order_acquire);
    if (l == nullptr) return;
    for (const cb_internal::ListenerItem& item : l->items) {
      if (!(item.interests & interest)) continue;
      try {
        call(*item.listener);
      } catch (...) {
        listener_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }
  // Locks, moves to `to` for an operator, delivers. kResilience4j refuses
  // the moves Resilience4j's StateTransition table lacks (kInvalidArgument,
  // nothing changed); kDefault takes every move.
  Status OperatorTransition(State to, const OperatorInfo* op) FUSEBOX_EXCLUDES(mu);

  // --- circuit_breaker_admission.cc ---
  // Counts a rejection of a call in the state of `word`, tells listeners.
  Result<Permit> Reject(std::uint64_t word, const char* reason, std::optional<TimePoint> retry_at);
  void NotifyRejection(State state, const char* reason, std::optional<TimePoint> retry_at);
  // Admission in the state of `word`, once timers have been caught up with:
  // nullptr (admitted; `half_open_slot` says whether it took a probe slot) or
  // the rejection reason, with `retry_at` when the state has an end.
  const char* AdmitLocked(std::uint64_t word, bool& half_open_slot,
                          std::optional<TimePoint>& retry_at) FUSEBOX_REQUIRES(mu);
  // Lazily applies what a timer would have done by `now`; returns the word.
  std::uint64_t CatchUpLocked(TimePoint now) FUSEBOX_REQUIRES(mu);

  // --- circuit_breaker_record.cc ---
  // Brings into the closed window the successes counted without the lock.
  void FoldDeferredSuccessesLocked(std::int64_t second, std::uint64_t seen = 0)
      FUSEBOX_REQUIRES(mu);
  void AddDeferredSuccessesLocked(std::uint64_t n) FUSEBOX_REQUIRES(mu);
  // The window behind the current metrics.
  internal::SlidingWindow& MetricsWindowLocked(std::uint64_t word) FUSEBOX_REQUIRES(mu);
  int MinimumCalls(bool probe) const;
  CircuitBreakerMetrics MetricsLocked(std::int64_t second) FUSEBOX_REQUIRES(mu);
  void PublishLocked(State state, std::uint32_t epoch, bool probe, std::int64_t second)
      FUSEBOX_REQUIRES(mu);
  void Republish(std::int64_t second) FUSEBOX_REQUIRES(mu);
  void RecordInStateLocked(std::uint64_t word, std::int64_t second, OutcomeKind kind, bool slow,
                           bool half_open_slot, std::uint64_t successes_seen) FUSEBOX_REQUIRES(mu);
  void CheckClosedLocked(std::int64_t second, bool failed) FUSEBOX_REQUIRES(mu);
  void CheckHalfOpenLocked(TimePoint now, bool failed, bool slow) FUSEBOX_REQUIRES(mu);
  void NotifyOutcome(const OutcomeEvent& event);

  // --- circuit_breaker_transition.cc ---
  // Moves to `to`, starting a new state epoch. `open_for` > 0 fixes the OPEN
  // duration (an outcome's hint or transitionToOpenStateFor); `op` describes an
  // operator transition.
  void TransitionLocked(State to, TransitionReason reason, TimePoint now,
                        Duration open_for = Duration::zero(), const OperatorInfo* op = nullptr)
      FUSEBOX_REQUIRES(mu);
  struct Entered;
  void EnterLocked(State to, TimePoint now, Duration open_for, const OperatorInfo* op,
                   std::uint32_t epoch, Entered& e) FUSEBOX_REQUIRES(mu);
  // CLOSED's window and everything counted against it, afresh.
  void ResetClosedLocked() FUSEBOX_REQUIRES(mu);
  void ExtendOpenLocked(TimePoint now, Duration open_for, bool share = true) FUSEBOX_REQUIRES(mu);
  // An outcome's open_for hint: extends OPEN, or opens CLOSED or HALF_OPEN.
  void OpenForHintLocked(TimePoint now, Duration open_for) FUSEBOX_REQUIRES(mu);
  Duration OpenDurationLocked(int attempt) FUSEBOX_REQUIRES(mu);
  void QueueTransitionLocked(PendingTransition p) FUSEBOX_REQUIRES(mu);
  void CancelTimerLocked(TimerId& id) FUSEBOX_REQUIRES(mu);
  TimerId ScheduleLocked(TimePoint at, TimerKind kind, std::uint32_t epoch) FUSEBOX_REQUIRES(mu);
  void OnTimer(TimerKind kind, std::uint32_t epoch) FUSEBOX_EXCLUDES(mu);
  void Dispatch() FUSEBOX_EXCLUDES(mu);

  // --- circuit_breaker_relaxed.cc (OutcomeOrder::kRelaxed) ---
  internal::RelaxedOutcomeLog& log() const { return *cb.relaxed_log_; }
  int FoldSlotsLocked(std::int64_t second, bool decide) FUSEBOX_REQUIRES(mu);
  int FoldSlotLocked(int i, std::int64_t second, bool decide) FUSEBOX_REQUIRES(mu);
  int FoldSlotInBulkLocked(int i, const internal::RelaxedOutcomeLog::Snapshot& snap,
                           std::int64_t second) FUSEBOX_REQUIRES(mu);
  void FoldForFailureLocked(std::int64_t second) FUSEBOX_REQUIRES(mu);
  bool ReachesThresholdLocked(std::int64_t second) FUSEBOX_REQUIRES(mu);
  void ApplyDeferredFailureLocked(std::int64_t second, std::uint64_t epoch_low)
      FUSEBOX_REQUIRES(mu);
  bool GrantLocked(const internal::WindowTotals& t) FUSEBOX_REQUIRES(mu);
  std::int64_t AllowanceLocked(const internal::WindowTotals& t, std::int64_t cap)
      FUSEBOX_REQUIRES(mu);
  void SettleDeferred() FUSEBOX_EXCLUDES(mu);

  // --- circuit_breaker_shared.cc (the fleet) ---
  void AttachFleet(std::shared_ptr<SharedState> store);
  // Last in the constructor: from then on the store may call in.
  void SubscribeFleet();
  void DetachFleet() FUSEBOX_EXCLUDES(mu);
  void ApplyLeaseLocked(ProbeLease& lease, TimePoint now) FUSEBOX_REQUIRES(mu);
  void QueueSharedLocked(SharedAction action) FUSEBOX_REQUIRES(mu);
  void ShareTransitionLocked(State from, State to, TransitionReason reason, Duration opened_for,
                             const OperatorInfo* op) FUSEBOX_REQUIRES(mu);
  void RunShared(const SharedAction& a);
  void ApplySharedOverrideLocked(const SharedOverride& o, TimePoint now) FUSEBOX_REQUIRES(mu);
  void ApplySharedViewLocked(const SharedCircuitView& view) FUSEBOX_REQUIRES(mu);
  void OnSharedOverride(const SharedOverride& o) FUSEBOX_EXCLUDES(mu);
  void OnSharedOpen(Duration remaining) FUSEBOX_EXCLUDES(mu);
  void OnSharedClosed() FUSEBOX_EXCLUDES(mu);
  void OnSharedResync() FUSEBOX_EXCLUDES(mu);
  void SyncShared() FUSEBOX_EXCLUDES(mu);
  void AwaitSharedAnswer() FUSEBOX_EXCLUDES(mu);
};

}  // namespace fusebox

#endif  // FUSEBOX_SRC_CIRCUIT_BREAKER_CORE_H_
