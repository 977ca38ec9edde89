#!/usr/bin/env bash
# Integration tests of spare shims (--spare-shims, sandboxd/core/spare.h): the daemon keeps an
# exec'd `sbx-shim spare` waiting; a create hands it the sandbox's directory (the sandbox's
# shim is that process, its argv then names the directory, so `sbx-shim cleanup` still knows
# it), a new spare takes its place, a spare that died is passed over, none with
# --spare-shims 0, a bad value is refused at start, and spares end with the daemon.
# Each case starts its own daemon and removes everything it made (trap on EXIT).

DAEMON_TAG=spare
source "$(dirname "$0")/../lib/daemon.sh"

argv1() { # PID -> its argv[1] (empty when it is gone)
  tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | sed -n 2p
}
spares() { # the daemon's children waiting as spares
  local p
  for p in $(ps -o pid= --ppid "$DPID"); do
    [ "$(argv1 "$p")" == spare ] && echo "$p"
  done
  return 0
}
wait_spare() { # [PID that must not be it] -> the one spare, once there is exactly one
  local s
  for _ in $(seq 100); do
    s=$(spares)
    [ "$(echo "$s" | grep -c .)" == 1 ] && [ "$s" != "${1:-}" ] && { echo "$s"; return 0; }
    sleep 0.05
  done
  fail "expected one spare shim other than '${1:-}', got: '$(spares | tr '\n' ' ')'"
}
gone_within() { # PID SECONDS
  for _ in $(seq $(($2 * 20))); do pid_alive "$1" || return 0; sleep 0.05; done
  return 1
}

TEST_TIMEOUT_hand_off=60
test_hand_off() {
  start_daemon
  local s1 s2 shim
  s1=$(wait_spare)
  create
  shim=$(cat "$D/run/sandboxes/$ID/shim.pid")
  assert_eq "$shim" "$s1" "the create's shim is the spare"
  assert_eq "$(argv1 "$shim")" "$D/run/sandboxes/$ID" "the handed-off shim's argv[1]"
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","echo hi; id -u"]}'
  expect 200 '.exit_code == 0 and .stdout == "hi\n1000\n"'
  s2=$(wait_spare "$s1") # refilled
  # a spare that died is passed over: the create still runs, and another spare follows
  kill -KILL "$s2"
  gone_within "$s2" 5 || fail "spare $s2 did not die"
  create
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'; expect 200 '.exit_code == 0'
  [ "$(cat "$D/run/sandboxes/$ID/shim.pid")" != "$s2" ] || fail "the dead spare was used"
  wait_spare "$s2" >/dev/null
  # `sbx-shim cleanup` finds a handed-off shim by its argv, as it finds any shim, and only it
  local dir=$D/run/sandboxes/$ID last
  last=$(cat "$dir/shim.pid")
  assert_eq "$(argv1 "$last")" "$dir" "the second shim's argv[1]"
  kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true
  timeout 20 "$(bin sbx-shim)" cleanup "$dir" || fail "sbx-shim cleanup failed"
  gone_within "$last" 5 || fail "cleanup left the handed-off shim $last running"
  [ ! -d "$dir" ] || fail "cleanup left $dir"
  pid_alive "$s1" || fail "the cleanup of $dir ended the first sandbox's shim $s1"
}

TEST_TIMEOUT_flag=60
test_flag() {
  start_daemon --spare-shims 0
  create
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'; expect 200 '.exit_code == 0'
  sleep 0.3
  [ -z "$(spares)" ] || fail "--spare-shims 0 started spares: $(spares)"
  stop_daemon
  start_daemon --spare-shims 3
  for _ in $(seq 100); do [ "$(spares | grep -c .)" == 3 ] && break; sleep 0.05; done
  assert_eq "$(spares | grep -c .)" 3 "spares with --spare-shims 3"
  stop_daemon
  local out v
  for v in 17 -1 two; do
    out=$("$(bin sandboxd)" --socket "$D/bad.sock" --run-dir "$D/run" --state-dir "$D/state" \
      --cgroup-parent "$CG" --spare-shims "$v" 2>&1) && fail "--spare-shims $v was accepted"
    echo "$out" | grep -q -- "spare-shims" || fail "--spare-shims $v: no message naming it: $out"
  done
}

TEST_TIMEOUT_end_with_daemon=60
test_end_with_daemon() {
  start_daemon --spare-shims 2
  for _ in $(seq 100); do [ "$(spares | grep -c .)" == 2 ] && break; sleep 0.05; done
  local s; s=$(spares)
  assert_eq "$(echo "$s" | grep -c .)" 2 "spares before the daemon's end"
  kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true
  for p in $s; do gone_within "$p" 5 || fail "spare $p outlived the daemon"; done
  start_daemon --spare-shims 2 # a restart starts new ones and builds with them
  create
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'; expect 200 '.exit_code == 0'
}

source "$(dirname "$0")/../lib/lib.sh"
