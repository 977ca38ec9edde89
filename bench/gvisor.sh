#!/usr/bin/env bash
# bench/gvisor.sh BUILD_DIR: the isolation classes side by side in one run (docs/BENCHMARKS.md
# "Isolation classes"), as lat JSON lines on stdout (and on stderr as they come):
#   iso.native.cycle / iso.gvisor.cycle          cold create -> exec `true` -> delete (each with
#                                                bwrap timed before each iteration: .peer)
#   iso.native.cycle_pool / iso.gvisor.cycle_pool the same from a warm pool of that class
#   iso.native.exec / iso.gvisor.exec            exec `true` round trips in one sandbox
#   iso.native.idle / iso.gvisor.idle            memory per idle sandbox (PSS of the shims and
#                                                everything under them, runsc included; kmem)
# The gvisor daemon is started with {"defaults":{"isolation":"gvisor"}}, so the same `lat`
# requests ({} bodies) make gvisor sandboxes. Knobs: SBX_BENCH_N (20), SBX_BENCH_IDLE (8).
# Needs root and runsc. Cleans up like run.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${1:-build}
N=${SBX_BENCH_N:-20}
K=${SBX_BENCH_IDLE:-8}
source bench/common.sh
command -v runsc >/dev/null || { loud "runsc is not installed: no gvisor rows"; exit 1; }
log "load before: $(cat /proc/loadavg)"

ready() { # pool 0's ready entries
  curl -s --max-time 5 --unix-socket "$T/sock" http://x/metrics |
    awk '$1 == "sandboxd_pool_entries{pool=\"0\",state=\"ready\"}" {print $2}'
}
wait_full() { # size seconds
  for _ in $(seq $(($2 * 10))); do
    [ "$(ready)" == "$1" ] && return 0
    sleep 0.1
  done
  log "the pool did not fill to $1 in $2 s"
  return 1
}

for class in native gvisor; do
  echo "{\"defaults\":{\"isolation\":\"$class\"}}" >"$T/$class.json"
  log "$class: cold cycle, exec, idle"
  start_daemon --config "$T/$class.json" --max-sandboxes $((K + 16))
  run_lat cycle "iso.$class.cycle" "$N" "$T/sock" '{}' "${PEER[@]}"
  run_lat exec "iso.$class.exec" "$N" "$T/sock"
  run_lat idle "iso.$class.idle" "$K" "$T/sock" "$DPID" "$(realpath "$B/sbx-shim")" "$CGPARENT" \
    '{"memory":"256Mi"}'
  stop_daemon
  log "$class: pooled cycle"
  start_daemon --config "$T/$class.json" --max-sandboxes $((N * 2 + 16)) --pool "size=$N" \
    --pool-max-starting 4
  wait_full "$N" 240
  run_lat cycle "iso.$class.cycle_pool" "$N" "$T/sock" '{}'
  stop_daemon
done
log "load after: $(cat /proc/loadavg)"
cat "$RES"
