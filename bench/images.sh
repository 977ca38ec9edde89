#!/usr/bin/env bash
# bench/images.sh BUILD_DIR: store images next to the host image, in one run, as lat JSON lines
# on stdout (progress on stderr):
#   api.cycle_host / api.cycle_image_<name>   create -> exec `true` -> delete, same daemon,
#                                             loops interleaved per image
#   images.import_<name>                      import time (ms) of each archive (n = 1 each)
# and notes: disk per image (its layers), disk that a second sandbox of an image adds.
# Images: the multi-layer test image (tests/integration/mkimage.py, OCI layout) and, when the
# test suite has cached it, the Debian minbase rootfs. Knobs: SBX_BENCH_N (100). Needs root.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
B=${1:-build}
N=${SBX_BENCH_N:-100}
source bench/common.sh
DEBIAN=${SBX_IMAGE_CACHE:-/var/cache/sandboxd-tests}/debian-bookworm-minbase-nodev.tar.gz

start_daemon
python3 tests/integration/mkimage.py oci "$T/test.tar"
declare -A ARCH=([test]="$T/test.tar")
[ -s "$DEBIAN" ] && ARCH[debian]=$DEBIAN
for name in "${!ARCH[@]}"; do
  ms=$(curl -s -o "$T/imp.json" -w '%{time_total}' --unix-socket "$T/sock" -X POST \
    "http://x/v1/images?name=$name&setuid=strip" --data-binary @"${ARCH[$name]}" | awk '{print $1 * 1000}')
  jq -e .name "$T/imp.json" >/dev/null || { cat "$T/imp.json" >&2; exit 1; }
  echo "$ms" | "$LAT" stats "images.import_$name" | tee -a "$RES" >&2
  size=$(jq .size "$T/imp.json")
  note "image $name: archive $(stat -c %s "${ARCH[$name]}") bytes, $(jq '.layers | length' "$T/imp.json") layers, $size bytes of files on disk, import ${ms} ms"
done
for round in 1 2; do # interleaved, so every body sees the same machine load
  run_lat cycle "api.cycle_host.r$round" $((N / 2)) "$T/sock" '{}'
  for name in "${!ARCH[@]}"; do
    run_lat cycle "api.cycle_image_$name.r$round" $((N / 2)) "$T/sock" "{\"image\":\"$name\"}"
  done
done
# a second sandbox of an image adds only its own (empty) upper layer on its disk tmpfs
before=$(du -sk "$T/state/images/layers" | cut -f1)
for name in "${!ARCH[@]}"; do
  for _ in 1 2; do
    curl -s --unix-socket "$T/sock" -X POST http://x/v1/sandboxes -d "{\"image\":\"$name\"}" >/dev/null
  done
done
after=$(du -sk "$T/state/images/layers" | cut -f1)
note "store layers: ${before} KiB before and ${after} KiB with 2 running sandboxes per image (shared, not copied)"
stop_daemon
cat "$NOTES" >&2
cat "$RES"
