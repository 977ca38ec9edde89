#!/usr/bin/env bash
# Integration tests of named volumes (docs/API.md "Volumes") with real daemons and sandboxes: a
# volume shared read-only by 16 sandboxes (all read the same data, none can write); a writable
# volume used by one sandbox at a time (409s naming the holder, forks refused, released by
# DELETE, by a timeout, by the cost cap and across a daemon kill -9), whose files outlive the sandbox and a
# restart and keep their owner in sandboxes of other uid ranges (id-mapped mounts); the size
# limit (ENOSPC inside, the daemon fine); every bad input a 4xx naming the field; "on_idle"; a
# record the restart cannot read (the data kept, the volume listed as broken, deletable); and
# nothing left behind (image file, mount, loop device) after a delete.

DAEMON_TAG=volumes
source "$(dirname "$0")/../lib/daemon.sh"

need_tools() {
  command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is needed (e2fsprogs, tests/deps.sh)"
  [ -e /dev/loop-control ] || skip "loop devices are needed (/dev/loop-control)"
}
run_in() { # ID SCRIPT -> BODY (exit code 0 expected)
  local body; body=$(jq -cn --arg s "$2" '{argv:["sh","-c",$s]}')
  req POST "/v1/sandboxes/$1/exec" -d "$body"
  expect 200 '.exit_code == 0'
}
run_rc() { # ID SCRIPT -> BODY (any exit code)
  local body; body=$(jq -cn --arg s "$2" '{argv:["sh","-c",$s]}')
  req POST "/v1/sandboxes/$1/exec" -d "$body"
  expect 200
}
vol_create() { # NAME SIZE
  req POST /v1/volumes -d "{\"name\":\"$1\",\"size\":\"$2\"}"
  expect 201 ".name == \"$1\" and .state == \"ready\" and .in_use_by == []"
}
no_leaks() { # NAME: after its delete no record, image, mount or loop device is left (bounded wait)
  local img="$D/state/volumes/$1.img" i
  for i in $(seq 50); do
    losetup -a | grep -qF "$img" || break
    sleep 0.1
  done
  losetup -a | grep -F "$img" && fail "a loop device still holds $img"
  [ ! -e "$img" ] && [ ! -e "$D/state/volumes/$1.mnt" ] && [ ! -e "$D/state/volumes/$1.json" ] ||
    fail "left in the state dir: $(ls "$D/state/volumes")"
  ! grep -qF "$D/state/volumes/$1.mnt" /proc/self/mountinfo || fail "$1 is still mounted"
  req GET "/v1/volumes/$1"; expect 404
}

