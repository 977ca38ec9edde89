#!/usr/bin/env bash
# bench/python.sh: runs bench/python.py (Python SDK, AsyncSandbox and libsbx cycles from a warm
# pool, 128 AsyncSandbox episodes, /run_code at 1/16/128 clients with its pools by demand, beside
# python3 run directly and in fresh bubblewrap and crun sandboxes) against a daemon of its own.
# Usage: bench/python.sh [BUILD_DIR]; SBX_BENCH_N iterations (default 50). Prints JSON lines;
# copy the numbers into docs/BENCHMARKS.md.
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
source "$ROOT/bench/common.sh"
RUN_DIR=$T/tmpfs # the run dir on a tmpfs, as /run/sandboxd is in production
mkdir -p "$RUN_DIR"
mount -t tmpfs -o mode=0755 sbxbench "$RUN_DIR"
export RUN_DIR
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
N=${SBX_BENCH_N:-50}
POOL=$((5 * N + 4)) # per round the C cycle (a warm-up and one) and the SDK, AsyncSandbox and
                    # libsbx cycles (cpu 0.5) take one entry each
start_daemon --shim "$B/sbx-shim" --max-sandboxes $((POOL + 300)) --sandboxfusion-listen "127.0.0.1:$PORT" \
  --sandboxfusion-max-running "${SBX_BENCH_SF_RUNNING:-16}" --pool "size=$POOL,cpu=0.5" \
  --pool-max-starting 4 || { cat "$T/daemon.log" >&2; exit 1; }
for _ in $(seq 1200); do # until the pool is full
  [ "$(curl -s --unix-socket "$T/sock" http://x/metrics |
    awk '$1 == "sandboxd_pool_entries{pool=\"0\",state=\"ready\"}" {print $2}')" == "$POOL" ] && break
  sleep 0.1
done
# The floor's program (the host's python3 on /usr, what /run_code runs in the default image),
# also run in a fresh sandbox of each peer (bench/common.sh); python.py says which one is missing
PRINT1=(/usr/bin/python3 -c 'print(1)')
PEER_BWRAP='' PEER_CRUN=''
[ ${#PEER[@]} -eq 0 ] || PEER_BWRAP=$(json_argv "${BWRAP_RUN[@]}" "${PRINT1[@]}")
if crun_init; then
  crun_bundle "$T/bundle" "$(json_argv "${PRINT1[@]}")"
  PEER_CRUN=$(json_argv crun --root "$CRUN_ROOT" run --bundle "$T/bundle" 'sbxbench-crun-{i}')
fi
SBX_BENCH_LAT=$LAT SBX_HOST="unix:$T/sock" SANDBOXD_SF_URL="http://127.0.0.1:$PORT" SANDBOXD_LIBSBX="$B/libsbx.so.0" \
  SBX_BENCH_FLOOR=$(json_argv "${PRINT1[@]}") SBX_BENCH_BWRAP=$PEER_BWRAP SBX_BENCH_CRUN=$PEER_CRUN \
  PYTHONPATH="$ROOT/python" \
  ${CRUN_WRAP[@]+"${CRUN_WRAP[@]}"} "${SBX_PYTHON:-/usr/bin/python3}" bench/python.py
