#!/usr/bin/env bash
# What the files API and forks carry, and what they charge: uploads count against the
# sandbox's memory (its files live in memory), not the daemon's; non-ASCII names and trees
# deeper than 64 levels travel both ways; tar hard links are made, not dropped; forks keep
# sparse files sparse (900 MiB and 100 GiB of holes cost the fork nothing). A failed PUT leaves
# the old file whole; a directory GET goes 4096 levels deep; tar hard links to themselves and
# directory modes; the request's path, mode and Content-Type details.

DAEMON_TAG=fidelity
source "$(dirname "$0")/../lib/daemon.sh"

run_ok() { # ID script -> BODY
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg s "$2" '{argv:["sh","-c",$s]}')"
  expect 200 '.exit_code == 0'
}
mem_usage() { # ID: the sandbox's memory cgroup usage in bytes
  local f
  for f in "/sys/fs/cgroup/memory/$CG/$1/memory.usage_in_bytes" "/sys/fs/cgroup/$CG/$1/memory.current"; do
    [ -r "$f" ] && { cat "$f"; return 0; }
  done
  fail "no memory cgroup for $1 under $CG"
}

TEST_TIMEOUT_uploads_charge_the_sandbox=90
test_uploads_charge_the_sandbox() {
  start_daemon
  create '{"memory":"64Mi","disk":"1Gi"}'; local id=$ID
  head -c $((200 << 20)) /dev/zero >"$D/big"
  req PUT "/v1/sandboxes/$id/files?path=/workspace/big" -H 'Content-Type: application/octet-stream' \
    --data-binary @"$D/big"
  expect 413 '.code == "too_large" and (.message | test("memory"))'
  python3 -c 'import io,sys,tarfile
t=tarfile.open(sys.argv[1],"w")
for k in range(4):
    i=tarfile.TarInfo("p%d" % k); i.size=50<<20; t.addfile(i,io.BytesIO(bytes(i.size)))
t.close()' "$D/big.tar"
  req PUT "/v1/sandboxes/$id/files?path=/workspace/t" -H 'Content-Type: application/x-tar' \
    --data-binary @"$D/big.tar"
  expect 413 '.code == "too_large"'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "running"'
  # what fits is written, and it is the sandbox's memory that holds it
  local before; before=$(mem_usage "$id")
  head -c $((30 << 20)) /dev/urandom >"$D/mid"
  req PUT "/v1/sandboxes/$id/files?path=/workspace/mid" -H 'Content-Type: application/octet-stream' \
    --data-binary @"$D/mid"
  expect 204
  local after; after=$(mem_usage "$id")
  [ $((after - before)) -ge $((25 << 20)) ] ||
    fail "the sandbox's memory grew by $((after - before)) bytes for a 30 MiB upload (charged elsewhere)"
  run_ok "$id" '[ "$(stat -c %s /workspace/mid)" = 31457280 ]'
}

TEST_TIMEOUT_names_depth_and_hard_links=90
test_names_depth_and_hard_links() {
  start_daemon
  create; local id=$ID
  python3 -c 'import io,sys,tarfile
t=tarfile.open(sys.argv[1],"w",format=tarfile.PAX_FORMAT)
def add(n, d=b"x"):
    i=tarfile.TarInfo(n); i.size=len(d); t.addfile(i,io.BytesIO(d))
add("café.txt", b"cafe"); add("日本語/ファイル", b"jp")
add("/".join(["l"] * 100) + "/bottom", b"deep")
add("orig", b"linked")
h=tarfile.TarInfo("hard"); h.type=tarfile.LNKTYPE; h.linkname="orig"; t.addfile(h)
t.close()' "$D/in.tar"
  req PUT "/v1/sandboxes/$id/files?path=/workspace/n" -H 'Content-Type: application/x-tar' \
    --data-binary @"$D/in.tar"
  expect 204
  run_ok "$id" 'cd /workspace/n && [ "$(cat café.txt)" = cafe ] && [ "$(stat -c %h orig)" = 2 ] && [ "$(stat -c %i orig)" = "$(stat -c %i hard)" ] && [ "$(cat hard)" = linked ]'
  # and back: a directory GET with the same names and depth
  run_ok "$id" 'mkdir -p /workspace/back && echo b > /workspace/back/naïve.txt'
  req GET "/v1/sandboxes/$id/files?path=/workspace/n"; expect 200
  mkdir "$D/out" && tar -C "$D/out" -xf "$D/body" || fail "bad tar"
  [ "$(cat "$D/out/café.txt")" == cafe ] || fail "café.txt did not come back"
  [ "$(cat "$D/out/日本語/ファイル")" == jp ] || fail "the Japanese name did not come back"
  [ "$(cat "$D/out/$(printf 'l/%.0s' $(seq 100))bottom")" == deep ] || fail "the 100-level file did not come back"
  req GET "/v1/sandboxes/$id/files?path=/workspace/back"; expect 200
  tar -tf "$D/body" | grep -q 'naïve.txt' || fail "naïve.txt is not in the tar"
  req GET "/v1/sandboxes/$id/files?path=/workspace/n/caf%C3%A9.txt"; expect 200
  [ "$BODY" == cafe ] || fail "GET of café.txt: $BODY"
}

