#!/usr/bin/env bash
# The reference trainer's HTTP planes without sandboxes: vLLM's /tokenize, /detokenize and
# /v1/completions schemas, batching of concurrent completions, /v1/state and /v1/train_step
# (a valid step bumps the policy version; malformed episodes are 400 and change nothing).
source "$(dirname "$0")/../e2e/grpo_lib.sh"

trainer_setup() {
  grpo_tmp
  grpo_start_trainer --seed 4
}

post() { curl -sf -X POST "$TRAINER_URL$1" -H 'Content-Type: application/json' -d "$2"; }

TEST_TIMEOUT_trainer_generation=60
test_trainer_generation() {
  trainer_setup
  local toks text
  toks=$(post /tokenize '{"prompt":"task k3","add_special_tokens":false}')
  echo "tokenize: $toks"
  text=$(post /detokenize "{\"tokens\":$(echo "$toks" | json /dev/stdin 'd["tokens"]')}")
  assert_eq "$(echo "$text" | json /dev/stdin 'd["prompt"]')" "task k3" "round trip"
  # 32 concurrent completions: well-formed, and sampled in batches
  local ids pids=()
  ids=$(echo "$toks" | json /dev/stdin 'd["tokens"]')
  for i in $(seq 32); do
    post /v1/completions "{\"prompt\":$ids,\"max_tokens\":6,\"temperature\":1.0,\"logprobs\":0,\"return_token_ids\":true}" >"$T/c$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for i in $(seq 32); do
    [ "$(json "$T/c$i" 'len(d["choices"][0]["token_ids"]) == len(d["choices"][0]["logprobs"]["token_logprobs"]) and 1 <= len(d["choices"][0]["token_ids"]) <= 6 and d["choices"][0]["finish_reason"] in ("stop", "length") and all(x <= 0 for x in d["choices"][0]["logprobs"]["token_logprobs"])')" == True ] ||
      fail "malformed completion: $(cat "$T/c$i")"
  done
  local state
  state=$(curl -sf "$TRAINER_URL/v1/state")
  echo "state: $state"
  assert_eq "$(echo "$state" | json /dev/stdin 'd["completions"]')" 32 "completions served"
  [ "$(echo "$state" | json /dev/stdin 'd["largest_batch"] > 1 and d["batches"] < 32')" == True ] ||
    fail "concurrent completions were not batched"
  assert_eq "$(echo "$state" | json /dev/stdin 'd["policy_version"]')" 0 "initial policy version"
}

TEST_TIMEOUT_trainer_train_step=60
test_trainer_train_step() {
  trainer_setup
  local p c body
  p=$(post /tokenize '{"prompt":"task k3"}' | json /dev/stdin 'd["tokens"]')
  c=$(post /v1/completions "{\"prompt\":$p,\"max_tokens\":4,\"logprobs\":0,\"return_token_ids\":true}")
  local ids lps
  ids=$(echo "$c" | json /dev/stdin 'd["choices"][0]["token_ids"]')
  lps=$(echo "$c" | json /dev/stdin 'd["choices"][0]["logprobs"]["token_logprobs"]')
  local n
  n=$(echo "$ids" | json /dev/stdin 'len(d)')
  local mask
  mask=$(/usr/bin/python3 -c "print([1]*$n)")
  body="{\"step\":1,\"groups\":[{\"episodes\":[
    {\"prompt_ids\":$p,\"completion_ids\":$ids,\"loss_mask\":$mask,\"sampling_logprobs\":$lps,\"reward\":1,\"advantage\":0.7,\"policy_version\":0},
    {\"prompt_ids\":$p,\"completion_ids\":$ids,\"loss_mask\":$mask,\"sampling_logprobs\":$lps,\"reward\":0,\"advantage\":-0.7,\"policy_version\":0}]}]}"
  local r
  r=$(post /v1/train_step "$body")
  echo "train_step: $r"
  assert_eq "$(echo "$r" | json /dev/stdin 'd["policy_version"]')" 1 "policy version after a step"
  assert_eq "$(echo "$r" | json /dev/stdin 'd["episodes"]')" 2 "episodes trained"
  assert_eq "$(curl -sf "$TRAINER_URL/v1/state" | json /dev/stdin 'd["policy_version"]')" 1 "state"
  # mismatched lengths are refused with a message, and change nothing
  local code
  code=$(curl -s -o "$T/err" -w '%{http_code}' -X POST "$TRAINER_URL/v1/train_step" \
    -d "{\"groups\":[{\"episodes\":[{\"prompt_ids\":$p,\"completion_ids\":[3,4],\"loss_mask\":[1],\"sampling_logprobs\":[0,0],\"advantage\":1}]}]}")
  assert_eq "$code" 400 "status of a malformed train_step"
  grep -q "differ in length" "$T/err" || fail "no clear message: $(cat "$T/err")"
  assert_eq "$(curl -sf "$TRAINER_URL/v1/state" | json /dev/stdin 'd["policy_version"]')" 1 "state after a refused step"
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$TRAINER_URL/v1/completions" -d '{"prompt":"text"}')
  assert_eq "$code" 400 "completions need token ids"
}

# The update's ratio starts at 1: the log-probabilities the trainer recomputes for training equal
# those it returned when sampling, token for token, in one-turn and multi-turn episodes (tool
# output between turns, and a turn whose command printed nothing, so two turns' tokens touch).
TEST_TIMEOUT_trainer_logprobs_line_up=120
test_trainer_logprobs_line_up() {
  local py
  py=$(grpo_python) || skip "no Python with torch (apt-get install python3-torch, or set SBX_PYTHON)"
  "$py" - "$SBX_SRC_DIR/trainer" <<'PY'
import sys
sys.path.insert(0, sys.argv[1])
import torch
import grpo
from model import Policy
from vocab import Vocab

torch.manual_seed(3)
v = Vocab()
pol = Policy(len(v), v.action_ids, names=v.name_ids)
eps = []
for prompt, outputs in (("write red to b.txt", []), ("put gold in d.txt", ["gold", "oops: not found"]),
                        ("write blue to a.txt", ["", "blue c.txt"]), ("task k3", [""])):
    ids, comp, mask, lps = v.encode(prompt, eot=True), [], [], []
    for turn in range(len(outputs) + 1):
        toks, lp, _ = pol.generate([ids + comp], [4], 1.0, v.eos, "cpu")[0]
        comp, mask, lps = comp + toks, mask + [1] * len(toks), lps + lp
        if turn < len(outputs) and outputs[turn]:  # the runner skips /tokenize for no output
            o = v.encode(outputs[turn], eot=True)
            comp, mask, lps = comp + o, mask + [0] * len(o), lps + [0.0] * len(o)
    eps.append({"prompt_ids": ids, "completion_ids": comp, "loss_mask": mask,
                "sampling_logprobs": lps, "advantage": 1.0})
    seq = torch.tensor([ids + comp])
    again = pol.next_logprobs(seq)[0, len(ids) - 1:]
    for k, m in enumerate(mask):
        if m:
            assert abs(again[k].item() - lps[k]) < 1e-5, (prompt, k, again[k].item(), lps[k])
    print(f"{prompt!r}: {v.decode(comp)!r}: {sum(mask)} sampled tokens line up")
# with advantage 1 everywhere and every ratio 1, the loss is exactly -1
loss = grpo.grpo_loss(pol, eps, "cpu").item()
assert abs(loss + 1) < 1e-5, loss
print("batched loss at ratio 1:", loss)
PY
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
