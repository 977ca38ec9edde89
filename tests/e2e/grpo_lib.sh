# Helpers for the GRPO end-to-end tests and demo: a private sandboxd and the reference trainer,
# both started here and stopped (with every sandbox removed) by grpo_cleanup.
# Needs: $SBX_BUILD_DIR, $SBX_SRC_DIR. Sets: T (temp dir), SOCK, TRAINER_URL.

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

# The daemons' cgroup parents (ours: named after this shell's PID), once their sandboxes are gone.
grpo_remove_cgroups() {
  local d
  for _ in $(seq 50); do
    local left=0
    for d in /sys/fs/cgroup/*/"sbxtest-grpo-$$" /sys/fs/cgroup/"sbxtest-grpo-$$" \
      /sys/fs/cgroup/*/"sbxtest-grpo-$$"-* /sys/fs/cgroup/"sbxtest-grpo-$$"-*; do
      [ -d "$d" ] || continue
      find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
      [ -d "$d" ] && left=1
    done
    [ $left -eq 0 ] && return 0
    sleep 0.1
  done
  echo "warning: cgroup sbxtest-grpo-$$ still busy" >&2
}

# grpo_stop_daemon SOCK PID: end its sandboxes, then the daemon.
grpo_stop_daemon() {
  local id
  for id in $(SOCK=$1 grpo_api /v1/sandboxes | /usr/bin/python3 -c '
import json, sys
print(" ".join(s["id"] for s in json.load(sys.stdin) if s["state"] != "ended"))' 2>/dev/null); do
    SOCK=$1 grpo_api "/v1/sandboxes/$id" -X DELETE >/dev/null
  done
  kill "$2" 2>/dev/null && wait "$2" 2>/dev/null
}

grpo_cleanup() {
  set +e
  [ -n "${GRPO_RUNNER_PID:-}" ] && kill "$GRPO_RUNNER_PID" 2>/dev/null && wait "$GRPO_RUNNER_PID" 2>/dev/null
  [ -n "${TRAINER_PID:-}" ] && kill "$TRAINER_PID" 2>/dev/null && wait "$TRAINER_PID" 2>/dev/null
  [ -n "${SOCK2:-}" ] && grpo_stop_daemon "$SOCK2" "$DAEMON2_PID"
  if [ -n "${DAEMON_PID:-}" ]; then
    grpo_stop_daemon "$SOCK" "$DAEMON_PID"
    grpo_remove_cgroups
  fi
  [ -n "${T:-}" ] && rm -rf "$T"
}

# grpo_start_daemon [2]: the private daemon on $SOCK (PID $DAEMON_PID), or with 2 a second one
# on $SOCK2 (PID $DAEMON2_PID) with its own directories and cgroup parent.
grpo_start_daemon() {
  local n=${1:-} sock pid
  sock=$T/sock$n
  "$SBX_BUILD_DIR/sandboxd" --socket "$sock" --run-dir "$T/run$n" --state-dir "$T/state$n" \
    --cgroup-parent "sbxtest-grpo-$$${n:+-$n}" --seccomp-profile "$SBX_SRC_DIR/policy/seccomp.json" \
    >"$T/daemon$n.log" 2>&1 &
  pid=$!
  if [ -n "$n" ]; then SOCK2=$sock DAEMON2_PID=$pid; else SOCK=$sock DAEMON_PID=$pid; fi
  for _ in $(seq 100); do
    curl -sf --unix-socket "$sock" http://x/healthz >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$T/daemon$n.log" >&2
  fail "sandboxd did not become healthy"
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

grpo_setup() {
  T=$(mktemp -d /tmp/sbx-grpo.XXXXXX)
  trap grpo_cleanup EXIT
  grpo_start_daemon
}

# grpo_run ARGS...: sbx grpo against the private daemon and trainer.
grpo_run() {
  "$SBX_BUILD_DIR/sbx" grpo --host "$SOCK" --trainer "$TRAINER_URL" "$@"
}

# json FILE EXPR: evaluate a Python expression over the JSON document `d`.
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
