#!/usr/bin/env bash
# What `sbx grpo` takes from the trainer and writes out, checked (docs/GRPO.md "Training plane",
# "Outputs"): the scripted trainer (bench/grpo_fake_server.py) refusing /v1/train_step or answering
# without a required field or out of range stops the run as trainer_failed, and the step's files
# never claim training that did not happen; an output file that cannot be written is an error
# naming it; SIGINT stops a run at once, even while the trainer holds every generation, and a
# second SIGINT ends the process.
source "$(dirname "$0")/grpo_lib.sh"

# A task whose grader scores at random (0..65535): the episodes of a group differ, so groups train.
write_random_tasks() {
  local limits='"limits":{"cpu":0.25,"memory":"64Mi","disk":"8Mi","pids":16}'
  {
    echo '{"task_set":"checks@1","split":{"seed":1,"held_out":0}}'
    echo '{"id":"r","prompt":"task k0",'"$limits"',"max_completion_tokens":4,"grader":{"command":"echo score $(od -An -N2 -tu2 /dev/urandom)","reward":"score"}}'
  } >"$T/tasks.jsonl"
  echo '{}' >"$T/answers.json"
}

# checks_run OUT [sbx grpo args...]: one step of 2 groups of 3, stdout+stderr in OUT.log; the
# exit status in RC.
checks_run() {
  RC=0
  grpo_run --tasks "$T/tasks.jsonl" --out "$1" --steps 1 --tasks-per-step 2 --group-size 3 \
    --trainer-retries 0 "${@:2}" >"$1.log" 2>&1 || RC=$?
  cat "$1.log"
}

# checks_trainer [fake server args...]: a fresh scripted trainer (the last one stopped)
checks_trainer() {
  if [ -n "${TRAINER_PID:-}" ]; then
    kill "$TRAINER_PID" 2>/dev/null || true
    wait "$TRAINER_PID" 2>/dev/null || true
    TRAINER_PID=
  fi
  grpo_scripted_trainer "$T/answers.json" "$@"
}

# trained in the step log, steps.jsonl and summary.json: "log steps summary"
checks_trained() {
  /usr/bin/python3 - "$1" <<'PY'
import json, sys
out = sys.argv[1]
log = sum(1 for l in open(out + "/step-0001.jsonl") if json.loads(l)["trained"])
steps = [json.loads(l)["trained"] for l in open(out + "/steps.jsonl")]
print(log, *steps, json.load(open(out + "/summary.json"))["trained"])
PY
}

