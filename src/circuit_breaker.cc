// The circuit breaker's state machine.
//
// Concurrency design (see also docs/performance.md):
//   - word_ holds the state, the state epoch and a few flag bits. Every
//     transition happens under Core::mu and publishes the new word with a
//     release store; readers load it with acquire. The hot paths only read it.
//   - CLOSED admission is one acquire load. A non-slow success into a window
//     that holds no failure and no slow call changes no rate and, for a full
//     COUNT_BASED window, no count either (a success replaces a success), so it
//     writes nothing (kFastSuccessBit). For TIME_BASED the count still matters
//     (it is the denominator of later rates), so such successes go to striped
//     per-thread counters (kStripedSuccessBit) that are folded into the window,
//     under the lock, before anything reads it.
//   - Everything else (failures, slow calls, successes into a window that holds
//     failures, half-open probes, transitions) runs under Core::mu: exact
//     Resilience4j arithmetic, one lock, no lock-free cleverness where a
//     decision depends on the whole window.
//   - Listeners are never called under the lock. Transitions are queued under
//     the lock and delivered in order by one thread at a time.
#include "fusebox/circuit_breaker.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "fusebox/internal/spin_mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "sliding_window.h"

namespace fusebox {
namespace {

using internal::kEpochShift;
using internal::kFastSuccessBit;
using internal::kProbeMetricsBit;
using internal::kRejectionListenersBit;
using internal::kStateMask;
using internal::kStripedSuccessBit;

constexpr int kStripes = 4;
constexpr std::uint64_t kLow32 = 0xFFFFFFFFull;

std::int64_t SecondOf(TimePoint t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// Resilience4j computes rates as Java floats: numberOfFailedCalls * 100.0f /
// numberOfBufferedCalls. The same float arithmetic gives the same decisions at
// the edges (1 in 3 is 33.333332f, not 33.333333...).
float RatePercent(std::int64_t part, std::int64_t total) {
  return static_cast<float>(part) * 100.0f / static_cast<float>(total);
}

int Clamp(std::int64_t v) {
  return static_cast<int>(std::min<std::int64_t>(v, std::numeric_limits<int>::max()));
}

std::uint64_t SplitMix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The stripe this thread adds its fast TIME_BASED successes to. Threads start
// spread round-robin and move to the next stripe whenever they meet another
// writer on theirs (as Java's LongAdder rehashes on contention), so that two
// busy threads settle on different cache lines.
thread_local unsigned t_stripe = [] {
  static std::atomic<unsigned> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) % kStripes;
}();

// Writer slots for CircuitBreaker::counters_ (internal::WriterSlot(),
// circuit_breaker.h). Up to kOwnedWriterSlots threads at a time each own one
// slot index, the same in every breaker, and are its only writer: they add
// with a relaxed load and store, which costs a plain add instead of a locked
// one. Threads beyond that share the last slot and use fetch_add. A slot is
// handed back when its thread exits; the release and the next claim (acq_rel
// on g_slots) order the old owner's last store before the new owner's first
// load, so counts carry over exactly. Readers only sum slots; they never write
// them (a reset subtracts a remembered base instead).
using internal::kOwnedWriterSlots;
constexpr int kSharedSlot = internal::kSharedWriterSlot;
std::atomic<std::uint32_t> g_slots{0};

struct SlotRelease {
  ~SlotRelease() {
    const int slot = internal::t_writer_slot;
    if (slot >= 0 && slot < kOwnedWriterSlots) {
      g_slots.fetch_and(~(1u << slot), std::memory_order_acq_rel);
    }
  }
};

inline int MySlot() { return internal::WriterSlot(); }

inline void Bump(std::atomic<std::uint64_t>& counter, int slot) {
  internal::AddToSlot(counter, slot, 1);
}

bool IsOverrideState(State s) {
  return s == State::kDisabled || s == State::kMetricsOnly || s == State::kForcedOpen ||
         s == State::kForcedClosed;
}

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

std::string_view StateName(State state) noexcept {
  switch (state) {
    case State::kClosed:
      return "CLOSED";
    case State::kOpen:
      return "OPEN";
    case State::kHalfOpen:
      return "HALF_OPEN";
    case State::kDisabled:
      return "DISABLED";
    case State::kMetricsOnly:
      return "METRICS_ONLY";
    case State::kForcedOpen:
      return "FORCED_OPEN";
    case State::kForcedClosed:
      return "FORCED_CLOSED";
  }
  return "UNKNOWN";
}

std::string_view OutcomeKindName(OutcomeKind kind) noexcept {
  switch (kind) {
    case OutcomeKind::kSuccess:
      return "success";
    case OutcomeKind::kFailure:
      return "failure";
    case OutcomeKind::kIgnored:
      return "ignored";
  }
  return "unknown";
}

std::string_view TransitionReasonName(TransitionReason reason) noexcept {
  switch (reason) {
    case TransitionReason::kFailureRate:
      return "failure_rate_exceeded";
    case TransitionReason::kSlowCallRate:
      return "slow_call_rate_exceeded";
    case TransitionReason::kConsecutiveFailures:
      return "consecutive_failures";
    case TransitionReason::kOpenForHint:
      return "retry_after_hint";
    case TransitionReason::kWaitElapsed:
      return "wait_elapsed";
    case TransitionReason::kProbesSucceeded:
      return "probes_succeeded";
    case TransitionReason::kProbesFailed:
      return "probes_failed";
    case TransitionReason::kHalfOpenTimeout:
      return "half_open_timeout";
    case TransitionReason::kOverrideExpired:
      return "override_expired";
    case TransitionReason::kOperator:
      return "operator";
    case TransitionReason::kSharedOpen:
      return "shared_open";
    case TransitionReason::kSharedClosed:
      return "shared_closed";
  }
  return "unknown";
}

Status CircuitBreakerConfig::Validate() const {
  auto bad = [](const char* field, const std::string& rule) {
    return Status::InvalidArgument(std::string(field) + " " + rule);
  };
  auto ns = [](Duration d) { return std::to_string(d.count()) + " ns"; };
  if (!(failure_rate_threshold > 0 && failure_rate_threshold <= 100)) {
    return bad("failure_rate_threshold",
               "must be in (0, 100], got " + std::to_string(failure_rate_threshold));
  }
  if (!(slow_call_rate_threshold > 0 && slow_call_rate_threshold <= 100)) {
    return bad("slow_call_rate_threshold",
               "must be in (0, 100], got " + std::to_string(slow_call_rate_threshold));
  }
  if (slow_call_duration_threshold <= Duration::zero()) {
    return bad("slow_call_duration_threshold",
               "must be > 0, got " + ns(slow_call_duration_threshold));
  }
  if (permitted_number_of_calls_in_half_open_state < 1) {
    return bad("permitted_number_of_calls_in_half_open_state",
               "must be >= 1, got " + std::to_string(permitted_number_of_calls_in_half_open_state));
  }
  if (max_wait_duration_in_half_open_state < Duration::zero()) {
    return bad("max_wait_duration_in_half_open_state",
               "must be >= 0 (0 means no limit), got " + ns(max_wait_duration_in_half_open_state));
  }
  if (transition_to_state_after_wait_duration != State::kOpen &&
      transition_to_state_after_wait_duration != State::kClosed) {
    return bad("transition_to_state_after_wait_duration",
               "must be OPEN or CLOSED, got " +
                   std::string(StateName(transition_to_state_after_wait_duration)));
  }
  if (sliding_window_type != SlidingWindowType::kCountBased &&
      sliding_window_type != SlidingWindowType::kTimeBased) {
    return bad("sliding_window_type", "must be COUNT_BASED or TIME_BASED");
  }
  if (sliding_window_size < 1) {
    return bad("sliding_window_size", "must be >= 1, got " + std::to_string(sliding_window_size));
  }
  if (const bool timed = sliding_window_type == SlidingWindowType::kTimeBased;
      sliding_window_size > (timed ? kMaxTimeBasedWindowSeconds : kMaxCountBasedWindowSize)) {
    return bad("sliding_window_size",
               timed ? "must be <= " + std::to_string(kMaxTimeBasedWindowSeconds) +
                           " (seconds, TIME_BASED), got " + std::to_string(sliding_window_size)
                     : "must be <= " + std::to_string(kMaxCountBasedWindowSize) +
                           " (calls, COUNT_BASED), got " + std::to_string(sliding_window_size));
  }
  if (permitted_number_of_calls_in_half_open_state > kMaxCountBasedWindowSize) {
    return bad("permitted_number_of_calls_in_half_open_state",
               "must be <= " + std::to_string(kMaxCountBasedWindowSize) + ", got " +
                   std::to_string(permitted_number_of_calls_in_half_open_state));
  }
  if (minimum_number_of_calls < 1) {
    return bad("minimum_number_of_calls",
               "must be >= 1, got " + std::to_string(minimum_number_of_calls));
  }
  if (wait_duration_in_open_state <= Duration::zero() && !wait_interval_function) {
    return bad("wait_duration_in_open_state",
               "must be > 0, got " + ns(wait_duration_in_open_state));
  }
  if (consecutive_failure_threshold < 0) {
    return bad("consecutive_failure_threshold", "must be >= 0 (0 disables it), got " +
                                                    std::to_string(consecutive_failure_threshold));
  }
  if (!(open_duration_jitter >= 0 && open_duration_jitter < 1)) {
    return bad("open_duration_jitter",
               "must be in [0, 1), got " + std::to_string(open_duration_jitter));
  }
  if (half_open_policy != HalfOpenPolicy::kFailureRate &&
      half_open_policy != HalfOpenPolicy::kAnyFailureReopens) {
    return bad("half_open_policy", "must be kFailureRate or kAnyFailureReopens");
  }
  if (compatibility != Compatibility::kDefault && compatibility != Compatibility::kResilience4j) {
    return bad("compatibility", "must be kDefault or kResilience4j");
  }
  if (call_timing != CallTiming::kAuto && call_timing != CallTiming::kPrecise &&
      call_timing != CallTiming::kCoarse) {
    return bad("call_timing", "must be kAuto, kPrecise or kCoarse");
  }
  if (outcome_order != OutcomeOrder::kLinearizable && outcome_order != OutcomeOrder::kRelaxed) {
    return bad("outcome_order", "must be kLinearizable or kRelaxed");
  }
  if (shared_probe_lease <= Duration::zero()) {
    return bad("shared_probe_lease", "must be > 0, got " + ns(shared_probe_lease));
  }
  return Status();
}

// ---------------------------------------------------------------------------

namespace {

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

// One thread's share of fast TIME_BASED successes: high 32 bits the epoch
// second (mod 2^32) they were reported in, low 32 bits their number.
struct alignas(64) Stripe {
  std::atomic<std::uint64_t> word{0};
};

}  // namespace

// Aligned so that the lock and the closed window, which every locked path
// touches, start a cache line and share as few lines as possible.
// OutcomeOrder::kRelaxed: the failures a writer slot's thread counted without
// the lock (CircuitBreaker::DeferFailureSlow()), in its order among the
// slot's deferred successes. Written only by the slot's owner, on lines of
// their own: the owner keeps them in its cache, and other threads read them
// only when they fold every slot (see Core::FoldSlotsLocked()).
struct alignas(64) CircuitBreaker::FailureLog {
  static constexpr int kEntries = 31;
  // Failures counted so far. Stored seq_cst (see DeferFailureSlow()), which
  // also releases the entry and the slot's successes written before it.
  std::atomic<std::uint64_t> count{0};
  // Failure n at entry[n % kEntries]: the slot's `successes` when it was
  // counted (its place among them; low 48 bits) << 16 | the low 16 bits of
  // its state epoch.
  std::atomic<std::uint64_t> entry[kEntries] = {};
};

struct alignas(64) CircuitBreaker::Core {
  static_assert(sizeof(FailureLog) == 256);
  static constexpr int kLogEntries = FailureLog::kEntries;
  static constexpr std::uint64_t kEpochLowMask = 0xFFFF;
  static constexpr std::uint64_t kPositionMask = (std::uint64_t{1} << 48) - 1;

