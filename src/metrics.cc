// MetricsCollector: per-breaker transition counts and OPEN time kept by a
// listener, and snapshots.
//
// Calls by outcome, slow calls, rejections and probe results are the
// breaker's own totals() (per-thread counters it keeps anyway), so the
// listener asks for transitions only: a call costs the collector nothing,
// and the breaker keeps its write-free success path. Transitions and OPEN
// time are rare and go under the series' mutex.
//
// Lifetime: the breaker owns the listener, the listener and the collector
// share the Series. The listener's destructor runs while its breaker is being
// destroyed and removes the breaker's entry from the collector (if the
// collector still exists), so the collector never holds an entry for a dead
// breaker, and a new breaker at the same address gets a fresh entry.
#include "fusebox/metrics.h"

#include <algorithm>
#include <bit>
#include <cassert>
#include <map>
#include <tuple>

namespace fusebox {

int StateCode(State state) noexcept {
  switch (state) {
    case State::kClosed:
      return 0;
    case State::kHalfOpen:
      return 1;
    case State::kOpen:
      return 2;
    case State::kDisabled:
      return 3;
    case State::kMetricsOnly:
      return 4;
    case State::kForcedOpen:
      return 5;
    case State::kForcedClosed:
      return 6;
  }
  return -1;
}

std::string_view StateLabel(State state) noexcept {
  switch (state) {
    case State::kClosed:
      return "closed";
    case State::kOpen:
      return "open";
    case State::kHalfOpen:
      return "half_open";
    case State::kDisabled:
      return "disabled";
    case State::kMetricsOnly:
      return "metrics_only";
    case State::kForcedOpen:
      return "forced_open";
    case State::kForcedClosed:
      return "forced_closed";
  }
  return "unknown";
}

RetrySample RetryCounters::Sample(std::string name) const {
  RetrySample s;
  s.name = std::move(name);
  s.successful_without_retry = counts_[0].load(std::memory_order_relaxed);
  s.successful_with_retry = counts_[1].load(std::memory_order_relaxed);
  s.failed_without_retry = counts_[2].load(std::memory_order_relaxed);
  s.failed_with_retry = counts_[3].load(std::memory_order_relaxed);
  return s;
}

namespace {

struct Series {
  internal::Mutex mu;
  std::vector<TransitionCount> transitions FUSEBOX_GUARDED_BY(mu);
  bool open FUSEBOX_GUARDED_BY(mu) = false;
  TimePoint open_since FUSEBOX_GUARDED_BY(mu){};
  Duration open_total FUSEBOX_GUARDED_BY(mu) = Duration::zero();
};

// Breaker -> series, by open addressing with linear probing. A scrape looks
// up every breaker it samples, in memory the previous scrape's text has just
// flushed from the caches: std::unordered_map's bucket, node and next-node
// pointers are three cache misses a lookup, a slot here is one (a quarter of
// a 10,000-breaker scrape's collection went to those lookups).
//
// Not thread-safe (MetricsCollector::Core::mu guards it).
class SeriesTable {
 public:
  // The series of `key`, or null.
  std::shared_ptr<Series> Find(const CircuitBreaker* key) const {
    if (size_ == 0) return nullptr;
    for (std::size_t i = Home(key);; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return slots_[i].series;
      if (slots_[i].key == nullptr) return nullptr;
    }
  }

  // Adds `key` with `series`; false, and nothing added, if `key` is present.
  bool Insert(const CircuitBreaker* key, std::shared_ptr<Series> series) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    std::size_t i = Home(key);
    for (; slots_[i].key != nullptr; i = (i + 1) & mask()) {
      if (slots_[i].key == key) return false;
    }
    slots_[i] = Slot{key, std::move(series)};
    ++size_;
    return true;
  }

  // Removes `key` if its series is `series`.
  void Erase(const CircuitBreaker* key, const Series* series) {
    if (size_ == 0) return;
    std::size_t hole = Home(key);
    for (; slots_[hole].key != key; hole = (hole + 1) & mask()) {
      if (slots_[hole].key == nullptr) return;
    }
    if (slots_[hole].series.get() != series) return;
    // Backward-shift deletion: an entry further along the run moves into the
    // hole when the hole lies between its home slot and where it is, so that
    // every entry stays reachable from its home without tombstones.
    for (std::size_t i = (hole + 1) & mask(); slots_[i].key != nullptr; i = (i + 1) & mask()) {
      if (((i - Home(slots_[i].key)) & mask()) >= ((i - hole) & mask())) {
        slots_[hole] = std::move(slots_[i]);
        hole = i;
      }
    }
    slots_[hole] = Slot{};
    --size_;
  }

