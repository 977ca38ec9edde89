#!/usr/bin/env bash
# What a failed create, an interrupted fork, a huge exec answer or an abandoned stream may hold
# of the daemon, against a real daemon and real sandboxes (root): an Idempotency-Key is given
# back by a create that never ran (deleted while queued, or the daemon killed -9 before it
# started) and the keys kept are bounded; the cost cap, the lifetime and a DELETE end a create
# that waits to start, and the create is answered at once; a daemon stopped (SIGTERM or kill -9)
# during a fork's copy leaves no frozen source and no snapshot tmpfs once restarted; JSON exec
# answers stay within the daemon's output budget (memory read from /proc/PID/status, generous
# bounds) and /healthz answers while they are built; an abandoned stream (its client gone while
# the stream waits past max_output) is not read. Each case starts its own daemon and removes
# what it made.

DAEMON_TAG=hold CURLS=()
source "$(dirname "$0")/../lib/daemon.sh"

# Poll GET /v1/sandboxes?label=... until one sandbox matches jq expression $2; ID gets its id.
wait_listed() { # label jq-expr seconds
  local i
  for i in $(seq $(( $3 * 20 ))); do
    req GET "/v1/sandboxes?label=$1"
    ID=$(echo "$BODY" | jq -r "[.[] | select($2)][0].id // empty")
    [ -n "$ID" ] && return 0
    sleep 0.05
  done
  fail "no sandbox with label $1 and $2 in $3 s: $BODY"
}

# A daemon whose shim waits while $D/hold exists (then fails when $D/fail exists): a create
# stays starting for as long as the test needs. No spare shims: a spare is started (through the
# wrapper, before any hold) ahead of the create it would serve.
start_held_daemon() { # [flags...]
  daemon_use sd # its directories, made first for the wrapper
  printf '#!/bin/sh\nwhile [ -e "%s/hold" ]; do sleep 0.05; done\n[ -e "%s/fail" ] && exit 1\nexec "%s" "$@"\n' \
    "$D" "$D" "$(bin sbx-shim)" >"$D/shim.sh"
  chmod +x "$D/shim.sh"
  DAEMON_SHIM="$D/shim.sh" start_daemon --max-starting 1 --spare-shims 0 "$@"
}

# With the shim held, one create starts (and waits) and a keyed one queues behind it.
queue_keyed() { # key -> ID of the queued keyed create
  touch "$D/hold"
  curl -s --max-time 60 --unix-socket "$SOCK" -o /dev/null -X POST -d '{"labels":{"ahead":"1"}}' \
    http://sd/v1/sandboxes &
  CURLS=($!)
  wait_listed ahead=1 '.state == "starting"' 10
  curl -s --max-time 60 --unix-socket "$SOCK" -o "$D/queued" -X POST -H "Idempotency-Key: $1" \
    -d '{"labels":{"keyed":"1"}}' http://sd/v1/sandboxes &
  CURLS+=($!)
  wait_listed keyed=1 '.state == "starting"' 10
}

TEST_TIMEOUT_idem_deleted_queued_create=120
test_idem_deleted_queued_create() {
  start_held_daemon
  queue_keyed del-1
  local queued=$ID
  req DELETE "/v1/sandboxes/$queued"; expect 204
  req GET "/v1/sandboxes/$queued"; expect 200 '.state == "ended"'
  rm -f "$D/hold"
  req POST /v1/sandboxes -H 'Idempotency-Key: del-1' -d '{}'
  expect 201 ".id != \"$queued\" and .state == \"running\""
  local fresh; fresh=$(echo "$BODY" | jq -r .id)
  req POST /v1/sandboxes -H 'Idempotency-Key: del-1' -d '{}'; expect 201 ".id == \"$fresh\""
  wait "${CURLS[@]}" || true
}

# With the shim held, two creates of FIELDS labelled LABEL=1 and LABEL=2: the first starts (and
# waits), the second queues behind it (--max-starting 1); each answer in $D/cN, its code in
# $D/codeN, the time (epoch ms) it came in $D/doneN.
held_creates() { # LABEL FIELDS
  local i
  touch "$D/hold"
  rm -f "$D"/done[12]
  for i in 1 2; do
    { curl -s --max-time 60 --unix-socket "$SOCK" -o "$D/c$i" -w '%{http_code}' -X POST \
      -d "{$2,\"labels\":{\"$1\":\"$i\"}}" http://sd/v1/sandboxes >"$D/code$i"
      date +%s%3N >"$D/done$i.tmp" && mv "$D/done$i.tmp" "$D/done$i"; } &
    CURLS+=($!)
    wait_listed "$1=$i" '.state == "starting"' 10
  done
}

