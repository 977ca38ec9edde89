#!/usr/bin/env bash
# Integration tests of the image store: archives built here with Python's tarfile
# (mkimage.py: docker save in the classic and the OCI layout, an OCI image layout with a gzip
# layer, a plain rootfs tarball) and a Debian rootfs from debootstrap (cached per machine) are
# imported through POST /v1/images; sandboxes made from them see the layers merged (changes,
# whiteouts, opaque directories, symlinks, hard links), the image's owners and modes, its Env
# and WorkingDir; writes stay in the sandbox; images share layers; every bad archive is a 4xx
# (507 for a full disk) that leaves nothing behind; warm pools and forks work for an image.
# Each case starts its own daemon and removes everything it made (trap on EXIT).

DAEMON_TAG=img
source "$(dirname "$0")/../lib/daemon.sh"
MK="$(dirname "$0")/mkimage.py"
DEBIAN_CACHE=${SBX_IMAGE_CACHE:-/var/cache/sandboxd-tests}/debian-bookworm-minbase-nodev.tar.gz

img() { # FORMAT [BAD] -> path of a fresh archive
  local out; out="$D/$1-${2:-good}.tar"
  [ -e "$out" ] || python3 "$MK" "$1" "$out" "${2:-}" || fail "mkimage $1 $2"
  echo "$out"
}
import() { # NAME FILE [query] -> CODE, BODY
  req POST "/v1/images?name=$1${3:+&$3}" -H 'Content-Type: application/x-tar' --data-binary @"$2"
}
run_in() { # ID SCRIPT -> BODY (exit code 0 expected)
  local body; body=$(jq -cn --arg s "$2" '{argv:["sh","-c",$s]}')
  req POST "/v1/sandboxes/$1/exec" -d "$body"
  expect 200
}
store_state() { # what is in the store: layer dirs, names, temp files
  echo "layers=$(ls "$D/state/images/layers" | sort | tr '\n' ' ')"
  echo "meta=$(ls "$D/state/images/meta" | sort | tr '\n' ' ')"
  echo "tmp=$(ls -A "$D/state/images/tmp" | tr '\n' ' ')"
}
nothing_left() { # STATE-before: the store is as it was (temp files go within a second)
  local now
  for _ in $(seq 30); do
    now=$(store_state)
    [ "$now" == "$1" ] && return 0
    sleep 0.1
  done
  fail "something was left behind: before [$1] after [$now]"
}
layers_sum() { # content, owners and modes of every stored layer
  (cd "$D/state/images/layers" && find . -printf '%p %U:%G %m %s\n' | sort && find . -type f -print0 | sort -z | xargs -0 cat) | sha256sum
}

TEST_TIMEOUT_formats_and_sharing=120
test_formats_and_sharing() {
  start_daemon
  local f
  for f in docker docker-oci oci; do
    import "t-$f:v1" "$(img $f)"
    local fmt=$f; [ $f == docker-oci ] && fmt=oci # newer docker save writes an OCI layout
    expect 201 ".name == \"t-$f:v1\" and .format == \"$fmt\" and (.layers | length) == 2 and .workdir == \"/app\" and (.env | index(\"IMG_VAR=from-image\")) != null and .size > 1000"
  done
  import t-rootfs "$(img rootfs)"
  expect 201 '.name == "t-rootfs:latest" and .format == "rootfs" and (.layers | length) == 1'
  # one copy of each layer: the diff_ids are the same whatever the archive's layout or gzip
  [ "$(ls "$D/state/images/layers" | wc -l)" == 2 ] || fail "layers not shared: $(ls "$D/state/images/layers")"
  req GET /v1/images; expect 200 'length == 4 and (map(.name) | sort) == ["t-docker-oci:v1","t-docker:v1","t-oci:v1","t-rootfs:latest"]'
  req GET /v1/images/t-rootfs; expect 200 '.name == "t-rootfs:latest"'
  req GET /v1/images/nope; expect 404
  for f in docker docker-oci oci rootfs; do
    local name="t-$f:v1"; [ $f == rootfs ] && name=t-rootfs
    create "{\"image\":\"$name\"}"
    run_in "$ID" 'cat /etc/base.txt; id -u'
    local want="changed"; [ $f == rootfs ] && want="base"
    echo "$BODY" | jq -e --arg w "$want" '.stdout == $w + "\n1000\n"' >/dev/null || fail "$f: $BODY"
  done
  # a member appended again (tar -rf) replaces the earlier copy, as when tar or docker load
  # extracts it: the first copy of manifest.json was read (400, its config "is missing")
  import t-appended "$(img docker manifest-appended)"
  expect 201 '.format == "docker" and (.layers | length) == 2'
  # an index for several platforms: this host's manifest, wherever it is (the first is refused
  # for another platform in test_bad_archives)
  import t-multi "$(img oci multi-arch)"
  expect 201 '.format == "oci" and (.layers | length) == 2'
}

