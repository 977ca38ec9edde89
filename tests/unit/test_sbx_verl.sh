#!/usr/bin/env bash
# verl-style reward scoring (client/grpo/grading/sbx_verl.py) on its own: the built-in scorers
# chosen by data_source, a user compute_score file used unchanged (float and dict results), and
# the failure rule of docs/GRPO.md: raise / timeout on the model's output -> score 0 (exit 0);
# an unloadable file, no compute_score, unknown data_source, a non-number, a killed scorer -> 125.

verl_setup() {
  LIB=$SBX_SRC_DIR/client/grpo/grading
  T=$(mktemp -d /tmp/sbx-verl-test.XXXXXX)
  trap 'rm -rf "$T"' EXIT
}

# score DATA_SOURCE GROUND_TRUTH SOLUTION [REWARD_FILE]: prints the first output line and the exit
score() {
  printf '{"data_source":"%s","reward_model":{"style":"rule","ground_truth":"%s"},"extra_info":{"i":1}}' \
    "$1" "$2" >"$T/row.json"
  printf '%s' "$3" >"$T/sol.txt"
  local rc=0 out
  out=$(SBX_VERL_TIMEOUT=2 /usr/bin/python3 "$LIB/sbx_verl.py" "$T/row.json" "$T/sol.txt" ${4:+"$4"} 2>&1) || rc=$?
  echo "${out%%$'\n'*} rc=$rc"
}

test_builtins() {
  verl_setup
  assert_eq "$(score openai/gsm8k 72 'so 48+24 = 72 #### 72')" "score 1.0 rc=10" "gsm8k right"
  assert_eq "$(score openai/gsm8k 72 '#### 1,072')" "score 0.0 rc=0" "gsm8k wrong"
  # verl's strict gsm8k rule (verl/utils/reward_score/gsm8k.py): in the last 300 characters, the
  # number right after the last "#### ", commas dropped, text-equal
  assert_eq "$(score openai/gsm8k 1072 'it is #### 1,072 in all')" "score 1.0 rc=10" "gsm8k commas"
  assert_eq "$(score openai/gsm8k 1072 'it is #### 1,072.')" "score 0.0 rc=0" "gsm8k: a trailing dot stays"
  assert_eq "$(score openai/gsm8k 5 'no marker, last number 5')" "score 0.0 rc=0" "gsm8k no marker: 0"
  assert_eq "$(score openai/gsm8k 72 '#### 5, no: 48+24 is #### 72')" "score 1.0 rc=10" \
    "gsm8k: the last marker"
  assert_eq "$(score openai/gsm8k 72 '#### 72 or #### 5')" "score 0.0 rc=0" "gsm8k: not the first"
  assert_eq "$(score openai/gsm8k 72 "#### 72 $(printf 'x%.0s' $(seq 300))")" "score 0.0 rc=0" \
    "gsm8k: a marker before the last 300 characters is not read"
  # "math" is verl's DAPO rule ("Answer: 3" -> 1, else -1): no built-in here, never another rule
  assert_eq "$(score math 3 'Answer: 3' | sed 's/.* rc=/rc=/')" "rc=125" "data_source math: 125"
  assert_eq "$(score DigitalLearningGmbH/MATH-lighteval 3 '\boxed{3}')" "score 1.0 rc=10" "MATH alias"
  assert_eq "$(score lighteval/MATH '\\frac{1}{2}' 'so \boxed{\frac{1}{2}}')" "score 1.0 rc=10" "boxed"
  assert_eq "$(score exact_match yes ' yes ')" "score 1.0 rc=10" "exact"
  assert_eq "$(score nosuch x x | cut -c1-30)" "no built-in scorer for data_so" "unknown data_source"
  assert_eq "$(score nosuch x x | sed 's/.* rc=/rc=/')" "rc=125" "unknown data_source is 125"
}

