#!/usr/bin/env bash
# GPU sandboxes without a GPU (core/gpu.c, shim/gpu.c): every case runs in a private mount
# namespace (unshare -m) with stand-in NVIDIA nodes (mknod c 195:N on a tmpfs there; the host
# has no nvidia driver, so opening one gives ENXIO, where the device cgroup's refusal is EPERM)
# and a daemon whose config inventory names them. The host's real /dev is never touched.

DAEMON_TAG=gpu
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/../lib/gpu_standins.sh"

# Re-run case $1 in a private mount namespace with the stand-ins in $SN (gpu_standins.sh) and a
# config inventory naming them.
private_ns() {
  command -v python3 >/dev/null || skip "python3 is needed"
  gpu_standins "$1"
  daemon_dirs
  jq -n --arg sn "$SN" '{gpus: [range(4) | {device: "\($sn)/nvidia\(.)", uuid: "GPU-test-\(.)",
      memory: "80Gi", bus_id: "00000000:0\(.):00.0"}], gpu_control: ["\($sn)/nvidiactl"],
      price: {gpu_hour_usd: 3.6}}' >"$D/config.json"
  DAEMON_FLAGS=(--config "$D/config.json")
}

gpus_free() { req GET /v1/info; expect 200; echo "$BODY" | jq -r .gpus.free; }

# errno of opening PATH by a process in sandbox ID's device cgroup (joined from outside)
open_errno_in_cgroup() {
  local procs
  if [ -d "/sys/fs/cgroup/devices/$CG/$1" ]; then
    procs=/sys/fs/cgroup/devices/$CG/$1/cgroup.procs
  else
    procs=$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*$CG*/$1" 2>/dev/null | head -1 || true)/cgroup.procs
  fi
  python3 -c '
import os, sys
open(sys.argv[1], "w").write(str(os.getpid()))
try:
    os.close(os.open(sys.argv[2], os.O_RDWR)); print(0)
except OSError as e:
    print(e.errno)' "$procs" "$2"
}

test_gpu_inventory_and_inside() {
  private_ns gpu_inventory_and_inside
  start_daemon
  req GET /v1/info
  expect 200 '.gpus.total == 4 and .gpus.free == 4 and .gpus.devices[0].uuid == "GPU-test-0"
    and .gpus.devices[1].memory == 85899345920 and .price.gpu_hour_usd == 3.6'
  [ "$(metric 'sandboxd_gpus{state="total"}')" == 4 ] || fail "metrics: total GPUs"
  create '{"gpus":1,"memory":"128Mi"}'
  local id=$ID
  req GET "/v1/sandboxes/$id"; expect 200 '.gpus == ["GPU-test-0"]'
  [ "$(gpus_free)" == 3 ] || fail "one GPU should be taken"
  [ "$(metric 'sandboxd_gpus{state="free"}')" == 3 ] || fail "metrics: free GPUs"
  req GET /v1/info; expect 200 ".gpus.devices[0].sandbox == \"$id\" and (.gpus.devices[1] | has(\"sandbox\") | not)"
  # inside: only its node and the control node, the env, and the driver answers ENXIO (allowed)
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","ls /dev | grep nvidia; echo NV=$NVIDIA_VISIBLE_DEVICES CUDA=$CUDA_VISIBLE_DEVICES; python3 -c \"import os\ntry: os.open(\\\"/dev/nvidia0\\\", os.O_RDWR)\nexcept OSError as e: print(\\\"errno\\\", e.errno)\""]}'
  expect 200 '.exit_code == 0'
  local out; out=$(echo "$BODY" | jq -r .stdout)
  [ "$(echo "$out" | grep -c '^nvidia')" == 2 ] || fail "sandbox /dev should hold nvidia0 and nvidiactl only: $out"
  grep -qx nvidia0 <<<"$out" && grep -qx nvidiactl <<<"$out" || fail "nodes: $out"
  grep -q 'NV=GPU-test-0 CUDA=GPU-test-0' <<<"$out" || fail "env: $out"
  grep -q 'errno 6' <<<"$out" || fail "the allocated node should reach the (absent) driver: $out"
  # the device cgroup: the allocated node passes (ENXIO), an unallocated one is refused (EPERM)
  [ "$(open_errno_in_cgroup "$id" "$SN/nvidia0")" == 6 ] || fail "allocated node refused by the cgroup"
  [ "$(open_errno_in_cgroup "$id" "$SN/nvidia1")" == 1 ] || fail "unallocated node not refused by the cgroup"
  [ "$(open_errno_in_cgroup "$id" "$SN/nvidiactl")" == 6 ] || fail "control node refused by the cgroup"
  # a sandbox without GPUs sees no nvidia node
  create '{"memory":"64Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","ls /dev | grep -c nvidia || true"]}'
  expect 200 '.stdout == "0\n"'
  req DELETE "/v1/sandboxes/$id"; expect 204
  [ "$(gpus_free)" == 4 ] || fail "delete should free the GPU"
}

