// Registry lookup benchmarks: a hit on a registry holding 5,000 breakers.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "fusebox/registry.h"

namespace fusebox {
namespace {

Registry& SharedRegistry() {
  static Registry* registry = [] {
    Registry* r = Registry::Create({})->release();
    for (int i = 0; i < 5000; ++i) {
      (void)r->Get("meta:read:" + std::to_string(17841400000000000LL + i) + ":quota");
    }
    return r;
  }();
  return *registry;
}

void BM_Registry_Hit(benchmark::State& state) {
  Registry& registry = SharedRegistry();
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) {
    keys.push_back("meta:read:" +
                   std::to_string(17841400000000000LL + i * 13 + state.thread_index()) + ":quota");
  }
  std::size_t i = 0;
  const std::uint64_t allocs_before = bench::Allocations();
  for (auto _ : state) {
    Result<std::shared_ptr<CircuitBreaker>> b = registry.Get(keys[i++ & 63]);
    benchmark::DoNotOptimize(b);
  }
  state.counters["allocs_per_call"] =
      benchmark::Counter(static_cast<double>(bench::Allocations() - allocs_before) /
                         static_cast<double>(state.iterations()));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Registry_Hit)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace fusebox
