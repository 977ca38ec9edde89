#!/usr/bin/env bash
# Processes and attach (docs/API.md): WebSocket exec driven by a Python client
# (tests/integration/ws_procs.py, Debian's python3-websockets) as an agent keeps a persistent
# session, terminals (size, resize, Ctrl-C, signals), background commands (list, logs, signal,
# late attach, kill of the whole tree, the output bound, the idle timeout, a daemon restart),
# bad input, and 8 MB of stdin byte-exact with bounded daemon memory. Real daemon, real
# sandboxes; each case starts its own daemon and cleans up on exit.

DAEMON_TAG=proc
source "$(dirname "$0")/../lib/daemon.sh"

PY=${SBX_PYTHON:-/usr/bin/python3}
WS="$SBX_SRC_DIR/tests/integration/ws_procs.py"

need_ws() {
  "$PY" -c 'import websockets.client' 2>/dev/null ||
    skip "python3-websockets is not installed (tests/deps.sh installs it)"
}
ws() { "$PY" "$WS" "$SOCK" "$ID" "$@"; } # SCENARIO [ARGS]
bg() { # JSON exec body with background -> PID
  req POST "/v1/sandboxes/$ID/exec" -d "$1"
  expect 201 '.state == "running" and .background == true and .pid > 0'
  PID=$(echo "$BODY" | jq -r .pid)
}
wait_proc() { # PID jq-expr seconds: until GET .../processes/PID satisfies it
  local i
  for i in $(seq $(( $3 * 20 ))); do
    req GET "/v1/sandboxes/$ID/processes/$1?tail=65536"
    [ "$CODE" == 200 ] && echo "$BODY" | jq -e "$2" >/dev/null && return 0
    sleep 0.05
  done
  fail "process $1: no $2 within $3 s: $BODY"
}

TEST_TIMEOUT_repl_session=60
test_repl_session() {
  need_ws
  start_daemon
  create
  local pid
  pid=$(ws repl) || fail "repl scenario failed"
  # listed as ended, with its exit code and not as background
  req GET "/v1/sandboxes/$ID/processes"
  expect 200 ".processes | map(select(.pid == $pid)) | .[0] | .state == \"exited\" and .exit_code == 5 and .background == false and .attached == 0"
}

TEST_TIMEOUT_tty_resize_signals=60
test_tty_resize_signals() {
  need_ws
  start_daemon
  create
  ws tty || fail "tty scenario failed"
  # a terminal over plain exec too: one stream, the size given
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","stty size; test -t 0 && echo tty; echo e >&2"],"tty":true,"tty_size":{"rows":7,"cols":9}}'
  expect 200 '.exit_code == 0 and (.stdout | contains("7 9")) and (.stdout | contains("tty")) and (.stdout | contains("e")) and .stderr == ""'
}
source "$(dirname "$0")/../lib/lib.sh" "$@"
