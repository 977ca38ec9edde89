# shellcheck shell=bash
# bench/common.sh: what the bench scripts share: the temp dir, the timing helper (bench/lat.c),
# the bubblewrap and crun peers, starting and stopping a daemon on a temp socket, and the cleanup
# of everything a run created (sandboxes, daemon, this run's shims, crun containers, cgroups,
# mounts, files). Sourced; expects ROOT and B; exits unless root. DAEMON_WRAP (an array, e.g.
# valgrind) prefixes the daemon's command line.

[ "$(id -u)" -eq 0 ] || { echo "bench: needs root (daemons, cgroups, mounts)" >&2; exit 1; }
T=$(mktemp -d /tmp/sbxbench.XXXXXX)
chmod 755 "$T" # crun's user namespace (uid 100000) must reach the bundle
RES=$T/results.jsonl
NOTES=$T/notes.md
CGPARENT=sbxbench-$$
DPID=
: >"$RES"
: >"$NOTES"

log() { echo "bench: $*" >&2; }
note() { echo "- $*" >>"$NOTES"; }
loud() {
  printf '\n!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n' >&2
  printf '!!! %s\n' "$@" >&2
  printf '!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!\n\n' >&2
  note "**SKIPPED: $1**"
}

# ---- cleanup: sandboxes, daemon, stray shims of this run, cgroups, mounts, the temp dir ----
stop_daemon() {
  [ -n "$DPID" ] || return 0
  if [ -S "$T/sock" ]; then
    for id in $(curl -s --max-time 10 --unix-socket "$T/sock" http://x/v1/sandboxes |
      grep -o '"id":"sb-[^"]*","state":"[rs][a-z]*"' | cut -d'"' -f4); do
      curl -s --max-time 10 --unix-socket "$T/sock" -X DELETE "http://x/v1/sandboxes/$id" >/dev/null || true
    done
  fi
  kill -TERM "$DPID" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$DPID" 2>/dev/null || true
  wait "$DPID" 2>/dev/null || true
  DPID=
}
cleanup() {
  set +e
  ! declare -F docker_stop >/dev/null || docker_stop # bench/docker.sh's private dockerd
  stop_daemon
  crun_delete_all
  # shims outlive a daemon by design: end the ones this run started (their command line names $T)
  for p in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$T/" && kill -KILL "${p#/proc/}" 2>/dev/null
  done
  sleep 0.2
  grep -F " $T" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done
  for c in /sys/fs/cgroup/*/; do
    find "$c" -depth -type d \( -name "$CGPARENT" -o -path "*/$CGPARENT/*" -o -name 'sbxbench-crun-*' \) \
      -exec rmdir {} \; 2>/dev/null
  done
  rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- the timing helper ----
LAT=$T/lat
# shellcheck disable=SC2046 # pkg-config output is meant to split
cc -std=c17 -O2 -Wall -Wextra -Werror -o "$LAT" bench/lat.c $(pkg-config --cflags --libs libcurl jansson)
run_lat() { "$LAT" "$@" | tee -a "$RES" >&2; }

# The bubblewrap peer: `true` with every namespace and the host's /usr, like the default image
# (BWRAP_RUN: the same without the program); PEER is lat's `-- PEER...` tail (empty where bwrap
# is missing or cannot run here).
# shellcheck disable=SC2034 # BWRAP and PEER: used by the scripts that source this file
{
  BWRAP_RUN=(bwrap --unshare-all --die-with-parent --ro-bind /usr /usr --symlink usr/bin /bin
    --symlink usr/lib /lib --symlink usr/lib64 /lib64 --proc /proc --dev /dev)
  BWRAP=("${BWRAP_RUN[@]}" true)
  PEER=()
  if command -v bwrap >/dev/null && "${BWRAP[@]}" 2>/dev/null; then PEER=(-- "${BWRAP[@]}"); fi
}

# json_argv ARG...: the arguments as a JSON array (a peer's command line for a Python harness)
json_argv() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$@"; }

# The crun peer: crun_bundle DIR ARGS_JSON writes an OCI bundle whose rootfs has the host /usr
# read-only, like our default image, and whose process runs ARGS_JSON (an array) as root of a
# user namespace mapped to 100000; containers named sbxbench-crun-* are cleaned up above.
crun_bundle() {
  mkdir -p "$1/rootfs"/{usr,proc,dev}
  ln -s usr/bin "$1/rootfs/bin"
  ln -s usr/lib "$1/rootfs/lib"
  ln -s usr/lib64 "$1/rootfs/lib64"
  cat >"$1/config.json" <<EOF
{"ociVersion": "1.0.0",
 "process": {"terminal": false, "user": {"uid": 0, "gid": 0}, "args": $2,
   "env": ["PATH=/usr/bin:/bin"], "cwd": "/", "noNewPrivileges": true,
   "capabilities": {"bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []}},
 "root": {"path": "rootfs", "readonly": true},
 "hostname": "crun",
 "mounts": [
   {"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro", "nosuid", "nodev"]},
   {"destination": "/proc", "type": "proc", "source": "proc"},
   {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "mode=755", "size=64k"]}],
 "linux": {
   "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
   "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
   "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"},
                  {"type": "mount"}, {"type": "user"}, {"type": "cgroup"}]}}
EOF
}
# crun_init: whether crun can run peers here (0) or not (1, said loudly), and CRUN_WRAP, what a
# command that runs crun is started under. On a cgroup v1 hybrid host whose v2 mount lists
# controllers, crun 1.8 refuses to run ("drop all controllers from cgroupv2"), so there it is a
# private mount namespace with an empty file bind-mounted over that list. Containers live under
# --root "$CRUN_ROOT"; cleanup deletes any left there.
CRUN_WRAP=()
CRUN_ROOT=$T/crun-state
crun_init() {
  local ctrl=/sys/fs/cgroup/unified/cgroup.controllers
  command -v crun >/dev/null || { loud "crun is not installed (make deps): its rows are skipped"; return 1; }
  if grep -q . "$ctrl" 2>/dev/null && [ "$(stat -f -c %T /sys/fs/cgroup)" = tmpfs ]; then
    : >"$T/empty"
    # shellcheck disable=SC2016 # the inner script's "$1" is bash -c's
    CRUN_WRAP=(unshare -m --propagation private bash -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"'
      _ "$T/empty" "$ctrl")
    note "crun runs in a private mount namespace (\`unshare -m\`) with an empty file bind-mounted over $ctrl (it lists \`$(tr '\n' ' ' <"$ctrl")\`): crun $(crun --version | awk 'NR==1{print $3}') refuses hybrid hosts whose v2 mount has controllers."
  fi
  crun_bundle "$T/crun-check" '["/usr/bin/true"]'
  ${CRUN_WRAP[@]+"${CRUN_WRAP[@]}"} crun --root "$CRUN_ROOT" run --bundle "$T/crun-check" "sbxbench-crun-check-$$" >/dev/null 2>&1 ||
    { loud "crun cannot run a container here: its rows are skipped"; return 1; }
}
crun_delete_all() { # the containers a run left (an interrupted peer), with their cgroups
  [ -d "$CRUN_ROOT" ] || return 0
  local c
  for c in $(crun --root "$CRUN_ROOT" list -q 2>/dev/null); do
    ${CRUN_WRAP[@]+"${CRUN_WRAP[@]}"} crun --root "$CRUN_ROOT" delete -f "$c" >/dev/null 2>&1
  done
}

start_daemon() { # extra daemon flags as arguments
  local run=${RUN_DIR:-$T/run} # RUN_DIR: another run dir (e.g. a tmpfs mounted by the caller)
  [ "$run" != "$T/run" ] || rm -rf "$T/run"
  rm -rf "$T/state" "$T/sock"
  mkdir -p "$run" "$T/state"
  ${DAEMON_WRAP[@]+"${DAEMON_WRAP[@]}"} "$B/sandboxd" --socket "$T/sock" --run-dir "$run" --state-dir "$T/state" \
    --cgroup-parent "$CGPARENT" --seccomp-profile policy/seccomp.json \
    ${SBX_BENCH_DAEMON_ARGS:-} "$@" >>"$T/daemon.log" 2>&1 &
  DPID=$!
  for _ in $(seq "${DAEMON_WAIT_TICKS:-100}"); do
    curl -sf --max-time 1 --unix-socket "$T/sock" http://x/healthz >/dev/null 2>&1 && return 0
    kill -0 "$DPID" 2>/dev/null || break
    sleep 0.1
  done
  stop_daemon
  return 1
}

