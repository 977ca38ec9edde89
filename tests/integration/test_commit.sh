#!/usr/bin/env bash
# Integration tests of POST /v1/sandboxes/{id}/commit: a running sandbox of a store image becomes
# a new image (its image's layers, shared on disk, plus one layer of its writable layer and its
# /workspace and /tmp); 32 sandboxes created from it see the files, and a file of the image
# that the sandbox deleted stays deleted; FIFOs are left out; a setuid file is refused (400
# naming it) unless "setuid":"strip"; name clash 409, bad name 400, unknown field 400, unknown
# sandbox 404, a sandbox of the host image 409; the CLI and Python; a commit survives a daemon
# restart and serves warm pools and forks; a gvisor sandbox commits too. Each case starts its own
# daemon and removes what it made.

DAEMON_TAG=commit
source "$(dirname "$0")/../lib/daemon.sh"
MK="$(dirname "$0")/mkimage.py"

import_base() { # a two-layer OCI image t:v1 with mkfifo and chmod besides mkimage.py's tools
  MKIMAGE_EXTRA_BINS="mkfifo chmod" python3 "$MK" oci "$D/base.tar" || fail "mkimage"
  req POST "/v1/images?name=t:v1" -H 'Content-Type: application/x-tar' --data-binary @"$D/base.tar"
  expect 201 '(.layers | length) == 2'
}
run_in() { # ID SCRIPT -> BODY (exit code 0 expected)
  local body; body=$(jq -cn --arg s "$2" '{argv:["sh","-c",$s]}')
  req POST "/v1/sandboxes/$1/exec" -d "$body"
  expect 200 '.exit_code == 0'
}
tmp_empty() { # the store's tmp/ holds nothing of a commit (bounded wait)
  for _ in $(seq 50); do
    [ -z "$(ls -A "$D/state/images/tmp")" ] && return 0
    sleep 0.1
  done
  fail "left in the store's tmp/: $(ls -A "$D/state/images/tmp")"
}

TEST_TIMEOUT_commit_then_32_creates=150
TEST_PASS_commit_then_32_creates=sanitized # (once: tests/README.md)
test_commit_then_32_creates() {
  start_daemon --max-sandboxes 9
  import_base
  create '{"image":"t:v1"}'
  local src=$ID
  run_in "$src" 'echo hello > /workspace/w.txt && mkdir -p /workspace/d /app/sub && echo app > /app/sub/a.txt &&
    echo tmp > /tmp/t && rm /home/user/notes && echo mine > /app/README && mkfifo /workspace/fifo /app/fifo2'
  req POST "/v1/sandboxes/$src/commit" -d '{"name":"py-ready:1"}'
  expect 201 '.name == "py-ready:1" and (.layers | length) == 3 and (.freeze_ms | type) == "number" and .committed_from != null'
  echo "freeze_ms=$(echo "$BODY" | jq .freeze_ms)"
  # the two base layers are shared on disk, one new layer
  [ "$(ls "$D/state/images/layers" | wc -l)" == 3 ] || fail "layers: $(ls "$D/state/images/layers")"
  req GET /v1/images/py-ready:1; expect 200 '(.layers | length) == 3'
  tmp_empty
  # the source was thawed and goes on
  run_in "$src" 'cat /workspace/w.txt && echo more >> /workspace/w.txt'
  [ "$(echo "$BODY" | jq -r .stdout)" == hello ] || fail "source after commit: $BODY"
  req POST "/v1/sandboxes/$src/commit" -d '{"name":"py-ready:1"}'
  expect 409 '.message | contains("py-ready:1")'
  req DELETE "/v1/sandboxes/$src"; expect 204
  local want='hello
app
tmp
mine
sandbox
no-notes no-fifo no-fifo2 keep2'
  local n=0 batch i ids
  for batch in 1 2 3 4; do
    ids=()
    for i in $(seq 8); do
      create '{"image":"py-ready:1"}'
      ids+=("$ID")
    done
    for i in "${ids[@]}"; do
      run_in "$i" 'cat /workspace/w.txt /app/sub/a.txt /tmp/t /app/README; stat -c %U /workspace/w.txt
        k=notes; [ -e /home/user/notes ] || k=no-notes; f=fifo; [ -e /workspace/fifo ] || f=no-fifo
        g=fifo2; [ -e /app/fifo2 ] || g=no-fifo2; echo "$k $f $g $(cat /data/keep2)"'
      [ "$(echo "$BODY" | jq -r .stdout)" == "$want" ] || fail "sandbox $i of the commit: $BODY"
      n=$((n + 1))
    done
    for i in "${ids[@]}"; do req DELETE "/v1/sandboxes/$i"; expect 204; done
  done
  [ "$n" == 32 ] || fail "only $n sandboxes checked"
  # a commit of a sandbox of a commit: one more layer, the earlier ones shared
  create '{"image":"py-ready:1"}'
  run_in "$ID" 'echo two > /workspace/w2.txt'
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"py-ready:2"}'
  expect 201 '(.layers | length) == 4'
  req DELETE "/v1/sandboxes/$ID"; expect 204
  create '{"image":"py-ready:2"}'
  run_in "$ID" 'cat /workspace/w.txt /workspace/w2.txt'
  [ "$(echo "$BODY" | jq -r .stdout)" == "hello
two" ] || fail "commit of a commit: $BODY"
  req DELETE "/v1/sandboxes/$ID"; expect 204
  req DELETE /v1/images/py-ready:2; expect 204
  req DELETE /v1/images/py-ready:1; expect 204
  req DELETE /v1/images/t:v1; expect 204
  for _ in $(seq 50); do [ -z "$(ls -A "$D/state/images/layers")" ] && break; sleep 0.1; done
  [ -z "$(ls -A "$D/state/images/layers")" ] || fail "layers left: $(ls "$D/state/images/layers")"
}

