// Counts heap allocations made by the benchmark process, so that benchmarks can
// report allocations per call next to time per call.
#ifndef FUSEBOX_BENCH_ALLOC_COUNTER_H_
#define FUSEBOX_BENCH_ALLOC_COUNTER_H_

#include <atomic>
#include <cstdint>

namespace fusebox::bench {

// Allocations so far, by any thread.
std::uint64_t Allocations();

}  // namespace fusebox::bench

#endif  // FUSEBOX_BENCH_ALLOC_COUNTER_H_
