#!/usr/bin/env bash
# Integration tests of the daemon's probe of whether this node can pause a sandbox
# (sandboxd/core/checkpoint.c: `criu check` and a trial dump of a sleeping process, once, at the
# first pause; docs/DAEMON.md "Paused sandboxes"), with CRIU 4 (tests/deps_criu.sh) and stand-ins
# for it in a private mount namespace: a dump that hangs is found; a daemon killed during
# `criu check` or during the trial dump leaves no process behind. The pauses themselves:
# test_pause.sh.

DAEMON_TAG=pausep
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/../lib/pause.sh"

# A CRIU whose check passes but whose dump hangs (4.1.1 on 6.18.44): the daemon's trial dump
# finds it and the node says it cannot pause (501 unsupported), in a private mount namespace
# where a stand-in covers /usr/local/sbin/criu (the host's file is not touched).
TEST_TIMEOUT_pause_criu_hangs=90
test_pause_criu_hangs() {
  need_criu
  daemon_dirs
  local fake=$D/fake-criu
  printf '#!/bin/sh\n[ "$1" = check ] && { echo "Looks good."; exit 0; }\nexec sleep 4242\n' >"$fake"
  chmod 755 "$fake"
  DAEMON_WRAP=(unshare -m --propagation private sh -c 'mount --bind "$0" "$(command -v criu)" && exec "$@"' "$fake")
  start_daemon
  create '{"pausable":true}'
  local t0=$SECONDS
  req POST "/v1/sandboxes/$ID/pause"
  expect 501 '.code == "unsupported" and (.message | contains("trial dump")) and (.message | contains("hangs"))'
  [ $((SECONDS - t0)) -lt 40 ] || fail "the trial dump was not cut short"
  req GET "/v1/sandboxes/$ID"; expect 200 '.state == "running"'
  # the trial's sleeping process (sleep 600.5) and the stand-in's dump (sleep 4242) are gone
  [ -z "$(pgrep -f '^sleep (600\.5|4242)$')" ] || fail "the trial left a process: $(pgrep -af '^sleep (600\.5|4242)$')"
}

# The daemon killed while its first pause's probe runs `criu check`, which has a child stopped
# (CRIU's feature tests stop children; a stand-in here, in a private mount namespace as above,
# whose child stops itself again whenever it is continued): CRIU dies with the files worker,
# and its stopped child must not stay behind, stopped forever: the kernel's SIGHUP ends it.
# Twice: the daemon leading its own session (as start_daemon and systemd start it), then under
# a subreaper in the same session as the daemon (a container's init that is a shell, tini, a
# supervisor), which adopts what the daemon leaves: the worker's own session must do it there.
SUBREAPER='
import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
child = os.fork()
if child == 0:
    os.setpgid(0, 0)
    os.execvp(sys.argv[1], sys.argv[1:])
while True:  # reap all it adopts until none is left
    try:
        os.wait()
    except ChildProcessError:
        break
'
TEST_TIMEOUT_pause_probe_killed=90
test_pause_probe_killed() {
  need_criu
  daemon_dirs
  # the stand-in's check: its pid (1: the first process of a pid namespace of its own), and a
  # child that stops itself whenever continued, named by mark (its pid is the namespace's)
  local fake=$D/fake-criu nspid=$D/criu.pid mark="sbx-probe-child-$$"
  printf '#!/bin/sh\necho $$ >%s\nsh -c '"'"'while :; do kill -STOP $$; done'"'"' %s &\nexec sleep 4243\n' \
    "$nspid" "$mark" >"$fake"
  chmod 755 "$fake"
  local bind=(unshare -m --propagation private sh -c 'mount --bind "$0" "$(command -v criu)" && exec "$@"' "$fake")
  local round wrapper daemon bg pid state left
  for round in session subreaper; do
    rm -f "$nspid"
    DAEMON_WRAP=("${bind[@]}")
    [ $round == session ] || DAEMON_WRAP=("${SBX_PYTHON:-/usr/bin/python3}" -c "$SUBREAPER" "${bind[@]}")
    start_daemon
    wrapper=$DPID daemon=$DPID
    [ $round == session ] || daemon=$(pgrep -P "$DPID")
    create '{"pausable":true}'
    curl -s --max-time 30 --unix-socket "$SOCK" -X POST "http://sd/v1/sandboxes/$ID/pause" >/dev/null &
    bg=$! pid='' state=''
    for _ in $(seq 200); do
      pid=$(pgrep -f "^sh -c .* $mark\$" | head -1) && state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || true)
      [ "$state" == T ] && break
      sleep 0.05
    done
    [ "$state" == T ] || fail "$round: the stand-in's child did not stop (pid ${pid:-none}, state ${state:-none})"
    [ "$(cat "$nspid")" == 1 ] || fail "$round: criu check ran as pid $(cat "$nspid"), not as its pid namespace's first"
    kill -9 "$daemon"
    [ $round == subreaper ] || wait "$DPID" 2>/dev/null || true # (the subreaper waits for the shim)
    wait "$bg" 2>/dev/null || true
    for _ in $(seq 50); do
      pid_alive "$pid" || break
      sleep 0.1
    done
    if pid_alive "$pid"; then
      left=$(ps -o pid,ppid,pgid,sid,stat,args -p "$pid" | tail -1 || true)
      kill -9 "$pid" 2>/dev/null || true # this case's own process
      fail "$round: the probe's stopped child outlived the daemon by 5 s: $left"
    fi
    left=$(pgrep -f '^sleep 4243$' || true)
    if [ -n "$left" ]; then
      kill -9 $left 2>/dev/null || true # this case's own processes
      fail "$round: the stand-in outlived the daemon: $left"
    fi
    DAEMON_WRAP=("${bind[@]}")
    start_daemon # the next daemon ends the sandbox the killed one left (its shim: the last child
    req DELETE "/v1/sandboxes/$ID"; expect 204 # the subreaper has)
    timeout 10 tail --pid="$wrapper" -f /dev/null || fail "$round: the wrapper did not end"
    wait "$wrapper" 2>/dev/null || true
    stop_daemon
  done
}

