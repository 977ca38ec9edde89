#!/usr/bin/env bash
# verl reward scoring through `sbx grpo` with a real daemon: tasks whose grader is
# /grader/sbx_verl.py (the runner's embedded copy) over a verl row; a scripted policy writes
# answer.txt. Built-in gsm8k right -> 1.0, a user compute_score raising -> 0.0 (scored), a reward
# file without compute_score -> not scored (infrastructure, exit 125; docs/GRPO.md).

source "$(dirname "$0")/grpo_lib.sh"

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
def task(i, prompt, files, extra):
    return {"id": i, "prompt": prompt, "max_turns": 1, "max_completion_tokens": 4,
            "command_timeout": "5s", "grader": {"files": files, "timeout": "20s", "reward": {"exit_codes": ex},
            "command": "python3 sbx_verl.py row.json /workspace/answer.txt" + extra}}
lines = [{"task_set": "verl-e2e@1", "split": {"seed": 1, "held_out": 0}},
         task("gsm", "verl gsm", {"row.json": row("openai/gsm8k", "72")}, ""),
         task("raise", "verl raise", {"row.json": row("mine", "1"), "r.py": raising}, " r.py"),
         task("nofn", "verl nofn", {"row.json": row("mine", "1"), "r.py": "x = 1\n"}, " r.py")]
open(t + "/tasks.jsonl", "w").write("".join(json.dumps(l) + "\n" for l in lines))
cmd = "printf '48+24 #### 72' > answer.txt"
json.dump({"verl gsm": cmd, "verl raise": cmd, "verl nofn": cmd}, open(t + "/answers.json", "w"))
PY
  /usr/bin/python3 "$SBX_SRC_DIR/bench/grpo_fake_server.py" --port-file "$T/port" --delay-ms 0 \
    --answers "$T/answers.json" &
  TRAINER_PID=$!
  for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
  [ -s "$T/port" ] || fail "the scripted server did not start"
  TRAINER_URL=http://127.0.0.1:$(cat "$T/port")
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
