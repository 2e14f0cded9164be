// Registry benchmarks: hits on a registry holding 5,000 breakers (a hot 64
// and all 5,000 in a scattered order, by string_view and by RegistryKey,
// through Get() (a shared_ptr), Borrow() (a lent breaker) and BorrowPair()
// (two kept keys lent at once)),
// with the yardsticks measured in the same run (an uncontended fetch_add and
// a shared_ptr copy, the least a hit that returns a shared_ptr costs), and
// insertions of 1,000,000 distinct keys whose breakers all trip OPEN (nothing
// evictable), reporting insertions/s and RSS per 100,000 keys.
//
//   fusebox_bench --benchmark_filter=Registry --benchmark_repetitions=5
//                 --benchmark_report_aggregates_only=true
//
// The CPU model is in the output's context ("cpu_model").
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "fusebox/registry.h"
#include "key_sets.h"
#include "src/registry_hash.h"

namespace fusebox {
namespace {

constexpr int kKeys = 5000;

std::string Key(long long i) {
  return "meta:read:" + std::to_string(17841400000000000LL + i) + ":quota";
}

Registry& SharedRegistry() {
  static Registry* registry = [] {
    Registry* r = Registry::Create({})->release();
    for (int i = 0; i < kKeys; ++i) (void)r->Get(Key(i));
    return r;
  }();
  return *registry;
}

std::vector<int> Hot(int thread) { return bench::HotIds(thread, kKeys); }
std::vector<int> Scattered(int thread) { return bench::ScatteredIds(thread, kKeys); }

// kBorrowAt: Borrow(key, config, coarse_now) with one clock read for every
// two lookups, as seed 000's call reads it once for its two circuits.
// kBorrowPair: the same two lookups as one BorrowPair() (an iteration is a
// pair: two lookups, counted as two items).
enum class Hit { kGet, kBorrow, kBorrowAt, kBorrowPair };

template <typename K, Hit kHit = Hit::kGet>
void Lookups(benchmark::State& state, const std::vector<int>& ids) {
  Registry& registry = SharedRegistry();
  std::vector<K> keys;
  keys.reserve(ids.size());
  for (int id : ids) keys.emplace_back(Key(id));
  const std::size_t n = keys.size();
  std::size_t i = 0;
  TimePoint now{};
  const std::uint64_t allocs_before = bench::Allocations();
  for (auto _ : state) {
    if constexpr (kHit == Hit::kGet) {
      Result<std::shared_ptr<CircuitBreaker>> b = registry.Get(keys[i]);
      benchmark::DoNotOptimize(b);
    } else if constexpr (kHit == Hit::kBorrow) {
      Result<BorrowedBreaker> b = registry.Borrow(keys[i]);
      benchmark::DoNotOptimize(b);
    } else if constexpr (kHit == Hit::kBorrowAt) {
      if ((i & 1) == 0) now = registry.CoarseNow();
      Result<BorrowedBreaker> b = registry.Borrow(keys[i], "default", now);
      benchmark::DoNotOptimize(b);
    } else {
      Registry::BorrowedPair b =
          registry.BorrowPair(keys[i], "default", keys[i + 1], "default", registry.CoarseNow());
      benchmark::DoNotOptimize(b);
      ++i;  // n is even
    }
    if (++i == n) i = 0;
  }
  const std::int64_t lookups = kHit == Hit::kBorrowPair ? 2 : 1;
  state.counters["allocs_per_call"] =
      benchmark::Counter(static_cast<double>(bench::Allocations() - allocs_before) /
                         static_cast<double>(state.iterations() * lookups));
  state.SetItemsProcessed(state.iterations() * lookups);
}

void BM_Registry_Hot64(benchmark::State& state) {
  Lookups<std::string>(state, Hot(state.thread_index()));
}
void BM_Registry_Scattered5000(benchmark::State& state) {
  Lookups<std::string>(state, Scattered(state.thread_index()));
}
void BM_Registry_Hot64_RegistryKey(benchmark::State& state) {
  Lookups<RegistryKey>(state, Hot(state.thread_index()));
}
void BM_Registry_Scattered5000_RegistryKey(benchmark::State& state) {
  Lookups<RegistryKey>(state, Scattered(state.thread_index()));
}
void BM_Registry_Hot64_Borrow(benchmark::State& state) {
  Lookups<std::string, Hit::kBorrow>(state, Hot(state.thread_index()));
}
void BM_Registry_Scattered5000_Borrow(benchmark::State& state) {
  Lookups<std::string, Hit::kBorrow>(state, Scattered(state.thread_index()));
}
void BM_Registry_Hot64_RegistryKey_Borrow(benchmark::State& state) {
  Lookups<RegistryKey, Hit::kBorrow>(state, Hot(state.thread_index()));
}
void BM_Registry_Scattered5000_RegistryKey_Borrow(benchmark::State& state) {
  Lookups<RegistryKey, Hit::kBorrow>(state, Scattered(state.thread_index()));
}
void BM_Registry_Hot64_RegistryKey_BorrowAt(benchmark::State& state) {
  Lookups<RegistryKey, Hit::kBorrowAt>(state, Hot(state.thread_index()));
}
void BM_Registry_Scattered5000_RegistryKey_BorrowAt(benchmark::State& state) {
  Lookups<RegistryKey, Hit::kBorrowAt>(state, Scattered(state.thread_index()));
}
void BM_Registry_Hot64_RegistryKey_BorrowPair(benchmark::State& state) {
  Lookups<RegistryKey, Hit::kBorrowPair>(state, Hot(state.thread_index()));
}
void BM_Registry_Scattered5000_RegistryKey_BorrowPair(benchmark::State& state) {
  Lookups<RegistryKey, Hit::kBorrowPair>(state, Scattered(state.thread_index()));
}
BENCHMARK(BM_Registry_Hot64)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Scattered5000)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Hot64_RegistryKey)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Scattered5000_RegistryKey)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Hot64_Borrow)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Scattered5000_Borrow)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Hot64_RegistryKey_Borrow)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Scattered5000_RegistryKey_Borrow)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Hot64_RegistryKey_BorrowAt)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Scattered5000_RegistryKey_BorrowAt)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Hot64_RegistryKey_BorrowPair)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_Registry_Scattered5000_RegistryKey_BorrowPair)->Threads(1)->Threads(2)->UseRealTime();