# /v1/train_step answering 400 (or 200 without policy_version): the run fails, and nothing is
# recorded as trained; a trainer that takes the step: all 6 trained.
TEST_TIMEOUT_train_step_refused=90
test_train_step_refused() {
  require_root
  grpo_setup
  write_random_tasks
  checks_trainer --train-status 400
  checks_run "$T/o400"
  [ "$RC" -ne 0 ] || fail "exit 0 with the trainer refusing the step"
  grep -q 'train_step failed after 1 attempts: HTTP 400' "$T/o400.log" || fail "no clear message"
  assert_eq "$(checks_trained "$T/o400")" "0 0 0" "trained (log, steps.jsonl, summary) after a 400"
  assert_eq "$(json "$T/o400/summary.json" 'd["stop_reason"]')" trainer_failed "stop reason"
  checks_trainer --malformed train-empty
  checks_run "$T/oempty"
  [ "$RC" -ne 0 ] || fail "exit 0 with a train_step answer of {}"
  grep -q 'train_step: answer lacks an integer "policy_version"' "$T/oempty.log" ||
    fail "no clear message"
  assert_eq "$(checks_trained "$T/oempty")" "0 0 0" "trained after an answer of {}"
  checks_trainer
  checks_run "$T/ok"
  assert_eq "$RC" 0 "exit status with a trainer that takes the step"
  assert_eq "$(checks_trained "$T/ok")" "6 6 6" "trained with a trainer that takes the step"
  assert_eq "$(json "$T/ok/summary.json" 'd["policy_version"]')" 1 "policy version"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# An output file that cannot be written (summary.json a directory; a file a link to /dev/full,
# where only fclose sees the failure) fails the run with a message naming it; summary.json is
# written through a temporary file renamed over it, so a link in its place is replaced.
TEST_TIMEOUT_output_write_fails=90
test_output_write_fails() {
  require_root
  grpo_setup
  write_random_tasks
  checks_trainer
  mkdir -p "$T/odir/summary.json"
  checks_run "$T/odir"
  [ "$RC" -ne 0 ] || fail "exit 0 with summary.json a directory"
  grep -q "sbx grpo: error: cannot write $T/odir/summary.json: Is a directory" "$T/odir.log" ||
    fail "no message naming summary.json"
  grep -q '^GRPO run output_failed' "$T/odir.log" || fail "the summary printed does not say so"
  local f
  for f in step-0001.jsonl steps.jsonl reward.svg summary.json; do
    mkdir -p "$T/o-$f"
    ln -s /dev/full "$T/o-$f/$f"
    checks_run "$T/o-$f"
    if [ "$f" = summary.json ]; then
      assert_eq "$RC" 0 "exit status with summary.json a link (replaced)"
      assert_eq "$(json "$T/o-$f/summary.json" 'd["stop_reason"]')" completed "stop reason"
      continue
    fi
    [ "$RC" -ne 0 ] || fail "exit 0 with $f a link to /dev/full"
    grep -q "sbx grpo: error: cannot write $T/o-$f/$f: No space left on device" "$T/o-$f.log" ||
      fail "no message naming $f"
    assert_eq "$(json "$T/o-$f/summary.json" 'd["stop_reason"]')" output_failed "stop reason ($f)"
  done
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# A grader's "score S" outside [-1e6, 1e6] is the grader's failure (an infrastructure failure,
# as a missing score line), never a reward: the group statistics and every file stay valid.
TEST_TIMEOUT_score_out_of_range=90
test_score_out_of_range() {
  require_root
  grpo_setup
  local limits='"limits":{"cpu":0.25,"memory":"64Mi","disk":"8Mi","pids":16}'
  {
    echo '{"task_set":"scores@1","split":{"seed":1,"held_out":0}}'
    echo '{"id":"huge","prompt":"task k0",'"$limits"',"max_completion_tokens":4,"grader":{"command":"echo score 1e308","reward":"score"}}'
    echo '{"id":"edge","prompt":"task k1",'"$limits"',"max_completion_tokens":4,"grader":{"command":"echo score $(( $(od -An -N1 -tu1 /dev/urandom) % 2 * 1000000 ))","reward":"score"}}'
  } >"$T/tasks.jsonl"
  echo '{}' >"$T/answers.json"
  checks_trainer
  checks_run "$T/o" --seed 1
  assert_eq "$RC" 0 "exit status"
  /usr/bin/python3 - "$T/o" <<'PY'
import json, sys
out = sys.argv[1]
eps = [json.loads(l) for l in open(out + "/step-0001.jsonl")]
assert len(eps) == 6, eps
for e in eps:
    if e["task"] == "huge":
        assert e["status"] == "infrastructure_failure" and e["reward"] is None, e
        assert "score 1e+308 is outside [-1e6, 1e6]" in e["message"], e["message"]
    else:
        assert e["status"] == "scored" and e["reward"] in (0, 1e6), e
steps = [json.loads(l) for l in open(out + "/steps.jsonl")]
assert len(steps) == 1 and steps[0]["infrastructure_failures"] == 3, steps
summary = json.load(open(out + "/summary.json"))
assert summary["scored"] == 3 and summary["stop_reason"] == "completed", summary
print("out-of-range scores: grader failures; files valid")
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# Trainer answers without a required field or out of range (docs/GRPO.md "Training plane"):
# /detokenize without "prompt", /tokenize and /v1/completions token ids that are not integers in
# [0, INT32_MAX] (a /tokenize one was taken as 0 or cut to an int), logprobs that are not
# finite numbers <= 0, more tokens than max_tokens (4): each stops the run as trainer_failed
# with a message saying what was wrong.
TEST_TIMEOUT_trainer_answers_checked=120
test_trainer_answers_checked() {
  require_root
  grpo_setup
  write_random_tasks
  local kind want
  while IFS='|' read -r kind want; do
    checks_trainer --malformed "$kind"
    checks_run "$T/o-$kind"
    [ "$RC" -ne 0 ] || fail "exit 0 with --malformed $kind"
    grep -qF "sbx grpo: error: trainer $TRAINER_URL$want" "$T/o-$kind.log" ||
      fail "--malformed $kind: no message \"$want\""
    assert_eq "$(json "$T/o-$kind/summary.json" 'd["stop_reason"], d["trained"]')" \
      "trainer_failed 0" "--malformed $kind: stop reason, trained"
  done <<'EOF2'
detok-no-prompt|/detokenize: answer lacks "prompt"
tokenize-negative|/tokenize: answer tokens[0] is not an integer in [0, 2147483647]
tokenize-float|/tokenize: answer tokens[0] is not an integer in [0, 2147483647]
tokenize-huge|/tokenize: answer tokens[0] is not an integer in [0, 2147483647]
token-negative|/v1/completions: answer token_ids[0] is not an integer in [0, 2147483647]
token-float|/v1/completions: answer token_ids[0] is not an integer in [0, 2147483647]
token-huge|/v1/completions: answer token_ids[0] is not an integer in [0, 2147483647]
logprob-positive|/v1/completions: answer token_logprobs[0] is not a finite number <= 0
logprob-string|/v1/completions: answer token_logprobs[0] is not a finite number <= 0
too-many-tokens|/v1/completions: answer has 5000 tokens, more than max_tokens (4)
EOF2
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# sbx grpo --json prints valid JSON whatever the summary holds: an --out path with a quote and a
# backslash, a run with no scored episode (no reward mean: null; "none" in the text summary).
TEST_TIMEOUT_json_summary=90
test_json_summary() {
  require_root
  grpo_setup
  local limits='"limits":{"cpu":0.25,"memory":"64Mi","disk":"8Mi","pids":16}'
  {
    echo '{"task_set":"broken@1","split":{"seed":1,"held_out":0}}'
    echo '{"id":"b","prompt":"task k0",'"$limits"',"max_completion_tokens":4,"grader":{"command":"exit 3"}}'
  } >"$T/tasks.jsonl"
  echo '{}' >"$T/answers.json"
  checks_trainer
  local out="$T/o\"q\\x"
  grpo_run --tasks "$T/tasks.jsonl" --out "$out" --steps 1 --tasks-per-step 1 --group-size 2 \
    --json >"$T/stdout" || fail "the run failed"
  cat "$T/stdout"
  /usr/bin/python3 - "$T/stdout" "$out" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read())
assert d["svg"] == sys.argv[2] + "/reward.svg", (d["svg"], sys.argv[2])
assert d["first_reward_mean"] is None and d["last_reward_mean"] is None, d
assert d["stop_reason"] == "completed" and d["infrastructure_failures"] == 2, d
print("valid JSON:", d["svg"])
PY
  grpo_run --tasks "$T/tasks.jsonl" --out "$T/text" --steps 1 --tasks-per-step 1 --group-size 2 \
    >"$T/text.txt" || fail "the run failed"
  grep -q 'reward: first step none -> last step none;' "$T/text.txt" ||
    fail "the text summary does not say none: $(grep reward: "$T/text.txt")"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# sigint_runner OUT [sbx grpo args...]: one step of 2 groups of 2 in the background
# (GRPO_RUNNER_PID: sbx itself, stopped at exit), stdout+stderr in OUT.log.
sigint_runner() {
  "$SBX_BUILD_DIR/sbx" grpo --host "$SOCK" --trainer "$TRAINER_URL" --tasks "$T/tasks.jsonl" --out "$1" --steps 1 --tasks-per-step 2 --group-size 2 \
    --trainer-retries 0 "${@:2}" >"$1.log" 2>&1 &
  GRPO_RUNNER_PID=$!
}

# sigint_wait_stats FIELD N: until the scripted trainer's /v1/fake_stats FIELD reaches N
sigint_wait_stats() {
  local v=''
  for _ in $(seq 300); do
    v=$(curl -s --max-time 5 "$TRAINER_URL/v1/fake_stats" | jq -r ".$1") || v=''
    [ "$v" == "$2" ] && return 0
    kill -0 "$GRPO_RUNNER_PID" 2>/dev/null || break
    sleep 0.1
  done
  fail "the trainer's $1 did not reach $2 ($v)"
}

# sigint_exit SECONDS: RC, the runner's exit status, once it ended within SECONDS (else fail)
sigint_exit() {
  for _ in $(seq $(($1 * 10))); do
    kill -0 "$GRPO_RUNNER_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$GRPO_RUNNER_PID" 2>/dev/null && fail "sbx grpo still runs $1 s after the signal"
  RC=0
  wait "$GRPO_RUNNER_PID" || RC=$?
  GRPO_RUNNER_PID=
}

# SIGINT while all 4 episodes wait at their first generation (the trainer holds it: --hold-file):
# the trainer's requests are cancelled, the run stops at once as interrupted (docs/GRPO.md
# "Training plane") with its summary, and no sandbox of the run is left running.
TEST_TIMEOUT_sigint_while_generating=90
test_sigint_while_generating() {
  require_root
  grpo_setup
  write_random_tasks
  daemon_at_exit touch "$T/go" # never leave the trainer holding the runner
  checks_trainer --hold-file "$T/go"
  sigint_runner "$T/o"
  sigint_wait_stats held 4
  [ "$(grpo_running_sandboxes)" -gt 0 ] || fail "no sandbox runs while the episodes are held"
  kill -INT "$GRPO_RUNNER_PID"
  sigint_exit 5
  cat "$T/o.log"
  [ "$RC" -ne 0 ] || fail "exit 0 after SIGINT"
  grep -q 'sbx grpo: error: interrupted by signal 2' "$T/o.log" || fail "no message"
  assert_eq "$(json "$T/o/summary.json" 'd["stop_reason"], d["trained"]')" "interrupted 0" \
    "stop reason, trained"
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left running"
}

# A second SIGINT ends the process at once (the default action) while the first one's stop
# waits: here for the agents' commands (sleep 60) that are running.
TEST_TIMEOUT_sigint_twice=90
test_sigint_twice() {
  require_root
  grpo_setup
  write_random_tasks
  checks_trainer --command 'sleep 60'
  sigint_runner "$T/o"
  sigint_wait_stats completions 4
  sleep 2 # the commands start (detokenize, exec)
  kill -INT "$GRPO_RUNNER_PID"
  sleep 1
  kill -0 "$GRPO_RUNNER_PID" 2>/dev/null || fail "the first SIGINT did not wait for the commands"
  kill -INT "$GRPO_RUNNER_PID"
  sigint_exit 3
  assert_eq "$RC" 130 "exit status after a second SIGINT"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