# A gvisor sandbox commits as a native one does (its files are the host side's: runsc writes
# through with --file-access=shared); sandboxes of both classes start from the commit.
TEST_TIMEOUT_gvisor_commit=90
test_gvisor_commit() {
  command -v runsc >/dev/null || skip "runsc (gVisor) is not installed: apt-get install runsc"
  start_daemon
  import_base
  create '{"image":"t:v1","isolation":"gvisor"}'
  local src=$ID iso
  run_in "$src" 'echo hello > /workspace/w.txt && mkdir -p /app/sub && echo app > /app/sub/a.txt &&
    echo tmp > /tmp/t && rm /home/user/notes && cat /proc/version'
  [[ "$(echo "$BODY" | jq -r .stdout)" != *"$(uname -r)"* ]] || fail "not under gVisor: $BODY"
  req POST "/v1/sandboxes/$src/commit" -d '{"name":"gv:1"}'
  expect 201 '.name == "gv:1" and (.layers | length) == 3 and .committed_from != null'
  run_in "$src" 'cat /workspace/w.txt' # thawed, goes on
  for iso in gvisor native; do
    create "{\"image\":\"gv:1\",\"isolation\":\"$iso\"}"
    run_in "$ID" 'cat /workspace/w.txt /app/sub/a.txt /tmp/t; [ -e /home/user/notes ] || echo no-notes'
    [ "$(echo "$BODY" | jq -r .stdout)" == "hello
app
tmp
no-notes" ] || fail "a $iso sandbox of the commit: $BODY"
    req DELETE "/v1/sandboxes/$ID"; expect 204
  done
  tmp_empty
}

TEST_TIMEOUT_commit_setuid=60
test_commit_setuid() {
  start_daemon
  import_base
  create '{"image":"t:v1"}'
  run_in "$ID" 'echo x > /workspace/s && chmod 4755 /workspace/s && mkdir /app/g && chmod 2775 /app/g'
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"su:1"}'
  expect 400 '.message | contains("/workspace/s") and contains("setuid")'
  req GET /v1/images/su:1; expect 404
  tmp_empty
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"su:1","setuid":"strip"}'
  expect 201
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"su:2","setuid":"maybe"}'
  expect 400 '.message | startswith("setuid")'
  create '{"image":"su:1"}'
  run_in "$ID" 'stat -c %a /workspace/s /app/g'
  [ "$(echo "$BODY" | jq -r .stdout)" == "755
2775" ] || fail "stripped: $BODY"
}

