#!/usr/bin/env bash
# A gateway against an upstream that rate-limits every account, asked for
# TOTAL distinct subjects (issue 13: memory stays bounded when no breaker can
# be evicted): every new account's quota circuit opens on its first 429, so
# nothing is evictable and the registry meets its ceiling (max_breakers_hard);
# later accounts share the overflow breaker. Prints, for each block of
# wrk run of SEGMENT, the gateway's requests/s, its RSS and its breaker
# count; both should stay flat once the ceiling is reached.
#
#   bench/many_subjects.sh path/to/fusebox [TOTAL=1000000] [SEGMENT=5s] [CONNECTIONS=64] [THREADS=2]
#
# Starts the fake upstream (fusebox fake-upstream) and one gateway (no Redis),
# runs wrk with a Lua script that numbers the accounts, and stops everything it
# started, by PID, on every exit path. Not part of `make test`: numbers depend
# on the machine (docs/performance.md).
set -euo pipefail

fusebox=${1:?usage: many_subjects.sh path/to/fusebox [total] [segment] [connections] [threads]}
total=${2:-1000000}
segment=${3:-5s}
connections=${4:-64}
threads=${5:-2}
command -v wrk >/dev/null 2>&1 || {
  echo "many_subjects: wrk not found: apt-get install wrk (make deps)" >&2
  exit 1
}

SCRIPT_NAME=many_subjects
# shellcheck source=apps/gateway/processes.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apps/gateway/processes.sh"

# Every account is rate-limited (Meta's code 4), for an hour.
cat >"$work/upstream.yaml" <<'EOF'
routes:
  - path: /v19.0/**
    responses:
      - status: 429
        headers: {Retry-After: 3600}
        body: {error: {message: "(#4) Application request limit reached", type: OAuthException, code: 4}}
EOF
"$fusebox" fake-upstream --threads 1 --script "$work/upstream.yaml" \
  >"$work/upstream.out" 2>"$work/upstream.err" &
pids+=($!)
upstream=$(listening "$work/upstream.out")

cat >"$work/gateway.yaml" <<EOF
listen: 127.0.0.1:0
instance: gw-subjects
io_threads: $threads
workers: 16
upstreams:
  - {name: graph, base_url: "http://$upstream/v19.0", pool_size: $connections}
routes:
  - {name: comments, method: GET, path: "/v1/{provider}/accounts/{account}/comments",
     upstream: graph, upstream_path: "/{account}/comments", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta}
EOF
"$fusebox" gateway --config "$work/gateway.yaml" >"$work/gateway.out" 2>"$work/gateway.err" &
gateway_pid=$!
pids+=("$gateway_pid")
gateway=$(listening "$work/gateway.out")

# Each request a new account: thread k of wrk asks OFFSET + k, + THREADS, ...
# (a segment's next OFFSET is past every account it may have asked).
cat >"$work/subjects.lua" <<'EOF'
local offset = tonumber(os.getenv("OFFSET"))
local step = tonumber(os.getenv("THREADS"))
local next_id = 0
function setup(thread)
  thread:set("id", next_id)
  next_id = next_id + 1
end
function init(args)
  n = 0
end
function request()
  local account = 1000000000 + offset + id + n * step
  n = n + 1
  return wrk.format("GET", "/v1/instagram/accounts/" .. account .. "/comments")
end
EOF

rss_mib() { awk '/^VmRSS:/ { printf "%.1f", $2 / 1024 }' "/proc/$gateway_pid/status"; }
breakers() {
  curl -s "http://$gateway/metrics" |
    awk '/^resilience4j_circuitbreaker_registry_size/ { print $2; exit }'
}

echo "fusebox gateway, $total distinct subjects against a rate-limiting upstream"
echo "  wrk -t$threads -c$connections, segments of $segment; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%10s %12s %10s %10s %10s\n" "subjects" "requests/s" "rss MiB" "breakers" "2xx"
offset=0
while [ "$offset" -lt "$total" ]; do
  out=$(OFFSET=$offset THREADS=$threads \
    wrk -t"$threads" -c"$connections" -d"$segment" -s "$work/subjects.lua" "http://$gateway/")
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  done_n=$(awk '/requests in/ {print $1}' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  # Past every account asked: those answered, and at most one more in
  # flight per connection.
  offset=$((offset + done_n + connections))
  printf "%10d %12s %10s %10s %10s\n" "$offset" "$rps" "$(rss_mib)" "$(breakers)" \
    "$((done_n - ${non2xx:-0}))"
done
echo "  load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
