#!/usr/bin/env bash
# Integration tests of POST /v1/sandboxes/{id}/commit: a running sandbox of a store image becomes
# a new image (its image's layers, shared on disk, plus one layer of its writable layer and its
# /workspace and /tmp); 32 sandboxes created from it see the files, and a file of the image
# that the sandbox deleted stays deleted; FIFOs are left out; a setuid file is refused (400
# naming it) unless "setuid":"strip"; name clash 409, bad name 400, unknown field 400, unknown
# sandbox 404, a sandbox of the host image 409; the CLI and Python; a commit survives a daemon
# restart and serves warm pools and forks; a gvisor sandbox commits too; hard-linked files keep
# their owner and one inode, counted once in the size; a file with more attribute names than
# 4 KiB loses the overlay's own. Each case starts its own daemon and removes what it made.

DAEMON_TAG=commit
source "$(dirname "$0")/../lib/daemon.sh"
MK="$(dirname "$0")/mkimage.py"

import_base() { # a two-layer OCI image t:v1 with mkfifo, chmod, ln and head besides mkimage.py's
  MKIMAGE_EXTRA_BINS="mkfifo chmod ln head" python3 "$MK" oci "$D/base.tar" || fail "mkimage"
  req POST "/v1/images?name=t:v1" -H 'Content-Type: application/x-tar' --data-binary @"$D/base.tar"
  expect 201 '(.layers | length) == 2'
}
run_in() { # ID SCRIPT -> BODY (exit code 0 expected)
  local body; body=$(jq -cn --arg s "$2" '{argv:["sh","-c",$s]}')
  req POST "/v1/sandboxes/$1/exec" -d "$body"
  expect 200 '.exit_code == 0'
}
new_layer() { # IMAGE -> LAYER: the host directory of its top layer (the commit's own)
  req GET "/v1/images/$1"; expect 200
  LAYER=$D/state/images/layers/$(echo "$BODY" | jq -r '.layers[-1].digest | ltrimstr("sha256:")')
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

# Hard links (cp -a keeps them): each inode is fixed once, so every name of it keeps the
# sandbox user's ids (a second unshift made it nobody's) and its size counts once.
TEST_TIMEOUT_commit_hard_links=60
test_commit_hard_links() {
  start_daemon
  import_base
  create '{"image":"t:v1"}'
  local src=$ID l1 size0 out want
  run_in "$src" 'head -c 1048576 /dev/urandom > /workspace/a && ln /workspace/a /workspace/b &&
    echo p > /workspace/plain && mkdir /workspace/d && ln /workspace/a /workspace/d/c &&
    ln -s a /workspace/s && ln -P /workspace/s /workspace/s2 &&
    echo u > /app/u && mkdir /app/d && ln /app/u /app/d/u2 && echo q > /app/plain'
  req POST "/v1/sandboxes/$src/commit" -d '{"name":"hl:1"}'; expect 201
  new_layer hl:1; l1=$LAYER
  out=$(cd "$l1" && stat -c '%n %u %g %h' workspace/a workspace/b workspace/d/c workspace/plain \
    workspace/s workspace/s2 app/u app/d/u2 app/plain)
  want='workspace/a 1000 1000 3
workspace/b 1000 1000 3
workspace/d/c 1000 1000 3
workspace/plain 1000 1000 1
workspace/s 1000 1000 2
workspace/s2 1000 1000 2
app/u 1000 1000 2
app/d/u2 1000 1000 2
app/plain 1000 1000 1'
  [ "$out" == "$want" ] || fail "the layer's owners and links: $out"
  [ "$(stat -c %i "$l1/workspace/a")" == "$(stat -c %i "$l1/workspace/d/c")" ] &&
    [ "$(stat -c %i "$l1/app/u")" == "$(stat -c %i "$l1/app/d/u2")" ] || fail "links broken in the layer"
  # the same commit without the links has the same size: the 1 MiB file counts once
  run_in "$src" 'rm /workspace/b /workspace/d/c /workspace/s2 /app/d/u2'
  req POST "/v1/sandboxes/$src/commit" -d '{"name":"hl:0"}'; expect 201
  size0=$(echo "$BODY" | jq '.layers[-1].size')
  req GET /v1/images/hl:1
  expect 200 ".layers[-1].size >= 1048576 and ([.layers[-1].size - $size0, $size0 - .layers[-1].size] | max) < 262144"
  # a sandbox of the commit: one inode of the sandbox user's (as a plain file) under each name
  create '{"image":"hl:1"}'
  run_in "$ID" 'stat -c "%u %g %h %i" /workspace/plain /workspace/a /workspace/b /app/plain \
    /app/u /app/d/u2'
  out=$(echo "$BODY" | jq -r .stdout)
  [ "$(awk '{print $1, $2}' <<<"$out" | sort -u)" == "1000 1000" ] ||
    fail "owners in a sandbox of the commit: $out"
  [ "$(awk '{printf "%s ", $3}' <<<"$out")" == "1 3 3 1 2 2 " ] &&
    [ "$(awk 'NR == 2 || NR == 3 {print $4}' <<<"$out" | sort -u | wc -l)" == 1 ] &&
    [ "$(awk 'NR == 5 || NR == 6 {print $4}' <<<"$out" | sort -u | wc -l)" == 1 ] ||
    fail "links in a sandbox of the commit: $out"
  tmp_empty
}

# A file with more attribute names than the 4 KiB a fixed buffer held (the sandbox user may set
# any number of user.* ones): the overlay's own trusted.overlay.* are still dropped, the
# sandbox's user.* kept. The store is a tmpfs, which holds such a list (ext4 holds one block).
TEST_TIMEOUT_commit_many_xattrs=60
test_commit_many_xattrs() {
  daemon_dirs
  mkdir -p "$D/state"
  mount -t tmpfs -o size=256m sbx-commit-xattrs "$D/state" || fail "mount a tmpfs" # (the sweep
  # unmounts it)
  start_daemon
  import_base
  create '{"image":"t:v1"}'
  local init l
  run_in "$ID" 'echo x > /workspace/x && echo y > /app/y'
  init=$(jq .init_pid "$D/state/sandboxes/$ID.json")
  # /app/y in the upper directory itself, where the overlay's own attributes are (init holds it
  # open on fd 900: SHIM_UPPER_FD)
  python3 - "/proc/$init/root/workspace/x" "/proc/$init/fd/900/app/y" <<'EOF' || fail "setxattr"
import os, sys
for p in sys.argv[1:]:
    for i in range(40):  # 40 names of 209 bytes: 8 KiB
        os.setxattr(p, "user.%03d.%s" % (i, "n" * 200), b"v")
    os.setxattr(p, "trusted.overlay.sbx-test", b"y")
EOF
  req POST "/v1/sandboxes/$ID/commit" -d '{"name":"xa:1"}'; expect 201
  new_layer xa:1; l=$LAYER
  python3 - "$l/workspace/x" "$l/app/y" <<'EOF' || fail "the layer's attributes"
import os, sys
for p in sys.argv[1:]:
    names = os.listxattr(p, follow_symlinks=False)
    user = [n for n in names if n.startswith("user.")]
    left = [n for n in names if n.startswith("trusted.overlay.")]
    if len(user) != 40 or left:
        sys.exit("%s: %d user.* attributes, the overlay's left: %s" % (p, len(user), left))
EOF
  create '{"image":"xa:1"}'
  run_in "$ID" 'cat /workspace/x /app/y'
  [ "$(echo "$BODY" | jq -r .stdout)" == "x
y" ] || fail "a sandbox of the commit: $BODY"
  tmp_empty
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

# A commit's image keeps its base's WorkingDir, and whether it is there is the committed files':
# the sandbox removed it (/app/sub, which the sandbox user owns), made it, or made it below
# /workspace (in the seed that fills a sandbox's /workspace). Before, the image kept its base's
# workdir_exists: every command without a cwd failed ("exec chdir /app/sub") in the first, and
# ran in /workspace rather than the WorkingDir in the others.
TEST_TIMEOUT_commit_workdir=120
test_commit_workdir() {
  start_daemon
  local name image script wd
  for name in app-sub-gone app-sub-made in-workspace-made; do
    case $name in
      app-sub-gone) image=workdir-app-sub wd=/app/sub script='rm -r /app/sub' ;;
      app-sub-made) image=workdir-app-sub wd=/app/sub script='mkdir /app/sub' ;;
      in-workspace-made) image=workdir-in-workspace wd=/workspace/app script='mkdir /workspace/app' ;;
    esac
    [ "$name" == app-sub-gone ] && export MKIMAGE_APP_SUB=1
    python3 "$MK" oci "$D/$name.tar" "$image" || fail "mkimage $image"
    unset MKIMAGE_APP_SUB
    req POST "/v1/images?name=$name:v1" -H 'Content-Type: application/x-tar' --data-binary @"$D/$name.tar"
    local had=false; [ "$name" == app-sub-gone ] && had=true
    expect 201 ".workdir == \"$wd\" and .workdir_exists == $had"
    create "{\"image\":\"$name:v1\"}"
    req POST "/v1/sandboxes/$ID/exec" -d "$(jq -cn --arg s "$script" '{argv:["sh","-c",$s],cwd:"/"}')"
    expect 200 '.exit_code == 0'
    req POST "/v1/sandboxes/$ID/commit" -d "{\"name\":\"$name:v2\"}"
    expect 201 ".workdir == \"$wd\" and .workdir_exists == (\"$had\" != \"true\")"
    req GET "/v1/images/$name:v2"; expect 200 ".workdir_exists == (\"$had\" != \"true\")"
    create "{\"image\":\"$name:v2\"}"
    run_in "$ID" 'pwd'
    if [ "$had" == true ]; then
      expect 200 '.stdout == "/workspace\n"'
    else
      expect 200 ".stdout == \"$wd\n\""
    fi
  done
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
