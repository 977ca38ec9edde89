# The one way shell tests start a real sandboxd (the C helper, tests/lib/daemon.h, shares its
# on-disk layout and its cleanup: `daemon.sh --sweep`). Source it near the top of a test script
# (before lib.sh); it needs SBX_BUILD_DIR and SBX_SRC_DIR (lib.sh's defaults) and fail/skip.
#
# One daemon:   start_daemon [flags...]   a daemon on a temporary socket ($SOCK), run dir, state
#               dir and log ($D/log) with a unique cgroup parent ($CG); $DPID is its PID. A
#               second call restarts it on the same directories. stop_daemon: SIGTERM, exit 0.
# Several:      daemon_start NAME [flags...] starts (or restarts) instance NAME and makes it the
#               current one; daemon_use NAME switches D, SOCK, CG and DPID to NAME (creating
#               its directories without starting it); $DAEMON_SOCK[NAME] etc. name any of them.
#               The simple form is the instance "sd".
# Settings, read at each start: DAEMON_TAG (names the temp dir and cgroup, set before sourcing),
#   DAEMON_WRAP (array: a command prefix, e.g. nsenter; see daemon_netns), DAEMON_FLAGS (array:
#   flags before the call's own), DAEMON_BIN (the sandboxd to run: a bundle's or an installed
#   one), DAEMON_SHIM (the --shim; empty: the daemon's own default), DAEMON_LOG_LEVEL (debug;
#   empty: the daemon's default), DAEMON_WAIT_S (seconds for /healthz, 10).
# daemon_netns: a private network namespace (held by a `sleep`, $NSPID) that DAEMON_WRAP enters,
#   so a restarted daemon finds the same one; it goes with the cleanup.
# daemon_at_exit CMD...: run CMD first in the cleanup (e.g. stop a trainer before the daemon).
# daemon_init: only the temp dir $DAEMON_ROOT (scratch space for the test too) and the trap.
# Cleanup (the EXIT trap, set on the first use): for every instance, daemon_sweep ends its
# sandboxes, stops it, lets `sbx-shim cleanup` reclaim what outlived it, unmounts what is left
# under its directory, removes its cgroups; then the temp dir goes; the case fails if a daemon's
# log shows a sanitizer report. The temp dir lives in $SBX_CASE_DIR when the runner gives one,
# so that the runner sweeps it (`daemon.sh --sweep DIR`) even after a case it had to kill.
#
# HTTP to the current instance: req METHOD PATH [curl args...] sets CODE and BODY; expect CODE
# [jq-expr]; create [json] sets ID; metric NAME{labels} prints a /metrics value; wait_ready N S.
# req_until SECONDS JQ-EXPR METHOD PATH [curl args...]: repeats the request (every 0.1 s) until
# its body satisfies JQ-EXPR or SECONDS pass; CODE and BODY are the last answer's.
# free_port: a loopback TCP port for a --tcp listener (see below).

