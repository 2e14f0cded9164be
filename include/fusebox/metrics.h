// fusebox/metrics.h: counters and gauges of breakers and policies, for
// Prometheus (fusebox/prometheus.h) or any other exporter.
//
// A MetricsCollector is a BreakerObserver: attached to a breaker (directly, or
// to every breaker of a Registry through ObserveRegistry), it adds a listener
// that counts, per breaker and since it was attached:
//   - transitions by from, to and reason;
//   - the time spent OPEN (on the breaker's Clock).
// Collect() then takes a snapshot that adds what the breaker itself counts
// since it was created (CircuitBreaker::totals(): calls by outcome with the
// sum of their durations, slow calls, calls not permitted, half-open probe
// results) and knows (its state and its window: buffered calls, failure and
// slow-call rates),
// the registry's size and eviction counts, and the gauges of the bulkheads
// (semaphore and thread-pool) and rate limiters registered with
// AddBulkhead()/AddThreadPoolBulkhead()/AddRateLimiter(), and the loop
// counts of the retries registered with AddRetry() (a Retry counts its own
// loops, inside a Pipeline too). CountedExecute() and RetryCountersFor() count
// loops of a retry not registered so.
//
//   auto metrics = std::make_shared<fusebox::MetricsCollector>();
//   fusebox::RegistryOptions options;
//   fusebox::ObserveRegistry(options, {metrics});
//   auto registry = *fusebox::Registry::Create(std::move(options));
//   ...
//   std::string text = fusebox::RenderPrometheus(metrics->Collect(*registry));
//
// Cost per call: the listener wants transitions only
// (CircuitBreakerListener::interests()), so the breaker keeps its fast paths;
// the call counts are the breaker's own. Only the CallTimer
// (MetricsCollectorOptions::time_calls, off by default) costs a coarse clock
// read and a few atomic loads per call. docs/observability.md gives the
// figures.
//
// A breaker's series live as long as the breaker: the listener notices when
// the breaker is destroyed (a registry eviction, say) and the collector drops
// its counters; Collect(registry) only ever reports breakers the registry
// holds.
//
// Thread-safe.
#ifndef FUSEBOX_METRICS_H_
#define FUSEBOX_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fusebox/bulkhead.h"
#include "fusebox/call_timer.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"
#include "fusebox/internal/mutex.h"
#include "fusebox/internal/policy_call.h"
#include "fusebox/internal/thread_annotations.h"
#include "fusebox/observer.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/registry.h"
#include "fusebox/retry.h"
#include "fusebox/shared_state.h"
#include "fusebox/thread_pool_bulkhead.h"
#include "fusebox/timeout.h"