TEST_TIMEOUT_shared_read_only=120
test_shared_read_only() { # one volume, 16 sandboxes reading it at once, none can write
  need_tools
  start_daemon --max-sandboxes 20
  vol_create data 32Mi
  create '{"volumes":[{"name":"data","path":"/data"}]}'
  run_in "$ID" 'head -c 1000000 /dev/urandom > /data/set.bin && mkdir /data/sub && echo v1 > /data/sub/tag'
  local want
  run_in "$ID" 'sha256sum /data/set.bin | cut -d" " -f1'; want=$(echo "$BODY" | jq -r .stdout)
  req DELETE "/v1/sandboxes/$ID"; expect 204
  local ids=() i
  for i in $(seq 16); do
    create '{"volumes":[{"name":"data","path":"/mnt/data","read_only":true}],"memory":"128Mi"}'
    ids+=("$ID")
  done
  req GET /v1/volumes/data; expect 200 '(.in_use_by | length) == 16 and all(.in_use_by[]; .read_only)'
  for i in "${ids[@]}"; do
    run_rc "$i" 'sha256sum /mnt/data/set.bin | cut -d" " -f1; cat /mnt/data/sub/tag
      touch /mnt/data/new 2>&1 || echo cannot-write; rm /mnt/data/sub/tag 2>&1 || echo cannot-rm
      stat -c %U /mnt/data/set.bin; grep " /mnt/data " /proc/self/mountinfo | grep -o "ro,nosuid,nodev"'
    echo "$BODY" | jq -e --arg w "$want" '.stdout | startswith($w + "\nv1\n")' >/dev/null || fail "sandbox $i reads: $BODY"
    echo "$BODY" | jq -e '.stdout | contains("Read-only file system") and contains("cannot-write") and contains("cannot-rm") and contains("sandbox\nro,nosuid,nodev")' >/dev/null ||
      fail "sandbox $i could write to the read-only volume, or its mount is not ro,nosuid,nodev: $BODY"
  done
  # while shared read-only: no writable use, no delete
  req POST /v1/sandboxes -d '{"volumes":[{"name":"data","path":"/data"}]}'
  expect 409 '.message | contains("data") and contains("in use by sandbox")'
  req DELETE /v1/volumes/data; expect 409 '.message | contains("in use by sandbox")'
  for i in "${ids[@]}"; do req DELETE "/v1/sandboxes/$i"; expect 204; done
  req GET /v1/volumes/data; expect 200 '.in_use_by == [] and .used > 1000000'
  req DELETE /v1/volumes/data; expect 204
  no_leaks data
  req GET /v1/volumes; expect 200 '. == []'
}

