// Timeout: slots, the watchdog timer, and the overflow path. See timeout.h for
// the design and its trade-off.
//
// A slot's word says who owns it:
//   0             free;
//   > 0           a call is running, and this is its deadline (clock ns);
//   kStopping     the watchdog won the slot from a late call and is calling
//                 request_stop() on its source;
//   kStopped      it is done; the call's owner renews the source, then frees.
// The owner claims with 0 -> deadline and finishes with deadline -> 0; the
// watchdog only ever moves an expired deadline to kStopping. Whoever wins the
// compare-and-swap decides, so a call is stopped at most once and a stop never
// reaches a later call, with one harmless exception: a later call with the
// very same deadline value, which has then expired too.
#include "fusebox/timeout.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <limits>
#include <string>
#include <thread>

namespace fusebox {
namespace {

constexpr Duration::rep kStopping = -1;
constexpr Duration::rep kStopped = -2;
constexpr Duration::rep kNoDeadline = std::numeric_limits<Duration::rep>::max();

bool PreciseTiming(const TimeoutOptions& o) {
  return o.timing == CallTiming::kPrecise ||
         (o.timing == CallTiming::kAuto && o.timeout_duration < std::chrono::seconds(1));
}

// Where this thread starts looking for a free slot: threads start spread out,
// so that concurrent calls rarely meet on one slot (and its cache line).
thread_local unsigned t_slot_hint = [] {
  static std::atomic<unsigned> next{0};
  return next.fetch_add(1, std::memory_order_relaxed);
}();

}  // namespace

struct alignas(64) Timeout::Slot {
  std::atomic<Duration::rep> word{0};
  // Touched by the owner while it holds the slot, and by the watchdog only
  // after it moved the word to kStopping.
  std::stop_source source;
  std::stop_token token = source.get_token();
};

struct Timeout::Shared : std::enable_shared_from_this<Timeout::Shared> {
  Shared(Clock& c, Duration t, unsigned n, bool stop)
      : clock(c), timeout(t), request_stop(stop), mask(n - 1), slots(new Slot[n]) {}

  // Resilience4j's TimeLimiter call counts: successful, failed, timeout.
  // Relaxed: each is an exact counter, nothing is published through them;
  // their own cache line, away from the slots' words.
  alignas(64) std::atomic<std::uint64_t> counts[3] = {};

  Slot* Claim(Duration::rep deadline) noexcept {
    const unsigned first = t_slot_hint;
    for (unsigned i = 0; i <= mask; ++i) {
      Slot& slot = slots[(first + i) & mask];
      Duration::rep expected = 0;
      // Sequentially consistent, paired with the seq_cst store and loads in
      // OnTimer(): either this claim is seen by the watchdog's scan, or the
      // armed_ load in Watch() sees that the watchdog is disarmed and arms it.
      if (slot.word.load(std::memory_order_relaxed) == 0 &&
          slot.word.compare_exchange_strong(expected, deadline, std::memory_order_seq_cst)) {
        if (i != 0) t_slot_hint = first + i;
        return &slot;
      }
    }
    return nullptr;
  }

  // Called by every call that got a slot.
  void NoteCall(Duration::rep deadline) {
    // A load, and a store only on the first call after a firing: the line
    // stays shared between the callers' cores.
    if (!used.load(std::memory_order_relaxed)) used.store(true, std::memory_order_relaxed);
    if (!armed.load(std::memory_order_seq_cst) &&
        !armed.exchange(true, std::memory_order_seq_cst)) {
      Schedule(deadline);
    }
  }

  // Allocates (the clock's timer entry, the weak_ptr capture). Callers do it
  // only when the watchdog was idle; under load the watchdog re-arms itself,
  // on the timer's thread.
  void Schedule(Duration::rep at) {
    timer.store(clock.ScheduleAt(TimePoint(Duration(at)),
                                 [weak = weak_from_this()] {
                                   if (std::shared_ptr<Shared> self = weak.lock()) self->OnTimer();
                                 }),
                std::memory_order_relaxed);
  }

  // Stops the calls whose deadline has passed; returns the earliest deadline
  // still running, or kNoDeadline.
  Duration::rep StopExpired(Duration::rep now) {
    Duration::rep next = kNoDeadline;
    for (unsigned i = 0; i <= mask; ++i) {
      Slot& slot = slots[i];
      Duration::rep v = slot.word.load(std::memory_order_seq_cst);
      if (v <= 0) continue;
      if (v > now) {
        next = std::min(next, v);
        continue;
      }
      if (slot.word.compare_exchange_strong(v, kStopping, std::memory_order_acquire)) {
        slot.source.request_stop();  // Runs the call's stop callbacks, here.
        slot.word.store(kStopped, std::memory_order_release);
      }
    }
    return next;
  }

  // The watchdog. `armed` stays true while it runs, so that callers arriving
  // meanwhile do not schedule a second timer.
  void OnTimer() {
    const bool was_used = used.exchange(false, std::memory_order_relaxed);
    const Duration::rep now = clock.Now().time_since_epoch().count();
    Duration::rep next = StopExpired(now);
    if (next == kNoDeadline && !was_used) {
      // Idle for a whole period: disarm. A call that claimed a slot after the
      // scan above saw armed == true and did not arm; sequentially consistent
      // store then loads (StopExpired) against its claim then load (NoteCall):
      // either the second scan sees it, or it sees armed == false and arms.
      armed.store(false, std::memory_order_seq_cst);
      next = StopExpired(now);
      if (next == kNoDeadline || armed.exchange(true, std::memory_order_seq_cst)) return;
    }
    // Calls that start from now on end no earlier than now + timeout.
    Schedule(next != kNoDeadline ? next : now + timeout.count());
  }

