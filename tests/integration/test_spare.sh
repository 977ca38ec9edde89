#!/usr/bin/env bash
# Integration tests of spare shims (--spare-shims, sandboxd/core/spare.h): the daemon keeps an
# exec'd `sbx-shim spare` waiting; a create hands it the sandbox's directory (the sandbox's
# shim is that process, its argv then names the directory, so `sbx-shim cleanup` still knows
# it), a new spare takes its place, a spare that died is passed over, none with
# --spare-shims 0, a bad value is refused at start, and spares end with the daemon.
# A spare parks a sandbox's start ahead (shim/sandbox.h, shim_parked_make): its cgroup
# spare-<pid> and an init with its own namespaces, at nice 10; a native create adopts them
# (same init, same network namespace, the cgroup renamed with the create's limits, the shim,
# init and commands back at the daemon's priority, a mount namespace made after the hand-off
# that sees the daemon's later mounts; a grading create too); a gvisor create, a parked init
# that died, and the daemon's end or a kill leave no parked cgroup; a create handed to a parked
# init that is dying builds with an init of its own. The parked init also builds
# a host image's root ahead in a mount namespace of its own: a plain or grading create takes it
# (the same root, owners and sizes as one built at the create), one with a volume does not.
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

cg_dir() { # NAME -> the pids cgroup directory NAME under the daemon's parent (v1 or v2)
  if [ -d /sys/fs/cgroup/pids ]; then echo "/sys/fs/cgroup/pids/$CG/$1"; else echo "/sys/fs/cgroup/$CG/sandboxes/$1"; fi
}
parked_init() { # SPARE -> its parked init's pid, once it is in the spare's cgroup
  local p
  for _ in $(seq 100); do
    p=$(ps -o pid= --ppid "$1" | tr -d ' ' | head -n 1)
    [ -n "$p" ] && grep -q "/spare-$1\$" "/proc/$p/cgroup" 2>/dev/null &&
      [ "$(readlink "/proc/$p/ns/net")" != "$(readlink /proc/self/ns/net)" ] && { echo "$p"; return 0; }
    sleep 0.05
  done
  fail "spare $1 parked no init in its cgroup spare-$1"
}
no_spare_cgroups() { # WHAT SECONDS: no spare-* cgroup under the daemon's parent within SECONDS
  local left i
  for ((i = 0; i <= $2 * 10; i++)); do
    left=$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*$CG*" -name 'spare-*' 2>/dev/null || true)
    [ -z "$left" ] && return 0
    sleep 0.1
  done
  fail "$1: parked cgroups left: $left"
}
nice_of() { awk '{print $19}' "/proc/$1/stat"; } # PID -> its nice value
start_parked() { # a daemon with one spare: S its pid, INIT its parked init's
  start_daemon
  S=$(wait_spare)
  INIT=$(parked_init "$S")
}

