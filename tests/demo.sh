#!/usr/bin/env bash
# `make demo`: the main job on built-in defaults. Starts a private sandboxd (its own socket, state
# and cgroup, so an installed service is never touched), shows sandboxes through the sbx CLI
# (create, exec, cp, inspect with cost, run), then a short GRPO run against the reference trainer.
# Everything it creates is removed on exit, also on Ctrl-C.
set -euo pipefail
B=${1:-build}
SRC=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$B" && pwd)
SBX=$B/sbx
[ "$(id -u)" -eq 0 ] || { echo "demo: run as root (sudo make demo): sandboxes need namespaces and cgroups" >&2; exit 1; }

SBX_SRC_DIR=$SRC SBX_BUILD_DIR=$B
fail() { echo "demo: $*" >&2; exit 1; }
skip() { echo "demo: skipped: $*" >&2; exit 0; }
# the private daemon and its cleanup (sandboxes, daemon, cgroups, files) come from the test helper
DAEMON_TAG=demo
source "$SRC/tests/lib/daemon.sh"
trap 'exit 130' INT TERM # the EXIT trap cleans up

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
show() { printf '$ %s\n' "$*"; "$@"; }

daemon_dirs
T=$DAEMON_ROOT/files
mkdir -p "$T"
step "start sandboxd (private socket $SOCK)"
DAEMON_SHIM='' DAEMON_LOG_LEVEL='' start_daemon
export SBX_HOST=$SOCK
alias sbx="$SBX"
show "$SBX" info

step "create a sandbox: 1 vCPU, 512Mi, 256 processes, no network"
ID=$("$SBX" create --memory 512Mi --label demo=yes)
echo "created $ID"

step "who am I inside? (uid 1000, no capabilities, seccomp on, own hostname)"
show "$SBX" exec "$ID" -- sh -c 'id; hostname; grep -E "^(CapEff|CapBnd|NoNewPrivs|Seccomp):" /proc/self/status'

step "the host is invisible: processes, files, network"
show "$SBX" exec "$ID" -- sh -c 'ps -e -o pid,user,comm | head; ls /; ip -brief addr 2>/dev/null || cat /proc/net/dev | tail -n +3'

step "run real work: python3 and a C compiler"
show "$SBX" exec "$ID" -- python3 -c 'import sys, platform; print("python", sys.version.split()[0], "on", platform.node())'
show "$SBX" exec --sh "$ID" -- 'printf "#include <stdio.h>\nint main(void){puts(\"hello from C\");}\n" > h.c && cc h.c -o h && ./h'

step "copy files in and out"
echo "a file from the host" >"$T/in.txt"
show "$SBX" cp "$T/in.txt" "$ID:/workspace/in.txt"
show "$SBX" exec "$ID" -- sh -c 'wc -c in.txt && echo made-inside > out.txt'
show "$SBX" cp "$ID:/workspace/out.txt" "$T/out.txt"
cat "$T/out.txt"

step "limits are results, not errors: exit codes, timeouts, a fork bomb"
set +e
"$SBX" exec "$ID" -- sh -c 'exit 3'; echo "exit code: $?"
"$SBX" exec --timeout 1s "$ID" -- sleep 30; echo "exit code after command timeout: $? (124)"
"$SBX" exec "$ID" -- python3 -c '
import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            time.sleep(2); os._exit(0)
        n += 1
except OSError as e:
    print("fork bomb stopped after", n, "children:", e.strerror)'
"$SBX" exec "$ID" -- echo "and the sandbox is still usable"
set -e

step "inspect: state, limits, usage and cost so far"
show "$SBX" inspect "$ID"

step "sbx run: create + exec + remove in one"
show "$SBX" run -- sh -c 'echo "a throwaway sandbox: $(hostname)"'

step "remove"
show "$SBX" rm "$ID"
show "$SBX" ls

if [ -x "$SRC/tests/e2e/grpo_demo.sh" ]; then
  step "a short GRPO run against the reference trainer"
  "$SRC/tests/e2e/grpo_demo.sh" "$B"
fi
step "done"