TEST_TIMEOUT_forks_keep_holes=120
test_forks_keep_holes() {
  start_daemon
  create '{"memory":"256Mi","disk":"2Gi"}'; local id=$ID
  run_ok "$id" 'truncate -s 900M /workspace/sparse && echo end >> /workspace/sparse && truncate -s 100G /tmp/huge'
  req POST "/v1/sandboxes/$id/fork" -d '{"count":1}'
  expect 201 'length == 1 and .[0].state == "running"'
  local f; f=$(echo "$BODY" | jq -r '.[0].id')
  run_ok "$f" 'stat -c "%s %b" /workspace/sparse /tmp/huge; tail -c 4 /workspace/sparse'
  local sz; sz=$(echo "$BODY" | jq -r .stdout)
  echo "$sz" | awk 'NR==1 && $1 == 943718404 && $2 < 1024 {a=1} NR==2 && $1 == 107374182400 && $2 < 1024 {b=1} NR==3 && $1 == "end" {c=1} END {exit !(a && b && c)}' ||
    fail "the fork's files are not the source's sparse files: $sz"
  [ "$(mem_usage "$f")" -lt $((200 << 20)) ] || fail "the fork holds $(mem_usage "$f") bytes"
}

# A PUT that fails (the disk fills) leaves the file it would replace whole, and nothing of its
# own (no partial file, no temporary name); one that succeeds replaces it in one step.
TEST_TIMEOUT_failed_put_keeps_the_old_file=90
test_failed_put_keeps_the_old_file() {
  start_daemon
  create '{"memory":"512Mi","disk":"64Mi"}'; local id=$ID
  head -c 1000000 /dev/urandom >"$D/old"
  req PUT "/v1/sandboxes/$id/files?path=/workspace/a.bin" -H 'Content-Type: application/octet-stream' \
    --data-binary @"$D/old"
  expect 204
  head -c $((100 << 20)) /dev/urandom >"$D/new"
  req PUT "/v1/sandboxes/$id/files?path=/workspace/a.bin" -H 'Content-Type: application/octet-stream' \
    --data-binary @"$D/new"
  expect 413 '.code == "too_large" and (.message | test("disk is full"))'
  req GET "/v1/sandboxes/$id/files?path=/workspace/a.bin"; expect 200
  cmp -s "$D/body" "$D/old" || fail "the old file changed: $(stat -c %s "$D/body") bytes now"
  run_ok "$id" 'ls -A /workspace'
  assert_eq "$(echo "$BODY" | jq -r .stdout)" "a.bin" "nothing but a.bin in /workspace"
  # the same for a tar entry over an existing file
  python3 -c 'import io,sys,tarfile
t=tarfile.open(sys.argv[1],"w")
for n in ("b.bin", "a.bin"):
    i=tarfile.TarInfo(n); i.size=40<<20; t.addfile(i,io.BytesIO(bytes(i.size)))
t.close()' "$D/big.tar"
  req PUT "/v1/sandboxes/$id/files?path=/workspace" -H 'Content-Type: application/x-tar' \
    --data-binary @"$D/big.tar"
  expect 413
  run_ok "$id" 'rm -f /workspace/b.bin; ls -A /workspace; sha256sum < /workspace/a.bin'
  assert_eq "$(echo "$BODY" | jq -r .stdout)" "$(printf 'a.bin\n%s' "$(sha256sum <"$D/old")")" \
    "a tar PUT that fills the disk"
  # a PUT that fits replaces the file (mode and owner as asked)
  req PUT "/v1/sandboxes/$id/files?path=/workspace/a.bin&mode=0600" \
    -H 'Content-Type: application/octet-stream' --data-binary 'new'
  expect 204
  run_ok "$id" 'stat -c "%u %a %s" /workspace/a.bin; ls -A /workspace'
  assert_eq "$(echo "$BODY" | jq -r .stdout)" "$(printf '1000 600 3\na.bin')" "the replaced file"
}

