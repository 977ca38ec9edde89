#!/usr/bin/env bash
# The runner (tests/run) and the daemon helper (tests/lib/daemon.sh) clean up after cases the
# runner has to stop: a case past its timeout gets SIGTERM (its EXIT trap ends its daemon and
# sandboxes, even when the SIGTERM comes twice), and a case that ignores SIGTERM is killed and
# its leftovers swept from its $SBX_CASE_DIR: daemon, shims, sandboxes, cgroups, files. A
# sanitizer report in a daemon's log fails a case.

DAEMON_TAG=runner
source "$(dirname "$0")/../lib/daemon.sh"

# A fixture suite: two cases that start a daemon with a sandbox and never end, one whose daemon
# log holds a (planted) sanitizer report.
write_fixture() { # DIR
  mkdir -p "$1/hang"
  cat >"$1/hang/test_hang.sh" <<EOF2
#!/usr/bin/env bash
source "$SBX_SRC_DIR/tests/lib/daemon.sh"
TEST_TIMEOUT_term=15 # (a daemon and a sandbox first: ~1 s, 3 s on a slow day)
test_term() {
  start_daemon; create
  daemon_at_exit kill -TERM \$\$ # a second SIGTERM, during the cleanup, must not cut it short
  echo "\$D \$CG \$ID" >"$1/term.info" # (then only the sleep)
  sleep 100
}
TEST_TIMEOUT_kill=6 # (its SIGTERM is ignored, by its commands too: its setup has 16 s)
test_kill() {
  trap '' TERM
  start_daemon; create; echo "\$D \$CG \$ID" >"$1/kill.info"
  while true; do sleep 1; done
}
TEST_TIMEOUT_sanitizer=20
test_sanitizer() { start_daemon; echo "x.c:1:2: runtime error: (planted by the test)" >>"\$D/log"; }
source "$SBX_SRC_DIR/tests/lib/lib.sh" "\$@"
EOF2
}

# Nothing of the case's daemon is left: no directory, cgroup, or process naming its directory.
expect_gone() { # INFO-FILE
  local dir cg id p
  read -r dir cg id <"$1" || fail "the fixture did not start ($1)"
  [ -n "$id" ] || fail "no sandbox was created"
  [ -e "$dir" ] && fail "$dir left behind"
  compgen -G "/sys/fs/cgroup/*/$cg" >/dev/null || [ -d "/sys/fs/cgroup/$cg" ] && fail "cgroup $cg left behind"
  for p in /proc/[0-9]*; do
    [ "$p" == "/proc/$$" ] && continue
    { tr '\0' ' ' <"$p/cmdline"; } 2>/dev/null | grep -qF -- "$dir/" && fail "process ${p#/proc/} left: $(tr '\0' ' ' <"$p/cmdline")"
  done
  return 0
}

TEST_TIMEOUT_timed_out_cases_leave_nothing=120
TEST_PASS_timed_out_cases_leave_nothing=plain # (~35 s of the runner's own script: once)
test_timed_out_cases_leave_nothing() {
  require_root
  daemon_init
  local f=$DAEMON_ROOT/fixture out rc=0
  write_fixture "$f"
  out=$(SBX_TESTS_DIR=$f SBX_KILL_AFTER=10 "$SBX_SRC_DIR/tests/run" --build "$SBX_BUILD_DIR" --suite hang 2>&1) || rc=$?
  echo "$out"
  [ "$rc" != 0 ] || fail "the runner passed cases that timed out"
  grep -q 'FAIL  hang/test_hang:term (rc=124' <<<"$out" || fail "the SIGTERM case did not time out"
  grep -q 'FAIL  hang/test_hang:kill (rc=137' <<<"$out" || fail "the SIGKILL case was not killed"
  [ -s "$f/term.info" ] || fail "the SIGTERM case did not finish its setup within its timeout"
  # the timed-out case cleaned up itself; only the killed one needed the runner's sweep
  assert_eq "$(grep -c 'runner: sweeping' <<<"$out")" 1 "cases swept by the runner"
  expect_gone "$f/term.info"
  expect_gone "$f/kill.info"
  # a daemon's sanitizer report fails a case that would pass
  grep -q 'FAIL  hang/test_hang:sanitizer (rc=1,' <<<"$out" || fail "a sanitizer report went unnoticed"
  grep -q 'runtime error: (planted by the test)' <<<"$out" || fail "the report was not shown"
}