# Two imports at once that carry the same layers both unpack them (neither finds them stored
# yet); the one that stores them second drops its copy: one copy of each layer, and no temporary
# one left (a whole unpacked layer stayed in images/tmp until the next start).
TEST_TIMEOUT_concurrent_imports=90
test_concurrent_imports() {
  start_daemon
  local f a b round; f=$(img oci)
  for round in 1 2 3; do # (the race is likely, not certain: three tries)
    curl -s --max-time 60 --unix-socket "$SOCK" -o "$D/a.out" -w '%{http_code}' -X POST \
      -H 'Content-Type: application/x-tar' --data-binary @"$f" "http://sd/v1/images?name=a" >"$D/a.code" &
    a=$!
    curl -s --max-time 60 --unix-socket "$SOCK" -o "$D/b.out" -w '%{http_code}' -X POST \
      -H 'Content-Type: application/x-tar' --data-binary @"$f" "http://sd/v1/images?name=b" >"$D/b.code" &
    b=$!
    wait "$a" "$b" || true
    [ "$(cat "$D/a.code") $(cat "$D/b.code")" == "201 201" ] ||
      fail "imports: $(cat "$D/a.code" "$D/a.out" "$D/b.code" "$D/b.out")"
    [ "$(ls "$D/state/images/layers" | wc -l)" == 2 ] || fail "layers: $(ls "$D/state/images/layers")"
    nothing_left "$(printf 'layers=%s\nmeta=a:latest.json b:latest.json \ntmp=\n' \
      "$(ls "$D/state/images/layers" | sort | tr '\n' ' ')")"
    [ $round == 3 ] && break
    req DELETE /v1/images/a; expect 204
    req DELETE /v1/images/b; expect 204
    nothing_left "$(printf 'layers=\nmeta=\ntmp=\n')"
  done
  create '{"image":"b"}'
  run_in "$ID" 'cat /etc/base.txt'; expect 200 '.stdout == "changed\n"'
  # an Env name at its bound (256 characters) is taken at import and reaches the command
  import long:v1 "$(img oci env-256)"; expect 201
  create '{"image":"long:v1"}'
  run_in "$ID" "echo \"\$$(printf 'K%.0s' $(seq 256))\""; expect 200 '.stdout == "at-the-bound\n"'
}