D='' DPID='' SOCK='' CG='' CODE='' BODY='' ID='' NSPID=''
DAEMON_TAG=${DAEMON_TAG:-sd}
DAEMON_ROOT='' DAEMON_NAME=''
declare -gA DAEMON_DIR=() DAEMON_SOCK=() DAEMON_CG=() DAEMON_PID=()
declare -ga DAEMON_EXIT_HOOKS=()
SBX_BUILD_DIR=${SBX_BUILD_DIR:-build}
SBX_SRC_DIR=${SBX_SRC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# (lib.sh defines these for tests; a script outside the runner, like the GRPO demo, may not)
declare -F require_root >/dev/null || require_root() { [ "$(id -u)" -eq 0 ] || skip "needs root"; }
SANITIZER_REPORT='ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:'

# ---- cleanup of one instance directory (also run by the C helper and by tests/run) ----

# PID: a process that has not exited (a zombie has). One read of its state: a check that
# /proc/PID exists and then a read of its state raced the zombie's reaping ("" is not Z).
pid_alive() {
  local st
  st=$(awk '{print $3}' "/proc/${1:-none}/stat" 2>/dev/null || true)
  [ -n "$st" ] && [ "$st" != Z ]
}

daemon_env() { sed -n "s/^$2=//p" "$1/daemon.env" 2>/dev/null; } # DIR KEY

daemon_sweep() { # DIR: end and remove what the daemon of DIR made; status 1 on a sanitizer report
  local dir=$1 pid sock cg shim ids='' id='' i c
  pid=$(daemon_env "$dir" pid) sock=$(daemon_env "$dir" sock) cg=$(daemon_env "$dir" cg)
  shim=$(daemon_env "$dir" shim)
  [ -n "$shim" ] || shim=$SBX_BUILD_DIR/sbx-shim
  # the recorded PID is ours only while its command line still names our directory
  if pid_alive "$pid" && tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$dir/"; then
    ids=$(curl -s --max-time 5 --unix-socket "$sock" http://sd/v1/sandboxes |
      jq -r '.[] | select(.state != "ended") | .id' 2>/dev/null)
    for id in $ids; do
      curl -s --max-time 5 --unix-socket "$sock" -X DELETE "http://sd/v1/sandboxes/$id" >/dev/null
    done
    for i in $(seq 100); do # the shims finish their teardown after the answer
      for id in $ids; do [ -d "$dir/run/sandboxes/$id" ] && break; id=''; done
      [ -z "$id" ] && break
      sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 200); do pid_alive "$pid" || break; sleep 0.05; done
    pid_alive "$pid" && kill -KILL "$pid" 2>/dev/null
  fi
  for c in "$dir"/run/sandboxes/*/; do # pool entries and sandboxes outlive the daemon
    [ -d "$c" ] && timeout 20 "$shim" cleanup "${c%/}" >/dev/null 2>&1
  done
  awk -v d="$dir" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
  for i in $(seq 50); do # a shim may still be finishing its teardown
    for c in /sys/fs/cgroup/*/"$cg" /sys/fs/cgroup/"$cg"; do
      [ -n "$cg" ] && [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    [ -z "$cg" ] || ! compgen -G "/sys/fs/cgroup/*/$cg" >/dev/null && break
    sleep 0.1
  done
  if grep -qE "$SANITIZER_REPORT" "$dir/log" 2>/dev/null; then
    grep -E -A30 "$SANITIZER_REPORT" "$dir/log" >&2
    echo "FAIL: the daemon in $dir reported sanitizer errors" >&2
    return 1
  fi
  return 0
}

daemon_cleanup() {
  set +eu
  trap '' TERM INT # the runner's SIGTERM may come twice (to the case, to its group): finish
  local i n bad=0
  for ((i = ${#DAEMON_EXIT_HOOKS[@]} - 1; i >= 0; i--)); do eval "${DAEMON_EXIT_HOOKS[$i]}"; done
  DAEMON_EXIT_HOOKS=()
  [ -n "$DAEMON_NAME" ] && daemon_save
  for n in "${!DAEMON_DIR[@]}"; do
    daemon_sweep "${DAEMON_DIR[$n]}" || bad=1
    [ -n "${DAEMON_PID[$n]}" ] && wait "${DAEMON_PID[$n]}" 2>/dev/null
  done
  [ -n "$NSPID" ] && kill "$NSPID" 2>/dev/null && wait "$NSPID" 2>/dev/null
  [ -n "$DAEMON_ROOT" ] && rm -rf "$DAEMON_ROOT"
  [ $bad == 0 ] || { echo "FAIL: the daemon reported sanitizer errors" >&2; exit 1; }
}

daemon_at_exit() { daemon_init; DAEMON_EXIT_HOOKS+=("$(printf '%q ' "$@")"); }

# ---- instances ----

daemon_init() { # the case's temp dir ($DAEMON_ROOT, also free for the test's own files) and trap
  [ -n "$DAEMON_ROOT" ] && return 0
  DAEMON_ROOT=$(mktemp -d "${SBX_CASE_DIR:-/tmp}/sbx-$DAEMON_TAG.XXXXXX") || fail "mktemp"
  trap daemon_cleanup EXIT
}

daemon_save() { # the current instance's variables back into the tables (a test may set DPID)
  DAEMON_DIR[$DAEMON_NAME]=$D DAEMON_SOCK[$DAEMON_NAME]=$SOCK DAEMON_CG[$DAEMON_NAME]=$CG
  DAEMON_PID[$DAEMON_NAME]=$DPID
  daemon_write_env
}

daemon_use() { # NAME: make NAME current, creating its directories on first use
  local n=$1
  [[ "$n" =~ ^[A-Za-z0-9_-]+$ ]] || fail "bad daemon instance name '$n'"
  daemon_init
  [ -n "$DAEMON_NAME" ] && daemon_save
  if [ -z "${DAEMON_DIR[$n]:-}" ]; then
    mkdir -p "$DAEMON_ROOT/$n"
    DAEMON_DIR[$n]=$DAEMON_ROOT/$n DAEMON_SOCK[$n]=$DAEMON_ROOT/$n/sd.sock DAEMON_PID[$n]=''
    DAEMON_CG[$n]="sbxtest-$DAEMON_TAG-$n-$$-$RANDOM"
  fi
  DAEMON_NAME=$n D=${DAEMON_DIR[$n]} SOCK=${DAEMON_SOCK[$n]} CG=${DAEMON_CG[$n]} DPID=${DAEMON_PID[$n]}
  daemon_write_env
}

daemon_write_env() { # what daemon_sweep needs to clean up after the current instance
  printf 'pid=%s\nsock=%s\ncg=%s\nshim=%s\n' "$DPID" "$SOCK" "$CG" "$SBX_BUILD_DIR/sbx-shim" >"$D/daemon.env"
}

daemon_dirs() { daemon_use "${DAEMON_NAME:-sd}"; } # the current instance's dirs, not started

daemon_netns() { # a held private network namespace for the daemons started from now on
  unshare --net sleep infinity &
  NSPID=$!
  for _ in $(seq 50); do [ "$(readlink /proc/$NSPID/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break; sleep 0.02; done
  nsenter --net=/proc/$NSPID/ns/net ip link set lo up
  DAEMON_WRAP=(nsenter "--net=/proc/$NSPID/ns/net")
}

start_daemon() { # [flags...]: start (or restart) the current instance
  require_root
  command -v jq >/dev/null || skip "jq is needed"
  daemon_dirs
  local bin=${DAEMON_BIN:-$SBX_BUILD_DIR/sandboxd} shim=${DAEMON_SHIM-$SBX_BUILD_DIR/sbx-shim}
  local level=${DAEMON_LOG_LEVEL-debug} opt=()
  [ -n "$shim" ] && opt+=(--shim "$shim")
  [ -n "$level" ] && opt+=(--log-level "$level")
  # its own session and process group: the runner's SIGTERM for a timed-out case reaches the
  # test, whose cleanup then stops the daemon through its API
  setsid ${DAEMON_WRAP[@]+"${DAEMON_WRAP[@]}"} "$bin" --socket "$SOCK" --run-dir "$D/run" \
    --state-dir "$D/state" --cgroup-parent "$CG" --seccomp-profile "$SBX_SRC_DIR/policy/seccomp.json" \
    "${opt[@]}" ${DAEMON_FLAGS[@]+"${DAEMON_FLAGS[@]}"} "$@" >>"$D/log" 2>&1 &
  DPID=$!
  daemon_save
  for _ in $(seq $(( ${DAEMON_WAIT_S:-10} * 20 ))); do
    curl -s --max-time 1 --unix-socket "$SOCK" http://sd/healthz >/dev/null 2>&1 && return 0
    kill -0 "$DPID" 2>/dev/null || { tail -30 "$D/log" >&2; fail "daemon $DAEMON_NAME exited at start"; }
    sleep 0.05
  done
  tail -30 "$D/log" >&2
  fail "daemon $DAEMON_NAME did not answer /healthz"
}

daemon_start() { daemon_use "$1"; shift; start_daemon "$@"; } # NAME [flags...]

stop_daemon() { # the current instance: SIGTERM, and it must exit 0
  kill -TERM "$DPID"; local rc=0; wait "$DPID" || rc=$?
  [ "$rc" == 0 ] || fail "daemon exit status $rc after SIGTERM"
}

# ---- HTTP to the current instance ----

req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s --max-time 30 --unix-socket "$SOCK" -X "$m" -o "$D/body" -D "$D/headers" \
    -w '%{http_code}' "$@" "http://sd$p") || true
  BODY=$(cat "$D/body" 2>/dev/null)
}
expect() { # CODE [jq-expression that must be true]
  [ "$CODE" == "$1" ] || { tail -20 "$D/log" >&2; fail "expected HTTP $1, got $CODE: $BODY"; }
  [ -z "${2:-}" ] || echo "$BODY" | jq -e "$2" >/dev/null || { tail -20 "$D/log" >&2; fail "expected $2 in: $BODY"; }
}
create() { # [json] -> ID
  req POST /v1/sandboxes -d "${1:-{\}}"
  expect 201 '.state == "running"'
  ID=$(echo "$BODY" | jq -r .id)
}
metric() { # NAME-with-labels -> value
  curl -s --max-time 5 --unix-socket "$SOCK" http://sd/metrics | awk -v m="$1" '$1 == m {print $2}'
}
wait_ready() { # N seconds: until pool 0 has N ready entries
  for _ in $(seq $(( $2 * 10 ))); do
    [ "$(metric 'sandboxd_pool_entries{pool="0",state="ready"}')" == "$1" ] && return 0
    sleep 0.1
  done
  tail -20 "$D/log" >&2
  fail "pool 0 did not reach $1 ready entries in $2 s"
}
req_until() {
  local secs=$1 cond=$2
  shift 2
  for _ in $(seq $((secs * 10))); do
    req "$@"
    echo "$BODY" | jq -e "$cond" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
}
free_port() { # -> a TCP port nothing listens on, below the kernel's ephemeral range (32768 and
  # up, where an outgoing connection may hold any port)
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 12000))
    ss -Htln "sport = :$p" | grep -q . || { echo "$p"; return 0; }
  done
  fail "no free TCP port in 20000-31999"
}

# ---- as a program: daemon.sh --sweep DIR... (the C helper, and tests/run after a killed case) ----
# Sweeps every daemon directory (one holding daemon.env) in or under each DIR; status 1 when a
# daemon's log holds a sanitizer report.
if [ "${BASH_SOURCE[0]}" == "$0" ]; then
  [ "${1:-}" == --sweep ] || { echo "usage: daemon.sh --sweep DIR..." >&2; exit 2; }
  shift
  rc=0
  for top in "$@"; do
    while read -r env; do
      daemon_sweep "$(dirname "$env")" || rc=1
    done < <(find "$top" -name daemon.env 2>/dev/null)
  done
  exit $rc
fi
