#!/usr/bin/env bash
# bench/ab.sh: two builds side by side in one run (e.g. main's and a branch's), so a change is
# judged by its ratio under the same machine load, never by absolute numbers across runs.
# Usage: bench/ab.sh OLD_BUILD NEW_BUILD (needs root). Each build gets its own daemon; every
# measurement runs in SBX_AB_ROUNDS (3) rounds, alternating old/new, of SBX_AB_N iterations:
#   ab.exec       POST exec `true` round trip in a running sandbox (lat exec, per build)
#   ab.exec_interleaved  the same from Python, the two daemons interleaved request by request
#                 with Python's subprocess.run(["/bin/true"]) (bench/exec_floor.py)
#   ab.cycle      create -> exec `true` -> delete, cold (lat cycle), each after a bwrap `true`
#   ab.cycle_bwrap  that bwrap `true` (the cold cycle's peer, interleaved; same for both)
#   ab.sbx_version / ab.sbx_exec   `sbx --version`, `sbx exec ID -- true` (whole processes)
#   ab.true       fork+exec+wait of /bin/true (the floor; same for both)
# Prints one line per measurement and build: the median of the rounds' p50s.
# SBX_AB_OLD_ARGS / SBX_AB_NEW_ARGS: extra daemon flags for each (e.g. one build against
# itself with a feature off: `SBX_AB_OLD_ARGS="--spare-shims 0" bench/ab.sh build build`).
# SBX_AB_TMPFS=1: both run dirs on a tmpfs, as /run is in production (unmounted at the end).
# SBX_AB_GAP_MS=G: G ms of rest after each bwrap run and each cycle (lat's LAT_GAP_MS), so that
# neither runs beside what the other left running (a spare's refill, a sandbox's teardown).
# SBX_AB_OLD_POLICY: the seccomp profile for the old build's daemon when the tree's
# policy/seccomp.json is newer than that build understands (default: the tree's).
set -euo pipefail

OLD=$(realpath "${1:?usage: bench/ab.sh OLD_BUILD NEW_BUILD}")
NEW=$(realpath "${2:?usage: bench/ab.sh OLD_BUILD NEW_BUILD}")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${SBX_AB_N:-100}
ROUNDS=${SBX_AB_ROUNDS:-3}
# shellcheck disable=SC2034 # common.sh reads B
B=$NEW
source "$ROOT/bench/common.sh"

declare -A PIDS SOCKS IDS
start_ab() { # TAG BUILD POLICY [DAEMON FLAGS...]
  local d=$T/$1
  mkdir -p "$d/run" "$d/state"
  if [ "${SBX_AB_TMPFS:-0}" = 1 ]; then mount -t tmpfs -o mode=0755 sbxab "$d/run"; fi
  "$2/sandboxd" --socket "$d/sock" --run-dir "$d/run" --state-dir "$d/state" \
    --cgroup-parent "$CGPARENT-$1" --seccomp-profile "$3" "${@:4}" >>"$d/daemon.log" 2>&1 &
  PIDS[$1]=$!
  SOCKS[$1]=$d/sock
  for _ in $(seq 100); do
    curl -sf --max-time 1 --unix-socket "$d/sock" http://x/healthz >/dev/null 2>&1 && break
    sleep 0.1
  done
  IDS[$1]=$(curl -s --max-time 30 --unix-socket "$d/sock" -X POST -d '{}' http://x/v1/sandboxes |
    grep -o '"id":"sb-[^"]*"' | head -n 1 | cut -d'"' -f4)
  [ -n "${IDS[$1]}" ] || { log "$1: no sandbox: $(tail -n 3 "$d/daemon.log")"; exit 1; }
}
stop_ab() {
  for tag in old new; do
    [ -n "${PIDS[$tag]:-}" ] || continue
    curl -s --max-time 10 --unix-socket "${SOCKS[$tag]}" -X DELETE \
      "http://x/v1/sandboxes/${IDS[$tag]:-none}" >/dev/null || true
    kill -TERM "${PIDS[$tag]}" 2>/dev/null || true
    wait "${PIDS[$tag]}" 2>/dev/null || true
    for c in /sys/fs/cgroup/*/; do
      find "$c" -depth -type d -path "*/$CGPARENT-$tag*" -exec rmdir {} \; 2>/dev/null || true
    done
  done
}
trap 'stop_ab; cleanup' EXIT

# shellcheck disable=SC2086 # the flags are meant to split
start_ab old "$OLD" "${SBX_AB_OLD_POLICY:-policy/seccomp.json}" ${SBX_AB_OLD_ARGS:-}
# shellcheck disable=SC2086
start_ab new "$NEW" policy/seccomp.json ${SBX_AB_NEW_ARGS:-}
# p50 [NAME]: the p50 of lat's line NAME (default: its first line, e.g. the whole cycle)
p50() {
  if [ $# -gt 0 ]; then grep -F "\"name\":\"$1\"" || true; else head -n 1; fi |
    sed -n 's/.*"p50_ms":\([0-9.]*\).*/\1/p' | head -n 1
}
declare -A R
for ((r = 0; r < ROUNDS; r++)); do
  for tag in old new; do
    b=$OLD
    [ "$tag" = new ] && b=$NEW
    s=${SOCKS[$tag]}
    R[exec.$tag]+="$("$LAT" exec ab.exec "$N" "$s" | p50) "
    out=$(LAT_GAP_MS=${SBX_AB_GAP_MS:-0} "$LAT" cycle ab.cycle "$((N / 4 + 1))" "$s" '{}' "${PEER[@]}")
    R[cycle.$tag]+="$(p50 ab.cycle <<<"$out") "
    R[cycle_bwrap.$tag]+="$(p50 ab.cycle.peer <<<"$out") "
    R[sbx_version.$tag]+="$("$LAT" spawn ab.sbx_version "$N" "$b/sbx" --version | p50) "
    R[sbx_exec.$tag]+="$(SBX_HOST=unix:$s "$LAT" spawn ab.sbx_exec "$N" "$b/sbx" exec "${IDS[$tag]}" -- true | p50) "
    R[true.$tag]+="$("$LAT" spawn ab.true "$N" /bin/true | p50) "
  done
done
python3 bench/exec_floor.py "${SOCKS[old]}" "${SOCKS[new]}" "$((N * 4))" # second / first = new / old
med() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
printf '%-14s %10s %10s %8s   (p50 ms, median of %d rounds of %d)\n' measurement old new new/old "$ROUNDS" "$N"
for k in exec cycle cycle_bwrap sbx_version sbx_exec true; do
  o=$(echo "${R[$k.old]}" | med)
  n=$(echo "${R[$k.new]}" | med)
  [ -n "$o" ] && [ -n "$n" ] || { printf '%-14s %10s\n' "ab.$k" "(not measured)"; continue; }
  printf '%-14s %10s %10s %8s\n' "ab.$k" "$o" "$n" "$(awk -v a="$n" -v b="$o" 'BEGIN{printf "%.2f", a/b}')"
done