  explicit Core(CircuitBreaker& breaker, const CircuitBreakerConfig& c)
      : closed_window(c.sliding_window_type, c.sliding_window_size),
        probe_window(SlidingWindowType::kCountBased,
                     c.permitted_number_of_calls_in_half_open_state),
        cb(breaker) {}

  // A spin lock: every critical section here is a few dozen nanoseconds of
  // arithmetic (plus, on transitions only, a clock timer call), and a
  // std::mutex made two contending threads 4x slower than one (futex calls).
  mutable internal::SpinMutex mu;
  // What a failure in CLOSED touches comes first, so that it spans as few
  // cache lines as possible (a line moving between cores costs ~200 ns here).
  int consecutive_failures FUSEBOX_GUARDED_BY(mu) = 0;
  // Sum of the slot counters' deferred successes already in the window
  // (OutcomeOrder::kRelaxed: the shared slot's only).
  std::uint64_t successes_applied FUSEBOX_GUARDED_BY(mu) = 0;
  // OutcomeOrder::kRelaxed: each owned slot's deferred successes and
  // failures already in the window.
  std::uint64_t slot_successes_applied[kOwnedWriterSlots] FUSEBOX_GUARDED_BY(mu) = {};
  std::uint64_t slot_failures_applied[kOwnedWriterSlots] FUSEBOX_GUARDED_BY(mu) = {};
  // Set while TransitionLocked() runs: folds leave deferred failures (and
  // what their threads reported after them) for after the transition.
  bool hold_deferred_failures FUSEBOX_GUARDED_BY(mu) = false;
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
  std::atomic<std::int64_t> listener_errors{0};

  // Listeners: the list is replaced, never modified, so that readers on the
  // hot path can walk a snapshot without a lock. Replaced lists are retired,
  // not freed, until the breaker dies: adding listeners is rare, and this
  // avoids any reclamation scheme.
  std::atomic<const ListenerList*> listeners{nullptr};
  std::vector<std::unique_ptr<ListenerList>> retired FUSEBOX_GUARDED_BY(mu);
  std::uint64_t next_listener_id FUSEBOX_GUARDED_BY(mu) = 1;

  std::vector<PendingTransition> pending FUSEBOX_GUARDED_BY(mu);
  // Set with `pending` non-empty, under mu; lets Dispatch() return without the
  // lock in the common case of nothing to deliver.
  std::atomic<bool> has_pending{false};
  bool dispatching FUSEBOX_GUARDED_BY(mu) = false;

  std::shared_ptr<TimerLink> link = std::make_shared<TimerLink>();
  TimerId open_timer FUSEBOX_GUARDED_BY(mu) = 0;
  TimerId half_open_timer FUSEBOX_GUARDED_BY(mu) = 0;
  TimerId override_timer FUSEBOX_GUARDED_BY(mu) = 0;

  // --- Shared state (config.shared_state); all unset without one. ---
  std::shared_ptr<SharedState> shared;
  // Lets the shared state reach the breaker only while it is alive: the store
  // holds a shared_ptr to it, and ~CircuitBreaker() detaches it, waiting for
  // deliveries in flight. Unlike TimerLink no lock is held while delivering:
  // a delivery may cause another on the same thread (an in-process store
  // echoing a trip back to its sender).
  class Link final : public SharedStateListener {
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
  std::shared_ptr<Link> shared_link;
  SharedState::SubscriptionId subscription = 0;
  // The fleet may know more than this breaker: re-read before the next call
  // (published as internal::kSharedStaleBit).
  bool shared_stale FUSEBOX_GUARDED_BY(mu) = false;
  // The fleet's probe lease, while this breaker holds it (HALF_OPEN only).
  std::string lease_token FUSEBOX_GUARDED_BY(mu);
  std::vector<SharedAction> shared_pending FUSEBOX_GUARDED_BY(mu);
  // One Read() or AcquireProbe() at a time per breaker (single-flight).
  // Calls that need a Read() meanwhile wait for its answer (std::atomic
  // wait/notify); calls that meet an AcquireProbe() in flight are rejected as
  // OPEN, as they would be anywhere in the fleet while one instance probes.
  std::atomic<bool> shared_busy{false};

