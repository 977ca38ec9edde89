#!/usr/bin/env bash
# bench/exec_peers.sh: the exec round trip of a running sandbox from Python (bench/exec_floor.py
# --peers) beside its floor, `subprocess.run(["/bin/true"])`, and beside the peers' ways of
# running a command in a sandbox that already runs: `nsenter -a` into a bubblewrap sandbox and
# `crun exec` into a crun container, interleaved request by request, against a daemon of its
# own. Usage: bench/exec_peers.sh [BUILD_DIR]; SBX_BENCH_N round trips of each (default 300).
# Prints a table; copy it into docs/BENCHMARKS.md. Needs root.
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
source "$ROOT/bench/common.sh"
start_daemon --shim "$B/sbx-shim" || { cat "$T/daemon.log" >&2; exit 1; }
BWRAP_SLEEP='' CRUN_PREFIX='' BUNDLE=''
if ! command -v nsenter >/dev/null; then
  loud "nsenter is not installed (util-linux): the bubblewrap row is skipped"
elif [ ${#PEER[@]} -gt 0 ]; then
  BWRAP_SLEEP=$(json_argv "${BWRAP_RUN[@]}" sleep 3600)
fi
if crun_init; then
  BUNDLE=$T/bundle
  crun_bundle "$BUNDLE" '["/usr/bin/sleep", "3600"]'
  CRUN_PREFIX=$(json_argv crun --root "$CRUN_ROOT")
fi
echo "# exec round trips, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg)"
SBX_BENCH_BWRAP_SLEEP=$BWRAP_SLEEP SBX_BENCH_CRUN_PREFIX=$CRUN_PREFIX SBX_BENCH_CRUN_BUNDLE=$BUNDLE \
  ${CRUN_WRAP[@]+"${CRUN_WRAP[@]}"} "${SBX_PYTHON:-/usr/bin/python3}" bench/exec_floor.py --peers "$T/sock" "${SBX_BENCH_N:-300}"