# Create N of held_creates is answered within 300 ms (generous for ASan) of its sandbox's end at
# epoch ms T. Answers that came ~1 s late (the create resumed by the 1 s fallback run of
# libmicrohttpd, not at once: sandboxd/api/http.c inst_run) fail it.
answered_at_once() { # N T WHAT
  local i done
  for i in $(seq 500); do [ -e "$D/done$1" ] && break; sleep 0.01; done
  done=$(cat "$D/done$1" 2>/dev/null) || fail "$3: create $1 not answered in 5 s"
  echo "$3: create $1 answered $((done - $2)) ms after its end"
  [ $((done - $2)) -lt 300 ] || fail "$3: create $1 answered $((done - $2)) ms after its end"
}

# The cost cap holds from the create on, as the cost does (cost_usd counts from created_at): a
# sandbox whose start waits (its shim held) and one queued behind it (--max-starting 1) end
# cost_limit at their cap, and their creates say so. Both were checked only once running: they
# went on costing past their cap for as long as the start took.
TEST_TIMEOUT_cost_cap_while_starting=120
test_cost_cap_while_starting() { # (reached after ~0.1 s)
  ended_while_starting capped '"max_cost_usd":0.000001,"cpu":2,"memory":"4Gi"' \
    '.end.reason == "cost_limit" and .end.cost_usd == 0.000001' 'cost cap'
}

ended_while_starting() { # LABEL BODY-FIELDS JQ-OF-THE-END CREATE-ANSWER-TEXT: the two held
  # creates of held_creates end, as the jq says, and their creates are 409 with the text
  start_held_daemon
  local i
  held_creates "$1" "$2"
  wait_listed "$1=1" '.state == "ended"' 5
  wait_listed "$1=2" '.state == "ended"' 5
  for i in 1 2; do
    req GET "/v1/sandboxes?label=$1=$i"
    expect 200 ".[0] | $3"
  done
  wait "${CURLS[@]}" || true
  for i in 1 2; do
    [ "$(cat "$D/code$i")" == 409 ] && grep -q "$4" "$D/c$i" ||
      fail "create $i: $(cat "$D/code$i") $(cat "$D/c$i")"
    req GET "/v1/sandboxes?label=$1=$i"
    answered_at_once "$i" "$(date -d "$(echo "$BODY" | jq -r '.[0].end.ended_at')" +%s%3N)" "$1"
  done
  rm -f "$D/hold"
}

# A DELETE of a sandbox whose start waits (its shim held), and of one queued behind it
# (--max-starting 1), answers its create (409) at once, 10 times each, the DELETE's connection
# closed after its answer (Connection: close, as sdclient's): rounds 6-10 with an idle
# connection open too. The creates were answered 1 s after the DELETE, 60 s with the idle
# connection: the create's connection, resumed inside the libmicrohttpd run that served the
# DELETE, was run again only by the fallback timer (or MHD's timeout for the idle one, at most
# 60 s), or by the next request.
TEST_TIMEOUT_delete_while_starting_answered=120
test_delete_while_starting_answered() {
  start_held_daemon
  local r i t idle=''
  for r in $(seq 10); do
    if [ "$r" == 6 ]; then
      # (it ends when the daemon closes the connection: also when the case fails)
      /usr/bin/python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(90); s.connect(sys.argv[1]); s.recv(1)' \
        "$SOCK" 2>/dev/null &
      idle=$!
    fi
    held_creates "del$r" '"cpu":1'
    for i in 2 1; do # the queued one, then the one whose start waits
      wait_listed "del$r=$i" '.state == "starting"' 5
      req DELETE "/v1/sandboxes/$ID" -H 'Connection: close'; expect 204
      t=$(date +%s%3N)
      answered_at_once "$i" "$t" "round $r"
      [ "$(cat "$D/code$i")" == 409 ] && grep -q 'terminated by a DELETE' "$D/c$i" ||
        fail "round $r: create $i: $(cat "$D/code$i") $(cat "$D/c$i")"
    done
  done
  kill "$idle" && wait "$idle" 2>/dev/null || true
  wait "${CURLS[@]}" || true
  rm -f "$D/hold"
}

# The lifetime runs from the create on (expires_at is created_at plus timeout): a sandbox whose
# start waits (its shim held) and one queued behind it end lifetime_exceeded at their
# expires_at, and their creates say so. Both were checked only once running: a start that
# waited past its expires_at went on (the held one until the start's 60 s timeout).
TEST_TIMEOUT_lifetime_while_starting=120
test_lifetime_while_starting() {
  ended_while_starting brief '"timeout":"1s"' \
    '.end.reason == "lifetime_exceeded" and .end.ended_at >= .expires_at' 'end of its lifetime'
}

