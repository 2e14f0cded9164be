// The seed-000 call end to end (fusebox::meta::RunProviderCall,
// provider_call.h): the two circuit names built from the key, both breakers
// looked up in the registry, both permits taken and recorded, around a
// trivial callable that succeeds. A registry holds the circuits of 5,000
// provider keys (10,000 breakers); the calls hit 64 hot keys, or all 5,000 in
// a scattered order. Yardsticks in the same run: one Registry::Borrow() of one
// key on the same registry, and an uncontended fetch_add. For comparison, the
// path RunProviderCall took before it borrowed (two std::string names, two
// Get()s, shared_ptrs), the call with ProviderCircuitKey() building the key
// too, the call with kept keys (ProviderCircuitKeys: no names built, no
// hash), and the call's two parts alone (the lookups; the breakers' permits).
//
//   fusebox_bench --benchmark_filter=ProviderCall --benchmark_repetitions=5
//                 --benchmark_report_aggregates_only=true
//
// docs/performance.md ("The seed-000 call") quotes the medians. The CPU model
// is in the output's context ("cpu_model").
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "alloc_counter.h"
#include "fusebox/meta/provider_call.h"
#include "fusebox/registry.h"
#include "key_sets.h"

namespace fusebox::meta {
namespace {

constexpr int kKeys = 5000;

std::string Subject(int i) { return std::to_string(17841400000000000LL + i); }

// "provider:instagram:read:17841400000000042": 41 bytes, as seed 000's keys.
std::string Key(int i) { return *ProviderCircuitKey("instagram", Workload::kRead, Subject(i)); }

ProviderResult<int> Succeed() { return 1; }

Registry& SharedRegistry() {
  static Registry* registry = [] {
    // Room for both circuits of every key: every call below is a hit.
    Registry* r = Registry::Create({.max_breakers = 2 * kKeys})->release();
    for (int i = 0; i < kKeys; ++i) (void)RunProviderCall(*r, Key(i), Succeed);
    return r;
  }();
  return *registry;
}

std::vector<int> Hot(int thread) { return bench::HotIds(thread, kKeys); }
std::vector<int> Scattered(int thread) { return bench::ScatteredIds(thread, kKeys); }

// RunProviderCall before it borrowed: two names on the heap, two Get()s
// (a shared_ptr each), the same admission and recording.
ProviderResult<int> SharedPathCall(Registry& registry, const std::string& key) {
  std::shared_ptr<CircuitBreaker> transient =
      *registry.Get(key + ":transient", kTransientConfigName);
  std::shared_ptr<CircuitBreaker> quota = *registry.Get(key + ":quota", kQuotaConfigName);
  std::variant<internal::ProviderPermits, ProviderError> admitted =
      internal::Admit(*transient, *quota, registry.clock(), registry.clock().CoarseNow());
  if (ProviderError* refused = std::get_if<ProviderError>(&admitted)) return *refused;
  ProviderResult<int> r = Succeed();
  std::get<internal::ProviderPermits>(admitted).Finish(r.has_value() ? nullptr : &r.error());
  return r;
}

enum class Path { kRunProviderCall, kSharedPath, kWithKeyBuild, kKeptKeys };

template <Path kPath>
void Calls(benchmark::State& state, const std::vector<int>& ids) {
  Registry& registry = SharedRegistry();
  std::vector<std::string> keys;
  std::vector<std::string> subjects;
  std::vector<ProviderCircuitKeys> kept;
  for (int id : ids) {
    keys.push_back(Key(id));
    subjects.push_back(Subject(id));
    if constexpr (kPath == Path::kKeptKeys) kept.emplace_back(keys.back());
  }
  const std::size_t n = keys.size();
  std::size_t i = 0;
  std::int64_t failed = 0;
  const std::uint64_t allocs_before = bench::Allocations();
  for (auto _ : state) {
    ProviderResult<int> r = [&] {
      if constexpr (kPath == Path::kRunProviderCall) {
        return RunProviderCall(registry, keys[i], Succeed);
      } else if constexpr (kPath == Path::kSharedPath) {
        return SharedPathCall(registry, keys[i]);
      } else if constexpr (kPath == Path::kKeptKeys) {
        return RunProviderCall(registry, kept[i], Succeed);
      } else {
        const Result<std::string> key =
            ProviderCircuitKey("instagram", Workload::kRead, subjects[i]);
        return RunProviderCall(registry, *key, Succeed);
      }
    }();
    failed += r.has_value() ? 0 : 1;
    benchmark::DoNotOptimize(r);
    if (++i == n) i = 0;
  }
  state.counters["allocs_per_call"] =
      benchmark::Counter(static_cast<double>(bench::Allocations() - allocs_before) /
                         static_cast<double>(state.iterations()));
  if (failed != 0) state.SkipWithError("a call failed: the circuits must stay closed");
  state.SetItemsProcessed(state.iterations());
}

void BM_ProviderCall_Hot64(benchmark::State& state) {
  Calls<Path::kRunProviderCall>(state, Hot(state.thread_index()));
}
void BM_ProviderCall_Scattered5000(benchmark::State& state) {
  Calls<Path::kRunProviderCall>(state, Scattered(state.thread_index()));
}
void BM_ProviderCall_Hot64_SharedPath(benchmark::State& state) {
  Calls<Path::kSharedPath>(state, Hot(state.thread_index()));
}
void BM_ProviderCall_Scattered5000_SharedPath(benchmark::State& state) {
  Calls<Path::kSharedPath>(state, Scattered(state.thread_index()));
}
void BM_ProviderCall_Hot64_WithKeyBuild(benchmark::State& state) {
  Calls<Path::kWithKeyBuild>(state, Hot(state.thread_index()));
}
void BM_ProviderCall_Hot64_KeptKeys(benchmark::State& state) {
  Calls<Path::kKeptKeys>(state, Hot(state.thread_index()));
}
void BM_ProviderCall_Scattered5000_KeptKeys(benchmark::State& state) {
  Calls<Path::kKeptKeys>(state, Scattered(state.thread_index()));
}
// One key over and over, as the yardstick below asks for one name over and
// over: its circuits, entries and hints stay in L1, so the call and the
// yardstick are compared on the same access pattern. Hot64 asks for 128
// circuits in turn, whose lines (slot, entry, breaker, counters) fill L1.
void BM_ProviderCall_Hot1(benchmark::State& state) {
  Calls<Path::kRunProviderCall>(state, {Hot(state.thread_index()).front()});
}
void BM_ProviderCall_Hot1_KeptKeys(benchmark::State& state) {
  Calls<Path::kKeptKeys>(state, {Hot(state.thread_index()).front()});
}
BENCHMARK(BM_ProviderCall_Hot1)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Hot1_KeptKeys)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Hot64)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_ProviderCall_Scattered5000)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_ProviderCall_Hot64_SharedPath)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Scattered5000_SharedPath)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Hot64_WithKeyBuild)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Hot64_KeptKeys)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_ProviderCall_Scattered5000_KeptKeys)->Threads(1)->Threads(2)->UseRealTime();

