// Counts heap allocations made by the benchmark process, so that benchmarks can
// report allocations per call next to time per call.
#ifndef FUSEBOX_BENCH_ALLOC_COUNTER_H_
#define FUSEBOX_BENCH_ALLOC_COUNTER_H_

#include <cstdint>

namespace fusebox::bench {

// Allocations made so far by the calling thread.
std::uint64_t Allocations();

}  // namespace fusebox::bench

#endif  // FUSEBOX_BENCH_ALLOC_COUNTER_H_