  std::size_t size() const { return size_; }

 private:
  struct Slot {
    const CircuitBreaker* key = nullptr;  // nullptr: empty
    std::shared_ptr<Series> series;
  };

  std::size_t mask() const { return slots_.size() - 1; }

  // Fibonacci hashing: the high bits of the address times 2^64 / phi, so that
  // aligned addresses spread over the whole table.
  std::size_t Home(const CircuitBreaker* key) const {
    const auto h =
        static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(key)) * 0x9E3779B97F4A7C15ull;
    return static_cast<std::size_t>(h >> shift_);
  }

  // Doubles the table (at least 16 slots), so that it stays at most half full.
  void Grow() {
    std::vector<Slot> old =
        std::exchange(slots_, std::vector<Slot>(std::max<std::size_t>(16, 2 * slots_.size())));
    shift_ = 64 - std::countr_zero(slots_.size());
    for (Slot& slot : old) {
      if (slot.key == nullptr) continue;
      std::size_t i = Home(slot.key);
      while (slots_[i].key != nullptr) i = (i + 1) & mask();
      slots_[i] = std::move(slot);
    }
  }

  // A power of two in size, at most half full.
  std::vector<Slot> slots_;
  std::size_t size_ = 0;
  int shift_ = 64;
};

auto TransitionKey(const TransitionCount& t) {
  return std::make_tuple(static_cast<int>(t.from), static_cast<int>(t.to),
                         static_cast<int>(t.reason));
}

}  // namespace

struct MetricsCollector::Core {
  Core(MetricsCollectorOptions o, std::shared_ptr<const std::vector<Duration>> b)
      : options(o), bounds(std::move(b)) {}

  const MetricsCollectorOptions options;
  // The histogram's bucket bounds, shared by every timer; null without.
  const std::shared_ptr<const std::vector<Duration>> bounds;
  mutable internal::Mutex mu;
  SeriesTable series FUSEBOX_GUARDED_BY(mu);
  std::map<std::string, const Bulkhead*, std::less<>> bulkheads FUSEBOX_GUARDED_BY(mu);
  std::map<std::string, const ThreadPoolBulkhead*, std::less<>> thread_pool_bulkheads
      FUSEBOX_GUARDED_BY(mu);
  std::map<std::string, const RateLimiter*, std::less<>> limiters FUSEBOX_GUARDED_BY(mu);
  // AddRetry(): retries that count their own loops.
  std::map<std::string, const Retry*, std::less<>> counted_retries FUSEBOX_GUARDED_BY(mu);
  std::map<std::string, const Timeout*, std::less<>> time_limiters FUSEBOX_GUARDED_BY(mu);
  std::map<std::string, std::unique_ptr<RetryCounters>, std::less<>> retries FUSEBOX_GUARDED_BY(mu);
  std::map<std::string, std::shared_ptr<const SharedState>, std::less<>> shared_states
      FUSEBOX_GUARDED_BY(mu);

  std::atomic<std::uint64_t> registry_events[6] = {};
};

class MetricsCollector::Listener final : public CircuitBreakerListener {
 public:
  Listener(std::shared_ptr<Series> series, std::weak_ptr<Core> core, const CircuitBreaker* key)
      : series_(std::move(series)), core_(std::move(core)), key_(key) {}

  ~Listener() override {
    // Runs while the breaker is being destroyed (it owns this listener).
    if (std::shared_ptr<Core> core = core_.lock()) {
      internal::MutexLock lock(&core->mu);
      core->series.Erase(key_, series_.get());
    }
  }

  unsigned interests() const override { return kTransitionEvents; }

  void OnTransition(const TransitionEvent& e) override {
    Series& s = *series_;
    internal::MutexLock lock(&s.mu);
    const TransitionCount key{e.from, e.to, e.reason, 0};
    auto it = std::lower_bound(s.transitions.begin(), s.transitions.end(), key,
                               [](const TransitionCount& a, const TransitionCount& b) {
                                 return TransitionKey(a) < TransitionKey(b);
                               });
    if (it == s.transitions.end() || TransitionKey(*it) != TransitionKey(key)) {
      it = s.transitions.insert(it, key);
    }
    ++it->count;
    // OPEN time: from entering OPEN to leaving it; OPEN -> OPEN (a longer
    // hint, a fleet signal) does not restart the period.
    if (e.to == State::kOpen && !s.open) {
      s.open = true;
      s.open_since = e.at;
    } else if (e.to != State::kOpen && s.open) {
      if (e.at > s.open_since) s.open_total += e.at - s.open_since;
      s.open = false;
    }
  }

