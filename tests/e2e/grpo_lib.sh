# Helpers for the GRPO end-to-end tests and demo: a private sandboxd (tests/lib/daemon.sh) and
# the reference trainer, both started here and stopped (with every sandbox removed) at exit.
# Needs: $SBX_BUILD_DIR, $SBX_SRC_DIR. Sets: T (temp dir), SOCK, TRAINER_URL.

DAEMON_TAG=grpo
source "$(dirname "${BASH_SOURCE[0]}")/../lib/daemon.sh"

grpo_python() {
  local py=${SBX_PYTHON:-/usr/bin/python3}
  "$py" -c 'import torch' 2>/dev/null || return 1
  echo "$py"
}

grpo_api() { curl -sf --unix-socket "$SOCK" "http://x$1" "${@:2}"; }

grpo_running_sandboxes() {
  grpo_api /v1/sandboxes | /usr/bin/python3 -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin) if s["state"] != "ended"))'
}

# The runner and the trainer go first in the cleanup; the daemon goes with tests/lib/daemon.sh's.
grpo_stop_helpers() {
  [ -n "${GRPO_RUNNER_PID:-}" ] && kill "$GRPO_RUNNER_PID" 2>/dev/null && wait "$GRPO_RUNNER_PID" 2>/dev/null
  [ -n "${TRAINER_PID:-}" ] && kill "$TRAINER_PID" 2>/dev/null && wait "$TRAINER_PID" 2>/dev/null
  return 0
}

grpo_tmp() { # T: the case's scratch dir, cleaned up (helpers stopped) at exit
  daemon_init
  T=$DAEMON_ROOT/files
  mkdir -p "$T"
  daemon_at_exit grpo_stop_helpers
}

# grpo_start_daemon [2]: the private daemon on $SOCK (PID $DAEMON_PID), or with 2 a second one
# on $SOCK2 (PID $DAEMON2_PID) with its own directories and cgroup parent.
grpo_start_daemon() {
  if [ -n "${1:-}" ]; then # instance sd2; sd stays the current one ($SOCK, req, ...)
    DAEMON_SHIM='' DAEMON_LOG_LEVEL='' daemon_start "sd$1"
    SOCK2=$SOCK DAEMON2_PID=$DPID
    daemon_use sd
  else
    DAEMON_SHIM='' DAEMON_LOG_LEVEL='' daemon_start sd
    DAEMON_PID=$DPID
  fi
}

# grpo_start_trainer [server.py args...]
grpo_start_trainer() {
  local py
  py=$(grpo_python) || skip "no Python with torch (apt-get install python3-torch, or set SBX_PYTHON)"
  rm -f "$T/port"
  "$py" "$SBX_SRC_DIR/trainer/server.py" --port 0 --port-file "$T/port" "$@" >"$T/trainer.log" 2>&1 &
  TRAINER_PID=$!
  for _ in $(seq 300); do
    [ -s "$T/port" ] && break
    kill -0 "$TRAINER_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -s "$T/port" ] || { cat "$T/trainer.log" >&2; fail "the trainer did not start"; }
  TRAINER_URL=http://127.0.0.1:$(cat "$T/port")
}

# grpo_scripted_trainer ANSWERS_FILE [fake server args...]: bench/grpo_fake_server.py as the
# policy (a JSON object: prompt substring -> completion text), on TRAINER_URL; stopped at exit
# like the trainer.
grpo_scripted_trainer() {
  rm -f "$T/port"
  /usr/bin/python3 "$SBX_SRC_DIR/bench/grpo_fake_server.py" --port-file "$T/port" --delay-ms 0 \
    --answers "$1" "${@:2}" &
  TRAINER_PID=$!
  for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
  [ -s "$T/port" ] || fail "the scripted server did not start"
  TRAINER_URL=http://127.0.0.1:$(cat "$T/port")
}

grpo_setup() {
  grpo_tmp
  grpo_start_daemon
}

# grpo_run ARGS...: sbx grpo against the private daemon and trainer.
grpo_run() {
  "$SBX_BUILD_DIR/sbx" grpo --host "$SOCK" --trainer "$TRAINER_URL" "$@"
}

# json FILE EXPR: evaluate a Python expression over the JSON document `d`.
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# grpo_learn OUT STEPS [sbx grpo args...]: the learning run of the demo and of the e2e test:
# STEPS training steps of 8 tasks x 8 episodes on the toy set's training split (OUT/train), then
# the trained policy on every held-out task, 8 episodes each, without training (OUT/held_out),
# then tests/e2e/grpo_report.py: reward and pass rate per step, at the end, held out
# (OUT/learning.json).
GRPO_TOY_TASKS=${GRPO_TOY_TASKS:-$SBX_SRC_DIR/tasks/toy-files.jsonl}
grpo_learn() {
  local out=$1 steps=$2
  grpo_run --tasks "$GRPO_TOY_TASKS" --out "$out/train" --steps "$steps" --tasks-per-step 8 \
    --group-size 8 --seed 3 "${@:3}" || return 1
  echo "== held-out split: the trained policy on tasks it never saw, no training"
  grpo_run --tasks "$GRPO_TOY_TASKS" --split held_out --no-train --out "$out/held_out" \
    --steps 1 --tasks-per-step 8 --group-size 8 --seed 3 "${@:3}" || return 1
  /usr/bin/python3 "$SBX_SRC_DIR/tests/e2e/grpo_report.py" "$out"
}

# grpo_tool_test OUT [sbx grpo args...]: the brief's tool-test manifest (tasks/tool-test: 64
# multi-turn shell tasks, 21 train / 43 held out, seed 42, max_turns 3, 256 tokens) run by the
# current policy without training, every task of a split once (OUT/tool_test/train and
# OUT/tool_test/held_out), then its pass rates from those runs' step logs
# (OUT/tool_test/rates.json).
GRPO_TOOL_TASKS=${GRPO_TOOL_TASKS:-$SBX_SRC_DIR/tasks/tool-test/tasks.jsonl}
grpo_tool_test() {
  local out=$1/tool_test split n
  for split in train held_out; do
    n=21
    [ "$split" = train ] || n=43
    grpo_run --tasks "$GRPO_TOOL_TASKS" --split "$split" --no-train --out "$out/$split" \
      --steps 1 --tasks-per-step "$n" --group-size 1 --seed 42 "${@:2}" || return 1
  done
  /usr/bin/python3 "$SBX_SRC_DIR/tests/e2e/grpo_report.py" --eval "$out" tool-test
}
