#!/usr/bin/env bash
# Load test of `fusebox gateway` with wrk, against nginx as a plain reverse
# proxy to the same fake upstream, in the same run (issue 8's targets: fresh
# hits and OPEN fail-fast >= nginx's pass-through throughput; pass-through
# >= 70 % of nginx's), and pass-through to the same fake upstream over HTTPS
# (issue 16: pooled TLS connections, measured against plain HTTP in the same
# rounds; the handshakes the gateway made are printed, to show that pooling
# holds under load).
#
#   bench/gateway_load.sh path/to/fusebox [DURATION=10s] [CONNECTIONS=64] [THREADS=2] [ROUNDS=3]
#
# Starts the fake upstream (fusebox fake-upstream), one gateway (in-process
# state, no Redis: what is measured is the request path) and nginx (nginx-light,
# a foreground process with its config in a temp dir, loopback only, workers
# as `nobody` when run as root), runs wrk for each case, prints a table and
# stops everything it started, by PID, on every exit path. Not part of
# `make test`: numbers depend on the machine (docs/performance.md).
set -euo pipefail

fusebox=${1:?usage: gateway_load.sh path/to/fusebox [duration] [connections] [threads]}
duration=${2:-10s}
connections=${3:-64}
threads=${4:-2}
rounds=${5:-3}
for tool in wrk nginx; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "gateway_load: $tool not found: apt-get install wrk nginx-light (make deps)" >&2
    exit 1
  }
done

SCRIPT_NAME=gateway_load
# shellcheck source=apps/gateway/processes.sh
source "$(dirname "${BASH_SOURCE[0]}")/../apps/gateway/processes.sh"
chmod 755 "$work"  # nginx's workers run as nobody

