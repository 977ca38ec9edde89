# Helpers shared by the reliability tests (sourced, not a test): a private daemon from
# tests/lib/daemon.sh (optionally networked, inside a network namespace held by a `sleep` so that
# nothing touches the host's nftables or links and a restarted daemon finds the same namespace),
# and leak accounting scoped to what the test made.

DAEMON_TAG=rel
source "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh"
DAEMON_LOG_LEVEL=info

rel_setup() { # [net]: temp dirs, cgroup name, cleanup; with "net" a held network namespace
  require_root
  command -v jq >/dev/null || skip "jq is needed"
  command -v python3 >/dev/null || skip "python3 is needed"
  daemon_dirs
  if [ "${1:-}" == net ]; then
    daemon_netns
    echo '{"network": {"enabled": true, "pool4": "10.231.0.0/16", "pool6": ""}}' >"$D/conf.json"
    DAEMON_FLAGS=(--config "$D/conf.json")
  fi
}

daemon_fds() { ls "/proc/$DPID/fd" 2>/dev/null | wc -l; }
daemon_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status"; }
daemon_hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$DPID/status"; }

# Everything this test's daemon made outside itself, one "name count" per line:
# shims (processes whose command line names our run dir), processes in our cgroup tree,
# cgroup directories, host mounts under our temp dir, veths and nft chains in the daemon's
# network namespace (networked setups), run dirs and state files of live sandboxes. The
# parked cgroup of each spare the running daemon holds (spare-<its pid>, docs/DAEMON.md "Spare
# shims"), that spare and its parked init are the daemon's own and not counted; a spare or a
# parked cgroup whose daemon or spare is gone is. Nor is the running daemon's freeze anchor (v1:
# freeze-anchor-<its pid>, sandboxd/core/cgroup.c); a killed daemon's is counted.
leak_counts() {
  local shims=0 procs=0 cgdirs=0 mounts links=0 chains=0 p
  local cmd spares="/daemon\$|/freeze-anchor-${DPID:-0}\$" own=' '
  # the running daemon's spares and their parked inits (whose argv is the spare's, naming
  # $D/run/spare-root) are its own too
  for p in $(ps -o pid= --ppid "${DPID:-0}" 2>/dev/null); do
    spares+="|/spare-$p\$"
    own+="$p $(ps -o pid= --ppid "$p" | tr '\n' ' ') "
  done
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ "$cmd" == *sbx-shim\ spare* && "$own" == *" ${p#/proc/} "* ]] && continue
    [[ "$cmd" == *sbx-shim*" $D/run"* ]] && shims=$((shims + 1))
  done
  for c in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$c" ] || continue
    cgdirs=$((cgdirs + $(find "$c" -mindepth 1 -type d | grep -Evc "$spares")))
    procs=$((procs + $(find "$c" -mindepth 1 -name cgroup.procs -path '*sb-*' -exec cat {} + 2>/dev/null | wc -l)))
  done
  mounts=$(grep -c " $D" /proc/self/mountinfo)
  if [ -n "$NSPID" ]; then
    links=$(nsenter --net=/proc/$NSPID/ns/net ip -o link | grep -vc ': lo:')
    chains=$(nsenter --net=/proc/$NSPID/ns/net nft list table inet sandboxd 2>/dev/null | grep -c 'chain sbx')
  fi
  echo "shims $shims"
  echo "sandbox_procs $procs"
  echo "sandbox_cgroups $cgdirs"
  echo "mounts $mounts"
  echo "links $links"
  echo "nft_sandbox_chains $chains"
  echo "run_dirs $(ls "$D/run/sandboxes" 2>/dev/null | wc -l)"
}

# netns inodes of the given init pids (to check later that none survives anywhere)
netns_of() { local p; for p in "$@"; do readlink "/proc/$p/ns/net" 2>/dev/null; done; }
now_ticks() { # the kernel's clock ticks since boot, as a process's start time counts them
  "$PY" -c 'print(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19])'
}
netns_alive() { # SINCE (now_ticks) inode strings... -> prints those still held by a process
  # started before SINCE. The kernel reuses namespace numbers: a newer process may hold a new
  # namespace with an old number, and no process can join a namespace that had none left.
  local since=$1; shift
  [ $# -eq 0 ] && return 0
  "$PY" - "$since" "$@" <<'PY'
import os, sys
since, want, held = int(sys.argv[1]), set(sys.argv[2:]), set()
for p in filter(str.isdigit, os.listdir("/proc")):
    try:
        ns = os.readlink("/proc/%s/ns/net" % p)
        start = int(open("/proc/%s/stat" % p).read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        continue
    if ns in want and start <= since:
        held.add(ns)
print("\n".join(sorted(held)))
PY
}

wait_no_leaks() { # seconds: until every count is 0
  local i out
  for i in $(seq $(( $1 * 5 ))); do
    out=$(leak_counts)
    echo "$out" | awk '$2 != 0 {bad=1} END {exit bad}' && return 0
    sleep 0.2
  done
  echo "$out" >&2
  fail "resources left behind (above)"
}

PY="${SBX_PYTHON:-python3}"
