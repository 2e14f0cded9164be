#!/usr/bin/env bash
# `make demo`, the gateway part: seed 000's whole story on this machine.
#
#   apps/gateway/demo.sh path/to/fusebox
#
# Starts Redis (when redis-server is installed; else each gateway keeps its
# state in process and says so), the fake Graph API (apps/gateway/testdata/
# demo.yaml) over HTTPS, its certificate issued by a throwaway CA that
# make_test_certs.sh makes with the openssl CLI (the gateways trust that CA
# through tls.ca_file), two gateway instances, then runs the client
# (`fusebox gateway-demo`), prints the dashboard addresses and stops
# everything it started, by PID, on every exit path (success, failure,
# Ctrl-C). Set FUSEBOX_DEMO_KEEP=1 to keep the processes running until Enter
# is pressed, to look at the dashboards.
set -euo pipefail

fusebox=${1:?usage: demo.sh path/to/fusebox}
here=$(cd "$(dirname "$0")" && pwd)
SCRIPT_NAME=demo
# shellcheck source=apps/gateway/processes.sh
source "$here/processes.sh"

redis_url=""
if command -v redis-server >/dev/null 2>&1; then
  # redis-server cannot pick its own port; try a few random ones.
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$work" >"$work/redis.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 50); do
      redis-cli -p "$port" ping >/dev/null 2>&1 && break
      sleep 0.05
    done
    if redis-cli -p "$port" ping >/dev/null 2>&1; then
      redis_url="redis://127.0.0.1:$port/0"
      break
    fi
  done
  [ -n "$redis_url" ] || { echo "demo: redis-server did not start:" >&2; cat "$work/redis.log" >&2; exit 1; }
  echo "Redis:        $redis_url"
else
  echo "Redis:        not installed (apt-get install redis-server); each gateway keeps its own state"
fi

"$here/make_test_certs.sh" "$work/certs" >/dev/null
"$fusebox" fake-upstream --script "$here/testdata/demo.yaml" \
  --tls-cert "$work/certs/server.pem" --tls-key "$work/certs/server.key" \
  >"$work/upstream.out" 2>"$work/upstream.err" &
pids+=($!)
upstream=$(listening "$work/upstream.out")
echo "Fake Graph:   https://$upstream   (script apps/gateway/testdata/demo.yaml, TLS by a throwaway CA)"

export FUSEBOX_DEMO_ADMIN_TOKEN="demo-$RANDOM$RANDOM"
gateways=()
for name in gw-a gw-b; do
  cat >"$work/$name.yaml" <<EOF
listen: 127.0.0.1:0
instance: $name
${redis_url:+redis: $redis_url}
admin:
  token_env: FUSEBOX_DEMO_ADMIN_TOKEN
  audit_log: $work/$name-audit.jsonl
upstreams:
  - name: graph
    base_url: https://$upstream/v19.0
    request_timeout: 5s
    tls:
      ca_file: $work/certs/ca.pem
routes:
  - {name: posts, method: GET, path: "/v1/{provider}/accounts/{account}/media",
     upstream: graph, upstream_path: "/{account}/media", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta,
     cache: {fresh_for: 1s, max_stale: 1h}}
  - {name: insights, method: GET, path: "/v1/{provider}/accounts/{account}/insights",
     upstream: graph, upstream_path: "/{account}/insights", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta,
     cache: {fresh_for: 10m, max_stale: 24h}}
  - {name: comments, method: GET, path: "/v1/{provider}/accounts/{account}/comments",
     upstream: graph, upstream_path: "/{account}/comments", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta}
  - {name: stats, method: GET, path: "/v1/{provider}/accounts/{account}",
     upstream: graph, upstream_path: "/{account}", workload: read,
     provider: "{provider}", subject: "{account}", classifier: meta,
     cache: {fresh_for: 1s, max_stale: 1h}}
EOF
  "$fusebox" gateway --config "$work/$name.yaml" >"$work/$name.out" 2>"$work/$name.err" &
  pids+=($!)
  address=$(listening "$work/$name.out")
  gateways+=("$address")
  echo "Gateway $name: http://$address"
done
echo

status=0
"$fusebox" gateway-demo --upstream "$upstream" --upstream-ca "$work/certs/ca.pem" \
  --gateway "${gateways[0]}" \
  --gateway "${gateways[1]}" --admin-token-env FUSEBOX_DEMO_ADMIN_TOKEN || status=$?

echo
echo "Dashboards (live while the demo runs):"
echo "  http://${gateways[0]}/dashboard"
echo "  http://${gateways[1]}/dashboard"
if [ "${FUSEBOX_DEMO_KEEP:-0}" = 1 ] && [ -t 0 ]; then
  read -r -p "Press Enter to stop everything. " _
fi
echo "Stopping Redis, the fake Graph API and both gateways."
exit "$status"