# A directory GET walks as deep as the files API promises (SD_FILES_MAX_DEPTH, 4096 levels).
TEST_TIMEOUT_get_of_4096_levels=120
test_get_of_4096_levels() {
  start_daemon
  create; local id=$ID
  run_ok "$id" 'cd /workspace && mkdir top && cd top && python3 -c "
import os
for _ in range(4096):
    os.mkdir(\"d\"); os.chdir(\"d\")
open(\"bottom\", \"w\").write(\"deep\"); os.symlink(\"bottom\", \"link\")"'
  req GET "/v1/sandboxes/$id/files?path=/workspace/top"; expect 200
  tar -tf "$D/body" >"$D/list" || fail "a bad tar ($(stat -c %s "$D/body") bytes)"
  assert_eq "$(grep -c . "$D/list")" 4098 "entries: 4096 directories, the file and the link"
  tar -tvf "$D/body" >"$D/long" || fail "a bad tar"
  grep -q 'link -> bottom$' "$D/long" || fail "the deepest link is not in the tar"
  req GET /healthz; expect 200
}

# Tar entries: a hard link to itself keeps the file; a hard link over another file replaces it;
# directories get the archive's modes (less setuid), whether made or already there.
test_tar_links_and_dir_modes() {
  start_daemon
  create; local id=$ID
  python3 -c 'import io,sys,tarfile
t=tarfile.open(sys.argv[1],"w",format=tarfile.PAX_FORMAT)
def add(n, d=b"x", mode=0o644):
    i=tarfile.TarInfo(n); i.size=len(d); i.mode=mode; t.addfile(i,io.BytesIO(d))
def hard(n, target):
    h=tarfile.TarInfo(n); h.type=tarfile.LNKTYPE; h.linkname=target; t.addfile(h)
def dir(n, mode):
    i=tarfile.TarInfo(n); i.type=tarfile.DIRTYPE; i.mode=mode; t.addfile(i)
dir("priv", 0o700); add("priv/f", b"p"); dir("shared", 0o4775); dir("work", 0o750)
add("self", b"kept"); hard("self", "self"); add("other", b"other"); add("over", b"old")
hard("over", "other")
t.close()' "$D/in.tar"
  run_ok "$id" 'mkdir -m 0755 /workspace/n /workspace/n/work'
  req PUT "/v1/sandboxes/$id/files?path=/workspace/n" -H 'Content-Type: application/x-tar' \
    --data-binary @"$D/in.tar"
  expect 204
  run_ok "$id" 'cd /workspace/n && stat -c "%n %a %u" priv shared work && cat self over && stat -c %h self other'
  assert_eq "$(echo "$BODY" | jq -r .stdout)" \
    "$(printf 'priv 700 1000\nshared 775 1000\nwork 750 1000\nkeptother1\n2')" \
    "directory modes, the self link and the link over a file"
  # the same archive again: everything is there already
  req PUT "/v1/sandboxes/$id/files?path=/workspace/n" -H 'Content-Type: application/x-tar' \
    --data-binary @"$D/in.tar"
  expect 204
  run_ok "$id" 'cd /workspace/n && cat self over; echo; ls -A'
  assert_eq "$(echo "$BODY" | jq -r .stdout)" "$(printf 'keptother\nother\nover\npriv\nself\nshared\nwork')" \
    "the archive put twice"
}

# Request details: a trailing slash names the directory; ?mode= is octal digits only;
# Content-Type is matched as a media type (parameters allowed); a symlink on the way says so.
test_request_details() {
  start_daemon
  create; local id=$ID
  run_ok "$id" 'mkdir -p /workspace/d && echo a > /workspace/d/a && ln -s d /workspace/l'
  req GET "/v1/sandboxes/$id/files?path=/workspace/d/"; expect 200
  tar -tf "$D/body" >"$D/list" || fail "a bad tar"
  grep -qx 'a' "$D/list" || fail "the directory's tar: $(cat "$D/list")"
  req GET "/v1/sandboxes/$id/files?path=/workspace/d/a/"; expect 400
  req PUT "/v1/sandboxes/$id/files?path=/workspace/d/" -H 'Content-Type: application/octet-stream' \
    --data-binary x
  expect 400 '.message | test("names a directory")'
  local m
  for m in '%2B7' '%207' '-7' '0x7' '8' '1000' ''; do
    req PUT "/v1/sandboxes/$id/files?path=/workspace/m&mode=$m" \
      -H 'Content-Type: application/octet-stream' --data-binary x
    expect 400 '.message | startswith("mode:")'
  done
  req PUT "/v1/sandboxes/$id/files?path=/workspace/m&mode=0640" \
    -H 'Content-Type: application/octet-stream; charset=binary' --data-binary x
  expect 204
  local t
  for t in application/x-tarball application/x-tar-gz application/octet-streamy text/plain; do
    req PUT "/v1/sandboxes/$id/files?path=/workspace/ct" -H "Content-Type: $t" --data-binary x
    expect 415
  done
  tar -C "$D" -cf "$D/one.tar" --transform 's,.*,t.txt,' body
  req PUT "/v1/sandboxes/$id/files?path=/workspace/td" -H 'Content-Type: Application/X-Tar ; x=1' \
    --data-binary @"$D/one.tar"
  expect 204
  for p in /workspace/l/a /workspace/l/new; do
    req GET "/v1/sandboxes/$id/files?path=$p"; expect 400 '.message | test("symbolic link")'
    req PUT "/v1/sandboxes/$id/files?path=$p" -H 'Content-Type: application/octet-stream' --data-binary x
    expect 400 '.message | test("symbolic link")'
  done
}

source "$(dirname "$0")/../lib/lib.sh"
