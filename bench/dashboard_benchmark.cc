// The dashboard's cost with 10,000 circuits (issue 20): what the gateway
// spends once a second whatever the number of browsers (reading every
// breaker, folding the counts into the groups' rings), what each distinct
// filter adds (one render and its delta), and the bytes one open dashboard
// receives per second. And the cost of timing a call for the groups' p99
// (GroupLatencies: what the handler adds to each upstream call), against a
// plain fetch_add of the same run.
//
// 10,000 breakers: 5,000 circuit keys (transient and quota each) in 50
// groups (25 providers x read/write) of 100 keys, in a real Registry. Each
// tick, calls land on one key in ten (so every group changes, the worst
// case for deltas), and 5 groups have an OPEN breaker.
//
//   flock /tmp/fusebox-bench.lock build/release/bench/fusebox_dashboard_bench
//
// The figures are in docs/performance.md ("The dashboard").
#include <benchmark/benchmark.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "apps/gateway/dashboard_stats.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox::gateway {
namespace {

constexpr int kGroups = 50;
constexpr int kKeysPerGroup = 100;

std::string KeyOf(int group, int key) {
  return "provider:p" + std::to_string(group / 2) + (group % 2 == 0 ? ":read:" : ":write:") +
         std::to_string(17841400000000000LL + key);
}

struct Fleet {
  testing::ManualClock clock;
  std::unique_ptr<Registry> registry;
  std::vector<std::shared_ptr<CircuitBreaker>> breakers;
  DashboardStats stats{{}};
  std::vector<LatencyHistogram*> latencies;
  int round = 0;

  Fleet() {
    registry = std::move(*Registry::Create({.clock = &clock, .max_breakers = 20000}));
    for (int g = 0; g < kGroups; ++g) {
      for (int k = 0; k < kKeysPerGroup; ++k) {
        for (const char* suffix : {":transient", ":quota"}) {
          breakers.push_back(*registry->Get(KeyOf(g, k) + suffix));
        }
      }
    }
    for (int g = 0; g < kGroups; ++g) {
      latencies.push_back(stats.latencies().Find(GroupLatencies::GroupOfKey(KeyOf(g, 0))));
    }
    for (int g = 0; g < kGroups; g += 10) {
      (void)breakers[static_cast<std::size_t>(g * 2 * kKeysPerGroup)]->TransitionToOpen();
    }
  }