TEST_TIMEOUT_inside_an_image=90
test_inside_an_image() {
  start_daemon
  import t:v1 "$(img oci)"; expect 201
  local before; before=$(layers_sum)
  create '{"image":"t:v1","env":{"OVERRIDE":"create"}}'
  local a=$ID
  run_in "$a" 'pwd; echo "$IMG_VAR $OVERRIDE"; cat /etc/base.txt /data/keep /data/hard; test -e /data/gone || echo whited-out
    ls /opq; stat -c %h /data/hard; cat2 /abs-link; ls /'
  echo "$BODY" | jq -e '.stdout == "/app\nfrom-image create\nchanged\nkeep\nkeep2\nwhited-out\nnew\n2\nchanged\nabs-link\napp\nbin\ndata\ndev\netc\nhome\nlib\nlib64\nopq\nproc\nrootonly\nsrv\ntmp\nusr\nworkspace\n"' >/dev/null || fail "merged view: $BODY"
  # owners and modes as in the image (id-mapped layers)
  run_in "$a" 'stat -c "%n %u:%g %a" /etc/base.txt /home/user /home/user/notes /rootonly /srv/mode640 /app /usr/bin/sh; cat /home/user/notes'
  echo "$BODY" | jq -e '.stdout == "/etc/base.txt 0:0 644\n/home/user 1000:1000 750\n/home/user/notes 1000:1000 600\n/rootonly 0:0 700\n/srv/mode640 0:1000 640\n/app 1000:1000 755\n/usr/bin/sh 0:0 755\nmine\n"' >/dev/null || fail "owners: $BODY"
  # writes: where the sandbox user may, into the sandbox's own layer only
  run_in "$a" 'echo mine > /app/new; rm /app/README; echo x > /home/user/notes; mkdir /app/d; ls /app; echo w > /workspace/w
    (echo x > /etc/base.txt) 2>/dev/null || echo etc-denied; (ls /rootonly) 2>/dev/null || echo rootonly-denied'
  echo "$BODY" | jq -e '.stdout == "d\nnew\netc-denied\nrootonly-denied\n"' >/dev/null || fail "writes: $BODY"
  create '{"image":"t:v1"}'
  local b=$ID
  run_in "$b" 'ls /app; cat /home/user/notes; echo "$OVERRIDE"'
  echo "$BODY" | jq -e '.stdout == "README\nmine\nimage\n"' >/dev/null || fail "second sandbox sees the first one's writes: $BODY"
  [ "$(layers_sum)" == "$before" ] || fail "the image's layers changed"
  # two sandboxes, one copy of the layers: each sandbox's disk holds only its own writes
  local used; used=$(du -sk "$D/state/images/layers" | cut -f1)
  [ "$used" -gt 1000 ] || fail "layers are $used KiB"
  req POST "/v1/sandboxes/$a/exec" -d '{"argv":["sh","-c","pwd"],"cwd":"/tmp"}'; expect 200 '.stdout == "/tmp\n"'
  # "cwd": null is cwd not given, as for every field: the image's WorkingDir (was /workspace)
  req POST "/v1/sandboxes/$a/exec" -d '{"argv":["sh","-c","pwd"],"cwd":null}'; expect 200 '.stdout == "/app\n"'
  # in use: not deletable; once the sandboxes are gone, deleting removes its layers
  req DELETE /v1/images/t:v1; expect 409 '.message | contains("in use")'
  req DELETE "/v1/sandboxes/$a"; req DELETE "/v1/sandboxes/$b"
  req DELETE /v1/images/t:v1; expect 204
  req GET /v1/images/t:v1; expect 404
  nothing_left "$(printf 'layers=\nmeta=\ntmp=\n')"
}

