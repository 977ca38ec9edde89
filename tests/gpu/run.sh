#!/usr/bin/env bash
# The GPU device check (issue 26 item 5), one prepared script for a machine with an NVIDIA GPU:
# pure cgroup v2, no package registry, no ip/nft needed. Run from the repository root with
# `make static`'s bundle carried along (build-static/):
#   tests/gpu/run.sh [BUNDLE_DIR] [OUT_DIR]        (as root; BUNDLE_DIR default build-static)
# It starts sandboxd from the bundle (GPU discovery of /dev/nvidia*), then
#  1. a sandbox with 1 GPU: its /dev, the env, nvidia-smi, and a PyTorch CUDA matmul (host image,
#     the host's python3, when that python has torch under /usr);
#  2. a second sandbox without a GPU: no nvidia node, nvidia-smi fails, torch sees no CUDA; and a
#     create asking for more GPUs than are free gets 409 gpu_unavailable;
#  3. the reference GRPO loop (sbx grpo, toy task set) against trainer/server.py --device cuda,
#     and the step time split into generation, training and sandboxes (the trainer's
#     /v1/state generation_seconds and training_seconds; the rest is the wait on tools).
# Every result line starts with "gpu-check:"; OUT_DIR/report.txt collects them. Exit 0 when
# every check that could run passed. Knobs: GPU_CHECK_STEPS (5), SBX_PYTHON (python3).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUNDLE=$(cd "${1:-$SRC/build-static}" && pwd) || { echo "gpu-check: no bundle (make static)"; exit 2; }
OUT=${2:-${OUT:-/tmp/sbx-gpu-check}}
STEPS=${GPU_CHECK_STEPS:-5}
PY=${SBX_PYTHON:-$(command -v /usr/bin/python3 || command -v python3)}
mkdir -p "$OUT"
T=$(mktemp -d /tmp/sbx-gpu.XXXXXX)
SOCK=$T/sd.sock CG=sbx-gpucheck-$$ DPID='' TPID='' FAILED=0
REPORT=$OUT/report.txt
: >"$REPORT"

say() { echo "gpu-check: $*" | tee -a "$REPORT"; }
ok() { say "PASS $*"; }
bad() { say "FAIL $*"; FAILED=1; }
api() { curl -s --max-time 120 --unix-socket "$SOCK" "$@"; }
js() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; } # EXPR over stdin as d

