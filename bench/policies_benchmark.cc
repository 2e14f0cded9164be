// Policy benchmarks: the full pipeline around a trivial callable against the
// bare breaker and the bare callable, one and two threads; the rate limiter
// and the bulkhead alone; allocations per call for each. Run with
//   ./build/release/bench/fusebox_bench --benchmark_filter='Policy|Pipeline|Baseline'
//       --benchmark_repetitions=10 --benchmark_report_aggregates_only=true
// and compare with BM_Baseline_FetchAdd from the same run (circuit_breaker_
// benchmark.cc), as docs/performance.md does. Every policy runs on
// SystemClock, as in production: the timeout's watchdog timer is real.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>

#include "alloc_counter.h"
#include "fusebox/bulkhead.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/pipeline.h"
#include "fusebox/rate_limiter.h"
#include "fusebox/retry.h"
#include "fusebox/timeout.h"

namespace fusebox {
namespace {

// Runs `op` once per iteration and reports allocs_per_call, the calling
// thread's allocations per iteration (counted after the loop: recording
// counters allocates).
template <typename Op>
void Measure(benchmark::State& state, Op op) {
  const std::uint64_t before = bench::Allocations();
  for (auto _ : state) {
    auto r = op();
    benchmark::DoNotOptimize(r);
  }
  const double n = static_cast<double>(bench::Allocations() - before);
  const auto iterations = std::max<benchmark::IterationCount>(state.iterations(), 1);
  state.counters["allocs_per_call"] = benchmark::Counter(n / static_cast<double>(iterations));
  state.SetItemsProcessed(state.iterations());
}

std::shared_ptr<CircuitBreaker> HealthyBreaker(const char* name) {
  std::shared_ptr<CircuitBreaker> cb =
      *CircuitBreaker::Create(name, {.sliding_window_size = 100, .minimum_number_of_calls = 100});
  for (int i = 0; i < 200; ++i) cb->TryAcquire()->Success(std::chrono::milliseconds(1));
  return cb;
}

// A limit no benchmark reaches (a permit per nanosecond), so that every call
// takes the admitting path.
std::shared_ptr<RateLimiter> OpenLimiter() {
  return *RateLimiter::Create(
      {.limit_for_period = 1000000000, .limit_refresh_period = std::chrono::seconds(1)});
}

// Every stage: RateLimit -> Bulkhead -> CircuitBreaker -> [Retry] -> Timeout.
Pipeline& SharedPipeline(bool with_retry) {
  static Pipeline* full = nullptr;
  static Pipeline* no_retry = nullptr;
  static const bool built = [] {
    auto build = [](bool retry, const char* name) {
      Pipeline::Builder b;
      b.WithRateLimiter(OpenLimiter())
          .WithBulkhead(*Bulkhead::Create({.max_concurrent_calls = 64}))
          .WithCircuitBreaker(HealthyBreaker(name))
          .WithTimeout(*Timeout::Create({.timeout_duration = std::chrono::seconds(1)}));
      if (retry) b.WithRetry(*Retry::Create({.max_attempts = 3}));
      return b.Build()->release();
    };
    full = build(true, "bench-pipeline-full");
    no_retry = build(false, "bench-pipeline-no-retry");
    return true;
  }();
  (void)built;
  return with_retry ? *full : *no_retry;
}

// The callable every benchmark below runs: an increment of a thread-local
// counter.
void BM_Policy_TrivialCallable(benchmark::State& state) {
  int x = 0;
  auto fn = [&x] { return ++x; };
  Measure(state, [&] { return Result<int>(fn()); });
}
BENCHMARK(BM_Policy_TrivialCallable);

// The bare breaker: CircuitBreaker::Call of the trivial callable.
void BM_Policy_BreakerCall(benchmark::State& state) {
  static const std::shared_ptr<CircuitBreaker> cb = HealthyBreaker("bench-bare-breaker");
  int x = 0;
  Measure(state, [&] { return cb->Call([&x] { return ++x; }); });
}
BENCHMARK(BM_Policy_BreakerCall)->Threads(1)->Threads(2)->UseRealTime();

void RunPipeline(benchmark::State& state, bool with_retry) {
  Pipeline& pipeline = SharedPipeline(with_retry);
  int x = 0;
  Measure(state, [&] { return pipeline.Execute([&x] { return ++x; }); });
}

// RateLimit -> Bulkhead -> CircuitBreaker -> Timeout -> call: the issue's
// "full pipeline (no retry, no wait)".
void BM_Pipeline_AllStagesNoRetry(benchmark::State& state) { RunPipeline(state, false); }
BENCHMARK(BM_Pipeline_AllStagesNoRetry)->Threads(1)->Threads(2)->UseRealTime();

// The same with a Retry stage whose first attempt succeeds.
void BM_Pipeline_AllStagesWithRetry(benchmark::State& state) { RunPipeline(state, true); }
BENCHMARK(BM_Pipeline_AllStagesWithRetry)->Threads(1)->Threads(2)->UseRealTime();

// RateLimiter::TryAcquire on an admitting limiter (one shared TAT word).
void BM_Policy_RateLimiterAcquire(benchmark::State& state) {
  static const std::shared_ptr<RateLimiter> limiter = OpenLimiter();
  Measure(state, [&] { return limiter->TryAcquire(); });
}
BENCHMARK(BM_Policy_RateLimiterAcquire)->Threads(1)->Threads(2)->UseRealTime();

// Bulkhead::TryAcquire plus the permit's release.
void BM_Policy_BulkheadAcquire(benchmark::State& state) {
  static Bulkhead* bulkhead = Bulkhead::Create({.max_concurrent_calls = 64})->release();
  Measure(state, [&] { return bulkhead->TryAcquire(); });
}
BENCHMARK(BM_Policy_BulkheadAcquire)->Threads(1)->Threads(2)->UseRealTime();

// Timeout::Execute of the trivial callable: slot claim, watchdog check, two
// coarse clock reads, slot release.
void BM_Policy_TimeoutExecute(benchmark::State& state) {
  static Timeout* timeout =
      Timeout::Create({.timeout_duration = std::chrono::seconds(1)})->release();
  int x = 0;
  Measure(state, [&] { return timeout->Execute([&x] { return ++x; }); });
}
BENCHMARK(BM_Policy_TimeoutExecute)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace
}  // namespace fusebox