TEST_TIMEOUT_bad_archives=180 TEST_PASS_bad_archives=sanitized # (once: tests/README.md)
test_bad_archives() {
  start_daemon
  import base:v1 "$(img oci)"; expect 201 # its layers must survive every failure below
  local before; before=$(store_state)
  local bad want
  while IFS='|' read -r bad want; do
    import "bad-$bad" "$(img oci "$bad")"
    expect 400 '.code == "invalid_image"'
    echo "$BODY" | jq -e --arg w "$want" '.message | contains($w)' >/dev/null || fail "$bad: expected \"$want\" in $BODY"
    nothing_left "$before"
    req GET "/v1/images/bad-$bad"; expect 404
  done <<'EOF'
abs|unsafe path "/etc/evil"
dotdot|unsafe path "../evil"
device|dev-null: device nodes, FIFOs and sockets are not allowed
fifo|fifo: device nodes, FIFOs and sockets are not allowed
setuid|usr/bin/su: setuid/setgid files are not allowed
hardlink-out|hard link to "../../etc/passwd" leaves the image
hardlink-missing|which is not a regular file earlier in this layer
symlink-out|a/b: symlink to "../../../etc" leaves the image
through-symlink|lnk/evil: path goes through a symlink
blob-digest|digest mismatch
diffid|digest mismatch
env-key|image: config Env: key "KKKK
env-many|image: config Env: has too many entries (at most 256)
env-value|image: config Env.BIG: value too long
env-big|image: config Env: too large (
env-noeq|image: config Env: NOEQUALS is not NAME=VALUE
other-arch|no manifest for linux/amd64 (only linux/arm64, linux/s390x)
EOF
  import bad-dig "$(img docker diffid)"; expect 400 '.message | contains("digest mismatch")'
  import bad-cfg "$(img docker config-digest)"; expect 400 '.message | contains("digest mismatch")'
  import bad-root "$(img rootfs through-symlink)"; expect 400 '.message | contains("goes through a symlink")'
  head -c 100000 /dev/urandom >"$D/random.bin"
  import bad-random "$D/random.bin"; expect 400
  nothing_left "$before"
  req POST '/v1/images?name=empty' --data-binary ''; expect 400
  import 'a/b' "$(img rootfs)"; expect 400 '.message | contains("not an image name")'
  import '..' "$(img rootfs)"; expect 400
  import host "$(img rootfs)"; expect 400
  import base:v1 "$(img rootfs)"; expect 409
  req POST '/v1/images' --data-binary @"$(img rootfs)"; expect 400 '.message | startswith("name")'
  nothing_left "$before"
  # setuid=strip clears the bits instead
  import su:v1 "$(img oci setuid)" setuid=strip; expect 201
  create '{"image":"su:v1"}'
  run_in "$ID" 'stat -c %a /usr/bin/su'; expect 200 '.stdout == "755\n"'
}

# Names the file system cannot hold are the archive's fault: 400 naming the entry (a name over
# 255 bytes, a symlink target over 4095 were 500 "File name too long"), and nothing is left.
TEST_TIMEOUT_long_names=90
test_long_names() {
  start_daemon
  local before; before=$(store_state)
  local bad want
  while IFS='|' read -r bad want; do
    import "bad-$bad" "$(img oci "$bad")"
    expect 400 '.code == "invalid_image"'
    echo "$BODY" | jq -e --arg w "$want" '.message | contains($w)' >/dev/null || fail "$bad: expected \"$want\" in $BODY"
    nothing_left "$before"
  done <<'EOF'
long-name|nnnnnnnn: name too long
long-link|srv/l: symlink target too long
long-path|image: path too long: "p/p/p/
EOF
}

# A whiteout deletes its name in the lower layers only (OCI layer.md "Whiteouts"): the same
# layer's file of that name stays, and its directory hides the lower layers' one. A directory
# recreated after its whiteout showed the lower layers' files again, a file before its whiteout
# was deleted, and a directory before its whiteout failed the import.
TEST_TIMEOUT_same_layer_whiteouts=90
test_same_layer_whiteouts() {
  start_daemon
  import t:v1 "$(img oci same-layer-whiteouts)"; expect 201 '(.layers | length) == 3'
  create '{"image":"t:v1"}'
  run_in "$ID" 'ls /opq; ls /data; cat /data/keep3 /data/sub/s'
  echo "$BODY" | jq -e '.stdout == "fresh\nhard\nkeep\nkeep2\nkeep3\nsub\nk3\ns\n"' >/dev/null || fail "merged view: $BODY"
}

# AUFS's metadata at a layer's root (".wh..wh.plnk/", ".wh..wh.aufs", ".wh..wh.orph/": what
# docker on aufs left in layers) is left out, as docker's pkg/archive does: the import was
# refused (400 "image: .wh..wh.plnk: unsupported whiteout").
TEST_TIMEOUT_aufs_metadata=90
test_aufs_metadata() {
  start_daemon
  import a:v1 "$(img oci aufs-meta)"; expect 201 '(.layers | length) == 3'
  create '{"image":"a:v1"}'
  run_in "$ID" 'cat /data/aufs; ls -A /'
  echo "$BODY" | jq -e '.stdout | startswith("aufs\n") and (contains(".wh.") | not)' >/dev/null ||
    fail "merged view: $BODY"
  [ -z "$(find "$D/state/images/layers" -name '.wh.*')" ] ||
    fail "stored: $(find "$D/state/images/layers" -name '.wh.*')"
}

# A WorkingDir below a directory that a higher layer made opaque is gone, even where that layer
# has the directories above it: it was found in the lower layer (workdir_exists true), and every
# command without a cwd then failed (400 "exec chdir /w/s/deep: No such file or directory").
TEST_TIMEOUT_workdir_under_opaque=90
test_workdir_under_opaque() {
  start_daemon
  import w:v1 "$(img oci workdir-hidden)"
  expect 201 '(.layers | length) == 4 and .workdir == "/w/s/deep" and .workdir_exists == false'
  create '{"image":"w:v1"}'
  run_in "$ID" 'pwd'; expect 200 '.stdout == "/workspace\n"'
}

# A third import while two run is answered 429 once: it was answered 429 and then 409 "conflict"
# (dropped by the daemon as a second answer, its "request failed" line logged all the same).
TEST_TIMEOUT_too_many_imports=120
test_too_many_imports() {
  start_daemon
  python3 - "$D/many.tar.gz" <<'EOF'
import gzip, sys, tarfile
with gzip.open(sys.argv[1], "wb") as g, tarfile.open(fileobj=g, mode="w") as t:
    for d in range(40):  # 12000 empty files: an import that takes a while
        i = tarfile.TarInfo(f"d{d}"); i.type, i.mode = tarfile.DIRTYPE, 0o755
        t.addfile(i)
        for f in range(300):
            t.addfile(tarfile.TarInfo(f"d{d}/f{f}"))
EOF
  local n round pids
  for round in 1 2 3; do # (the two may be done before the third comes: three tries)
    pids=()
    for n in a b; do
      curl -s --max-time 100 --unix-socket "$SOCK" -o "$D/$n.out" -w '%{http_code}' -X POST \
        -H 'Content-Type: application/x-tar' --data-binary @"$D/many.tar.gz" \
        "http://sd/v1/images?name=$n$round" >"$D/$n.code" &
      pids+=($!)
    done
    for _ in $(seq 200); do # both imports started (each has its work directory)
      [ "$(ls "$D/state/images/tmp" | grep -c '^import-')" == 2 ] && break
      sleep 0.05
    done
    import c "$(img rootfs)"
    wait "${pids[@]}" || true
    [ "$(cat "$D/a.code") $(cat "$D/b.code")" == "201 201" ] ||
      fail "imports: $(cat "$D/a.code" "$D/a.out" "$D/b.code" "$D/b.out")"
    [ "$CODE" == 429 ] && break
    expect 201
    req DELETE /v1/images/c; expect 204
  done
  expect 429 '.code == "too_many_requests" and (.message | contains("2 imports are running"))'
  grep -qi '^Retry-After: 5' "$D/headers" || fail "no Retry-After: $(cat "$D/headers")"
  grep 'msg=request failed path=/v1/images ' "$D/log" | grep 'imports are running' >"$D/answers"
  [ "$(wc -l <"$D/answers")" == 1 ] && grep -q 'status=429 code=too_many_requests' "$D/answers" ||
    fail "answered more than once: $(cat "$D/answers")"
  import c "$(img rootfs)"; expect 201 # and once they are done, it is taken
}

# A WorkingDir reached through symlinks (of another layer than the directory's) is the image's:
# the links are followed inside the image. It counted as absent (workdir_exists false), and
# commands without a cwd ran in /workspace.
TEST_TIMEOUT_workdir_through_links=90
test_workdir_through_links() {
  start_daemon
  import l:v1 "$(img oci workdir-link)"
  expect 201 '(.layers | length) == 4 and .workdir == "/wl/deep" and .workdir_exists == true'
  create '{"image":"l:v1"}'
  run_in "$ID" 'pwd -P'; expect 200 '.stdout == "/srv/wd/deep\n"'
  import loop:v1 "$(img oci workdir-loop)"; expect 201 '.workdir_exists == false' # 40 links at most
}

# A sandbox mounts its own /workspace and /tmp, empty, over the image's: a WorkingDir of them is
# there where the image lacks it (it counted as absent, workdir_exists false, and commands ran
# in /workspace, not in /tmp), and one below them is not, even where the image has it (it
# counted as present, and every command without a cwd failed: "exec chdir /workspace/app").
TEST_TIMEOUT_workdir_sandbox_dirs=120
test_workdir_sandbox_dirs() {
  start_daemon
  import ws:v1 "$(img oci workdir-workspace)"
  expect 201 '.workdir == "/workspace" and .workdir_exists == true'
  create '{"image":"ws:v1"}'
  run_in "$ID" 'pwd'; expect 200 '.stdout == "/workspace\n"'
  import tmp:v1 "$(img oci workdir-tmp)"
  expect 201 '(.layers | length) == 3 and .workdir == "/tmp" and .workdir_exists == true'
  create '{"image":"tmp:v1"}'
  run_in "$ID" 'pwd'; expect 200 '.stdout == "/tmp\n"'
  import in:v1 "$(img oci workdir-in-workspace)"
  expect 201 '(.layers | length) == 3 and .workdir == "/workspace/app" and .workdir_exists == false'
  create '{"image":"in:v1"}'
  run_in "$ID" 'pwd'; expect 200 '.stdout == "/workspace\n"'
}

# A sandbox mounts its own /proc and /dev over the image's: a WorkingDir of /proc, or of /dev/pts
# (the shim's devpts), is there where the image lacks it (it counted as absent, and commands
# ran in /workspace, not there), and one below them that only the image has is not (it counted
# as present, and every command without a cwd failed: "exec chdir /dev/app").
TEST_TIMEOUT_workdir_proc_dev=120
test_workdir_proc_dev() {
  start_daemon
  import p:v1 "$(img oci workdir-proc)"
  expect 201 '(.layers | length) == 2 and .workdir == "/proc" and .workdir_exists == true'
  create '{"image":"p:v1"}'
  run_in "$ID" 'pwd'; expect 200 '.stdout == "/proc\n"'
  import pts:v1 "$(img oci workdir-dev-pts)"
  expect 201 '(.layers | length) == 2 and .workdir == "/dev/pts" and .workdir_exists == true'
  create '{"image":"pts:v1"}'
  run_in "$ID" 'pwd'; expect 200 '.stdout == "/dev/pts\n"'
  local name
  for name in dev proc; do
    import "in$name:v1" "$(img oci "workdir-in-$name")"
    expect 201 "(.layers | length) == 3 and .workdir == \"/$name/app\" and .workdir_exists == false"
    create "{\"image\":\"in$name:v1\"}"
    run_in "$ID" 'pwd'; expect 200 '.exit_code == 0 and .stdout == "/workspace\n"'
  done
}

TEST_TIMEOUT_limits_and_full_disk=120
test_limits_and_full_disk() {
  start_daemon
  stop_daemon
  echo '{"image_import": {"max_archive": "3MiB", "max_unpacked": "6MiB"}}' >"$D/config.json"
  start_daemon --config "$D/config.json"
  local before; before=$(store_state)
  import big "$(img oci)"; expect 413 # 3.8 MB archive
  nothing_left "$before"
  # a small gzip that unpacks past the limit
  python3 - "$D/bomb.tar.gz" <<'EOF'
import gzip, io, sys, tarfile
with gzip.open(sys.argv[1], "wb") as g, tarfile.open(fileobj=g, mode="w") as t:
    i = tarfile.TarInfo("zeros"); i.size = 64 << 20
    t.addfile(i, io.BytesIO(bytes(i.size)))
EOF
  import bomb "$D/bomb.tar.gz"; expect 413 '.message | contains("unpacks to more than")'
  nothing_left "$before"
  # a full disk: the store on a 6 MiB tmpfs (in this test's own directory)
  stop_daemon
  mkdir -p "$D/small"
  mount -t tmpfs -o size=6m sbx-test-small "$D/small" || fail "cannot mount a tmpfs"
  trap 'umount -l "$D/small" 2>/dev/null; daemon_cleanup' EXIT
  echo '{"image_import": {"max_archive": "1GiB", "max_unpacked": "1GiB"}}' >"$D/config.json"
  start_daemon --config "$D/config.json" --state-dir "$D/small/state"
  local s="$D/small/state/images"
  python3 - "$D/fill.tar.gz" <<'EOF'
import gzip, io, os, sys, tarfile
with gzip.open(sys.argv[1], "wb") as g, tarfile.open(fileobj=g, mode="w") as t:
    i = tarfile.TarInfo("random"); i.size = 4 << 20
    t.addfile(i, io.BytesIO(os.urandom(i.size)))
EOF
  import full "$D/fill.tar.gz"; expect 507 # 4 MiB upload + 4 MiB unpacked > 6 MiB
  head -c $((8 << 20)) /dev/urandom >"$D/huge.bin"
  import full "$D/huge.bin"; expect 507 '.message | contains("disk filled up")'
  for _ in $(seq 30); do [ -z "$(find "$s" -mindepth 2)" ] && break; sleep 0.1; done
  [ -z "$(find "$s" -mindepth 2)" ] || fail "left behind: $(find "$s" -mindepth 2)"
  stop_daemon
}

TEST_TIMEOUT_tcp_token=60
test_tcp_token() { # an unauthenticated client cannot even make the daemon store an upload
  local port=$(free_port) tok="tok-$RANDOM-$RANDOM"
  start_daemon --tcp "127.0.0.1:$port" --token "$tok"
  local before c; before=$(store_state)
  c=$(curl -s -o /dev/null -w '%{http_code}' -X POST --data-binary @"$(img oci)" "http://127.0.0.1:$port/v1/images?name=x")
  [ "$c" == 401 ] || [ "$c" == 413 ] || fail "no token: $c"
  nothing_left "$before"
  c=$(curl -s -o "$D/out" -w '%{http_code}' -H "Authorization: Bearer $tok" -X POST \
    --data-binary @"$(img oci)" "http://127.0.0.1:$port/v1/images?name=x")
  [ "$c" == 201 ] || fail "with the token: $c $(cat "$D/out")"
}

TEST_TIMEOUT_restart=60
test_restart() {
  start_daemon
  import t:v1 "$(img docker)"; expect 201
  create '{"image":"t:v1"}'
  run_in "$ID" 'echo kept > /app/f'
  stop_daemon
  start_daemon # the store and the sandbox (its overlay) outlive the daemon
  req GET /v1/images/t:v1; expect 200 '.format == "docker" and (.layers | length) == 2'
  run_in "$ID" 'cat /app/f /etc/base.txt; pwd'
  expect 200 '.stdout == "kept\nchanged\n/app\n"'
  req DELETE /v1/images/t:v1; expect 409
  # a record made before import bounded Env (policy/limits.h) still loads; a sandbox that its
  # Env cannot start says why (it said only "cannot prepare the sandbox directory")
  stop_daemon
  local m="$D/state/images/meta"
  jq '.name = "old:v1" | .env += [range(5000) | "E\(.)=v"]' "$m/t:v1.json" >"$m/old:v1.json" &&
    jq '.name = "old:v2" | .env += [range(100) | "E\(.)=\("v" * 2000)"]' "$m/t:v1.json" \
      >"$m/old:v2.json" || fail "cannot write the old records"
  start_daemon
  req GET /v1/images/old:v1; expect 200 '(.env | length) == 5003'
  req POST /v1/sandboxes -d '{"image":"old:v1"}'
  expect 500 '.message == "cannot prepare the sandbox: spec: env has 5005 entries (at most 4096)"'
  create '{"image":"old:v2"}' # 200 KB of Env: more than a command's request to init carries
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["true"]}'
  expect 400 '.message | startswith("argv and env: too large (the image'"'"'s Env")'
}