# The runner stopped by SIGTERM (Ctrl-C, CI's own timeout) mid-case: it stops the case, exits
# 130 and leaves no wrapper of a shell case (/tmp/sbx-runsh.*: it left one before).
TEST_TIMEOUT_stopped_runner_leaves_nothing=60
test_stopped_runner_leaves_nothing() {
  daemon_init
  local f=$DAEMON_ROOT/fixture runner rc=0 w left=''
  mkdir -p "$f/stop"
  cat >"$f/stop/test_stop.sh" <<EOF2
#!/usr/bin/env bash
test_wait() { touch "$f/started"; sleep 100; }
source "$SBX_SRC_DIR/tests/lib/lib.sh" "\$@"
EOF2
  SBX_TESTS_DIR=$f "$SBX_SRC_DIR/tests/run" --build "$SBX_BUILD_DIR" --suite stop >"$f/out" 2>&1 &
  runner=$!
  for _ in $(seq 200); do [ -e "$f/started" ] && break; sleep 0.05; done
  [ -e "$f/started" ] || { kill -TERM "$runner"; fail "the fixture's case did not start: $(cat "$f/out")"; }
  kill -TERM "$runner"
  wait "$runner" || rc=$?
  assert_eq "$rc" 130 "the stopped runner's status"
  for w in /tmp/sbx-runsh.*; do
    grep -qF "$f/stop/" "$w" 2>/dev/null && left+=" $w"
  done
  [ -z "$left" ] || { rm -f $left; fail "the stopped runner left its wrapper:$left"; }
}

# A case's EXIT trap runs when its SIGTERM comes twice (as from `timeout`: to the case, then to
# its group), the second one as the first one's trap begins (tests/lib/lib.sh traps SIGTERM for
# that): 60 tries, the second SIGTERM 0 to 1 ms after the first (with only the EXIT trap, bash
# 5.2 lost it in a third of the tries 0.5 ms apart on a 2-core VM).
TEST_TIMEOUT_double_sigterm_runs_the_exit_trap=120
test_double_sigterm_runs_the_exit_trap() {
  local dir
  dir=$(mktemp -d "${SBX_CASE_DIR:-/tmp}/sbx-twice.XXXXXX")
  cat >"$dir/test_twice.sh" <<EOF2
#!/usr/bin/env bash
test_wait() {
  trap 'trap "" TERM INT; echo cleaned >&2' EXIT # (as daemon_cleanup begins)
  echo armed >&2
  sleep 100
}
source "$SBX_SRC_DIR/tests/lib/lib.sh" "\$@"
EOF2
  python3 - "$dir/test_twice.sh" <<'EOF' || fail "a case's EXIT trap did not run"
import os, signal, subprocess, sys, time
lost = []
for i in range(60):
    gap = (i % 6) * 0.0002
    p = subprocess.Popen(["bash", sys.argv[1], "wait"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        if p.stderr.readline() != b"armed\n":
            sys.exit("the case did not start")
        time.sleep(0.02)
        os.kill(p.pid, signal.SIGTERM)
        time.sleep(gap)
        os.killpg(p.pid, signal.SIGTERM)
        if b"cleaned" not in p.stderr.read():
            lost.append(gap)
        p.wait(timeout=10)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
print(f"the EXIT trap ran in {60 - len(lost)} of 60 tries; lost at gaps (s): {lost}")
sys.exit(1 if lost else 0)
EOF
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
