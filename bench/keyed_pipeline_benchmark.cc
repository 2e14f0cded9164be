// The keyed pipeline's per-call cost (Pipeline::Execute(key, fn), pipeline.h)
// against the same pipeline with one fixed breaker, in the same run: breaker
// and retry around a trivial callable; the keyed variants look up one of 64
// hot keys per call in a Registry (by string_view, by RegistryKey, and with a
// bulkhead per key). Run with
//   ./build/release/bench/fusebox_bench --benchmark_filter='KeyedPipeline'
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// docs/performance.md quotes the medians.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "fusebox/circuit_breaker.h"
#include "fusebox/pipeline.h"
#include "fusebox/registry.h"
#include "fusebox/retry.h"

namespace fusebox {
namespace {

constexpr int kKeys = 64;

std::shared_ptr<Retry> BenchRetry() { return *Retry::Create({.max_attempts = 3}); }

std::shared_ptr<Registry> BenchRegistry() { return *Registry::Create({}); }

const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> k;
    for (int i = 0; i < kKeys; ++i) k.push_back("graph:read:" + std::to_string(17841400000 + i));
    return k;
  }();
  return keys;
}

const std::vector<RegistryKey>& HashedKeys() {
  static const std::vector<RegistryKey> keys = [] {
    std::vector<RegistryKey> k;
    for (const std::string& s : Keys()) k.emplace_back(s);
    return k;
  }();
  return keys;
}

// Breaker + retry, one fixed breaker: the baseline.
void BM_KeyedPipeline_FixedBreaker(benchmark::State& state) {
  static Pipeline* pipeline = Pipeline::Builder()
                                  .WithCircuitBreaker(*CircuitBreaker::Create("bench-fixed", {}))
                                  .WithRetry(BenchRetry())
                                  .Build()
                                  ->release();
  int x = 0;
  for (auto _ : state) benchmark::DoNotOptimize(pipeline->Execute([&x] { return ++x; }));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_KeyedPipeline_FixedBreaker)->Threads(1)->Threads(2)->UseRealTime();

Pipeline* KeyedPipeline(bool bulkhead_per_key) {
  Pipeline::Builder b;
  b.WithRegistry(BenchRegistry()).WithRetry(BenchRetry());
  if (bulkhead_per_key) b.WithBulkheadPerKey({.max_concurrent_calls = 64});
  return b.Build()->release();
}

// Calls `pipeline` with each of `keys` in turn (threads start apart).
template <typename Key>
void RunKeyed(benchmark::State& state, Pipeline& pipeline, const std::vector<Key>& keys) {
  int x = 0;
  std::size_t i = static_cast<std::size_t>(state.thread_index()) * 7;
  for (auto _ : state) {
    benchmark::DoNotOptimize(pipeline.Execute(keys[i++ % kKeys], [&x] { return ++x; }));
  }
  state.SetItemsProcessed(state.iterations());
}

// The same definition, each call's breaker from the registry by key.
void BM_KeyedPipeline_ByKey(benchmark::State& state) {
  static Pipeline* pipeline = KeyedPipeline(false);
  RunKeyed(state, *pipeline, Keys());
}
BENCHMARK(BM_KeyedPipeline_ByKey)->Threads(1)->Threads(2)->UseRealTime();

// Keys hashed once (RegistryKey).
void BM_KeyedPipeline_ByRegistryKey(benchmark::State& state) {
  static Pipeline* pipeline = KeyedPipeline(false);
  RunKeyed(state, *pipeline, HashedKeys());
}
BENCHMARK(BM_KeyedPipeline_ByRegistryKey)->Threads(1)->Threads(2)->UseRealTime();

// By key, with a bulkhead per key (one more lookup, and the slot).
void BM_KeyedPipeline_ByKeyWithBulkheadPerKey(benchmark::State& state) {
  static Pipeline* pipeline = KeyedPipeline(true);
  RunKeyed(state, *pipeline, Keys());
}
BENCHMARK(BM_KeyedPipeline_ByKeyWithBulkheadPerKey)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace fusebox
