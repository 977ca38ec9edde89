#!/usr/bin/env bash
# Integration tests of pause to disk and resume (docs/API.md "Pause and resume"), with CRIU 4
# (tests/deps_criu.sh) on real daemons: a pausable sandbox running a Python process that keeps
# a counter in memory and a background process is paused (no process, no cgroup, a checkpoint
# on disk), then resumed: the same processes go on from where they were, files included; twice;
# on_idle "pause"; kill -9 of the daemon while paused, during a pause and during a resume
# (nothing is lost: the sandbox is running, or paused with a whole checkpoint); a full disk
# during the checkpoint (the pause fails, the sandbox runs on); a restore that fails (another
# sbx-shim binary) leaves the sandbox paused with its checkpoint; a sandbox of a store image
# (its overlay's upper directory saved and put back, its commits); one with volumes (bound
# again, held while paused); every bad input a 4xx.

DAEMON_TAG=pause
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/../lib/pause.sh"

paused_sandbox() { # a daemon, and a stateful sandbox paused -> ID, COUNT, PIDS
  need_criu
  start_daemon
  stateful_sandbox
  req POST "/v1/sandboxes/$ID/pause"; expect 200
}

cgroup_gone() { # ID: no cgroup directory of the sandbox under the daemon's parent
  [ -z "$(find /sys/fs/cgroup -maxdepth 4 -type d -path "*/$CG/$1" 2>/dev/null)" ] ||
    fail "the paused sandbox's cgroup is still there"
}

# A resume on a node whose room warm-pool entries took ends one of them, as a create does (pools
# never keep a sandbox out): it was 503 node_full while /v1/info said a slot was free.
TEST_TIMEOUT_resume_evicts_pool_entry=120
test_resume_evicts_pool_entry() {
  need_criu
  start_daemon --pool 'size=2,cpu=0.5,memory=256Mi' --max-sandboxes 2
  stateful_sandbox; local id=$ID before=$COUNT pids=$PIDS
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  wait_ready 2 30 # the paused sandbox's room is the pool's now: the node is full
  req GET /v1/info; expect 200 '.free_slots == 2'
  local ended; ended=$(metric sandboxd_pool_evictions_total)
  req POST "/v1/sandboxes/$id/resume"; expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids"
  [ "$(metric sandboxd_pool_evictions_total)" == $((ended + 1)) ] || fail "no pool entry was ended"
}

# A new timeout given while paused is running time from the resume, as the lifetime does not run
# while paused: it counted from the request, and the resume added the time paused before it too.
TEST_TIMEOUT_timeout_while_paused=90
test_timeout_while_paused() {
  need_criu
  start_daemon
  stateful_sandbox; local id=$ID
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  sleep 3
  req POST "/v1/sandboxes/$id/timeout" -d '{"timeout":"30m"}'; expect 200
  req POST "/v1/sandboxes/$id/resume"; expect 200 '.state == "running"'
  local now left
  now=$(date +%s.%N)
  left=$(echo "$BODY" | jq -r .expires_at | xargs -I{} date -d {} +%s.%N)
  left=$(awk -v e="$left" -v n="$now" 'BEGIN { printf "%.3f", e - n }')
  echo "expires $left s after the resume"
  awk -v l="$left" 'BEGIN { exit !(l > 1797 && l <= 1800.5) }' ||
    fail "a 30m timeout given while paused left $left s after the resume"
}

TEST_TIMEOUT_pause_resume=120
test_pause_resume() {
  need_criu
  start_daemon
  stateful_sandbox; local id=$ID before=$COUNT pids=$PIDS
  req POST "/v1/sandboxes/$id/pause"
  expect 200 '.state == "paused" and .pause.checkpoint.bytes > 100000 and .pause.checkpoint.dump_ms > 0'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused"'
  [ -s "$D/state/checkpoints/$id/checkpoint.json" ] || fail "no whole checkpoint on disk"
  [ -z "$(pgrep -f "sbx-shim .*$id")" ] || fail "the paused sandbox still has a shim"
  cgroup_gone "$id"
  # paused: no command, no second pause; the counter stands still meanwhile
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["true"]}'; expect 409 '.message | contains("paused")'
  req POST "/v1/sandboxes/$id/pause"; expect 409
  req POST "/v1/sandboxes/$id/ports" -d '{"port":8000}' # (docs/API.md: ports too)
  expect 409 '.message | endswith("is paused (resume it first)")'
  sleep 4 # paused: a counter that ran on would gain 80 (every 50 ms)
  resume "$id"
  expect 200 '.state == "running" and .pause.last_resume_ms > 0 and (.pause.checkpoint == null)'
  [ ! -e "$D/state/checkpoints/$id" ] || fail "the checkpoint outlived the resume"
  check_resumed "$id" "$before" "$pids"
  # what it gains is the ticks before the dump froze it and after the resume (a slow build: 3 s)
  [ "$COUNT" -lt $((before + 60)) ] || fail "the counter ran while paused: $before -> $COUNT"
  # a second round
  before=$COUNT
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  resume "$id"; expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids"
  # a paused sandbox ends with its checkpoint
  req POST "/v1/sandboxes/$id/pause"; expect 200
  req DELETE "/v1/sandboxes/$id"; expect 204
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "ended" and .end.reason == "terminated"'
  [ ! -e "$D/state/checkpoints/$id" ] || fail "the checkpoint outlived the sandbox"
}

