#!/usr/bin/env bash
# A fork's snapshot layer (the copy of the source's /workspace and /tmp on a tmpfs) is charged
# to the source sandbox's memory cgroup, never to the daemon's: the daemon runs in a memory
# cgroup of the test's own, whose peak must not grow by the 400 MB copied while the source's
# does; a source whose limit cannot take the copy fails the fork up front with 507
# insufficient_storage (and stays running, thawed, with nothing left behind); 900 MiB of holes
# stays holes in the copy and in the fork. Real daemon, real sandboxes (root).

DAEMON_TAG=forkmem
source "$(dirname "$0")/../lib/daemon.sh"

MB400=400000000

# cgroup v1 (the memory controller's own tree) or v2: a knob's path and the peak's name.
memcg_root() { [ -f /sys/fs/cgroup/cgroup.controllers ] && echo /sys/fs/cgroup || echo /sys/fs/cgroup/memory; }
peak_knob() { [ -f /sys/fs/cgroup/cgroup.controllers ] && echo memory.peak || echo memory.max_usage_in_bytes; }
usage_knob() { [ -f /sys/fs/cgroup/cgroup.controllers ] && echo memory.current || echo memory.usage_in_bytes; }

# The daemon in a memory cgroup of its own ($DCG), so that what is charged to it can be read.
start_in_memcg() {
  daemon_dirs
  DCG="$(memcg_root)/$CG-daemon"
  mkdir -p "$DCG"
  daemon_at_exit rm_daemon_memcg "$DCG"
  DAEMON_WRAP=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$DCG")
  start_daemon "$@"
}
rm_daemon_memcg() { # dir: once the daemon is gone (the cleanup stops it first)
  local p
  for p in $(cat "$1/cgroup.procs" 2>/dev/null); do echo "$p" >"$(memcg_root)/cgroup.procs" 2>/dev/null; done
  rmdir "$1" 2>/dev/null || true
}

knob() { cat "$1/$2"; } # dir knob
src_memcg() { echo "$(memcg_root)/$CG/$1"; }

write_big() { # id: 400 MB of random data (no runs of zeros to become holes) in /workspace
  req POST "/v1/sandboxes/$1/exec" -d "{\"argv\":[\"sh\",\"-c\",\"head -c $MB400 /dev/urandom > /workspace/big\"],\"timeout\":120}"
  expect 200 '.exit_code == 0'
}

TEST_TIMEOUT_fork_copy_charged_to_source=180
test_fork_copy_charged_to_source() {
  start_in_memcg
  create '{"memory":"1536Mi","disk":"2Gi"}'; local src=$ID
  write_big "$src"
  local dpeak0 suse0; dpeak0=$(knob "$DCG" "$(peak_knob)"); suse0=$(knob "$(src_memcg "$src")" "$(usage_knob)")
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1}'; expect 201 'length == 1'
  local fork; fork=$(echo "$BODY" | jq -r '.[0].id')
  local dgrew=$(( ($(knob "$DCG" "$(peak_knob)") - dpeak0) >> 20 ))
  local speak; speak=$(knob "$(src_memcg "$src")" "$(peak_knob)")
  echo "daemon's memcg peak grew by $dgrew MiB; source's peak $((speak >> 20)) MiB (usage before $((suse0 >> 20)) MiB)" >&2
  [ "$dgrew" -lt 100 ] || fail "the daemon's memory cgroup was charged $dgrew MiB by the fork's copy"
  [ "$speak" -ge $(( suse0 + MB400 * 9 / 10 )) ] || fail "the source's memory cgroup did not take the copy: peak $speak, usage before $suse0"
  req POST "/v1/sandboxes/$fork/exec" -d '{"argv":["sh","-c","wc -c < /workspace/big"]}'
  expect 200 ".stdout == \"$MB400\\n\""
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "the snapshot layer is still there"
}

TEST_TIMEOUT_fork_copy_over_source_limit=150
test_fork_copy_over_source_limit() {
  start_in_memcg
  create '{"memory":"512Mi","disk":"2Gi"}'; local src=$ID
  write_big "$src"
  local dpeak0; dpeak0=$(knob "$DCG" "$(peak_knob)")
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1}'
  expect 507 '.code == "insufficient_storage" and (.message | test("memory limit"))'
  local dgrew=$(( ($(knob "$DCG" "$(peak_knob)") - dpeak0) >> 20 ))
  [ "$dgrew" -lt 100 ] || fail "the daemon's memory cgroup was charged $dgrew MiB by the fork's copy"
  req GET /v1/sandboxes; expect 200 'length == 1'
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "the snapshot layer is still there"
  grep -q " $D/run/layers/" /proc/self/mountinfo && fail "a snapshot tmpfs is still mounted"
  # the source was thawed and still works
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","wc -c < /workspace/big"],"timeout":10}'
  expect 200 ".stdout == \"$MB400\\n\""
}

TEST_TIMEOUT_fork_keeps_900mi_of_holes=120
test_fork_keeps_900mi_of_holes() {
  start_in_memcg
  create '{"memory":"256Mi","disk":"2Gi"}'; local src=$ID
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","truncate -s 900M /workspace/holes && echo end >> /workspace/holes"]}'
  expect 200 '.exit_code == 0'
  local dpeak0; dpeak0=$(knob "$DCG" "$(peak_knob)")
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1}'; expect 201
  local fork; fork=$(echo "$BODY" | jq -r '.[0].id')
  local dgrew=$(( ($(knob "$DCG" "$(peak_knob)") - dpeak0) >> 20 ))
  [ "$dgrew" -lt 100 ] || fail "the daemon's memory cgroup grew by $dgrew MiB forking holes"
  local speak; speak=$(knob "$(src_memcg "$src")" "$(peak_knob)")
  [ "$speak" -lt $((256 << 20)) ] || fail "the source's memory cgroup peaked at $speak bytes"
  req POST "/v1/sandboxes/$fork/exec" -d '{"argv":["sh","-c","stat -c \"%s %b %B\" /workspace/holes; tail -c 4 /workspace/holes"]}'
  expect 200 '.exit_code == 0'
  local size blocks bsize; read -r size blocks bsize <<<"$(echo "$BODY" | jq -r .stdout | head -1)"
  [ "$size" == $((900 * 1048576 + 4)) ] || fail "the fork's file has size $size"
  [ $((blocks * bsize)) -lt $((1 << 20)) ] || fail "the fork's copy of 900 MiB of holes takes $((blocks * bsize)) bytes"
  echo "$BODY" | jq -e '.stdout | endswith("end\n")' >/dev/null || fail "the file's end differs: $BODY"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
