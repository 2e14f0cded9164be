// bench/key_sets.h: what the keyed benchmarks share: the CPU model in the
// output's context, and which of kKeys keys a thread asks for (a hot 64, or
// all of them in a random order), a different set or order per thread.
#ifndef FUSEBOX_BENCH_KEY_SETS_H_
#define FUSEBOX_BENCH_KEY_SETS_H_

#include <benchmark/benchmark.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace fusebox::bench {

// Registered once per process, whichever benchmark files include this.
[[maybe_unused]] inline const bool kCpuModelInContext = [] {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const std::size_t colon = line.find(':');
      benchmark::AddCustomContext("cpu_model",
                                  colon == std::string::npos ? line : line.substr(colon + 2));
      return true;
    }
  }
  return false;
}();

// 64 keys spread over `keys`, a different 64 per thread.
inline std::vector<int> HotIds(int thread, int keys) {
  std::vector<int> ids;
  for (int i = 0; i < 64; ++i) ids.push_back((i * 13 + thread * 7) % keys);
  return ids;
}

// All `keys` in a random order, a different order per thread.
inline std::vector<int> ScatteredIds(int thread, int keys) {
  std::vector<int> ids(keys);
  for (int i = 0; i < keys; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), std::mt19937(1234 + thread));
  return ids;
}

}  // namespace fusebox::bench

#endif  // FUSEBOX_BENCH_KEY_SETS_H_
