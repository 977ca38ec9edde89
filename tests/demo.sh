#!/usr/bin/env bash
# `make demo`: the main job on built-in defaults. It grows as the parts land.
set -euo pipefail
B=${1:-build}
echo "sandboxd demo (build dir: $B)"
echo "the demo starts sandboxd, runs sandboxes with sbx and a short GRPO run once those land"
