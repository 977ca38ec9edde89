#!/usr/bin/env bash
# bench/steps.sh BUILD_DIR: where a cold create's time goes, step by step. N creates (each
# deleted, then a pause as between real creates) on a daemon of its own; each shim's ready line
# says how long each build step took (`steps_ms`: the shim's host steps, then init's as
# init.NAME, waits included: userns-map waits for init up to its userns step, init.sync for
# the go-ahead). Prints a Markdown table of the mean and p50 per step, largest first, and the
# API create's own p50. Knobs: SBX_BENCH_N (40), SBX_BENCH_PAUSE_S (0.05). Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${1:-build}
N=${SBX_BENCH_N:-40}
PAUSE=${SBX_BENCH_PAUSE_S:-0.05}
source bench/common.sh
start_daemon --max-sandboxes $((N + 16))
: >"$T/create.ms"
for _ in $(seq "$N"); do
  out=$(curl -s -w '\n%{time_total}' --unix-socket "$T/sock" -X POST http://x/v1/sandboxes -d '{}')
  id=$(echo "$out" | grep -o '"id":"sb-[0-9a-f]*"' | head -1 | cut -d'"' -f4)
  echo "$out" | tail -n 1 | awk '{printf "%.3f\n", $1 * 1000}' >>"$T/create.ms"
  curl -s --unix-socket "$T/sock" -X DELETE "http://x/v1/sandboxes/$id" >/dev/null
  sleep "$PAUSE"
done
sleep 0.5
stop_daemon
echo "| step | mean ms | p50 ms |"
echo "|---|---|---|"
grep -ho 'steps_ms="[^"]*"' "$T/daemon.log" | sed 's/steps_ms=//; s/"//g' | tr ' ' '\n' |
  awk -F= 'NF == 2 { print $1, $2 }' | sort -k1,1 -k2,2g |
  awk '{ if ($1 != k) { if (k != "") out(); k = $1; n = 0; s = 0 } v[++n] = $2; s += $2 }
    function out() { printf "| %s | %.3f | %.3f |\n", k, s / n, v[int((n + 1) / 2)] }
    END { if (k != "") out() }' | sort -t'|' -k3 -g -r
grep -ho 'msg=sandbox started .* seconds=[0-9.]*' "$T/daemon.log" | sed 's/.*seconds=//' | sort -g |
  awk '{ a[NR] = $1; s += $1 } END { if (NR) printf "| the daemon: the shim spawned until it is ready (all of the above, the shim'"'"'s exec and start) | %.3f | %.3f |\n", s * 1000 / NR, a[int((NR + 1) / 2)] * 1000 }'
sort -g "$T/create.ms" | awk '{ a[NR] = $1 } END { printf "| POST /v1/sandboxes (curl, whole request) | | %.3f |\n", a[int((NR + 1) / 2)] }'
