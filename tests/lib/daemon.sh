# A real sandboxd for shell tests: source it near the top of a test script (before lib.sh).
# start_daemon [flags...] starts one on a temporary socket, run dir, state dir and a unique cgroup
# parent (DAEMON_TAG names them; DAEMON_WRAP may prefix the command, e.g. nsenter); a second call
# restarts on the same directories. daemon_cleanup (the EXIT trap) ends its sandboxes, stops it,
# lets `sbx-shim cleanup` reclaim what outlived it, removes the cgroups and the directory, and
# fails the case if the daemon's log shows a sanitizer report.
# req METHOD PATH [curl args...] sets CODE and BODY; expect CODE [jq-expr]; create [json] sets ID;
# metric NAME{labels} prints a /metrics value.

D='' DPID='' SOCK='' CG='' CODE='' BODY='' ID=''
DAEMON_TAG=${DAEMON_TAG:-sd}

daemon_cleanup() {
  set +e
  if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
    for id in $(curl -s --max-time 5 --unix-socket "$SOCK" http://sd/v1/sandboxes | jq -r '.[].id' 2>/dev/null); do
      curl -s --max-time 5 --unix-socket "$SOCK" -X DELETE "http://sd/v1/sandboxes/$id" >/dev/null
    done
    kill -TERM "$DPID"; wait "$DPID" 2>/dev/null
  fi
  for dir in "$D"/run/sandboxes/*/; do # pool entries and sandboxes outlive the daemon
    [ -d "$dir" ] && timeout 20 "$(bin sbx-shim)" cleanup "${dir%/}" >/dev/null 2>&1
  done
  local i c
  for i in $(seq 50); do # a shim may still be finishing its teardown
    for c in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do
      [ -n "$CG" ] && [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    [ -z "$CG" ] || ! compgen -G "/sys/fs/cgroup/*/$CG" >/dev/null && break
    sleep 0.1
  done
  local bad=0
  if [ -n "$D" ] && grep -qE 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$D/log" 2>/dev/null; then
    grep -E -A30 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$D/log" >&2
    bad=1
  fi
  [ -n "$D" ] && rm -rf "$D"
  [ $bad == 0 ] || { echo "FAIL: the daemon reported sanitizer errors" >&2; exit 1; }
}

start_daemon() {
  require_root
  command -v jq >/dev/null || skip "jq is needed"
  if [ -z "$D" ]; then
    D=$(mktemp -d "/tmp/sbx-$DAEMON_TAG.XXXXXX")
    CG="sbxtest-$DAEMON_TAG-$$-$RANDOM"
    SOCK="$D/sd.sock"
    trap daemon_cleanup EXIT
  fi
  ${DAEMON_WRAP[@]+"${DAEMON_WRAP[@]}"} "$(bin sandboxd)" --socket "$SOCK" --run-dir "$D/run" \
    --state-dir "$D/state" --cgroup-parent "$CG" --seccomp-profile "$SBX_SRC_DIR/policy/seccomp.json" \
    --shim "$(bin sbx-shim)" --log-level debug "$@" >>"$D/log" 2>&1 &
  DPID=$!
  for _ in $(seq 100); do
    curl -s --max-time 1 --unix-socket "$SOCK" http://sd/healthz >/dev/null 2>&1 && return 0
    kill -0 "$DPID" 2>/dev/null || { cat "$D/log" >&2; fail "daemon exited at start"; }
    sleep 0.05
  done
  fail "daemon did not answer /healthz"
}

stop_daemon() {
  kill -TERM "$DPID"; local rc=0; wait "$DPID" || rc=$?
  [ "$rc" == 0 ] || fail "daemon exit status $rc after SIGTERM"
}

req() {
  local m=$1 p=$2; shift 2
  CODE=$(curl -s --max-time 30 --unix-socket "$SOCK" -X "$m" -o "$D/body" -D "$D/headers" \
    -w '%{http_code}' "$@" "http://sd$p") || true
  BODY=$(cat "$D/body")
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
