#!/usr/bin/env bash
# Registry lookup figures as docs/performance.md quotes them: runs the
# registry benchmarks of fusebox_bench (hits on a registry of 5,000 breakers:
# a hot 64 and all 5,000 in a scattered order, by string_view and by
# RegistryKey, on 1 and 2 threads) with the
# fetch_add and shared_ptr yardsticks in the same run, REPS repetitions in a
# random interleaving, and prints for each benchmark the median CPU time per
# lookup, its ratio to the same run's fetch_add, and for two threads the
# throughput against one thread.
#
#   bench/registry_figures.sh build/release/bench/fusebox_bench [REPS=9] [FILTER]
#
# Runs under `flock /tmp/fusebox-bench.lock` so that benchmarks of several
# checkouts on one machine do not overlap. Not part of `make test`.
set -euo pipefail

bench=${1:?usage: registry_figures.sh path/to/fusebox_bench [reps] [filter]}
reps=${2:-9}
filter=${3:-'BM_Registry_(Hot|Scattered|Baseline)'}
command -v python3 >/dev/null 2>&1 || {
  echo "registry_figures: python3 not found (make deps)" >&2
  exit 1
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

flock /tmp/fusebox-bench.lock "$bench" --benchmark_filter="$filter" \
  --benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.2 --benchmark_format=json >"$out"

python3 - "$out" <<'EOF'
import json, statistics, sys

with open(sys.argv[1]) as f:
    doc = json.load(f)
ctx = doc["context"]
print(f"cpu_model: {ctx.get('cpu_model', '?')}  cpus: {ctx.get('num_cpus')}  "
      f"load: {ctx.get('load_avg')}")
runs = {}
for b in doc["benchmarks"]:
    if b.get("run_type") != "iteration" or b.get("error_occurred"):
        continue
    runs.setdefault(b["run_name"], []).append(b)

def median(name, field):
    return statistics.median(r[field] for r in runs[name])

base = median("BM_Registry_Baseline_FetchAdd", "cpu_time")
print(f"{'benchmark':58} {'cpu ns':>8} {'x fetch_add':>11} {'2t/1t':>6} {'allocs':>6}")
for name in runs:
    cpu = median(name, "cpu_time")
    scale = ""
    if name.endswith("threads:2"):
        one = name[: -len("threads:2")] + "threads:1"
        if one in runs:
            scale = f"{median(name, 'items_per_second') / median(one, 'items_per_second'):.2f}"
    allocs = runs[name][0].get("allocs_per_call")
    allocs = "" if allocs is None else f"{allocs:.0f}"
    print(f"{name:58} {cpu:8.1f} {cpu / base:11.2f} {scale:>6} {allocs:>6}")
print(f"(medians of {len(runs['BM_Registry_Baseline_FetchAdd'])} repetitions; "
      f"2t/1t: items/s of two threads over one; CPU time is per thread)")
EOF
