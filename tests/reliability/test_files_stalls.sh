#!/usr/bin/env bash
# The files API never stalls the daemon's loop, whatever the sandbox does to its files: a PUT
# onto a FIFO the sandbox made, a directory GET while a sandbox process keeps growing a file
# it holds, a 250k-entry tar both ways, 20k entries under a 1000-level path. While each slow
# thing runs, /healthz is asked again and again and must answer every time within a generous
# bound (3 s: a pass/fail of "the loop answers", not a timing benchmark); then the slow thing
# itself must have succeeded.

DAEMON_TAG=stalls
source "$(dirname "$0")/../lib/daemon.sh"

# mktar OUT PYTHON: a GNU tar written by hand (tarfile is too slow for 250k entries on a busy
# machine); the statements call entry(name[, data]).
mktar() {
  python3 - "$1" "$2" <<'EOF'
import sys
out = open(sys.argv[1], "wb")
def hdr(name, size=0, typ=b"0"):
    h = bytearray(512)
    h[0:len(name)] = name
    h[100:108] = b"0000644\0"; h[108:116] = b"0001750\0"; h[116:124] = b"0001750\0"
    h[124:136] = b"%011o\0" % size; h[136:148] = b"00000000000\0"
    h[148:156] = b" " * 8; h[156:157] = typ; h[257:265] = b"ustar  \0"
    h[148:156] = b"%06o\0 " % sum(h)
    return bytes(h)
def pad(b):
    return b + b"\0" * (-len(b) % 512)
def entry(name, data=b""):
    name = name.encode()
    if len(name) > 100:
        out.write(hdr(b"././@LongLink", len(name) + 1, b"L") + pad(name + b"\0"))
    out.write(hdr(name[:100], len(data)) + pad(data))
exec(sys.argv[2])
out.write(b"\0" * 10240)
out.close()
EOF
}

# While PID runs, /healthz must keep answering.
probe_while() { # PID what
  while kill -0 "$1" 2>/dev/null; do
    local c
    c=$(curl -s --max-time 3 --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' http://sd/healthz) || true
    [ "$c" == 200 ] || { kill "$1" 2>/dev/null; fail "/healthz did not answer within 3 s while $2 ran (got '$c')"; }
    sleep 0.2
  done
}
bg_req() { # out-prefix METHOD PATH [curl args]: runs in the background, sets BGPID
  local o=$1 m=$2 p=$3; shift 3
  curl -s --max-time 120 --unix-socket "$SOCK" -X "$m" -o "$o.body" -w '%{http_code}' "$@" \
    "http://sd$p" >"$o.code" 2>/dev/null &
  BGPID=$!
}
bg_expect() { # out-prefix CODE
  wait "$BGPID" || true
  [ "$(cat "$1.code")" == "$2" ] || fail "expected HTTP $2, got $(cat "$1.code"): $(head -c 300 "$1.body")"
}
run_ok() { # ID script
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg s "$2" '{argv:["sh","-c",$s]}')"
  expect 200 '.exit_code == 0'
}

TEST_TIMEOUT_put_onto_fifo=60
test_put_onto_fifo() {
  start_daemon
  create; local id=$ID
  run_ok "$id" 'mkfifo /workspace/p /workspace/q'
  bg_req "$D/put" PUT "/v1/sandboxes/$id/files?path=/workspace/p" \
    -H 'Content-Type: application/octet-stream' --data-binary 'into the fifo'
  probe_while "$BGPID" "a PUT onto a FIFO"
  bg_expect "$D/put" 204
  python3 -c 'import io,sys,tarfile
t=tarfile.open(sys.argv[1],"w"); i=tarfile.TarInfo("q"); d=b"tar into the fifo"; i.size=len(d)
t.addfile(i,io.BytesIO(d)); t.close()' "$D/q.tar"
  bg_req "$D/tput" PUT "/v1/sandboxes/$id/files?path=/workspace" \
    -H 'Content-Type: application/x-tar' --data-binary @"$D/q.tar"
  probe_while "$BGPID" "a tar PUT onto a FIFO"
  bg_expect "$D/tput" 204
  run_ok "$id" '[ -f /workspace/p ] && [ "$(cat /workspace/p)" = "into the fifo" ] && [ "$(cat /workspace/q)" = "tar into the fifo" ]'
}