test_compute_score_file() {
  verl_setup
  cat >"$T/r.py" <<'PY'
import time
def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str == "raise":
        raise ValueError("cannot parse")
    if solution_str == "long":
        raise ValueError("could not parse:\n" + "x" * 300 + "\n\tend")
    if solution_str == "slow":
        time.sleep(30)
    if solution_str == "dict":
        return {"score": 0.5, "acc": True}
    if solution_str == "str":
        return "high"
    if solution_str == "print":
        print("score 0.9")
        return 0.1
    if solution_str == "die":
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)
    return 0.3 if (data_source, ground_truth, extra_info) == ("mine", "g", {"i": 1}) else 0.9
PY
  printf 'def nothing(): pass\n' >"$T/none.py"
  printf 'def compute_score(:\n' >"$T/bad.py"
  assert_eq "$(score mine g ok "$T/r.py")" "score 0.3 rc=3" "float, arguments as verl passes them"
  assert_eq "$(score mine g dict "$T/r.py")" "score 0.5 rc=5" "dict with score"
  assert_eq "$(score mine g raise "$T/r.py")" "score 0 (reward function raised ValueError: cannot parse) rc=0" "raise: zero"
  # a long, multi-line message: one score line, the message on it collapsed and cut short
  printf long >"$T/sol.txt"
  local out
  out=$(/usr/bin/python3 "$LIB/sbx_verl.py" "$T/row.json" "$T/sol.txt" "$T/r.py")
  assert_eq "$out" "score 0 (reward function raised ValueError: could not parse: $(printf 'x%.0s' $(seq 51)))" \
    "raise with a long, multi-line message: one short line"
  assert_eq "$(score mine g slow "$T/r.py")" "score 0 (reward function timed out after 2s) rc=0" "timeout: zero"
  assert_eq "$(score mine g str "$T/r.py")" "reward function returned 'high', not a number rc=125" "not a number: 125"
  assert_eq "$(score mine g die "$T/r.py" | sed 's/.* rc=/rc=/')" "rc=125" "killed scorer: 125"
  assert_eq "$(score mine g ok "$T/none.py" | sed 's/.* rc=/rc=/')" "rc=125" "no compute_score: 125"
  printf print >"$T/sol.txt"
  assert_eq "$(/usr/bin/python3 "$LIB/sbx_verl.py" "$T/row.json" "$T/sol.txt" "$T/r.py" 2>/dev/null)" \
    "score 0.1" "the scorer's prints go to stderr, stdout is the score line only"
  printf slow >"$T/sol.txt"
  assert_eq "$(/usr/bin/python3 "$LIB/sbx_verl.py" --timeout 0.5 "$T/row.json" "$T/sol.txt" "$T/r.py")" \
    "score 0 (reward function timed out after 0.5s)" "--timeout S"
  local rc=0
  /usr/bin/python3 "$LIB/sbx_verl.py" --timeout x "$T/row.json" "$T/sol.txt" 2>/dev/null || rc=$?
  assert_eq "$rc" 125 "a bad --timeout is 125"
  assert_eq "$(score mine g ok "$T/bad.py" | sed 's/.* rc=/rc=/')" "rc=125" "syntax error: 125"
}

# The runner refuses at load a row whose data_source has no built-in (client/grpo/verlset.c
# verl_builtins): its list must be the scorer's own.
test_builtins_match_the_loader() {
  local py c
  py=$(cd "$SBX_SRC_DIR/client/grpo/grading" && /usr/bin/python3 -c \
    'import sbx_verl; print(" ".join(sorted(sbx_verl.BUILTINS)))')
  c=$(sed -n '/verl_builtins\[\] = {/,/NULL}/p' "$SBX_SRC_DIR/client/grpo/verlset.c" |
    grep -o '"[^"]*"' | tr -d '"' | LC_ALL=C sort | tr '\n' ' ')
  assert_eq "$c" "$py " "verlset.c's built-ins vs sbx_verl.py's"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