# The daemon killed while its first pause's probe runs the trial dump, held where CRIU has the
# sleeping process frozen (a stand-in runs the real CRIU with an action script that waits at
# "post-dump", the sleeper in a ptrace stop): none of CRIU (the stand-in execs it), its script
# or the sleeper may outlive the daemon. They ran in the host's pid namespace: CRIU and the
# sleeper died with the worker (PR_SET_PDEATHSIG), but what CRIU had started (its script here,
# a child it stopped for a feature test, ...) stayed, unreaped; now the trial's pid namespace
# ends with the worker.
TEST_TIMEOUT_pause_trial_killed=90
test_pause_trial_killed() {
  need_criu
  daemon_dirs
  local real=$D/real-criu fake=$D/fake-criu hold=$D/hold.sh bg criu script sleeper left p i
  cp "$(command -v criu)" "$real"
  printf '#!/bin/sh\n[ "$CRTOOLS_SCRIPT_ACTION" = post-dump ] || exit 0\ntouch %s/holding\nwhile [ -d %s ] && [ ! -e %s/go ]; do sleep 0.1; done\n' \
    "$D" "$D" "$D" >"$hold"
  printf '#!/bin/sh\ncase "$*" in dump*.trial) exec %s "$@" --action-script %s;; esac\nexec %s "$@"\n' \
    "$real" "$hold" "$real" >"$fake"
  chmod 755 "$hold" "$fake"
  daemon_at_exit touch "$D/go" # (a script left holding ends)
  DAEMON_WRAP=(unshare -m --propagation private sh -c 'mount --bind "$0" "$(command -v criu)" && exec "$@"' "$fake")
  start_daemon
  create '{"pausable":true}'
  curl -s --max-time 30 --unix-socket "$SOCK" -X POST "http://sd/v1/sandboxes/$ID/pause" >/dev/null &
  bg=$!
  for i in $(seq 200); do [ -e "$D/holding" ] && break; sleep 0.05; done
  [ -e "$D/holding" ] || { cat "$D/run/criu-check.log" >&2; fail "the trial dump did not reach its post-dump script"; }
  criu=$(pgrep -f "^$real dump " || true) script=$(pgrep -f "^(/bin/)?sh (-c )?$hold\$" | head -1)
  sleeper=$(pgrep -P "$(ps -o ppid= -p "${criu:-0}" | tr -d ' ')" -fx 'sleep 600\.5' || true)
  [ -n "$criu" ] && [ -n "$script" ] && [ -n "$sleeper" ] ||
    fail "the trial's processes: criu ${criu:-none}, script ${script:-none}, sleeper ${sleeper:-none}"
  [ "$(awk '{print $3}' "/proc/$sleeper/stat")" == t ] || fail "CRIU does not hold the sleeper frozen"
  kill -9 "$DPID"
  wait "$DPID" 2>/dev/null || true
  wait "$bg" 2>/dev/null || true
  for i in $(seq 50); do
    left=''
    for p in $criu $script $sleeper; do pid_alive "$p" && left+="$p "; done
    [ -z "$left" ] && break
    sleep 0.1
  done
  if [ -n "$left" ]; then
    p=$( (ps -o pid=,ppid=,stat=,args= -p "$(echo $left | tr ' ' ,)" || true) | tr -s ' ' | paste -sd ';')
    kill -9 $left 2>/dev/null || true # this case's own processes
    fail "the trial outlived the daemon by 5 s: $p"
  fi
  start_daemon # the next daemon ends the sandbox the killed one left
  req DELETE "/v1/sandboxes/$ID"; expect 204
  stop_daemon
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
