// EventLog: transitions and sampled rejections as JSON lines.
//
// Sampling is per breaker and, past the sample, lock-free: a rejection beyond
// the first N of its window is one relaxed load of the window's end, one
// fetch_add on the window's count and one on the suppressed count. The
// window's bookkeeping (rolling to a new window, the summary line, its timer)
// goes under the sampler's mutex, once per window. Counts are exact within a
// window, concurrent rejections included (fetch_add hands out each number
// once); at a window boundary a rejection racing the roll may be counted in
// either window, never lost (see Roll).
#include "fusebox/event_log.h"

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "fusebox/internal/mutex.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/metrics.h"
#include "json_line.h"

namespace fusebox {

Status EventLogOptions::Validate() const {
  if (sink == nullptr) return Status::InvalidArgument("sink must be set");
  if (rejections_per_interval < 0) {
    return Status::InvalidArgument("rejections_per_interval must be >= 0, got " +
                                   std::to_string(rejections_per_interval));
  }
  if (sampling_interval <= Duration::zero()) {
    return Status::InvalidArgument("sampling_interval must be > 0");
  }
  return Status();
}

struct EventLog::Core {
  explicit Core(EventLogOptions o) : options(std::move(o)) {}

  // Stamps and writes one line, under a lock, so that lines leave in the
  // order of their t_ms: `at` is raised to the time of the last line stamped
  // on the same clock if it is earlier. Without this a rejection, timed by
  // CoarseNow() (a few ms behind), could follow the transition it came after
  // with an earlier t_ms, and two threads could write their lines in the
  // other order. `finish(o, at)` adds the time fields and what follows them.
  // Lines are rare (transitions, the sample, summaries), so the lock costs
  // nothing the hot path feels.
  template <typename Finish>
  void WriteStamped(internal::JsonObject& o, const Clock& clock, TimePoint at, Finish&& finish)
      FUSEBOX_EXCLUDES(stamp_mu) {
    internal::MutexLock lock(&stamp_mu);
    TimePoint* last = nullptr;
    for (auto& [c, t] : last_stamps) {
      if (c == &clock) last = &t;
    }
    if (last == nullptr) last = &last_stamps.emplace_back(&clock, at).second;
    if (at < *last) at = *last;
    *last = at;
    finish(o, at);
    Write(std::move(o).Done());
  }

