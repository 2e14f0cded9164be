#include "alloc_counter.h"

#include <cstdlib>
#include <new>

namespace {
// Per thread, so that a benchmark counts only what its own loop allocates,
// not what the harness's other threads do meanwhile.
thread_local std::uint64_t t_allocations = 0;
}  // namespace

namespace fusebox::bench {
std::uint64_t Allocations() { return t_allocations; }
}  // namespace fusebox::bench

// Replacing the global allocation functions is the standard way to observe
// every allocation; the benchmarks only read the counter.
void* operator new(std::size_t n) {
  ++t_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
