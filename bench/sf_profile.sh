#!/usr/bin/env bash
# bench/sf_profile.sh: where the time and the CPU of one SandboxFusion /run_code print(1) go,
# next to `python3 -c 'print(1)'` run directly, on a daemon of its own (run dir on a tmpfs, as
# /run is in production). Prints, as Markdown:
#   1. the wall time of each step of a request (the daemon's debug line `sandboxfusion request
#      done ... steps_ms`: queue, create, files, compile, run (+ fetches), end), mean and p50;
#   2. the CPU of one request, daemon and everything it starts, from the daemon's own and its
#      children's CPU times, against the floor's (the same loop, interleaved request by request);
#   3. with perf: that CPU split by process (perf record -g -p DAEMON follows what it starts) and
#      by system call, top rows;
#   4. python3's own CPU (getrusage) run directly, in a request, in a request after a pause, and
#      directly beside a busy loop.
# Usage: bench/sf_profile.sh [BUILD_DIR]; knobs: SBX_BENCH_N (requests, 100), SBX_PROF_PERF=0
# (skip perf), SBX_PROF_KEEP=FILE (keep perf's samples there, as text). Needs root. Kernel work
# done later by kworkers (a network namespace's cleanup, RCU) is not charged to the request
# here: the throughput rows of bench/python.sh see it.
set -euo pipefail
B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${SBX_BENCH_N:-100}
source "$ROOT/bench/common.sh"
RUN_DIR=$T/tmpfs
mkdir -p "$RUN_DIR"
mount -t tmpfs -o mode=0755 sbxbench "$RUN_DIR"
export RUN_DIR
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start_daemon --shim "$B/sbx-shim" --log-level debug --sandboxfusion-listen "127.0.0.1:$PORT" \
  ${SBX_SF_PROFILE_ARGS:-} || { cat "$T/daemon.log" >&2; exit 1; }
PERF_PID=
if [ "${SBX_PROF_PERF:-1}" != 0 ] && command -v perf >/dev/null; then
  perf record -q -g -e cpu-clock -F 2000 -o "$T/perf.data" -p "$DPID" 2>/dev/null &
  PERF_PID=$!
  sleep 0.5
fi
echo "# /run_code print(1) profile, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)," \
  "$N requests, load $(cut -d' ' -f1-3 /proc/loadavg)"
"${SBX_PYTHON:-/usr/bin/python3}" - "$DPID" "$N" "http://127.0.0.1:$PORT" <<'EOF'
import json, os, subprocess, sys, time, urllib.request
pid, n, url = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
tck = os.sysconf("SC_CLK_TCK")
def cpu():  # the daemon's CPU and that of its waited-for descendants (shims, inits, commands)
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15]) / tck
body = json.dumps({"code": "print(1)", "language": "python"}).encode()
sf_cpu = fl_cpu = sf_wall = fl_wall = 0.0
for _ in range(n):
    c0, t0 = cpu(), time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url + "/run_code", data=body), timeout=60) as r:
        assert json.load(r)["status"] == "Success"
    t1 = time.perf_counter()
    sf_wall += t1 - t0
    time.sleep(0.02)  # let the sandbox's end be charged (the shim is waited for)
    sf_cpu += cpu() - c0
    r0 = os.times()
    subprocess.run([sys.executable, "-c", "print(1)"], stdout=subprocess.DEVNULL, check=True)
    r1 = os.times()
    fl_wall += r1.elapsed - r0.elapsed
    fl_cpu += r1.children_user + r1.children_system - r0.children_user - r0.children_system
print("\n| per request | wall ms | CPU ms (all processes) |\n|---|---|---|")
print(f"| /run_code print(1) | {1000 * sf_wall / n:.2f} | {1000 * sf_cpu / n:.2f} |")
print(f"| python3 -c 'print(1)' (floor) | {1000 * fl_wall / n:.2f} | {1000 * fl_cpu / n:.2f} |")
print(f"| ratio | {sf_wall / fl_wall:.2f}x | {sf_cpu / fl_cpu:.2f}x |")
EOF
[ -z "$PERF_PID" ] || { kill -INT "$PERF_PID"; wait "$PERF_PID" || true; }
echo
grep -ho 'request done sandbox=[^ ]* steps_ms="[^"]*"' "$T/daemon.log" | sed 's/.*steps_ms=//; s/"//g' |
  "${SBX_PYTHON:-/usr/bin/python3}" -c '
