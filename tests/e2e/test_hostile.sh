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
    if e["task"].endswith(".symlink_out"):  # 6 links leave /workspace: none may enter grading
        ok = ok and e["dropped_symlinks"] == 6
    print(f'{"ok  " if ok else "FAIL"} {e["task"]:28} {e["status"]:24} reward {e["reward"]} '
          f'(want {status} {want}) {e.get("fault") or ""} {e.get("dropped_symlinks") or ""} {(e.get("message") or "")[:100]}')
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

TEST_TIMEOUT_hostile_program=180
test_hostile_program() { hostile_run program; }

TEST_TIMEOUT_hostile_module=180
TEST_PASS_hostile_module=plain # (once: tests/README.md)
test_hostile_module() { hostile_run module; }

TEST_TIMEOUT_hostile_expected=180
TEST_PASS_hostile_expected=plain # (once: tests/README.md)
test_hostile_expected() { hostile_run expected; }

TEST_TIMEOUT_hostile_data=180
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

# Failure attribution in the runner (docs/GRPO.md): the agent's program timing out under
# expected_output scores the task's failure_reward (-0.5 here), scored like any answer; a
# grader that crashes or whose interpreter is missing is the platform's: infrastructure
# failures, counted per task in steps.jsonl and the summary, with a warning for tasks whose
# rate is high. A NUL byte and invalid UTF-8 in the agent's output are only text. An agent
# whose background processes fill its process limit fails its next turn (409 pids_limit): its
# fault, scored.
TEST_TIMEOUT_failure_attribution=90
test_failure_attribution() {
  require_root
  grpo_setup
  local limits='"limits":{"cpu":0.25,"memory":"64Mi","disk":"8Mi","pids":16},"max_completion_tokens":4'
  {
    echo '{"task_set":"attribution@1","split":{"seed":1,"held_out":0}}'
    echo '{"id":"slow","prompt":"[slow]",'"$limits"',"failure_reward":-0.5,"grader":{"command":"sleep 30","timeout":"1s","expected_output":"x"}}'
    echo '{"id":"crash","prompt":"[crash]",'"$limits"',"grader":{"command":"kill -SEGV $$"}}'
    echo '{"id":"nointerp","prompt":"[nointerp]",'"$limits"',"grader":{"files":{"t.xyz":"1"},"command":"no-such-interpreter t.xyz"}}'
    echo '{"id":"binary","prompt":"[binary]",'"$limits"',"grader":{"command":"printf '"'"'\\000\\377x'"'"'; cat /workspace/out","expected_output":"x"}}'
    echo '{"id":"fill","prompt":"[fill]","max_turns":2,"limits":{"cpu":1,"memory":"128Mi","pids":16},"failure_reward":-1,"grader":{"command":"true"}}'
  } >"$T/attr.jsonl"
  printf '%s' '{"[slow]": "true", "[crash]": "true", "[nointerp]": "true", "[binary]": "printf '"'"'\\000\\377\\376 turn'"'"'; printf x > out"}' >"$T/answers.json"
  # [fill]: a background filler fills the process limit, wakes the turn's shell through a fifo
  # (a wait that burns no CPU and takes no process) and, once that shell has exited (its parent
  # changed), takes the slot it frees before turn 2 arrives: it retries fork from the moment the
  # shell is gone, while turn 2 is still a round trip to the policy away
  /usr/bin/python3 - "$T/answers.json" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
filler = """import errno, os, time
def sleeper():
    if os.fork() == 0:
        time.sleep(300)
        os._exit(0)
shell, note = os.getppid(), "full"
try:
    while 1:
        sleeper()
except OSError as e:
    if e.errno != errno.EAGAIN:
        note = "fork failed: %s" % e
with open("full", "w") as f:
    f.write(note + "\\n")
while os.getppid() == shell:
    time.sleep(0.0002)
while 1:
    try:
        sleeper()
        break
    except OSError:
        pass
time.sleep(300)
"""
a["[fill]"] = ("mkfifo full && cat >fill.py <<'EOF'\n" + filler + "EOF\n"
               "python3 fill.py >/dev/null 2>&1 &\nread note <full; echo \"$note\"")
json.dump(a, open(sys.argv[1], "w"))
PY
  /usr/bin/python3 "$SBX_SRC_DIR/bench/grpo_fake_server.py" --port-file "$T/port" \
    --delay-ms 0 --answers "$T/answers.json" >"$T/policy.log" 2>&1 &
  TRAINER_PID=$!
  for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
  [ -s "$T/port" ] || fail "the scripted policy did not start"
  TRAINER_URL=http://127.0.0.1:$(cat "$T/port")
  grpo_run --tasks "$T/attr.jsonl" --out "$T/out" --steps 1 --tasks-per-step 5 --group-size 3 \
    --no-train >"$T/summary.txt" 2>"$T/stderr.txt" || fail "the run failed: $(cat "$T/summary.txt")"
  cat "$T/summary.txt"
  grep -q 'warning: task "crash": 3 of 3 episodes (100%) were infrastructure failures' "$T/summary.txt" ||
    fail "no warning in the summary"
  /usr/bin/python3 - "$T/out" <<'PY'
import json, sys
out = sys.argv[1]
eps = {}
for l in open(out + "/step-0001.jsonl"):
    e = json.loads(l)
    eps.setdefault(e["task"], []).append(e)
for t, es in sorted(eps.items()):
    for e in es:
        print(t, e["status"], e["reward"], e.get("fault"), (e.get("message") or "")[:90])
for e in eps["slow"]:
    assert e["status"] == "scored" and e["reward"] == -0.5 and e["fault"] == "agent", e
for e in eps["crash"] + eps["nointerp"]:
    assert e["status"] == "infrastructure_failure" and e["fault"] == "platform", e
assert all("exit code 127" in e["message"] for e in eps["nointerp"]), eps["nointerp"][0]
for e in eps["fill"]:  # its sleeps fill the process limit: turn 2's 409 pids_limit is the agent's
    assert e["trace"][0]["output"].strip() == "full", e["trace"]  # turn 1 filled it (EAGAIN)
    assert e["status"] == "scored" and e["reward"] == -1 and e["fault"] == "agent", e
    assert "fill its sandbox" in e["message"], e["message"]
for e in eps["binary"]:  # "\0\377x" is not "x": a wrong answer, scored
    assert e["status"] == "scored" and e["reward"] == 0.0 and "fault" not in e, e
    assert "turn" in e["trace"][0]["output"], e["trace"]
step = json.loads(open(out + "/steps.jsonl").readline())
assert step["infrastructure_failures_by_task"] == {
    "crash": {"episodes": 3, "infrastructure_failures": 3},
    "nointerp": {"episodes": 3, "infrastructure_failures": 3}}, step
assert len(step["warnings"]) == 2 and all("3 of 3" in w for w in step["warnings"]), step
s = json.load(open(out + "/summary.json"))
assert s["infrastructure_failures"] == 6 and s["scored"] == 9, s
assert s["tasks"]["slow"] == {"episodes": 3, "infrastructure_failures": 0}, s["tasks"]
assert s["tasks"]["crash"] == {"episodes": 3, "infrastructure_failures": 3}, s["tasks"]
assert len(s["warnings"]) == 2, s["warnings"]
print("attribution, per-task counts and warnings as documented")
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# An agent whose program ends its own sandbox after its last command (gvisor: running out of
# memory ends the whole sandbox oom_killed) is scored with failure_reward as the agent's fault:
# the workspace fetch that the ended sandbox refuses (409) is not an infrastructure failure.
TEST_TIMEOUT_sandbox_ended_by_agent=90
test_sandbox_ended_by_agent() {
  require_root
  command -v runsc >/dev/null || skip "runsc (gVisor) is not installed: apt-get install runsc"
  grpo_setup
  echo '{"task_set":"hog@1","split":{"seed":1,"held_out":0}}' >"$T/hog.jsonl"
  echo '{"id":"hog","prompt":"[hog]","isolation":"gvisor","max_turns":1,"failure_reward":-1,"limits":{"memory":"128Mi"},"grader":{"command":"true"}}' >>"$T/hog.jsonl"
  echo '{"[hog]": "python3 -c \"b = bytearray(1 << 30)\""}' >"$T/answers.json"
  grpo_scripted_trainer "$T/answers.json"
  grpo_run --tasks "$T/hog.jsonl" --out "$T/out" --steps 1 --tasks-per-step 1 --group-size 2 \
    --no-train >"$T/summary.txt" 2>&1 || fail "the run failed: $(cat "$T/summary.txt")"
  /usr/bin/python3 - "$T/out" <<'PY'
import json, sys
for l in open(sys.argv[1] + "/step-0001.jsonl"):
    e = json.loads(l)
    print(e["status"], e["reward"], e.get("fault"), e.get("message"))
    assert e["status"] == "scored" and e["reward"] == -1 and e["fault"] == "agent", e
    assert "ended its sandbox (oom_killed)" in e["message"], e["message"]
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