TEST_TIMEOUT_parked=90
test_parked() {
  local S INIT net mnt HELD PARKED_MNT
  start_parked
  local s=$S init=$INIT
  parked_root "$init"
  net=$(readlink "/proc/$init/ns/net")
  [ -d "$(cg_dir "spare-$s")" ] || fail "no parked cgroup $(cg_dir "spare-$s")"
  assert_eq "$(nice_of "$s")" 10 "the spare's nice value while it waits"
  assert_eq "$(nice_of "$init")" 10 "the parked init's nice value"
  # a volume made after the spare parked: the daemon mounts its disk now, and the sandbox's mount
  # namespace, made at the hand-off, must see it (this host's / is private: nothing propagates)
  req POST /v1/volumes -d '{"name":"late","size":"16Mi"}'
  expect 201
  create '{"memory":"96Mi","pids":40,"volumes":[{"name":"late","path":"/late"}]}'
  assert_eq "$(cat "$D/run/sandboxes/$ID/shim.pid")" "$s" "the create's shim is the spare"
  assert_eq "$(ps -o pid= --ppid "$s" | tr -d ' ')" "$init" "the sandbox's init is the parked one"
  assert_eq "$(readlink "/proc/$init/ns/net")" "$net" "the sandbox's network namespace"
  grep -q "/$ID\$" "/proc/$init/cgroup" || fail "init is not in the sandbox's cgroup: $(cat "/proc/$init/cgroup")"
  [ ! -d "$(cg_dir "spare-$s")" ] || fail "the parked cgroup is still there after the hand-off"
  assert_eq "$(cat "$(cg_dir "$ID")/pids.max")" 40 "the sandbox's pids limit"
  if [ -d /sys/fs/cgroup/memory ]; then
    assert_eq "$(cat "/sys/fs/cgroup/memory/$CG/$ID/memory.limit_in_bytes")" $((96 << 20)) "memory limit"
  else
    assert_eq "$(cat "/sys/fs/cgroup/$CG/sandboxes/$ID/memory.max")" $((96 << 20)) "memory limit"
  fi
  mnt=$(readlink "/proc/$init/ns/mnt")
  [ "$mnt" != "$(readlink /proc/self/ns/mnt)" ] || fail "init shares the host's mount namespace"
  [ "$mnt" != "$PARKED_MNT" ] || fail "a create with a volume took the root built ahead"
  exec {HELD}<&-
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","echo v > /late/f && cat /late/f && id -u && awk \"{print \\$19}\" /proc/self/stat && hostname"]}'
  expect 200 ".exit_code == 0 and (.stdout | split(\"\n\")[0:3]) == [\"v\",\"1000\",\"0\"]"
  assert_eq "$(echo "$BODY" | jq -r '.stdout' | sed -n 4p)" "$(hostname_of "$ID")" "hostname"
  assert_eq "$(nice_of "$init")" 0 "the sandbox's init's nice value"
  assert_eq "$(nice_of "$s")" 0 "the sandbox's shim's nice value"
  req DELETE "/v1/sandboxes/$ID"; expect 204
}
hostname_of() { # ID -> the hostname its spec gave it
  jq -r .hostname "$D/run/sandboxes/$1/spec.json" 2>/dev/null
}

parked_root() { # INIT -> once it has built its root ahead: HELD an fd on its mount namespace
  # (kept alive, so that a namespace made later cannot get its inode), PARKED_MNT that namespace
  for _ in $(seq 100); do
    awk -v m="$D/run/spare-root" '$5 == m {f = 1} END {exit !f}' "/proc/$1/mountinfo" 2>/dev/null &&
      break
    sleep 0.05
  done
  awk -v m="$D/run/spare-root" '$5 == m {f = 1} END {exit !f}' "/proc/$1/mountinfo" ||
    fail "the parked init $1 built no root on $D/run/spare-root"
  exec {HELD}<"/proc/$1/ns/mnt"
  PARKED_MNT=$(readlink "/proc/$1/ns/mnt")
}
# What a sandbox's root looks like from inside: owners, modes, mounts and their options (in
# order of mount point: a grading root built ahead gets its own after /proc and /dev), what the
# masks show, sizes, names (the sandbox's id replaced by ID); no times (the two roots may be
# built in different minutes).
LISTING='for p in / /etc /etc/* /tmp /workspace /dev /dev/* /dev/pts/ptmx /var /var/tmp /home /root \
  /run /usr /proc /proc/kcore /proc/sys /proc/acpi /bin /lib /grader /home/* /.sbx /.sbx/* \
  /.sbx/bin/*; do
  [ -e "$p" ] || [ -L "$p" ] && stat -c "%n %u %g %a %F %s" "$p"; done
awk "{print \$5, \$6, \$9, \$10, \$11}" /proc/self/mountinfo | sed "s/size=[0-9]*k*,//" | sort
cat /proc/keys /proc/timer_list | wc -c; ls -A /proc/acpi | wc -l; ps -e | wc -l
(echo 1 > /proc/sys/kernel/printk) 2>/dev/null || echo ro
df -k /tmp /dev/shm | awk "NR > 1 {print \$2}"; id; hostname
cat /etc/hostname /etc/hosts /etc/resolv.conf /etc/passwd /etc/group; ls -la --time-style=+ /dev /tmp /workspace'
listing() { # ID -> LISTING run in it
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -n --arg c "$LISTING" '{argv: ["sh", "-c", $c]}')"
  expect 200 '.exit_code == 0'
  jq -r .stdout <<<"$BODY" | sed "s/$1/ID/g"
}

