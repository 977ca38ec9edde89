#!/usr/bin/env bash
# A paused sandbox resumed on another node of the fleet (docs/API.md "Pause and resume"), in the
# namespaced world of fleetd_world.sh: a real etcd and two real daemons with TLS and the fleet
# token, CRIU 4 (tests/deps_criu.sh). A sandbox whose Python process keeps a counter in memory
# and a background process is paused on a and resumed on b (its checkpoint pulled through a's
# API), then back to a: the same processes go on; requests for its id reach it where it is.
# A sandbox of a store image moves to a node with the same image (a node without it refuses).
# Refusals leave it paused where it was (an unknown node, a full node, bad input); kill -9 of
# the node it leaves, and of the node it goes to, during the move: it is running on one node or
# paused with a whole checkpoint on the other, never both.
DAEMON_TAG=fleetp
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/fleetd_world.sh"
source "$(dirname "$0")/../lib/pause.sh"

two_nodes() { # a world with nodes a and b that can pause and reach each other [flags of both]
  need_criu
  world
  fleet_daemon a --fleet-ca "$DAEMON_ROOT/cert.pem" "$@"
  fleet_daemon b --fleet-ca "$DAEMON_ROOT/cert.pem" "$@"
  wait_view a "[$(node a), $(node b)] | length == 2"
  wait_view b "[$(node a), $(node b)] | length == 2"
}

paused_on() { # NODE: a stateful sandbox made and paused there -> ID COUNT PIDS
  daemon_use "$1"
  stateful_sandbox
  req POST "/v1/sandboxes/$ID/pause"; expect 200 '.state == "paused"'
}

has_checkpoint() { [ -s "$DAEMON_ROOT/$1/state/checkpoints/$2/checkpoint.json" ]; } # NODE ID

TEST_TIMEOUT_move=180
test_move() {
  two_nodes
  paused_on a; local id=$ID before=$COUNT pids=$PIDS
  [[ "$id" == *.a ]] || fail "not a's id: $id"
  freq a POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}'
  fexpect 200 '.state == "running" and .node == "b" and .pause.last_resume_ms > 0'
  ! has_checkpoint a "$id" || fail "a kept the checkpoint"
  ! has_checkpoint b "$id" || fail "b kept the checkpoint after the resume"
  daemon_use b
  check_resumed "$id" "$before" "$pids"
  daemon_use a # a forwards every request for the id to b
  req GET "/v1/sandboxes/$id"; expect 307
  grep -qi '^location: https://127.0.0.1:7442/v1/sandboxes/' "$D/headers" || fail "no forward: $(cat "$D/headers")"
  req GET /v1/sandboxes; echo "$BODY" | jq -e "map(select(.id == \"$id\")) == []" >/dev/null ||
    fail "a still lists the moved sandbox: $BODY"
  freq a POST "/v1/sandboxes/$id/exec" -d '{"argv":["cat","/workspace/f"]}'
  fexpect 200 '.stdout == "kept\n"'
  # and back, with the CLI: paused on b through a, resumed on a through b
  before=$COUNT
  local out
  out=$(sbx_at a pause "$id") || fail "sbx pause: $out"
  out=$(sbx_at b resume --node a "$id") || fail "sbx resume --node a: $out"
  [[ "$out" == "$id running resume_ms="*" node=a" ]] || fail "sbx resume --node a said: $out"
  daemon_use a
  check_resumed "$id" "$before" "$pids"
  freq b GET "/v1/sandboxes/$id"; fexpect 200 '.node == "a" and .state == "running"'
  # and with the Python SDK (sync, then AsyncSandbox), to b and back to a
  before=$COUNT
  out=$(py_at a "$id" <<'PY'
import asyncio, sys
from sandboxd import AsyncSandbox, Sandbox
sb = Sandbox.attach(sys.argv[1])
sb.pause()
assert sb.resume(node="b")["node"] == "b"
async def back():
    a = await AsyncSandbox.open(sys.argv[1])
    await a.pause()
    return (await a.resume(node="a"))["node"]
print(asyncio.run(back()))
PY
) || fail "python: $out"
  [ "$out" == a ] || fail "python's AsyncSandbox.resume(node='a') said: $out"
  check_resumed "$id" "$before" "$pids"
  # while a move waits on the other node (b stopped), the sandbox neither resumes here nor goes
  req POST "/v1/sandboxes/$id/pause"; expect 200
  daemon_use b; local bpid=$DPID; kill -STOP "$bpid"
  daemon_use a
  "${NS[@]}" curl -s --max-time 60 --cacert "$DAEMON_ROOT/cert.pem" -H "Authorization: Bearer ftok" \
    -X POST -d '{"node":"b"}' -o "$DAEMON_ROOT/moved" -w '%{http_code}' \
    "https://127.0.0.1:7441/v1/sandboxes/$id/resume" >"$DAEMON_ROOT/moved.code" &
  local mover=$!
  sleep 1
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused" and .pause.moving_to == "b"'
  req POST "/v1/sandboxes/$id/resume"; expect 409 '.message | contains("moving to node b")'
  req DELETE "/v1/sandboxes/$id"; expect 409 '.message | contains("moving to node b")'
  # its checkpoint goes only to the node given the move's key
  req GET "/v1/sandboxes/$id/checkpoint"; expect 409 '.message | contains("not moving with that key")'
  req GET "/v1/sandboxes/$id/checkpoint?key=0123456789abcdef"; expect 409
  kill -CONT "$bpid"
  wait "$mover" || true
  [ "$(cat "$DAEMON_ROOT/moved.code")" == 200 ] || fail "the move after b went on: $(cat "$DAEMON_ROOT/moved.code") $(cat "$DAEMON_ROOT/moved")"
  jq -e '.node == "b" and .state == "running"' "$DAEMON_ROOT/moved" >/dev/null || fail "moved: $(cat "$DAEMON_ROOT/moved")"
  freq a DELETE "/v1/sandboxes/$id"; fexpect 204
}