TEST_TIMEOUT_pools_and_forks=120
test_pools_and_forks() {
  start_daemon
  import t:v1 "$(img docker-oci)"; expect 201
  stop_daemon
  start_daemon --pool 'size=1,image=t:v1,cpu=0.5,memory=256Mi'
  wait_ready 1 30
  req POST /v1/sandboxes -d '{"image":"t:v1","cpu":0.5,"memory":"256Mi"}'
  expect 201 '.pooled == true and .image == "t:v1"'
  local src; src=$(echo "$BODY" | jq -r .id)
  run_in "$src" 'cat /etc/base.txt; echo task > /workspace/f; echo app > /app/mine'
  expect 200 '.stdout == "changed\n"'
  req DELETE /v1/images/t:v1; expect 409
  req POST "/v1/sandboxes/$src/fork" -d '{"count":1,"image":"nope:v1"}'; expect 404
  req POST "/v1/sandboxes/$src/fork" -d '{"count":2}'
  expect 201 'length == 2 and all(.[]; .image == "t:v1")'
  local f
  for f in $(echo "$BODY" | jq -r '.[].id'); do
    run_in "$f" 'cat /workspace/f /etc/base.txt; ls /app; pwd'
    expect 200 '.stdout == "task\nchanged\nREADME\n/app\n"' # forks copy /workspace and /tmp only
  done
}