TEST_TIMEOUT_pause_refused=60
test_pause_refused() {
  need_criu
  start_daemon
  create '{}'; local plain=$ID
  req POST "/v1/sandboxes/$plain/pause"; expect 409 '.message | contains("pausable")'
  req POST "/v1/sandboxes/$plain/resume"; expect 409 '.message | contains("not paused")'
  req POST "/v1/sandboxes/$plain/pause" -d '{"node":"b"}'; expect 400 '.message | startswith("node")'
  req POST /v1/sandboxes/sb-nope/pause; expect 404
  # what a pausable sandbox cannot have yet: a 400 naming the field
  local body
  for body in '{"pausable":1}' '{"pausable":true,"profile":"grading"}' '{"pausable":true,"gpus":1}' \
    '{"pausable":true,"isolation":"gvisor"}' '{"on_idle":"pause","profile":"grading"}'; do
    req POST /v1/sandboxes -d "$body"
    expect 400 '(.message | startswith("pausable:")) or (.message | startswith("on_idle:"))'
  done
  # a command running: refused, the sandbox goes on
  create '{"pausable":true}'; local id=$ID
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sleep","3"]}' >/dev/null &
  local bg=$!
  req_until 5 '.usage.commands_running == 1' GET "/v1/sandboxes/$id"
  req POST "/v1/sandboxes/$id/pause"; expect 409 '.message | contains("command")'
  wait "$bg"
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["echo","alive"]}'; expect 200 '.stdout == "alive\n"'
  req POST "/v1/sandboxes/$id/resume"; expect 409 '.message | contains("not paused")'
  req DELETE "/v1/sandboxes/$id"; expect 204
  req POST "/v1/sandboxes/$id/pause"; expect 409
}

# A pausable sandbox of a store image: its root is an overlay of the image's layers (id-mapped
# by the shim for init, which is in its user namespace from birth) over its upper directory,
# which the pause saves with whiteouts and opaque directories and the resume puts back under
# the same layers. A commit of a pausable sandbox (its shim holds the upper directory), before
# and after a resume; a checkpoint whose image is not the sandbox's is refused, kept paused.
TEST_TIMEOUT_pause_image=180
test_pause_image() {
  need_criu
  start_daemon
  MKIMAGE_EXTRA_BINS="sleep" python3 "$(dirname "$0")/mkimage.py" oci "$D/base.tar" || fail "mkimage"
  req POST "/v1/images?name=t:v1" -H 'Content-Type: application/x-tar' --data-binary @"$D/base.tar"
  expect 201
  # a pausable sandbox of t:v1 adds a directory, and its commit is t:v2
  create '{"pausable":true,"image":"t:v1"}'; local first=$ID
  run_in "$first" '["sh","-c","mkdir -p /app/sub && echo s > /app/sub/s && echo w > /workspace/w && id -u && stat -c %u /etc/base.txt"]'
  [ "$OUT" == "$(printf '1000\n0')" ] || fail "owners in a pausable sandbox of an image: $OUT"
  # its init runs a static sbx-shim (the default build) as it is, a dynamic one (the sanitized
  # build's) through the host's loader and libraries on /dev/.sbx-lib (shim/rootfs.h)
  local want=none
  readelf -l "$SBX_BUILD_DIR/sbx-shim" | grep -q 'interpreter:' && want=libs
  run_in "$first" '["sh","-c","if test -e /dev/.sbx-lib; then echo libs; else echo none; fi"]'
  [ "$OUT" == "$want" ] || fail "host libraries in the sandbox: $OUT, with this sbx-shim: $want"
  req POST "/v1/sandboxes/$first/commit" -d '{"name":"t:v2"}'; expect 201 '(.layers | length) == 3'
  req DELETE "/v1/sandboxes/$first"; expect 204
  # on t:v2: a deletion (a whiteout), a directory replaced (opaque), a new file, a counter (and
  # /workspace/w from t:v2's seed)
  image_sandbox t:v2; local id=$ID before=$COUNT loop=$LOOP
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  local ck="$D/state/checkpoints/$id"
  [ -d "$ck/files/upper/app" ] && [ ! -e "$ck/files/root" ] || fail "no upper directory saved: $(ls "$ck/files")"
  grep -c '^layer ' "$ck/image" | grep -qx 3 || fail "the checkpoint's image: $(cat "$ck/image")"
  sleep 2
  resume "$id"; expect 200 '.state == "running"'
  image_resumed "$id" "$before" "$loop"
  # the resumed sandbox commits (its new shim holds the upper directory), and a plain sandbox
  # of the commit sees its deletion and its replaced directory
  req POST "/v1/sandboxes/$id/commit" -d '{"name":"t:v3"}'; expect 201 '(.layers | length) == 4'
  create '{"image":"t:v3"}'; local plain=$ID
  image_files "$plain"
  # a checkpoint of another image: the resume fails and it stays paused, then resumes
  image_counter "$id"; before=$COUNT
  req POST "/v1/sandboxes/$id/pause"; expect 200
  cp "$ck/image" "$D/image.saved"
  sed -i '1s/^layer /layer x/' "$ck/image"
  req POST "/v1/sandboxes/$id/resume"
  expect 500 '.message | contains("not the one it was paused on")'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused"'
  cp "$D/image.saved" "$ck/image"
  resume "$id"; expect 200 '.state == "running"'
  image_resumed "$id" "$before" "$loop"
  # the image of a paused sandbox is in use
  req POST "/v1/sandboxes/$id/pause"; expect 200
  req DELETE /v1/images/t:v2; expect 409
  req DELETE "/v1/sandboxes/$id"; expect 204
}

