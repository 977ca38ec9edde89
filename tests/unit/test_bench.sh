#!/usr/bin/env bash
# Unit tests of the benchmark harness (bench/): lat's statistics (nearest-rank p50/p99), its
# fork+exec timer, and the report's ratios and goal verdicts. No privileges, no daemon.

build_lat() {
  LAT=$(mktemp -d)/lat
  trap 'rm -rf "$(dirname "$LAT")"' EXIT
  # shellcheck disable=SC2046
  cc -std=c17 -O2 -Wall -Wextra -Werror -o "$LAT" "$SBX_SRC_DIR/bench/lat.c" \
    $(pkg-config --cflags --libs libcurl jansson) || fail "bench/lat.c does not compile"
}

field() { sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p" <<<"$1"; }

test_stats_nearest_rank() {
  build_lat
  local out
  out=$(seq 100 | sort -R | "$LAT" stats s)
  assert_eq "$(field "$out" n)" 100 n
  assert_eq "$(field "$out" p50_ms)" 50.000 p50
  assert_eq "$(field "$out" p99_ms)" 99.000 p99
  assert_eq "$(field "$out" min_ms)" 1.000 min
  assert_eq "$(field "$out" max_ms)" 100.000 max
  assert_eq "$(field "$out" mean_ms)" 50.500 mean
  out=$(printf '7\n3\n' | "$LAT" stats s)
  assert_eq "$(field "$out" p50_ms)" 3.000 "p50 of two"
  assert_eq "$(field "$out" p99_ms)" 7.000 "p99 of two"
}

test_spawn_times_each_run() {
  build_lat
  local out
  out=$("$LAT" spawn sp 7 /bin/true)
  assert_eq "$(field "$out" n)" 7 n
  awk -v a="$(field "$out" p50_ms)" 'BEGIN{ exit !(a > 0 && a < 1000) }' || fail "p50 out of range: $out"
  ! "$LAT" spawn sp 3 /bin/false 2>/dev/null || fail "a failing command must fail the measurement"
  # "{i}" inside an argument becomes <pid>-<iteration>: each run (and the warm-up, -1) sees its
  # own name
  local d
  d=$(mktemp -d)
  "$LAT" spawn touch 3 touch "$d/f-{i}" >/dev/null
  assert_eq "$(find "$d" -name 'f-*' | wc -l)" 4 "files named per iteration"
  assert_eq "$(find "$d" -name 'f-[0-9]*--1' | wc -l)" 1 "the warm-up's file"
  rm -rf "$d"
}

test_report_ratios_and_goals() {
  RES=$(mktemp) NOTES=$(mktemp)
  # shellcheck disable=SC2034 # read by report.sh
  N=1 NFAST=1 BURST=128 BURST_ROUNDS=1 IDLE=1000
  cat >"$RES" <<'J'
{"name":"spawn.true","n":5,"p50_ms":1.000,"p99_ms":2.000}
{"name":"spawn.bwrap","n":5,"p50_ms":4.000,"p99_ms":5.000}
{"name":"api.cycle","n":5,"p50_ms":3.000,"p99_ms":9.000}
{"name":"api.exec","n":5,"p50_ms":1.500,"p99_ms":3.000}
{"name":"api.burst","n":1,"p50_ms":250.000,"p99_ms":250.000}
{"name":"api.idle","requested":1000,"sandboxes":900,"per_sandbox_bytes":2097152}
J
  # shellcheck source=../../bench/report.sh
  source "$SBX_SRC_DIR/bench/report.sh"
  local md
  md=$(report_md)
  rm -f "$RES" "$NOTES"
  grep -qF '| bwrap --unshare-all … `true` (whole process) | 5 | 4.000 | 5.000 | fork+exec | 4.00× |' <<<"$md" ||
    fail "bwrap row: $md"
  grep -q 'cold, p50 vs bwrap | 0.75 × | ≤ 1.0 × | \*\*reached\*\*' <<<"$md" || fail "cold goal: $md"
  grep -q 'from a pool, p50 vs bwrap (no pool: cold value) | 0.75 × | ≤ 0.5 × | \*\*not reached\*\*' <<<"$md" ||
    fail "pool goal: $md"
  grep -q 'fork+exec+wait of `true` | 1.50 × | ≤ 1.3 × | \*\*not reached\*\*' <<<"$md" || fail "exec goal"
  grep -q 'all ready (p50 of 1 rounds) | 250.000 ms | ≤ 300 ms | \*\*reached\*\*' <<<"$md" || fail "burst goal"
  grep -q 'per idle sandbox (900 of 1000 asked) | 2.000 MiB | ≤ 1 MiB | \*\*not reached\*\*' <<<"$md" ||
    fail "idle goal: $md"
  grep -q 'networked .* | – | ≤ 5 ms | not measured' <<<"$md" || fail "net goal"
}

test_report_issue18_docker_column() {
  RES=$(mktemp) NOTES=$(mktemp)
  # shellcheck disable=SC2034 # read by report.sh
  N=1 NFAST=1 BURST=128 BURST_ROUNDS=1 IDLE=1000
  cat >"$RES" <<'J'
{"name":"api.cycle","n":5,"p50_ms":20.000,"p99_ms":30.000}
{"name":"api.cycle.peer","n":5,"p50_ms":10.000,"p99_ms":20.000}
{"name":"api.exec","n":5,"p50_ms":2.000,"p99_ms":3.000}
{"name":"api.exec.peer","n":5,"p50_ms":1.000,"p99_ms":2.000}
{"name":"spawn.docker_run","n":5,"p50_ms":400.000,"p99_ms":450.000}
{"name":"attach.rtt.pipe","n":5,"p50_ms":0.010,"p99_ms":0.020}
{"name":"attach.rtt.libsbx","n":5,"p50_ms":0.040,"p99_ms":0.050}
J
  # shellcheck source=../../bench/report.sh
  source "$SBX_SRC_DIR/bench/report.sh"
  local md
  md=$(report_md)
  rm -f "$RES" "$NOTES"
  grep -qF '| same, cold | 20.000 | bwrap, interleaved, 10.000 | 2.00× | ≤ 1.0× | 400.000 | 0.05× |' <<<"$md" ||
    fail "cold row with Docker: $md"
  # no docker exec measured: the column says so, no ratio
  grep -qF '| exec round trip in a running sandbox | 2.000 | fork+exec, interleaved, 1.000 | 2.00× | ≤ 1.3× | not measured |  |' <<<"$md" ||
    fail "exec row without Docker: $md"
  grep -qF '| attached round trip of a line (libsbx) | 0.040 | local pipes 0.010 | 4.00× |  | not measured |  |' <<<"$md" ||
    fail "attach row: $md"
  ! grep -qF 'pooled |' <<<"$md" || fail "a pooled row without pool results: $md"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