  void Write(const std::string& line) {
    if (options.sink->Write(line).ok()) {
      written.fetch_add(1, std::memory_order_relaxed);
    } else {
      errors.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // "t_ms", and "ts" with a wall clock.
  void AddTime(internal::JsonObject& o, Clock& clock, TimePoint at) const {
    o.Int("t_ms", internal::SteadyMs(at));
    if (options.wall_clock) o.Time("ts", internal::ToWall(options.wall_clock, clock, at));
  }
  // "retry_in_ms" (from `at`), and "retry_at" with a wall clock.
  void AddRetryAt(internal::JsonObject& o, Clock& clock, TimePoint at,
                  std::optional<TimePoint> retry_at) const {
    if (!retry_at) return;
    o.Int("retry_in_ms", internal::Ms(*retry_at - at));
    if (options.wall_clock) {
      o.Time("retry_at", internal::ToWall(options.wall_clock, clock, *retry_at));
    }
  }

  const EventLogOptions options;
  std::atomic<std::uint64_t> written{0};
  std::atomic<std::uint64_t> errors{0};
  internal::Mutex stamp_mu;
  // The time of the last line stamped, per clock (breakers on different
  // clocks have unrelated times; a process has one or two clocks).
  std::vector<std::pair<const Clock*, TimePoint>> last_stamps FUSEBOX_GUARDED_BY(stamp_mu);
};

class EventLog::Listener final : public CircuitBreakerListener {
 public:
  Listener(std::shared_ptr<Core> core, CircuitBreaker& breaker)
      : sampler_(std::make_shared<Sampler>(std::move(core), breaker.clock(), breaker.name())) {}

  ~Listener() override {
    internal::MutexLock lock(&sampler_->mu);
    sampler_->CancelTimerLocked();
    // The breaker is going away: say what was suppressed rather than lose it.
    sampler_->FlushLocked(sampler_->clock.Now());
  }

  unsigned interests() const override { return kTransitionEvents | kRejectionEvents; }

  void OnTransition(const TransitionEvent& e) override {
    Sampler& s = *sampler_;
    {
      // The summary of the rejections of the state being left comes first,
      // and the new state gets a fresh sample.
      internal::MutexLock lock(&s.mu);
      s.FlushLocked(e.at);
      s.CancelTimerLocked();
      s.window_end_ns.store(0, std::memory_order_relaxed);
      s.in_window.store(0, std::memory_order_relaxed);
    }
    const CircuitBreakerMetrics& c = e.counts;
    internal::JsonObject o;
    o.Str("event", "transition")
        .Str("breaker", s.name)
        .Str("from", StateLabel(e.from))
        .Str("to", StateLabel(e.to))
        .Str("reason", TransitionReasonName(e.reason))
        .Num("failure_rate", c.failure_rate)
        .Num("slow_call_rate", c.slow_call_rate)
        .Int("buffered_calls", c.buffered_calls)
        .Int("failed_calls", c.failed_calls)
        .Int("slow_calls", c.slow_calls)
        .Int("not_permitted_calls", c.not_permitted_calls);
    s.core->WriteStamped(o, s.clock, e.at, [&](internal::JsonObject& line, TimePoint at) {
      s.core->AddTime(line, s.clock, at);
      s.core->AddRetryAt(line, s.clock, at, e.retry_at);
      if (!e.detail.empty()) line.Str("operator_reason", e.detail);
      if (!e.actor.empty()) line.Str("actor", e.actor);
    });
  }

  void OnRejection(const RejectionEvent& e) override {
    Sampler& s = *sampler_;
    const TimePoint now = s.clock.CoarseNow();
    const Duration::rep now_ns = now.time_since_epoch().count();
    // Relaxed: the end is only compared with the time; Roll() re-checks it
    // under the mutex before acting.
    if (now_ns >= s.window_end_ns.load(std::memory_order_relaxed)) s.Roll(now);
    const std::uint64_t n = s.in_window.fetch_add(1, std::memory_order_relaxed);
    if (n < static_cast<std::uint64_t>(s.core->options.rejections_per_interval)) {
      internal::JsonObject o;
      o.Str("event", "rejection")
          .Str("breaker", s.name)
          .Str("state", StateLabel(e.state))
          .Str("reason", e.reason);
      s.core->WriteStamped(o, s.clock, now, [&](internal::JsonObject& line, TimePoint at) {
        s.core->AddTime(line, s.clock, at);
        s.core->AddRetryAt(line, s.clock, at, e.retry_at);
      });
      return;
    }
    // The first suppressed rejection of a window arms the summary for the
    // window's end, so that the count is written even if no rejection or
    // transition follows.
    if (s.suppressed.fetch_add(1, std::memory_order_relaxed) == 0) ArmSummary();
  }

 private:
  // The sampling state of one breaker, with what writing a summary needs.
  // Shared with the summary timer, which holds it weakly: a timer that fires
  // after the listener is gone finds nothing to do.
  struct Sampler {
    Sampler(std::shared_ptr<Core> c, Clock& k, std::string n)
        : core(std::move(c)), clock(k), name(std::move(n)) {}

    // Starts a new window at `now` if the current one has ended, writing the
    // ended window's summary first.
    void Roll(TimePoint now) FUSEBOX_EXCLUDES(mu) {
      internal::MutexLock lock(&mu);
      const Duration::rep now_ns = now.time_since_epoch().count();
      if (now_ns < window_end_ns.load(std::memory_order_relaxed)) return;  // Rolled by another.
      FlushLocked(now);
      CancelTimerLocked();
      in_window.store(0, std::memory_order_relaxed);
      window_end_ns.store(now_ns + core->options.sampling_interval.count(),
                          std::memory_order_relaxed);
    }

    void CancelTimerLocked() FUSEBOX_REQUIRES(mu) {
      if (timer != 0) {
        clock.Cancel(timer);
        timer = 0;
      }
    }

    // Writes the summary of suppressed rejections, if any.
    void FlushLocked(TimePoint now) FUSEBOX_REQUIRES(mu) {
      const std::uint64_t n = suppressed.exchange(0, std::memory_order_relaxed);
      if (n == 0) return;
      internal::JsonObject o;
      o.Str("event", "rejections_suppressed")
          .Str("breaker", name)
          .Int("logged", core->options.rejections_per_interval)
          .Uint("suppressed", n)
          .Int("interval_ms", internal::Ms(core->options.sampling_interval));
      core->WriteStamped(o, clock, now, [&](internal::JsonObject& line, TimePoint at) {
        core->AddTime(line, clock, at);
      });
    }

    const std::shared_ptr<Core> core;
    Clock& clock;
    const std::string name;
    internal::Mutex mu;
    // Rejections at or after this steady time (ns) start a new window. 0: no
    // window yet.
    std::atomic<Duration::rep> window_end_ns{0};
    // Rejections counted in the current window, written or not.
    std::atomic<std::uint64_t> in_window{0};
    // Rejections of the current window not written.
    std::atomic<std::uint64_t> suppressed{0};
    TimerId timer FUSEBOX_GUARDED_BY(mu) = 0;
  };

  void ArmSummary() {
    Sampler& s = *sampler_;
    internal::MutexLock lock(&s.mu);
    if (s.timer != 0) return;
    const TimePoint end(Duration(s.window_end_ns.load(std::memory_order_relaxed)));
    s.timer = s.clock.ScheduleAt(end, [weak = std::weak_ptr<Sampler>(sampler_)] {
      std::shared_ptr<Sampler> alive = weak.lock();
      if (alive == nullptr) return;
      internal::MutexLock lock(&alive->mu);
      alive->timer = 0;
      alive->FlushLocked(alive->clock.Now());
    });
  }

  const std::shared_ptr<Sampler> sampler_;
};

Result<std::unique_ptr<EventLog>> EventLog::Create(EventLogOptions options) {
  Status s = options.Validate();
  if (!s.ok()) return s;
  return std::unique_ptr<EventLog>(new EventLog(std::make_shared<Core>(std::move(options))));
}

EventLog::EventLog(std::shared_ptr<Core> core) : core_(std::move(core)) {}

EventLog::~EventLog() = default;

void EventLog::Attach(CircuitBreaker& breaker) {
  breaker.AddListener(std::make_shared<Listener>(core_, breaker));
}

void EventLog::OnRegistryEvent(const RegistryEvent& event) {
  if (event.kind == RegistryEvent::Kind::kCreated && !core_->options.log_registry_created) return;
  internal::JsonObject o;
  o.Str("event", "registry").Str("kind", RegistryEventKindName(event.kind));
  if (!event.key.empty()) o.Str("breaker", event.key);
  o.Uint("size", event.size);
  if (event.count != 0) o.Uint("count", event.count);
  if (core_->options.wall_clock) o.Time("ts", core_->options.wall_clock());
  core_->Write(std::move(o).Done());
}

std::uint64_t EventLog::lines_written() const noexcept {
  return core_->written.load(std::memory_order_relaxed);
}

std::uint64_t EventLog::write_errors() const noexcept {
  return core_->errors.load(std::memory_order_relaxed);
}

}  // namespace fusebox
