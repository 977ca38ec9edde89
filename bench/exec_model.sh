#!/usr/bin/env bash
# bench/exec_model.sh: the exec round trip against a model of the least a daemon with helper
# processes could do on this machine (issue 28 goal 4). Builds bench/exec_model.c, starts a
# daemon of its own, and runs `bench/exec_floor.py --model`: sandboxd's exec from the minimal
# Python client beside the model's variants (0-2 hops, the command's pipes passed down, a reaper
# per command or one kept), each in the goal's loop (right after a `subprocess.run(["/bin/true"])`, its
# floor). Usage: bench/exec_model.sh [BUILD_DIR]; SBX_BENCH_N rounds (default 500). Needs root
# and a C compiler.
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
source "$ROOT/bench/common.sh"
"${CC:-cc}" -O2 -Wall -Wextra -o "$T/exec_model" bench/exec_model.c
start_daemon --shim "$B/sbx-shim" || { cat "$T/daemon.log" >&2; exit 1; }
echo "# exec round trip against the model, $(date -u +%Y-%m-%dT%H:%MZ), commit" \
  "$(git rev-parse --short HEAD 2>/dev/null || echo '?'), load $(cut -d' ' -f1-3 /proc/loadavg)"
"${SBX_PYTHON:-/usr/bin/python3}" bench/exec_floor.py --model "$T/exec_model" "$T/sock" "${SBX_BENCH_N:-500}"
