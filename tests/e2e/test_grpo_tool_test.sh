#!/usr/bin/env bash
# The tool-test set as `make demo` runs it (tests/e2e/grpo_lib.sh grpo_tool_test: every task of the
# train and held-out splits once, no training, then the pass rates from the step logs), with a
# real daemon and a scripted policy that solves two of the three task kinds (copy, count) and
# gets the third (upper) wrong: the printed rates must be exactly the solved kinds' share of each
# split, so they come from the run's real grading, not from anything fixed.

source "$(dirname "$0")/grpo_lib.sh"

TEST_TIMEOUT_tool_test_rates=240 TEST_PASS_tool_test_rates=plain
test_tool_test_rates() {
  require_root
  grpo_setup
  # prompt -> command: copy and count right, upper wrong (the word as it is, not in capitals)
  /usr/bin/python3 - "$GRPO_TOOL_TASKS" >"$T/answers.json" <<'PY'
import json, sys
ans = {}
for t in map(json.loads, list(open(sys.argv[1]))[1:]):
    src = next(iter(t["setup"]["files"]))
    kind = t["id"].split("-")[0]
    ans[t["prompt"]] = (f"wc -l < {src} > answer.txt" if kind == "count"
                        else f"cp {src} answer.txt")
print(json.dumps(ans))
PY
  grpo_scripted_trainer "$T/answers.json"
  grpo_tool_test "$T/out" >"$T/report.txt" || fail "the tool-test runs failed"
  cat "$T/report.txt"
  /usr/bin/python3 - "$T/out/tool_test" "$T/report.txt" <<'PY'
import glob, json, os, sys
out, report = sys.argv[1], open(sys.argv[2]).read()
rates = json.load(open(os.path.join(out, "rates.json")))
ids = {}
for split, n in (("train", 21), ("held_out", 43)):
    eps = [json.loads(l) for p in glob.glob(f"{out}/{split}/step-*.jsonl") for l in open(p)]
    ids[split] = {e["task"] for e in eps}
    assert len(eps) == n and len(ids[split]) == n, (split, len(eps))  # every task once
    assert all(e["status"] == "scored" and e["turns"] == 3 for e in eps), split  # multi-turn
    want = sum(1 for e in eps if not e["task"].startswith("upper-"))
    assert 0 < want < n, (split, want)  # the rate can be neither 0 nor 1 by construction
    r = rates[split]
    assert (r["passed"], r["scored"]) == (want, n), (split, r, want)
    label = "train split:   " if split == "train" else "held-out split:"
    line = f"{label} pass rate {want / n:.0%} ({want}/{n} scored episodes passed)"
    assert line in report, (line, report)
assert not ids["train"] & ids["held_out"], "a task in both splits"
PY
  assert_eq "$(grpo_running_sandboxes)" 0 "sandboxes left"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