test_gpu_request_validation() {
  private_ns gpu_request_validation
  start_daemon
  local bad
  for bad in '-1' '65' '"2"' '1.5' '[]' '[1]' '["GPU-test-0","GPU-test-0"]' '["a b"]' '{}' 'true'; do
    req POST /v1/sandboxes -d "{\"gpus\":$bad}"
    expect 400 '.code == "invalid_argument" and (.message | startswith("gpus"))'
  done
  req POST /v1/sandboxes -d '{"gpus":5}'; expect 409 '.code == "gpu_unavailable" and (.message | test("4 free"))'
  req POST /v1/sandboxes -d '{"gpus":["GPU-nope"]}'; expect 409 '.code == "gpu_unavailable"'
  create '{"gpus":["GPU-test-3","GPU-test-1"],"memory":"64Mi"}'
  req GET "/v1/sandboxes/$ID"; expect 200 '.gpus == ["GPU-test-3","GPU-test-1"]'
  req POST /v1/sandboxes -d '{"gpus":["GPU-test-1"]}'; expect 409 '.code == "gpu_unavailable" and (.message | test("in use"))'
  req POST /v1/sandboxes -d '{"gpus":3}'; expect 409 '.code == "gpu_unavailable"'
  req POST "/v1/sandboxes/$ID/fork" -d '{"count":1}'; expect 400 '.message | startswith("gpus")'
  create '{"gpus":0,"memory":"64Mi"}'; req GET "/v1/sandboxes/$ID"; expect 200 '.gpus == []'
  [ "$(gpus_free)" == 2 ] || fail "two GPUs should be held"
}

