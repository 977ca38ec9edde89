#!/usr/bin/env bash
# uid slots held back (quarantined) while a process of an ended sandbox may still run under its
# uid range, against a real daemon and real sandboxes (root): after a failed `sbx-shim cleanup`,
# after a shim teardown that left the sandbox's cgroup, at the end of a paused sandbox whose failed
# resume's cleanup failed, and across a daemon killed and restarted meanwhile (docs/DAEMON.md
# "Restarts"). The survivor is a `sleep` the test runs under a uid of
# the sandbox's range; each case ends it by its pid (kill_survivor, also at exit).
# Helpers: rel.sh (daemon, HTTP, leak_counts).

source "$(dirname "$0")/rel.sh"
source "$(dirname "$0")/../lib/pause.sh" # need_criu

# A `sbx-shim cleanup` that fails while a process of its sandbox lives on (a stand-in shim fails
# the cleanup of one run dir, doing nothing, after the sandbox's shim was killed; the survivor is
# a `sleep` the test runs under a uid of the sandbox's range in the sandbox's cgroups, as one that
# outlived its pid namespace would be): the uid slot is quarantined. No later sandbox gets that
# uid range while the survivor lives, the slot takes room (/v1/info quarantined_slots and
# free_slots, a create past it answers 503, the metric), and once the survivor is gone the slot
# comes back: the whole capacity is free and the next sandbox gets that range again. Before,
# the slot was given to the next sandbox at once.
SURVIVOR=''
kill_survivor() { [ -z "$SURVIVOR" ] || { kill -9 "$SURVIVOR"; wait "$SURVIVOR" || true; } 2>/dev/null; SURVIVOR=""; }
start_survivor() { # UID: a `sleep 300` as SURVIVOR, returned once it runs under UID (before
  # setpriv's setreuid it is root's, and a check of the slot's uids then rightly finds none)
  setpriv --reuid "$1" --regid "$1" --clear-groups sleep 300 &
  SURVIVOR=$!
  local _
  for _ in $(seq 200); do
    [ "$(awk '/^Uid:/ {print $2}' "/proc/$SURVIVOR/status" 2>/dev/null)" == "$1" ] && return 0
    sleep 0.05
  done
  fail "the survivor ($SURVIVOR) never ran under uid $1"
}
uid_base() { # ID -> the host uid its uid 0 maps to
  req POST "/v1/sandboxes/$1/exec" -d '{"argv":["cat","/proc/self/uid_map"]}'; expect 200
  echo "$BODY" | jq -r .stdout | awk '{print $2}'
}
wrap_shim() { # -> $D/shim-wrap: sbx-shim, whose `cleanup` of the run dir named in
  # $D/fail-cleanup, while it is there, fails doing nothing (noted in $D/cleanups-failed), or,
  # with $D/cleanup-removes, fails as the real one does when it cannot remove the sandbox's
  # cgroup (it removes the run dir, exit 1); whose run of the run dir named in $D/fail-start
  # exits 1 at once (a start that fails); REAL: the real sbx-shim
  REAL=$(cd "$(dirname "$(bin sbx-shim)")" && pwd)/sbx-shim
  cat >"$D/shim-wrap" <<EOF
#!/bin/sh
if [ "\$1" = cleanup ] && [ -e "\$2" ] && [ "\${2##*/}" = "\$(cat "$D/fail-cleanup" 2>/dev/null)" ]; then
  echo "\$2" >>"$D/cleanups-failed"
  [ ! -e "$D/cleanup-removes" ] || rm -rf "\$2"
  exit 1
fi
[ \$# = 1 ] && [ "\${1##*/}" = "\$(cat "$D/fail-start" 2>/dev/null)" ] && exit 1
exec "$REAL" "\$@"
EOF
  chmod +x "$D/shim-wrap"
}
failed_cleanup_survivor() { # -> A: a sandbox whose failed cleanup (the daemon runs
  # $D/shim-wrap) left SURVIVOR under uid BASE + 1000 in its cgroups; its slot quarantined
  create; A=$ID; BASE=$(uid_base "$A")
  local shim init; shim=$(jq .shim_pid "$D/state/sandboxes/$A.json"); init=$(jq .init_pid "$D/state/sandboxes/$A.json")
  daemon_at_exit kill_survivor
  start_survivor $((BASE + 1000))
  local ctl path n=0
  while IFS=: read -r _ ctl path; do # init's cgroups (v1: one per controller; v2: "0::path")
    [[ "$path" == */"$CG"/* && "$ctl" != name=* ]] || continue
    echo "$SURVIVOR" >"/sys/fs/cgroup/${ctl:+$ctl}$path/cgroup.procs" && n=$((n + 1))
  done <"/proc/$init/cgroup"
  [ $n -gt 0 ] || fail "no cgroup of $A's init to put the survivor in: $(cat "/proc/$init/cgroup")"
  echo "$A" >"$D/fail-cleanup"
  kill -9 "$shim"
  req_until 10 '.state == "ended"' GET "/v1/sandboxes/$A"; expect 200 '.state == "ended"'
  for _ in $(seq 100); do [ -s "$D/cleanups-failed" ] && break; sleep 0.1; done
  [ -s "$D/cleanups-failed" ] || fail "the daemon ran no sbx-shim cleanup for $A"
  pid_alive "$SURVIVOR" || fail "the survivor ($SURVIVOR) should outlive the failed cleanup"
  req_until 5 '.quarantined_slots == 1' GET /v1/info # (without the quarantine: the slot is free by then)
}

# A BASE B C: the end of a failed cleanup's quarantine (A's survivor, under BASE's range, killed
# while B and C run): the slot comes back, the whole capacity is free once B and C are gone, and
# the next sandbox gets BASE's range again; then A's run dir cleaned for real, nothing left.
survivor_gone_slot_back() {
  local a=$1 base=$2 b=$3 c=$4
  kill_survivor
  req_until 15 '.quarantined_slots == 0' GET /v1/info; expect 200 '.quarantined_slots == 0 and .free_slots == 1'
  [ "$(metric sandboxd_uid_slots_quarantined)" == 0 ] || fail "sandboxd_uid_slots_quarantined is not 0"
  req DELETE "/v1/sandboxes/$b"; expect 204; req DELETE "/v1/sandboxes/$c"; expect 204
  req_until 10 '.free_slots == 3' GET /v1/info; expect 200 '.free_slots == 3'
  create; [ "$(uid_base "$ID")" == "$base" ] || fail "uid range $base was not handed out again once it was free"
  req DELETE "/v1/sandboxes/$ID"; expect 204
  rm -f "$D/fail-cleanup"
  "$REAL" cleanup "$D/run/sandboxes/$a" || fail "the real cleanup of $a's run dir failed"
  wait_no_leaks 20
}

# slot_held A BASE WHY LOG SECONDS: while A's survivor lives under BASE's range, two creates get
# other ranges (WHY: what happened to A), the quarantined slot is no capacity (503), the log says
# "uid slot ... quarantined: LOG", and SECONDS later it is still held; then it comes back once
# the survivor is gone (survivor_gone_slot_back).
slot_held() {
  local a=$1 base=$2 b c id
  create; b=$ID; create; c=$ID
  for id in "$b" "$c"; do
    [ "$(uid_base "$id")" != "$base" ] || fail "$id got uid range $base of $a ($3) while its process $SURVIVOR (uid $((base + 1000))) lives"
  done
  req GET /v1/info; expect 200 '.quarantined_slots == 1 and .free_slots == 0 and .active_sandboxes == 2 and .starting == 0'
  [ "$(metric sandboxd_uid_slots_quarantined)" == 1 ] || fail "sandboxd_uid_slots_quarantined is not 1"
  req POST /v1/sandboxes -d '{}'; expect 503 # the quarantined slot is no capacity
  grep -q "uid slot .* quarantined: $4" "$D/log" || fail "no log line for the quarantine: $4"
  sleep "$5" # its checks (the stand-in's cleanup fails again) hold it while the survivor lives
  req GET /v1/info; expect 200 '.quarantined_slots == 1'
  survivor_gone_slot_back "$a" "$base" "$b" "$c"
}

TEST_TIMEOUT_failed_cleanup_quarantines_slot=90
test_failed_cleanup_quarantines_slot() {
  rel_setup
  wrap_shim
  DAEMON_SHIM=$D/shim-wrap start_daemon --max-sandboxes 3 --spare-shims 0
  failed_cleanup_survivor; local a=$A base=$BASE
  slot_held "$a" "$base" "whose cleanup failed" "sbx-shim cleanup of sandbox=$a failed" 2
}

# The same after an ordinary DELETE whose shim's teardown fails with a process of the sandbox left
# in its cgroup (a `sleep` the test runs under a uid of the sandbox's range; v1: in a cgroup `keep`
# the test makes inside each of the sandbox's, which the shim's kill, reading the sandbox's own
# cgroup.procs, does not see, and whose rmdir fails with EBUSY; v2, whose cgroup.kill reaches
# `keep`: `keep` stays empty, only failing the rmdir, and the sleep runs in a cgroup beside the
# sandbox's). The shim logs it, removes its run dir and exits; the slot is quarantined as the
# sleep lives, and once it is gone the sandbox's cgroups are removed and the slot comes back.
# Before, on_shim_lost freed the slot at once and the next sandbox got the sleep's uid range.
# Ordinary ends, native and gVisor, leave no cgroup and quarantine nothing.
TEST_TIMEOUT_teardown_left_cgroup_quarantines_slot=150
test_teardown_left_cgroup_quarantines_slot() {
  rel_setup
  start_daemon --max-sandboxes 3 --spare-shims 0
  create; local a=$ID base; base=$(uid_base "$a")
  local shim init; shim=$(jq .shim_pid "$D/state/sandboxes/$a.json"); init=$(jq .init_pid "$D/state/sandboxes/$a.json")
  daemon_at_exit kill_survivor
  start_survivor $((base + 1000))
  local ctl path dirs=() dir beside=''
  while IFS=: read -r _ ctl path; do # init's cgroups (v1: one per controller; v2: "0::path")
    [[ "$path" == */"$CG"/* && "$ctl" != name=* ]] && dirs+=("/sys/fs/cgroup/${ctl:+$ctl}$path")
  done <"/proc/$init/cgroup"
  [ ${#dirs[@]} -gt 0 ] || fail "no cgroup of $a's init: $(cat "/proc/$init/cgroup")"
  for dir in "${dirs[@]}"; do mkdir "$dir/keep"; done
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    beside=${dirs[0]}.left; mkdir "$beside"; echo "$SURVIVOR" >"$beside/cgroup.procs"
  else
    for dir in "${dirs[@]}"; do echo "$SURVIVOR" >"$dir/keep/cgroup.procs"; done
  fi
  req DELETE "/v1/sandboxes/$a"; expect 204
  for _ in $(seq 300); do pid_alive "$shim" || break; sleep 0.1; done # (2 s of rmdir tries a cgroup)
  pid_alive "$shim" && fail "the shim ($shim) of $a did not exit"
  grep -q "teardown: cgroup: rmdir" "$D/log" || fail "the shim's teardown did not fail: $(grep teardown "$D/log")"
  [ ! -d "$D/run/sandboxes/$a" ] || fail "the shim left its run dir"
  pid_alive "$SURVIVOR" || fail "the survivor ($SURVIVOR) should outlive the teardown"
  req_until 5 '.quarantined_slots == 1' GET /v1/info; expect 200 '.quarantined_slots == 1 and .free_slots == 2'
  grep -q "uid slot .* quarantined: the shim's teardown of sandbox=$a left its cgroup" "$D/log" || fail "no log line for the quarantine"
  local b c id
  create; b=$ID; create; c=$ID
  for id in "$b" "$c"; do
    [ "$(uid_base "$id")" != "$base" ] || fail "$id got uid range $base of $a, whose teardown left its process $SURVIVOR (uid $((base + 1000)))"
  done
  req POST /v1/sandboxes -d '{}'; expect 503 # the quarantined slot is no capacity
  sleep 1 # its checks hold it while the survivor lives
  req GET /v1/info; expect 200 '.quarantined_slots == 1 and .free_slots == 0'
  if [ -n "$beside" ]; then
    rmdir "${dirs[0]}/keep"; kill_survivor; rmdir "$beside"
  else # the survivor into the sandbox's own cgroups, so that they stay populated until it ends
    for dir in "${dirs[@]}"; do echo "$SURVIVOR" >"$dir/cgroup.procs"; rmdir "$dir/keep"; done
    kill_survivor
  fi
  req_until 15 '.quarantined_slots == 0' GET /v1/info; expect 200 '.quarantined_slots == 0 and .free_slots == 1'
  for dir in "${dirs[@]}"; do [ ! -d "$dir" ] || fail "$a's cgroup $dir was not removed"; done
  req DELETE "/v1/sandboxes/$b"; expect 204; req DELETE "/v1/sandboxes/$c"; expect 204
  req_until 10 '.free_slots == 3' GET /v1/info; expect 200 '.free_slots == 3 and .quarantined_slots == 0'
  create; [ "$(uid_base "$ID")" == "$base" ] || fail "uid range $base was not handed out again once it was free"
  req DELETE "/v1/sandboxes/$ID"; expect 204
  # gVisor's (runsc --ignore-cgroups: its processes stay in the cgroups of the sandbox's init)
  # ordinary end leaves none of them either
  create '{"isolation":"gvisor"}'; shim=$(jq .shim_pid "$D/state/sandboxes/$ID.json"); init=$(jq .init_pid "$D/state/sandboxes/$ID.json")
  dirs=(); while IFS=: read -r _ ctl path; do
    [[ "$path" == */"$CG"/* && "$ctl" != name=* ]] && dirs+=("/sys/fs/cgroup/${ctl:+$ctl}$path")
  done <"/proc/$init/cgroup"
  [[ ${#dirs[@]} -gt 0 && "${dirs[0]}" == */"$ID" ]] || fail "no cgroup of $ID's init: $(cat "/proc/$init/cgroup")"
  req DELETE "/v1/sandboxes/$ID"; expect 204
  for _ in $(seq 100); do pid_alive "$shim" || break; sleep 0.1; done
  for dir in "${dirs[@]}"; do [ ! -d "$dir" ] || fail "$ID's ordinary end left its cgroup $dir"; done
  req_until 10 '.free_slots == 3' GET /v1/info; expect 200 '.free_slots == 3 and .quarantined_slots == 0'
  [ "$(grep -c "uid slot .* quarantined" "$D/log")" == 1 ] || fail "an ordinary end quarantined a slot: $(grep quarantined "$D/log")"
  wait_no_leaks 20
}

# The same across a restart: the daemon is killed (SIGKILL) while the slot is quarantined and
# started again. The restarted daemon knew nothing of the quarantine (the sandbox's record is
# ended, with no slot); it finds the survivor under the slot's uids, in the sandbox's cgroup left
# in its subtree (one scan of /proc at start), and quarantines the slot again: no later sandbox
# gets that range while the survivor lives, and the slot comes back once the survivor is gone.
# Before, the restarted daemon handed the slot to its next sandbox.
TEST_TIMEOUT_restart_keeps_quarantine=120
test_restart_keeps_quarantine() {
  rel_setup
  wrap_shim
  DAEMON_SHIM=$D/shim-wrap start_daemon --max-sandboxes 3 --spare-shims 0
  failed_cleanup_survivor; local a=$A base=$BASE
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  DAEMON_SHIM=$D/shim-wrap start_daemon --max-sandboxes 3 --spare-shims 0
  pid_alive "$SURVIVOR" || fail "the survivor ($SURVIVOR) should outlive the daemon's restart"
  slot_held "$a" "$base" "after the daemon's restart" \
    "the daemon restarted with the cgroup $a of an earlier run left" 1
}

# A resume that fails (the stand-in's shim exits at its start), whose `sbx-shim cleanup` fails
# while a process of the sandbox lives on (the stand-in fails as the real one does when it cannot
# remove the sandbox's cgroup: the run dir removed, exit 1; the survivor is a `sleep` under a uid
# of the sandbox's range in cgroups of the sandbox's name under the daemon's parent, as a
# restored process the cleanup could not kill would be): the sandbox stays paused with its slot.
# When it ends (DELETE), the end's cleanup finds no run dir and succeeds having done nothing: the
# slot is quarantined as after a failed cleanup, and comes back once the survivor is gone (the
# cgroups it kept removed). Before, that success freed the slot at once and the next sandbox got
# the survivor's uid range.
TEST_TIMEOUT_failed_resume_cleanup_quarantines_slot=120
test_failed_resume_cleanup_quarantines_slot() {
  rel_setup
  need_criu
  wrap_shim
  DAEMON_SHIM=$D/shim-wrap start_daemon --max-sandboxes 3 --spare-shims 0
  create '{"pausable":true}'; local a=$ID base; base=$(uid_base "$a")
  req POST "/v1/sandboxes/$a/pause"; expect 200 '.state == "paused"'
  daemon_at_exit kill_survivor
  start_survivor $((base + 1000))
  local cg n=0
  for cg in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"; do # v1: each controller's; v2: one
    [ -d "$cg" ] || continue
    mkdir -p "$cg/$a"; echo "$SURVIVOR" >"$cg/$a/cgroup.procs"; n=$((n + 1))
  done
  [ $n -gt 0 ] || fail "no cgroup parent $CG to put the survivor in"
  echo "$a" >"$D/fail-start"; echo "$a" >"$D/fail-cleanup"; touch "$D/cleanup-removes"
  req POST "/v1/sandboxes/$a/resume"; expect 500 '.message | startswith("resume:")'
  for _ in $(seq 100); do [ -s "$D/cleanups-failed" ] && break; sleep 0.1; done
  [ -s "$D/cleanups-failed" ] || fail "the daemon ran no sbx-shim cleanup after $a's failed resume"
  [ ! -e "$D/run/sandboxes/$a" ] || fail "the stand-in's failed cleanup left $a's run dir"
  pid_alive "$SURVIVOR" || fail "the survivor ($SURVIVOR) should outlive the failed cleanup"
  req_until 5 '.state == "paused"' GET "/v1/sandboxes/$a"; expect 200 '.state == "paused"'
  req GET /v1/info; expect 200 '.quarantined_slots == 0'
  rm -f "$D/fail-start"
  req DELETE "/v1/sandboxes/$a"; expect 204
  req_until 5 '.quarantined_slots == 1' GET /v1/info
  expect 200 '.quarantined_slots == 1 and .free_slots == 2'
  slot_held "$a" "$base" "whose failed resume's cleanup failed" \
    "sbx-shim cleanup of sandbox=$a found no run dir" 1
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