 private:
  const std::shared_ptr<Series> series_;
  const std::weak_ptr<Core> core_;
  const CircuitBreaker* const key_;
};

namespace {

// Removes the entry named `name`; false when there is none.
template <typename Map>
bool EraseNamed(Map& map, std::string_view name) {
  auto it = map.find(name);
  if (it == map.end()) return false;
  map.erase(it);
  return true;
}

}  // namespace

MetricsCollector::MetricsCollector() : MetricsCollector(MetricsCollectorOptions{}) {}

MetricsCollector::MetricsCollector(MetricsCollectorOptions options)
    : core_([&] {
        assert(ValidateCallTimerOptions(options.timer).ok() && "invalid CallTimerOptions");
        std::shared_ptr<const std::vector<Duration>> bounds;
        if (options.time_calls && options.timer.percentiles_histogram) {
          bounds = std::make_shared<const std::vector<Duration>>(PercentileHistogramBuckets(
              options.timer.minimum_expected_value, options.timer.maximum_expected_value));
        }
        return std::make_shared<Core>(options, std::move(bounds));
      }()) {}

MetricsCollector::~MetricsCollector() = default;

void MetricsCollector::Attach(CircuitBreaker& breaker) {
  auto series = std::make_shared<Series>();
  {
    internal::MutexLock lock(&core_->mu);
    if (!core_->series.Insert(&breaker, series)) return;
  }
  if (core_->options.time_calls && breaker.call_timer() == nullptr) {
    breaker.SetCallTimer(
        std::make_shared<CallTimer>(breaker.clock(), core_->options.timer, core_->bounds));
  }
  if (breaker.state() == State::kOpen) {
    internal::MutexLock lock(&series->mu);
    series->open = true;
    series->open_since = breaker.clock().Now();
  }
  breaker.AddListener(std::make_shared<Listener>(series, core_, &breaker));
}

void MetricsCollector::OnRegistryEvent(const RegistryEvent& event) {
  const auto i = static_cast<std::size_t>(event.kind);
  if (i < 6) core_->registry_events[i].fetch_add(1, std::memory_order_relaxed);
}

void MetricsCollector::AddThreadPoolBulkhead(std::string name, const ThreadPoolBulkhead& bulkhead) {
  internal::MutexLock lock(&core_->mu);
  core_->thread_pool_bulkheads.insert_or_assign(std::move(name), &bulkhead);
}

bool MetricsCollector::RemoveThreadPoolBulkhead(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  return EraseNamed(core_->thread_pool_bulkheads, name);
}

void MetricsCollector::AddBulkhead(std::string name, const Bulkhead& bulkhead) {
  internal::MutexLock lock(&core_->mu);
  core_->bulkheads.insert_or_assign(std::move(name), &bulkhead);
}

bool MetricsCollector::RemoveBulkhead(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  return EraseNamed(core_->bulkheads, name);
}

void MetricsCollector::AddRateLimiter(std::string name, const RateLimiter& limiter) {
  internal::MutexLock lock(&core_->mu);
  core_->limiters.insert_or_assign(std::move(name), &limiter);
}

bool MetricsCollector::RemoveRateLimiter(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  return EraseNamed(core_->limiters, name);
}

void MetricsCollector::AddTimeLimiter(std::string name, const Timeout& timeout) {
  internal::MutexLock lock(&core_->mu);
  core_->time_limiters.insert_or_assign(std::move(name), &timeout);
}

bool MetricsCollector::RemoveTimeLimiter(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  return EraseNamed(core_->time_limiters, name);
}

void MetricsCollector::AddSharedState(std::string name, std::shared_ptr<const SharedState> state) {
  internal::MutexLock lock(&core_->mu);
  core_->shared_states.insert_or_assign(std::move(name), std::move(state));
}

bool MetricsCollector::RemoveSharedState(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  return EraseNamed(core_->shared_states, name);
}

void MetricsCollector::AddRetry(std::string name, const Retry& retry) {
  internal::MutexLock lock(&core_->mu);
  core_->counted_retries.insert_or_assign(std::move(name), &retry);
}

bool MetricsCollector::RemoveRetry(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  return EraseNamed(core_->counted_retries, name);
}

RetryCounters& MetricsCollector::RetryCountersFor(std::string_view name) {
  internal::MutexLock lock(&core_->mu);
  auto it = core_->retries.find(name);
  if (it == core_->retries.end()) {
    it = core_->retries.emplace(std::string(name), std::make_unique<RetryCounters>()).first;
  }
  return *it->second;
}