  CircuitBreaker& cb;
  // kTimeBased only.
  std::unique_ptr<Stripe[]> stripes;
  // Sums of the slot counters' rejections before the current metrics began.
  std::uint64_t rejected_base[2] FUSEBOX_GUARDED_BY(mu) = {};

  // --- OutcomeOrder::kRelaxed: read by every deferred failure, written only
  // by grants and withdrawals, so on lines of their own. ---
  // Slot i's owner may count its failure number FailureLog::count only while
  // count < failure_limits[i]. Written under mu, read by the owners; one line
  // for all slots, so that a grant reads no line another thread keeps
  // writing.
  alignas(64) std::atomic<std::uint64_t> failure_limits[kOwnedWriterSlots] = {};
  // Withdrawals so far (PublishLocked()): a thread that read a limit before
  // one and counts a failure after it must settle it, even if by then a new
  // grant has made the state word look as it did (DeferFailureSlow()).
  std::atomic<std::uint64_t> withdrawals{0};
  char pad_after_allowances[64 - sizeof(std::atomic<std::uint64_t>)] = {};

  std::uint64_t SumSuccesses() const {
    std::uint64_t n = 0;
    for (int i = 0; i <= kSharedSlot; ++i)
      n += cb.counters_[i].successes.load(std::memory_order_relaxed);
    return n;
  }
  std::uint64_t SumRejected(int k) const {
    std::uint64_t n = 0;
    for (int i = 0; i <= kSharedSlot; ++i)
      n += cb.counters_[i].rejected[k].load(std::memory_order_relaxed);
    return n;
  }
  // Starts the rejection count of metrics `k` (0 closed, 1 probe) afresh.
  void ResetRejectedLocked(int k) FUSEBOX_REQUIRES(mu) { rejected_base[k] = SumRejected(k); }

  // Whether some listener wants `interest` (CircuitBreakerListener::Interest).
  bool Listening(unsigned interest) const {
    const ListenerList* l = listeners.load(std::memory_order_acquire);
    return l != nullptr && (l->interests & interest) != 0;
  }

  TimePoint CoarseNow() { return cb.clock_.CoarseNow(); }

