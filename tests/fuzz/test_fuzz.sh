#!/usr/bin/env bash
# Short libFuzzer runs in CI: one case per target in tests/fuzz/fuzz_<name>.c. Each case builds
# the fuzzers (`make fuzz-build`, clang with ASan+UBSan, into build-fuzz/), replays the seed
# corpus tests/fuzz/corpus/<name>, then fuzzes for $SBX_FUZZ_SECONDS (default 10) seconds. The
# fuzzers are the same binaries in both of CI's passes: they run in the plain one only.
# Any crash, sanitizer report, leak, timeout (>10 s per input) or broken invariant fails the case;
# the reproducer is printed as base64. The long runs are `make fuzz-run` (docs/RELIABILITY.md).

fuzz() {
  local name=$1 dir
  command -v "${FUZZ_CC:-clang}" >/dev/null || skip "clang is needed (tests/deps.sh installs it)"
  make -s -C "$SBX_SRC_DIR" fuzz-build >/tmp/sbx-fuzz-build.$$ 2>&1 || { cat /tmp/sbx-fuzz-build.$$; rm -f /tmp/sbx-fuzz-build.$$; fail "make fuzz-build"; }
  rm -f /tmp/sbx-fuzz-build.$$
  local exe="$SBX_SRC_DIR/build-fuzz/fuzz_$name" seeds="$SBX_SRC_DIR/tests/fuzz/corpus/$name"
  [ -x "$exe" ] || fail "$exe was not built"
  [ -n "$(ls -A "$seeds")" ] || fail "no seed corpus in $seeds"
  dir=$(mktemp -d /tmp/sbx-fuzz-$name.XXXXXX)
  trap "rm -rf '$dir'" EXIT
  mkdir "$dir/corpus"
  local rc=0 secs=${SBX_FUZZ_SECONDS:-10}
  # the fuzzers themselves must not leak; ASAN_OPTIONS from tests/run are fine for them
  (cd "$dir" && "$exe" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$dir/" "$dir/corpus" "$seeds") \
    >"$dir/log" 2>&1 || rc=$?
  grep -E '^#[0-9]+ +DONE|stat::number_of_executed_units|Done [0-9]+ runs' "$dir/log" || true
  if [ $rc != 0 ]; then
    for a in "$dir"/crash-* "$dir"/leak-* "$dir"/timeout-* "$dir"/oom-*; do
      [ -f "$a" ] && { echo "reproducer $(basename "$a") (base64):" >&2; head -c 2048 "$a" | base64 -w0 >&2; echo >&2; }
    done
    grep -vE '^#[0-9]+ +(NEW|REDUCE|pulse|RELOAD)' "$dir/log" | grep -v '^MS:' | tail -n 40 >&2
    fail "fuzz_$name failed (rc=$rc)"
  fi
  grep -q 'Done [0-9]* runs' "$dir/log" || fail "fuzz_$name did not complete its run"
}

TEST_TIMEOUT_limits=300 TEST_PASS_limits=plain
test_limits() { fuzz limits; }
TEST_TIMEOUT_seccomp=300 TEST_PASS_seccomp=plain
test_seccomp() { fuzz seccomp; }
TEST_TIMEOUT_egress=300 TEST_PASS_egress=plain
test_egress() { fuzz egress; }
TEST_TIMEOUT_shimproto=300 TEST_PASS_shimproto=plain
test_shimproto() { fuzz shimproto; }
TEST_TIMEOUT_layer=300 TEST_PASS_layer=plain
test_layer() { fuzz layer; }
TEST_TIMEOUT_tar=300 TEST_PASS_tar=plain
test_tar() { fuzz tar; }
TEST_TIMEOUT_spec=300 TEST_PASS_spec=plain
test_spec() { fuzz spec; }
TEST_TIMEOUT_grpo_tasks=300 TEST_PASS_grpo_tasks=plain
test_grpo_tasks() { fuzz grpo_tasks; }
TEST_TIMEOUT_grpo_verl=300 TEST_PASS_grpo_verl=plain
test_grpo_verl() { fuzz grpo_verl; }
TEST_TIMEOUT_ws=300 TEST_PASS_ws=plain
test_ws() { fuzz ws; }

source "$(dirname "$0")/../lib/lib.sh" "$@"
