# Helpers shared by the reliability tests (sourced, not a test): a private daemon on temporary
# dirs with a unique cgroup parent (optionally networked, inside a network namespace held by a
# `sleep` so that nothing touches the host's nftables or links and a restarted daemon finds the
# same namespace), HTTP over its socket, and leak accounting scoped to what the test made.

D='' DPID='' SOCK='' CG='' CODE='' BODY='' NSPID='' DAEMON_WRAP=()

rel_cleanup() {
  set +e
  if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
    for id in $(curl -s --max-time 5 --unix-socket "$SOCK" http://sd/v1/sandboxes | jq -r '.[] | select(.state != "ended") | .id' 2>/dev/null); do
      curl -s --max-time 5 --unix-socket "$SOCK" -X DELETE "http://sd/v1/sandboxes/$id" >/dev/null
    done
    for _ in $(seq 100); do [ -z "$(ls -A "$D/run/sandboxes" 2>/dev/null)" ] && break; sleep 0.1; done
    kill -TERM "$DPID"; wait "$DPID" 2>/dev/null
  fi
  for dir in "$D"/run/sandboxes/*/; do
    [ -d "$dir" ] && timeout 20 "$(bin sbx-shim)" cleanup "${dir%/}" >/dev/null 2>&1
  done
  for c in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -n "$CG" ] && [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
  done
  [ -n "$NSPID" ] && kill "$NSPID" 2>/dev/null && wait "$NSPID" 2>/dev/null
  local bad=0
  if [ -n "$D" ] && grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$D/log" 2>/dev/null; then
    grep -E -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$D/log" >&2
    bad=1
  fi
  if [ -n "$D" ]; then
    grep -q " $D" /proc/self/mountinfo && awk -v d="$D" '$5 ~ "^"d {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
    rm -rf "$D"
  fi
  [ $bad == 0 ] || { echo "FAIL: the daemon reported sanitizer errors" >&2; exit 1; }
}

rel_setup() { # [net]: temp dirs, cgroup name, trap; with "net" a held network namespace
  require_root
  command -v jq >/dev/null || skip "jq is needed"
  command -v python3 >/dev/null || skip "python3 is needed"
  D=$(mktemp -d /tmp/sbx-rel.XXXXXX)
  CG="sbxtest-rel-$$-$RANDOM"
  SOCK="$D/sd.sock"
  trap rel_cleanup EXIT
  if [ "${1:-}" == net ]; then
    unshare --net sleep infinity &
    NSPID=$!
    for _ in $(seq 50); do [ "$(readlink /proc/$NSPID/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.02; done
    nsenter --net=/proc/$NSPID/ns/net ip link set lo up
    DAEMON_WRAP=(nsenter "--net=/proc/$NSPID/ns/net")
    echo '{"network": {"enabled": true, "pool4": "10.231.0.0/16", "pool6": ""}}' >"$D/conf.json"
  fi
}

start_daemon() { # [extra flags...]
  local conf=()
  [ -f "$D/conf.json" ] && conf=(--config "$D/conf.json")
  "${DAEMON_WRAP[@]}" "$(bin sandboxd)" "${conf[@]}" --socket "$SOCK" --run-dir "$D/run" --state-dir "$D/state" \
    --cgroup-parent "$CG" --seccomp-profile "$SBX_SRC_DIR/policy/seccomp.json" \
    --shim "$(bin sbx-shim)" --log-level info "$@" >>"$D/log" 2>&1 &
  DPID=$!
  for _ in $(seq 200); do
    curl -s --max-time 1 --unix-socket "$SOCK" http://sd/healthz >/dev/null 2>&1 && return 0
    kill -0 "$DPID" 2>/dev/null || { tail -30 "$D/log" >&2; fail "daemon exited at start"; }
    sleep 0.05
  done
  fail "daemon did not answer /healthz"
}

req() { # METHOD PATH [curl args...]: sets CODE and BODY
  local m=$1 p=$2; shift 2
  CODE=$(curl -s --max-time 30 --unix-socket "$SOCK" -X "$m" -o "$D/body" -D "$D/headers" \
    -w '%{http_code}' "$@" "http://sd$p") || true
  BODY=$(cat "$D/body" 2>/dev/null)
}
expect() { # CODE [jq-expression that must be true]
  [ "$CODE" == "$1" ] || { tail -20 "$D/log" >&2; fail "expected HTTP $1, got $CODE: $BODY"; }
  [ -z "${2:-}" ] || echo "$BODY" | jq -e "$2" >/dev/null || fail "expected $2 in: $BODY"
}
create() { # [json] -> ID
  req POST /v1/sandboxes -d "${1:-{\}}"
  expect 201 '.state == "running"'
  ID=$(echo "$BODY" | jq -r .id)
}

daemon_fds() { ls "/proc/$DPID/fd" 2>/dev/null | wc -l; }
daemon_rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status"; }
daemon_hwm_kb() { awk '/^VmHWM:/ {print $2}' "/proc/$DPID/status"; }

# Everything this test's daemon made outside itself, one "name count" per line:
# shims (processes whose command line names our run dir), processes in our cgroup tree,
# cgroup directories, host mounts under our temp dir, veths and nft chains in the daemon's
# network namespace (networked setups), run dirs and state files of live sandboxes.
leak_counts() {
  local shims=0 procs=0 cgdirs=0 mounts links=0 chains=0 p
  local cmd
  for p in /proc/[0-9]*; do
    cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
    [[ "$cmd" == *sbx-shim*" $D/run"* ]] && shims=$((shims + 1))
  done
  for c in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
    [ -d "$c" ] || continue
    cgdirs=$((cgdirs + $(find "$c" -mindepth 1 -type d | grep -vc '/daemon$')))
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
netns_alive() { # inode strings... -> prints those still held by some process
  local want="$*" p
  [ -z "$want" ] && return 0
  for p in /proc/[0-9]*/ns/net; do readlink "$p" 2>/dev/null; done | sort -u | grep -Fx -f <(printf '%s\n' "$@") || true
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
