#!/usr/bin/env bash
# Integration tests of POST /v1/sandboxes/{id}/fork: forks see the source's /workspace and /tmp
# as they were at fork time (owners mapped into their own uid range), later changes in the
# source or a sibling are invisible to the others, limits are the source's unless the body
# overrides them, the snapshot layer is gone once the forks have started, bad count -> 400,
# forking an ended sandbox -> 409; a fork's room is held through its copy; forks share the
# snapshot's pages instead of copying it
# (an overlay over an id-mapped snapshot, shim/seed.c), and each still changes only its own
# view. Each case starts its own daemon and removes what it made.

DAEMON_TAG=fork
source "$(dirname "$0")/../lib/daemon.sh"

TEST_TIMEOUT_fork_copies_state=90
test_fork_copies_state() {
  start_daemon
  req POST /v1/sandboxes -d '{"cpu":0.5,"memory":"256Mi","labels":{"role":"template"},"env":{"E":"src"}}'
  expect 201; local src; src=$(echo "$BODY" | jq -r .id)
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","mkdir -p /workspace/d && echo task > /workspace/d/f && chmod 640 /workspace/d/f && ln -s /etc/passwd /workspace/link && echo t > /tmp/t"]}'
  expect 200 '.exit_code == 0'
  req POST "/v1/sandboxes/$src/fork" -d '{"count":3,"labels":{"role":"episode"}}'
  expect 201 'length == 3 and all(.[]; .state == "running" and .labels.role == "episode" and .limits.cpu == 0.5 and .limits.memory == 268435456)'
  echo "$BODY" | jq -e --arg s "$src" 'all(.[]; .forked_from == $s and .id != $s)' >/dev/null || fail "forked_from: $BODY"
  local forks; forks=$(echo "$BODY" | jq -r '.[].id')
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "the snapshot layer is still there: $(ls "$D/run/layers")"
  local i=0
  for f in $forks; do
    i=$((i + 1))
    req POST "/v1/sandboxes/$f/exec" -d '{"argv":["sh","-c","cat /workspace/d/f /tmp/t; stat -c %U:%a /workspace/d/f; readlink /workspace/link; echo $E"]}'
    expect 200 '.exit_code == 0'
    echo "$BODY" | jq -e '.stdout == "task\nt\nsandbox:640\n/etc/passwd\nsrc\n"' >/dev/null || fail "fork $f: $BODY"
    req POST "/v1/sandboxes/$f/exec" -d "{\"argv\":[\"sh\",\"-c\",\"echo $i > /workspace/d/f && touch /workspace/only-$i\"]}"
    expect 200 '.exit_code == 0'
  done
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","echo changed > /workspace/d/f; ls /workspace"]}'
  expect 200 '.stdout == "d\nlink\n"' # nothing of the forks' writes
  i=0
  for f in $forks; do
    i=$((i + 1))
    req POST "/v1/sandboxes/$f/exec" -d '{"argv":["sh","-c","cat /workspace/d/f; ls /workspace | grep only-"]}'
    echo "$BODY" | jq -e --arg i "$i" '.stdout == "\($i)\nonly-\($i)\n"' >/dev/null || fail "fork $f sees others: $BODY"
  done
  # a fork of a fork, with overridden limits
  local first; first=$(echo "$forks" | head -1)
  req POST "/v1/sandboxes/$first/fork" -d '{"count":1,"memory":"512Mi"}'
  expect 201 'length == 1 and .[0].limits.memory == 536870912 and .[0].limits.cpu == 0.5'
  local ff; ff=$(echo "$BODY" | jq -r '.[0].id')
  req POST "/v1/sandboxes/$ff/exec" -d '{"argv":["cat","/workspace/d/f"]}'
  expect 200 '.stdout == "1\n"'
  req GET /metrics; expect 200
}

