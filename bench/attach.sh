#!/usr/bin/env bash
# bench/attach.sh: runs bench/attach.py (attached round trip next to a local pipe, stdin
# throughput) against a daemon of its own and one sandbox. Usage: bench/attach.sh [BUILD_DIR];
# SBX_BENCH_N round trips (default 500). Prints JSON lines; copy them into docs/BENCHMARKS.md.
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
source "$ROOT/bench/common.sh"
start_daemon --shim "$B/sbx-shim" || { cat "$T/daemon.log" >&2; exit 1; }
ID=$(curl -s --unix-socket "$T/sock" -X POST -d '{}' http://sd/v1/sandboxes | jq -r .id)
"${SBX_PYTHON:-/usr/bin/python3}" bench/attach.py "$T/sock" "$ID" "${SBX_BENCH_N:-500}"
