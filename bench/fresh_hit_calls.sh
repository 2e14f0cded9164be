#!/usr/bin/env bash
# Upstream calls for a fresh key under sustained load (issue 13 point 2): the
# answer must be 0 after the first fill, with Redis, without Redis, and while
# Redis is paused (SIGSTOP: connections stay up, nothing answers).
#
#   flock /tmp/fusebox-bench.lock bench/fresh_hit_calls.sh path/to/fusebox \
#     [DURATION=10s] [CONNECTIONS=64] [THREADS=2]
#
# Starts a redis-server (loopback, no persistence), the fake upstream
# (fusebox fake-upstream) and two gateways on it (one with Redis, one
# without), primes one key fresh for an hour on each, runs wrk on that key
# and reads the fake's call counter before and after. Stops everything it
# started, by PID, on every exit path, and never leaves Redis stopped. Not
# part of `make test`: figures in docs/performance.md.
set -euo pipefail

fusebox=${1:?usage: fresh_hit_calls.sh path/to/fusebox [duration] [connections] [threads]}
duration=${2:-10s}
connections=${3:-64}
threads=${4:-2}
for tool in wrk redis-server curl; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "fresh_hit_calls: $tool not found (make deps)" >&2
    exit 1
  }
done

SCRIPT_NAME=fresh_hit_calls
# shellcheck source=apps/gateway/processes.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apps/gateway/processes.sh"
redis_pid=""
# Never leave Redis stopped: resume it before it is told to stop.
before_cleanup() { [ -z "$redis_pid" ] || kill -CONT "$redis_pid" 2>/dev/null || true; }

redis_port=$((20000 + RANDOM % 40000))
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no \
  --dir "$work" >"$work/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 100); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.05
done

cat >"$work/upstream.yaml" <<'EOF'
routes:
  - path: /v19.0/*/insights
    responses:
      - body: {data: [{name: impressions, period: day, values: [{value: 1200}]}]}
EOF
"$fusebox" fake-upstream --threads "$threads" --script "$work/upstream.yaml" \
  >"$work/upstream.out" 2>"$work/upstream.err" &
pids+=($!)
upstream=$(listening "$work/upstream.out")

start_gateway() {  # name, redis line
  cat >"$work/$1.yaml" <<EOF
listen: 127.0.0.1:0
instance: $1
io_threads: $threads
workers: 16
$2
upstreams:
  - {name: graph, base_url: "http://$upstream/v19.0", pool_size: $connections}
routes:
  - {name: insights, method: GET, path: "/v1/{provider}/accounts/{account}/insights",
     upstream: graph, upstream_path: "/{account}/insights", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta, timeout: 1s,
     cache: {fresh_for: 1h, max_stale: 24h}}
EOF
  "$fusebox" gateway --config "$work/$1.yaml" >"$work/$1.out" 2>"$work/$1.err" &
  pids+=($!)
}
# Started here, not in $(...): a PID recorded in a subshell is lost, and the
# gateway would outlive the script.
start_gateway gw-redis "redis: redis://127.0.0.1:$redis_port/0"
start_gateway gw-alone ""
with_redis=$(listening "$work/gw-redis.out")
alone=$(listening "$work/gw-alone.out")

calls() { curl -sf "http://$upstream/_fake/calls" | sed -n 's/.*"total":\([0-9]*\).*/\1/p'; }

# requests/s, p99 and non-2xx of wrk on $1, and the upstream calls it caused.
measure() {
  local before out after
  before=$(calls)
  out=$(wrk -t"$threads" -c"$connections" -d"$duration" --latency "$1")
  after=$(calls)
  local rps p99 non2xx
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  echo "$rps $p99 ${non2xx:-0} $((after - before))"
}

key=/v1/instagram/accounts/178/insights
curl -sf "http://$with_redis$key" >/dev/null
curl -sf "http://$alone$key" >/dev/null
echo "fresh key under load: wrk -t$threads -c$connections -d$duration, $(nproc) cores"
echo "  fake upstream http://$upstream ($(calls) calls after priming), redis 127.0.0.1:$redis_port"
echo
printf "%-36s %12s %10s %10s %16s\n" "case" "requests/s" "p99" "non-2xx" "upstream calls"
read -r rps p99 bad n < <(measure "http://$alone$key")
printf "%-36s %12s %10s %10s %16s\n" "without Redis" "$rps" "$p99" "$bad" "$n"
read -r rps p99 bad n < <(measure "http://$with_redis$key")
printf "%-36s %12s %10s %10s %16s\n" "with Redis" "$rps" "$p99" "$bad" "$n"
kill -STOP "$redis_pid"
read -r rps p99 bad n < <(measure "http://$with_redis$key")
kill -CONT "$redis_pid"
printf "%-36s %12s %10s %10s %16s\n" "with Redis, Redis SIGSTOPped" "$rps" "$p99" "$bad" "$n"
echo
echo "gw-redis snapshot metrics:"
curl -sf "http://$with_redis/metrics" | grep -E '^fusebox_gateway_snapshot' || true
