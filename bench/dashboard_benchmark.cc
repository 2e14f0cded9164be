// The dashboard's cost with 10,000 circuits (issue 20): what the gateway
// spends once a second whatever the number of browsers (reading every
// breaker, folding the counts into the groups' rings), what each distinct
// filter adds (one render and its delta), and the bytes one open dashboard
// receives per second.
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
    for (int g = 0; g < kGroups; g += 10) {
      (void)breakers[static_cast<std::size_t>(g * 2 * kKeysPerGroup)]->TransitionToOpen();
    }
  }

  // One second of traffic: a call (1 in 5 failing) on one key in ten.
  void Traffic() {
    ++round;
    for (std::size_t i = static_cast<std::size_t>(round % 10) * 2; i < breakers.size(); i += 20) {
      Result<Permit> p = breakers[i]->TryAcquire();
      if (!p) continue;
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
// bytes per tick = bytes per second per open dashboard. Arg: top N.
void BM_DashboardPublish(benchmark::State& state) {
  Fleet& f = SharedFleet();
  DashboardStreams streams(kMaxDashboardStreams);
  const std::string query = "top=" + std::to_string(state.range(0));
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
BENCHMARK(BM_DashboardPublish)->Arg(10)->Arg(25)->Arg(200)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace fusebox::gateway