TEST_TIMEOUT_cli=60
test_cli() {
  start_daemon
  local sbx; sbx="$(bin sbx)"
  "$sbx" --host "$SOCK" image import "$(img oci)" cli:v1 >"$D/out" || fail "import: $(cat "$D/out")"
  grep -q '^cli:v1 sha256:' "$D/out" || fail "import printed: $(cat "$D/out")"
  gzip -c "$(img docker)" | "$sbx" --host "$SOCK" --json image import - piped >"$D/out" || fail "import from a pipe"
  jq -e '.name == "piped:latest" and .format == "docker"' "$D/out" >/dev/null || fail "piped: $(cat "$D/out")"
  "$sbx" --host "$SOCK" image import "$(img oci setuid)" su 2>"$D/err" && fail "a setuid file was accepted"
  grep -q 'setuid/setgid files are not allowed' "$D/err" || fail "error: $(cat "$D/err")"
  "$sbx" --host "$SOCK" image import --strip-setuid "$(img oci setuid)" su >/dev/null || fail "--strip-setuid"
  "$sbx" --host "$SOCK" image ls >"$D/out"
  [ "$(grep -cE '^(cli:v1|piped:latest|su:latest) ' "$D/out")" == 3 ] || fail "ls: $(cat "$D/out")"
  "$sbx" --host "$SOCK" image inspect cli:v1 | jq -e '.workdir == "/app"' >/dev/null || fail "inspect"
  local id; id=$("$sbx" --host "$SOCK" create --image cli:v1) || fail "create --image"
  "$sbx" --host "$SOCK" exec "$id" cat /etc/base.txt >"$D/out" || fail "exec"
  assert_eq "$(cat "$D/out")" "changed" "file from the image"
  "$sbx" --host "$SOCK" image rm cli:v1 2>/dev/null && fail "removed an image in use"
  "$sbx" --host "$SOCK" rm "$id" >/dev/null
  "$sbx" --host "$SOCK" image rm cli:v1 piped su >/dev/null || fail "rm"
  "$sbx" --host "$SOCK" image inspect cli:v1 2>/dev/null && fail "still there"
  true
}

