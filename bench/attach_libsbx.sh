#!/usr/bin/env bash
# bench/attach_libsbx.sh BUILD_DIR: attached commands through libsbx and sbx (issue 14; bench/attach.sh
# measures the daemon side with a Python client), side by side with their peers, as lat
# JSON lines on stdout (and a Markdown table on stderr):
#   attach.rtt.pipe        write a line to `cat` on local pipes, read its echo (the floor)
#   attach.rtt.libsbx      the same through libsbx's sbx_process (WebSocket) into a sandbox
#   attach.rtt.cli         the same through `sbx exec -i ID -- cat` on pipes
#   attach.rtt.docker      `docker exec -i C cat`, through bench/docker.sh's private dockerd
#                          (when docker.io is installed)
#   attach.stdin.*_mbps    SIZE MiB of stdin through `sbx exec -i ... wc -c` (and `docker exec
#                          -i`, and a local pipe into wc), MB/s
# Knobs: SBX_BENCH_N (1000 round trips), SBX_BENCH_MB (256). Needs root. Cleans up like run.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${1:-build}
N=${SBX_BENCH_N:-1000}
MB=${SBX_BENCH_MB:-256}
source bench/common.sh
RTT=$T/attach_rtt
# shellcheck disable=SC2046 # pkg-config output is meant to split
cc -std=c17 -O2 -Wall -Wextra -Werror -Iclient/include -o "$RTT" bench/attach_rtt.c "$B/libsbx.a" \
  $(pkg-config --libs libuv libcurl jansson libcrypto) -lm

start_daemon --max-sandboxes 4
export SBX_HOST=$T/sock
ID=$("$B/sbx" create --memory 512Mi --timeout 30m)

"$RTT" pipe attach.rtt.pipe "$N" cat | tee -a "$RES" >&2
"$RTT" sbx attach.rtt.libsbx "$N" "$T/sock" "$ID" | tee -a "$RES" >&2
"$RTT" pipe attach.rtt.cli "$N" "$B/sbx" exec -i "$ID" -- cat | tee -a "$RES" >&2

mbps() { # NAME CMD...: MB of zeros into CMD, MB/s
  local name=$1 t0 t1
  shift
  t0=$(date +%s%N)
  head -c "${MB}M" /dev/zero | "$@" >/dev/null
  t1=$(date +%s%N)
  local v
  v=$(awk -v b=$((MB << 20)) -v ns=$((t1 - t0)) 'BEGIN {printf "%.1f", b / 1e6 / (ns / 1e9)}')
  echo "{\"name\":\"$name\",\"mb\":$MB,\"mbps\":$v}" | tee -a "$RES" >&2
}
mbps attach.stdin.pipe_mbps wc -c
mbps attach.stdin.cli_mbps "$B/sbx" exec -i "$ID" -- wc -c

# Docker: bench/docker.sh's private dockerd (no iptables, no bridge) and offline image
source bench/docker.sh
if docker_up; then
  DOCKER_C=$("${DOCKER[@]}" run -d --network none "$DOCKER_IMG" sleep infinity 2>/dev/null || true)
  if [ -n "$DOCKER_C" ]; then
    "$RTT" pipe attach.rtt.docker "$N" "${DOCKER[@]}" exec -i "$DOCKER_C" cat | tee -a "$RES" >&2
    mbps attach.stdin.docker_mbps "${DOCKER[@]}" exec -i "$DOCKER_C" wc -c
  else
    loud "docker run -d of $DOCKER_IMG failed: no docker exec -i rows"
  fi
  docker_stop
fi
"$B/sbx" rm "$ID" >/dev/null
stop_daemon
cat "$NOTES" >&2
cat "$RES"