# A create of BODY takes the root its parked init built ahead, and lists the same from inside
# as the same create on a daemon without spares, whose root is built at the create.
same_root_as_built() {
  local S INIT HELD PARKED_MNT ahead built
  start_parked
  parked_root "$INIT"
  ! mountpoint -q "$D/run/spare-root" || fail "the parked root is mounted in the host's namespace"
  [ -z "$(ls -A "$D/run/spare-root")" ] || fail "the host sees files in $D/run/spare-root"
  create "$1"
  assert_eq "$(ps -o pid= --ppid "$S" | tr -d ' ')" "$INIT" "the sandbox's init is the parked one"
  assert_eq "$(readlink "/proc/$INIT/ns/mnt")" "$PARKED_MNT" "the sandbox's mount namespace"
  exec {HELD}<&-
  ahead=$(listing "$ID")
  echo "$ahead" | grep -qx '/workspace 1000 1000 755 directory 40' || fail "the listing: $ahead"
  echo "$ahead" | grep -qx 'uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)' ||
    fail "the listing: $ahead"
  # the same create on a daemon without spares (and the same uid slot: this sandbox goes first)
  req DELETE "/v1/sandboxes/$ID"; expect 204
  stop_daemon
  start_daemon --spare-shims 0
  create "$1"
  built=$(listing "$ID")
  [ "$ahead" == "$built" ] || fail "a root built ahead and one built at the create differ:
$(diff <(echo "$ahead") <(echo "$built"))"
  LISTED=$ahead
}

TEST_TIMEOUT_parked_root=90
test_parked_root() { # sizes other than the defaults: the disk and /dev/shm are set at the hand-off
  local LISTED
  same_root_as_built '{"memory":"100Mi","disk":"200Mi","pids":50}'
  echo "$LISTED" | grep -q '^/grader' && fail "a sandbox that is not grading has /grader"
  return 0
}

TEST_TIMEOUT_parked_root_grading=90
test_parked_root_grading() { # the root built ahead gets a grading sandbox's users, dirs and /proc
  local LISTED
  same_root_as_built '{"profile":"grading","memory":"256Mi","disk":"300Mi"}'
  echo "$LISTED" | grep -qx '/grader 1001 1001 700 directory 40' || fail "no /grader: $LISTED"
  echo "$LISTED" | grep -q '^/proc .* proc rw,.*hidepid=invisible' || fail "/proc: $LISTED"
  echo "$LISTED" | grep -qx 'grader:x:1001:1001:grader:/home/grader:/bin/sh' ||
    fail "/etc/passwd: $LISTED"
}

TEST_TIMEOUT_parked_grading=60
test_parked_grading() { # a grading sandbox adopts the parked init: both users, sbx-as-agent
  local S INIT
  start_parked
  create '{"profile":"grading","memory":"256Mi","pids":64}'
  assert_eq "$(ps -o pid= --ppid "$S" | tr -d ' ')" "$INIT" "the grading sandbox's init is the parked one"
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","id -u; sbx-as-agent -- id -u"],"user":"grader"}'
  expect 200 '.exit_code == 0 and .stdout == "1001\n1000\n"'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","id -u; ls /grader"]}'
  expect 200 '(.stdout | startswith("1000\n")) and .exit_code != 0'
}

TEST_TIMEOUT_taken_early=60
test_taken_early() { # a create right after the start may take a spare still parking (at nice 10)
  start_daemon
  create
  local shim init
  shim=$(cat "$D/run/sandboxes/$ID/shim.pid")
  init=$(ps -o pid= --ppid "$shim" | tr -d ' ')
  assert_eq "$(nice_of "$shim")" 0 "the shim's nice value"
  assert_eq "$(nice_of "$init")" 0 "init's nice value"
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["awk","{print $19}","/proc/self/stat"]}'
  expect 200 '.stdout == "0\n"'
}

