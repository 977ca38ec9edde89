#!/usr/bin/env bash
# Hostile agents against every grader kind (docs/GRPO.md "Grader kinds"), with scripted policies
# and no model: per kind, one `sbx grpo` run whose tasks are one behaviour each (the task set and
# the policy: tests/e2e/hostile_tasks.py). Agents that read or rewrite the hidden tests, kill,
# trace or write into the grader, plant Python/git/shell startup files, symlink out of the
# workspace, fill the grading sandbox's disk or memory, print NUL bytes or floods, exit with
# codes that look like a platform failure, never finish or leave children behind must score
# exactly what the honest wrong answer scores (0), as scored episodes, never as an
# infrastructure failure; the right answer (the control) scores 1.
source "$(dirname "$0")/grpo_lib.sh"

# hostile_run KIND: the run of one grader kind, then the verdict on every episode.
hostile_run() {
  local kind=$1
  require_root
  grpo_setup
  /usr/bin/python3 "$SBX_SRC_DIR/tests/e2e/hostile_tasks.py" "$T" "$kind" || fail "task set"
  local n
  n=$(($(wc -l <"$T/hostile.jsonl") - 1))
  rm -f "$T/port"
  /usr/bin/python3 "$SBX_SRC_DIR/bench/grpo_fake_server.py" --port-file "$T/port" \
    --delay-ms 0 --answers "$T/answers.json" >"$T/policy.log" 2>&1 &
  TRAINER_PID=$!
  for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
  [ -s "$T/port" ] || fail "the scripted policy did not start"
  TRAINER_URL=http://127.0.0.1:$(cat "$T/port")
  grpo_run --tasks "$T/hostile.jsonl" --out "$T/out" --steps 1 --tasks-per-step "$n" \
    --group-size 1 --max-inflight 8 --no-train --json >"$T/summary.txt" ||
    fail "the run failed: $(cat "$T/summary.txt")"
  cat "$T/summary.txt"
  local rc=0
  /usr/bin/python3 - "$T/out" "$n" "${HOSTILE_WANT:-{\}}" <<'PY' || rc=$?
import json, sys
out, n, override = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
eps = [json.loads(l) for l in open(out + "/step-0001.jsonl")]
summary = json.load(open(out + "/summary.json"))
assert len(eps) == n, (len(eps), n)
bad = []
for e in sorted(eps, key=lambda e: e["task"]):
    status, want = override.get(e["task"], ["scored", 1.0 if e["task"].endswith(".right") else 0.0])
    ok = e["status"] == status and e["reward"] == want
    print(f'{"ok  " if ok else "FAIL"} {e["task"]:28} {e["status"]:24} reward {e["reward"]} '
          f'(want {status} {want}) {e.get("fault") or ""} {(e.get("message") or "")[:100]}')
    if not ok:
        bad.append(e["task"])
    json.dumps(e, ensure_ascii=False)  # every log line is valid JSON text
want_infra = sum(1 for s, _ in override.values() if s != "scored")
assert summary["infrastructure_failures"] == want_infra or bad, summary
if bad:
    print(f"{len(bad)} of {n} behaviours were not scored as they should be: {bad}")
    sys.exit(1)
print(f"all {n} behaviours scored as they should")
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
  return $rc
}

TEST_TIMEOUT_hostile_program=240
test_hostile_program() { hostile_run program; }

TEST_TIMEOUT_hostile_module=240
test_hostile_module() { hostile_run module; }

TEST_TIMEOUT_hostile_expected=240
test_hostile_expected() { hostile_run expected; }

TEST_TIMEOUT_hostile_data=240
test_hostile_data() { hostile_run data; }

# The control of the suite itself: against a grader that imports the agent's module into its
# own process (the anti-pattern docs/GRPO.md warns against), the same agents win: reading or
# rewriting the tests scores 1, exiting 125 from inside the grader becomes an exclusion. The
# honest answers still score 1 and 0.
TEST_TIMEOUT_hostile_naive_control=120
test_hostile_naive_control() {
  HOSTILE_WANT='{"naive.read_tests": ["scored", 1.0], "naive.rewrite_tests": ["scored", 1.0],
                 "naive.fake_platform": ["infrastructure_failure", null]}' hostile_run naive
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
