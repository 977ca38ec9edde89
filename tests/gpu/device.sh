#!/usr/bin/env bash
# On a device machine (an NVIDIA GPU, pure cgroup v2, no package registry), after
# tests/gpu/carry.sh here and with ".devcarry" carried: the GPU check (tests/gpu/run.sh) and the
# cgroup v2 subset of the integration suite (limits, OOM, pids, freezer, device program, GPU
# stand-ins, API, pools, forks, commits, volumes, grading) with the bundle's daemon and shim.
# Cases that need this machine's Python SDK over libsbx.so or valgrind are not in the subset.
# Usage: tests/gpu/device.sh [OUT_DIR]   (as root; OUT_DIR default $OUT or /tmp/sbx-device)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$SRC"
OUT=${1:-${OUT:-/tmp/sbx-device}}
mkdir -p "$OUT"
tar xJf .devcarry/bundle.tar.xz || { echo "device: no .devcarry/bundle.tar.xz (tests/gpu/carry.sh)"; exit 2; }
rc=0
PYTHONUNBUFFERED=1 timeout "${GPU_CHECK_TIMEOUT:-240}" tests/gpu/run.sh build-static "$OUT" 2>&1 | tee "$OUT/gpu.txt" || rc=1
SUBSET='test_shim_|test_gpu_devbpf|test_seccomp_filter|test_gpu:gpu_(discovery|driver|exclusive|inventory|release|request)'
SUBSET+='|test_client:(sync_api$|async_200|async_standalone|multi_endpoint|async_files)|test_client_process'
SUBSET+='|test_api:|test_pool:|test_fork:|test_processes:|test_grading:'
SUBSET+='|test_spare:(parked$|parked_cleanup|parked_grading|taken_early)' # parking on v2
SUBSET+='|test_commit:commit_(bad_input|pool_restart_fork|setuid|then_32)|test_volumes:(bad_input|restart|shared|size|writable)'
PATH=$SRC/.devcarry/v2/bin:$PATH timeout "${V2_TIMEOUT:-420}" ./tests/run --build .devcarry/v2 \
  --suite integration --filter "^integration/($SUBSET)" >"$OUT/v2tests.txt" 2>&1 || rc=1
grep -E -A4 '^FAIL' "$OUT/v2tests.txt" | cut -c1-300
echo "device: cgroup v2 subset: $(tail -1 "$OUT/v2tests.txt")"
exit $rc