# A pausable sandbox with volumes: they stay the daemon's (their files are not in the
# checkpoint), a paused sandbox keeps its writable volume (no other sandbox takes it, it is not
# deleted), and the resume binds them again, id-mapped and read-only as they were, under the
# processes that hold files of them open.
TEST_TIMEOUT_pause_volumes=150
test_pause_volumes() {
  need_criu
  start_daemon
  req POST /v1/volumes -d '{"name":"data","size":"32Mi"}'; expect 201
  req POST /v1/volumes -d '{"name":"ds","size":"16Mi"}'; expect 201
  create '{"volumes":[{"name":"ds","path":"/ds"}]}'
  run_in "$ID" '["sh","-c","echo ds-7f3a9q > /ds/d"]'
  req DELETE "/v1/sandboxes/$ID"; expect 204
  stateful_sandbox '"volumes":[{"name":"data","path":"/data"},{"name":"ds","path":"/ds","read_only":true}]'
  local id=$ID
  run_in "$id" '["sh","-c","echo v1 > /data/f; sh -c \"exec 3>>/data/log; echo one >&3; exec sleep 1000\" </dev/null >/dev/null 2>&1 & echo $!"]'
  local holder=$OUT
  sleep 0.2
  snapshot "$id"; local before=$COUNT pids=$PIDS
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  ! grep -rqs ds-7f3a9q "$D/state/checkpoints/$id/files" || fail "a volume's file went into the checkpoint: $(grep -rl ds-7f3a9q "$D/state/checkpoints/$id/files")"
  # paused, it keeps its writable volume
  req POST /v1/sandboxes -d '{"volumes":[{"name":"data","path":"/data"}]}'
  expect 409 ".message | contains(\"in use by sandbox $id\")"
  req DELETE /v1/volumes/data; expect 409
  resume "$id"; expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids"
  run_in "$id" '["sh","-c","readlink /proc/'"$holder"'/fd/3; cat /data/f /ds/d /data/log; stat -c %u /data/f; echo x > /ds/x 2>/dev/null || echo ro"]'
  [ "$OUT" == "$(printf '/data/log\nv1\nds-7f3a9q\none\n1000\nro')" ] ||
    fail "the volumes after the resume: $(echo "$OUT" | tr '\n' ' ')"
  run_in "$id" '["sh","-c","echo v2 > /data/f"]'
  req DELETE "/v1/sandboxes/$id"; expect 204
  create '{"volumes":[{"name":"data","path":"/data"}]}'
  run_in "$ID" '["cat","/data/f"]'; [ "$OUT" == v2 ] || fail "the volume after its sandbox: $OUT"
}

# A pausable sandbox of a directory image (the operator's, config "images"; its root read-only
# as any directory image's): its overlay's upper directory (its /etc) is saved and put back
# over the same directory.
TEST_TIMEOUT_pause_dir_image=120
test_pause_dir_image() {
  need_criu
  start_daemon # (D: the case's directory)
  local img="$D/img" lib=/usr/lib/x86_64-linux-gnu
  [ -e /usr/lib64/ld-linux-x86-64.so.2 ] && [ -e $lib/libc.so.6 ] || skip "needs an x86-64 glibc host"
  mkdir -p "$img/usr/bin" "$img$lib" "$img/usr/lib64" "$img/etc"
  ln -s usr/bin "$img/bin"; ln -s usr/lib "$img/lib"; ln -s usr/lib64 "$img/lib64"
  cp /usr/bin/dash "$img/usr/bin/sh"; cp /usr/bin/cat /usr/bin/sleep "$img/usr/bin/"
  cp $lib/libc.so.6 "$img$lib/"; cp /usr/lib64/ld-linux-x86-64.so.2 "$img/usr/lib64/"
  # the image preloads a library of its own: never into init (which runs sbx-shim through the
  # loader, still root of its user namespace), but into the image's own programs
  cat >"$D/pre.c" <<'C'
#include <fcntl.h>
#include <unistd.h>
__attribute__((constructor)) static void pre(void) {
    close(open(getpid() == 1 ? "/tmp/init-ran-image-code" : "/tmp/preloaded", O_CREAT | O_WRONLY, 0644));
}
C
  cc -shared -fPIC -o "$img/usr/lib64/pre.so" "$D/pre.c" || fail "cc pre.so"
  echo /usr/lib64/pre.so >"$img/etc/ld.so.preload"
  stop_daemon
  echo "{\"images\": {\"mini\": \"$img\"}}" >"$D/config.json"
  start_daemon --config "$D/config.json"
  create '{"pausable":true,"image":"mini"}'; local id=$ID
  run_in "$id" '["sh","-c","ls_tmp() { for f in /tmp/*; do echo ${f#/tmp/}; done; }; ls_tmp"]'
  [ "$OUT" == preloaded ] || fail "the image's preload: $(echo "$OUT" | tr '\n' ' ')"
  local body; body=$(jq -cn --arg c "$COUNTER" '{argv:["sh","-c",("(" + $c + ") </dev/null >/dev/null 2>&1 & echo $! > /tmp/loop")]}')
  req POST "/v1/sandboxes/$id/exec" -d "$body"; expect 200 '.exit_code == 0'
  run_in "$id" '["cat","/etc/hostname"]'; local host=$OUT # (the upper directory's: a read-only root)
  sleep 0.3
  image_counter "$id"; local before=$COUNT loop=$LOOP
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  grep -qx "dir $img" "$D/state/checkpoints/$id/image" || fail "the checkpoint's image: $(cat "$D/state/checkpoints/$id/image")"
  resume "$id"; expect 200 '.state == "running"'
  image_counter "$id"
  [ "$LOOP" == "$loop" ] && [ "$COUNT" -ge "$before" ] && [ "$COUNT" -lt $((before + 60)) ] ||
    fail "the loop after the resume: $LOOP (was $loop), $COUNT (was $before)"
  run_in "$id" '["cat","/etc/hostname"]'; [ "$OUT" == "$host" ] || fail "the upper directory's file: $OUT"
  [ ! -e "$img/etc/hostname" ] || fail "the sandbox's /etc went into the image's directory"
}