sbx_at() { # NODE ARGS...: the sbx CLI at node NAME with the fleet token
  local n=$1
  shift
  "${NS[@]}" env SBX_TOKEN=ftok SBX_CA="$DAEMON_ROOT/cert.pem" "$SBX_BUILD_DIR/sbx" \
    --host "https://127.0.0.1:${PORT[$n]}" "$@" 2>&1
}

py_at() { # NODE ID < SCRIPT: python3 with the SDK at node NAME
  "${NS[@]}" env $(asan_env) SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" \
    PYTHONPATH="$SBX_SRC_DIR/python" PYTHONDONTWRITEBYTECODE=1 SBX_TOKEN=ftok \
    SBX_CA="$DAEMON_ROOT/cert.pem" SBX_HOST="https://127.0.0.1:${PORT[$1]}" python3 - "$2" 2>&1
}

TEST_TIMEOUT_move_refused=150
test_move_refused() {
  two_nodes --max-sandboxes 1
  paused_on a; local id=$ID before=$COUNT pids=$PIDS
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"zz"}'; expect 404 '.message | contains("no live node zz")'
  req POST "/v1/sandboxes/$id/resume" -d '{"node":7}'; expect 400 '.message | startswith("node")'
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"b","fast":true}'; expect 400 '.message | contains("fast")'
  req GET "/v1/sandboxes/$id/checkpoint"; expect 409 '.message | contains("not moving")'
  # b is full: it refuses, the sandbox stays paused on a with its checkpoint
  daemon_use b; create '{}'; local filler=$ID
  daemon_use a
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}'
  expect 503 '.code == "node_full" and (.message | contains("resume on node b"))'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused" and (.pause.moving_to == null)'
  has_checkpoint a "$id" || fail "a lost the checkpoint after b refused"
  # what b itself refuses: bad bodies, a node that is b, a sandbox a does not move
  daemon_use b
  req DELETE "/v1/sandboxes/$filler"; expect 204
  req POST /v1/checkpoints -d '{"id":"'"$id"'"}'; expect 400 '.message | startswith("from")'
  req POST /v1/checkpoints -d '{"id":"x/../y","from":"a"}'; expect 400 '.message | startswith("id")'
  req POST /v1/checkpoints -d '{"id":"'"$id"'","from":"a"}'; expect 400 '.message | startswith("key")'
  req POST /v1/checkpoints -d '{"id":"'"$id"'","from":"b","key":"0a1b"}'; expect 400 '.message | contains("this node")'
  req POST /v1/checkpoints -d '{"id":"'"$id"'","from":"a","key":"0a1b","x":1}'; expect 400 '.message | contains("x")'
  req POST /v1/checkpoints -d '{"id":"'"$id"'","from":"a","key":"0a1b"}'
  expect 409 '.code == "checkpoint_unavailable" and (.message | contains("not moving"))'
  ! has_checkpoint b "$id" && [ -z "$(ls -A "$D/state/checkpoints" 2>/dev/null)" ] ||
    fail "b kept something of a refused pull: $(ls -A "$D/state/checkpoints")"
  # a full node lets the fleet pick another when the resume names none
  wait_view a "$(node b) | .free == 1"
  daemon_use a; create '{}'
  req POST "/v1/sandboxes/$id/resume"; expect 200 '.state == "running" and .node == "b"'
  daemon_use b
  check_resumed "$id" "$before" "$pids"
}

