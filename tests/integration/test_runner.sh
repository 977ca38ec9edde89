#!/usr/bin/env bash
# The runner (tests/run) and the daemon helper (tests/lib/daemon.sh) clean up after cases the
# runner has to stop: a case past its timeout gets SIGTERM (its EXIT trap ends its daemon and
# sandboxes), and a case that ignores SIGTERM is killed and its leftovers swept from its
# $SBX_CASE_DIR: daemon, shims, sandboxes, cgroups, files. A sanitizer report in a daemon's log
# fails a case.

DAEMON_TAG=runner
source "$(dirname "$0")/../lib/daemon.sh"

# A fixture suite: two cases that start a daemon with a sandbox and never end, one whose daemon
# log holds a (planted) sanitizer report.
write_fixture() { # DIR
  mkdir -p "$1/hang"
  cat >"$1/hang/test_hang.sh" <<EOF2
#!/usr/bin/env bash
source "$SBX_SRC_DIR/tests/lib/daemon.sh"
# (a daemon and a sandbox first: ~1 s, 3 s on a slow day; the SIGTERM must come during the sleep:
# bash 5.2 may lose its EXIT trap to a SIGTERM that lands while it forks, as in the setup's curls)
TEST_TIMEOUT_term=15
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

source "$(dirname "$0")/../lib/lib.sh" "$@"
