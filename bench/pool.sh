#!/usr/bin/env bash
# bench/pool.sh BUILD_DIR: the warm-pool measurements bench/run.sh does not make, as lat JSON
# lines on stdout (and a Markdown table on stderr):
#   api.cycle_pool            create -> exec `true` -> delete from a pool (peer: bwrap, timed
#                             before each iteration), and its .create/.exec/.delete parts
#   api.burst_pool            128 creates at once served from a full pool of 128 (3 rounds,
#                             the pool refilled in between; .roundN: each round)
#   api.cycle_pool_net_open   the same cycle with {"network":"open"} from a pool of pre-plumbed
#                             networked sandboxes (daemon in a private network namespace)
# Knobs: SBX_BENCH_N (100), SBX_BENCH_BURST (128). Needs root. Cleans up like run.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${1:-build}
N=${SBX_BENCH_N:-100}
BURST=${SBX_BENCH_BURST:-128}
source bench/common.sh

ready() { # pool index -> ready entries
  curl -s --max-time 5 --unix-socket "$T/sock" http://x/metrics |
    awk -v m="sandboxd_pool_entries{pool=\"$1\",state=\"ready\"}" '$1 == m {print $2}'
}
wait_full() { # pool size seconds
  for _ in $(seq $(($3 * 10))); do
    [ "$(ready "$1")" == "$2" ] && return 0
    sleep 0.1
  done
  log "pool $1 did not fill to $2 in $3 s (ready: $(ready "$1"))"
  return 1
}

SIZE=$(( BURST > N ? BURST : N ))
log "pool daemon: --pool size=$SIZE"
start_daemon --max-sandboxes $((SIZE * 2 + 16)) --pool "size=$SIZE" --pool-max-starting 4
wait_full 0 "$SIZE" 120
run_lat cycle api.cycle_pool "$N" "$T/sock" '{}' "${PEER[@]}"
for r in 1 2 3; do
  wait_full 0 "$SIZE" 120
  sleep 0.5 # let the refill's last teardowns settle
  run_lat burst "api.burst_pool.round$r" 1 "$BURST" "$T/sock" '{}'
done
# the three rounds as one row (p50 of 3 rounds, as api.burst)
grep -h '"name":"api.burst_pool.round[123]",' "$RES" | sed -n 's/.*"p50_ms":\([0-9.]*\).*/\1/p' |
  "$LAT" stats api.burst_pool | tee -a "$RES" >&2
stop_daemon

log "networked pool daemon (private network namespace): --pool size=$N,network=open"
echo '{"network":{"enabled":true}}' >"$T/net.json"
DAEMON_WRAP=(unshare -n -- bash -c 'ip link set lo up && exec "$@"' _)
start_daemon --config "$T/net.json" --max-sandboxes $((N + 16)) --pool "size=$N,network=open" \
  --pool-max-starting 4
wait_full 0 "$N" 240
run_lat cycle api.cycle_pool_net_open "$N" "$T/sock" '{"network":"open"}'
stop_daemon
unset DAEMON_WRAP
cat "$RES"
