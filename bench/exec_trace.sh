#!/usr/bin/env bash
# bench/exec_trace.sh: where an exec round trip's time goes, by process (issue 28 goal 4). A
# daemon of its own, one sandbox, back-to-back execs of `true` from Python (bench/exec_floor.py's
# client: one keep-alive connection), in three passes:
#   1. plain: wall time per exec, and the machine's busy share (/proc/stat, both CPUs);
#   2. `perf stat -p` on the daemon and the shim: CPU and context switches per exec;
#   3. `strace -c` on the daemon and the shim: system calls per exec (strace slows the loop);
# then `perf sched record` of ten execs spaced 50 ms apart, and the scheduler's view of the
# fifth one (`perf sched timehist -w`: who woke whom, on which CPU, the wait for a CPU and the
# run time of each step); and 5. `perf sched record` of half a second of back-to-back execs,
# summed by process: how often each was switched in, how long it ran and how long it waited
# for a CPU, per exec (on a VM where a switch between address spaces is dear, the count says
# much; the tracing adds to the times). Usage: bench/exec_trace.sh [BUILD_DIR]; SBX_BENCH_N
# execs per pass (default 1000). Needs root, perf and strace (each pass without its tool is said loudly).
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
source "$ROOT/bench/common.sh"
N=${SBX_BENCH_N:-1000}
PY=${SBX_PYTHON:-/usr/bin/python3}
start_daemon --shim "$B/sbx-shim" || { cat "$T/daemon.log" >&2; exit 1; }
SID=$(curl -sf --unix-socket "$T/sock" -X POST http://x/v1/sandboxes -d '{}' | grep -o '"id":"[^"]*"' | cut -d'"' -f4)
SH=$(for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = sbx-shim ] && tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF "$T/" && echo "${p#/proc/}"
done | head -1 || true)
if [ -z "$SID" ] || [ -z "$SH" ]; then
  echo "bench: no sandbox or no shim" >&2
  exit 1
fi

# loop N [GAP_S]: N execs in the sandbox, after 50 that warm up (the counts of passes 2 and 3
# include them); prints the p50 in ms.
loop() {
  "$PY" - "$T/sock" "$SID" "$1" "${2:-0}" <<'PY'
import statistics, sys, time
sys.path.insert(0, "bench")
from exec_floor import UnixConn, exec_true
c = UnixConn(sys.argv[1])
call, n, gap = exec_true(c, sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
for _ in range(50):
    call()
t = []
for _ in range(n):
    time.sleep(gap)
    a = time.perf_counter()
    call()
    t.append((time.perf_counter() - a) * 1e3)
print("%.3f" % statistics.median(t))
PY
}
# traced TAG TOOL...: one loop of N execs with `TOOL... -p PID -o FILE` attached to the daemon
# ($T/TAG.d) and to the shim ($T/TAG.s).
traced() {
  local tag=$1 s1 s2
  shift
  "$@" -p "$DPID" -o "$T/$tag.d" 2>/dev/null &
  s1=$!
  "$@" -p "$SH" -o "$T/$tag.s" 2>/dev/null &
  s2=$!
  sleep 0.3
  loop "$N" >/dev/null
  kill -INT "$s1" "$s2"
  wait "$s1" "$s2" || true
}
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }

echo "# exec trace, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD), load $(cut -d' ' -f1-3 /proc/loadavg), $N execs per pass"
read -r b0 i0 < <(busy)
a=$(date +%s.%N)
p50=$(loop "$N")
z=$(date +%s.%N)
read -r b1 i1 < <(busy)
awk -v p="$p50" -v a="$a" -v z="$z" -v n="$N" -v b="$((b1 - b0))" -v i="$((i1 - i0))" 'BEGIN {
  printf "1. wall per exec: p50 %.3f ms, mean %.3f ms; the machine busy %.0f %% of the loop (both CPUs)\n",
    p, (z - a) * 1e3 / n, 100 * b / (b + i) }'

if command -v perf >/dev/null; then
  traced stat perf stat -x, -e task-clock,context-switches
  for w in d:daemon s:shim; do
    awk -F, -v n="$((N + 50))" -v who="${w#*:}" '$3 == "task-clock" {c = $1} $3 == "context-switches" {x = $1}
      END { printf "2. %-6s CPU %.3f ms and %.1f context switches per exec\n", who, c / n, x / n }' "$T/stat.${w%%:*}"
  done
else
  loud "perf is not installed: passes 2 and 4 are skipped"
fi

if command -v strace >/dev/null; then
  traced strace strace -c
  for w in d:daemon s:shim; do
    awk -v n="$((N + 50))" -v who="${w#*:}" '$NF == "total" {t = $4} $1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" {
        l = l sprintf(" %s %.1f", $NF, $4 / n) }
      END { printf "3. %-6s %.1f system calls per exec:%s\n", who, t / n, l }' "$T/strace.${w%%:*}"
  done
else
  loud "strace is not installed: pass 3 is skipped"
fi

if command -v perf >/dev/null; then
  perf record -q -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_wakeup_new -a -o "$T/sched.data" &
  s1=$!
  sleep 0.5
  loop 10 0.05 >/dev/null
  sleep 0.1
  kill -INT "$s1"
  wait "$s1" || true
  echo "4. the fifth exec, as the scheduler saw it (time s, [CPU], task, wait ms, wait for a CPU ms, run ms):"
  perf sched timehist -w -i "$T/sched.data" 2>/dev/null |
    grep -E 'sandboxd|sbx-|python3|true|<idle>' | awk '
      /python3.*awakened: sandboxd/ { start = NR; init = 0 }
      start && /sbx-init/ { init = 1 }
      { l[NR] = $0 }
      start && init && /sandboxd.*awakened: python3/ { a = start; z = NR; if (++k == 5) exit }
      END { for (i = a; i <= z; i++) print l[i] }' || true # (grep's SIGPIPE when awk is done)
fi

if command -v perf >/dev/null; then
  INIT=$(for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2>/dev/null)" = sbx-init ] && [ "$(awk '{print $4}' "$p/stat" 2>/dev/null)" = "$SH" ] && echo "${p#/proc/}"
  done | head -1 || true)
  loop 1500 >/dev/null &
  s2=$!
  sleep 1 # (the client started and warmed up)
  perf record -q -e sched:sched_switch -e sched:sched_wakeup -e sched:sched_wakeup_new -a -o "$T/sched5.data" -- sleep 0.5
  wait "$s2"
  echo "5. per exec, back to back, from the scheduler: switched in, ran, waited for a CPU"
  perf sched timehist -i "$T/sched5.data" 2>/dev/null | awk -v d="$DPID" -v s="$SH" -v i="${INIT:-none}" '
    NF >= 6 && $1 ~ /^[0-9.]+$/ {
      t = $3; pid = t; sub(/^.*\[/, "", pid); sub(/\].*$/, "", pid); sub(/^.*\//, "", pid)
      r = pid == d ? "daemon" : pid == s ? "shim" : pid == i ? "init" : t ~ /^sbx-init/ ? "reapers, commands before exec" : t ~ /^true\[/ ? "the command (true)" : t ~ /^python3/ ? "client (python3)" : ""
      if (r == "") next
      if (t ~ /^true\[/) execs[t] = 1
      n[r]++; w[r] += $(NF - 1); x[r] += $NF }
    END { for (e in execs) k++
      printf "   (%d execs)\n", k
      for (r in n) printf "   %-30s %5.2f times  %7.1f us ran  %7.1f us waited\n", r, n[r] / k, x[r] * 1e3 / k, w[r] * 1e3 / k }' | sort
fi