TEST_TIMEOUT_pause_on_idle=60
test_pause_on_idle() {
  need_criu
  start_daemon
  stateful_sandbox '"on_idle":"pause","idle_timeout":2'; local id=$ID before=$COUNT pids=$PIDS
  local mine=".[] | select(.id == \"$id\")"
  req GET /v1/sandboxes; expect 200 "$mine | .pause.on_idle == \"pause\" and .state == \"running\""
  # a fork cannot pause when idle: it says so, and how to fork such a source
  req POST "/v1/sandboxes/$id/fork" -d '{"count":1}'
  expect 400 '.message | startswith("on_idle: the source pauses when idle, which a fork cannot")'
  req POST "/v1/sandboxes/$id/fork" -d '{"count":1,"on_idle":"pause"}'
  expect 400 '.message | startswith("on_idle: a fork cannot pause when idle")'
  # (an API call on the sandbox is activity, the list is not): its checkpoint takes what it takes
  req_until 30 "$mine | .state == \"paused\"" GET /v1/sandboxes
  # not before its 2 s: the dump began (paused_at less the dump's time, or later) 2 s or more
  # after the last activity (the timer ticks every 250 ms)
  local ms='def ms: (.[0:19] + "Z" | fromdate) * 1000 + (.[20:23] | tonumber);'
  expect 200 "$ms $mine | (.pause.checkpoint.paused_at | ms) - .pause.checkpoint.dump_ms -
    (.last_activity_at | ms) >= 1990"
  req GET "/v1/sandboxes/$id"
  expect 200 '.state == "paused" and .end == null'
  resume "$id"; expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids"
}

TEST_TIMEOUT_pause_daemon_restart=120
test_pause_daemon_restart() {
  paused_sandbox; local id=$ID before=$COUNT pids=$PIDS
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  start_daemon
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused" and .pause.checkpoint.bytes > 0'
  resume "$id"; expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids"
}

# kill -9 of the daemon while its shim pauses or resumes the sandbox, at a few moments: after
# the restart the sandbox runs (its processes as they were) or is paused with a whole
# checkpoint, and then resumes.
TEST_TIMEOUT_pause_daemon_killed=240
test_pause_daemon_killed() {
  need_criu
  local delay step
  for step in pause resume; do
    for delay in 0.02 0.08 0.15; do
      start_daemon
      stateful_sandbox; local id=$ID before=$COUNT pids=$PIDS
      if [ $step == resume ]; then
        req POST "/v1/sandboxes/$id/pause"; expect 200
      fi
      curl -s --max-time 30 --unix-socket "$SOCK" -X POST "http://sd/v1/sandboxes/$id/$step" \
        >/dev/null &
      local bg=$!
      sleep "$delay"
      kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
      wait "$bg" 2>/dev/null || true
      sleep 0.5 # a shim finishes what it was doing on its own
      start_daemon
      req_until 10 '.state == "running" or .state == "paused"' GET "/v1/sandboxes/$id"
      expect 200 '.state == "running" or .state == "paused"'
      echo "# $step, kill after ${delay}s: $(echo "$BODY" | jq -r .state)"
      if [ "$(echo "$BODY" | jq -r .state)" == paused ]; then
        [ -s "$D/state/checkpoints/$id/checkpoint.json" ] || fail "paused without a whole checkpoint"
        resume "$id"; expect 200 '.state == "running"'
      fi
      check_resumed "$id" "$before" "$pids"
      req DELETE "/v1/sandboxes/$id"; expect 204
      stop_daemon
    done
  done
}