import collections, sys
v = collections.defaultdict(list)
for line in sys.stdin:
    for kv in line.split():
        k, x = kv.split("=")
        v[k].append(float(x))
print("\n| step (wall) | mean ms | p50 ms |\n|---|---|---|")
for k, xs in sorted(v.items(), key=lambda kv: -sum(kv[1]) / len(kv[1])):
    xs.sort()
    print(f"| {k} | {sum(xs) / len(xs):.2f} | {xs[len(xs) // 2]:.2f} |")'
if [ -n "$PERF_PID" ]; then
  perf script -i "$T/perf.data" -F comm,ip,sym 2>/dev/null >"$T/perf.txt" || true
  [ -z "${SBX_PROF_KEEP:-}" ] || cp "$T/perf.txt" "$SBX_PROF_KEEP" # the samples, for a closer look
  "${SBX_PYTHON:-/usr/bin/python3}" - "$T/perf.txt" <<'EOF'
import collections, sys
samples, cur = [], None
for line in open(sys.argv[1], errors="replace"):
    if not line.strip():
        if cur: samples.append(cur)
        cur = None
    elif not line[0].isspace():
        cur = [line.split()[0], []]
    elif cur is not None:
        parts = line.split(None, 1)
        cur[1].append((parts[1].strip() if len(parts) > 1 else "?").split("+")[0])
if cur: samples.append(cur)
tot = len(samples) or 1
by_comm, by_call = collections.Counter(), collections.Counter()
for comm, st in samples:
    by_comm[comm] += 1
    call = next((s[len("__x64_sys_"):] for s in st if s.startswith("__x64_sys_")), None)
    if call is None:
        call = "page faults" if any("page_fault" in s for s in st) else (
            "user space" if not any(s.startswith(("entry_", "do_syscall", "asm_")) for s in st)
            else "kernel, other")
    by_call[(comm, call)] += 1
print(f"\nperf: {tot} samples of the daemon and what it started\n\n| process | share of CPU |\n|---|---|")
for c, v in by_comm.most_common(12):
    print(f"| {c} | {100 * v / tot:.1f} % |")
print("\n| process: system call | share of CPU |\n|---|---|")
for (c, k), v in by_call.most_common(30):
    print(f"| {c}: {k} | {100 * v / tot:.1f} % |")
EOF
fi
# python3's own CPU, as the program itself reads it (getrusage): run directly, in a /run_code
# request, and in a request after a pause (bash: sleep, then the same python3), so that what the
# sandbox costs python apart from the work beside it (the pool's refill on the other CPU) shows;
# and run directly beside a busy loop: what any work on another CPU costs a python here.
"${SBX_PYTHON:-/usr/bin/python3}" - "$N" "http://127.0.0.1:$PORT" <<'EOF'
import json, statistics, subprocess, sys, time, urllib.request
n, url = int(sys.argv[1]), sys.argv[2]
prog = ("import resource; r = resource.getrusage(resource.RUSAGE_SELF); "
        "print((r.ru_utime + r.ru_stime) * 1000)")
def run_code(code, lang):
    body = json.dumps({"code": code, "language": lang}).encode()
    with urllib.request.urlopen(urllib.request.Request(url + "/run_code", data=body), timeout=60) as r:
        res = json.load(r)
    assert res["status"] == "Success", res
    return float(res["run_result"]["stdout"])
rows = {"run directly (the floor's python)": [], "in a /run_code request": [],
        "in a /run_code request, after a 0.3 s pause in it": [],
        "run directly, beside a busy loop (another CPU kept busy)": []}
busy_key = "run directly, beside a busy loop (another CPU kept busy)"
busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
time.sleep(0.2)
for _ in range(max(n // 4, 10)):
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True)
    rows[busy_key].append(float(out.stdout))
busy.kill()
busy.wait()
for _ in range(max(n // 2, 10)):
    out = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True)
    rows["run directly (the floor's python)"].append(float(out.stdout))
    rows["in a /run_code request"].append(run_code(prog, "python"))
    time.sleep(0.02)
    rows["in a /run_code request, after a 0.3 s pause in it"].append(
        run_code(f"sleep 0.3; python3 -c '{prog}'", "bash"))
    time.sleep(0.02)
print("\n| python3's own CPU (getrusage, in the program) | p50 ms |\n|---|---|")
for k, v in rows.items():
    print(f"| {k} | {statistics.median(v):.2f} |")
EOF