TEST_TIMEOUT_commit_bad_input=60
test_commit_bad_input() {
  start_daemon
  import_base
  create '{"image":"t:v1"}'
  local id=$ID
  req POST "/v1/sandboxes/$id/commit" -d '{"name":"Bad Name!"}'
  expect 400 '.code == "invalid_argument" and (.message | startswith("name"))'
  req POST "/v1/sandboxes/$id/commit" -d '{}'
  expect 400 '.message | startswith("name")'
  req POST "/v1/sandboxes/$id/commit" -d '{"name":"ok:1","tag":"x"}'
  expect 400 '.message | startswith("tag")'
  req POST "/v1/sandboxes/$id/commit" -d '{"name":"t:v1"}'
  expect 409 '.message | contains("t:v1")'
  req POST /v1/sandboxes/sb-nope/commit -d '{"name":"ok:1"}'
  expect 404
  create '{}'
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"ok:1"}'
  expect 409 '.message | contains("store image")'
  req GET /v1/images/ok:1; expect 404
  tmp_empty
}

TEST_TIMEOUT_commit_cli_and_python=60
test_commit_cli_and_python() {
  start_daemon
  import_base
  create '{"image":"t:v1"}'
  local src=$ID out rc=0
  run_in "$src" 'echo via-clients > /workspace/c.txt'
  out=$(env $(asan_env) SBX_HOST="unix:$SOCK" "$SBX_BUILD_DIR/sbx" commit "$src" cli:1) || fail "sbx commit: $out"
  [[ "$out" =~ ^cli:1\ freeze_ms=[0-9]+$ ]] || fail "sbx commit printed: $out"
  env $(asan_env) SBX_HOST="unix:$SOCK" "$SBX_BUILD_DIR/sbx" commit "$src" cli:1 2>"$D/err" || rc=$?
  [ "$rc" != 0 ] && grep -q "cli:1" "$D/err" || fail "sbx commit of a taken name: rc=$rc $(cat "$D/err")"
  out=$(env $(asan_env) SBX_HOST="unix:$SOCK" SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" \
    PYTHONPATH="$SBX_SRC_DIR/python" PYTHONDONTWRITEBYTECODE=1 python3 -c '
import sys
from sandboxd import Sandbox
img = Sandbox.attach(sys.argv[1]).commit("py:1")
assert img["name"] == "py:1" and isinstance(img["freeze_ms"], int), img
sb = Sandbox.create(image="py:1")
try:
    print(sb.read_file("/workspace/c.txt").decode(), end="")
finally:
    sb.terminate()
' "$src" 2>&1) || fail "python: $out"
  [ "$out" == via-clients ] || fail "python commit: $out"
  req GET /v1/images/cli:1; expect 200 '(.layers | length) == 3'
}

TEST_TIMEOUT_commit_pool_restart_fork=90
test_commit_pool_restart_fork() { # a commit outlives its daemon; pools and forks take its name
  start_daemon
  import_base
  create '{"image":"t:v1"}'
  run_in "$ID" 'echo pooled > /workspace/p.txt && echo up > /app/up.txt'
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"pool-me:1"}'; expect 201
  req DELETE "/v1/sandboxes/$ID"; expect 204
  stop_daemon
  start_daemon --pool 'size=1,image=pool-me:1,cpu=0.5,memory=256Mi'
  wait_ready 1 30
  req POST /v1/sandboxes -d '{"image":"pool-me:1","cpu":0.5,"memory":"256Mi"}'
  expect 201 '.pooled == true and .image == "pool-me:1"'
  local src; src=$(echo "$BODY" | jq -r .id)
  run_in "$src" 'cat /workspace/p.txt /app/up.txt; echo forked >> /workspace/p.txt'
  [ "$(echo "$BODY" | jq -r .stdout)" == "pooled
up" ] || fail "pooled sandbox of a commit: $BODY"
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1}'
  expect 201 'length == 1 and .[0].image == "pool-me:1"'
  run_in "$(echo "$BODY" | jq -r '.[0].id')" 'cat /workspace/p.txt'
  [ "$(echo "$BODY" | jq -r .stdout)" == "pooled
forked" ] || fail "fork of a sandbox of a commit: $BODY"
  req DELETE /v1/images/pool-me:1; expect 409
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