TEST_TIMEOUT_writable_one_at_a_time=150
test_writable_one_at_a_time() { # the data outlives sandboxes and restarts; one writer at a time
  need_tools
  start_daemon
  vol_create cache 64Mi
  create '{"volumes":[{"name":"cache","path":"/workspace/cache"}]}'; local a=$ID
  run_in "$a" 'echo from-a > /workspace/cache/f && mkdir -p /workspace/cache/d && echo own > /workspace/own && cat /proc/self/uid_map'
  local map_a; map_a=$(echo "$BODY" | jq -r .stdout | awk '{print $2}')
  run_in "$a" 'grep " /workspace/cache " /proc/self/mountinfo'
  echo "$BODY" | jq -e '.stdout | contains(" rw,nosuid,nodev,") and contains("idmapped")' >/dev/null ||
    fail "the writable volume's mount: $BODY"
  # on disk the owner is the sandbox user's own id (1000), not the host id of a's range
  [ "$(stat -c %u:%g "$D/state/volumes/cache.mnt/f")" == 1000:1000 ] ||
    fail "owner on disk: $(stat -c %u:%g "$D/state/volumes/cache.mnt/f") (uid_map base $map_a)"
  req POST /v1/sandboxes -d '{"volumes":[{"name":"cache","path":"/c"}]}'
  expect 409 ".code == \"conflict\" and (.message | contains(\"volume cache is in use by sandbox $a\") and contains(\"one sandbox at a time\"))"
  req POST /v1/sandboxes -d '{"volumes":[{"name":"cache","path":"/c","read_only":true}]}'
  expect 409 ".message | contains(\"$a (writable)\")"
  # a fork would share the writable volume: refused; without it, the fork's /workspace has a's
  # own files but not the volume's (cp -x)
  req POST "/v1/sandboxes/$a/fork" -d '{"count":2}'; expect 409 '.message | contains("cache")'
  req POST "/v1/sandboxes/$a/fork" -d '{"count":1,"volumes":[]}'; expect 201
  local f; f=$(echo "$BODY" | jq -r '.[0].id')
  run_in "$f" 'cat /workspace/own; ls -A /workspace/cache 2>/dev/null | wc -l'
  [ "$(echo "$BODY" | jq -r .stdout)" == "own
0" ] || fail "the fork copied the volume's files: $BODY"
  req DELETE "/v1/sandboxes/$f"; expect 204
  req DELETE "/v1/sandboxes/$a"; expect 204
  # released by a timeout too
  create '{"volumes":[{"name":"cache","path":"/c"}],"timeout":2}'; local t=$ID # (past the start)
  req_until 10 '.state == "ended"' GET "/v1/sandboxes/$t"
  expect 200 '.end.reason == "lifetime_exceeded"'
  # and by the cost cap (reached after ~2 s, past the start: one reached while starting ends it)
  create '{"volumes":[{"name":"cache","path":"/c"}],"max_cost_usd":0.00001}'; t=$ID
  req_until 10 '.state == "ended"' GET "/v1/sandboxes/$t"
  expect 200 '.end.reason == "cost_limit"'
  # b holds it across a kill -9 of the daemon
  create '{"volumes":[{"name":"cache","path":"/c"}]}'; local b=$ID
  run_in "$b" 'cat /c/f && echo from-b >> /c/f'
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  start_daemon
  req GET /v1/volumes/cache; expect 200 ".state == \"ready\" and .in_use_by[0].sandbox == \"$b\""
  req POST /v1/sandboxes -d '{"volumes":[{"name":"cache","path":"/c"}]}'; expect 409
  run_in "$b" 'cat /c/f'
  req DELETE "/v1/sandboxes/$b"; expect 204
  stop_daemon
  start_daemon # a clean restart: the volume and its data are back
  create '{}'; local filler=$ID # another uid range for the next one
  create '{"volumes":[{"name":"cache","path":"/srv/c"}]}'; local c=$ID
  run_in "$c" 'cat /srv/c/f; echo from-c >> /srv/c/f; stat -c %U:%G /srv/c/f /srv/c/d; cat /proc/self/uid_map'
  local out; out=$(echo "$BODY" | jq -r .stdout)
  [ "$(echo "$out" | head -4)" == "from-a
from-b
sandbox:sandbox
sandbox:sandbox" ] || fail "c sees: $out"
  [ "$(echo "$out" | tail -1 | awk '{print $2}')" != "$map_a" ] || fail "c has a's uid range ($map_a): the owner check proves nothing"
  req DELETE "/v1/sandboxes/$c"; expect 204
  req DELETE "/v1/sandboxes/$filler"; expect 204
  req DELETE /v1/volumes/cache; expect 204
  no_leaks cache
}

TEST_TIMEOUT_size_limit=90
test_size_limit() { # a full volume is ENOSPC inside; the daemon and the sandbox go on
  need_tools
  start_daemon
  vol_create small 16Mi
  create '{"volumes":[{"name":"small","path":"/v"}]}'
  run_rc "$ID" 'dd if=/dev/zero of=/v/big bs=1M count=40 2>&1; echo rc=$?'
  expect 200 '.stdout | contains("No space left on device") and contains("rc=1")'
  run_in "$ID" 'rm /v/big && echo ok > /v/after && cat /v/after && df -k /v | tail -1'
  local kb; kb=$(echo "$BODY" | jq -r .stdout | awk '$NF == "/v" {print $2}')
  [ "$kb" -gt 8000 ] && [ "$kb" -le 16384 ] || fail "df of a 16Mi volume: $BODY"
  req GET /healthz; expect 200
  req GET /v1/volumes/small; expect 200 '.size == 16777216'
  req DELETE "/v1/sandboxes/$ID"; expect 204
  req DELETE /v1/volumes/small; expect 204
  no_leaks small
}

TEST_TIMEOUT_bad_input=90
test_bad_input() { # every bad volume body or create field: a 4xx naming the field
  need_tools
  start_daemon
  local b
  for b in '{"name":"Bad!"}:name' '{"size":"1Gi"}:name' '{"name":"x","size":"1Mi"}:size' \
    '{"name":"x","size":"2Ti"}:size' '{"name":"x","size":"lots"}:size' '{"name":"x","color":1}:color' \
    '{"name":""}:name' '{"name":"-x"}:name' '[1]:body'; do
    req POST /v1/volumes -d "${b%:*}"
    expect 400 ".code == \"invalid_argument\" and (.message | startswith(\"${b##*:}\"))"
  done
  vol_create v 16Mi
  req POST /v1/volumes -d '{"name":"v","size":"16Mi"}'; expect 409 '.message | contains("v exists")'
  req GET /v1/volumes/nope; expect 404
  req DELETE /v1/volumes/nope; expect 404
  req PUT /v1/volumes; expect 405
  req POST /v1/sandboxes -d '{"volumes":[{"name":"nope","path":"/x"}]}'
  expect 404 '.message | startswith("volumes[0].name: volume nope not found")'
  local p
  for p in 'x:must be an absolute' '/:root' '/proc:system' '/dev/shm/x:system' '/etc:system' \
    '/usr/local/x:system' '/sys:system' '/workspace:own disk' '/tmp:own disk' '/a/../b:normal' \
    '/a/:normal' '/a//b:normal' '/a b:printable'; do
    req POST /v1/sandboxes -d "{\"volumes\":[{\"name\":\"v\",\"path\":\"${p%:*}\"}]}"
    expect 400 ".message | startswith(\"volumes[0].path\") and contains(\"${p##*:}\")"
  done
  req POST /v1/sandboxes -d '{"volumes":[{"name":"v","path":"/a"},{"name":"w","path":"/a"}]}'
  expect 400 '.message | startswith("volumes[1].path") and contains("mounted at /a already")'
  req POST /v1/sandboxes -d '{"volumes":[{"name":"v","path":"/a"},{"name":"w","path":"/a/b"}]}'
  expect 400 '.message | startswith("volumes[1].path") and contains("nested")'
  req POST /v1/sandboxes -d '{"volumes":[{"name":"v","path":"/a"},{"name":"v","path":"/b"}]}'
  expect 400 '.message | startswith("volumes[1].name") and contains("twice")'
  req POST /v1/sandboxes -d '{"volumes":[{"name":"v","path":"/a","mode":"rw"}]}'
  expect 400 '.message | startswith("volumes[0].mode: unknown field")'
  req POST /v1/sandboxes -d '{"volumes":[{"name":"v","path":"/a","read_only":"yes"}]}'
  expect 400 '.message | startswith("volumes[0].read_only")'
  req POST /v1/sandboxes -d '{"volumes":[{"name":"V","path":"/a"}]}'; expect 400 '.message | startswith("volumes[0].name")'
  req POST /v1/sandboxes -d '{"volumes":"v"}'; expect 400 '.message | startswith("volumes:")'
  req POST /v1/sandboxes -d "{\"volumes\":[$(for i in $(seq 17); do printf '{"name":"v%d","path":"/p%d"},' $i $i; done | sed 's/,$//')]}"
  expect 400 '.message | startswith("volumes:") and contains("16")'
  # a symlink in the image where the path goes: the start fails naming the volume, nothing kept
  req POST /v1/sandboxes -d '{"volumes":[{"name":"v","path":"/var/tmp/x"}]}'
  expect 400 '.message | contains("volume at /var/tmp/x") and contains("not a directory")'
  req GET /v1/volumes/v; expect 200 '.in_use_by == []'
  # on_idle: "end" is the default; "pause" (pause to disk: test_pause.sh) cannot carry grading
  create '{"on_idle":"end","volumes":[]}'; req DELETE "/v1/sandboxes/$ID"; expect 204
  req POST /v1/sandboxes -d '{"on_idle":"sleep"}'; expect 400 '.message | startswith("on_idle")'
  req POST /v1/sandboxes -d '{"on_idle":"pause","volumes":[{"name":"v","path":"/cache"}],"profile":"grading"}'
  expect 400 '.message | startswith("on_idle: a pausable sandbox cannot have \"profile\":\"grading\"")'
  req GET /v1/sandboxes; expect 200 'map(select(.state != "ended")) | length == 0'
  req DELETE /v1/volumes/v; expect 204
  no_leaks v
}

TEST_TIMEOUT_restart_sweeps=60
test_restart_sweeps() { # an interrupted create or delete leaves nothing after a restart
  need_tools
  start_daemon
  vol_create keep 16Mi
  req POST "/v1/sandboxes" -d '{"volumes":[{"name":"keep","path":"/k"}]}'; expect 201; local id
  id=$(echo "$BODY" | jq -r .id)
  run_in "$id" 'echo kept > /k/f'
  req DELETE "/v1/sandboxes/$id"; expect 204
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  # what a create killed before its record looks like: an image and its mount, no record
  truncate -s 16M "$D/state/volumes/stray.img" && mkfs.ext4 -q -F "$D/state/volumes/stray.img"
  mkdir "$D/state/volumes/stray.mnt" && mount -o loop "$D/state/volumes/stray.img" "$D/state/volumes/stray.mnt"
  umount -l "$D/state/volumes/keep.mnt" # as after a reboot: the daemon mounts it again
  start_daemon
  no_leaks stray
  req GET /v1/volumes; expect 200 'length == 1 and .[0].name == "keep" and .[0].state == "ready"'
  create '{"volumes":[{"name":"keep","path":"/k","read_only":true}]}'
  run_in "$ID" 'cat /k/f'; [ "$(echo "$BODY" | jq -r .stdout)" == kept ] || fail "after the remount: $BODY"
  req DELETE "/v1/sandboxes/$ID"; expect 204
  req DELETE /v1/volumes/keep; expect 204
  no_leaks keep
}

TEST_TIMEOUT_unreadable_record=90
test_unreadable_record() { # a record that cannot be read never costs the volume's data
  need_tools
  start_daemon
  vol_create rec 16Mi
  create '{"volumes":[{"name":"rec","path":"/r"}]}'
  run_in "$ID" 'echo precious > /r/f'
  req DELETE "/v1/sandboxes/$ID"; expect 204
  stop_daemon
  local dir="$D/state/volumes"
  cp "$dir/rec.json" "$D/rec.json"
  echo '{' >"$dir/rec.json"
  start_daemon
  [ -f "$dir/rec.img" ] && [ -f "$dir/rec.json" ] || fail "the restart removed: $(ls "$dir")"
  req GET /v1/volumes
  expect 200 'length == 1 and .[0].name == "rec" and .[0].state == "error" and .[0].size == 16777216 and (.[0].message | contains("rec.json cannot be read") and contains("data is kept"))'
  req POST /v1/sandboxes -d '{"volumes":[{"name":"rec","path":"/r"}]}'
  expect 409 '.message | contains("rec.json cannot be read")'
  req POST /v1/volumes -d '{"name":"rec","size":"16Mi"}'; expect 409
  stop_daemon
  cp "$D/rec.json" "$dir/rec.json" # put right: the volume and its data are back
  start_daemon
  req GET /v1/volumes/rec; expect 200 '.state == "ready" and (has("message") | not)'
  create '{"volumes":[{"name":"rec","path":"/r","read_only":true}]}'
  run_in "$ID" 'cat /r/f'; [ "$(echo "$BODY" | jq -r .stdout)" == precious ] || fail "after the fix: $BODY"
  req DELETE "/v1/sandboxes/$ID"; expect 204
  stop_daemon
  echo '{"name":"rec","size":"big"}' >"$dir/rec.json" # valid JSON, refused: kept the same way
  start_daemon
  req GET /v1/volumes/rec; expect 200 '.state == "error" and (.message | contains("size"))'
  [ -f "$dir/rec.img" ] || fail "the restart removed the image: $(ls "$dir")"
  req DELETE /v1/volumes/rec; expect 204
  no_leaks rec
}

TEST_TIMEOUT_clients=90
test_clients() { # sbx volume ... and --volume; the Python SDK's Volume and volumes=
  need_tools
  start_daemon
  local SBX; SBX=$(bin sbx)
  export SBX_HOST="unix:$SOCK"
  "$SBX" volume create --size 16Mi cli-v >/dev/null || fail "sbx volume create"
  "$SBX" volume create cli-v 2>"$D/err" && fail "a second create of cli-v succeeded"
  grep -q "cli-v exists" "$D/err" || fail "sbx volume create clash: $(cat "$D/err")"
  "$SBX" volume ls | grep -qE '^cli-v +16777216 ' || fail "sbx volume ls: $("$SBX" volume ls)"
  [ "$("$SBX" run --volume cli-v:/v -- sh -c 'echo cli > /v/f; cat /v/f')" == cli ] || fail "sbx run --volume"
  local id; id=$("$SBX" create --volume cli-v:/v:ro) || fail "sbx create --volume :ro"
  "$SBX" exec "$id" -- sh -c 'cat /v/f; touch /v/g' >"$D/out" 2>&1 && fail "wrote to a :ro volume"
  grep -q "Read-only file system" "$D/out" || fail "sbx exec on :ro: $(cat "$D/out")"
  "$SBX" create --volume cli-v 2>"$D/err" && fail "--volume without a path was accepted"
  grep -q "NAME:/PATH" "$D/err" || fail "--volume usage: $(cat "$D/err")"
  "$SBX" volume rm cli-v 2>"$D/err" && fail "removed a volume in use"
  grep -q "in use by sandbox $id" "$D/err" || fail "sbx volume rm in use: $(cat "$D/err")"
  "$SBX" volume inspect --json cli-v | jq -e ".in_use_by[0].sandbox == \"$id\"" >/dev/null || fail "sbx volume inspect"
  "$SBX" rm "$id" >/dev/null
  "$SBX" volume rm cli-v >/dev/null || fail "sbx volume rm"
  no_leaks cli-v
  env $(asan_env) SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" PYTHONPATH="$SBX_SRC_DIR/python" \
    PYTHONDONTWRITEBYTECODE=1 python3 - <<'PY' || fail "the Python SDK's volumes"
import sandboxd
from sandboxd import Conflict, InvalidArgument, NotFound, Sandbox, Volume
v = Volume.create("py-v", size="16Mi")
assert v.info()["size"] == 16 << 20, v.info()
with Sandbox.create(volumes=[v.mount("/data")]) as sb:
    assert sb.run("sh", "-c", "echo py > /data/f").exit_code == 0
    try:
        Sandbox.create(volumes={"/d": v})
        raise SystemExit("a second writable use was accepted")
    except Conflict as e:
        assert "in use by sandbox " + sb.id in str(e), e
ro = [Sandbox.create(volumes={"/d": v.mount(read_only=True)}), Sandbox.create(volumes=[("py-v", "/d", True)])]
for sb in ro:
    r = sb.run("sh", "-c", "cat /d/f; touch /d/x")
    assert r.stdout == "py\n" and r.exit_code != 0 and "Read-only" in r.stderr, (r.stdout, r.stderr)
assert [x.name for x in Volume.list()] == ["py-v"]
try:
    v.delete()
    raise SystemExit("deleted a volume in use")
except Conflict:
    pass
for sb in ro:
    sb.terminate()
for bad in ({"/d": 3}, "py-v"):
    try:
        Sandbox.create(volumes=bad)
        raise SystemExit(f"volumes={bad!r} accepted")
    except InvalidArgument:
        pass
# a pausable sandbox (on_idle "pause") carries a volume (its pause: test_pause.sh)
sb = Sandbox.create(on_idle="pause", volumes={"/d": v.mount(read_only=True)})
assert sb.run("sh", "-c", "test -d /d && ! touch /d/x 2>/dev/null").exit_code == 0
sb.terminate()
v.delete()
try:
    Volume.get("py-v")
    raise SystemExit("a deleted volume was found")
except NotFound:
    pass
print("python volumes ok")
PY
  no_leaks py-v
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