TEST_TIMEOUT_idem_daemon_killed_mid_create=120
test_idem_daemon_killed_mid_create() {
  start_held_daemon
  queue_keyed kill-1
  local queued=$ID
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  touch "$D/fail"; rm -f "$D/hold" # the create ahead never starts either
  wait "${CURLS[@]}" || true
  rm -f "$D/fail"
  start_held_daemon
  req GET "/v1/sandboxes/$queued"; expect 200 '.state == "ended"'
  req POST /v1/sandboxes -H 'Idempotency-Key: kill-1' -d '{}'
  expect 201 ".id != \"$queued\" and .state == \"running\""
}

TEST_TIMEOUT_idem_keys_bounded=90
test_idem_keys_bounded() {
  start_daemon --max-idempotency-keys 2
  local ids=() i
  for i in 1 2 3; do
    req POST /v1/sandboxes -H "Idempotency-Key: b-$i" -d '{}'; expect 201
    ids+=("$(echo "$BODY" | jq -r .id)")
    req DELETE "/v1/sandboxes/${ids[-1]}"; expect 204
  done
  # b-1 (the oldest) was given up for b-3; b-2 and b-3 still replay their ended sandboxes
  req POST /v1/sandboxes -H 'Idempotency-Key: b-3' -d '{}'; expect 201 ".id == \"${ids[2]}\""
  req POST /v1/sandboxes -H 'Idempotency-Key: b-2' -d '{}'; expect 201 ".id == \"${ids[1]}\""
  req POST /v1/sandboxes -H 'Idempotency-Key: b-1' -d '{}'
  expect 201 ".id != \"${ids[0]}\" and .state == \"running\""
  # and the bound holds across a restart (the key given up is not in the record any more)
  stop_daemon
  start_daemon --max-idempotency-keys 2
  req POST /v1/sandboxes -H 'Idempotency-Key: b-2' -d '{}'
  expect 201 ".id != \"${ids[1]}\" and .state == \"running\""
}

# The source's freezer state: "FROZEN"/"1" while a fork copies it.
freezer() { # id
  local f
  for f in "/sys/fs/cgroup/freezer/$CG/$1/freezer.state" /sys/fs/cgroup/*"/$CG/$1/cgroup.freeze"; do
    [ -f "$f" ] && { cat "$f"; return; }
  done
  echo none
}

# Fork src in the background and stop the daemon with signal $2 while the copy runs (the
# source frozen); a copy that finished before the test saw it is retried with a fresh fork.
stop_during_copy() { # src signal
  local try i pid
  for try in $(seq 10); do
    curl -s --max-time 60 --unix-socket "$SOCK" -o "$D/fork" -X POST -d '{"count":1}' \
      "http://sd/v1/sandboxes/$1/fork" &
    pid=$!
    for i in $(seq 400); do
      case "$(freezer "$1")" in FROZEN|1) kill "-$2" "$DPID"; wait "$DPID" 2>/dev/null || true; wait "$pid" || true; return 0 ;; esac
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.005
    done
    wait "$pid" || true
    for id in $(jq -r '.[]?.id' "$D/fork" 2>/dev/null); do req DELETE "/v1/sandboxes/$id"; done
  done
  fail "never saw the fork's copy running in 10 tries"
}

# The EXIT trap of the fork cases: whatever an old daemon left (a frozen source, a mounted
# layer) is undone before the usual cleanup.
fork_cleanup() {
  local f m
  for f in /sys/fs/cgroup/freezer/"$CG"/*/freezer.state; do [ -f "$f" ] && echo THAWED >"$f"; done
  for f in /sys/fs/cgroup/*/"$CG"/*/cgroup.freeze; do [ -f "$f" ] && echo 0 >"$f"; done
  for m in $(awk -v d="$D/run/layers/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo); do
    umount -l "$m"
  done
  daemon_cleanup
}

# After a daemon stop during a fork's copy: the source runs, answers exec, is not frozen, and
# no snapshot layer (mount or directory) is left.
check_recovered() { # src
  case "$(freezer "$1")" in FROZEN|1) fail "the source $1 is still frozen" ;; esac
  grep -q " $D/run/layers/" /proc/self/mountinfo && fail "a snapshot tmpfs is still mounted: $(grep " $D/run/layers/" /proc/self/mountinfo)"
  [ -z "$(ls -A "$D/run/layers" 2>/dev/null)" ] || fail "snapshot layers left: $(ls "$D/run/layers")"
  return 0
}