MetricsSnapshot MetricsCollector::Collect() const {
  MetricsSnapshot snapshot;
  internal::MutexLock lock(&core_->mu);
  for (const auto& [name, b] : core_->bulkheads) {
    snapshot.bulkheads.push_back(BulkheadSample{name, b->available_permits(),
                                                b->options().max_concurrent_calls,
                                                b->waiting_calls(), b->rejected_calls()});
  }
  for (const auto& [name, b] : core_->thread_pool_bulkheads) {
    const ThreadPoolBulkheadOptions& o = b->options();
    const ThreadPoolBulkheadState st = b->state();
    snapshot.thread_pool_bulkheads.push_back(ThreadPoolBulkheadSample{
        name, st, o.queue_capacity - st.queue_depth, o.core_thread_pool_size,
        o.max_thread_pool_size, o.queue_capacity});
  }
  for (const auto& [name, l] : core_->limiters) {
    snapshot.rate_limiters.push_back(RateLimiterSample{name, l->AvailablePermits(),
                                                       l->options().limit_for_period,
                                                       l->rejected_calls(), l->waiting_threads()});
  }
  for (const auto& [name, t] : core_->time_limiters) {
    snapshot.time_limiters.push_back(TimeLimiterSample{name, t->counts()});
  }
  for (const auto& [name, r] : core_->retries) snapshot.retries.push_back(r->Sample(name));
  for (const auto& [name, r] : core_->counted_retries) {
    const RetryLoopCounts c = r->loop_counts();
    snapshot.retries.push_back(RetrySample{name, c.successful_without_retry,
                                           c.successful_with_retry, c.failed_without_retry,
                                           c.failed_with_retry});
  }
  for (const auto& [name, st] : core_->shared_states) {
    snapshot.shared_states.push_back(SharedStateSample{name, st->health()});
  }
  return snapshot;
}

MetricsSnapshot MetricsCollector::Collect(const Registry& registry) const {
  MetricsSnapshot snapshot = Collect();
  snapshot.breakers.reserve(registry.size());
  registry.ForEach([&](const std::string& /*key*/, CircuitBreaker& breaker) {
    snapshot.breakers.push_back(Sample(breaker));
  });
  RegistrySample r;
  r.breakers = registry.size();
  for (std::size_t i = 0; i < 6; ++i) {
    r.events[i] = core_->registry_events[i].load(std::memory_order_relaxed);
  }
  r.overflowed = registry.stats().overflowed;
  snapshot.registry = r;
  return snapshot;
}

void MetricsCollector::AddBreaker(MetricsSnapshot& snapshot, const CircuitBreaker& breaker) const {
  snapshot.breakers.push_back(Sample(breaker));
}

BreakerSample MetricsCollector::Sample(const CircuitBreaker& breaker) const {
  BreakerSample sample;
  sample.name = breaker.name();
  // The breaker's own lock, taken with no collector lock held.
  const CircuitBreakerTotals t = [&] {
    CircuitBreakerTotals totals;
    breaker.Observe(sample.window, totals);
    return totals;
  }();
  std::shared_ptr<Series> series;
  {
    internal::MutexLock lock(&core_->mu);
    series = core_->series.Find(&breaker);
  }
  BreakerCounters& c = sample.counters;
  for (std::size_t i = 0; i < 3; ++i) {
    c.calls[i] = static_cast<std::uint64_t>(t.calls[i]);
    c.call_duration[i] = t.call_time[i];
    c.probes[i] = static_cast<std::uint64_t>(t.probe_calls[i]);
  }
  c.slow_successful = static_cast<std::uint64_t>(t.slow_successful_calls);
  c.slow_failed = static_cast<std::uint64_t>(t.slow_failed_calls);
  c.not_permitted = static_cast<std::uint64_t>(t.not_permitted_calls);
  if (CallTimer* timer = breaker.call_timer()) {
    c.timed = true;
    c.timer = timer->Sample();
  }
  if (series == nullptr) return sample;
  sample.observed = true;
  internal::MutexLock lock(&series->mu);
  c.transitions = series->transitions;
  c.time_open = series->open_total;
  if (series->open) {
    const TimePoint now = breaker.clock().Now();
    if (now > series->open_since) c.time_open += now - series->open_since;
  }
  return sample;
}

std::size_t MetricsCollector::observed_breakers() const {
  internal::MutexLock lock(&core_->mu);
  return core_->series.size();
}

}  // namespace fusebox