TEST_TIMEOUT_parked_passed_over=90
test_parked_passed_over() {
  local S INIT s2 init2
  start_parked
  local s=$S init=$INIT
  # a gvisor sandbox builds its own init: the parked one goes, with its cgroup
  create '{"isolation":"gvisor","memory":"128Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["id","-u"]}'; expect 200 '.stdout == "1000\n"'
  [ "$(ps -o pid= --ppid "$s" | tr -d ' ')" != "$init" ] || fail "the gvisor sandbox kept the parked init"
  pid_alive "$init" && fail "the parked init $init outlived the gvisor build"
  [ ! -d "$(cg_dir "spare-$s")" ] || fail "the gvisor build left the parked cgroup"
  # a parked init that died: the create forks its own, and the parked cgroup goes
  s2=$(wait_spare "$s")
  init2=$(parked_init "$s2")
  kill -KILL "$init2"
  # dead, not dying: a create in the few ms a SIGKILLed init takes to exit (longer under ASan)
  # can still be handed to it, and then fails "init went away"
  gone_within "$init2" 5 || fail "the parked init $init2 did not die"
  create
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'; expect 200 '.exit_code == 0'
  assert_eq "$(cat "$D/run/sandboxes/$ID/shim.pid")" "$s2" "the create's shim is the second spare"
  [ ! -d "$(cg_dir "spare-$s2")" ] || fail "the dead parked init's cgroup is left"
  # a spare killed while parked: its empty cgroup is removed when a create passes it over
  local s3; s3=$(wait_spare "$s2")
  parked_init "$s3" >/dev/null
  kill -KILL "$s3"
  gone_within "$s3" 5 || fail "spare $s3 did not die"
  create
  for _ in $(seq 50); do [ -d "$(cg_dir "spare-$s3")" ] || break; sleep 0.1; done
  [ ! -d "$(cg_dir "spare-$s3")" ] || fail "the killed spare's cgroup is left after a create passed it over"
}

# A parked init killed right before a create, 20 times: the create may be handed to it in the
# few ms a SIGKILLed init takes to exit (longer under ASan); the spare then builds the sandbox
# with an init of its own. Each create succeeds, its shim is the spare, and no parked cgroup is
# left (it failed "init went away" when the hand-off came before the init's exit).
TEST_TIMEOUT_parked_killed_at_create=180
test_parked_killed_at_create() {
  start_daemon
  local s="" init round failed=0 why=""
  for round in $(seq 20); do
    s=$(wait_spare "$s")
    init=$(parked_init "$s")
    kill -KILL "$init"
    req POST /v1/sandboxes -d '{}'
    if [ "$CODE" != 201 ]; then
      failed=$((failed + 1)) why="$why; $CODE $(echo "$BODY" | jq -r .message)"
      continue
    fi
    ID=$(echo "$BODY" | jq -r .id)
    assert_eq "$(cat "$D/run/sandboxes/$ID/shim.pid")" "$s" "round $round: the create's shim is the spare"
    req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'; expect 200 '.exit_code == 0'
    req DELETE "/v1/sandboxes/$ID"; expect 204
    [ ! -d "$(cg_dir "spare-$s")" ] || fail "round $round: the killed parked init's cgroup is left"
  done
  [ "$failed" == 0 ] || fail "$failed of 20 creates failed with the parked init killed${why}"
}

TEST_TIMEOUT_parked_cleanup=90
test_parked_cleanup() {
  start_daemon --spare-shims 2
  local s
  for _ in $(seq 100); do [ "$(spares | grep -c .)" == 2 ] && break; sleep 0.05; done
  for s in $(spares); do parked_init "$s" >/dev/null; done
  stop_daemon # SIGTERM: the daemon waits until its spares removed what they parked
  no_spare_cgroups "after the daemon's SIGTERM" 0
  start_daemon --spare-shims 2
  for _ in $(seq 100); do [ "$(spares | grep -c .)" == 2 ] && break; sleep 0.05; done
  for s in $(spares); do parked_init "$s" >/dev/null; done
  kill -KILL "$DPID"; wait "$DPID" 2>/dev/null || true
  no_spare_cgroups "after the daemon was killed" 5
  # a parked cgroup whose spare is gone (left by a killed spare) goes at the daemon's start
  local dead c; sleep 0 & dead=$!; wait "$dead"
  for c in /sys/fs/cgroup/*/"$CG" /sys/fs/cgroup/"$CG"/sandboxes; do
    [ -d "$c" ] && mkdir "$c/spare-$dead"
  done
  [ -d "$(cg_dir "spare-$dead")" ] || fail "could not make a stale parked cgroup"
  start_daemon --spare-shims 1
  [ ! -d "$(cg_dir "spare-$dead")" ] || fail "the daemon's start left the stale cgroup spare-$dead"
}

source "$(dirname "$0")/../lib/lib.sh"