// The call in two parts, to see where its time goes. The lookups alone: both
// names built, both circuits borrowed and given back.
void Lookups(benchmark::State& state, const std::vector<int>& ids) {
  Registry& registry = SharedRegistry();
  std::vector<std::string> keys;
  for (int id : ids) keys.push_back(Key(id));
  const std::size_t n = keys.size();
  std::size_t i = 0;
  for (auto _ : state) {
    internal::BorrowedCircuits c =
        internal::BorrowProviderCircuits(registry, keys[i], registry.clock().CoarseNow());
    benchmark::DoNotOptimize(c);
    if (++i == n) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}

// The breakers alone, held beforehand: both permits taken and recorded
// (with the clock reads that time the call).
void Breakers(benchmark::State& state, const std::vector<int>& ids) {
  Registry& registry = SharedRegistry();
  std::vector<ProviderCircuits> circuits;
  for (int id : ids) circuits.push_back(GetProviderCircuits(registry, Key(id)));
  const std::size_t n = circuits.size();
  std::size_t i = 0;
  std::int64_t failed = 0;
  Clock& clock = registry.clock();
  for (auto _ : state) {
    // What RunProviderCall does once it has found both circuits.
    ProviderResult<int> r = internal::RunOnCircuits(*circuits[i].transient, *circuits[i].quota,
                                                    clock, clock.CoarseNow(), Succeed);
    if (!r.has_value()) ++failed;
    if (++i == n) i = 0;
  }
  if (failed != 0) state.SkipWithError("a call was refused: the circuits must stay closed");
  state.SetItemsProcessed(state.iterations());
}

void BM_ProviderCall_Hot64_LookupsOnly(benchmark::State& state) {
  Lookups(state, Hot(state.thread_index()));
}
void BM_ProviderCall_Scattered5000_LookupsOnly(benchmark::State& state) {
  Lookups(state, Scattered(state.thread_index()));
}
void BM_ProviderCall_Hot64_BreakersOnly(benchmark::State& state) {
  Breakers(state, Hot(state.thread_index()));
}
void BM_ProviderCall_Scattered5000_BreakersOnly(benchmark::State& state) {
  Breakers(state, Scattered(state.thread_index()));
}
BENCHMARK(BM_ProviderCall_Hot64_LookupsOnly)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Scattered5000_LookupsOnly)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Hot64_BreakersOnly)->Threads(1)->UseRealTime();
BENCHMARK(BM_ProviderCall_Scattered5000_BreakersOnly)->Threads(1)->UseRealTime();

// Yardsticks, in the same run. One lookup: Borrow() of one key's transient
// circuit on the same registry, given back at once.
void BM_ProviderCall_Baseline_Borrow1(benchmark::State& state) {
  Registry& registry = SharedRegistry();
  const std::string name = Key(Hot(state.thread_index())[0]) + ":transient";
  const std::uint64_t allocs_before = bench::Allocations();
  for (auto _ : state) {
    Result<BorrowedBreaker> b = registry.Borrow(name, kTransientConfigName);
    benchmark::DoNotOptimize(b);
  }
  state.counters["allocs_per_call"] =
      benchmark::Counter(static_cast<double>(bench::Allocations() - allocs_before) /
                         static_cast<double>(state.iterations()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ProviderCall_Baseline_Borrow1)->Threads(1)->Threads(2)->UseRealTime();

// An uncontended atomic increment.
void BM_ProviderCall_Baseline_FetchAdd(benchmark::State& state) {
  static std::atomic<std::uint64_t> counter{0};
  for (auto _ : state) counter.fetch_add(1, std::memory_order_relaxed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ProviderCall_Baseline_FetchAdd);

}  // namespace
}  // namespace fusebox::meta
