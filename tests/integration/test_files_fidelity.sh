#!/usr/bin/env bash
# What the files API and forks carry, and what they charge: uploads count against the
# sandbox's memory (its files live in memory), not the daemon's; non-ASCII names and trees
# deeper than 64 levels travel both ways; tar hard links are made, not dropped; forks keep
# sparse files sparse (900 MiB and 100 GiB of holes cost the fork nothing).

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

source "$(dirname "$0")/../lib/lib.sh"