namespace fusebox {

// The number a state gauge reports: closed=0, half_open=1, open=2 (seed 003's
// numbering, so that "> 0" means "not passing everything normally"), then the
// operator states disabled=3, metrics_only=4, forced_open=5, forced_closed=6.
int StateCode(State state) noexcept;

// "closed", "open", "half_open", "disabled", "metrics_only", "forced_open",
// "forced_closed": the state label values, as Resilience4j's Micrometer
// binding writes them (lower-case State names).
std::string_view StateLabel(State state) noexcept;

// Transitions of one breaker with one (from, to, reason).
struct TransitionCount {
  State from = State::kClosed;
  State to = State::kClosed;
  TransitionReason reason = TransitionReason::kOperator;
  std::uint64_t count = 0;
};

// One breaker's counters. Calls, slow calls, rejections and probes are the
// breaker's totals() since it was created; transitions and time OPEN are
// counted by the collector's listener since the breaker was attached.
// Indexes of the arrays are OutcomeKind values (successful, failed, ignored).
struct BreakerCounters {
  std::uint64_t calls[3] = {0, 0, 0};
  // Sum of the durations of the calls above.
  Duration call_duration[3] = {Duration::zero(), Duration::zero(), Duration::zero()};
  std::uint64_t slow_successful = 0;
  std::uint64_t slow_failed = 0;
  // Calls rejected (OPEN, FORCED_OPEN, HALF_OPEN full), cumulative, unlike
  // CircuitBreakerMetrics::not_permitted_calls, which restarts with each state.
  std::uint64_t not_permitted = 0;
  // Outcomes of calls admitted as half-open probes, by kind.
  std::uint64_t probes[3] = {0, 0, 0};
  // Time spent in OPEN, the current period included up to the snapshot.
  Duration time_open = Duration::zero();
  // Sorted by (from, to, reason).
  std::vector<TransitionCount> transitions;
  // The breaker's CallTimer (set by a collector's Attach): the decaying
  // maximum of the call durations and, with the histogram, its buckets. False,
  // zero and empty without one.
  bool timed = false;
  CallTimerSample timer;
};

// One breaker in a snapshot.
struct BreakerSample {
  // The breaker's name (its registry key).
  std::string name;
  // Its state and window, from CircuitBreaker::metrics().
  CircuitBreakerMetrics window;
  // False when no collector listener watches the breaker (it was never
  // attached): `counters.transitions` and `counters.time_open` are then
  // empty and zero.
  bool observed = false;
  BreakerCounters counters;
};

struct BulkheadSample {
  std::string name;
  int available_concurrent_calls = 0;
  int max_allowed_concurrent_calls = 0;
  int waiting_calls = 0;
  std::uint64_t rejected_calls = 0;
};

// A thread-pool bulkhead (fusebox/thread_pool_bulkhead.h).
struct ThreadPoolBulkheadSample {
  std::string name;
  ThreadPoolBulkheadState state;
  int available_queue_capacity = 0;
  int core_thread_pool_size = 0;
  int max_thread_pool_size = 0;
  int queue_capacity = 0;
};

struct RateLimiterSample {
  std::string name;
  int available_permissions = 0;
  int limit_for_period = 0;
  std::uint64_t rejected_calls = 0;
  // Callers asleep in Acquire() (RateLimiter::waiting_threads()).
  int waiting_threads = 0;
};

// A Timeout (Resilience4j's TimeLimiter): its calls by how they ended.
struct TimeLimiterSample {
  std::string name;
  TimeLimiterCounts counts;
};

// A shared state (fusebox/shared_state.h) and how it is doing.
struct SharedStateSample {
  std::string name;
  SharedStateHealth health;
};

// Retry loops by how they ended, as Resilience4j's Retry.Metrics counts them.
struct RetrySample {
  std::string name;
  std::uint64_t successful_without_retry = 0;
  std::uint64_t successful_with_retry = 0;
  std::uint64_t failed_without_retry = 0;
  std::uint64_t failed_with_retry = 0;
};

// The registry's size and events, counted through OnRegistryEvent.
struct RegistrySample {
  std::size_t breakers = 0;
  // Indexed by RegistryEvent::Kind.
  std::uint64_t events[6] = {0, 0, 0, 0, 0, 0};
  // Gets answered by an overflow breaker (Registry::stats().overflowed): the
  // kOverflow events are rate-limited, this counts every one.
  std::uint64_t overflowed = 0;
};

struct MetricsSnapshot {
  std::vector<BreakerSample> breakers;
  std::vector<BulkheadSample> bulkheads;
  std::vector<ThreadPoolBulkheadSample> thread_pool_bulkheads;
  std::vector<RateLimiterSample> rate_limiters;
  std::vector<TimeLimiterSample> time_limiters;
  std::vector<RetrySample> retries;
  std::vector<SharedStateSample> shared_states;
  // Set by Collect(const Registry&).
  std::optional<RegistrySample> registry;
};

// Counters of one retry policy's loops; CountedExecute() updates them.
// Relaxed atomics: each counter is exact, a snapshot of all four together is
// not a single instant.
//
// Thread-safe.
class RetryCounters {
 public:
  void Record(bool succeeded, int attempts) noexcept {
    const int i = (succeeded ? 0 : 2) + (attempts > 1 ? 1 : 0);
    counts_[i].fetch_add(1, std::memory_order_relaxed);
  }
  RetrySample Sample(std::string name) const;

