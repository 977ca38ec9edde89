#!/usr/bin/env bash
# verl through `sbx grpo` with a real daemon (docs/GRPO.md "verl datasets"): a verl dataset's rows
# as tasks (the chat prompt tokenized, the completion text scored by /grader/sbx_verl.py as
# solution_str; built-ins by data_source, a --reward-fn file unchanged), the reward failure rule
# end to end (past --reward-timeout: 0, scored; the scorer OOM-killed under the grading sandbox's
# memory limit: infrastructure), bad input refused before any sandbox (a malformed row named, a
# Parquet file, a missing reward file, one without compute_score). verl_rewards: the task-file form
# (a task whose grader runs sbx_verl.py on answer.txt written by a scripted agent).
# The policy is bench/grpo_fake_server.py --answers: prompt substring -> completion text.

source "$(dirname "$0")/grpo_lib.sh"

# verl_server ANSWERS_JSON: the scripted policy on TRAINER_URL (stopped at exit)
verl_server() {
  printf '%s' "$1" >"$T/answers.json"
  grpo_scripted_trainer "$T/answers.json"
}

# verl_episodes STEP_LOG: "task status reward message" per episode, sorted by task
verl_episodes() {
  /usr/bin/python3 -c '
import json, sys
for e in sorted(map(json.loads, open(sys.argv[1])), key=lambda e: e["task"]):
    print(e["task"], e["status"], e["reward"], (e.get("message") or "")[:160])' "$1"
}

