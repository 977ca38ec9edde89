#!/usr/bin/env bash
# bench/move.sh [BUILD_DIR]: a paused sandbox resumed here vs on another node of the fleet
# (docs/BENCHMARKS.md "Pause and resume"), in the two-node world of tests/network/fleetd_world.sh
# (a real etcd, daemons a and b in one private netns on loopback, HTTPS, the fleet token). Each
# round: a pausable sandbox whose Python process holds 256 MiB (touched) is paused on a and
# resumed on a (move.resume_here_256mb), paused again and resumed on b through a
# (move.resume_on_b_256mb: b pulls the checkpoint through a's API, unpacks it and restores it;
# the whole request as the client sees it), then ended. lat JSON lines on stdout, notes on
# stderr. Knobs: SBX_BENCH_N (rounds, default 10). Needs root, CRIU (tests/deps.sh), etcd,
# openssl, jq.
set -euo pipefail
SBX_SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
SBX_BUILD_DIR=$(cd "${1:-$SBX_SRC_DIR/build}" && pwd)
export SBX_SRC_DIR SBX_BUILD_DIR
fail() { echo "bench/move: FAIL: $*" >&2; exit 1; }
skip() { echo "bench/move: SKIPPED (prerequisite missing): $*" >&2; exit 77; }
N=${SBX_BENCH_N:-10}
DAEMON_TAG=movebench DAEMON_LOG_LEVEL=info
source "$SBX_SRC_DIR/tests/lib/daemon.sh"
source "$SBX_SRC_DIR/tests/network/fleetd_world.sh"
source "$SBX_SRC_DIR/tests/lib/pause.sh"

need_criu
world
fleet_daemon a --fleet-ca "$DAEMON_ROOT/cert.pem" --max-sandboxes 8
fleet_daemon b --fleet-ca "$DAEMON_ROOT/cert.pem" --max-sandboxes 8
wait_view a "[$(node a), $(node b)] | length == 2"
wait_view b "[$(node a), $(node b)] | length == 2"
LAT=$DAEMON_ROOT/lat
# shellcheck disable=SC2046 # pkg-config output is meant to split
cc -std=c17 -O2 -Wall -Wextra -Werror -o "$LAT" "$SBX_SRC_DIR/bench/lat.c" \
  $(pkg-config --cflags --libs libcurl jansson)

timed() { # NODE METHOD PATH [BODY]: HTTPS to the node (307s followed), ms appended to $DAEMON_ROOT/t
  local t
  t=$("${NS[@]}" curl -s --max-time 120 --cacert "$DAEMON_ROOT/cert.pem" --location-trusted \
    -H "Authorization: Bearer ftok" -X "$2" -o "$DAEMON_ROOT/body" -w '%{http_code} %{time_total}' \
    ${4:+-d "$4"} "https://127.0.0.1:${PORT[$1]}$3")
  [ "${t%% *}" == 200 ] || fail "$2 $3 on $1: $t $(cat "$DAEMON_ROOT/body")"
  awk '{printf "%.3f\n", $2 * 1000}' <<<"$t" >>"$DAEMON_ROOT/t"
}

HOLD='{"argv":["sh","-c","python3 -c \"import time\nb = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nopen(\\\"/tmp/ready\\\", \\\"w\\\").close()\nwhile True: time.sleep(1)\" </dev/null >/dev/null 2>&1 & while [ ! -e /tmp/ready ]; do sleep 0.05; done"]}'
: >"$DAEMON_ROOT/here" && : >"$DAEMON_ROOT/there"
echo "bench: $N rounds of pause + resume here and pause + resume on the other node" >&2
for i in $(seq "$N"); do
  daemon_use a
  create '{"pausable":true,"memory":"1Gi"}'
  req POST "/v1/sandboxes/$ID/exec" -d "$HOLD"; expect 200
  req POST "/v1/sandboxes/$ID/pause"; expect 200
  [ "$i" != 1 ] || echo "bench: the checkpoint: $(echo "$BODY" | jq .pause.checkpoint.bytes) bytes" >&2
  : >"$DAEMON_ROOT/t"; timed a POST "/v1/sandboxes/$ID/resume"; cat "$DAEMON_ROOT/t" >>"$DAEMON_ROOT/here"
  req POST "/v1/sandboxes/$ID/pause"; expect 200
  : >"$DAEMON_ROOT/t"; timed a POST "/v1/sandboxes/$ID/resume" '{"node":"b"}'
  cat "$DAEMON_ROOT/t" >>"$DAEMON_ROOT/there"
  jq -e '.node == "b" and .state == "running"' "$DAEMON_ROOT/body" >/dev/null || fail "not on b: $(cat "$DAEMON_ROOT/body")"
  daemon_use b
  req DELETE "/v1/sandboxes/$ID"; expect 204
done
"$LAT" stats move.resume_here_256mb <"$DAEMON_ROOT/here"
"$LAT" stats move.resume_on_b_256mb <"$DAEMON_ROOT/there"
echo "bench: load average at the end: $(cat /proc/loadavg)" >&2