// 1,000 keys a client chose so that their hashes share the low 12 bits, on a
// registry of 1,000 (a table of 2,048 slots: were their hashes those, all
// would sit in one probe run), hit by string in turn, one thread:
// - kPublic: chosen under a hash anyone can compute (the registry's hash
//   with its lanes' constants bare: the hash before it took a secret);
// - kKnown: chosen under this process's secret, what a client that learned
//   it could do (and what any client could before);
// - kPlain: 1,000 keys of the same shape, not chosen.
enum class Chosen { kPlain, kPublic, kKnown };

template <Chosen kChosen>
void BM_Registry_ChosenKeys(benchmark::State& state) {
  constexpr int kCount = 1000;
  const internal::HashSecret secret = kChosen == Chosen::kKnown
                                          ? internal::ProcessHashSecret()
                                          : internal::HashSecret{0, internal::kK0};
  std::vector<std::string> keys;
  for (long long i = 0; static_cast<int>(keys.size()) < kCount; ++i) {
    std::string key = Key(5000000000LL + i);
    if (kChosen == Chosen::kPlain || (internal::HashKey(key, secret) & 0xFFF) == 0) {
      keys.push_back(std::move(key));
    }
  }
  std::unique_ptr<Registry> registry = *Registry::Create({.max_breakers = kCount});
  for (const std::string& key : keys) (void)registry->Get(key);
  std::size_t i = 0;
  for (auto _ : state) {
    Result<BorrowedBreaker> b = registry->Borrow(keys[i]);
    benchmark::DoNotOptimize(b);
    if (++i == keys.size()) i = 0;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Registry_ChosenKeys<Chosen::kPlain>)->Name("BM_Registry_ChosenKeys_Plain");
BENCHMARK(BM_Registry_ChosenKeys<Chosen::kPublic>)->Name("BM_Registry_ChosenKeys_UnderAPublicHash");
BENCHMARK(BM_Registry_ChosenKeys<Chosen::kKnown>)->Name("BM_Registry_ChosenKeys_UnderTheSecret");

// Yardsticks, in the same run. An uncontended atomic increment:
void BM_Registry_Baseline_FetchAdd(benchmark::State& state) {
  static std::atomic<std::uint64_t> counter{0};
  for (auto _ : state) counter.fetch_add(1, std::memory_order_relaxed);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Registry_Baseline_FetchAdd);

// Copying a shared_ptr out of a table and dropping it (two atomic
// read-modify-writes on its count): the floor of any hit returning one.
void BM_Registry_Baseline_SharedPtrCopy(benchmark::State& state) {
  std::vector<std::shared_ptr<int>> ptrs;
  for (int i = 0; i < 64; ++i) ptrs.push_back(std::make_shared<int>(i));
  std::size_t i = 0;
  for (auto _ : state) {
    std::shared_ptr<int> p = ptrs[i++ & 63];
    benchmark::DoNotOptimize(p);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Registry_Baseline_SharedPtrCopy);

// Distinct keys on a full registry whose breakers are all evictable: every
// insertion drops the least recently used, so it pays the writer's side of
// the lock-free lookup (one membarrier, a look at every thread's slots).
void BM_Registry_Churn_EvictEveryInsert(benchmark::State& state) {
  std::unique_ptr<Registry> registry = *Registry::Create({.max_breakers = 1000});
  long long i = 0;
  for (; i < 1000; ++i) (void)registry->Get(Key(2000000000LL + i));
  std::vector<std::string> keys;
  for (int k = 0; k < 4096; ++k) keys.push_back(Key(3000000000LL + k));
  std::size_t next = 0;
  for (auto _ : state) {
    Result<std::shared_ptr<CircuitBreaker>> b = registry->Get(keys[next]);
    benchmark::DoNotOptimize(b);
    next = (next + 1) & 4095;  // 4,096 keys through 1,000 places: always a miss
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Registry_Churn_EvictEveryInsert);

double RssMiB() {
  long pages = 0;
  long resident = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / 1048576.0;
}

// Distinct keys whose breakers trip OPEN at once (a rate-limiting upstream:
// nothing is evictable for wait + idle_timeout). Default max_breakers 5,000
// and max_breakers_hard. Reports insertions/s and RSS of each 100,000 keys;
// flat when eviction is O(1) and memory is bounded.
void BM_Registry_AllOpen_DistinctKeys(benchmark::State& state) {
  const long long total = state.range(0);
  constexpr long long kBlock = 100000;
  for (auto _ : state) {
    CircuitBreakerConfig config;
    config.sliding_window_size = 1;
    config.minimum_number_of_calls = 1;
    config.wait_duration_in_open_state = std::chrono::seconds(30);
    std::unique_ptr<Registry> registry = *Registry::Create({.default_config = config});
    auto block_start = std::chrono::steady_clock::now();
    double first_rate = 0;
    double last_rate = 0;
    for (long long i = 0; i < total; ++i) {
      std::shared_ptr<CircuitBreaker> b = *registry->Get(Key(1000000000LL + i));
      if (Result<Permit> p = b->TryAcquire()) p->Failure(Duration::zero());
      if ((i + 1) % kBlock == 0) {
        const auto end = std::chrono::steady_clock::now();
        const double rate =
            static_cast<double>(kBlock) / std::chrono::duration<double>(end - block_start).count();
        if (i + 1 == kBlock) first_rate = rate;
        last_rate = rate;
        std::printf("all-open keys %7lld: %9.0f inserts/s  rss %7.1f MiB  breakers %zu\n", i + 1,
                    rate, RssMiB(), registry->size());
        std::fflush(stdout);
        block_start = std::chrono::steady_clock::now();
      }
    }
    state.counters["first_100k_per_s"] = first_rate;
    state.counters["last_100k_per_s"] = last_rate;
    state.counters["rss_mib"] = RssMiB();
    state.counters["breakers"] = static_cast<double>(registry->size());
  }
}
BENCHMARK(BM_Registry_AllOpen_DistinctKeys)
    ->Arg(1000000)
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace fusebox