# A verl dataset as a task set: built-in scorers by data_source (gsm8k right and wrong, MATH with
# a system message), the train/held-out split from extra_info.split, then the same rows scored by
# a --reward-fn file that gets (data_source, solution_str, ground_truth, extra_info) exactly as
# the row and the completion have them, and returns an exact fraction.
TEST_TIMEOUT_verl_dataset=120
test_verl_dataset() {
  require_root
  grpo_setup
  cat >"$T/data.jsonl" <<'ROWS'
{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q-right Natalia sold 48 clips and 24 more. How many? Let's think step by step and output the final answer after \"####\"."}], "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"}, "extra_info": {"split": "train", "index": 0, "k": 1}}

{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q-wrong How many?"}], "ability": "math", "reward_model": {"style": "rule", "ground_truth": "72"}, "extra_info": {"split": "train", "index": 1}}
{"data_source": "lighteval/MATH", "prompt": [{"role": "system", "content": "Put the answer in \\boxed{}."}, {"role": "user", "content": "q-boxed 1+2?"}], "reward_model": {"ground_truth": "3"}, "extra_info": {"split": "test", "index": 2}}
ROWS
  verl_server '{"q-right": "48+24 = 72 #### 72", "q-wrong": "#### 71", "q-boxed": "so \\boxed{3}"}'
  grpo_run --tasks "$T/data.jsonl" --out "$T/train" --steps 1 --tasks-per-step 2 --group-size 2 \
    --json >"$T/run.txt" || fail "the train run failed: $(cat "$T/run.txt")"
  grpo_run --tasks "$T/data.jsonl" --split held_out --no-train --out "$T/held" --steps 1 \
    --tasks-per-step 1 --group-size 1 --json >"$T/run2.txt" || fail "the held-out run failed"
  local got
  got=$(verl_episodes "$T/train/step-0001.jsonl"; verl_episodes "$T/held/step-0001.jsonl")
  echo "$got"
  assert_eq "$(echo "$got" | awk '{print $1, $2, $3}' | uniq | tr '\n' ';')" \
    "data.jsonl:1 scored 1.0;data.jsonl:3 scored 0.0;data.jsonl:4 scored 1.0;" "built-in scores"
  /usr/bin/python3 - "$T/train/step-0001.jsonl" <<'PY'
import json, sys
for e in map(json.loads, open(sys.argv[1])):
    # one completion, graded on its text: no command ran in an agent sandbox
    assert e["turns"] == 1 and e["durations"]["execute"] == 0, e
    assert list(e["trace"][0]) == ["completion"], e["trace"]
PY
  # the same rows scored by the user's compute_score, unchanged
  cat >"$T/reward.py" <<'PY'
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if (data_source, solution_str, ground_truth) == ("openai/gsm8k", "48+24 = 72 #### 72", "72") \
            and extra_info == {"split": "train", "index": 0, "k": 1}:
        return {"score": 0.375, "acc": True}
    return 0.125
PY
  grpo_run --tasks "$T/data.jsonl" --reward-fn "$T/reward.py" --out "$T/mine" --steps 1 \
    --tasks-per-step 2 --group-size 1 --no-train --json >"$T/run3.txt" ||
    fail "the --reward-fn run failed"
  got=$(verl_episodes "$T/mine/step-0001.jsonl")
  echo "$got"
  assert_eq "$(echo "$got" | awk '{print $1, $2, $3}' | tr '\n' ';')" \
    "data.jsonl:1 scored 0.375;data.jsonl:3 scored 0.125;" "compute_score's exact scores"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left"
}

# The reference trainer (trainer/server.py, torch) on verl rows: the chat prompt through its
# /tokenize chat form, the sampled completion graded by a compute_score that rewards the word
# "red" in it, and groups with differing rewards sent to /v1/train_step (the policy version moves).
TEST_TIMEOUT_verl_reference_trainer=180
TEST_PASS_verl_reference_trainer=plain # (once: tests/README.md)
test_verl_reference_trainer() {
  require_root
  grpo_setup
  grpo_start_trainer --seed 1
  local i
  for i in 1 2; do
    printf '{"data_source": "toy", "prompt": [{"role": "system", "content": "write a word"}, {"role": "user", "content": "put red in a.txt"}], "reward_model": {"ground_truth": "red"}, "extra_info": {"index": %s}}\n' "$i"
  done >"$T/data.jsonl"
  cat >"$T/reward.py" <<'PY'
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    return 1.0 if ground_truth in solution_str.split() else 0.0
PY
  grpo_run --tasks "$T/data.jsonl" --reward-fn "$T/reward.py" --max-completion-tokens 6 \
    --out "$T/out" --steps 2 --tasks-per-step 2 --group-size 8 --seed 1 --json >"$T/run.txt" ||
    fail "the run failed: $(cat "$T/run.txt")"
  cat "$T/run.txt"
  /usr/bin/python3 - "$T/out" <<'PY'
import glob, json, sys
eps = [json.loads(l) for p in glob.glob(sys.argv[1] + "/step-*.jsonl") for l in open(p)]
assert len(eps) == 32 and all(e["status"] == "scored" for e in eps), [e.get("message") for e in eps]
assert all(e["completion_tokens"] <= 6 and list(e["trace"][0]) == ["completion"] for e in eps)
# the score is the reward file's: 1 exactly when the completion holds the word
assert all(e["reward"] == (1.0 if "red" in e["trace"][0]["completion"].split() else 0.0) for e in eps)
s = json.load(open(sys.argv[1] + "/summary.json"))
print("rewards", sorted(e["reward"] for e in eps), "trained", s["trained"], "version", s["policy_version"])
assert s["trained"] > 0 and s["policy_version"] >= 1, s
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left"
}

# The failure rule of docs/GRPO.md, end to end: a compute_score past --reward-timeout is killed
# and scores 0 (the model's output made it slow: scored, trained on); one raising on the output
# scores 0; one the kernel's OOM killer ends (the grading sandbox's memory limit, 2 GiB by
# default: the platform's doing) is an infrastructure failure, excluded. The OOM row runs on its
# own with a long budget (filling 2 GiB takes seconds on a busy machine).
TEST_TIMEOUT_verl_reward_rule=150
test_verl_reward_rule() {
  require_root
  grpo_setup
  local i
  for i in slow raise fine oom; do
    printf '{"data_source": "mine", "prompt": [{"role": "user", "content": "q-%s"}], "reward_model": {"ground_truth": "%s"}}\n' "$i" "$i"
  done >"$T/data.jsonl"
  head -3 "$T/data.jsonl" >"$T/three.jsonl"
  tail -1 "$T/data.jsonl" >"$T/oom.jsonl"
  cat >"$T/reward.py" <<'PY'
import time
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if ground_truth == "slow":
        time.sleep(60)
    if ground_truth == "raise":
        raise ValueError("cannot parse " + solution_str)
    if ground_truth == "oom":
        hog = []
        while True:
            hog.append(bytearray(64 << 20))
    return 1.0
PY
  verl_server '{"q-": "an answer"}'
  grpo_run --tasks "$T/three.jsonl" --reward-fn "$T/reward.py" --reward-timeout 1 --out "$T/out" \
    --steps 1 --tasks-per-step 3 --group-size 1 --no-train --json >"$T/run.txt" || true
  grpo_run --tasks "$T/oom.jsonl" --reward-fn "$T/reward.py" --reward-timeout 100 --out "$T/oom" \
    --steps 1 --tasks-per-step 1 --group-size 1 --no-train --json >"$T/run2.txt" || true
  local got
  got=$(verl_episodes "$T/out/step-0001.jsonl"; verl_episodes "$T/oom/step-0001.jsonl")
  echo "$got"
  echo "$got" | grep -q '^three.jsonl:1 scored 0.0 (reward function timed out after 1s)' ||
    fail "past the timeout: not a scored 0"
  echo "$got" | grep -q '^three.jsonl:2 scored 0.0 (reward function raised ValueError: cannot parse an answer)' ||
    fail "raising: not a scored 0"
  echo "$got" | grep -q '^three.jsonl:3 scored 1.0' || fail "the fine row"
  echo "$got" | grep -q '^oom.jsonl:1 infrastructure_failure None grader failed: exit code 125 (the platform could not run it): scoring process died (exit -9)' ||
    fail "OOM-killed scorer: not an infrastructure failure"
  assert_eq "$(json "$T/out/summary.json" 'd["infrastructure_failures"]')" 0 "infra, timeout/raise"
  assert_eq "$(json "$T/oom/summary.json" 'd["infrastructure_failures"]')" 1 "infra, OOM"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left"
}

# Bad input is refused at load, before any sandbox, naming the file, line and field; the daemon
# and the runner are fine after it (a good run follows).
TEST_TIMEOUT_verl_bad_input=90
test_verl_bad_input() {
  require_root
  grpo_setup
  verl_server '{"q-": "#### 72"}'
  local good='{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q-a"}], "reward_model": {"style": "rule", "ground_truth": "72"}}'
  printf '%s\n%s\n' "$good" '{"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "q-b"}], "reward_model": {"style": "rule"}}' >"$T/bad.jsonl"
  printf 'PAR1\x15\x04\x15' >"$T/train.parquet"
  printf 'def score(a, b):\n    return 0\n' >"$T/nofn.py"
  printf '%s\n' "$good" >"$T/good.jsonl"
  bad() { # WANT, sbx grpo args...
    local rc=0
    grpo_run --out "$T/bad" --steps 1 --tasks-per-step 1 --group-size 1 "${@:2}" >"$T/o.txt" 2>&1 || rc=$?
    cat "$T/o.txt"
    [ "$rc" -ne 0 ] || fail "accepted: ${*:2}"
    [ "$rc" -lt 128 ] || fail "the runner crashed (rc $rc): ${*:2}"
    grep -qF -- "$1" "$T/o.txt" || fail "the error lacks '$1'"
  }
  bad "bad.jsonl:2: reward_model.ground_truth: missing" --tasks "$T/bad.jsonl"
  bad "train.parquet: a Parquet file: sbx grpo reads verl datasets as JSONL (Debian 12 packages neither pyarrow nor fastparquet)" --tasks "$T/train.parquet"
  bad "to_json('data.jsonl', orient='records', lines=True)" --tasks "$T/train.parquet"
  bad "--reward-fn $T/missing.py: cannot read it: No such file or directory" --tasks "$T/good.jsonl" --reward-fn "$T/missing.py"
  bad "--reward-fn $T/nofn.py: no compute_score in it" --tasks "$T/good.jsonl" --reward-fn "$T/nofn.py"
  bad "--reward-timeout: bad value" --tasks "$T/good.jsonl" --reward-timeout 0
  [ ! -e "$T/bad/step-0001.jsonl" ] || fail "a refused run ran episodes"
  assert_eq "$(grpo_api /v1/sandboxes | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" 0 \
    "sandboxes made by refused runs"
  grpo_run --tasks "$T/good.jsonl" --out "$T/ok" --steps 1 --tasks-per-step 1 --group-size 1 \
    --no-train --json >/dev/null || fail "a good run after the bad ones"
  assert_eq "$(verl_episodes "$T/ok/step-0001.jsonl" | awk '{print $2, $3}')" "scored 1.0" "the good run"
}

TEST_TIMEOUT_verl_rewards=120
test_verl_rewards() {
  require_root
  grpo_setup
  /usr/bin/python3 - "$T" <<'PY'
import json, sys
t = sys.argv[1]
ex = {str(k): k / 10 for k in range(11)}
row = lambda ds, gt: json.dumps({"data_source": ds, "reward_model": {"style": "rule", "ground_truth": gt}, "extra_info": {}})
raising = "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    raise ValueError('bad output')\n"
def task(i, prompt, files, extra, reward=ex):  # the exit-code rule, or "score" (exact)
    return {"id": i, "prompt": prompt, "max_turns": 1, "max_completion_tokens": 4,
            "command_timeout": "5s", "grader": {"files": files, "timeout": "20s",
            "reward": reward if reward == "score" else {"exit_codes": reward},
            "command": "python3 sbx_verl.py row.json /workspace/answer.txt" + extra}}
lines = [{"task_set": "verl-e2e@1", "split": {"seed": 1, "held_out": 0}},
         task("gsm", "verl gsm", {"row.json": row("openai/gsm8k", "72")}, "", "score"),
         task("raise", "verl raise", {"row.json": row("mine", "1"), "r.py": raising}, " r.py"),
         task("nofn", "verl nofn", {"row.json": row("mine", "1"), "r.py": "x = 1\n"}, " r.py")]
open(t + "/tasks.jsonl", "w").write("".join(json.dumps(l) + "\n" for l in lines))
cmd = "printf '48+24 #### 72' > answer.txt"
json.dump({"verl gsm": cmd, "verl raise": cmd, "verl nofn": cmd}, open(t + "/answers.json", "w"))
PY
  verl_server "$(cat "$T/answers.json")"
  grpo_run --tasks "$T/tasks.jsonl" --out "$T/out" --steps 1 --tasks-per-step 3 --group-size 1 \
    --no-train --json >"$T/run.txt" || true
  /usr/bin/python3 - "$T/out/step-0001.jsonl" <<'PY'
import json, sys
eps = {e["task"]: e for e in map(json.loads, open(sys.argv[1]))}
for e in eps.values():
    print(e["task"], e["status"], e["reward"], (e.get("message") or "")[:100])
assert eps["gsm"]["status"] == "scored" and eps["gsm"]["reward"] == 1.0, eps["gsm"]
assert eps["raise"]["status"] == "scored" and eps["raise"]["reward"] == 0.0, eps["raise"]
assert eps["nofn"]["status"] != "scored", eps["nofn"]
PY
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