  Clock& clock;
  const Duration timeout;
  // TimeoutOptions::cancel_running_future: when false, calls are only timed.
  const bool request_stop;
  const unsigned mask;
  const std::unique_ptr<Slot[]> slots;
  // A watchdog timer is scheduled (or running).
  std::atomic<bool> armed{false};
  // A call started since the watchdog last ran: keeps it armed through the
  // next period, so that steady traffic never makes a caller schedule it.
  std::atomic<bool> used{false};
  std::atomic<TimerId> timer{0};
};

Status TimeoutOptions::Validate() const {
  if (timeout_duration <= Duration::zero()) {
    return Status::InvalidArgument("timeout_duration must be > 0, got " +
                                   std::to_string(timeout_duration.count()) + " ns");
  }
  if (watch_slots < 1 || watch_slots > (1 << 16)) {
    return Status::InvalidArgument("watch_slots must be in [1, 65536], got " +
                                   std::to_string(watch_slots));
  }
  if (timing != CallTiming::kAuto && timing != CallTiming::kPrecise &&
      timing != CallTiming::kCoarse) {
    return Status::InvalidArgument("timing must be kAuto, kPrecise or kCoarse");
  }
  return Status();
}

Result<std::unique_ptr<Timeout>> Timeout::Create(TimeoutOptions options, Clock& clock) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<Timeout>(new Timeout(options, clock));
}

Timeout::Timeout(TimeoutOptions options, Clock& clock)
    : options_(options),
      precise_(PreciseTiming(options)),
      shared_(std::make_shared<Shared>(clock, options.timeout_duration,
                                       std::bit_ceil(static_cast<unsigned>(options.watch_slots)),
                                       options.cancel_running_future)) {}

Timeout::~Timeout() {
  // Best effort: a timer that is already running holds only a weak_ptr and
  // finds the slots empty.
  if (shared_->armed.load()) shared_->clock.Cancel(shared_->timer.load());
}

Clock& Timeout::clock() const noexcept { return shared_->clock; }

Timeout::Watch::Watch(Shared* shared, bool precise) : shared_(shared), precise_(precise) {
  start_ = precise_ ? shared_->clock.Now() : shared_->clock.CoarseNow();
  deadline_ns_ = (start_ + shared_->timeout).time_since_epoch().count();
  assert(deadline_ns_ > 0);
  // Not to be stopped: no slot, no timer, a token that is never stopped; the
  // elapsed time alone decides (Finish()).
  if (!shared_->request_stop) return;
  slot_ = shared_->Claim(deadline_ns_);
  if (slot_ != nullptr) [[likely]] {
    shared_->NoteCall(deadline_ns_);
    return;
  }
  // Every slot is busy: this call gets a source and a timer of its own.
  own_source_ = std::stop_source();
  own_token_ = own_source_.get_token();
  own_timer_ =
      shared_->clock.ScheduleAt(TimePoint(Duration(deadline_ns_)),
                                [source = own_source_]() mutable { source.request_stop(); });
}

Timeout::Watch::~Watch() {
  if (!finished_) (void)Finish();
}

const std::stop_token& Timeout::Watch::token() const noexcept {
  return slot_ != nullptr ? slot_->token : own_token_;
}

bool Timeout::Watch::Finish() {
  assert(!finished_ && "Timeout::Watch finished twice");
  finished_ = true;
  const TimePoint end = precise_ ? shared_->clock.Now() : shared_->clock.CoarseNow();
  elapsed_ = end > start_ ? end - start_ : Duration::zero();
  bool stopped = false;
  if (slot_ != nullptr) {
    Duration::rep expected = deadline_ns_;
    // Release: the next owner of the slot sees the source as we left it.
    if (!slot_->word.compare_exchange_strong(expected, 0, std::memory_order_release,
                                             std::memory_order_relaxed)) {
      // The watchdog stopped this call. Wait until its request_stop() is done
      // (it runs our stop callbacks), then renew the source for the next call:
      // a stopped source cannot be reset. The one allocation of a timed-out
      // call.
      while (slot_->word.load(std::memory_order_acquire) != kStopped) std::this_thread::yield();
      slot_->source = std::stop_source();
      slot_->token = slot_->source.get_token();
      slot_->word.store(0, std::memory_order_release);
      stopped = true;
    }
  } else if (own_source_.stop_possible()) {
    shared_->clock.Cancel(own_timer_);
    stopped = own_source_.stop_requested();
  }
  return stopped || elapsed_ >= shared_->timeout;
}

bool Timeout::Watch::Finish(const Status& result) {
  const bool timed_out = Finish();
  const int i = timed_out ? 2 : (result.ok() ? 0 : 1);
  shared_->counts[i].fetch_add(1, std::memory_order_relaxed);
  return timed_out;
}

TimeLimiterCounts Timeout::counts() const noexcept {
  return {shared_->counts[0].load(std::memory_order_relaxed),
          shared_->counts[1].load(std::memory_order_relaxed),
          shared_->counts[2].load(std::memory_order_relaxed)};
}

}  // namespace fusebox
