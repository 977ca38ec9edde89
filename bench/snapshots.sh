#!/usr/bin/env bash
# bench/snapshots.sh BUILD_DIR: issue 24's numbers in one run, as lat JSON lines on stdout
# (progress and notes on stderr):
#   snap.commit_100mb        POST .../commit of a sandbox with 100 MiB of changes (50 files of
#                            1 MiB in its writable layer under /app, 50 in /workspace), whole request
#   snap.commit_100mb.freeze how long that sandbox was frozen (the answer's freeze_ms)
#   snap.cold_create_image   a cold create of the same store image, timed in the same rounds
#   snap.cold_create_commit  a cold create of the committed image (its seed layer to copy)
#   vol.cycle_plain.rK / vol.cycle_volume.rK
#                            create -> exec `true` -> delete without and with a read-only
#                            volume, two interleaved rounds (lat cycle)
#   snap.pause_256mb         POST .../pause of a pausable sandbox whose Python process holds
#                            256 MiB (touched), whole request
#   snap.pause_256mb.dump    CRIU's dump within it (the answer's dump_ms)
#   snap.resume_256mb        POST .../resume of it, whole request
#   snap.cold_create_pausable a cold create of a pausable sandbox, timed in the same rounds
# Knobs: SBX_BENCH_N (commit and pause rounds, default 10; the volume cycles run 4*N). Needs
# root; the pause rows need a CRIU that passes `criu check` (tests/deps.sh), else a note.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${1:-build}
N=${SBX_BENCH_N:-10}
source bench/common.sh

api() { # METHOD PATH [BODY] -> body on stdout, "<http code> <seconds>" in $T/w
  curl -s --unix-socket "$T/sock" -X "$1" -o "$T/out" -w '%{http_code} %{time_total}' \
    ${3:+-d "$3"} "http://x$2" >"$T/w"
  cat "$T/out"
}
ok() { # CODE: the last answer's status
  [ "$(cut -d' ' -f1 "$T/w")" == "$1" ] || { echo "bench: HTTP $(cat "$T/w"): $(cat "$T/out")" >&2; exit 1; }
}
ms() { awk '{printf "%.3f\n", $2 * 1000}' "$T/w"; }
stats() { "$LAT" stats "$1" <"$T/$2" | tee -a "$RES" >&2; } # NAME FILE: a lat JSON line

start_daemon
MKIMAGE_EXTRA_BINS="head seq" python3 tests/integration/mkimage.py oci "$T/base.tar"
curl -s --unix-socket "$T/sock" -X POST "http://x/v1/images?name=base:1" --data-binary @"$T/base.tar" >/dev/null
: >"$T/commit" && : >"$T/freeze" && : >"$T/cold" && : >"$T/coldc"
log "commit of 100 MiB of changes, $N rounds, each next to cold creates"
for i in $(seq "$N"); do
  api POST /v1/sandboxes '{"image":"base:1","memory":"1Gi","disk":"512Mi"}' >/dev/null; ok 201
  ms >>"$T/cold"
  id=$(jq -r .id "$T/out")
  api POST "/v1/sandboxes/$id/exec" '{"argv":["sh","-c","mkdir -p /app/d /workspace/d && for i in $(seq 50); do head -c 1048576 /dev/urandom > /app/d/$i; head -c 1048576 /dev/urandom > /workspace/d/$i; done"]}' >/dev/null
  ok 200
  [ "$(jq .exit_code "$T/out")" == 0 ] || { echo "bench: writing the changes failed: $(cat "$T/out")" >&2; exit 1; }
  api POST "/v1/sandboxes/$id/commit" "{\"name\":\"snap:$i\"}" >/dev/null; ok 201
  ms >>"$T/commit"
  jq .freeze_ms "$T/out" >>"$T/freeze"
  [ "$i" != 1 ] || note "the committed image: $(jq '.layers | length' "$T/out") layers, $(jq '.size' "$T/out") bytes of files (the base image's and the 100 MiB of the new layer)"
  api DELETE "/v1/sandboxes/$id" >/dev/null
  api POST /v1/sandboxes "{\"image\":\"snap:$i\",\"memory\":\"1Gi\"}" >/dev/null; ok 201
  ms >>"$T/coldc"
  c=$(jq -r .id "$T/out")
  api DELETE "/v1/sandboxes/$c" >/dev/null
  sleep 0.3 # the shim's teardown, before the image it used goes
  api DELETE "/v1/images/snap:$i" >/dev/null
done
stats snap.commit_100mb commit
stats snap.commit_100mb.freeze freeze
stats snap.cold_create_image cold
stats snap.cold_create_commit coldc

log "volume mount cost: create -> exec -> delete with and without a read-only volume"
api POST /v1/volumes '{"name":"bench","size":"64Mi"}' >/dev/null; ok 201
for round in 1 2; do
  run_lat cycle "vol.cycle_plain.r$round" $((2 * N)) "$T/sock" '{}'
  run_lat cycle "vol.cycle_volume.r$round" $((2 * N)) "$T/sock" \
    '{"volumes":[{"name":"bench","path":"/data","read_only":true}]}'
done

log "pause and resume of a sandbox holding 256 MiB, $N rounds, each next to a cold create"
HOLD='{"argv":["sh","-c","python3 -c \"import time\nb = bytearray(256 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nopen(\\\"/tmp/ready\\\", \\\"w\\\").close()\nwhile True: time.sleep(1)\" </dev/null >/dev/null 2>&1 & while [ ! -e /tmp/ready ]; do sleep 0.05; done"]}'
: >"$T/pause" && : >"$T/dump" && : >"$T/resume" && : >"$T/coldp"
id=$(api POST /v1/sandboxes '{"pausable":true}' | jq -r .id)
api POST "/v1/sandboxes/$id/pause" >/dev/null # 200 where this node can pause, else 501
if [ "$(cut -d' ' -f1 "$T/w")" == 200 ]; then
  for i in $(seq "$N"); do
    api POST /v1/sandboxes '{"pausable":true,"memory":"1Gi"}' >/dev/null; ok 201
    ms >>"$T/coldp"
    p=$(jq -r .id "$T/out")
    api POST "/v1/sandboxes/$p/exec" "$HOLD" >/dev/null; ok 200
    api POST "/v1/sandboxes/$p/pause" >/dev/null; ok 200
    ms >>"$T/pause"
    jq .pause.checkpoint.dump_ms "$T/out" >>"$T/dump"
    [ "$i" != 1 ] || note "a paused sandbox holding 256 MiB: a checkpoint of $(jq .pause.checkpoint.bytes "$T/out") bytes"
    api POST "/v1/sandboxes/$p/resume" >/dev/null; ok 200
    ms >>"$T/resume"
    api DELETE "/v1/sandboxes/$p" >/dev/null
  done
  stats snap.pause_256mb pause
  stats snap.pause_256mb.dump dump
  stats snap.resume_256mb resume
  stats snap.cold_create_pausable coldp
else
  note "pause on this node: HTTP $(cut -d' ' -f1 "$T/w") $(jq -r .code "$T/out"): $(jq -r .message "$T/out")"
fi
api DELETE "/v1/sandboxes/$id" >/dev/null
api DELETE /v1/volumes/bench >/dev/null
note "load average at the end: $(cat /proc/loadavg)"
stop_daemon
cat "$NOTES" >&2
cat "$RES"