TEST_TIMEOUT_pause_disk_full=90
test_pause_disk_full() {
  need_criu
  daemon_dirs
  mkdir -p "$D/state"
  mount -t tmpfs -o size=2m sbx-pause-full "$D/state" # the checkpoint (~3 MB) cannot fit (the
  # sweep unmounts it)
  start_daemon
  stateful_sandbox; local id=$ID before=$COUNT pids=$PIDS
  req POST "/v1/sandboxes/$id/pause"
  expect 500 '.message | startswith("pause")'
  echo "# $(echo "$BODY" | jq -r .message)"
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids" # the same processes go on
  [ ! -e "$D/state/checkpoints/$id" ] || fail "a partial checkpoint was left"
  [ -s "$D/run/criu-dump-$id.log" ] || fail "CRIU's log of the failed pause was not kept"
  req DELETE "/v1/sandboxes/$id"; expect 204
}

# A restore that fails (here: the daemon now runs another sbx-shim binary, and CRIU finds the
# checkpoint's init binary changed) answers a typed error and leaves the sandbox paused with
# its checkpoint; the right binary resumes it.
TEST_TIMEOUT_pause_restore_fails=120
test_pause_restore_fails() {
  paused_sandbox; local id=$ID before=$COUNT pids=$PIDS
  local other=$DAEMON_ROOT/other-shim
  mkdir -p "$other"
  cp "$SBX_BUILD_DIR/sbx-shim" "$other/sbx-shim"
  printf 'x' >>"$other/sbx-shim"
  stop_daemon
  DAEMON_SHIM=$other/sbx-shim start_daemon
  req POST "/v1/sandboxes/$id/resume"
  expect 500 '.message | startswith("resume:")'
  echo "# $(echo "$BODY" | jq -r .message)"
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused"'
  [ -s "$D/state/checkpoints/$id/checkpoint.json" ] || fail "the failed resume lost the checkpoint"
  stop_daemon
  DAEMON_SHIM='' start_daemon
  req_until 10 '.state == "paused"' GET "/v1/sandboxes/$id"
  local i
  for i in $(seq 50); do # the failed resume's cleanup may still run
    req POST "/v1/sandboxes/$id/resume"
    [ "$CODE" != 409 ] && break
    sleep 0.1
  done
  expect 200 '.state == "running"'
  check_resumed "$id" "$before" "$pids"
}

