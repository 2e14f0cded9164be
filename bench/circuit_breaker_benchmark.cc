// Breaker admission benchmarks. Run with `make bench`, or
//   ./build/release/bench/fusebox_bench --benchmark_repetitions=10
//       --benchmark_report_aggregates_only=true
// and compare each figure with BM_Baseline_FetchAdd from the same run: the
// machine is noisy, ratios travel better than nanoseconds. Multi-threaded
// benchmarks use real time, so items_per_second is the throughput of all
// threads together (2 threads on one breaker vs 1 thread is the scaling
// figure docs/performance.md reports).
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>

#include "alloc_counter.h"
#include "fusebox/circuit_breaker.h"
#include "fusebox/clock.h"

namespace fusebox {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// Reports the heap allocations per iteration made by the calling thread's loop.
// Call Stop() right after the loop: recording counters allocates.
class AllocScope {
 public:
  explicit AllocScope(benchmark::State& state) : state_(state), start_(bench::Allocations()) {}
  void Stop() {
    const double n = static_cast<double>(bench::Allocations() - start_);
    state_.counters["allocs_per_call"] =
        benchmark::Counter(n / static_cast<double>(state_.iterations() ? state_.iterations() : 1));
  }

 private:
  benchmark::State& state_;
  std::uint64_t start_;
};

CircuitBreaker& Shared(SlidingWindowType type) {
  static CircuitBreaker* count_based = [] {
    return CircuitBreaker::Create("bench-count",
                                  {.sliding_window_type = SlidingWindowType::kCountBased,
                                   .sliding_window_size = 100,
                                   .minimum_number_of_calls = 100})
        ->release();
  }();
  static CircuitBreaker* time_based = [] {
    return CircuitBreaker::Create("bench-time",
                                  {.sliding_window_type = SlidingWindowType::kTimeBased,
                                   .sliding_window_size = 10,
                                   .minimum_number_of_calls = 100})
        ->release();
  }();
  return type == SlidingWindowType::kCountBased ? *count_based : *time_based;
}

// The yardstick: one uncontended atomic increment.
void BM_Baseline_FetchAdd(benchmark::State& state) {
  static std::atomic<std::uint64_t> counter{0};
  for (auto _ : state) {
    counter.fetch_add(1, std::memory_order_relaxed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_FetchAdd);

// TryAcquire + Success in CLOSED on a window full of successes (the healthy
// steady state).
void ClosedSuccess(benchmark::State& state, SlidingWindowType type) {
  CircuitBreaker& cb = Shared(type);
  // Fill the window (first 100 calls of the first run take the locked path).
  for (int i = 0; i < 200; ++i) cb.TryAcquire()->Success(milliseconds(1));
  AllocScope allocs(state);
  for (auto _ : state) {
    Result<Permit> permit = cb.TryAcquire();
    permit->Success(milliseconds(1));
  }
  allocs.Stop();
  state.SetItemsProcessed(state.iterations());
}
void BM_Closed_AcquireSuccess_CountBased100(benchmark::State& state) {
  ClosedSuccess(state, SlidingWindowType::kCountBased);
}
void BM_Closed_AcquireSuccess_TimeBased10s(benchmark::State& state) {
  ClosedSuccess(state, SlidingWindowType::kTimeBased);
}
BENCHMARK(BM_Closed_AcquireSuccess_CountBased100)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Closed_AcquireSuccess_TimeBased10s)->Threads(1)->Threads(2)->UseRealTime();

// 10 % failures: the window always holds failures, so every failure takes the
// locked path (kLinearizable; successes are only counted, in the thread's own
// slot).
// Thresholds high enough never to trip.
void TenPercentFailures(benchmark::State& state, CircuitBreaker& cb) {
  std::uint32_t n = static_cast<std::uint32_t>(state.thread_index());
  for (int i = 0; i < 20; ++i) cb.TryAcquire()->Success(milliseconds(1));  // Warm-up.
  AllocScope allocs(state);
  for (auto _ : state) {
    Result<Permit> permit = cb.TryAcquire();
    if (++n % 10 == 0) {
      permit->Failure(milliseconds(1));
    } else {
      permit->Success(milliseconds(1));
    }
  }
  allocs.Stop();
  state.SetItemsProcessed(state.iterations());
}
void BM_Closed_TenPercentFailures_CountBased100(benchmark::State& state) {
  static CircuitBreaker* cb =
      CircuitBreaker::Create("bench-failing", {.failure_rate_threshold = 100,
                                               .sliding_window_size = 100,
                                               .minimum_number_of_calls = 100})
          ->release();
  TenPercentFailures(state, *cb);
}
BENCHMARK(BM_Closed_TenPercentFailures_CountBased100)->Threads(1)->Threads(2)->UseRealTime();

// The same with OutcomeOrder::kRelaxed: a failure that cannot trip the window
// is counted in the thread's own slot, within the allowance it was granted,
// and only every kEntries-th failure of a thread takes the lock.
void BM_Closed_TenPercentFailures_CountBased100_Relaxed(benchmark::State& state) {
  static CircuitBreaker* cb =
      CircuitBreaker::Create("bench-failing-relaxed", {.failure_rate_threshold = 100,
                                                       .sliding_window_size = 100,
                                                       .minimum_number_of_calls = 100,
                                                       .outcome_order = OutcomeOrder::kRelaxed})
          ->release();
  TenPercentFailures(state, *cb);
}
BENCHMARK(BM_Closed_TenPercentFailures_CountBased100_Relaxed)
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();

// The same two at the default settings (failure_rate_threshold = 50, window
// 100, minimum_number_of_calls 100): the 10 % in the window leave room for
// about 39 more failures before the threshold, against about 89 at 100, so
// kRelaxed's allowances are smaller and its threads take the lock more often.
void BM_Closed_TenPercentFailures_Default(benchmark::State& state) {
  static CircuitBreaker* cb = CircuitBreaker::Create("bench-failing-default", {})->release();
  TenPercentFailures(state, *cb);
}
BENCHMARK(BM_Closed_TenPercentFailures_Default)->Threads(1)->Threads(2)->UseRealTime();

void BM_Closed_TenPercentFailures_Default_Relaxed(benchmark::State& state) {
  static CircuitBreaker* cb = CircuitBreaker::Create("bench-failing-default-relaxed",
                                                     {.outcome_order = OutcomeOrder::kRelaxed})
                                  ->release();
  TenPercentFailures(state, *cb);
}
BENCHMARK(BM_Closed_TenPercentFailures_Default_Relaxed)->Threads(1)->Threads(2)->UseRealTime();

// Yardsticks for two threads, in the same run as the breaker's figures.
//
// Each thread incrementing an atomic on a line of its own: nothing shared,
// so /threads:2 over /threads:1 is the scaling the machine gives two threads
// at that moment (2.0 on two idle cores, less while other work runs). The
// two-thread ratios below are read against it.
void BM_Baseline_PrivateFetchAdd(benchmark::State& state) {
  struct alignas(64) Line {
    std::atomic<std::uint64_t> n{0};
  };
  static Line lines[2];
  std::atomic<std::uint64_t>& mine = lines[state.thread_index() % 2].n;
  for (auto _ : state) {
    mine.fetch_add(1, std::memory_order_relaxed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_PrivateFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

// Two threads incrementing one shared atomic: every increment needs the line
// in the writing core's cache, so while both threads run at once the line
// keeps moving between the cores and two threads get no more than one. Its
// /threads:2 over /threads:1 is the most that work writing one shared line on
// every call can scale; read it against BM_Baseline_PrivateFetchAdd of the
// same run, which shows how much of two cores the two threads had. (A strict
// ping-pong would give the transfer's latency, but on a loaded machine it
// measures the scheduler: a waiting thread spins while the other is
// descheduled.)
void BM_Baseline_SharedFetchAdd(benchmark::State& state) {
  static std::atomic<std::uint64_t> shared{0};
  for (auto _ : state) {
    shared.fetch_add(1, std::memory_order_relaxed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_SharedFetchAdd)->Threads(1)->Threads(2)->UseRealTime();

// The least the default order needs for 10 % failures: nine calls in ten write
// only the thread's own line (a success counted in its own slot), the tenth
// writes one line the other thread also writes (a failure must see every
// success counted before it, and the lock and the window are shared). The
// breaker's failure moves at least three such lines (the lock, the window,
// the other thread's counter), so its two-thread ratio stays under this one's.
void BM_Baseline_SharedLineEveryTenth(benchmark::State& state) {
  struct alignas(64) Own {
    std::atomic<std::uint64_t> n{0};
  };
  static Own own[2];
  alignas(64) static std::atomic<std::uint64_t> shared{0};
  std::atomic<std::uint64_t>& mine = own[state.thread_index() % 2].n;
  std::uint32_t i = static_cast<std::uint32_t>(state.thread_index());
  for (auto _ : state) {
    if (++i % 10 == 0) {
      shared.fetch_add(1, std::memory_order_relaxed);
    } else {
      mine.store(mine.load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Baseline_SharedLineEveryTenth)->Threads(1)->Threads(2)->UseRealTime();

// A rejected TryAcquire in OPEN.
void BM_Open_Reject(benchmark::State& state) {
  static CircuitBreaker* cb = [] {
    CircuitBreaker* b = CircuitBreaker::Create(
                            "bench-open", {.wait_duration_in_open_state = std::chrono::hours(24)})
                            ->release();
    (void)b->TransitionToOpen();  // Always OK in the default mode.
    return b;
  }();
  (void)cb->TryAcquire();  // Warm-up: the thread's first rejection claims its counter slot.
  AllocScope allocs(state);
  for (auto _ : state) {
    Result<Permit> permit = cb->TryAcquire();
    benchmark::DoNotOptimize(permit);
  }
  allocs.Stop();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Open_Reject)->Threads(1)->Threads(2)->UseRealTime();

// The clock sources Call() and the breaker's paths read, each once per
// iteration, against BM_Baseline_FetchAdd from the same run. SystemClock() is
// defined in another translation unit, so these are the virtual calls the
// breaker makes through its Clock&.
void BM_Clock_SystemNow(benchmark::State& state) {
  const Clock& clock = SystemClock();
  for (auto _ : state) {
    TimePoint t = clock.Now();  // steady_clock::now(): CLOCK_MONOTONIC.
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Clock_SystemNow);

void BM_Clock_SystemCoarseNow(benchmark::State& state) {
  const Clock& clock = SystemClock();
  for (auto _ : state) {
    TimePoint t = clock.CoarseNow();  // CLOCK_MONOTONIC_COARSE.
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Clock_SystemCoarseNow);

// steady_clock::now() called directly (bench/ only: the library reads time
// through a Clock): what the virtual call above adds.
void BM_Clock_SteadyClockDirect(benchmark::State& state) {
  for (auto _ : state) {
    auto t = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(t);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Clock_SteadyClockDirect);

// Call() of a trivial lambda, including its two clock reads (coarse: the
// default slow-call threshold is 60 s).
void BM_Call_TrivialLambda(benchmark::State& state) {
  CircuitBreaker& cb = Shared(SlidingWindowType::kCountBased);
  int x = 0;
  AllocScope allocs(state);
  for (auto _ : state) {
    Result<int> r = cb.Call([&x] { return ++x; });
    benchmark::DoNotOptimize(r);
  }
  allocs.Stop();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Call_TrivialLambda);

// The same with precise timing (steady_clock twice).
void BM_Call_TrivialLambda_PreciseTiming(benchmark::State& state) {
  static CircuitBreaker* cb =
      CircuitBreaker::Create("bench-precise", {.sliding_window_size = 100,
                                               .minimum_number_of_calls = 100,
                                               .call_timing = CallTiming::kPrecise})
          ->release();
  for (int i = 0; i < 200; ++i) cb->TryAcquire()->Success(milliseconds(1));
  int x = 0;
  for (auto _ : state) {
    Result<int> r = cb->Call([&x] { return ++x; });
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Call_TrivialLambda_PreciseTiming);

}  // namespace
}  // namespace fusebox
