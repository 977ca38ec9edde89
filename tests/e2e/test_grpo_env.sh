#!/usr/bin/env bash
# GRPO with a server environment (docs/GRPO.md "Server environments"): a task whose
# "env_server" names the port of an OpenEnv-style server the task's image starts (the image is
# built here from a rootfs tarball: tests/integration/mkenvimage.py + openenv_server.py). `sbx
# grpo` with the scripted trainer: the runner waits for the port, POSTs /reset, sends each turn's
# command as /step's action through libsbx's port proxy, ends the agent on "done", and the
# grading sandbox (a separate one) scores /state (written to /grader/env_state.json). A server
# whose port never opens, or that accepts and never answers, is an infrastructure failure naming
# the port, after the task's wait.
source "$(dirname "$0")/grpo_lib.sh"

TEST_TIMEOUT_server_env=150
test_server_env() {
  require_root
  grpo_setup
  /usr/bin/python3 "$SBX_SRC_DIR/tests/integration/mkenvimage.py" "$T/env.tar" \
    "$SBX_SRC_DIR/tests/integration/openenv_server.py" || fail "mkenvimage"
  grpo_api "/v1/images?name=openenv:v1" -X POST --data-binary @"$T/env.tar" >/dev/null || fail "import"
  /usr/bin/python3 - >"$T/env.jsonl" <<'PY'
import json
grader = {"argv": ["python3", "-c",
                   "import json, sys; s = json.load(open('/grader/env_state.json'));"
                   " sys.exit(0 if s['solved'] and s['step_count'] == 2 else 1)"],
          "timeout": "30s"}
lim = {"cpu": 0.5, "memory": "256Mi", "disk": "32Mi", "pids": 64}
print(json.dumps({"task_set": "env@1", "split": {"seed": 0, "held_out": 0}}))
print(json.dumps({"id": "word", "prompt": "play", "image": "openenv:v1", "max_turns": 3,
                  "max_completion_tokens": 16, "limits": lim, "grader": grader,
                  "env_server": {"port": 8000, "wait": "20s",
                                 "entrypoint": ["python3", "/srv/env.py", "8000"]}}))
# long observations (9 KB of three-byte characters, the last one with "done"): each is cut to 4 KiB
# for the policy and the log, on a character boundary (still UTF-8, not turned into '?')
print(json.dumps({"id": "long", "prompt": "play", "image": "openenv:v1", "max_turns": 3,
                  "max_completion_tokens": 16, "limits": lim, "grader": grader,
                  "env_server": {"port": 8000, "wait": "20s",
                                 "entrypoint": ["python3", "/srv/env.py", "8000", "3000"]}}))
print(json.dumps({"id": "closed", "prompt": "play", "image": "openenv:v1", "max_turns": 3,
                  "max_completion_tokens": 16, "limits": lim, "grader": grader,
                  "env_server": {"port": 8000, "wait": "2s",
                                 "entrypoint": ["python3", "-c", "import time; time.sleep(60)"]}}))
# a server that accepts and never answers: the wait ends after its 2 s all the same (each probe
# is given only the time left; a probe had the daemon's 30 s, and the episode took 30 s more)
silent = "import socket\ns = socket.create_server(('0.0.0.0', 8000))\nc = []\nwhile True: c.append(s.accept())"
print(json.dumps({"id": "silent", "prompt": "play", "image": "openenv:v1", "max_turns": 3,
                  "max_completion_tokens": 16, "limits": lim, "grader": grader,
                  "env_server": {"port": 8000, "wait": "2s", "entrypoint": ["python3", "-c", silent]}}))
PY
  printf 'blue\nit is red\nnever sent\n' >"$T/script.txt"
  grpo_start_trainer --scripted "$T/script.txt"
  grpo_run --tasks "$T/env.jsonl" --out "$T/out" --steps 1 --tasks-per-step 4 --group-size 2 \
    --no-train --json >"$T/run.txt" || { cat "$T/run.txt"; fail "sbx grpo failed"; }
  /usr/bin/python3 - "$T/out/step-0001.jsonl" <<'PY'
import json, sys
eps = [json.loads(l) for l in open(sys.argv[1])]
word = [e for e in eps if e["task"] == "word"]
closed = [e for e in eps if e["task"] == "closed"]
long = [e for e in eps if e["task"] == "long"]
silent = [e for e in eps if e["task"] == "silent"]
assert len(word) == 2 and len(closed) == 2 and len(long) == 2 and len(silent) == 2, eps
for e in word:
    assert e["status"] == "scored" and e["reward"] == 1.0, e
    t = e["trace"]
    assert [s["command"] for s in t] == ["blue", "it is red"], t
    assert "you said 'blue'" in t[0]["output"] and t[0]["env_reward"] == 0.0, t
    assert t[1]["env_reward"] == 1.0, t
for e in long:
    assert e["status"] == "scored" and e["reward"] == 1.0 and e["stop"] == "env_done", e
    for s, want in zip(e["trace"], ["turn 1: you said 'blue'", "turn 2: you said 'it is red'"]):
        out = s["output"]
        assert out.startswith(want) and out.endswith("\u20ac"), out[:80] + " ... " + out[-40:]
        assert 4000 < len(out.encode()) < 4096 and "?" not in out, (len(out.encode()), out[-40:])
for e in closed:
    assert e["status"] == "infrastructure_failure", e
    assert "port 8000 did not answer within 2.0 s" in e["message"], e["message"]
for e in silent:
    assert e["status"] == "infrastructure_failure", e
    assert "port 8000 did not answer within 2.0 s" in e["message"], e["message"]
    assert e["durations"]["total"] < 15, ("waited past the 2 s", e["durations"], e["message"])
print("server env episodes: scored 1.0 through /step; the closed port is an infrastructure failure")
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

test_bad_env_server() { # the task file's env_server is checked when it loads
  require_root
  grpo_tmp
  local b
  # (the last two: the image's Entrypoint and Cmd in the host image, the task's default, which has
  # neither: refused here, where each episode failed at its create)
  for b in '{"port":0}' '{"port":8000,"x":1}' '{"port":8000,"entrypoint":"yes"}' '{"port":8000,"wait":"soon"}' '3' \
    '{"port":8000}' '{"port":8000,"entrypoint":true}'; do
    printf '%s\n%s\n' '{"task_set":"b@1","split":{"seed":0,"held_out":0}}' \
      "{\"id\":\"a\",\"prompt\":\"p\",\"grader\":{\"command\":\"true\"},\"env_server\":$b}" >"$T/b.jsonl"
    "$SBX_BUILD_DIR/sbx" grpo --tasks "$T/b.jsonl" --trainer http://127.0.0.1:1 --host /nonexistent.sock \
      --steps 1 --out "$T/o" >"$T/b.out" 2>&1 && fail "env_server $b was taken"
    grep -q 'b.jsonl:2: task "a": env_server' "$T/b.out" || fail "env_server $b: $(cat "$T/b.out")"
  done
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