fork_source() { # -> ID: a running sandbox with many files to copy
  create '{"memory":"512Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","mkdir -p /workspace/m && cd /workspace/m && seq 30000 | xargs touch && head -c 64000000 /dev/urandom > /workspace/big"],"timeout":60}'
  expect 200 '.exit_code == 0'
}

TEST_TIMEOUT_fork_daemon_kill9_during_copy=150
test_fork_daemon_kill9_during_copy() {
  start_daemon
  trap fork_cleanup EXIT
  fork_source; local src=$ID
  stop_during_copy "$src" KILL
  start_daemon
  check_recovered "$src"
  req GET "/v1/sandboxes/$src"; expect 200 '.state == "running"'
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["echo","alive"],"timeout":10}'
  expect 200 '.stdout == "alive\n"'
  check_recovered "$src"
}

TEST_TIMEOUT_fork_daemon_sigterm_during_copy=150
test_fork_daemon_sigterm_during_copy() {
  start_daemon
  trap fork_cleanup EXIT
  fork_source; local src=$ID
  stop_during_copy "$src" TERM
  check_recovered "$src" # the stopping daemon itself left nothing
  start_daemon
  req POST "/v1/sandboxes/$src/exec" -d '{"argv":["echo","alive"],"timeout":10}'
  expect 200 '.stdout == "alive\n"'
  check_recovered "$src"
}

# The daemon's peak resident memory (VmHWM) in MiB.
peak_mib() { awk '/^VmHWM:/ {print int($2 / 1024)}' "/proc/$DPID/status"; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$DPID/stat"; }

TEST_TIMEOUT_exec_output_budget=180
TEST_PASS_exec_output_budget=sanitized # (once: tests/README.md)
test_exec_output_budget() {
  start_daemon
  create; local id=$ID i pids=()
  # 4 commands at once, each 64 MiB of \x01 (6 bytes each once JSON-escaped) kept by max_output,
  # all written before any exits (so all are buffered together)
  for i in 1 2 3 4; do
    curl -s --max-time 120 --unix-socket "$SOCK" -o "$D/big$i" -X POST \
      -d '{"argv":["sh","-c","head -c 67108864 /dev/zero | tr \"\\\\000\" \"\\\\001\"; sleep 5"],"max_output":"64Mi","timeout":100}' \
      "http://sd/v1/sandboxes/$id/exec" &
    pids+=($!)
  done
  req GET /healthz; expect 200 # the loop answers while they run
  wait "${pids[@]}"
  local total=0 cut=0
  for i in 1 2 3 4; do
    jq -e '.exit_code == 0 and .stdout_bytes == 67108864' "$D/big$i" >/dev/null || fail "exec $i: $(head -c 300 "$D/big$i")"
    total=$((total + $(jq '.stdout | length' "$D/big$i")))
    jq -e '.output_budget_exceeded == true and .stdout_truncated == true' "$D/big$i" >/dev/null && cut=$((cut + 1))
  done
  [ "$cut" -ge 3 ] || fail "256 MiB of answers at once, only $cut cut by the output budget"
  [ "$total" -le $((64 << 20)) ] || fail "answers held $total bytes of output at once (budget 64 MiB)"
  local peak; peak=$(peak_mib)
  [ "$peak" -lt 1400 ] || fail "the daemon peaked at $peak MiB building the answers"
  # once the answers are gone the budget is free again
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","head -c 1000000 /dev/zero"],"max_output":"2Mi"}'
  expect 200 '.stdout_truncated == false and (.stdout | length) == 1000000 and .output_budget_exceeded == null'
}

TEST_TIMEOUT_abandoned_streams_not_read=90
test_abandoned_streams_not_read() {
  start_daemon
  create; local id=$ID i pids=()
  for i in 1 2 3 4 5; do
    curl -s --max-time 2 --unix-socket "$SOCK" -o /dev/null -H 'Accept: application/x-ndjson' -X POST \
      -d '{"argv":["yes"],"timeout":60}' "http://sd/v1/sandboxes/$id/exec" &
    pids+=($!)
  done
  wait "${pids[@]}" || true # each client gives up after 2 s; the commands go on
  sleep 1
  local before after; before=$(cpu_ticks)
  sleep 3
  after=$(cpu_ticks)
  req GET "/v1/sandboxes/$id"; expect 200 '.usage.commands_running == 5'
  # reading and discarding 5 streams took ~70 % of a core (~210 ticks in 3 s); blocked, ~0
  [ $((after - before)) -lt 60 ] || fail "the daemon used $((after - before)) ticks in 3 s on abandoned streams"
  req DELETE "/v1/sandboxes/$id"; expect 204
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
