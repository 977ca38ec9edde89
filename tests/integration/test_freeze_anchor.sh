#!/usr/bin/env bash
# Integration tests of the daemon's freeze anchor (sandboxd/core/cgroup.c): on cgroup v1, while
# a daemon runs, an empty cgroup freeze-anchor-<its pid> under its freezer parent stays FROZEN
# (so a sandbox's freeze and thaw do not switch the kernel's freezer key each time); the
# sandboxes beside it are not frozen and end as before; SIGTERM removes it with the parent; a
# killed daemon's anchor goes at the next daemon's start. On cgroup v2, and on kernels before
# 6.1 (whose freezer has no such key), the daemon makes none.
# Each case starts its own daemon and removes everything it made (trap on EXIT).

DAEMON_TAG=anchor
source "$(dirname "$0")/../lib/daemon.sh"

FZ=/sys/fs/cgroup/freezer
anchored() { # the daemon makes an anchor here: v1's freezer and Linux 6.1 or later
  local v; v=$(uname -r | awk -F. '{print $1 * 1000 + $2}')
  [ -d "$FZ" ] && [ "$v" -ge 6001 ]
}
anchor() { echo "$FZ/$CG/freeze-anchor-$1"; } # DAEMON PID -> its anchor's directory
assert_frozen_anchor() { # DAEMON PID WHEN
  local a; a=$(anchor "$1")
  [ -d "$a" ] || fail "$2: no freeze anchor $a"
  assert_eq "$(cat "$a/freezer.state")" FROZEN "$2: the anchor's freezer.state"
  assert_eq "$(cat "$a/cgroup.procs")" "" "$2: processes in the anchor"
}
no_anchors() { # WHAT: no freeze-anchor-* under the daemon's parent, in any hierarchy
  local left; left=$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*$CG*" -name 'freeze-anchor-*' 2>/dev/null || true)
  [ -z "$left" ] || fail "$1: freeze anchors left: $left"
}

TEST_TIMEOUT_held_while_running=60
test_held_while_running() {
  start_daemon --spare-shims 0 # no spare's cgroup to wait for when the parent goes
  if ! anchored; then
    no_anchors "a daemon on cgroup v2 or before Linux 6.1"
    create
    req DELETE "/v1/sandboxes/$ID"; expect 204
    stop_daemon
    return 0
  fi
  assert_frozen_anchor "$DPID" "after the start"
  create
  assert_eq "$(cat "$FZ/$CG/$ID/freezer.state")" THAWED "the sandbox's freezer.state beside the anchor"
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","sleep 30 & sleep 30 & echo up"]}'
  expect 200 '.exit_code == 0 and .stdout == "up\n"'
  req DELETE "/v1/sandboxes/$ID"; expect 204 # its end freezes, kills and thaws its cgroup
  for _ in $(seq 100); do [ -d "$FZ/$CG/$ID" ] || break; sleep 0.1; done
  [ ! -d "$FZ/$CG/$ID" ] || fail "the ended sandbox's freezer cgroup is still there"
  assert_frozen_anchor "$DPID" "after a sandbox ended"
  local pid=$DPID
  stop_daemon
  [ ! -d "$(anchor "$pid")" ] || fail "the anchor outlived the daemon's SIGTERM"
  [ ! -d "$FZ/$CG" ] || fail "the freezer parent outlived the daemon: $(ls "$FZ/$CG")"
}

TEST_TIMEOUT_killed_daemon_swept=60
test_killed_daemon_swept() {
  anchored || { start_daemon; no_anchors "a daemon on cgroup v2 or before Linux 6.1"; return 0; }
  start_daemon
  local old=$DPID
  assert_frozen_anchor "$old" "after the start"
  kill -KILL "$old"; wait "$old" 2>/dev/null || true
  assert_frozen_anchor "$old" "after the daemon was killed" # nothing ran its release
  start_daemon
  [ ! -d "$(anchor "$old")" ] || fail "the next daemon's start left the killed one's anchor"
  assert_frozen_anchor "$DPID" "the new daemon's"
  create
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'; expect 200 '.exit_code == 0'
}

source "$(dirname "$0")/../lib/lib.sh"