 private:
  // successful_without, successful_with, failed_without, failed_with.
  std::atomic<std::uint64_t> counts_[4] = {};
};

// Runs retry.Execute(fn) and counts the loop in `counters`: whether it ended
// in success, and whether it took more than one attempt.
template <typename F>
internal::PolicyReturn<F> CountedExecute(Retry& retry, RetryCounters& counters, F&& fn) {
  int attempts = 0;
  internal::PolicyReturn<F> r = retry.Execute([&] {
    ++attempts;
    return internal::InvokePlain(fn);
  });
  counters.Record(internal::StatusOf(r).ok(), attempts);
  return r;
}

// Counts what the breakers it is attached to do, and takes snapshots (see the
// top of this file). Share it (std::shared_ptr) with ObserveRegistry.
//
// Thread-safe.
struct MetricsCollectorOptions {
  // Time every call of the breakers attached (CallTimer): the
  // `_calls_seconds_max` gauges and, with timer.percentiles_histogram, the
  // `_calls_seconds_bucket` histogram. Costs a coarse clock read and a few
  // atomic loads per call, about 9 ns (docs/performance.md): off by default,
  // so that a collector keeps the breaker's 2 ns call; the gateway turns it
  // on (its calls take microseconds). Default: false.
  bool time_calls = false;
  // Default: Micrometer's (max over 1 min in 3 buffers, no histogram).
  CallTimerOptions timer{};
};

class MetricsCollector final : public BreakerObserver {
 public:
  MetricsCollector();
  // Options assumed valid (ValidateCallTimerOptions; asserted).
  explicit MetricsCollector(MetricsCollectorOptions options);
  ~MetricsCollector() override;

  MetricsCollector(const MetricsCollector&) = delete;
  MetricsCollector& operator=(const MetricsCollector&) = delete;

  // Starts counting `breaker`'s calls and transitions (adds a listener). A
  // second Attach() of the same breaker does nothing. A breaker already OPEN
  // starts its OPEN time now.
  // With options.time_calls, gives the breaker a CallTimer on its Clock
  // unless it has one (the first collector attached chooses the buckets;
  // every collector reports the breaker's timer).
  void Attach(CircuitBreaker& breaker) override;
  // Counts the registry's events (ObserveRegistry forwards them).
  void OnRegistryEvent(const RegistryEvent& event) override;

  // Reports the gauges of `bulkhead` (or `limiter`) as `name` until removed.
  // The policy must outlive its registration. Replaces an earlier one of the
  // same name.
  void AddBulkhead(std::string name, const Bulkhead& bulkhead);
  bool RemoveBulkhead(std::string_view name);
  void AddThreadPoolBulkhead(std::string name, const ThreadPoolBulkhead& bulkhead);
  bool RemoveThreadPoolBulkhead(std::string_view name);
  void AddRateLimiter(std::string name, const RateLimiter& limiter);
  bool RemoveRateLimiter(std::string_view name);
  // Reports `timeout`'s counts (Timeout::counts()) as time limiter `name`.
  void AddTimeLimiter(std::string name, const Timeout& timeout);
  bool RemoveTimeLimiter(std::string_view name);
  // Reports the health of `state` (Redis errors, fail-open periods, lease
  // contention, ...) as `name` until removed; keeps it alive meanwhile.
  void AddSharedState(std::string name, std::shared_ptr<const SharedState> state);
  bool RemoveSharedState(std::string_view name);
  // Reports the loop counts of `retry` (Retry::loop_counts(): its Execute()
  // loops and those of every Pipeline it is in) as retry `name` until
  // removed. The retry must outlive its registration. Replaces an earlier one
  // of the same name; a name also given to RetryCountersFor() is reported
  // twice, so use one or the other.
  void AddRetry(std::string name, const Retry& retry);
  bool RemoveRetry(std::string_view name);
  // The counters reported as retry `name`, created on first use. The
  // reference stays valid as long as the collector.
  RetryCounters& RetryCountersFor(std::string_view name);

  // Policies and retries only (no breaker, no registry).
  MetricsSnapshot Collect() const;
  // Plus every breaker the registry holds now, with the registry's counts.
  MetricsSnapshot Collect(const Registry& registry) const;
  // Plus `breaker`'s sample (observed or not), appended to snapshot.breakers.
  void AddBreaker(MetricsSnapshot& snapshot, const CircuitBreaker& breaker) const;

  // The sample of one breaker.
  BreakerSample Sample(const CircuitBreaker& breaker) const;

  // Breakers with live counters (attached and not yet destroyed).
  std::size_t observed_breakers() const;

 private:
  struct Core;
  class Listener;
  const std::shared_ptr<Core> core_;
};

}  // namespace fusebox

#endif  // FUSEBOX_METRICS_H_