TEST_TIMEOUT_gpu_exclusive_64=60
test_gpu_exclusive_64() {
  private_ns gpu_exclusive_64
  start_daemon --max-sandboxes 8
  local i pids=()
  mkdir -p "$D/par"
  for i in $(seq 64); do
    curl -s --max-time 60 --unix-socket "$SOCK" -o "$D/par/$i.json" -w '%{http_code}\n' -X POST \
      http://sd/v1/sandboxes -d '{"gpus":1,"memory":"64Mi"}' >"$D/par/$i.code" &
    pids+=($!)
  done
  wait "${pids[@]}" # (not a bare wait: the daemon is a child too)
  local ok full
  ok=$(cat "$D"/par/*.code | grep -c '^201$' || true)
  full=$(jq -r .code "$D"/par/*.json | grep -c '^gpu_unavailable$' || true)
  [ "$ok" == 4 ] || fail "exactly 4 creates should get a GPU, got $ok"
  [ "$full" == 60 ] || fail "the other 60 should get gpu_unavailable, got $full"
  [ "$(gpus_free)" == 0 ] || fail "every GPU should be held"
  req GET /v1/info; expect 200 '[.gpus.devices[].sandbox] | unique | length == 4'
  jq -r 'select(.id) | .gpus[0]' "$D"/par/*.json | sort -u | wc -l | grep -qx 4 || fail "two sandboxes share a GPU"
}

TEST_TIMEOUT_gpu_release=90
test_gpu_release() {
  private_ns gpu_release
  start_daemon
  # (its 1 s lifetime set once all four are seen held: a slow machine's creates take their time)
  create '{"gpus":1,"memory":"64Mi","timeout":"1m"}'; local t=$ID
  create '{"gpus":2,"memory":"64Mi"}'; local k=$ID
  # 3.6 $/GPU-hour: a 0.005 $ cap is reached after about 5 s (from here)
  create '{"gpus":1,"memory":"64Mi","max_cost_usd":0.005}'; local c=$ID
  [ "$(gpus_free)" == 0 ] || fail "all four should be held"
  req POST "/v1/sandboxes/$t/timeout" -d '{"timeout":"1s"}'; expect 200
  req_until 20 '.state == "ended"' GET "/v1/sandboxes/$t"; expect 200 '.end.reason == "lifetime_exceeded"'
  req_until 20 '.state == "ended"' GET "/v1/sandboxes/$c"; expect 200 '.end.reason == "cost_limit" and .cost_usd >= 0.005'
  [ "$(gpus_free)" == 2 ] || fail "timeout and cost cap should free their GPUs"
  # kill -9 and restart: the allocation comes back from the state records
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  start_daemon
  req GET "/v1/sandboxes/$k"; expect 200 '.state == "running" and (.gpus | length) == 2'
  [ "$(gpus_free)" == 2 ] || fail "after the restart two GPUs should still be held"
  req POST /v1/sandboxes -d '{"gpus":3}'; expect 409 '.code == "gpu_unavailable"'
  req DELETE "/v1/sandboxes/$k"; expect 204
  [ "$(gpus_free)" == 4 ] || fail "delete after the restart should free both"
  stop_daemon; start_daemon
  [ "$(gpus_free)" == 4 ] || fail "an ended sandbox holds nothing after a restart"
}

test_gpu_discovery() {
  private_ns gpu_discovery
  # a tree like the host's: ROOT/dev/nvidia*, control nodes, /proc/driver/nvidia/gpus/*/information
  local r=$SN/root i
  mkdir -p "$r/dev/nvidia-caps" "$r/proc/driver/nvidia/gpus/0000:41:00.0"
  for i in 0 1; do mknod -m 0666 "$r/dev/nvidia$i" c 195 "$i"; done
  mknod -m 0666 "$r/dev/nvidiactl" c 195 255
  mknod -m 0666 "$r/dev/nvidia-uvm" c 510 0
  mknod -m 0666 "$r/dev/nvidia-caps/nvidia-cap1" c 511 1
  printf 'Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-5d8e0c3a-0000-1111-2222-333344445555\nBus Location: \t 0000:41:00.0\nDevice Minor: \t 1\n' \
    >"$r/proc/driver/nvidia/gpus/0000:41:00.0/information"
  # memory from nvidia-smi (a stand-in that answers the daemon's query only)
  mkdir -p "$r/usr/bin"
  printf '#!/bin/sh\n[ "$*" = "--query-gpu=uuid,memory.total --format=csv,noheader,nounits" ] || exit 1\necho "GPU-5d8e0c3a-0000-1111-2222-333344445555, 143771"\necho "GPU-not-here, 1"\n' \
    >"$r/usr/bin/nvidia-smi"
  chmod 0755 "$r/usr/bin/nvidia-smi"
  DAEMON_FLAGS=(--gpu-root "$r")
  start_daemon
  req GET /v1/info
  expect 200 '.gpus.total == 2 and ([.gpus.devices[].uuid] | sort) == ["GPU-195-0","GPU-5d8e0c3a-0000-1111-2222-333344445555"]
    and ([.gpus.devices[] | select(.bus_id == "0000:41:00.0")] | length) == 1
    and ([.gpus.devices[] | select(.uuid | startswith("GPU-5d8e")) | .memory] == [143771 * 1048576])
    and ([.gpus.devices[] | select(.uuid == "GPU-195-0") | .memory] == [null])'
  create '{"gpus":2,"memory":"64Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","cd /dev && ls -d nvidia* nvidia-caps/*"]}'
  expect 200 '.stdout == "nvidia-caps\nnvidia-caps/nvidia-cap1\nnvidia-uvm\nnvidia0\nnvidia1\nnvidiactl\n"'
  req POST /v1/sandboxes -d '{"gpus":1}'; expect 409 '.code == "gpu_unavailable"'
}

# A driver root of stand-ins (the daemon's --gpu-root): two small shared libraries with the
# driver's sonames (built here with cc), their ld.so cache (ldconfig -r) and an nvidia-smi.
driver_root() { # DIR
  local r=$1 lib=$1/usr/lib/x86_64-linux-gnu
  command -v cc >/dev/null || skip "cc is needed"
  mkdir -p "$lib" "$r/usr/bin" "$r/etc"
  echo 'int cuInit(unsigned f) { return (int)f; }' >"$D/stub.c"
  cc -shared -fPIC -o "$lib/libcuda.so.535.54.03" -Wl,-soname,libcuda.so.1 "$D/stub.c" || fail "cc libcuda"
  cc -shared -fPIC -o "$lib/libnvidia-ml.so.535.54.03" -Wl,-soname,libnvidia-ml.so.1 "$D/stub.c" ||
    fail "cc libnvidia-ml"
  printf '#!/usr/bin/sh\necho stand-in nvidia-smi\n' >"$r/usr/bin/nvidia-smi"
  chmod 0755 "$r/usr/bin/nvidia-smi"
  : >"$r/etc/ld.so.conf"
  ldconfig -r "$r" || fail "ldconfig -r $r"
  ldconfig -p -C "$r/etc/ld.so.cache" | grep -q 'libcuda.so.1 .*=> /usr/lib/x86_64-linux-gnu/libcuda.so.1' ||
    fail "the stand-in cache: $(ldconfig -p -C "$r/etc/ld.so.cache")"
}

TEST_TIMEOUT_gpu_driver_files_in_images=90
test_gpu_driver_files_in_images() { # a store image's GPU sandbox gets the driver's files, read-only
  private_ns gpu_driver_files_in_images
  local r=$SN/driver lib=/usr/lib/x86_64-linux-gnu
  [ "$(uname -m)" == x86_64 ] || skip "the stand-in driver's paths are x86_64's"
  driver_root "$r"
  chmod 0666 "$r$lib"/lib*.so.* # anyone may write them: only the read-only mounts refuse
  start_daemon --gpu-root "$r"
  grep -q 'driver_files=5' "$D/log" || fail "the daemon should find 5 driver files: $(grep gpus "$D/log")"
  python3 "$(dirname "$0")/mkimage.py" rootfs "$D/img.tar" || fail "mkimage"
  req POST "/v1/images?name=t-gpu" -H 'Content-Type: application/x-tar' --data-binary @"$D/img.tar"
  expect 201
  local size want
  size=$(stat -c %s "$r$lib/libcuda.so.535.54.03")
  create '{"image":"t-gpu","gpus":1,"memory":"64Mi"}'
  local gpu=$ID
  # at the toolkit's paths: the soname and the file it names, nvidia-smi runs
  req POST "/v1/sandboxes/$gpu/exec" -d "{\"argv\":[\"sh\",\"-c\",\"stat -c '%n %s' $lib/libcuda.so.1 $lib/libcuda.so.535.54.03 $lib/libnvidia-ml.so.1; /usr/bin/nvidia-smi\"]}"
  want="$lib/libcuda.so.1 $size
$lib/libcuda.so.535.54.03 $size
$lib/libnvidia-ml.so.1 $(stat -c %s "$r$lib/libnvidia-ml.so.535.54.03")
stand-in nvidia-smi
"
  expect 200 '.exit_code == 0'
  [ "$(jq -r .stdout <<<"$BODY")" == "${want%$'\n'}" ] || fail "driver files in the sandbox: $BODY"
  # read-only mounts (and nosuid, nodev)
  req POST "/v1/sandboxes/$gpu/exec" -d "{\"argv\":[\"sh\",\"-c\",\"echo x 2>&1 >> $lib/libcuda.so.1; cat /proc/self/mountinfo\"]}"
  expect 200
  grep -q 'Read-only file system' <<<"$(jq -r .stdout <<<"$BODY")" || fail "a driver file was writable: $BODY"
  [ "$(jq -r .stdout <<<"$BODY" | grep -c " $lib/lib.*ro,nosuid,nodev")" == 4 ] ||
    fail "the driver files' mounts: $(jq -r .stdout <<<"$BODY" | grep nvidia)"
  [ "$(stat -c %s "$r$lib/libcuda.so.535.54.03")" == "$size" ] || fail "the host's file changed"
  # a sandbox of the same image without a GPU sees none of them
  create '{"image":"t-gpu","memory":"64Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d "{\"argv\":[\"sh\",\"-c\",\"ls $lib/libcuda.so.1 $lib/libnvidia-ml.so.1 /usr/bin/nvidia-smi 2>/dev/null; echo \$?\"]}"
  expect 200 '.stdout == "2\n"'
}

# A driver kept outside the image's library directory (/usr/local/nvidia/lib64 and .../bin on
# GKE-style hosts and the device machine): a store image's GPU sandbox gets its libraries in
# /usr/lib/<triplet>, where the image's loader looks without a cache, and nvidia-smi (found in
# the bin directory beside the driver's lib64, not on the daemon's PATH) in /usr/bin, as the
# toolkit does. The stand-in nvidia-smi is an ELF that needs libnvidia-ml.so.1, so it runs only
# where the image's loader finds the driver's library.
TEST_TIMEOUT_gpu_driver_elsewhere_in_images=90
test_gpu_driver_elsewhere_in_images() {
  private_ns gpu_driver_elsewhere_in_images
  command -v cc >/dev/null || skip "cc is needed"
  [ "$(uname -m)" == x86_64 ] || skip "the stand-in driver's paths are x86_64's"
  local r=$SN/driver nv=/usr/local/nvidia lib=/usr/lib/x86_64-linux-gnu
  mkdir -p "$r$nv/lib64" "$r$nv/bin" "$r/etc"
  echo 'const char *nvmlStandIn(void) { return "stand-in nvml"; }' >"$D/ml.c"
  echo 'int cuInit(unsigned f) { return (int)f; }' >"$D/cuda.c"
  printf '#include <stdio.h>\nconst char *nvmlStandIn(void);\nint main(void) { puts(nvmlStandIn()); return 0; }\n' >"$D/smi.c"
  cc -shared -fPIC -o "$r$nv/lib64/libnvidia-ml.so.580.1" -Wl,-soname,libnvidia-ml.so.1 "$D/ml.c" &&
    cc -shared -fPIC -o "$r$nv/lib64/libcuda.so.580.1" -Wl,-soname,libcuda.so.1 "$D/cuda.c" &&
    cc -o "$r$nv/bin/nvidia-smi" "$D/smi.c" "$r$nv/lib64/libnvidia-ml.so.580.1" || fail "cc the stand-ins"
  echo "$nv/lib64" >"$r/etc/ld.so.conf"
  ldconfig -r "$r" || fail "ldconfig -r $r"
  ldconfig -p -C "$r/etc/ld.so.cache" | grep -q "libcuda.so.1 (libc6,x86-64) => $nv/lib64/libcuda.so.1" ||
    fail "the stand-in cache: $(ldconfig -p -C "$r/etc/ld.so.cache")"
  start_daemon --gpu-root "$r"
  grep -q 'driver_files=5' "$D/log" || fail "the daemon should find 5 driver files: $(grep gpus "$D/log")"
  python3 "$(dirname "$0")/mkimage.py" rootfs "$D/img.tar" || fail "mkimage"
  req POST "/v1/images?name=t-gpu" -H 'Content-Type: application/x-tar' --data-binary @"$D/img.tar"
  expect 201
  create '{"image":"t-gpu","gpus":1,"memory":"64Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d "{\"argv\":[\"sh\",\"-c\",\"nvidia-smi; stat -c '%n %s' $lib/libcuda.so.1 $lib/libcuda.so.580.1 $lib/libnvidia-ml.so.1; ls $nv 2>/dev/null || echo no-$nv\"]}"
  expect 200 '.exit_code == 0'
  local want
  want="stand-in nvml
$lib/libcuda.so.1 $(stat -c %s "$r$nv/lib64/libcuda.so.580.1")
$lib/libcuda.so.580.1 $(stat -c %s "$r$nv/lib64/libcuda.so.580.1")
$lib/libnvidia-ml.so.1 $(stat -c %s "$r$nv/lib64/libnvidia-ml.so.580.1")
no-$nv"
  [ "$(jq -r .stdout <<<"$BODY")" == "$want" ] || fail "the driver in the store image: $BODY"
  # an image without the multiarch directory (RHEL, UBI): the libraries in /usr/lib64
  MKIMAGE_LIB64=1 python3 "$(dirname "$0")/mkimage.py" rootfs "$D/img64.tar" || fail "mkimage lib64"
  req POST "/v1/images?name=t-gpu64" -H 'Content-Type: application/x-tar' --data-binary @"$D/img64.tar"
  expect 201
  create '{"image":"t-gpu64","gpus":1,"memory":"64Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d "{\"env\":{\"LD_LIBRARY_PATH\":\"/usr/lib64\"},\"argv\":[\"sh\",\"-c\",\"nvidia-smi; stat -c '%n %s' /usr/lib64/libcuda.so.1 /usr/lib64/libnvidia-ml.so.1; ls -d $lib 2>/dev/null || echo no-$lib\"]}"
  expect 200 '.exit_code == 0'
  want="stand-in nvml
/usr/lib64/libcuda.so.1 $(stat -c %s "$r$nv/lib64/libcuda.so.580.1")
/usr/lib64/libnvidia-ml.so.1 $(stat -c %s "$r$nv/lib64/libnvidia-ml.so.580.1")
no-$lib"
  [ "$(jq -r .stdout <<<"$BODY")" == "$want" ] || fail "the driver in a lib64 image: $BODY"
}

# The host image's /usr comes with the mounts under it, all read-only, nosuid, nodev: a driver
# installed on a mount of its own (/usr/local/nvidia on some GPU hosts) is seen in the sandbox.
# The stand-in mount is a tmpfs on /usr/local/src made in the private mount namespace only.
test_gpu_driver_mount_under_usr() {
  private_ns gpu_driver_mount_under_usr
  local m=/usr/local/src # Debian's base-files makes it; else /usr/local itself (in this namespace)
  [ -d "$m" ] || m=/usr/local
  # a file anyone may write on a tmpfs anyone may write: only the read-only mount refuses
  mount -t tmpfs -o mode=1777,size=1m sbx-test-driver "$m" || fail "mount a tmpfs on $m"
  echo stand-in >"$m/libcuda.so.1"
  chmod 0666 "$m/libcuda.so.1"
  # a kernel interface mounted under /usr (a build chroot's /proc) stays out of the sandbox; a
  # space in its name (mountinfo writes \040) must not keep it in
  mkdir "$m/pro c" && mount -t proc proc "$m/pro c" || fail "mount a proc on $m/pro c"
  start_daemon
  create '{"gpus":1,"memory":"64Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d "{\"argv\":[\"sh\",\"-c\",\"cat $m/libcuda.so.1; echo x 2>&1 >> $m/libcuda.so.1; touch $m/new 2>&1; ls '$m/pro c' | wc -l; grep ' $m' /proc/self/mountinfo\"]}"
  expect 200 '.exit_code == 0'
  local out; out=$(jq -r .stdout <<<"$BODY")
  [ "$(head -1 <<<"$out")" == stand-in ] || fail "the mount under /usr inside: $BODY"
  [ "$(grep -c 'Read-only file system' <<<"$out")" == 2 ] || fail "writes under /usr: $out"
  [ "$(sed -n 4p <<<"$out")" == 0 ] || fail "the host's proc under /usr came along: $out"
  grep -q " $m ro,nosuid,nodev.* tmpfs sbx-test-driver " <<<"$out" || fail "its mount: $out"
  ! grep -q " $m/pro\\\\040c " <<<"$out" || fail "a proc mount under /usr in the sandbox: $out"
  [ "$(cat "$m/libcuda.so.1")" == stand-in ] && [ ! -e "$m/new" ] || fail "the host's files changed"
  create '{"memory":"64Mi"}' # a sandbox without GPUs sees the host's /usr the same way
  req POST "/v1/sandboxes/$ID/exec" -d "{\"argv\":[\"cat\",\"$m/libcuda.so.1\"]}"
  expect 200 '.stdout == "stand-in\n"'
}

# libsbx (CLI, Python SDK) over two daemons: a has 1 GPU, b has 3; a create asking for GPUs
# goes where enough are free
test_gpu_client_placement() {
  private_ns gpu_client_placement
  local n
  for n in a b; do
    daemon_use "$n"
    jq -n --arg sn "$SN" --arg n "$n" '{gpus: [(if $n == "a" then [0] else [1, 2, 3] end)[] |
      {device: "\($sn)/nvidia\(.)", uuid: "GPU-test-\(.)"}], gpu_control: ["\($sn)/nvidiactl"]}' >"$D/config.json"
    DAEMON_FLAGS=(--config "$D/config.json")
    daemon_start "$n"
  done
  local hosts="${DAEMON_SOCK[a]},${DAEMON_SOCK[b]}" sbx=$SBX_BUILD_DIR/sbx id
  id=$("$sbx" --host "$hosts" create --gpus 2 --memory 64Mi) || fail "sbx create --gpus 2"
  daemon_use b; req GET "/v1/sandboxes/$id"; expect 200 '(.gpus | length) == 2'
  # one GPU left on each: two creates of 1 take both (each fresh client sees where one is free)
  "$sbx" --host "$hosts" create --gpus 1 --memory 64Mi >/dev/null || fail "sbx create --gpus 1"
  "$sbx" --host "$hosts" create --gpus 1 --memory 64Mi >/dev/null || fail "sbx create --gpus 1 (2)"
  req GET /v1/info; expect 200 '.gpus.free == 0'
  daemon_use a; req GET /v1/info; expect 200 '.gpus.free == 0'
  local out rc=0
  out=$("$sbx" --host "$hosts" create --gpus 1 2>&1) || rc=$?
  [ "$rc" != 0 ] && grep -q "free on this node" <<<"$out" || fail "no GPU left anywhere: rc $rc, $out"
  "$sbx" --host "$hosts" create --gpus x 2>/dev/null && fail "--gpus x accepted"
  # the Python SDK sends gpus too (ctypes over libsbx)
  req GET /v1/sandboxes; local mine; mine=$(echo "$BODY" | jq -r '.[] | select(.gpus == ["GPU-test-0"]) | .id')
  req DELETE "/v1/sandboxes/$mine"; expect 204
  env $(asan_env) SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" PYTHONPATH="$SBX_SRC_DIR/python" PYTHONDONTWRITEBYTECODE=1 \
    SBX_HOST="unix:${DAEMON_SOCK[a]}" python3 -c '
from sandboxd import Sandbox
sb = Sandbox.create(gpus=1, memory="64Mi")
print(sb.id)
' >"$D/py.out" 2>&1 || { cat "$D/py.out" >&2; fail "Sandbox.create(gpus=1)"; }
  req GET /v1/info; expect 200 '.gpus.free == 0 and .gpus.devices[0].sandbox != null'
}

source "$(dirname "$0")/../lib/lib.sh"
