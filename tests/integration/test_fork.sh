#!/usr/bin/env bash
# Integration tests of POST /v1/sandboxes/{id}/fork: forks see the source's /workspace and /tmp
# as they were at fork time (owners mapped into their own uid range), later changes in the
# source or a sibling are invisible to the others, limits are the source's unless the body
# overrides them, the snapshot layer is gone once the forks have started, bad count -> 400,
# forking an ended sandbox -> 409. Each case starts its own daemon and removes what it made.

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
  # a fork that cannot hold the source's files fails as a whole, and leaves nothing behind
  # (random data: runs of zeros become holes in the snapshot, cp --sparse=always)
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["sh","-c","head -c 3000000 /dev/urandom > /workspace/big"]}'
  expect 200 '.exit_code == 0'
  req POST "/v1/sandboxes/$src/fork" -d '{"count":2,"disk":"2Mi"}'; expect 500 '.message | test("seed")'
  req GET /v1/sandboxes; expect 200 'length == 1 or all(.[]; .id == "'"$src"'" or .state == "ended")'
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "the snapshot layer is still there"
  req DELETE "/v1/sandboxes/$src"; expect 204
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1}'; expect 409 '.code == "conflict"'
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