cleanup() {
  if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
    for id in $(api http://x/v1/sandboxes | js '" ".join(s["id"] for s in d if s["state"] != "ended")' 2>/dev/null); do
      api -X DELETE "http://x/v1/sandboxes/$id" >/dev/null
    done
    kill "$DPID"; wait "$DPID" 2>/dev/null
  fi
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
  cp "$T"/*.log "$OUT/" 2>/dev/null
  find "/sys/fs/cgroup/$CG" -depth -type d -exec rmdir {} \; 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

[ "$(id -u)" -eq 0 ] || { say "needs root"; exit 2; }
say "machine: $(uname -r), cgroup $( [ -e /sys/fs/cgroup/cgroup.controllers ] && echo v2 || echo v1/hybrid), nodes: $(ls /dev/nvidia* 2>/dev/null | tr '\n' ' ')"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | sed 's/^/gpu-check: host: /' | tee -a "$REPORT" >/dev/null

# ---- the daemon, from the bundle ----
"$BUNDLE/bin/sandboxd" --socket "$SOCK" --run-dir "$T/run" --state-dir "$T/state" \
  --cgroup-parent "$CG" --seccomp-profile "$SRC/policy/seccomp.json" --log-level info \
  >"$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do api http://x/healthz >/dev/null 2>&1 && break; sleep 0.1; done
api http://x/healthz >/dev/null 2>&1 || { tail -20 "$T/daemon.log"; bad "sandboxd did not start"; exit 1; }
INFO=$(api http://x/v1/info)
TOTAL=$(echo "$INFO" | js 'd["gpus"]["total"]')
say "sandboxd: cgroup $(echo "$INFO" | js 'd["cgroup_mode"]'), GPUs $(echo "$INFO" | js 'd["gpus"]')"
[ "${TOTAL:-0}" -ge 1 ] && ok "discovery found $TOTAL GPU(s)" || { bad "no GPU discovered"; exit 1; }

create() { api -X POST http://x/v1/sandboxes -d "$1"; }
run_in() { # ID SCRIPT [TIMEOUT_S] -> the exec answer
  api -X POST "http://x/v1/sandboxes/$1/exec" -d "$("$PY" -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]],"timeout":int(sys.argv[2])}))' "$2" "${3:-120}")"
}
out_of() { js 'd.get("stdout","") + d.get("stderr","")'; }
code_of() { js 'd.get("exit_code")'; }

# ---- 1. a sandbox with one GPU ----
G=$(create '{"gpus":1,"cpu":4,"memory":"16Gi","timeout":"15m"}')
GID=$(echo "$G" | js 'd.get("id","")')
[ -n "$GID" ] || { bad "create with 1 GPU: $G"; exit 1; }
ok "create with 1 GPU: $GID holds $(echo "$G" | js 'd["gpus"]')"
A=$(run_in "$GID" 'ls /dev | grep nvidia | tr "\n" " "; echo; echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES')
say "inside: $(echo "$A" | out_of | tr '\n' ' ')"
A=$(run_in "$GID" 'nvidia-smi -L && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader')
[ "$(echo "$A" | code_of)" == 0 ] && ok "nvidia-smi inside: $(echo "$A" | out_of | tr '\n' ' ')" ||
  bad "nvidia-smi inside: $(echo "$A" | out_of | tail -3 | tr '\n' ' ')"
MATMUL='import time, torch
assert torch.cuda.is_available(), "no CUDA"
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.float16); b = torch.randn(n, n, device="cuda", dtype=torch.float16)
torch.cuda.synchronize(); (a @ b).sum().item()
t = time.time(); k = 20
for _ in range(k): c = a @ b
torch.cuda.synchronize(); dt = time.time() - t
print(f"{torch.cuda.get_device_name(0)}: {k} fp16 matmuls {n}x{n} in {dt:.3f} s = {2 * n ** 3 * k / dt / 1e12:.1f} TFLOP/s")'
if "$PY" -c 'import torch' 2>/dev/null; then
  A=$(run_in "$GID" "python3 -c '$MATMUL'" 300)
  [ "$(echo "$A" | code_of)" == 0 ] && ok "PyTorch CUDA matmul inside: $(echo "$A" | out_of | tail -1)" ||
    bad "PyTorch CUDA matmul inside: $(echo "$A" | out_of | tail -4 | tr '\n' ' ')"
else
  say "SKIP PyTorch matmul: the host's $PY has no torch"
fi

# ---- 2. a sandbox without a GPU sees none; too many asked is refused ----
N=$(create '{"memory":"1Gi"}')
NID=$(echo "$N" | js 'd.get("id","")')
A=$(run_in "$NID" 'ls /dev | grep -c nvidia; nvidia-smi -L >/dev/null 2>&1 && echo SMI-OK; python3 -c "import torch; print(\"cuda\", torch.cuda.is_available())" 2>/dev/null')
O=$(echo "$A" | out_of)
[ "$(echo "$O" | head -1)" == 0 ] && ! grep -q SMI-OK <<<"$O" && ! grep -q 'cuda True' <<<"$O" &&
  ok "a sandbox without a GPU sees none ($(echo "$O" | tr '\n' ' '))" || bad "a GPU-less sandbox sees a GPU: $O"
R=$(create "{\"gpus\":$TOTAL}")
[ "$(echo "$R" | js 'd.get("code")')" == gpu_unavailable ] && ok "more GPUs than free: gpu_unavailable" ||
  bad "more GPUs than free: $R"
api -X DELETE "http://x/v1/sandboxes/$GID" >/dev/null
[ "$(api http://x/v1/info | js 'd["gpus"]["free"]')" == "$TOTAL" ] && ok "delete freed the GPU" || bad "delete did not free the GPU"
api -X DELETE "http://x/v1/sandboxes/$NID" >/dev/null

# ---- 3. the reference loop with the trainer on CUDA ----
if ! "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  say "SKIP GRPO loop: $PY has no torch with CUDA"
  exit $FAILED
fi
"$PY" "$SRC/trainer/server.py" --port 0 --port-file "$T/port" --device cuda --seed 1 >"$T/trainer.log" 2>&1 &
TPID=$!
for _ in $(seq 600); do [ -s "$T/port" ] && break; kill -0 "$TPID" 2>/dev/null || break; sleep 0.1; done
[ -s "$T/port" ] || { tail -5 "$T/trainer.log"; bad "the trainer did not start on cuda"; exit 1; }
URL=http://127.0.0.1:$(cat "$T/port")
T0=$(date +%s.%N)
"$BUNDLE/bin/sbx" grpo --host "$SOCK" --trainer "$URL" --tasks "$SRC/tasks/toy-files.jsonl" \
  --out "$OUT/train" --steps "$STEPS" --tasks-per-step 8 --group-size 8 --seed 3 \
  --gpu-hour-usd 2.0 >"$T/grpo.log" 2>&1 && ok "sbx grpo: $STEPS steps with the trainer on cuda" ||
  { tail -5 "$T/grpo.log"; bad "sbx grpo"; }
curl -s "$URL/v1/state" >"$OUT/trainer_state.json"
"$PY" - "$OUT" "$T0" <<'PY' | tee -a "$REPORT"
import json, sys
out = sys.argv[1]
st = json.load(open(f"{out}/trainer_state.json"))
s = json.load(open(f"{out}/train/summary.json"))
steps, wall = max(1, s.get("steps", 0)), s["seconds"]
gen, train = st["generation_seconds"], st["training_seconds"]
rest = max(0.0, wall - gen - train)
print(f"gpu-check: step time ({st['device']}), {steps} steps, {wall:.1f} s: per step {wall / steps:.2f} s"
      f" = generation {gen / steps:.3f} s + training {train / steps:.3f} s + sandboxes {rest / steps:.2f} s;"
      f" the GPU waits on tools {100 * rest / wall:.0f}% of the time; reward {s.get('first_reward_mean')} -> {s.get('last_reward_mean')}")
PY
exit $FAILED