# A pausable sandbox of a store image moves with its upper directory (whiteouts, an opaque
# directory: its one extended attribute travels in the tar) to a node that has the same image;
# a node without it refuses (409 naming the image) and the sandbox stays paused where it was.
# One with a volume does not move (409), and resumes where it is.
TEST_TIMEOUT_move_image=180
test_move_image() {
  two_nodes
  local tar="$DAEMON_ROOT/base.tar" # (D is the node's own directory)
  MKIMAGE_EXTRA_BINS="sleep" MKIMAGE_APP_SUB=1 \
    python3 "$(dirname "$0")/../integration/mkimage.py" oci "$tar" || fail "mkimage"
  daemon_use a
  req POST "/v1/images?name=t:v1" -H 'Content-Type: application/x-tar' --data-binary @"$tar"
  expect 201
  image_sandbox t:v1; local id=$ID before=$COUNT loop=$LOOP
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}'
  expect 409 '(.message | contains("resume on node b")) and (.message | contains("image t:v1"))'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused" and (.pause.moving_to == null)'
  has_checkpoint a "$id" || fail "a lost the checkpoint after b refused"
  daemon_use b
  [ -z "$(ls -A "$D/state/checkpoints" 2>/dev/null)" ] ||
    fail "b kept something of a refused move: $(ls -A "$D/state/checkpoints")"
  req POST "/v1/images?name=t:v1" -H 'Content-Type: application/x-tar' --data-binary @"$tar"
  expect 201
  daemon_use a
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}'; expect 200 '.state == "running" and .node == "b"'
  daemon_use b
  image_resumed "$id" "$before" "$loop"
  # and back to a, through b
  image_counter "$id"; before=$COUNT
  req POST "/v1/sandboxes/$id/pause"; expect 200
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"a"}'; expect 200 '.node == "a"'
  daemon_use a
  image_resumed "$id" "$before" "$loop"
  # a sandbox with a volume (the node's own) resumes only where it is
  req POST /v1/volumes -d '{"name":"data","size":"16Mi"}'; expect 201
  create '{"pausable":true,"volumes":[{"name":"data","path":"/data"}]}'; local vid=$ID
  run_in "$vid" '["sh","-c","echo here > /data/f"]'
  req POST "/v1/sandboxes/$vid/pause"; expect 200
  req POST "/v1/sandboxes/$vid/resume" -d '{"node":"b"}'
  expect 409 '.message | contains("has volumes, which are this node")'
  req POST "/v1/sandboxes/$vid/resume"; expect 200 '.state == "running" and .node == "a"'
  run_in "$vid" '["cat","/data/f"]'; [ "$OUT" == here ] || fail "the volume after the resume: $OUT"
}

# A pausable sandbox with a network moves to a node with egress enabled, where it gets that
# node's address and rules; a node without egress refuses it (409) and it stays paused. Both
# daemons share one netns, so each has its own table, interface prefix and address pool.
TEST_TIMEOUT_move_network=180
test_move_network() {
  need_criu
  world
  echo '{"network":{"enabled":true,"table":"sbxa","ifprefix":"sa","pool4":"10.201.0.0/16","pool6":""}}' \
    >"$DAEMON_ROOT/a.json"
  echo '{"network":{"enabled":true,"table":"sbxb","ifprefix":"sb","pool4":"10.202.0.0/16","pool6":""}}' \
    >"$DAEMON_ROOT/b.json"
  fleet_daemon a --fleet-ca "$DAEMON_ROOT/cert.pem" --config "$DAEMON_ROOT/a.json"
  fleet_daemon b --fleet-ca "$DAEMON_ROOT/cert.pem"
  wait_view a "[$(node a), $(node b)] | length == 2"
  daemon_use a
  stateful_sandbox '"network":"open"'; local id=$ID before=$COUNT pids=$PIDS
  req GET "/v1/sandboxes/$id"; expect 200 '.network.ipv4 | startswith("10.201.")'
  req POST "/v1/sandboxes/$id/pause"; expect 200 '.state == "paused"'
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}'
  expect 409 '(.message | contains("resume on node b")) and (.message | contains("egress is not enabled"))'
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "paused" and (.pause.moving_to == null)'
  has_checkpoint a "$id" || fail "a lost the checkpoint after b refused"
  daemon_use b; stop_daemon
  fleet_daemon b --fleet-ca "$DAEMON_ROOT/cert.pem" --config "$DAEMON_ROOT/b.json"
  wait_view a "[$(node a), $(node b)] | length == 2"
  daemon_use a
  req POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}'; expect 200 '.state == "running" and .node == "b"'
  daemon_use b
  check_resumed "$id" "$before" "$pids"
  req GET "/v1/sandboxes/$id"; expect 200 '.network.mode == "open" and (.network.ipv4 | startswith("10.202."))'
  local links; links=$("${NS[@]}" ip -o link show)
  ! grep -q ' sa[0-9a-f]' <<<"$links" && grep -q ' sb[0-9a-f]' <<<"$links" ||
    fail "the interfaces after the move: $links"
}

