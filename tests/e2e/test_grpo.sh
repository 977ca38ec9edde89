#!/usr/bin/env bash
# GRPO end to end: the real sandboxd, real sandboxes (agents and graders), the real reference
# trainer on CPU, driven by `sbx grpo`. Reward rises; injected grader failures are excluded and
# counted; hidden tests stay hidden from the agent; a trainer that dies stops the run cleanly;
# the cost cap stops the run; a host list of two daemons gets episodes on both; the cost
# preview adds up.
source "$(dirname "$0")/grpo_lib.sh"

# The reference loop learns: the demo's run (tests/e2e/grpo_demo.sh: grpo_learn), a policy
# trained from scratch on the toy set's training split. The plain build holds it to the demo's
# bar: at the end (mean of the last 3 steps) a mean reward >= 0.8 and a pass rate >= 70%, after a
# first step near 0, and the held-out split (tasks never trained on) evaluated and reported. The
# sanitizer build (sbx, sandboxd and the shim several times slower) runs the first 12 steps and
# holds them to a rising reward only.
TEST_TIMEOUT_reward_rises=720 # (~3 min on a quiet 2-core machine, 5 on a slow day)
TEST_PASS_reward_rises=plain # ~4.5 min: not again under ASan (tests/README.md)
test_reward_rises() {
  require_root
  grpo_setup
  grpo_start_trainer --seed 1
  local steps=25 strict=1
  if ldd "$SBX_BUILD_DIR/sbx" | grep -q libasan; then steps=12 strict=; fi
  grpo_learn "$T/out" "$steps" --max-inflight 64 >"$T/summary.txt"
  cat "$T/summary.txt"
  local s=$T/out/train/summary.json l=$T/out/learning.json
  local first last
  first=$(json "$s" 'sum(d["reward_curve"][:2]) / 2')
  last=$(json "$s" 'sum(d["reward_curve"][-3:]) / 3')
  echo "mean reward: first 2 steps $first, last 3 steps $last"
  /usr/bin/python3 -c "import sys; f, l = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if l >= f + 0.15 else 1)" \
    "$first" "$last" || fail "the reward did not rise: first $first, last $last"
  if [ -n "$strict" ]; then
    [ "$(json "$l" 'd["last_reward"] >= 0.8 and d["last_pass"] >= 0.7')" == True ] ||
      fail "the demo's bar (last 3 steps: reward >= 0.8, pass >= 70%) not reached: $(cat "$l")"
  fi
  [ "$(json "$l" 'd["held_out_episodes"] == 64 and 0 <= d["held_out_reward"] <= 1')" == True ] ||
    fail "the held-out split was not evaluated: $(cat "$l")"
  grep -q '^held-out split .*mean reward' "$T/summary.txt" || fail "no held-out line in the report"
  assert_eq "$(json "$T/out/held_out/summary.json" 'd["trained"]')" 0 "held-out episodes trained"
  assert_eq "$(json "$s" 'd["stop_reason"]')" completed "stop reason"
  assert_eq "$(json "$s" 'd["steps"]')" "$steps" "steps"
  assert_eq "$(json "$s" 'd["episodes"]')" $((steps * 64)) "episodes"
  [ "$(json "$s" 'd["trained"] > 0 and d["policy_version"] >= 1')" == True ] || fail "nothing trained"
  [ "$(json "$s" 'd["sandbox_cost_usd"] > 0')" == True ] || fail "no sandbox cost counted"
  # every step has its episode log; the picture exists
  assert_eq "$(ls "$T"/out/train/step-*.jsonl | wc -l)" "$steps" "step logs"
  assert_eq "$(wc -l <"$T/out/train/step-$(printf %04d "$steps").jsonl")" 64 \
    "episodes in the last step's log"
  grep -q '<polyline' "$T/out/train/reward.svg" || fail "no reward curve in reward.svg"
  grep -q 'reward curve: .*reward.svg' "$T/summary.txt" || fail "summary lacks the picture's path"
  # the generation server saw batches of concurrent episodes
  local state
  state=$(curl -sf "$TRAINER_URL/v1/state")
  echo "trainer state: $state"
  [ "$(echo "$state" | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["largest_batch"] > 1)')" == True ] ||
    fail "completions were never batched"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# A task set whose graders fail in two ways (a crash, an exit code outside the reward rule),
# plus tasks with working graders; with --fail-graders a fraction of working graders crash too.
write_failing_tasks() {
  local limits='"limits":{"cpu":0.25,"memory":"64Mi","disk":"8Mi","pids":16}'
  {
    echo '{"task_set":"failing@1","split":{"seed":1,"held_out":0}}'
    echo '{"id":"crash","prompt":"task k0",'"$limits"',"max_completion_tokens":4,"grader":{"command":"kill -SEGV $$"}}'
    echo '{"id":"weird","prompt":"task k1",'"$limits"',"max_completion_tokens":4,"grader":{"command":"exit 3"}}'
    for i in 2 3 4 5; do
      echo '{"id":"ok'$i'","prompt":"task k'$i'",'"$limits"',"max_completion_tokens":4,"grader":{"command":"ls /workspace | grep -q txt"}}'
    done
  } >"$T/failing.jsonl"
}

TEST_TIMEOUT_infrastructure_failures=120
test_infrastructure_failures() {
  require_root
  grpo_setup
  grpo_start_trainer --seed 2
  write_failing_tasks
  grpo_run --tasks "$T/failing.jsonl" --out "$T/out" --steps 2 --tasks-per-step 6 \
    --group-size 6 --fail-graders 0.3 --seed 5 --json >"$T/summary.txt"
  cat "$T/summary.txt"
  /usr/bin/python3 - "$T/out" <<'PY'
import glob, json, math, statistics, sys
out = sys.argv[1]
eps = [json.loads(l) for f in sorted(glob.glob(out + "/step-*.jsonl")) for l in open(f)]
summary = json.load(open(out + "/summary.json"))
infra = [e for e in eps if e["status"] == "infrastructure_failure"]
scored = [e for e in eps if e["status"] == "scored"]
print(f"{len(eps)} episodes: {len(scored)} scored, {len(infra)} infrastructure failures")
assert len(eps) == 72, len(eps)
assert len(infra) == summary["infrastructure_failures"], (len(infra), summary)
assert len(scored) == summary["scored"], summary
by_task = {}
for e in infra:
    by_task.setdefault(e["task"], []).append(e)
    assert e["reward"] is None and e["advantage"] is None and not e["trained"], e
    assert "grader failed" in e["message"], e["message"]
# the broken graders always fail, the injected fraction hits some working ones
counts = {k: len(v) for k, v in by_task.items()}
print("infrastructure failures by task:", counts)
assert counts.get("crash") == 12 and counts.get("weird") == 12, counts
injected = [e for e in infra if e["task"].startswith("ok")]
assert 0 < len(injected) < 48, len(injected)
assert all("signal" in e["message"] for e in by_task["crash"]), by_task["crash"][0]["message"]
# (an injected crash may hit the "weird" task too)
assert all("exit code 3" in e["message"] or "signal" in e["message"] for e in by_task["weird"])
assert any("exit code 3" in e["message"] for e in by_task["weird"])
# group statistics exclude the failures: recompute every group's advantages from scored only
groups = {}
for e in eps:
    groups.setdefault((e["step"], e["group"]), []).append(e)
for key, g in groups.items():
    valid = [e for e in g if e["status"] == "scored"]
    rs = [e["reward"] for e in valid]
    trains = len(rs) >= 2 and len(set(rs)) > 1
    for e in valid:
        assert e["trained"] == trains, (key, rs, e)
        if trains:
            want = (e["reward"] - statistics.mean(rs)) / (statistics.stdev(rs) + 1e-6)
            assert math.isclose(e["advantage"], want, abs_tol=1e-9), (key, e["advantage"], want)
        else:
            assert e["advantage"] == 0, e
# pass rate: over scored episodes only
passes = sum(1 for e in scored if e["reward"] >= 1)
assert math.isclose(summary["pass_rate"], passes / len(scored)), (summary["pass_rate"], passes)
trained = sum(1 for e in eps if e["trained"])
assert trained == summary["trained"], (trained, summary["trained"])
print("failures excluded from statistics, training and pass rate; counted:", len(infra))
PY
  # the trainer got exactly the trained episodes, and no failed one
  grep -q "episodes" "$T/trainer.log" || true
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# The hidden-test guarantee with a scripted (cheating) agent: it looks for the tests in its own
# sandbox, then leaves a solve.sh that dumps every file and /proc entry it can reach when the
# grader runs it. The protected grader runs it with sbx-as-agent (as the agent user, outside
# the grader's tree: docs/GRPO.md "Grading sandboxes"); the naive control runs it as a
# subprocess of its own, as the grader user, so the same cheat wins there.
write_secret_tasks() {
  cat >"$T/protected.py" <<'PY'
import subprocess, sys
SECRET = "SECRET-q8z1x7"
out = subprocess.run(["sbx-as-agent", "--timeout", "20", "--", "sh", "/workspace/solve.sh"],
                     capture_output=True, stdin=subprocess.DEVNULL).stdout
sys.exit(0 if SECRET.encode() in out else 1)
PY
  cat >"$T/naive.py" <<'PY'
import subprocess, sys
SECRET = "SECRET-q8z1x7"
out = subprocess.run(["sh", "/workspace/solve.sh"], capture_output=True, timeout=20,
                     stdin=subprocess.DEVNULL, cwd="/workspace").stdout
sys.exit(0 if SECRET.encode() in out else 1)
PY
  /usr/bin/python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
print(json.dumps({"task_set": "secret@1", "split": {"seed": 0, "held_out": 0}}))
for name in ("protected", "naive"):
    print(json.dumps({"id": name, "prompt": "task k0", "max_turns": 3, "max_completion_tokens": 64,
                      "limits": {"cpu": 0.5, "memory": "256Mi", "disk": "16Mi", "pids": 32},
                      "grader": {"files": {"test.py": open(f"{t}/{name}.py").read()},
                                 "command": "python3 test.py", "timeout": "30s"}}))
PY
}

TEST_TIMEOUT_hidden_tests_stay_hidden=90
test_hidden_tests_stay_hidden() {
  require_root
  grpo_setup
  write_secret_tasks >"$T/secret.jsonl"
  cat >"$T/script.txt" <<'EOF2'
cat /tmp/grader/test.py /grader/test.py
echo 'cat /grader/* /tmp/grader/* /tmp/grader/.* /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null; grep -r -a -h SECRET /tmp /proc/[0-9]*/fd 2>/dev/null' > solve.sh
EOF2
  grpo_start_trainer --scripted "$T/script.txt"
  grpo_run --tasks "$T/secret.jsonl" --out "$T/out" --steps 1 --tasks-per-step 2 \
    --group-size 2 --no-train --json
  /usr/bin/python3 - "$T/out/step-0001.jsonl" <<'PY'
import json, sys
eps = [json.loads(l) for l in open(sys.argv[1])]
for e in eps:
    print(e["task"], e["status"], e["reward"], e["trace"][0]["output"].strip()[:120])
    assert e["status"] == "scored", e
    assert "No such file" in e["trace"][0]["output"], e["trace"][0]
    assert "q8z1x7" not in json.dumps(e["trace"]), e["trace"]
    assert len(e["trace"]) == 2 and e["stop"] == "policy_stopped", e
rewards = {e["task"]: e["reward"] for e in eps}
assert rewards == {"protected": 0.0, "naive": 1.0}, rewards
print("the cheat wins only against the naive grader")
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# images: a task set's "image" names an image of the node's store (the agent's commands and
# the grader both see its files).
TEST_TIMEOUT_image_task=120
test_image_task() {
  require_root
  grpo_setup
  python3 "$SBX_SRC_DIR/tests/integration/mkimage.py" oci "$T/img.tar" || fail "mkimage"
  grpo_api "/v1/images?name=task-env:v1" -X POST --data-binary @"$T/img.tar" >/dev/null || fail "import"
  /usr/bin/python3 - >"$T/img.jsonl" <<'PY'
import json
print(json.dumps({"task_set": "img@1", "split": {"seed": 0, "held_out": 0}}))
print(json.dumps({"id": "i0", "prompt": "copy", "image": "task-env:v1", "max_turns": 1,
                  "max_completion_tokens": 64,
                  "limits": {"cpu": 0.5, "memory": "256Mi", "disk": "16Mi", "pids": 32},
                  "grader": {"files": {"test.sh": "read a < /etc/base.txt; read b < /workspace/out.txt; test \"$a $b\" = 'changed changed'\n"},
                             "command": "sh test.sh", "timeout": "30s"}}))
PY
  echo 'cat /etc/base.txt > /workspace/out.txt; cat /app/README' >"$T/script.txt"
  grpo_start_trainer --scripted "$T/script.txt"
  grpo_run --tasks "$T/img.jsonl" --out "$T/out" --steps 1 --tasks-per-step 1 --group-size 2 \
    --no-train --json
  /usr/bin/python3 - "$T/out/step-0001.jsonl" <<'PY'
import json, sys
eps = [json.loads(l) for l in open(sys.argv[1])]
for e in eps:
    assert e["status"] == "scored" and e["reward"] == 1.0, e
    assert "app" in e["trace"][0]["output"], e["trace"][0]
print("episodes ran in the store image")
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

TEST_TIMEOUT_trainer_goes_away=120
test_trainer_goes_away() {
  require_root
  grpo_setup
  grpo_start_trainer
  "$SBX_BUILD_DIR/sbx" grpo --host "$SOCK" --trainer "$TRAINER_URL" \
    --tasks "$SBX_SRC_DIR/tasks/toy-files.jsonl" --out "$T/out" --steps 1000 \
    --tasks-per-step 4 --group-size 4 --trainer-retries 2 >"$T/stdout" 2>"$T/stderr" &
  GRPO_RUNNER_PID=$!
  for _ in $(seq 600); do
    [ -s "$T/out/steps.jsonl" ] && break
    sleep 0.1
  done
  [ -s "$T/out/steps.jsonl" ] || fail "no step finished"
  kill -9 "$TRAINER_PID"
  wait "$TRAINER_PID" 2>/dev/null || true
  TRAINER_PID=
  local rc=0
  for _ in $(seq 300); do
    kill -0 "$GRPO_RUNNER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$GRPO_RUNNER_PID" 2>/dev/null && fail "the run did not stop after the trainer died"
  wait "$GRPO_RUNNER_PID" || rc=$?
  GRPO_RUNNER_PID=
  cat "$T/stdout"
  tail -n 3 "$T/stderr"
  [ "$rc" -ne 0 ] || fail "exit status 0 after the trainer died"
  grep -q "sbx grpo: error: trainer http://127.0.0.1:.* failed after 3 attempts" "$T/stderr" ||
    fail "no clear message"
  assert_eq "$(json "$T/out/summary.json" 'd["stop_reason"]')" trainer_failed "stop reason"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

TEST_TIMEOUT_cost_cap=90
test_cost_cap() {
  require_root
  grpo_setup
  grpo_start_trainer
  # a GPU price makes time count: $36/h is a cent per second, so a 2-cent cap stops in seconds
  grpo_run --tasks "$SBX_SRC_DIR/tasks/toy-files.jsonl" --out "$T/out" --steps 500 \
    --tasks-per-step 2 --group-size 4 --gpu-hour-usd 36 --max-cost-usd 0.02 >"$T/summary.txt"
  cat "$T/summary.txt"
  assert_eq "$(json "$T/out/summary.json" 'd["stop_reason"]')" max_cost_usd "stop reason"
  [ "$(json "$T/out/summary.json" '0.02 <= d["cost_usd"] and 0 < d["steps"] < 500')" == True ] ||
    fail "the cap did not stop the run"
  # it stopped in the step that crossed the cap: every step before the last ended under it
  /usr/bin/python3 - "$T/out/steps.jsonl" <<'PY' || fail "the run went on past the cap"
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
assert steps and all(s["cost_usd"] < 0.02 for s in steps[:-1]), [s["cost_usd"] for s in steps]
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# One run, a host list of two daemons: libsbx places each group's template (and each grader) by
# free capacity, so episodes run on both; every episode is scored and nothing is left running.
TEST_TIMEOUT_two_daemons=120
TEST_PASS_two_daemons=plain # (once: tests/README.md)
test_two_daemons() {
  require_root
  grpo_setup
  grpo_start_daemon 2
  grpo_start_trainer --seed 1
  "$SBX_BUILD_DIR/sbx" grpo --host "$SOCK,unix:$SOCK2" --trainer "$TRAINER_URL" \
    --tasks "$SBX_SRC_DIR/tasks/toy-files.jsonl" --out "$T/out" --steps 2 --tasks-per-step 4 \
    --group-size 4 --seed 3 --json >"$T/summary.txt"
  cat "$T/summary.txt"
  assert_eq "$(json "$T/out/summary.json" 'd["stop_reason"]')" completed "stop reason"
  assert_eq "$(json "$T/out/summary.json" 'd["scored"]')" 32 "scored episodes"
  local agents1 agents2 graders1 graders2
  count() { SOCK=$1 grpo_api "/v1/sandboxes?label=grpo_role=$2" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
  agents1=$(count "$SOCK" agent) agents2=$(count "$SOCK2" agent)
  graders1=$(count "$SOCK" grader) graders2=$(count "$SOCK2" grader)
  echo "agents: $agents1 + $agents2, graders: $graders1 + $graders2"
  assert_eq $((agents1 + agents2)) 32 "agent sandboxes over both daemons"
  assert_eq $((graders1 + graders2)) 32 "grading sandboxes over both daemons"
  [ "$agents1" -gt 0 ] && [ "$agents2" -gt 0 ] || fail "episodes ran on one daemon only"
  [ "$graders1" -gt 0 ] && [ "$graders2" -gt 0 ] || fail "graders ran on one daemon only"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running on the first daemon"
  assert_eq "$(SOCK=$SOCK2 grpo_running_sandboxes)" 0 "sandboxes left running on the second"
}

# A run that stops before a group's episodes all started (the cap, one episode at a time) still
# ends the group's template sandbox.
TEST_TIMEOUT_stop_releases_templates=90
test_stop_releases_templates() {
  require_root
  grpo_setup
  grpo_start_trainer
  grpo_run --tasks "$SBX_SRC_DIR/tasks/toy-files.jsonl" --out "$T/out" --steps 5 \
    --tasks-per-step 1 --group-size 4 --max-inflight 1 --gpu-hour-usd 36000 --max-cost-usd 0.5 \
    >"$T/summary.txt"
  assert_eq "$(json "$T/out/summary.json" 'd["stop_reason"], d["episodes"]')" "max_cost_usd 1" \
    "stop reason, episodes"
  assert_eq "$(grpo_api '/v1/sandboxes?label=grpo_role=template' | /usr/bin/python3 -c '
import json, sys
print(sum(1 for s in json.load(sys.stdin)))')" 1 "templates made"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# When the cost cap stops a group before all its episodes started, its template sandbox is
# released at once and its cost counted: summary.json's sandbox cost is what the daemon billed
# for every sandbox of the run (the agents', the graders' and the template's).
TEST_TIMEOUT_cost_cap_counts_templates=60
test_cost_cap_counts_templates() {
  require_root
  grpo_setup
  {
    echo '{"task_set":"cap@1","split":{"seed":1,"held_out":0}}'
    echo '{"id":"c","prompt":"task c","limits":{"cpu":0.25,"memory":"64Mi","disk":"8Mi","pids":16},"max_completion_tokens":4,"grader":{"command":"true"}}'
  } >"$T/tasks.jsonl"
  echo '{}' >"$T/answers.json"
  grpo_scripted_trainer "$T/answers.json"
  grpo_run --tasks "$T/tasks.jsonl" --out "$T/out" --steps 3 --tasks-per-step 1 --group-size 4 \
    --max-inflight 1 --max-cost-usd 1e-9 >"$T/summary.txt" || fail "the run failed"
  grpo_api /v1/sandboxes >"$T/sandboxes.json"
  /usr/bin/python3 - "$T/out/summary.json" "$T/sandboxes.json" <<'PY'
import json, sys
s, sbs = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
roles = sorted(b.get("labels", {}).get("grpo_role", "?") for b in sbs)
billed = sum(b["cost_usd"] for b in sbs)
print("summary", s["sandbox_cost_usd"], "daemon", billed, roles)
assert s["stop_reason"] == "max_cost_usd" and s["episodes"] == 1, s
assert roles == ["agent", "grader", "template"] and billed > 0, roles
assert abs(s["sandbox_cost_usd"] - billed) <= 1e-6 * billed, (s["sandbox_cost_usd"], billed)
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

test_cost_preview() {
  local out
  out=$("$SBX_BUILD_DIR/sbx" grpo --preview --steps 100 --step-seconds 36 --gpus 8 \
    --gpu-hour-usd 2.5 --sandboxes 128 --sandbox-hour-usd 0.0179)
  echo "$out"
  # 1 hour: GPU 8 x 2.5 = $20, sandboxes 128 x 0.0179 = $2.2912, share 10.28%
  grep -q 'GPU: .*= \$20.0000' <<<"$out" || fail "GPU cost"
  grep -q 'sandboxes: .*= \$2.2912' <<<"$out" || fail "sandbox cost"
  grep -q 'total: *\$22.2912 *(sandbox share 10.3%)' <<<"$out" || fail "total"
  "$SBX_BUILD_DIR/sbx" grpo --preview --steps x 2>/dev/null && fail "bad --steps accepted"
  return 0
}

TEST_TIMEOUT_cost_preview_measure=90
test_cost_preview_measure() {
  require_root
  grpo_setup
  grpo_start_trainer
  local out
  out=$(grpo_run --preview --measure 4 --tasks "$SBX_SRC_DIR/tasks/toy-files.jsonl" \
    --out "$T/out" --steps 10 --gpu-hour-usd 2)
  echo "$out"
  grep -q '^measured: 4 episodes in' <<<"$out" || fail "no measurement"
  grep -q 'total:' <<<"$out" || fail "no total"
  assert_eq "$(wc -l <"$T/out/measure/step-0001.jsonl")" 4 "measured episodes"
}

# The Python coding task set (tasks/python-funcs.jsonl) end to end with a scripted policy
# (bench/grpo_fake_server.py --answers): right solutions score 1 on every task, plausible wrong
# ones (off-by-one, a missed case, an endless loop) score 0, as scored episodes, never as
# infrastructure failures.
TEST_TIMEOUT_python_funcs_scripted=240 TEST_PASS_python_funcs_scripted=plain
test_python_funcs_scripted() {
  require_root
  grpo_setup
  local which want
  for which in right wrong; do
    /usr/bin/python3 "$SBX_SRC_DIR/tests/e2e/python_funcs_solutions.py" "$which" >"$T/$which.json"
    rm -f "$T/port.$which"
    /usr/bin/python3 "$SBX_SRC_DIR/bench/grpo_fake_server.py" --port-file "$T/port.$which" \
      --delay-ms 0 --answers "$T/$which.json" &
    TRAINER_PID=$!
    for _ in $(seq 100); do [ -s "$T/port.$which" ] && break; sleep 0.1; done
    [ -s "$T/port.$which" ] || fail "the scripted server did not start"
    TRAINER_URL=http://127.0.0.1:$(cat "$T/port.$which")
    grpo_run --tasks "$SBX_SRC_DIR/tasks/python-funcs.jsonl" --out "$T/$which" --steps 1 \
      --tasks-per-step 6 --group-size 2 --no-train --json >"$T/$which.txt"
    cat "$T/$which.txt"
    kill "$TRAINER_PID"
    wait "$TRAINER_PID" 2>/dev/null || true
    TRAINER_PID=
    want=1.0
    [ "$which" == wrong ] && want=0.0
    /usr/bin/python3 - "$T/$which/step-0001.jsonl" "$want" <<'PY'
import json, sys
eps = [json.loads(l) for l in open(sys.argv[1])]
want = float(sys.argv[2])
for e in eps:
    print(e["task"], e["status"], e["reward"], (e.get("message") or "")[:80])
assert sorted(set(e["task"] for e in eps)) == ["fizzbuzz", "flatten", "median", "palindrome",
                                               "roman", "word_count"], eps
assert len(eps) == 12, len(eps)
bad = [e for e in eps if e["status"] != "scored" or e["reward"] != want]
assert not bad, bad
PY
  done
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