# The upstream: a small Graph-like body for every read; account "limited"
# answers Meta's code-4 rate limit with a long Retry-After (trips the circuit).
cat >"$work/upstream.yaml" <<'EOF'
routes:
  - path: /v19.0/limited/**
    responses:
      - status: 429
        headers: {Retry-After: 3600}
        body: {error: {message: "(#4) Application request limit reached", type: OAuthException, code: 4}}
  - path: /v19.0/*/insights
    responses:
      - body: {data: [{name: impressions, period: day, values: [{value: 1200, end_time: "2026-07-16T07:00:00+0000"}]}]}
  - path: /v19.0/*/comments
    responses:
      - body: {data: [{id: "17900000000000001", text: "nice!", timestamp: "2026-07-17T09:00:00+0000"}]}
EOF
"$fusebox" fake-upstream --threads "$threads" --script "$work/upstream.yaml" \
  >"$work/upstream.out" 2>"$work/upstream.err" &
pids+=($!)
upstream=$(listening "$work/upstream.out")

# The same upstream over HTTPS, its certificate from a throwaway CA.
"$(dirname "${BASH_SOURCE[0]}")/../apps/gateway/make_test_certs.sh" "$work/certs" >/dev/null
"$fusebox" fake-upstream --threads "$threads" --script "$work/upstream.yaml" \
  --tls-cert "$work/certs/server.pem" --tls-key "$work/certs/server.key" \
  >"$work/upstream_tls.out" 2>"$work/upstream_tls.err" &
pids+=($!)
upstream_tls=$(listening "$work/upstream_tls.out")

cat >"$work/gateway.yaml" <<EOF
listen: 127.0.0.1:0
instance: gw-load
io_threads: $threads
workers: 16
upstreams:
  - {name: graph, base_url: "http://$upstream/v19.0", pool_size: $connections}
  - {name: graph_tls, base_url: "https://$upstream_tls/v19.0", pool_size: $connections,
     tls: {ca_file: "$work/certs/ca.pem"}}
routes:
  - {name: insights, method: GET, path: "/v1/{provider}/accounts/{account}/insights",
     upstream: graph, upstream_path: "/{account}/insights", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta,
     cache: {fresh_for: 1h, max_stale: 24h}}
  - {name: comments, method: GET, path: "/v1/{provider}/accounts/{account}/comments",
     upstream: graph, upstream_path: "/{account}/comments", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta}
  - {name: comments_tls, method: GET, path: "/v1/{provider}/accounts/{account}/comments-tls",
     upstream: graph_tls, upstream_path: "/{account}/comments", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta}
EOF
"$fusebox" gateway --config "$work/gateway.yaml" >"$work/gateway.out" 2>"$work/gateway.err" &
pids+=($!)
gateway=$(listening "$work/gateway.out")

# nginx: loopback only, foreground, everything under $work. It cannot pick its
# own port: try a few random ones.
mkdir -p "$work/nginx"
run_nginx=(nginx)
user_line=""
if [ "$(id -u)" = 0 ]; then
  user_line="user nobody nogroup;"
  chown -R nobody:nogroup "$work/nginx"
fi
nginx_addr=""
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 40000))
  cat >"$work/nginx/nginx.conf" <<EOF
$user_line
daemon off;
master_process on;
worker_processes $threads;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  fastcgi_temp_path $work/nginx/fastcgi;
  uwsgi_temp_path $work/nginx/uwsgi;
  scgi_temp_path $work/nginx/scgi;
  upstream fake { server $upstream; keepalive $connections; }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://fake/v19.0/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
  "${run_nginx[@]}" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" \
    >"$work/nginx/stdout" 2>&1 &
  nginx_pid=$!
  ok=0
  for _ in $(seq 60); do
    if curl -sf "http://127.0.0.1:$port/178/comments" >/dev/null 2>&1; then ok=1; break; fi
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.05
  done
  if [ "$ok" = 1 ]; then
    pids+=("$nginx_pid")
    nginx_addr="127.0.0.1:$port"
    break
  fi
  kill "$nginx_pid" 2>/dev/null || true
  wait "$nginx_pid" 2>/dev/null || true
done
[ -n "$nginx_addr" ] || { echo "gateway_load: nginx did not start:" >&2; cat "$work/nginx/error.log" >&2; exit 1; }

# Prime: a snapshot for the fresh-hit case, an OPEN circuit for the fail-fast one.
curl -sf "http://$gateway/v1/instagram/accounts/178/insights" >/dev/null
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$gateway/v1/instagram/accounts/limited/comments")
[ "$code" = 429 ] || { echo "gateway_load: priming the OPEN circuit got $code" >&2; exit 1; }

# wrk's p99 in ms, requests/s, and non-2xx count for $1 (URL).
measure() {
  local out
  out=$(wrk -t"$threads" -c"$connections" -d"$duration" --latency "$1")
  local rps p99 non2xx
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  # wrk prints 1.23ms, 456.00us or 1.02s: to ms.
  p99=$(awk -v v="$p99" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else print "?" }')
  echo "$rps $p99 ${non2xx:-0}"
}

echo "fusebox gateway load test: wrk -t$threads -c$connections -d$duration, $rounds interleaved rounds, $(nproc) cores"
echo "  fake upstream http://$upstream, gateway http://$gateway, nginx http://$nginx_addr"
echo "  load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# Interleaved rounds: each round measures nginx and then the three gateway
# cases back to back, so that whatever else runs on the machine weighs on a
# case and on its reference alike; a case's ratio is taken within its round,
# and the table gives the median of the rounds.
cases=(nginx pass tls hit open)
declare -A url=(
  [nginx]="http://$nginx_addr/178/comments"
  [pass]="http://$gateway/v1/instagram/accounts/178/comments"
  [tls]="http://$gateway/v1/instagram/accounts/178/comments-tls"
  [hit]="http://$gateway/v1/instagram/accounts/178/insights"
  [open]="http://$gateway/v1/instagram/accounts/limited/comments"
)
declare -A rps_list=() p99_list=() bad_list=() ratio_list=()
tls_vs_plain=""
for r in $(seq "$rounds"); do
  declare -A round_rps=()
  for c in "${cases[@]}"; do
    read -r rps p99 bad < <(measure "${url[$c]}")
    round_rps[$c]=$rps
    rps_list[$c]+="$rps "
    p99_list[$c]+="$p99 "
    bad_list[$c]+="$bad "
  done
  for c in "${cases[@]}"; do
    ratio_list[$c]+="$(awk -v a="${round_rps[$c]}" -v b="${round_rps[nginx]}" \
      'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }') "
  done
  tls_vs_plain+="$(awk -v a="${round_rps[tls]}" -v b="${round_rps[pass]}" \
    'BEGIN { if (b > 0) printf "%.2f", a / b; else print 0 }') "
  echo "round $r: nginx ${round_rps[nginx]}, pass-through ${round_rps[pass]}," \
    "HTTPS pass-through ${round_rps[tls]}, fresh hit ${round_rps[hit]}," \
    "fail-fast ${round_rps[open]} requests/s"
done
echo

# The median of a space-separated list of numbers.
median() {
  tr ' ' '\n' <<<"$1" | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR == 0) { print "?"; exit }
    if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

row() {
  # case key, name, target text, target ratio
  local ratio verdict
  ratio=$(median "${ratio_list[$1]}")
  verdict=$(awk -v r="$ratio" -v t="$4" 'BEGIN { if (t == "") print ""; else if (r + 0 >= t + 0) print "met"; else print "MISSED" }')
  printf "%-34s %12s %10s %10s %8s  %s\n" "$2" "$(median "${rps_list[$1]}")" \
    "$(median "${p99_list[$1]}")" "$(median "${bad_list[$1]}")" "$ratio" "${3:+$3 $verdict}"
}
printf "%-34s %12s %10s %10s %8s  %s\n" "case (median of $rounds rounds)" "requests/s" "p99 ms" "non-2xx" "/nginx" "target"
row nginx "nginx pass-through (reference)" "" ""
row pass "gateway pass-through (no cache)" ">= 0.70" 0.70
row tls "gateway pass-through, HTTPS upstream" "" ""
row hit "gateway fresh hit (snapshot)" ">= 1.00" 1.00
row open "gateway OPEN fail-fast (429)" ">= 1.00" 1.00
echo
echo "(fail-fast answers are 429 by design: its non-2xx count is every request.)"
# Pooling under load: TLS handshakes against requests sent over HTTPS.
metric() {
  curl -s "http://$gateway/metrics" | awk -v m="$1{upstream=\"graph_tls\"}" '$1 == m { print $2 }'
}
echo "HTTPS / HTTP pass-through requests/s (median of the rounds' ratios): $(median "$tls_vs_plain")"
echo "HTTPS upstream: $(metric fusebox_gateway_upstream_tls_handshakes_total) TLS handshakes" \
  "($(metric fusebox_gateway_upstream_tls_sessions_resumed_total) resumed)," \
  "$(metric fusebox_gateway_upstream_connections_opened_total) connections," \
  "for $(curl -s --cacert "$work/certs/ca.pem" "https://$upstream_tls/_fake/calls" |
    sed -n 's/.*"total":\([0-9]*\).*/\1/p') requests"
echo "  load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
