#!/usr/bin/env bash
# bench/profile.sh: profiles sandboxd's create and exec hot paths once, for docs/BENCHMARKS.md
# ("where the time goes"). Usage: bench/profile.sh [BUILD_DIR]; writes bench/results/profile.txt.
#   1. callgrind on the daemon (user space of the daemon only; the shim runs natively), since
#      `perf stat -e instructions` has no hardware counters on this VM;
#   2. perf record -g -e cpu-clock (a software clock, works without counters) of the daemon and
#      everything it starts, kernel included, while the same loops run against it;
#   3. the daemon's own create/exec histograms; 4. the shim binary's start-up cost.
# Needs root, valgrind, perf. Knobs: SBX_PROF_N (create cycles, 30), SBX_PROF_NEXEC (execs, 300),
# SBX_PROF_CALLGRIND=0 (skip the slow callgrind part).
set -euo pipefail

B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
NC=${SBX_PROF_N:-30}
NE=${SBX_PROF_NEXEC:-300}
OUT=$ROOT/bench/results/profile.txt
source "$ROOT/bench/common.sh"
mkdir -p "$(dirname "$OUT")"
exec 3>"$OUT.tmp"

section() { printf '\n==== %s ====\n' "$*" >&3; }

loops() { # the two hot paths, against the daemon on $T/sock
  "$LAT" cycle prof.cycle "$NC" "$T/sock" '{}' >&3
  "$LAT" exec prof.exec "$NE" "$T/sock" >&3
}

echo "sandboxd profile, $(date -u +%Y-%m-%dT%H:%MZ), commit $(git rev-parse --short HEAD)," \
  "$NC create cycles + $NE exec round trips" >&3

if [ "${SBX_PROF_CALLGRIND:-1}" != 0 ] && command -v valgrind >/dev/null; then
  log "callgrind on the daemon"
  DAEMON_WRAP=(valgrind --tool=callgrind --callgrind-out-file="$T/callgrind.out"
    --trace-children=no --collect-systime=nsec)
  if DAEMON_WAIT_TICKS=600 start_daemon; then
    section "timings under callgrind (slow; for the profile only)"
    loops
    stop_daemon
    section "callgrind: daemon, self cost (Ir), top 30"
    callgrind_annotate --inclusive=no "$T/callgrind.out" 2>/dev/null | sed -n "1,60p" >&3 || true
    section "callgrind: daemon, inclusive cost (Ir), top 40"
    callgrind_annotate --inclusive=yes "$T/callgrind.out" 2>/dev/null | sed -n "1,70p" >&3 || true
  else
    section "callgrind: the daemon does not run under valgrind"
    grep -v '^==' "$T/daemon.log" | grep -E 'unhandled|error' | head -n 3 >&3 || true
  fi
  unset DAEMON_WRAP
fi

if command -v perf >/dev/null; then
  # perf runs the daemon, so it samples only this daemon and what it starts (shims, inits,
  # commands), not the other jobs on the machine.
  for k in cycle exec; do
    log "perf record -g -e cpu-clock: $k"
    DAEMON_WRAP=(perf record -q -g -e cpu-clock -F 4000 -o "$T/perf.$k" --)
    if ! start_daemon; then
      section "perf: the daemon did not start: $(tail -n 3 "$T/daemon.log")"
      continue
    fi
    if [ "$k" = cycle ]; then
      "$LAT" cycle prof.cycle "$NC" "$T/sock" '{}' >&3
    else
      "$LAT" exec prof.exec "$NE" "$T/sock" >&3
    fi
    section "the daemon's own histograms (server side) after the $k loop"
    curl -s --unix-socket "$T/sock" http://x/metrics | grep -E '^sandboxd_(create|exec)_seconds_(sum|count)' >&3 || true
    stop_daemon
    sleep 1 # perf writes its file after the daemon exits
    section "perf ($k): CPU time by process (daemon and its descendants only)"
    perf report -i "$T/perf.$k" --no-children --sort comm --stdio -g none 2>/dev/null |
      grep -v '^#' | grep -v '^$' | head -n 12 >&3 || true
    section "perf ($k): by process and symbol ([k] kernel, [.] user), top 45"
    perf report -i "$T/perf.$k" --no-children --sort comm,dso,sym --stdio -g none 2>/dev/null |
      grep -v '^#' | grep -v '^$' | head -n 45 >&3 || true
  done
  unset DAEMON_WRAP
fi

section "startup cost of the shim binary vs /bin/true (perf stat -r 100, exec + dynamic loading)"
perf stat -r 100 "$B/sbx-shim" --version 2>&1 >/dev/null | grep -E 'task-clock|elapsed' >&3 || true
perf stat -r 100 /bin/true 2>&1 >/dev/null | grep -E 'task-clock|elapsed' >&3 || true
echo "libraries loaded by sbx-shim: $(ldd "$B/sbx-shim" | wc -l)" >&3

section "startup cost of the CLI (sbx --version; perf stat -r 100)"
perf stat -r 100 "$B/sbx" --version 2>&1 >/dev/null | grep -E 'task-clock|elapsed' >&3 || true
echo "libraries loaded by sbx: $(ldd "$B/sbx" | wc -l)" >&3

exec 3>&-
mv "$OUT.tmp" "$OUT"
log "wrote $OUT"