# A sandbox process waits until the file is opened (inotify IN_OPEN), then grows it without
# end (ftruncate, as fast as it can): the tar must carry the size its header promised.
GROWER='
import ctypes, os, struct, time
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/workspace/g", exist_ok=True)
p = "/workspace/g/f"
fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 64 << 20)
ino = libc.inotify_init1(0)
libc.inotify_add_watch(ino, p.encode(), 0x20)  # IN_OPEN
open("/workspace/ready", "w").close()
os.read(ino, 4096)
size, end = 64 << 20, time.time() + 30
while time.time() < end:
    size += 1 << 20
    os.ftruncate(fd, size)
'

TEST_TIMEOUT_get_of_a_growing_file=90
test_get_of_a_growing_file() {
  start_daemon
  create; local id=$ID
  command -v python3 >/dev/null || skip "python3 is needed (in the sandbox's /usr)"
  req POST "/v1/sandboxes/$id/exec" -d "$(jq -nc --arg s "$GROWER" '{argv:["sh","-c","python3 -c \"$0\" >/dev/null 2>&1 </dev/null &", $s]}')"
  expect 200 '.exit_code == 0'
  for _ in $(seq 100); do
    req GET "/v1/sandboxes/$id/files?path=/workspace/ready"; [ "$CODE" == 200 ] && break; sleep 0.1
  done
  expect 200
  bg_req "$D/get" GET "/v1/sandboxes/$id/files?path=/workspace/g"
  probe_while "$BGPID" "a directory GET of a growing file"
  bg_expect "$D/get" 200
  local size; size=$(python3 -c 'import sys,tarfile; print(tarfile.open(sys.argv[1]).getmember("f").size)' "$D/get.body") ||
    fail "not a whole tar"
  [ "$size" == $((64 << 20)) ] || fail "the tar's entry has $size bytes, not the size at open (64 MiB)"
}

TEST_TIMEOUT_many_entries=300
TEST_PASS_many_entries=sanitized # (once: tests/README.md)
test_many_entries() {
  start_daemon
  create '{"disk":"2Gi","memory":"2Gi"}'; local id=$ID
  mktar "$D/many.tar" 'for i in range(250000): entry("d%d/f%d" % (i // 1000, i))'
  bg_req "$D/put" PUT "/v1/sandboxes/$id/files?path=/workspace/many" \
    -H 'Content-Type: application/x-tar' --data-binary @"$D/many.tar"
  probe_while "$BGPID" "a 250k-entry tar PUT"
  bg_expect "$D/put" 204
  rm -f "$D/many.tar"
  bg_req "$D/get" GET "/v1/sandboxes/$id/files?path=/workspace/many"
  probe_while "$BGPID" "a directory GET of 250k empty files"
  bg_expect "$D/get" 200
  local n; n=$(tar -tf "$D/get.body" | grep -c '/f') || true
  [ "$n" == 250000 ] || fail "the tar has $n files, not 250000"
}

TEST_TIMEOUT_deep_path=300
test_deep_path() {
  start_daemon
  create '{"disk":"1Gi"}'; local id=$ID
  mktar "$D/deep.tar" 'deep = "/".join(["d"] * 1000)
for i in range(20000): entry("%s/f%d" % (deep, i))'
  bg_req "$D/put" PUT "/v1/sandboxes/$id/files?path=/workspace/deep" \
    -H 'Content-Type: application/x-tar' --data-binary @"$D/deep.tar"
  probe_while "$BGPID" "a tar PUT of 20k entries under a 1000-level path"
  bg_expect "$D/put" 204
  bg_req "$D/get" GET "/v1/sandboxes/$id/files?path=/workspace/deep"
  probe_while "$BGPID" "a directory GET of 20k entries under a 1000-level path"
  bg_expect "$D/get" 200
  local n; n=$(tar -tf "$D/get.body" | grep -c '/f[0-9]*$') || true
  [ "$n" == 20000 ] || fail "the tar has $n files under the deep path, not 20000"
}

