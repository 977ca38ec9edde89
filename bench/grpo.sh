#!/usr/bin/env bash
# The GRPO bench hook (called by bench/run.sh as `bench/grpo.sh BUILD_DIR SOCKET` while its
# daemon runs): one GRPO step of 16 tasks x 8 episodes (128) with `sbx grpo --no-train`
# against bench/grpo_fake_server.py, a generation server whose every completion takes a fixed
# SBX_BENCH_GRPO_DELAY_MS (default 50), once with 128 episodes in flight and once one at a
# time. Prints lat-format JSON lines: grpo.concurrent and grpo.sequential (the step's wall time)
# and grpo.runner_cpu_per_turn (the runner's user+system CPU time / turns, concurrent step).
set -euo pipefail
B=${1:?usage: bench/grpo.sh BUILD_DIR SOCKET}
SOCK=${2:?usage: bench/grpo.sh BUILD_DIR SOCKET}
SRC=$(cd "$(dirname "$0")/.." && pwd)
DELAY=${SBX_BENCH_GRPO_DELAY_MS:-50}
TASKS=${SBX_BENCH_GRPO_TASKS:-16}
GROUP=${SBX_BENCH_GRPO_GROUP:-8}
T=$(mktemp -d /tmp/sbx-bench-grpo.XXXXXX)
SPID=''
cleanup() {
  set +e
  if [ -n "$SPID" ]; then
    kill "$SPID" 2>/dev/null
    wait "$SPID" 2>/dev/null
  fi
  rm -rf "$T"
  return 0
}
trap cleanup EXIT

/usr/bin/python3 "$SRC/bench/grpo_fake_server.py" --port-file "$T/port" --delay-ms "$DELAY" &
SPID=$!
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
[ -s "$T/port" ] || { echo "grpo.sh: the fake generation server did not start" >&2; exit 1; }
URL=http://127.0.0.1:$(cat "$T/port")

# step NAME INFLIGHT: one step; prints "wall_ms cpu_ms turns episodes scored"
step() {
  local out=$T/$1 t0 t1
  t0=$(date +%s%N)
  /usr/bin/python3 - "$B/sbx" "$out" "$SOCK" "$URL" "$SRC/tasks/toy-files.jsonl" "$2" \
    "$TASKS" "$GROUP" <<'PY'
import os, resource, subprocess, sys
sbx, out, sock, url, tasks, inflight, ntasks, group = sys.argv[1:]
r = subprocess.run([sbx, "grpo", "--host", sock, "--trainer", url, "--tasks", tasks,
                    "--out", out, "--steps", "1", "--tasks-per-step", ntasks, "--group-size",
                    group, "--max-inflight", inflight, "--no-train", "--json"],
                   stdout=subprocess.DEVNULL, stderr=open(out + ".stderr", "w"))
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
open(out + ".cpu", "w").write("%.3f\n" % ((ru.ru_utime + ru.ru_stime) * 1000))
sys.exit(r.returncode)
PY
  t1=$(date +%s%N)
  /usr/bin/python3 - "$out" $(( (t1 - t0) / 1000 )) <<'PY'
import json, sys
out, wall_us = sys.argv[1], int(sys.argv[2])
eps = [json.loads(l) for l in open(out + "/step-0001.jsonl")]
turns = sum(len(e.get("trace", [])) for e in eps)
scored = sum(1 for e in eps if e.get("status") == "scored")
cpu = float(open(out + ".cpu").read())
print(wall_us / 1000.0, cpu, turns, len(eps), scored)
PY
}

emit() { # NAME N VALUE_MS [extra json]
  printf '{"name":"%s","n":%s,"p50_ms":%.3f,"p99_ms":%.3f%s}\n' "$1" "$2" "$3" "$3" "${4:-}"
}

read -r cw ccpu cturns ceps cscored < <(step concurrent 128)
read -r sw _ _ seps sscored < <(step sequential 1)
extra() { echo ",\"episodes\":$1,\"scored\":$2,\"delay_ms\":$DELAY"; }
emit grpo.concurrent 1 "$cw" "$(extra "$ceps" "$cscored")"
emit grpo.sequential 1 "$sw" "$(extra "$seps" "$sscored")"
[ "$cturns" -gt 0 ] && emit grpo.runner_cpu_per_turn "$cturns" \
  "$(/usr/bin/python3 -c "print($ccpu / $cturns)")" ",\"turns\":$cturns"
exit 0
