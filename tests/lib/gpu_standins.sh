# Stand-in NVIDIA devices for GPU tests on machines without a GPU (sourced after daemon.sh;
# never a test itself). `gpu_standins CASE` re-runs the case in a private mount namespace
# (unshare -m) where $SN is a tmpfs holding nvidia0..nvidia3 (c 195:0..3) and nvidiactl
# (c 195:255), made with mknod there: the host's /dev is never touched. The host has no nvidia
# driver, so opening one gives ENXIO (where a device cgroup's refusal is EPERM).
gpu_standins() { # CASE
  if [ -z "${SBX_GPU_NS:-}" ]; then
    require_root
    command -v unshare >/dev/null || skip "unshare (util-linux) is needed"
    local t rc=0
    t=$(mktemp -d /tmp/sbx-gpu-standins.XXXXXX)
    SBX_GPU_NS=$t unshare -m --propagation private bash "$0" "$1" || rc=$?
    rm -rf "$t"
    exit $rc
  fi
  SN=$SBX_GPU_NS
  mount -t tmpfs -o mode=0755,size=4m sbx-gpu-standins "$SN" || fail "mount the stand-ins' tmpfs"
  local i
  for i in 0 1 2 3; do mknod -m 0666 "$SN/nvidia$i" c 195 "$i" || fail "mknod nvidia$i"; done
  mknod -m 0666 "$SN/nvidiactl" c 195 255 || fail "mknod nvidiactl"
}