# The files worker of sandbox ID: the daemon's child (the daemon's own binary) once it is in
# the sandbox's memory cgroup.
files_worker() { # ID -> PID
  local c exe; exe=$(readlink "/proc/$DPID/exe")
  for c in $(pgrep -P "$DPID"); do
    [ "$(readlink "/proc/$c/exe" 2>/dev/null)" == "$exe" ] || continue
    grep -q "/$1\$" "/proc/$c/cgroup" 2>/dev/null && { echo "$c"; return 0; }
  done
  return 1
}

# A tar PUT cut off by the sandbox's end (DELETE) is 409 conflict ("the sandbox ended"), not 413
# out of memory: the end kills the worker in the sandbox's cgroup. The worker is stopped
# (SIGSTOP) once seen in the cgroup, so that the end surely finds it running.
TEST_TIMEOUT_put_cut_by_the_end=120
test_put_cut_by_the_end() {
  start_daemon
  create '{"disk":"1Gi","memory":"1Gi"}'; local id=$ID
  mktar "$D/many.tar" 'for i in range(60000): entry("d%d/f%d" % (i // 1000, i))'
  bg_req "$D/put" PUT "/v1/sandboxes/$id/files?path=/workspace/many" \
    -H 'Content-Type: application/x-tar' --data-binary @"$D/many.tar"
  local w=""
  for _ in $(seq 3000); do
    w=$(files_worker "$id") && break
    kill -0 "$BGPID" 2>/dev/null || break
    sleep 0.01
  done
  [ -n "$w" ] || { bg_expect "$D/put" 204; fail "the files worker was never seen"; }
  kill -STOP "$w" || fail "the files worker ended before it was stopped"
  req DELETE "/v1/sandboxes/$id"
  expect 204
  bg_expect "$D/put" 409
  jq -e '.code == "conflict" and (.message | contains("the sandbox ended"))' "$D/put.body" \
    >/dev/null || fail "the answer: $(cat "$D/put.body")"
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$DPID/status"; }

TEST_TIMEOUT_slow_readers=180
test_slow_readers() {
  start_daemon
  create '{"memory":"1Gi","disk":"1Gi"}'; local id=$ID
  run_ok "$id" 'mkdir /workspace/big && for i in $(seq 20); do head -c 10M /dev/urandom > /workspace/big/f$i; done'
  local base; base=$(rss_kib)
  # six clients reading a 200 MiB directory at 1 MiB/s: the daemon holds what is in flight,
  # not six copies of the tar
  local pids=() i
  for i in 1 2 3 4 5 6; do
    curl -s --max-time 60 --limit-rate 1M --unix-socket "$SOCK" -o /dev/null \
      "http://sd/v1/sandboxes/$id/files?path=/workspace/big" &
    pids+=($!)
  done
  local peak=0 r
  for _ in $(seq 20); do
    r=$(rss_kib); [ "$r" -gt "$peak" ] && peak=$r
    sleep 0.25
  done
  curl -s --max-time 3 --unix-socket "$SOCK" -o /dev/null http://sd/healthz || fail "/healthz did not answer with six slow readers"
  for i in "${pids[@]}"; do kill "$i" 2>/dev/null; done
  for i in "${pids[@]}"; do wait "$i" 2>/dev/null || true; done
  [ $((peak - base)) -lt $((100 << 10)) ] ||
    fail "the daemon grew by $(((peak - base) >> 10)) MiB for six slow readers of a 200 MiB directory"
  # the workers went with their readers; a full read still works
  local code
  code=$(curl -s --max-time 120 --unix-socket "$SOCK" -o "$D/big.tar" -w '%{http_code}' \
    "http://sd/v1/sandboxes/$id/files?path=/workspace/big") || true
  [ "$code" == 200 ] || fail "GET of the directory: HTTP $code"
  [ "$(tar -tf "$D/big.tar" | wc -l)" == 20 ] || fail "the tar does not hold the 20 files"
}

# Uploads are spooled to an unlinked file in the state directory as they arrive, never held in
# the daemon's memory: six slow 100 MiB PUTs (three octet-stream, three tar) at once.
TEST_TIMEOUT_slow_uploads=240
TEST_PASS_slow_uploads=sanitized # (once: tests/README.md)
test_slow_uploads() {
  start_daemon
  create '{"memory":"2Gi","disk":"2Gi"}'; local id=$ID
  head -c 100M /dev/urandom >"$D/blob"
  (cd "$D" && tar -cf "$D/blob.tar" blob)
  local base; base=$(rss_kib)
  local pids=() i
  for i in 1 2 3 4 5 6; do
    local f=blob t=application/octet-stream p=/workspace/up$i
    [ $i -gt 3 ] && f=blob.tar t=application/x-tar
    curl -s --max-time 200 --limit-rate 10M --unix-socket "$SOCK" -X PUT -o "$D/up$i.body" \
      -w '%{http_code}' -H "Content-Type: $t" --data-binary @"$D/$f" \
      "http://sd/v1/sandboxes/$id/files?path=$p" >"$D/up$i.code" 2>/dev/null &
    pids+=($!)
  done
  local peak=0 r busy=1
  while [ $busy == 1 ]; do
    busy=0
    for i in "${pids[@]}"; do kill -0 "$i" 2>/dev/null && busy=1; done
    r=$(rss_kib); [ "$r" -gt "$peak" ] && peak=$r
    sleep 0.2
  done
  for i in "${pids[@]}"; do wait "$i" 2>/dev/null || true; done
  for i in 1 2 3 4 5 6; do
    [ "$(cat "$D/up$i.code")" == 204 ] || fail "upload $i: HTTP $(cat "$D/up$i.code"): $(head -c 300 "$D/up$i.body")"
  done
  [ $((peak - base)) -lt $((100 << 10)) ] ||
    fail "the daemon grew by $(((peak - base) >> 10)) MiB for six slow 100 MiB uploads"
  local sum; sum=$(sha256sum <"$D/blob" | cut -d' ' -f1)
  run_ok "$id" "for f in /workspace/up1 /workspace/up2 /workspace/up3 /workspace/up4/blob /workspace/up5/blob /workspace/up6/blob; do
    [ \"\$(sha256sum < \$f | cut -d' ' -f1)\" = $sum ] || { echo \"\$f differs\"; exit 1; }; done"
}

# A client gone midway leaves nothing: no descriptor, no file in the state directory.
TEST_TIMEOUT_upload_abandoned=60
test_upload_abandoned() {
  start_daemon
  create; local id=$ID
  head -c 50M /dev/zero >"$D/blob"
  local fds; fds=$(ls "/proc/$DPID/fd" | wc -l)
  curl -s --max-time 2 --limit-rate 1M --unix-socket "$SOCK" -X PUT -o /dev/null \
    -H 'Content-Type: application/octet-stream' --data-binary @"$D/blob" \
    "http://sd/v1/sandboxes/$id/files?path=/workspace/x" && fail "the upload was meant to be cut short"
  local n
  for _ in $(seq 50); do
    n=$(ls "/proc/$DPID/fd" | wc -l); [ "$n" -le "$fds" ] && break; sleep 0.1
  done
  [ "$n" -le "$fds" ] || fail "the daemon holds $((n - fds)) more descriptors after an abandoned upload"
  ! find "$D/state" -maxdepth 1 -name 'upload-*' | grep -q . || fail "an upload file was left in the state directory"
  req GET "/v1/sandboxes/$id/files?path=/workspace/x"
  expect 404
}

source "$(dirname "$0")/../lib/lib.sh"