TEST_TIMEOUT_debian=900
test_debian() {
  command -v debootstrap >/dev/null || skip "debootstrap is needed (tests/deps.sh)"
  # once per machine; later runs (and the ASan pass) reuse it. debootstrap leaves device nodes
  # in /dev, which an import refuses: the tarball leaves them out (the sandbox has its own /dev)
  if [ ! -s "$DEBIAN_CACHE" ]; then
    mkdir -p "$(dirname "$DEBIAN_CACHE")"
    local mirror
    mirror=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 | grep -oE 'https?://[^ ]+' || true)
    [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
    local t; t=$(mktemp -d "$(dirname "$DEBIAN_CACHE")/debootstrap.XXXXXX")
    (flock 9
     [ -s "$DEBIAN_CACHE" ] || { debootstrap --variant=minbase bookworm "$t/root" "$mirror" >"$t.log" 2>&1 &&
       tar -C "$t/root" --numeric-owner --exclude='./dev/*' -czf "$t/rootfs.tar.gz" . && mv "$t/rootfs.tar.gz" "$DEBIAN_CACHE"; }
    ) 9>"$(dirname "$DEBIAN_CACHE")/.lock" || { tail -5 "$t.log" >&2; rm -rf "$t" "$t.log"; fail "debootstrap failed"; }
    rm -rf "$t" "$t.log"
  fi
  start_daemon
  local before; before=$(store_state)
  import debian:12 "$DEBIAN_CACHE"
  expect 400 '.message | contains("setuid/setgid files are not allowed")'
  nothing_left "$before"
  import debian:12 "$DEBIAN_CACHE" setuid=strip
  expect 201 '.format == "rootfs" and (.layers | length) == 1'
  create '{"image":"debian:12"}'
  run_in "$ID" 'cat /etc/debian_version; stat -c "%u:%g %a" /usr/bin/apt /etc /tmp; id -u; ls /var/lib/dpkg/status'
  echo "$BODY" | jq -e '.stdout | test("^12\\.[0-9]+\n0:0 755\n0:0 755\n0:0 1777\n1000\n/var/lib/dpkg/status\n$")' >/dev/null || fail "debian: $BODY"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