  // One second of traffic: a call (1 in 5 failing) on one key in ten, each
  // timed in its group as the handler times it.
  void Traffic() {
    ++round;
    for (std::size_t i = static_cast<std::size_t>(round % 10) * 2; i < breakers.size(); i += 20) {
      Result<Permit> p = breakers[i]->TryAcquire();
      if (!p) continue;
      LatencyHistogram::Record(latencies[i / (2 * kKeysPerGroup)],
                               std::chrono::milliseconds((i / 20) % 5 == 0 ? 80 : 20));
      if ((i / 20) % 5 == 0) {
        p->Failure(std::chrono::milliseconds(80));
      } else {
        p->Success(std::chrono::milliseconds(20));
      }
    }
    clock.Advance(std::chrono::seconds(1));
  }
};

Fleet& SharedFleet() {
  static Fleet* fleet = new Fleet();
  return *fleet;
}

// Reading every breaker (CircuitBreaker::Observe through Registry::ForEach).
void BM_DashboardSampleBreakers(benchmark::State& state) {
  Fleet& f = SharedFleet();
  for (auto _ : state) benchmark::DoNotOptimize(SampleBreakers(*f.registry));
  state.counters["breakers"] = static_cast<double>(f.breakers.size());
}
BENCHMARK(BM_DashboardSampleBreakers)->Unit(benchmark::kMillisecond);

// The whole tick without a browser: read, fold, sort (what runs once a
// second, always). The traffic is outside the timing.
void BM_DashboardTick(benchmark::State& state) {
  Fleet& f = SharedFleet();
  for (auto _ : state) {
    state.PauseTiming();
    f.Traffic();
    state.ResumeTiming();
    f.stats.Tick(f.clock.Now(), SampleBreakers(*f.registry));
  }
  state.counters["groups"] = static_cast<double>(f.stats.frame()->groups.size());
}
BENCHMARK(BM_DashboardTick)->Unit(benchmark::kMillisecond);

// One filter's share of a tick (render its top N, diff against the last
// rows), and the bytes of the delta every stream of that filter receives:
// bytes per tick = bytes per second per open dashboard.
void PublishFor(benchmark::State& state, const std::string& query) {
  Fleet& f = SharedFleet();
  DashboardStreams streams(kMaxDashboardStreams);
  auto sub = streams.Subscribe(query, *f.stats.frame());
  double bytes = 0;
  for (auto _ : state) {
    state.PauseTiming();
    f.Traffic();
    f.stats.Tick(f.clock.Now(), SampleBreakers(*f.registry));
    state.ResumeTiming();
    for (auto& [channel, event] : streams.Publish(*f.stats.frame())) {
      bytes += static_cast<double>(event->size());
    }
  }
  state.counters["first_event_bytes"] = static_cast<double>(sub->first_event.size());
  state.counters["bytes_per_tick"] =
      benchmark::Counter(bytes / static_cast<double>(state.iterations()));
}
// Arg: top N.
void BM_DashboardPublish(benchmark::State& state) {
  PublishFor(state, "top=" + std::to_string(state.range(0)));
}
BENCHMARK(BM_DashboardPublish)->Arg(10)->Arg(25)->Arg(200)->Unit(benchmark::kMicrosecond);

// The page's own query: key rows only for the expanded groups; here one
// drill-down open (Arg 1) or none (Arg 0), at the default top 25.
void BM_DashboardPublishKeysExpanded(benchmark::State& state) {
  // Group 0 holds an OPEN breaker: it is among the 25 shown.
  const std::string open = std::string(GroupLatencies::GroupOfKey(KeyOf(0, 0)));
  PublishFor(state, "top=25&keys=expanded" + (state.range(0) > 0 ? "&open=" + open : ""));
}
BENCHMARK(BM_DashboardPublishKeysExpanded)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// ---- Timing a call for the p99 (per upstream call) ----

// The yardstick, as in circuit_breaker_benchmark.cc: one relaxed increment
// of one shared atomic; with two threads the line moves between the cores.
void BM_Baseline_SharedFetchAdd(benchmark::State& state) {
  static std::atomic<std::uint64_t> shared{0};
  for (auto _ : state) shared.fetch_add(1, std::memory_order_relaxed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_SharedFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

// Call times around 20 ms (8 to 90 ms, in 6 neighbouring-ish buckets), as
// one busy group sees them; both threads record into the same histogram.
constexpr std::array<std::int64_t, 8> kCallMicros = {18000, 21000, 19500, 25000,
                                                     8000,  90000, 20000, 22000};

// What the handler adds to a call of a route with a literal provider: one
// fetch_add on the bucket of the call's time (the histogram found once).
void BM_LatencyRecord(benchmark::State& state) {
  static GroupLatencies table;
  LatencyHistogram* h = table.Find("facebook:read");
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  for (auto _ : state) {
    LatencyHistogram::Record(h, std::chrono::microseconds(kCallMicros[i++ % kCallMicros.size()]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LatencyRecord)->Threads(1)->Threads(2)->UseRealTime();

// The same with the two clock reads that time the call (SystemClock).
void BM_LatencyRecordWithClock(benchmark::State& state) {
  static GroupLatencies table;
  LatencyHistogram* h = table.Find("facebook:read");
  for (auto _ : state) {
    const TimePoint sent = SystemClock().Now();
    LatencyHistogram::Record(h, SystemClock().Now() - sent);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LatencyRecordWithClock)->Threads(1)->Threads(2)->UseRealTime();

// A route whose provider comes from the path ("{provider}"): the group's
// histogram is looked up per call (a lock and a map look-up) among 50.
void BM_LatencyFindAndRecord(benchmark::State& state) {
  static GroupLatencies table;
  std::vector<std::string> keys;
  for (int g = 0; g < kGroups; ++g) keys.push_back(KeyOf(g, 0));
  std::size_t i = static_cast<std::size_t>(state.thread_index());
  for (auto _ : state) {
    const std::string& key = keys[i % keys.size()];
    LatencyHistogram::Record(table.Find(GroupLatencies::GroupOfKey(key)),
                             std::chrono::microseconds(kCallMicros[i++ % kCallMicros.size()]));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_LatencyFindAndRecord)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace fusebox::gateway
