// Export cost: Prometheus text for a registry of 10,000 breakers (issue 7's
// target: <= 20 ms per scrape), and what the metrics listener adds to a call.
//
//   build/release/bench/fusebox_bench --benchmark_filter=Metrics
//       --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "fusebox/metrics.h"
#include "fusebox/observer.h"
#include "fusebox/prometheus.h"
#include "fusebox/registry.h"
#include "fusebox/testing/manual_clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;

constexpr int kBreakers = 10000;

struct Scene {
  testing::ManualClock clock;
  std::shared_ptr<MetricsCollector> metrics = std::make_shared<MetricsCollector>();
  std::unique_ptr<Registry> registry;

  Scene() {
    RegistryOptions options{.clock = &clock, .max_breakers = 2 * kBreakers};
    options.default_config =
        CircuitBreakerConfig{.sliding_window_size = 10, .minimum_number_of_calls = 4};
    ObserveRegistry(options, {metrics});
    registry = std::move(*Registry::Create(std::move(options)));
    // Every breaker has calls of each kind; one in ten is OPEN with
    // rejections, so transitions and OPEN time are present too.
    for (int i = 0; i < kBreakers; ++i) {
      auto b = *registry->Get("meta:read:" + std::to_string(17841400000000000LL + i) + ":quota");
      b->TryAcquire()->Success(milliseconds(20));
      b->TryAcquire()->Success(milliseconds(30));
      b->TryAcquire()->Ignore();
      b->TryAcquire()->Failure(milliseconds(40));
      if (i % 10 == 0) {
        // Fail until it opens, then one rejection.
        for (auto p = b->TryAcquire(); p.has_value(); p = b->TryAcquire()) {
          p->Failure(milliseconds(5));
        }
      }
    }
  }
};

Scene& SharedScene() {
  static Scene* scene = new Scene();
  return *scene;
}

// What a scrape costs: snapshot of every breaker, then the text.
void BM_Metrics_CollectAndRender10k(benchmark::State& state) {
  Scene& scene = SharedScene();
  std::size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = RenderPrometheus(scene.metrics->Collect(*scene.registry));
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Metrics_CollectAndRender10k)->Unit(benchmark::kMillisecond);

// The same, as a /metrics handler that keeps its buffer between scrapes
// (AppendPrometheus): no fresh 30 MB allocation and its page faults per scrape.
void BM_Metrics_CollectAndRenderReusedBuffer10k(benchmark::State& state) {
  Scene& scene = SharedScene();
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendPrometheus(scene.metrics->Collect(*scene.registry), {}, out);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["bytes"] = static_cast<double>(out.size());
}
BENCHMARK(BM_Metrics_CollectAndRenderReusedBuffer10k)->Unit(benchmark::kMillisecond);

void BM_Metrics_Collect10k(benchmark::State& state) {
  Scene& scene = SharedScene();
  for (auto _ : state) {
    MetricsSnapshot snap = scene.metrics->Collect(*scene.registry);
    benchmark::DoNotOptimize(snap.breakers.data());
  }
}
BENCHMARK(BM_Metrics_Collect10k)->Unit(benchmark::kMillisecond);

void BM_Metrics_Render10k(benchmark::State& state) {
  Scene& scene = SharedScene();
  const MetricsSnapshot snap = scene.metrics->Collect(*scene.registry);
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendPrometheus(snap, {}, out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Metrics_Render10k)->Unit(benchmark::kMillisecond);

// Rendering with a label function that folds the 10,000 account keys into
// one series (the aggregation seed 000 asks for).
void BM_Metrics_RenderAggregated10k(benchmark::State& state) {
  Scene& scene = SharedScene();
  const MetricsSnapshot snap = scene.metrics->Collect(*scene.registry);
  const PrometheusOptions options{.name_label = MaskKeySegments({2})};
  std::string out;
  for (auto _ : state) {
    out.clear();
    AppendPrometheus(snap, options, out);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Metrics_RenderAggregated10k)->Unit(benchmark::kMillisecond);

// A CLOSED call's cost with and without the collector's listener.
void BM_Metrics_CallWithoutListener(benchmark::State& state) {
  static auto* breaker = CircuitBreaker::Create("bare", {})->release();
  for (auto _ : state) breaker->TryAcquire()->Success(milliseconds(1));
}
BENCHMARK(BM_Metrics_CallWithoutListener);

// A breaker attached to a collector made with `options`, never destroyed
// (shared by the benchmark's threads).
CircuitBreaker* AttachedBreaker(MetricsCollectorOptions options) {
  auto* metrics = new MetricsCollector(std::move(options));
  CircuitBreaker* b = CircuitBreaker::Create("observed", {})->release();
  metrics->Attach(*b);
  return b;
}

// The collector's listener without the call timer (time_calls = false).
void BM_Metrics_CallWithListener(benchmark::State& state) {
  static CircuitBreaker* breaker = AttachedBreaker({.time_calls = false});
  for (auto _ : state) breaker->TryAcquire()->Success(milliseconds(1));
}
BENCHMARK(BM_Metrics_CallWithListener);

// The default collector: listener and call timer (the decaying _max).
void BM_Metrics_CallTimed(benchmark::State& state) {
  static CircuitBreaker* breaker = AttachedBreaker({.time_calls = true});
  for (auto _ : state) breaker->TryAcquire()->Success(milliseconds(1));
}
BENCHMARK(BM_Metrics_CallTimed)->ThreadRange(1, 2);

// With histogram buckets too.
void BM_Metrics_CallTimedHistogram(benchmark::State& state) {
  static CircuitBreaker* breaker =
      AttachedBreaker({.time_calls = true, .timer = {.percentiles_histogram = true}});
  for (auto _ : state) breaker->TryAcquire()->Success(milliseconds(1));
}
BENCHMARK(BM_Metrics_CallTimedHistogram)->ThreadRange(1, 2);

}  // namespace
}  // namespace fusebox