# A WebSocket through the daemon's port proxy (raw, over its Unix socket): the 101, one echo,
# "open" on stdout, then it waits for the connection to end: "closed" (a pause cuts it).
WS_HOLD='
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(60)
s.sendall(("GET %s HTTP/1.1\r\nHost: sd\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" % sys.argv[2]).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 101"), head
s.sendall(b"ping"); got = b""
while len(got) < 4:
    got += s.recv(4)
assert got == b"ping", got
print("open", flush=True)
print("closed" if s.recv(64) == b"" else "data")
'

# Sockets across a pause (CRIU 4.2.1 with tests/criu's patch): a listening TCP socket, a TCP
# connection whose two ends are in the sandbox, a UDP pair, in a Python process with threads;
# the sandbox has a port, and a WebSocket proxied to it is cut when the pause begins (its server
# sees the end; the client's connection closes) and the port answers again after the resume.
TEST_TIMEOUT_pause_sockets=90
test_pause_sockets() {
  need_criu
  start_daemon
  create '{"pausable":true,"ports":[9000]}'; local id=$ID
  req PUT "/v1/sandboxes/$id/files?path=/workspace/net.py" -H 'Content-Type: application/octet-stream' \
    --data-binary @"$(dirname "$0")/pause_sockets.py"
  expect 204
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","python3 /workspace/net.py 9000 </dev/null 2>/tmp/net.err >/dev/null &"]}'
  expect 200
  req_until 10 '.exit_code == 0' POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","test -s /tmp/tcp && test -s /tmp/udp"]}'
  expect 200 '.exit_code == 0'
  req GET "/v1/sandboxes/$id/ports/9000/"; expect 200
  [ "$BODY" == hello ] || fail "the port answered: $BODY"
  "${SBX_PYTHON:-/usr/bin/python3}" -c "$WS_HOLD" "$SOCK" "/v1/sandboxes/$id/ports/9000/ws" >"$D/ws.out" 2>&1 &
  local client=$!
  for _ in $(seq 100); do grep -q open "$D/ws.out" && break; sleep 0.1; done
  grep -q open "$D/ws.out" || fail "no WebSocket through the port: $(cat "$D/ws.out")"
  run_in "$id" '["cat","/tmp/ws"]'; [ "$OUT" == open ] || fail "the server has no WebSocket: $OUT"
  run_in "$id" '["cat","/tmp/count"]'; local before=$OUT
  req POST "/v1/sandboxes/$id/pause"
  expect 200 '.state == "paused" and .pause.checkpoint.sockets_ended == 0'
  timeout 10 tail --pid="$client" -f /dev/null || fail "the WebSocket client still waits"
  [ "$(tail -1 "$D/ws.out")" == closed ] || fail "the proxied WebSocket was not closed: $(cat "$D/ws.out")"
  req GET "/v1/sandboxes/$id/ports/9000/"; expect 409 '.message | contains("paused")'
  resume "$id"; expect 200 '.state == "running"'
  sleep 0.5
  run_in "$id" '["sh","-c","cat /tmp/count; echo; cat /tmp/tcp; echo; cat /tmp/udp; echo; cat /tmp/ws; echo; cat /tmp/net.err"]'
  local count tcp udp
  count=$(sed -n 1p <<<"$OUT") tcp=$(sed -n 2p <<<"$OUT") udp=$(sed -n 3p <<<"$OUT")
  [ "$count" -gt "$before" ] 2>/dev/null || fail "the counter did not go on: $before -> $count"
  # both readers follow the counter (they got what was sent after the resume)
  [ "$tcp" -gt "$before" ] && [ "$tcp" -ge $((count - 2)) ] || fail "TCP lags: $OUT"
  [ "$udp" -gt "$before" ] && [ "$udp" -ge $((count - 2)) ] || fail "UDP lags: $OUT"
  [ "$(sed -n 4p <<<"$OUT")" == closed ] || fail "the server did not see the WebSocket end: $OUT"
  [ -z "$(sed -n '5,$p' <<<"$OUT")" ] || fail "the sandbox's process has errors: $OUT"
  req GET "/v1/sandboxes/$id/ports/9000/"; expect 200
  [ "$BODY" == hello ] || fail "the port answered after the resume: $BODY"
}

# A private world for a networked sandbox (tests/network/world.sh): the daemon's own network
# namespace ("host", $HOSTNS) and an "internet" one where an HTTP server answers on every
# address (203.0.113.10 stands for a public host, 169.254.169.254 for cloud metadata).
net_world() {
  unshare --net sleep infinity & local inet=$!
  unshare --net sleep infinity & HOSTNS=$!
  daemon_at_exit kill "$inet" "$HOSTNS"
  for _ in $(seq 50); do
    [ "$(readlink /proc/$HOSTNS/ns/net)" != "$(readlink /proc/self/ns/net)" ] &&
      [ "$(readlink /proc/$inet/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.02
  done
  nsenter --net=/proc/$HOSTNS/ns/net bash "$SBX_SRC_DIR/tests/network/world.sh" "$inet" || fail "world.sh"
  mkdir -p "$D/www" && echo hi >"$D/www/f"
  nsenter --net=/proc/$inet/ns/net python3 -m http.server --bind 0.0.0.0 8080 --directory "$D/www" \
    >/dev/null 2>&1 &
  daemon_at_exit kill $!
  echo '{"network":{"enabled":true}}' >"$D/net.json"
  DAEMON_WRAP=(nsenter "--net=/proc/$HOSTNS/ns/net")
}

HOLD='
import socket
s = socket.create_connection(("203.0.113.10", 8080))
open("/tmp/held", "w").write("held")
try:
    s.recv(10)
    open("/tmp/held", "w").write("closed")
except Exception as e:
    open("/tmp/held", "w").write(repr(e))
'
FETCH='["python3","-c","import sys, urllib.request\ntry:\n    print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode().strip())\nexcept Exception as e:\n    print(\"no:\", e)"'
fetch() { # ID URL -> OUT
  run_in "$1" "$FETCH,\"$2\"]"
}

# A pausable sandbox with a network: the pause takes its veth away (its checkpoint holds only
# loopback), the resume plumbs it again with the same egress policy; its processes go on.
TEST_TIMEOUT_pause_network=90
test_pause_network() {
  need_criu
  daemon_dirs
  net_world
  start_daemon --config "$D/net.json"
  stateful_sandbox '"network":"open"'; local id=$ID before=$COUNT pids=$PIDS
  fetch "$id" http://203.0.113.10:8080/f; [ "$OUT" == hi ] || fail "no egress before the pause: $OUT"
  fetch "$id" http://169.254.169.254:8080/f; [[ "$OUT" == no:* ]] || fail "metadata reached: $OUT"
  req GET "/v1/sandboxes/$id"; expect 200 '.network.mode == "open" and (.network.ipv4 | length > 0)'
  local addr; addr=$(echo "$BODY" | jq -r .network.ipv4)
  # a connection to the outside, held: the pause ends it (the resume could not bind its address)
  req PUT "/v1/sandboxes/$id/files?path=/workspace/hold.py" -H 'Content-Type: application/octet-stream' \
    --data-binary "$HOLD"
  expect 204
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","python3 /workspace/hold.py </dev/null >/dev/null 2>&1 &"]}'
  expect 200
  req_until 10 '.stdout == "held"' POST "/v1/sandboxes/$id/exec" -d '{"argv":["cat","/tmp/held"]}'
  expect 200 '.stdout == "held"'
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused" and .pause.checkpoint.sockets_ended == 1'
  [ -z "$(nsenter --net=/proc/$HOSTNS/ns/net ip -o link show | grep -v ' lo:\| up0@')" ] ||
    fail "a paused sandbox keeps an interface: $(nsenter --net=/proc/$HOSTNS/ns/net ip -o link show)"
  resume "$id"; expect 200 ".state == \"running\" and .network.mode == \"open\" and .network.ipv4 == \"$addr\""
  check_resumed "$id" "$before" "$pids"
  run_in "$id" '["cat","/tmp/held"]'
  [[ "$OUT" == *ConnectionAbortedError* ]] || fail "the held connection did not end as aborted: $OUT"
  fetch "$id" http://203.0.113.10:8080/f; [ "$OUT" == hi ] || fail "no egress after the resume: $OUT"
  fetch "$id" http://169.254.169.254:8080/f; [[ "$OUT" == no:* ]] || fail "metadata reached after the resume: $OUT"
  req DELETE "/v1/sandboxes/$id"; expect 204
  [ -z "$(nsenter --net=/proc/$HOSTNS/ns/net ip -o link show | grep -v ' lo:\| up0@')" ] || fail "an interface outlived the sandbox"
}

# A networked sandbox whose pause fails (a full disk) runs on with its network plumbed again;
# kill -9 of the daemon during a pause and during a resume: once restarted, the sandbox runs
# with its network (or is paused and resumes with it).
TEST_TIMEOUT_pause_network_interrupted=180
test_pause_network_interrupted() {
  need_criu
  daemon_dirs
  net_world
  mkdir -p "$D/state"
  mount -t tmpfs -o size=2m sbx-pause-full "$D/state" # too small for a checkpoint (the sweep unmounts it)
  start_daemon --config "$D/net.json"
  stateful_sandbox '"network":"open"'; local id=$ID before=$COUNT pids=$PIDS
  req POST "/v1/sandboxes/$id/pause"; expect 500 '.message | startswith("pause")'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "running" and .network.mode == "open"'
  check_resumed "$id" "$before" "$pids"
  fetch "$id" http://203.0.113.10:8080/f; [ "$OUT" == hi ] || fail "no egress after the failed pause: $OUT"
  req DELETE "/v1/sandboxes/$id"; expect 204
  stop_daemon
  umount "$D/state"
  local step delay run
  for run in pause:0.08 pause:0.4 resume:0.08; do
    step=${run%:*} delay=${run#*:}
    start_daemon --config "$D/net.json"
    stateful_sandbox '"network":"open"'; id=$ID before=$COUNT pids=$PIDS
    [ $step == pause ] || { req POST "/v1/sandboxes/$id/pause"; expect 200; }
    curl -s --max-time 30 --unix-socket "$SOCK" -X POST "http://sd/v1/sandboxes/$id/$step" >/dev/null &
    local bg=$!
    sleep "$delay"
    kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
    wait "$bg" 2>/dev/null || true
    sleep 0.5 # a shim finishes what it was doing on its own
    start_daemon --config "$D/net.json"
    req_until 10 '.state == "running" or .state == "paused"' GET "/v1/sandboxes/$id"
    expect 200 '.state == "running" or .state == "paused"'
    echo "# $step, kill after ${delay}s: $(echo "$BODY" | jq -r .state)"
    if [ "$(echo "$BODY" | jq -r .state)" == paused ]; then
      resume "$id"; expect 200 '.state == "running"'
    fi
    check_resumed "$id" "$before" "$pids"
    fetch "$id" http://203.0.113.10:8080/f; [ "$OUT" == hi ] || fail "no egress after the restart ($step): $OUT"
    fetch "$id" http://169.254.169.254:8080/f; [[ "$OUT" == no:* ]] || fail "metadata reached ($step): $OUT"
    req DELETE "/v1/sandboxes/$id"; expect 204
    stop_daemon
  done
}

# While a pause runs (here a stand-in CRIU holds the sandbox's dump until told to go, in a
# private mount namespace as above), what the checkpoint might not carry is refused at once (409
# pausing): a file PUT was answered 204 (lost when it landed after the files were saved) and a
# command hung until the shim exited, then 500 "the shim went away".
# A daemon whose stand-in CRIU holds its ACTION (dump or restore) of a checkpoint until $D/go
# (with "write": writing into the images directory meanwhile, as CRIU writes its images and its
# log: $D/writes counts them, and $D/write-failed says one failed); $D/holding once it holds.
held_criu() { # ACTION [write]
  need_criu
  daemon_dirs
  local real=$D/real-criu fake=$D/fake-criu hold='sleep 0.1'
  [ "${2:-}" != write ] || # (`true`: a failed redirection of a special built-in, `:`, ends sh)
    hold="true >\"\$dir/standin-\$((i % 4))\" 2>/dev/null || { touch $D/write-failed; break; }; i=\$((i + 1)); echo \$i >$D/writes"
  cp "$(command -v criu)" "$real"
  printf '#!/bin/sh\nif [ "$1" = %s ]; then case "$*" in *checkpoints/*/images*) for a; do [ "$p" = -D ] && dir=$a; p=$a; done; touch %s/holding; i=0; while [ ! -e %s/go ]; do %s; done;; esac; fi\nexec %s "$@"\n' \
    "$1" "$D" "$D" "$hold" "$real" >"$fake"
  chmod 755 "$fake"
  daemon_at_exit touch "$D/go" # (a stand-in left holding goes on, whatever the case did)
  DAEMON_WRAP=(unshare -m --propagation private sh -c 'mount --bind "$0" "$(command -v criu)" && exec "$@"' "$fake")
  start_daemon
}

wait_holding() { # WHAT
  local i
  for i in $(seq 100); do [ -e "$D/holding" ] && break; sleep 0.1; done
  [ -e "$D/holding" ] || { touch "$D/go"; fail "$1 did not start"; }
}

# held_criu dump [write], and a pause of a new sandbox that runs in the background -> ID, BG
# (curl's pid: $D/pause.code, $D/pause.body).
held_pause() { # [write]
  held_criu dump "${1:-}"
  create '{"pausable":true}'
  curl -s --max-time 60 --unix-socket "$SOCK" -X POST -o "$D/pause.body" -w '%{http_code}' \
    "http://sd/v1/sandboxes/$ID/pause" >"$D/pause.code" &
  BG=$!
  wait_holding "the dump"
}

TEST_TIMEOUT_pause_busy=120
test_pause_busy() {
  held_pause; local id=$ID bg=$BG
  req PUT "/v1/sandboxes/$id/files?path=/workspace/late" -H 'Content-Type: application/octet-stream' --data-binary late
  local put=$CODE putb=$BODY
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["true"]}'
  local ex=$CODE exb=$BODY
  touch "$D/go"
  wait "$bg"
  [ "$(cat "$D/pause.code")" == 200 ] || fail "the pause: $(cat "$D/pause.code") $(cat "$D/pause.body")"
  [ "$put" == 409 ] && [[ "$putb" == *pausing* ]] || fail "a file PUT while pausing: $put $putb"
  [ "$ex" == 409 ] && [[ "$exb" == *pausing* ]] || fail "a command while pausing: $ex $exb"
  req DELETE "/v1/sandboxes/$id"; expect 204
  [ ! -e "$D/state/checkpoints/$id" ] || fail "the checkpoint outlived the sandbox"
}

# A DELETE while CRIU dumps: the sandbox ends at once, and its checkpoint directory goes once the
# dump is over. It was removed at the DELETE while CRIU wrote into it: CRIU's writes failed, or
# (a write between the removal's last unlink and its rmdir) the directory stayed, and what CRIU
# wrote after stayed on disk until the next daemon start's sweep.
TEST_TIMEOUT_pause_delete=120
test_pause_delete() {
  held_pause write; local id=$ID bg=$BG i n
  req DELETE "/v1/sandboxes/$id"; expect 204
  # two more writes (the second begun after the DELETE's answer), or one that failed
  n=$(cat "$D/writes" 2>/dev/null) || true
  for i in $(seq 100); do
    [ -e "$D/write-failed" ] || [ "$(cat "$D/writes" 2>/dev/null)" -ge $((${n:-0} + 2)) ] 2>/dev/null && break
    sleep 0.1
  done
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "ended" and .end.reason == "terminated"'
  wait "$bg" || true
  [ "$(cat "$D/pause.code")" == 409 ] || fail "the pause: $(cat "$D/pause.code") $(cat "$D/pause.body")"
  touch "$D/go"
  [ ! -e "$D/write-failed" ] || fail "a write into the images directory failed: removed during the dump"
  for i in $(seq 300); do [ -z "$(pgrep -f "sbx-shim .*$id")" ] && break; sleep 0.1; done
  [ -z "$(pgrep -f "sbx-shim .*$id")" ] || fail "the shim is still there 30 s after the DELETE"
  for i in $(seq 50); do [ -e "$D/state/checkpoints/$id" ] || break; sleep 0.1; done
  [ ! -e "$D/state/checkpoints/$id" ] ||
    fail "the checkpoint outlived the sandbox: $(cd "$D/state/checkpoints/$id" && find . | head -5 | tr '\n' ' ')"
  [ -z "$(pgrep -f "$D/real-criu")" ] || fail "CRIU still runs"
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "ended"'
}

# A DELETE while CRIU restores a resume (a stand-in holds it, writing into the images directory
# as CRIU writes its restore.log): the sandbox ends at once, the resume's shim and CRIU are
# killed, and the checkpoint goes once they are. It was removed at the DELETE while CRIU wrote
# into it: a write failed, or the directory stayed until the next daemon start's sweep.
TEST_TIMEOUT_resume_delete=120
test_resume_delete() {
  held_criu restore write
  create '{"pausable":true}'; local id=$ID i crius
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  curl -s --max-time 60 --unix-socket "$SOCK" -X POST -o "$D/resume.body" -w '%{http_code}' \
    "http://sd/v1/sandboxes/$id/resume" >"$D/resume.code" &
  local bg=$!
  wait_holding "the restore"
  req DELETE "/v1/sandboxes/$id"; expect 204
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "ended" and .end.reason == "terminated"'
  wait "$bg" || true
  [ "$(cat "$D/resume.code")" == 409 ] || fail "the resume: $(cat "$D/resume.code") $(cat "$D/resume.body")"
  crius="criu restore -D $D/state/checkpoints/$id/"
  for i in $(seq 100); do [ -z "$(pgrep -f "$crius")" ] && break; sleep 0.1; done
  [ -z "$(pgrep -f "$crius")" ] || fail "CRIU still runs 10 s after the DELETE"
  [ -e "$D/writes" ] || fail "the stand-in CRIU wrote nothing"
  [ ! -e "$D/write-failed" ] || fail "a write into the images directory failed: removed during the restore"
  for i in $(seq 50); do [ -e "$D/state/checkpoints/$id" ] || [ -e "$D/run/sandboxes/$id" ] || break; sleep 0.1; done
  [ ! -e "$D/state/checkpoints/$id" ] ||
    fail "the checkpoint outlived the sandbox: $(cd "$D/state/checkpoints/$id" && find . | head -5 | tr '\n' ' ')"
  [ ! -e "$D/run/sandboxes/$id" ] || fail "the sandbox's directory outlived it"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