  // Brings into the closed window the successes that were counted without the
  // lock: TIME_BASED striped counters (re-armed for `second`) and COUNT_BASED
  // deferred successes. Every locked path that reads or changes the closed
  // window calls it first, so none of them is ever lost.
  //
  // `seen`, when given, is SumSuccesses() read before the lock was taken:
  // reading other threads' counter lines costs a cache line transfer each,
  // better paid before the lock than while the other thread waits for it. It
  // still includes every success reported before the caller's outcome.
  void FoldStripesLocked(std::int64_t second, std::uint64_t seen = 0) FUSEBOX_REQUIRES(mu) {
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
  void AddDeferredSuccessesLocked(std::uint64_t n) FUSEBOX_REQUIRES(mu) {
    if (n == 0) return;
    // More successes than the ring holds leave the same ring as `size` of
    // them would.
    closed_window.RecordSuccesses(
        static_cast<std::int64_t>(std::min<std::uint64_t>(n, closed_window.size())));
    consecutive_failures = 0;
  }

  // OutcomeOrder::kRelaxed: brings in each owned slot's deferred successes and
  // failures in that slot's order (different slots' in slot order: their
  // threads reported them concurrently), then the shared slot's successes.
  // Returns how many failures it applied.
  //
  // A slot's successes are read (acquire) before its failure count, so that
  // every failure counted before them is seen: none of the thread's later
  // successes goes in ahead of it. A failure whose place lies beyond the
  // successes read waits for the next fold.
  //
  // Within their allowances deferred failures cannot trip the window. Only
  // after a withdrawal can one reach the threshold (an allowance outgrown, or
  // a failure counted as it was withdrawn); then the fold that applies it
  // must decide there and then, as its own call would have. `decide`: this
  // fold trips the breaker at that failure, and the failures after it go in
  // after the transition. Otherwise it leaves such a failure (and what its
  // thread reported after it) for a deciding fold: the withdrawal's, or its
  // own thread's (SettleDeferred()).
  int FoldSlotsLocked(std::int64_t second, bool decide) FUSEBOX_REQUIRES(mu) {
    int failures = 0;
    for (int i = 0; i < kOwnedWriterSlots; ++i) failures += FoldSlotLocked(i, second, decide);
    const std::uint64_t shared_slot =
        cb.counters_[kSharedSlot].successes.load(std::memory_order_relaxed);
    if (shared_slot > successes_applied) {
      AddDeferredSuccessesLocked(shared_slot - successes_applied);
      successes_applied = shared_slot;
    }
    return failures;
  }

  // OutcomeOrder::kRelaxed, before a fast failure recorded under the lock
  // (its thread's allowance is used up): its own thread's outcomes must go in
  // first; other threads' may go in later, as they would had they reported
  // just after it, unless this failure could trip the window, which then
  // decides with every outcome reported so far. So the common case reads no
  // line another thread writes.
  void FoldForFailureLocked(std::int64_t second) FUSEBOX_REQUIRES(mu) {
    const int self = internal::t_writer_slot;
    if (self >= 0 && self < kOwnedWriterSlots) {
      FoldSlotLocked(self, second, /*decide=*/false);
      if (!ReachesThresholdLocked(second)) return;
    }
    FoldSlotsLocked(second, /*decide=*/false);
  }

  // FoldSlotsLocked() for owned slot `i` alone.
  int FoldSlotLocked(int i, std::int64_t second, bool decide) FUSEBOX_REQUIRES(mu) {
    int failures = 0;
    const std::uint64_t s = cb.counters_[i].successes.load(std::memory_order_acquire);
    const FailureLog& log = cb.failure_logs_[i];
    // seq_cst: the withdrawing side of the handshake in PublishLocked(); a
    // plain load on x86.
    const std::uint64_t n = log.count.load(std::memory_order_seq_cst);
    std::uint64_t& done = slot_successes_applied[i];
    std::uint64_t& next = slot_failures_applied[i];
    while (next < n) {
      const std::uint64_t e = log.entry[next % kLogEntries].load(std::memory_order_relaxed);
      const std::uint64_t at = done + (((e >> 16) - done) & kPositionMask);
      if (at > s) break;
      AddDeferredSuccessesLocked(at - done);
      done = at;
      // Held: the thread's later successes stay behind its failure.
      if (hold_deferred_failures) return failures;
      const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
      const bool current =
          StateOf(word) == State::kClosed && (EpochOf(word) & kEpochLowMask) == (e & kEpochLowMask);
      if (current && !decide && ReachesThresholdLocked(second)) return failures;
      // Counted as applied first: a transition it causes folds again.
      ++next;
      ApplyDeferredFailureLocked(second, e & kEpochLowMask);
      ++failures;
      if (current && decide) CheckClosedLocked(second, /*failed=*/true);
    }
    if (s > done) {
      AddDeferredSuccessesLocked(s - done);
      done = s;
    }
    return failures;
  }

  // Whether one more failure, replacing a success, would bring CLOSED's full
  // window to the failure-rate threshold.
  bool ReachesThresholdLocked(std::int64_t second) FUSEBOX_REQUIRES(mu) {
    const internal::WindowTotals& t = closed_window.Totals(second);
    return RatePercent(t.failed + 1, t.calls) >= cb.config_.failure_rate_threshold;
  }

  // A failure counted without the lock, of the state epoch whose low bits are
  // `epoch`. Normally CLOSED's current epoch, within an allowance: it cannot
  // trip the window. One that raced a transition is late: kDefault counts it
  // as such; kResilience4j records it into the current metrics, as
  // Resilience4j records an outcome reported after a transition (not into a
  // half-open verdict: it is no probe).
  void ApplyDeferredFailureLocked(std::int64_t second, std::uint64_t epoch) FUSEBOX_REQUIRES(mu) {
    const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
    const State state = StateOf(word);
    if (state == State::kClosed && (EpochOf(word) & kEpochLowMask) == epoch) {
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

  // OutcomeOrder::kRelaxed: whether failures may be counted without the lock
  // now, into CLOSED's full COUNT_BASED window with totals `t`; grants the
  // calling thread's slot its share. The allowances outstanding (granted and
  // not yet applied, counted or not) never exceed the failures that could
  // join the window, each replacing a success, without reaching the
  // failure-rate threshold: so a counted failure never trips it, and every
  // trip is decided under the lock by the failure that crosses.
  bool GrantLocked(const internal::WindowTotals& t) FUSEBOX_REQUIRES(mu) {
    const std::int64_t room = AllowanceLocked(t, kOwnedWriterSlots * kLogEntries);
    const int self = internal::t_writer_slot;
    std::int64_t others = 0;
    std::int64_t mine = 0;
    for (int i = 0; i < kOwnedWriterSlots; ++i) {
      const std::uint64_t limit = failure_limits[i].load(std::memory_order_relaxed);
      const std::uint64_t applied = slot_failures_applied[i];
      const std::int64_t out = limit > applied ? static_cast<std::int64_t>(limit - applied) : 0;
      (i == self ? mine : others) += out;
    }
    if (others + mine > room) return false;  // Over-granted: withdraw them all.
    if (self >= 0 && self < kOwnedWriterSlots) {
      // Half of what is free (room - others >= mine), so that other threads
      // get theirs too; never less than it had, never more than is free.
      const std::int64_t free = room - others;
      const std::int64_t half = std::min<std::int64_t>(kLogEntries, (free + 1) / 2);
      const std::int64_t share = std::min(free, std::max(mine, half));
      failure_limits[self].store(slot_failures_applied[self] + static_cast<std::uint64_t>(share),
                                 std::memory_order_relaxed);
    }
    return room > 0;
  }

  // How many more failures (up to `cap`), each replacing a success in a full
  // window with totals `t`, keep the failure rate below its threshold, in
  // Resilience4j's float32 arithmetic.
  std::int64_t AllowanceLocked(const internal::WindowTotals& t, std::int64_t cap)
      FUSEBOX_REQUIRES(mu) {
    const float threshold = cb.config_.failure_rate_threshold;
    const auto below = [&](std::int64_t k) {
      return RatePercent(t.failed + k, t.calls) < threshold;
    };
    if (!below(0)) return 0;
    std::int64_t k = static_cast<std::int64_t>(static_cast<double>(threshold) *
                                               static_cast<double>(t.calls) / 100.0) -
                     t.failed;
    k = std::clamp<std::int64_t>(k, 0, std::min(cap, t.calls - t.failed));
    while (k > 0 && !below(k)) --k;
    while (k < cap && k < t.calls - t.failed && below(k + 1)) ++k;
    return k;
  }

  // The window behind the current metrics.
  internal::SlidingWindow& MetricsWindowLocked(std::uint64_t word) FUSEBOX_REQUIRES(mu) {
    return (word & kProbeMetricsBit) ? probe_window : closed_window;
  }

  int MinimumCalls(bool probe) {
    const CircuitBreakerConfig& c = cb.config_;
    if (probe)
      return std::min(c.minimum_number_of_calls, c.permitted_number_of_calls_in_half_open_state);
    if (c.sliding_window_type == SlidingWindowType::kCountBased) {
      return std::min(c.minimum_number_of_calls, c.sliding_window_size);
    }
    return c.minimum_number_of_calls;  // Not capped for TIME_BASED (note point 8).
  }

  CircuitBreakerMetrics MetricsLocked(std::int64_t second) FUSEBOX_REQUIRES(mu) {
    const std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
    const bool probe = (word & kProbeMetricsBit) != 0;
    if (!probe) FoldStripesLocked(second);
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
  void PublishLocked(State state, std::uint32_t epoch, bool probe, std::int64_t second)
      FUSEBOX_REQUIRES(mu) {
    std::uint64_t word = static_cast<std::uint64_t>(state) |
                         (static_cast<std::uint64_t>(epoch) << kEpochShift) |
                         (probe ? kProbeMetricsBit : 0);
    const ListenerList* l = listeners.load(std::memory_order_relaxed);
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
    // the old word may be counting one right now; Dekker's handshake makes
    // sure it is applied: it stores its count, then reads the word; this
    // stores the word, then reads every count, all seq_cst, so one of the two
    // sees the other's store. Either this fold finds the failure, or its
    // thread finds the word changed and settles it (SettleDeferred()).
    for (int i = 0; i < kOwnedWriterSlots; ++i) {
      failure_limits[i].store(0, std::memory_order_relaxed);
    }
    withdrawals.store(withdrawals.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
    cb.word_.store(word, std::memory_order_seq_cst);
    // Failures counted over an allowance withdrawn for being too large could
    // reach the threshold: decided on as they go in.
    if (FoldSlotsLocked(second, /*decide=*/true) > 0) Republish(second);
  }

  // OutcomeOrder::kRelaxed: a thread that counted a failure without the lock
  // and then found the allowance withdrawn makes sure it is in the window and
  // decided on.
  void SettleDeferred() {
    {
      internal::SpinMutexLock lock(&mu);
      const std::int64_t second = SecondOf(cb.clock_.CoarseNow());
      FoldSlotsLocked(second, /*decide=*/true);
      Republish(second);
    }
    Dispatch();
  }

  void Republish(std::int64_t second) FUSEBOX_REQUIRES(mu) {
    const std::uint64_t w = cb.word_.load(std::memory_order_relaxed);
    PublishLocked(StateOf(w), EpochOf(w), (w & kProbeMetricsBit) != 0, second);
  }

  Duration OpenDurationLocked(int attempt) FUSEBOX_REQUIRES(mu) {
    const CircuitBreakerConfig& c = cb.config_;
    Duration wait = c.wait_interval_function ? c.wait_interval_function(attempt)
                                             : c.wait_duration_in_open_state;
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

  static TimePoint AddSaturated(TimePoint t, Duration d) {
    if (d > TimePoint::max() - t) return TimePoint::max();
    return t + d;
  }

  void CancelTimerLocked(TimerId& id) FUSEBOX_REQUIRES(mu) {
    if (id != 0) {
      cb.clock_.Cancel(id);
      id = 0;
    }
  }

  TimerId ScheduleLocked(TimePoint at, TimerKind kind, std::uint32_t epoch) FUSEBOX_REQUIRES(mu) {
    return cb.clock_.ScheduleAt(at, [l = link, kind, epoch] {
      std::lock_guard<std::mutex> guard(l->mu);
      if (l->breaker != nullptr) l->breaker->core_->OnTimer(kind, epoch);
    });
  }

  struct OperatorInfo {
    std::string reason;
    std::string actor;
    Duration expires_after = Duration::zero();
    // Set by another instance (OnSharedOverride): not published again.
    bool from_fleet = false;
  };

  static OperatorInfo ToOperatorInfo(OverrideOptions&& o) {
    return OperatorInfo{std::move(o.reason), std::move(o.actor), o.expires_after};
  }

  // Moves to `to`, starting a new state epoch. `open_for` > 0 fixes the OPEN
  // duration (an outcome's hint or transitionToOpenStateFor); `op` describes an
  // operator transition.
  void TransitionLocked(State to, TransitionReason reason, TimePoint now,
                        Duration open_for = Duration::zero(), const OperatorInfo* op = nullptr)
      FUSEBOX_REQUIRES(mu) {
    const std::uint64_t old_word = cb.word_.load(std::memory_order_relaxed);
    const State from = StateOf(old_word);
    const std::int64_t second = SecondOf(cb.clock_.CoarseNow());
    const bool listening = Listening(CircuitBreakerListener::kTransitionEvents);
    // kRelaxed: failures counted without the lock and not yet applied go in
    // after the transition, as outcomes reported after it (the withdrawal in
    // PublishLocked() applies them): the failure that tripped the window is
    // the last one in it, as it is in every order of the calls.
    hold_deferred_failures = true;
    CircuitBreakerMetrics counts;
    if (listening) counts = MetricsLocked(second);

    CancelTimerLocked(open_timer);
    CancelTimerLocked(half_open_timer);
    CancelTimerLocked(override_timer);
    // Successes striped in the ending epoch belong to the window being left.
    FoldStripesLocked(second);

    const std::uint32_t epoch = EpochOf(old_word) + 1;
    bool probe = (old_word & kProbeMetricsBit) != 0;
    Duration::rep deadline = 0;
    std::optional<TimePoint> retry_at;
    Duration opened_for = Duration::zero();
    override_info.reset();
    switch (to) {
      case State::kClosed:
        closed_window.Reset();
        ResetRejectedLocked(0);
        consecutive_failures = 0;
        open_attempts = 0;
        probe = false;
        break;
      case State::kOpen: {
        ++open_attempts;
        const Duration wait =
            open_for > Duration::zero() ? open_for : OpenDurationLocked(open_attempts);
        const TimePoint until = AddSaturated(now, wait);
        deadline = until.time_since_epoch().count();
        retry_at = until;
        opened_for = wait;
        // With a shared state, OPEN ends on a call, which takes the fleet's
        // probe lease (a timer thread must not wait for the store).
        if (cb.config_.automatic_transition_from_open_to_half_open_enabled && !shared) {
          open_timer = ScheduleLocked(until, TimerKind::kOpenEnd, epoch);
        }
        break;
      }
      case State::kHalfOpen:
        probe_window.Reset();
        ResetRejectedLocked(1);
        half_open_available = cb.config_.permitted_number_of_calls_in_half_open_state;
        half_open_successes = 0;
        probe = true;
        if (cb.config_.max_wait_duration_in_half_open_state > Duration::zero()) {
          half_open_timer =
              ScheduleLocked(AddSaturated(now, cb.config_.max_wait_duration_in_half_open_state),
                             TimerKind::kHalfOpenMaxWait, epoch);
        }
        break;
      case State::kDisabled:
      case State::kMetricsOnly:
      case State::kForcedOpen:
      case State::kForcedClosed: {
        closed_window.Reset();
        ResetRejectedLocked(0);
        consecutive_failures = 0;
        open_attempts = 0;
        probe = false;
        OverrideInfo info;
        info.state = to;
        info.since = now;
        if (op != nullptr) {
          info.reason = op->reason;
          info.actor = op->actor;
          if (op->expires_after > Duration::zero()) {
            const TimePoint until = AddSaturated(now, op->expires_after);
            info.expires_at = until;
            deadline = until.time_since_epoch().count();
            retry_at = until;
            override_timer = ScheduleLocked(until, TimerKind::kOverrideExpiry, epoch);
          }
        }
        override_info = std::move(info);
        break;
      }
    }
    state_since = now;
    cb.deadline_ns_.store(deadline, std::memory_order_relaxed);
    if (shared) ShareTransitionLocked(from, to, reason, opened_for, op);
    hold_deferred_failures = false;
    PublishLocked(to, epoch, probe, second);

    if (listening) {
      PendingTransition p;
      p.event.from = from;
      p.event.to = to;
      p.event.reason = reason;
      p.event.counts = counts;
      p.event.at = now;
      p.event.retry_at = retry_at;
      if (op != nullptr) {
        p.detail = op->reason;
        p.actor = op->actor;
      }
      pending.push_back(std::move(p));
      has_pending.store(true, std::memory_order_relaxed);
    }
  }

  void QueueSharedLocked(SharedAction action) FUSEBOX_REQUIRES(mu) {
    shared_pending.push_back(std::move(action));
    has_pending.store(true, std::memory_order_relaxed);
  }

  // What the fleet must hear of a transition: every OPEN this breaker decides
  // (which also fences its own lease, if it held one), and the end of its
  // lease otherwise. Transitions the fleet caused are not echoed back.
  void ShareTransitionLocked(State from, State to, TransitionReason reason, Duration opened_for,
                             const OperatorInfo* op) FUSEBOX_REQUIRES(mu) {
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

  // Extends an OPEN state to `until` when that is later (a shorter hint never
  // shortens a longer open). `share`: tell the fleet (not when the extension
  // came from it).
  void ExtendOpenLocked(TimePoint now, Duration open_for, bool share = true) FUSEBOX_REQUIRES(mu) {
    const TimePoint until = AddSaturated(now, open_for);
    const TimePoint current(Duration(cb.deadline_ns_.load(std::memory_order_relaxed)));
    if (until <= current) return;
    cb.deadline_ns_.store(until.time_since_epoch().count(), std::memory_order_relaxed);
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
      pending.push_back(std::move(p));
      has_pending.store(true, std::memory_order_relaxed);
    }
  }

  // Delivers queued transitions, in order, one thread at a time, with no lock
  // held while a listener runs.
  void Dispatch() FUSEBOX_EXCLUDES(mu) {
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
      const ListenerList* l = listeners.load(std::memory_order_acquire);
      for (PendingTransition& p : batch) {
        p.event.breaker = cb.name_;
        p.event.detail = p.detail;
        p.event.actor = p.actor;
        if (l == nullptr) continue;
        for (const ListenerItem& item : l->items) {
          if (!(item.interests & CircuitBreakerListener::kTransitionEvents)) continue;
          try {
            item.listener->OnTransition(p.event);
          } catch (...) {
            listener_errors.fetch_add(1, std::memory_order_relaxed);
          }
        }
      }
      mu.Lock();
    }
    has_pending.store(false, std::memory_order_relaxed);
    dispatching = false;
  }

  void RunShared(const SharedAction& a) {
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
  void ApplySharedOverrideLocked(const SharedOverride& o, TimePoint now) FUSEBOX_REQUIRES(mu) {
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

  void OnSharedOverride(const SharedOverride& o) {
    {
      internal::SpinMutexLock lock(&mu);
      ApplySharedOverrideLocked(o, cb.clock_.Now());
    }
    Dispatch();
  }

  // --- From the fleet (through SharedLink) ---

  void OnSharedOpen(Duration remaining) {
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

  void OnSharedClosed() {
    {
      internal::SpinMutexLock lock(&mu);
      const State state = StateOf(cb.word_.load(std::memory_order_relaxed));
      if (state == State::kOpen || state == State::kHalfOpen) {
        TransitionLocked(State::kClosed, TransitionReason::kSharedClosed, cb.clock_.Now());
      }
    }
    Dispatch();
  }

  void OnSharedResync() {
    {
      internal::SpinMutexLock lock(&mu);
      shared_stale = true;
      // Replays a local OPEN the fleet may have missed; Trip() never shortens
      // a longer one.
      if (StateOf(cb.word_.load(std::memory_order_relaxed)) == State::kOpen) {
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

  // Re-reads the fleet's view (kSharedStaleBit), once at a time. What the
  // fleet says can open this breaker or extend its OPEN, never close it: a
  // close arrives as OnSharedClosed(), or comes from this breaker's own probe.
  void SyncShared() {
    // Already read (by a call, or by the store's refresh): nothing to do.
    if (!(cb.word_.load(std::memory_order_relaxed) & internal::kSharedStaleBit)) return;
    if (shared_busy.exchange(true, std::memory_order_acquire)) {
      // Another thread is asking the store (a call, or the store's own
      // refresh of a new breaker): wait for its answer, bounded by the
      // store's timeout, rather than decide on a view known to be stale.
      shared_busy.wait(true, std::memory_order_acquire);
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

  // What the fleet says can open this breaker, extend its OPEN, or put it
  // under an operator's override; never close it: a close arrives as
  // OnSharedClosed(), or comes from this breaker's own probe.
  void ApplySharedViewLocked(const SharedCircuitView& view) FUSEBOX_REQUIRES(mu) {
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

  void NotifyOutcome(const OutcomeEvent& event) {
    const ListenerList* l = listeners.load(std::memory_order_acquire);
    if (l == nullptr) return;
    for (const ListenerItem& item : l->items) {
      if (!(item.interests & CircuitBreakerListener::kOutcomeEvents)) continue;
      try {
        item.listener->OnOutcome(event);
      } catch (...) {
        listener_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  void NotifyRejection(State state, const char* reason, std::optional<TimePoint> retry_at) {
    const ListenerList* l = listeners.load(std::memory_order_acquire);
    if (l == nullptr) return;
    RejectionEvent event{cb.name_, state, reason, retry_at};
    for (const ListenerItem& item : l->items) {
      if (!(item.interests & CircuitBreakerListener::kRejectionEvents)) continue;
      try {
        item.listener->OnRejection(event);
      } catch (...) {
        listener_errors.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  Result<Permit> Reject(std::uint64_t word, const char* reason, std::optional<TimePoint> retry_at) {
    const int slot = MySlot();
    Bump(cb.counters_[slot].rejected[(word & kProbeMetricsBit) ? 1 : 0], slot);
    if (word & kRejectionListenersBit) NotifyRejection(StateOf(word), reason, retry_at);
    return Status::Rejected(StatusCode::kCircuitOpen, reason, retry_at);
  }

  // Admission in the state of `word`, once timers have been caught up with:
  // nullptr (admitted; `half_open_slot` says whether it took a probe slot) or
  // the rejection reason, with `retry_at` when the state has an end.
  const char* AdmitLocked(std::uint64_t word, bool& half_open_slot,
                          std::optional<TimePoint>& retry_at) FUSEBOX_REQUIRES(mu) {
    switch (StateOf(word)) {
      case State::kHalfOpen:
        if (half_open_available <= 0) return "half_open_full";
        --half_open_available;
        half_open_slot = true;
        return nullptr;
      case State::kOpen:
      case State::kForcedOpen: {
        // Reopened by a max-wait timeout, or another thread got here first.
        const Duration::rep d = cb.deadline_ns_.load(std::memory_order_relaxed);
        if (d != 0) retry_at = TimePoint(Duration(d));
        return StateOf(word) == State::kOpen ? "open" : "forced_open";
      }
      default:
        return nullptr;  // CLOSED or an admitting operator state.
    }
  }

  // Whether a half-open verdict is due, and which; then transitions.
  void CheckHalfOpenLocked(TimePoint now, bool failed, bool slow) FUSEBOX_REQUIRES(mu) {
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

  void CheckClosedLocked(std::int64_t second, bool failed) FUSEBOX_REQUIRES(mu) {
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

  void OnTimer(TimerKind kind, std::uint32_t epoch) {
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

  // Lazily applies what a timer would have done by `now` (the timer may not
  // have run yet: SystemClock's thread can be late, and with automatic
  // transition off there is no OPEN timer at all). Returns the new word.
  std::uint64_t CatchUpLocked(TimePoint now) FUSEBOX_REQUIRES(mu) {
    std::uint64_t word = cb.word_.load(std::memory_order_relaxed);
    const State state = StateOf(word);
    const Duration::rep deadline = cb.deadline_ns_.load(std::memory_order_relaxed);
    if (state == State::kOpen) {
      // Strict, as Resilience4j's OpenState: admitted only after the deadline.
      // With a shared state only AcquireSharedProbe() ends OPEN.
      if (!shared && now.time_since_epoch().count() > deadline) {
        TransitionLocked(State::kHalfOpen, TransitionReason::kWaitElapsed, now);
      }
    } else if (state == State::kHalfOpen) {
      const Duration max_wait = cb.config_.max_wait_duration_in_half_open_state;
      if (max_wait > Duration::zero() && now >= AddSaturated(state_since, max_wait)) {
        TransitionLocked(cb.config_.transition_to_state_after_wait_duration,
                         TransitionReason::kHalfOpenTimeout, now);
      }
    } else if (IsOverrideState(state) && deadline != 0 &&
               now.time_since_epoch().count() >= deadline) {
      TransitionLocked(State::kClosed, TransitionReason::kOverrideExpired, now);
    }
    word = cb.word_.load(std::memory_order_relaxed);
    return word;
  }
};

// ---------------------------------------------------------------------------

Result<std::unique_ptr<CircuitBreaker>> CircuitBreaker::Create(std::string name,
                                                               CircuitBreakerConfig config,
                                                               Clock& clock) {
  Status s = config.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<CircuitBreaker>(
      new CircuitBreaker(std::move(name), std::move(config), clock));
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
      clock_(clock),
      name_(std::move(name)),
      config_(std::move(config)),
      counters_(std::make_unique<SlotCounters[]>(kSharedSlot + 1)),
      failure_logs_(relaxed_order_ ? std::make_unique<FailureLog[]>(kOwnedWriterSlots) : nullptr),
      core_(std::make_unique<Core>(*this, config_)) {
  core_->link->breaker = this;
  core_->jitter_state =
      config_.jitter_seed != 0 ? config_.jitter_seed : std::hash<std::string>{}(name_);
  if (config_.sliding_window_type == SlidingWindowType::kTimeBased) {
    core_->stripes = std::make_unique<Stripe[]>(kStripes);
  }
  if (config_.shared_state) {
    core_->shared = config_.shared_state;
    core_->shared_link = std::make_shared<Core::Link>();
    core_->shared_link->Attach(this);
  }
  const TimePoint now = clock_.Now();
  {
    internal::SpinMutexLock lock(&core_->mu);
    core_->state_since = now;
    // A new breaker knows nothing of the fleet yet: its first call reads it.
    core_->shared_stale = core_->shared != nullptr;
    core_->PublishLocked(State::kClosed, 0, false, SecondOf(clock_.CoarseNow()));
  }
  // Last: from here on the store may call in (from its own thread).
  if (core_->shared) core_->subscription = core_->shared->Subscribe(name_, core_->shared_link);
}

CircuitBreaker::~CircuitBreaker() {
  if (core_->shared) {
    core_->shared_link->Detach();
    core_->shared->Unsubscribe(core_->subscription);
    std::string token;
    {
      internal::SpinMutexLock lock(&core_->mu);
      token = std::exchange(core_->lease_token, std::string());
    }
    if (!token.empty()) core_->shared->Release(name_, token);
  }
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

Result<Permit> CircuitBreaker::TryAcquireSlow(std::uint64_t word) noexcept {
  if (word & internal::kSharedStaleBit) [[unlikely]] {
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
      const TimePoint now = clock_.CoarseNow();
      if (now.time_since_epoch().count() <= deadline) [[likely]]
        return RejectOpen(word, deadline);
      // The wait is over: move to HALF_OPEN under the lock, or with a shared
      // state once the fleet's lease is ours.
      if (core_->shared) return AcquireSharedProbe(word);
      break;
    }
    case State::kForcedOpen:
      if (deadline == 0 || clock_.CoarseNow().time_since_epoch().count() < deadline) {
        return core_->Reject(
            word, "forced_open",
            deadline == 0 ? std::nullopt : std::optional<TimePoint>(TimePoint(Duration(deadline))));
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
  const int slot = MySlot();
  Bump(counters_[slot].rejected[(word & kProbeMetricsBit) ? 1 : 0], slot);
  const TimePoint until{Duration(deadline)};
  if (word & kRejectionListenersBit) [[unlikely]] {
    core_->NotifyRejection(State::kOpen, "open", until);
  }
  return Status::Rejected(StatusCode::kCircuitOpen, "open", until);
}

std::optional<Status> CircuitBreaker::TryReject() noexcept {
  const std::uint64_t word = word_.load(std::memory_order_acquire);
  // A view to re-read from the fleet first: TryAcquire() would ask the store.
  if (word & internal::kSharedStaleBit) return std::nullopt;
  const Duration::rep deadline = deadline_ns_.load(std::memory_order_relaxed);
  const Duration::rep now = clock_.CoarseNow().time_since_epoch().count();
  switch (StateOf(word)) {
    case State::kOpen:
      // The same test as TryAcquireSlow's: once the wait is over, the call
      // that ends OPEN may take the fleet's lease (a store round trip).
      if (now <= deadline) return RejectOpen(word, deadline);
      return std::nullopt;
    case State::kForcedOpen:
      if (deadline == 0 || now < deadline) {
        return core_
            ->Reject(word, "forced_open",
                     deadline == 0 ? std::nullopt
                                   : std::optional<TimePoint>(TimePoint(Duration(deadline))))
            .error();
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

Result<Permit> CircuitBreaker::AcquireSharedProbe(std::uint64_t word) noexcept {
  // One call per breaker asks the store (it may block for the store's
  // timeout); calls meanwhile are rejected as OPEN, as they would be anywhere
  // in the fleet while one instance probes.
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
    const TimePoint now = clock_.Now();
    const std::uint64_t now_word = word_.load(std::memory_order_relaxed);
    if (StateOf(now_word) != State::kOpen || EpochOf(now_word) != EpochOf(word)) {
      // Something else ended this OPEN while we asked (a close or trip from the
      // fleet, an operator): the lease, if any, is not needed.
      if (lease.verdict == ProbeLease::Verdict::kProbe) unused_token = std::move(lease.token);
    } else {
      switch (lease.verdict) {
        case ProbeLease::Verdict::kProbe:
        case ProbeLease::Verdict::kClosed:
        case ProbeLease::Verdict::kUnavailable:
          // Ours to probe; or nothing to wait for in the fleet; or no fleet to
          // ask (fail-open): HALF_OPEN as a local breaker would.
          core_->TransitionLocked(State::kHalfOpen, TransitionReason::kWaitElapsed, now);
          if (lease.verdict == ProbeLease::Verdict::kProbe) {
            core_->lease_token = std::move(lease.token);
          }
          break;
        case ProbeLease::Verdict::kOpen:
          core_->ExtendOpenLocked(now, lease.remaining, /*share=*/false);
          break;
        case ProbeLease::Verdict::kBusy: {
          // Another instance probes. Its close or trip will be pushed; ask
          // again after its lease ends at the latest, or in a second if the
          // push is lost.
          const Duration recheck =
              std::clamp(lease.remaining, Duration(1), Duration(std::chrono::seconds(1)));
          deadline_ns_.store(Core::AddSaturated(now, recheck).time_since_epoch().count(),
                             std::memory_order_relaxed);
          break;
        }
      }
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
    if (config_.sliding_window_type == SlidingWindowType::kTimeBased) return StripeSuccess(word);
    DeferSuccess();
    return true;
  }
  const std::uint64_t now_word = word_.load(std::memory_order_relaxed);
  if (StateOf(now_word) != State::kClosed ||
      (!resilience4j_ && EpochOf(now_word) != EpochOf(word))) {
    core_->mu.Unlock();
    return false;  // Moved on meanwhile: the general path sorts it out.
  }
  const std::int64_t second = SecondOf(clock_.CoarseNow());
  core_->FoldStripesLocked(second);
  core_->closed_window.Record(second, /*failed=*/false, /*slow=*/false);
  core_->consecutive_failures = 0;
  core_->CheckClosedLocked(second, /*failed=*/false);
  core_->Republish(second);
  core_->mu.Unlock();
  core_->Dispatch();
  return true;
}

void CircuitBreaker::DeferSuccess() noexcept {
  const int slot = MySlot();
  std::atomic<std::uint64_t>& n = counters_[slot].successes;
  if (slot == kSharedSlot) {
    n.fetch_add(1, std::memory_order_relaxed);
  } else {
    // Release (a plain store on x86): a fold that reads this count also sees
    // every failure the thread counted before it (OutcomeOrder::kRelaxed).
    n.store(n.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }
}

bool CircuitBreaker::DeferFailureSlow(std::uint64_t word) noexcept {
  // A fast failure into CLOSED's full COUNT_BASED window, OutcomeOrder::
  // kRelaxed: counted in this thread's own slot, within the allowance the
  // last lock holder granted it (Core::GrantLocked()), so that it writes
  // nothing another core reads until the next fold. Without an allowance left
  // it takes the lock (RecordSlow()), which grants the next one.
  const int slot = MySlot();
  if (slot == kSharedSlot) return false;  // Shared by threads: no log.
  FailureLog& log = failure_logs_[slot];
  // Acquire: the limit read below is at least as new as this withdrawal count.
  const std::uint64_t withdrawals = core_->withdrawals.load(std::memory_order_acquire);
  const std::uint64_t n = log.count.load(std::memory_order_relaxed);
  if (n >= core_->failure_limits[slot].load(std::memory_order_relaxed)) return false;
  const std::uint64_t position = counters_[slot].successes.load(std::memory_order_relaxed);
  log.entry[n % FailureLog::kEntries].store(
      ((position & Core::kPositionMask) << 16) | (EpochOf(word) & Core::kEpochLowMask),
      std::memory_order_relaxed);
  // seq_cst store, then seq_cst loads of the word and the withdrawal count:
  // this thread's half of the handshake with a holder withdrawing the
  // allowance (Core::PublishLocked()). The count catches a withdrawal since
  // the limit was read that a new grant has hidden from the word.
  log.count.store(n + 1, std::memory_order_seq_cst);
  const std::uint64_t now = word_.load(std::memory_order_seq_cst);
  if ((now & internal::kDeferFailureBit) && EpochOf(now) == EpochOf(word) &&
      core_->withdrawals.load(std::memory_order_seq_cst) == withdrawals) {
    return true;
  }
  core_->SettleDeferred();
  return true;
}

bool CircuitBreaker::StripeSuccess(std::uint64_t word) noexcept {
  (void)word;
  // A TIME_BASED success needs the epoch second it is reported in: the coarse
  // clock (~3 ns) is plenty for one-second buckets.
  const std::uint32_t second = static_cast<std::uint32_t>(SecondOf(clock_.CoarseNow()));
  std::atomic<std::uint64_t>& stripe = core_->stripes[t_stripe].word;
  std::uint64_t v = stripe.load(std::memory_order_relaxed);
  while (static_cast<std::uint32_t>(v >> 32) == second && (v & kLow32) != kLow32) {
    // Relaxed: the count is folded under the lock, which orders it; nothing
    // else is published through it.
    const std::uint64_t seen = v;
    if (stripe.compare_exchange_weak(v, v + 1, std::memory_order_relaxed)) return true;
    if (v != seen) t_stripe = (t_stripe + 1) % kStripes;  // Someone else writes here.
  }
  return false;  // A new second: the slow path folds the stripe and re-arms it.
}

void CircuitBreaker::RecordSlow(std::uint32_t epoch, bool half_open_slot,
                                const Outcome& outcome) noexcept {
  const bool failed = outcome.kind == OutcomeKind::kFailure;
  const bool ignored = outcome.kind == OutcomeKind::kIgnored;
  const bool slow = !ignored && outcome.duration > slow_threshold_;
  const bool hint = outcome.open_for > Duration::zero();
  OutcomeEvent event{name_, State::kClosed, outcome.kind, outcome.duration, slow, false};
  bool notify = false;
  // kRelaxed folds slot by slot, under the lock.
  const std::uint64_t successes_seen = core_->stripes || relaxed_order_ ? 0 : core_->SumSuccesses();
  {
    internal::SpinMutexLock lock(&core_->mu);
    const TimePoint coarse = clock_.CoarseNow();
    const std::int64_t second = SecondOf(coarse);
    std::uint64_t word = word_.load(std::memory_order_relaxed);
    State state = StateOf(word);
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
      if (hint) {
        // A rate-limit signal is news about the dependency, not about an
        // epoch: it still opens (see docs/semantics.md).
        const TimePoint now = clock_.Now();
        if (state == State::kOpen) {
          core_->ExtendOpenLocked(now, outcome.open_for);
        } else if (state == State::kClosed || state == State::kHalfOpen) {
          core_->TransitionLocked(State::kOpen, TransitionReason::kOpenForHint, now,
                                  outcome.open_for);
        }
      }
    } else {
      switch (state) {
        case State::kClosed:
          if (ignored) break;
          if (failed && !slow && (word & internal::kDeferFailureBit)) {
            core_->FoldForFailureLocked(second);
          } else {
            core_->FoldStripesLocked(second, successes_seen);
          }
          core_->closed_window.Record(second, failed, slow);
          core_->consecutive_failures = failed ? core_->consecutive_failures + 1 : 0;
          core_->CheckClosedLocked(second, failed);
          break;
        case State::kOpen:
          // Resilience4j records it into the window that tripped (or the probe
          // window that reopened); no transition.
          if (!ignored) core_->MetricsWindowLocked(word).Record(second, failed, slow);
          break;
        case State::kHalfOpen:
          if (ignored) {
            // Gives the slot back: any permit in kResilience4j, only this
            // epoch's own half-open slot in kDefault.
            if (resilience4j_ || half_open_slot) ++core_->half_open_available;
            break;
          }
          core_->probe_window.Record(0, failed, slow);
          core_->CheckHalfOpenLocked(clock_.Now(), failed, slow);
          break;
        case State::kMetricsOnly:
        case State::kForcedClosed:
          if (ignored) break;
          core_->FoldStripesLocked(second);
          core_->closed_window.Record(second, failed, slow);
          break;
        case State::kDisabled:
        case State::kForcedOpen:
          break;
      }
      if (hint) {
        word = word_.load(std::memory_order_relaxed);
        state = StateOf(word);
        const TimePoint now = clock_.Now();
        if (state == State::kOpen) {
          core_->ExtendOpenLocked(now, outcome.open_for);
        } else if (state == State::kClosed || state == State::kHalfOpen) {
          core_->TransitionLocked(State::kOpen, TransitionReason::kOpenForHint, now,
                                  outcome.open_for);
        }
      }
    }
    core_->Republish(second);
  }
  core_->Dispatch();
  if (notify) core_->NotifyOutcome(event);
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

#define FUSEBOX_OPERATOR_TRANSITION(to, reason, info)                            \
  do {                                                                           \
    {                                                                            \
      internal::SpinMutexLock lock(&core_->mu);                                  \
      core_->TransitionLocked(to, reason, clock_.Now(), Duration::zero(), info); \
    }                                                                            \
    core_->Dispatch();                                                           \
  } while (false)

void CircuitBreaker::ForceOpen(OverrideOptions options) {
  const auto info = Core::ToOperatorInfo(std::move(options));
  FUSEBOX_OPERATOR_TRANSITION(State::kForcedOpen, TransitionReason::kOperator, &info);
}

void CircuitBreaker::ForceClosed(OverrideOptions options) {
  const auto info = Core::ToOperatorInfo(std::move(options));
  FUSEBOX_OPERATOR_TRANSITION(State::kForcedClosed, TransitionReason::kOperator, &info);
}

void CircuitBreaker::Disable(OverrideOptions options) {
  const auto info = Core::ToOperatorInfo(std::move(options));
  FUSEBOX_OPERATOR_TRANSITION(State::kDisabled, TransitionReason::kOperator, &info);
}

void CircuitBreaker::MetricsOnly(OverrideOptions options) {
  const auto info = Core::ToOperatorInfo(std::move(options));
  FUSEBOX_OPERATOR_TRANSITION(State::kMetricsOnly, TransitionReason::kOperator, &info);
}

void CircuitBreaker::Reset(std::string reason, std::string actor) {
  const Core::OperatorInfo info{reason.empty() ? std::string("reset") : std::move(reason),
                                std::move(actor), Duration::zero()};
  FUSEBOX_OPERATOR_TRANSITION(State::kClosed, TransitionReason::kOperator, &info);
}

void CircuitBreaker::TransitionToClosed() {
  FUSEBOX_OPERATOR_TRANSITION(State::kClosed, TransitionReason::kOperator, nullptr);
}

void CircuitBreaker::TransitionToOpen() {
  FUSEBOX_OPERATOR_TRANSITION(State::kOpen, TransitionReason::kOperator, nullptr);
}

void CircuitBreaker::TransitionToHalfOpen() {
  FUSEBOX_OPERATOR_TRANSITION(State::kHalfOpen, TransitionReason::kOperator, nullptr);
}

#undef FUSEBOX_OPERATOR_TRANSITION

std::optional<OverrideInfo> CircuitBreaker::active_override() const {
  internal::SpinMutexLock lock(&core_->mu);
  return core_->override_info;
}

std::uint64_t CircuitBreaker::AddListener(std::shared_ptr<CircuitBreakerListener> listener) {
  const unsigned interests = listener->interests() & CircuitBreakerListener::kAllEvents;
  internal::SpinMutexLock lock(&core_->mu);
  const ListenerList* old = core_->listeners.load(std::memory_order_relaxed);
  auto next = std::make_unique<ListenerList>();
  if (old != nullptr) *next = *old;
  const std::uint64_t id = core_->next_listener_id++;
  next->items.push_back({id, interests, std::move(listener)});
  next->interests |= interests;
  // Release: a reader that sees the new list sees it fully built.
  core_->listeners.store(next.release(), std::memory_order_release);
  if (old != nullptr) core_->retired.emplace_back(const_cast<ListenerList*>(old));
  core_->Republish(SecondOf(clock_.CoarseNow()));
  return id;
}

bool CircuitBreaker::RemoveListener(std::uint64_t id) {
  internal::SpinMutexLock lock(&core_->mu);
  const ListenerList* old = core_->listeners.load(std::memory_order_relaxed);
  if (old == nullptr) return false;
  auto next = std::make_unique<ListenerList>();
  bool found = false;
  for (const ListenerItem& item : old->items) {
    if (item.id == id) {
      found = true;
    } else {
      next->items.push_back(item);
      next->interests |= item.interests;
    }
  }
  if (!found) return false;
  core_->listeners.store(next.release(), std::memory_order_release);
  core_->retired.emplace_back(const_cast<ListenerList*>(old));
  core_->Republish(SecondOf(clock_.CoarseNow()));
  return true;
}

bool CircuitBreaker::IsQuiescent() const {
  internal::SpinMutexLock lock(&core_->mu);
  const State s = StateOf(word_.load(std::memory_order_relaxed));
  if (s != State::kClosed) return false;
  const std::int64_t second = SecondOf(clock_.CoarseNow());
  core_->FoldStripesLocked(second);
  return core_->closed_window.Totals(second).clean() && core_->consecutive_failures == 0;
}

}  // namespace fusebox