# Eight forks of a source with 48 MB of files: the forks share the snapshot (their memory
# cgroups do not each hold a copy, df in each shows only its own changes), and every way a
# fork can change a shared file stays its own: append, delete, rename of a directory of the
# snapshot, chmod; owners are the fork's own. (As with any overlay, changing a shared file,
# even its mode, copies it into the fork's disk first.)
TEST_TIMEOUT_forks_share_the_snapshot=120
test_forks_share_the_snapshot() {
  start_daemon
  req POST /v1/sandboxes -d '{"memory":"512Mi","disk":"128Mi"}'; expect 201
  local src; src=$(echo "$BODY" | jq -r .id)
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","mkdir -p /workspace/repo/sub && head -c 48000000 /dev/urandom > /workspace/repo/blob && echo v1 > /workspace/repo/sub/f && echo t > /tmp/t && sha256sum /workspace/repo/blob | cut -d\" \" -f1"]}'
  expect 200 '.exit_code == 0'; local sum; sum=$(echo "$BODY" | jq -r .stdout | tr -d '\n')
  req POST "/v1/sandboxes/$src/fork" -d '{"count":8,"disk":"16Mi"}'; expect 201 'length == 8'
  local forks; forks=$(echo "$BODY" | jq -r '.[].id')
  local f i=0 used mem
  for f in $forks; do
    i=$((i + 1))
    # reading the whole blob in every fork: the page cache is the snapshot's, shared
    req POST "/v1/sandboxes/$f/exec" -d '{"argv":["sh","-c","sha256sum /workspace/repo/blob | cut -d\" \" -f1; df -k /workspace | tail -1 | tr -s \" \" | cut -d\" \" -f3; stat -c %U /workspace/repo/blob"]}'
    expect 200 '.exit_code == 0'
    [ "$(echo "$BODY" | jq -r .stdout | sed -n 1p)" = "$sum" ] || fail "fork $f reads: $BODY"
    used=$(echo "$BODY" | jq -r .stdout | sed -n 2p)
    [ "$used" -lt 4096 ] || fail "fork $f: its disk holds ${used} KiB, a copy of the snapshot"
    [ "$(echo "$BODY" | jq -r .stdout | sed -n 3p)" = sandbox ] || fail "fork $f: owner $BODY"
    req GET "/v1/sandboxes/$f"; mem=$(echo "$BODY" | jq .usage.memory_bytes)
    [ "$mem" -lt 24000000 ] || fail "fork $f holds $mem bytes of memory: a copy of the 48 MB blob"
    req POST "/v1/sandboxes/$f/exec" -d "{\"argv\":[\"sh\",\"-c\",\"echo $i >> /workspace/repo/sub/f && mv /workspace/repo/sub /workspace/repo/moved-$i && rm /tmp/t && chmod 600 /workspace/repo/moved-$i/f && echo ok\"]}"
    expect 200 '.exit_code == 0 and .stdout == "ok\n"'
  done
  i=0
  for f in $forks; do
    i=$((i + 1))
    req POST "/v1/sandboxes/$f/exec" -d '{"argv":["sh","-c","cat /workspace/repo/moved-*/f; ls /workspace/repo; ls /tmp; stat -c %a /workspace/repo/moved-*/f"]}'
    expect 200 '.exit_code == 0'
    echo "$BODY" | jq -e --arg i "$i" '.stdout == "v1\n\($i)\nblob\nmoved-\($i)\n600\n"' >/dev/null ||
      fail "fork $f sees more than its own changes: $BODY"
  done
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","cat /workspace/repo/sub/f /tmp/t; stat -c %a /workspace/repo/sub/f"]}'
  expect 200 '.stdout == "v1\nt\n644\n"'
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "the snapshot layer is still listed"
}

