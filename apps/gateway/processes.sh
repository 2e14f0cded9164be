# Sourced by the scripts that run gateways (apps/gateway/demo.sh,
# bench/gateway_load.sh, bench/fresh_hit_calls.sh): a scratch folder, the background processes to stop
# by PID on every exit path, and waiting for a server's "listening on" line.
#
#   SCRIPT_NAME=gateway_load; source path/to/apps/gateway/processes.sh
#   some_server >"$work/x.out" 2>"$work/x.err" & pids+=("$!")
#   address=$(listening "$work/x.out")
#
# A script that must undo something before its processes are stopped (a
# SIGSTOPped Redis resumed, say) redefines before_cleanup.

work=$(mktemp -d "${TMPDIR:-/tmp}/fusebox-${SCRIPT_NAME:?set SCRIPT_NAME before sourcing}.XXXXXX")
pids=()

before_cleanup() { :; }

cleanup() {
  local status=$?
  before_cleanup || true
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Prints the address in the first "listening on ADDRESS" line of file $1,
# waiting up to 5 s for it; on failure, prints the server's output.
listening() {
  for _ in $(seq 100); do
    if grep -q 'listening on ' "$1" 2>/dev/null; then
      sed -n 's/.*listening on //p' "$1" | head -n1
      return 0
    fi
    sleep 0.05
  done
  echo "$SCRIPT_NAME: no 'listening on' line in $1" >&2
  cat "$1" "${1%.out}.err" >&2 2>/dev/null || true
  return 1
}