# kill -9 of NODE (a: the node it leaves, b: the one it goes to) DELAY seconds into the move;
# after a restart the sandbox is running on exactly one node or paused with a whole
# checkpoint on a, and a resume through a brings it back with its processes.
move_killed() { # NODE DELAY
  local victim=$1 delay=$2
  paused_on a; local id=$ID before=$COUNT pids=$PIDS
  freq a POST "/v1/sandboxes/$id/resume" -d '{"node":"b"}' &
  local client=$!
  sleep "$delay"
  daemon_use "$victim"; kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  wait "$client" 2>/dev/null || true
  fleet_daemon "$victim" --fleet-ca "$DAEMON_ROOT/cert.pem"
  wait_view a "[$(node a), $(node b)] | length == 2" 30
  local on_a on_b moving end_a
  daemon_use a; req GET "/v1/sandboxes/$id"; on_a=$CODE:$(echo "$BODY" | jq -r '.state // empty')
  moving=$(echo "$BODY" | jq -r '.pause.moving_to // empty' 2>/dev/null)
  end_a=$(echo "$BODY" | jq -c '.end // empty' 2>/dev/null || true)
  daemon_use b; req GET "/v1/sandboxes/$id"; on_b=$CODE:$(echo "$BODY" | jq -r '.state // empty')
  echo "kill -9 of $victim at ${delay}s: a $on_a${moving:+ (moving to $moving)}, b $on_b" >&2
  case "$on_a/$on_b" in
  200:paused/307:) has_checkpoint a "$id" || fail "paused on a without its checkpoint" ;;
  307:/200:running | 307:/200:paused) ;;
  200:paused/200:*) # both have a copy: a's move is unsettled, and a never resumes it unasked
    [ "$moving" == b ] || fail "a and b both hold it after kill -9 of $victim: $on_a/$on_b" ;;
  *)
    grep -h "$id" "$DAEMON_ROOT"/*/log 2>/dev/null | tail -20 >&2
    fail "after kill -9 of $victim at ${delay}s: a says $on_a${end_a:+ ($end_a)}, b says $on_b" ;;
  esac
  # settles an unknown move, then resumes where it is (or answers as the node that resumed
  # it); a sandbox that b already runs, and a forwards to, is not paused: 409 there
  freq a POST "/v1/sandboxes/$id/resume"
  if [ "$on_a/$on_b" == 307:/200:running ]; then
    fexpect 409 '.message | contains("not paused")'
  else
    fexpect 200 '.state == "running" or .state == "starting"'
  fi
  for _ in $(seq 100); do
    freq a GET "/v1/sandboxes/$id"
    [ "$(echo "$BODY" | jq -r .state)" == starting ] || break
    sleep 0.1
  done
  fexpect 200 '.state == "running"'
  daemon_use "$(echo "$BODY" | jq -r .node)"
  check_resumed "$id" "$before" "$pids"
  req DELETE "/v1/sandboxes/$id"; expect 204
}

TEST_TIMEOUT_move_killed=400
TEST_PASS_move_killed=sanitized # (once: tests/README.md)
test_move_killed() {
  two_nodes
  local at
  for at in 0.05 0.3 0.6; do move_killed a "$at"; done
  for at in 0.1 0.5; do move_killed b "$at"; done
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
