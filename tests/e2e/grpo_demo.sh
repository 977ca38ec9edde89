#!/usr/bin/env bash
# A short GRPO run for `make demo`: a private sandboxd, the reference trainer on CPU (a policy
# trained from scratch), `sbx grpo` on the toy task set's training split with its live progress
# line, then the trained policy on the held-out split, then reward and pass rate per step, at the
# end and held out (docs/GRPO.md, "The reference loop learns"); then the same policy on the
# tool-test set's two splits (the brief's manifest) and their pass rates.
# Usage: tests/e2e/grpo_demo.sh [BUILD_DIR] [STEPS]   (needs root, like sandboxd)
set -euo pipefail
SBX_SRC_DIR=$(cd "$(dirname "$0")/../.." && pwd)
SBX_BUILD_DIR=$(cd "${1:-$SBX_SRC_DIR/build}" && pwd)
STEPS=${2:-25}
fail() { echo "grpo demo: $*" >&2; exit 1; }
skip() { echo "grpo demo: skipped: $*" >&2; exit 0; }
source "$SBX_SRC_DIR/tests/e2e/grpo_lib.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root (sandboxd)"
OUT=${GRPO_DEMO_OUT:-$(mktemp -d /tmp/sbx-grpo-demo.XXXXXX)}
grpo_setup
DEVICE=${GRPO_DEMO_DEVICE:-cpu} # cuda: the trainer on a GPU (tests/gpu/run.sh)
grpo_start_trainer --seed 1 --device "$DEVICE"
echo "== GRPO: toy task set, $STEPS steps x 8 tasks x 8 episodes, trainer on $DEVICE at $TRAINER_URL"
grpo_learn "$OUT" "$STEPS" --gpu-hour-usd 2.0
# where a step's time goes: the trainer's device time (generation, training; GET /v1/state) and
# the rest, the loop waiting on the sandboxes (agent and grader commands, creates, ends)
curl -sf "$TRAINER_URL/v1/state" >"$OUT/trainer_state.json" || fail "the trainer's /v1/state"
/usr/bin/python3 - "$OUT" "$DEVICE" <<'PY' | tee "$OUT/step_split.txt"
import json, sys
out, device = sys.argv[1], sys.argv[2]
st = json.load(open(f"{out}/trainer_state.json"))
runs = [json.load(open(f"{out}/{r}/summary.json")) for r in ("train", "held_out")]
wall = sum(r["seconds"] for r in runs)
steps = sum(r.get("steps", 0) for r in runs) or 1
gen, train = st["generation_seconds"], st["training_seconds"]
rest = max(0.0, wall - gen - train)
print(f"== step time on {device} ({st['device']}), {steps} steps, {wall:.1f} s: per step "
      f"{wall / steps:.2f} s = generation {gen / steps:.2f} s + training {train / steps:.2f} s "
      f"+ sandboxes {rest / steps:.2f} s (the device waits on tools {100 * rest / wall:.0f}% "
      f"of the time)")
PY
echo "== tool-test (tasks/tool-test: 64 multi-turn shell tasks, 21 train / 43 held out, seed 42,"
echo "   max_turns 3, 256 tokens per completion): the policy above, no training"
grpo_tool_test "$OUT" --gpu-hour-usd 2.0
echo "   (the toy policy's only words are echo, >, a.txt..d.txt and red/green/blue/gold: it cannot"
echo "   read a file or write answer.txt, so 0% is what it can reach here; a policy that can is graded"
echo "   the same way, tests/e2e/test_grpo_tool_test.sh)"
echo "== outputs in $OUT/train and $OUT/held_out: step-NNNN.jsonl (every episode), steps.jsonl,"
echo "   summary.json; $OUT/learning.json; reward curve: $OUT/train/reward.svg; tool-test:"
echo "   $OUT/tool_test/{train,held_out}, $OUT/tool_test/rates.json"