TEST_TIMEOUT_fork_errors=60
test_fork_errors() {
  start_daemon --max-sandboxes 3
  req POST /v1/sandboxes -d '{}'; expect 201; local src; src=$(echo "$BODY" | jq -r .id)
  req POST "/v1/sandboxes/$src/fork" -d '{"count":0}'; expect 400 '.code == "invalid_argument"'
  req POST "/v1/sandboxes/$src/fork" -d '{"count":"2"}'; expect 400
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1000}'; expect 400
  req POST "/v1/sandboxes/$src/fork" -d '{}'; expect 400
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1,"cpu":"lots"}'; expect 400 '.message | startswith("cpu")'
  req POST "/v1/sandboxes/$src/fork" -d '{"count":3}'; expect 503 '.code == "node_full"'
  req GET "/v1/sandboxes/$src/fork"; expect 405
  req POST /v1/sandboxes/sb-0123456789abcdef/fork -d '{"count":1}'; expect 404
  # a fork's disk counts what it changes, not the shared snapshot: a 2 MiB fork of 3 MB of
  # files starts, reads them, and runs out of room when it writes 3 MB of its own
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","head -c 3000000 /dev/urandom > /workspace/big && sha256sum /workspace/big"]}'
  expect 200 '.exit_code == 0'; local sum; sum=$(echo "$BODY" | jq -r .stdout)
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1,"disk":"2Mi"}'; expect 201 'length == 1'
  local small; small=$(echo "$BODY" | jq -r '.[0].id')
  req POST "/v1/sandboxes/$small/exec" -d '{"argv":["sha256sum","/workspace/big"]}'
  expect 200 '.exit_code == 0'; [ "$(echo "$BODY" | jq -r .stdout)" = "$sum" ] || fail "fork reads $BODY"
  req POST "/v1/sandboxes/$small/exec" -d '{"argv":["sh","-c","head -c 3000000 /dev/zero > /workspace/mine"]}'
  expect 200 '.exit_code != 0 and (.stderr | test("No space left"))'
  req DELETE "/v1/sandboxes/$small"; expect 204
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "the snapshot layer is still there"
  req DELETE "/v1/sandboxes/$src"; expect 204
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1}'; expect 409 '.code == "conflict"'
}

# An admitted fork holds its room while it copies: a create meanwhile finds the node full, and
# the forks start within --max-sandboxes (a create used to be let in, and the forks then
# started past the limit). The copy's cp (the daemon's files worker's child) is stopped while
# the create is made, so that the copy cannot end first, and continued after.
# The pid of the daemon's fork copy (a cp, the child of a files worker, a child of the daemon),
# while the fork request (pid $1) is in flight; reads /proc without starting processes, so
# that a copy of a few tens of milliseconds is seen. Fails when the request ends first.
fork_cp() {
  local kids w g comm
  while kill -0 "$1" 2>/dev/null; do # (these files end without a newline: read stops at EOF)
    kids=() && read -r -d '' -a kids <"/proc/$DPID/task/$DPID/children"
    for w in "${kids[@]}"; do
      g=() && read -r -d '' -a g <"/proc/$w/task/$w/children" 2>/dev/null
      [ "${#g[@]}" -gt 0 ] && read -r comm <"/proc/${g[0]}/comm" 2>/dev/null && [ "$comm" = cp ] &&
        { echo "${g[0]}"; return 0; }
    done
  done
  return 1
}
TEST_TIMEOUT_fork_holds_its_room=120
test_fork_holds_its_room() {
  start_daemon --max-sandboxes 3
  req POST /v1/sandboxes -d '{"disk":"2Gi"}'; expect 201; local src; src=$(echo "$BODY" | jq -r .id)
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","head -c 200000000 /dev/urandom > /workspace/big"]}'
  expect 200 '.exit_code == 0'
  curl -s --max-time 60 --unix-socket "$SOCK" -X POST -o "$D/fork.body" -w '%{http_code}' \
    -d '{"count":2}' "http://sd/v1/sandboxes/$src/fork" >"$D/fork.code" &
  local fk=$! cp
  cp=$(fork_cp "$fk") || { wait "$fk"; fail "the fork's copy ended before it could be held (make the file bigger)"; }
  kill -STOP "$cp" || { wait "$fk"; fail "the fork's copy ended before it could be held (make the file bigger)"; }
  req POST /v1/sandboxes -d '{}'
  local during=$CODE dbody=$BODY
  req GET /v1/info; local info=$BODY
  kill -CONT "$cp"
  wait "$fk" || fail "the fork's request failed"
  [ "$(cat "$D/fork.code")" = 201 ] || fail "the fork: $(cat "$D/fork.code") $(cat "$D/fork.body")"
  [ "$during" = 503 ] || fail "a create during the fork's copy: $during $dbody (the fork's room was free)"
  echo "$dbody" | jq -e '.code == "node_full"' >/dev/null || fail "a create during the copy: $dbody"
  echo "$info" | jq -e '.free_slots == 0 and .starting == 2' >/dev/null || fail "info during the copy: $info"
  req GET /v1/sandboxes; expect 200 'length == 3'
  req GET /v1/info; expect 200 '.free_slots == 0 and .active_sandboxes == 3'
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
