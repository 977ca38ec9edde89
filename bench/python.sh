#!/usr/bin/env bash
# bench/python.sh: runs bench/python.py (Python SDK vs libsbx cycle, /run_code at 1/16/128
# clients) against a daemon of its own. Usage: bench/python.sh [BUILD_DIR]; SBX_BENCH_N
# iterations (default 50). Prints JSON lines; copy the numbers into docs/BENCHMARKS.md.
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ "$(id -u)" -eq 0 ] || { echo "bench: needs root" >&2; exit 1; }
source "$ROOT/bench/common.sh"
RUN_DIR=$T/tmpfs # the run dir on a tmpfs, as /run/sandboxd is in production
mkdir -p "$RUN_DIR"
mount -t tmpfs -o mode=0755 sbxbench "$RUN_DIR"
export RUN_DIR
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_daemon --shim "$B/sbx-shim" --max-sandboxes 200 --sandboxfusion-listen "127.0.0.1:$PORT" \
  --sandboxfusion-max-running "${SBX_BENCH_SF_RUNNING:-16}" || { cat "$T/daemon.log" >&2; exit 1; }
SBX_HOST="unix:$T/sock" SANDBOXD_SF_URL="http://127.0.0.1:$PORT" SANDBOXD_LIBSBX="$B/libsbx.so.0" \
  PYTHONPATH="$ROOT/python" "${SBX_PYTHON:-/usr/bin/python3}" bench/python.py
