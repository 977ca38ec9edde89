#!/usr/bin/env bash
# A short GRPO run for `make demo`: a private sandboxd, the reference trainer on CPU (a policy
# trained from scratch), `sbx grpo` on the toy task set's training split with its live progress
# line, then the trained policy on the held-out split, then reward and pass rate per step, at the
# end and held out (docs/GRPO.md, "The reference loop learns").
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
grpo_start_trainer --seed 1
echo "== GRPO: toy task set, $STEPS steps x 8 tasks x 8 episodes, trainer on CPU at $TRAINER_URL"
grpo_learn "$OUT" "$STEPS" --gpu-hour-usd 2.0
echo "== outputs in $OUT/train and $OUT/held_out: step-NNNN.jsonl (every episode), steps.jsonl,"
echo "   summary.json; $OUT/learning.json; reward curve: $OUT/train/reward.svg"
