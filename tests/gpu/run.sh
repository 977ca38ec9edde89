#!/usr/bin/env bash
# The GPU device check (issue 26 item 5), one prepared script for a machine with an NVIDIA GPU:
# pure cgroup v2, no package registry, no ip/nft, no curl needed. Run from the repository root
# with `make static`'s bundle carried along:
#   tests/gpu/run.sh [BUNDLE_DIR] [OUT_DIR]        (as root; BUNDLE_DIR default build-static)
# (the bundle is ~66 MiB, over the device tool's 64 MiB carry limit: carry `tar cJf` of it, 19 MiB,
# from an ignored folder, and unpack it there first; docs/BENCHMARKS.md "On a GPU" has the run)
# It re-runs itself in a private mount namespace, starts sandboxd from the bundle (GPU discovery
# of /dev/nvidia*), then
#  1. a sandbox with 1 GPU: its /dev, the env, nvidia-smi, and a PyTorch CUDA matmul (host image);
#  2. a second sandbox without a GPU: no nvidia node, nvidia-smi fails, torch sees no CUDA; a
#     create asking for more GPUs than are free gets 409 gpu_unavailable; delete frees the GPU;
#  3. a store image's GPU sandbox (no driver in the image): nvidia-smi runs with the driver's
#     files that the daemon binds in (libraries in /usr/lib/<triplet>, tools in /usr/bin);
#  4. the reference GRPO loop (sbx grpo, toy task set) against trainer/server.py --device cuda,
#     and the step time split into generation, training and sandboxes (the trainer's
#     /v1/state generation_seconds and training_seconds; the rest is the wait on tools).
# PyTorch: the host image shows the host's /usr (with the mounts under it). A PyTorch installed
# elsewhere (a venv in /opt, say) is bound read-only onto a tmpfs at /usr/local/src, in this
# script's own mount namespace only, as if it had been installed under /usr/local; the sandbox
# runs the venv's base interpreter with the venv's site directories added (site.addsitedir).
# Every result line starts with "gpu-check:"; OUT_DIR/report.txt collects them and
# OUT_DIR/logs.tar.gz the daemon's, trainer's and loop's logs. Exit 0 when every check passed.
# Knobs: GPU_CHECK_STEPS (5), SBX_PYTHON (the first python3 that imports torch); for a dry run
# on a machine without a GPU: GPU_CHECK_CONFIG (a daemon config file with a stand-in inventory)
# and GPU_CHECK_DEVICE (cuda; cpu runs the trainer on the CPU).
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
if [ -z "${SBX_GPU_CHECK_NS:-}" ]; then # a private mount namespace: the host's mounts stay
  [ "$(id -u)" -eq 0 ] || { echo "gpu-check: needs root"; exit 2; }
  SBX_GPU_CHECK_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
BUNDLE=$(cd "${1:-$SRC/build-static}" && pwd) || { echo "gpu-check: no bundle (make static)"; exit 2; }
OUT=${2:-${OUT:-/tmp/sbx-gpu-check}}
STEPS=${GPU_CHECK_STEPS:-5} DEVICE=${GPU_CHECK_DEVICE:-cuda}
mkdir -p "$OUT"
T=$(mktemp -d /tmp/sbx-gpu.XXXXXX)
SOCK=$T/sd.sock CG=sbx-gpucheck-$$ DPID='' TPID='' FAILED=0 MP=/usr/local/src
REPORT=$OUT/report.txt
: >"$REPORT"

say() { echo "gpu-check: $*" | tee -a "$REPORT"; }
ok() { say "PASS $*"; }
bad() { say "FAIL $*"; FAILED=1; }

PY=${SBX_PYTHON:-}
for c in python3 /usr/bin/python3; do
  [ -z "$PY" ] && command -v "$c" >/dev/null && "$c" -c 'import torch' 2>/dev/null && PY=$(command -v "$c")
done
TORCH=1
[ -n "$PY" ] || { TORCH=0; PY=$(command -v python3); }

api() { # METHOD PATH [BODY|@FILE] -> the answer's body (http.client over the daemon's socket)
  "$PY" -c 'import http.client, socket, sys
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.settimeout(900); self.sock.connect(sys.argv[1])
c = C("sd"); body = sys.argv[4] if len(sys.argv) > 4 else None
kind = "application/json"
if body and body.startswith("@"):
    body, kind = open(body[1:], "rb").read(), "application/x-tar"
c.request(sys.argv[2], sys.argv[3], body=body, headers={"Content-Type": kind} if body else {})
sys.stdout.write(c.getresponse().read().decode())' "$SOCK" "$@" 2>/dev/null
}
js() { "$PY" -c "import json,sys; d=json.load(sys.stdin); print($1)"; } # EXPR over stdin as d

cleanup() {
  if [ -n "$DPID" ] && kill -0 "$DPID" 2>/dev/null; then
    for id in $(api GET /v1/sandboxes | js '" ".join(s["id"] for s in d if s["state"] != "ended")' 2>/dev/null); do
      api DELETE "/v1/sandboxes/$id" >/dev/null
    done
    kill "$DPID"; wait "$DPID" 2>/dev/null
  fi
  [ -n "$TPID" ] && kill "$TPID" 2>/dev/null && wait "$TPID" 2>/dev/null
  (cd "$T" && tar czf "$OUT/logs.tar.gz" --ignore-failed-read ./*.log 2>/dev/null)
  find "/sys/fs/cgroup/$CG" -depth -type d -exec rmdir {} \; 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

# ---- the machine ----
say "machine: $(uname -r), cgroup $([ -e /sys/fs/cgroup/cgroup.controllers ] && echo "v2 (root: $(cat /sys/fs/cgroup/cgroup.subtree_control))" || echo v1/hybrid), nodes: $(ls /dev/nvidia* 2>/dev/null | tr '\n' ' ')"
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | sed 's/^/gpu-check: host: /' | tee -a "$REPORT" >/dev/null
say "info: nvidia-smi at $(command -v nvidia-smi || echo none); ld.so cache: $(ldconfig -p | grep -cE 'libcuda\.so|libnvidia-ml\.so') driver entries ($(ldconfig -p | awk '/libcuda\.so\.1 /{print $NF; exit}')); LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
say "info: mounts under /usr: $(awk '$5 ~ "^/usr/" {print $5}' /proc/self/mountinfo | tr '\n' ' ')"

# ---- PyTorch for the sandbox: the interpreter and site directories as seen inside ----
IN_PY='' IN_SITES=''
if [ "$TORCH" == 1 ]; then
  mkdir -p "$MP" && mount -t tmpfs -o mode=0755,size=1m sbx-gpu-check "$MP" || { bad "mount a tmpfs on $MP"; exit 1; }
  inside() { # HOST_PATH -> its path in the sandbox (bound under $MP unless it is under /usr)
    case $1 in /usr/*) echo "$1"; return ;; esac
    local n; n=$MP/p$(ls "$MP" | wc -l)
    mkdir -p "$n" && mount --bind -o ro "$1" "$n" && echo "$n"
  }
  read -r BASE_PREFIX BASE_EXE SITES < <("$PY" -c 'import os, site, sys
exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
print(os.path.realpath(sys.base_prefix), exe, ":".join(p for p in site.getsitepackages() if os.path.isdir(p)))')
  case $BASE_EXE in
    /usr/*) IN_PY=$BASE_EXE ;;
    "$BASE_PREFIX"/*) IN_PY=$(inside "$BASE_PREFIX")/${BASE_EXE#"$BASE_PREFIX"/} ;;
  esac
  for s in ${SITES//:/ }; do IN_SITES+=${IN_SITES:+:}$(inside "$s"); done
  say "info: torch from $PY (base $BASE_EXE; sites $SITES); inside: $IN_PY with $IN_SITES"
fi

# ---- the daemon, from the bundle ----
CONF=()
[ -n "${GPU_CHECK_CONFIG:-}" ] && CONF=(--config "$GPU_CHECK_CONFIG")
"$BUNDLE/bin/sandboxd" --socket "$SOCK" --run-dir "$T/run" --state-dir "$T/state" \
  --cgroup-parent "$CG" --seccomp-profile "$SRC/policy/seccomp.json" --log-level info "${CONF[@]}" \
  >"$T/daemon.log" 2>&1 &
DPID=$!
for _ in $(seq 100); do api GET /healthz >/dev/null && break; sleep 0.1; done
api GET /healthz >/dev/null || { tail -20 "$T/daemon.log" | sed 's/^/gpu-check: daemon: /'; bad "sandboxd did not start"; exit 1; }
INFO=$(api GET /v1/info)
TOTAL=$(echo "$INFO" | js 'd["gpus"]["total"]')
say "sandboxd: cgroup $(echo "$INFO" | js 'd.get("cgroup_mode")'), GPUs $(echo "$INFO" | js 'd["gpus"]'); $(grep -m1 'gpus total' "$T/daemon.log")"
[ "${TOTAL:-0}" -ge 1 ] && ok "discovery found $TOTAL GPU(s)" || { bad "no GPU discovered"; exit 1; }

create() { api POST /v1/sandboxes "$1"; }
XENV={} # where the driver's libraries are found through LD_LIBRARY_PATH only, the execs get it
if ! ldconfig -p | grep -q 'libcuda\.so\.1 ' && [ -n "${LD_LIBRARY_PATH:-}" ]; then
  XENV=$("$PY" -c 'import json, os; print(json.dumps({"LD_LIBRARY_PATH": os.environ["LD_LIBRARY_PATH"]}))')
  say "info: libcuda.so.1 is not in the ld.so cache: execs get $XENV"
fi
run_in() { # ID SCRIPT [TIMEOUT_S] -> the exec answer
  api POST "/v1/sandboxes/$1/exec" "$("$PY" -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]],"timeout":int(sys.argv[2]),"env":json.loads(sys.argv[3])}))' "$2" "${3:-120}" "$XENV")"
}
out_of() { js 'd.get("stdout","") + d.get("stderr","") + (d.get("message","") if "exit_code" not in d else "")'; }
code_of() { js 'd.get("exit_code")'; }
torch_py() { # CODE -> a command line running CODE with the host's PyTorch inside
  local pre="import site; [site.addsitedir(p) for p in \"$IN_SITES\".split(\":\")]; "
  printf "%s -c '%s%s'" "$IN_PY" "$pre" "$1"
}

# ---- 1. a sandbox with one GPU ----
NCPU=$(nproc); [ "$NCPU" -gt 4 ] && NCPU=4
G=$(create "{\"gpus\":1,\"cpu\":$NCPU,\"memory\":\"8Gi\",\"timeout\":\"15m\",\"network\":\"none\"}")
GID=$(echo "$G" | js 'd.get("id","")')
[ -n "$GID" ] || { bad "create with 1 GPU: $G"; tail -20 "$T/daemon.log" | sed 's/^/gpu-check: daemon: /'; exit 1; }
ok "create with 1 GPU: $GID holds $(echo "$G" | js 'd["gpus"]')"
A=$(run_in "$GID" 'ls /dev | grep nvidia | tr "\n" " "; echo; echo NVIDIA_VISIBLE_DEVICES=$NVIDIA_VISIBLE_DEVICES CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES; id -u')
say "inside: $(echo "$A" | out_of | tr '\n' ' ')"
SMI=$(command -v nvidia-smi || echo nvidia-smi)
A=$(run_in "$GID" "$SMI -L && $SMI --query-gpu=name,memory.total,driver_version --format=csv,noheader")
[ "$(echo "$A" | code_of)" == 0 ] && ok "nvidia-smi inside: $(echo "$A" | out_of | tr '\n' ' ')" ||
  bad "nvidia-smi inside: $(echo "$A" | out_of | tail -3 | tr '\n' ' ')"
MATMUL='import time, torch
assert torch.cuda.is_available(), "no CUDA"
n = 8192
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16); b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
for _ in range(3): (a @ b)
torch.cuda.synchronize(); t = time.time(); k = 20
for _ in range(k): c = a @ b
torch.cuda.synchronize(); dt = time.time() - t
print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}: {k} bf16 matmuls {n}x{n}x{n} in {dt * 1e3:.1f} ms = {2 * n ** 3 * k / dt / 1e12:.0f} TFLOP/s")'
HOST_MM=''
if [ -n "$IN_PY" ]; then
  HOST_MM=$("$PY" -c "$MATMUL" 2>&1 | tail -1)
  say "host (outside any sandbox): $HOST_MM"
  A=$(run_in "$GID" "$(torch_py "$MATMUL")" 300)
  if [ "$(echo "$A" | code_of)" == 0 ]; then
    ok "PyTorch CUDA matmul inside: $(echo "$A" | out_of | grep . | tail -1)"
  else
    bad "PyTorch CUDA matmul inside: $(echo "$A" | out_of | tail -8 | tr '\n' ' ')"
    # what the sandbox lacks: the same on the host without /sys (sandboxes mount none)
    say "diagnosis: on the host without /sys: $(unshare -m sh -c 'umount -l /sys && "$0" -c "$1"' "$PY" "$MATMUL" 2>&1 | tail -2 | tr '\n' ' ')"
    A=$(run_in "$GID" "ls /proc/driver/nvidia 2>&1 | tr '\n' ' '; $(torch_py 'import torch; torch.zeros(1, device="cuda")') 2>&1 | tail -3")
    say "diagnosis: inside: $(echo "$A" | out_of | tr '\n' ' ')"
  fi
elif [ "$TORCH" == 1 ]; then
  bad "PyTorch matmul: $PY imports torch, but its base interpreter $BASE_EXE is outside /usr and $BASE_PREFIX"
else
  bad "PyTorch matmul: no python3 here imports torch (SBX_PYTHON)"
fi

# ---- 2. a sandbox without a GPU sees none; too many asked is refused ----
N=$(create '{"memory":"4Gi","network":"none"}')
NID=$(echo "$N" | js 'd.get("id","")')
PROBE="ls /dev | grep -c nvidia; $SMI -L >/dev/null 2>&1 && echo SMI-OK"
[ -n "$IN_PY" ] && PROBE+="; $(torch_py 'import torch; print("cuda", torch.cuda.is_available())') 2>&1 | tail -1"
A=$(run_in "$NID" "$PROBE" 300)
O=$(echo "$A" | out_of)
[ "$(echo "$O" | head -1)" == 0 ] && ! grep -q SMI-OK <<<"$O" && ! grep -q 'cuda True' <<<"$O" &&
  { [ -z "$IN_PY" ] || grep -q 'cuda False' <<<"$O"; } &&
  ok "a sandbox without a GPU sees none ($(echo "$O" | tr '\n' ' '))" || bad "the GPU-less sandbox: $O"
R=$(create "{\"gpus\":$TOTAL,\"network\":\"none\"}")
[ "$(echo "$R" | js 'd.get("code")')" == gpu_unavailable ] && ok "more GPUs than free: gpu_unavailable ($(echo "$R" | js 'd.get("message")'))" ||
  bad "more GPUs than free: $R"
api DELETE "/v1/sandboxes/$GID" >/dev/null
[ "$(api GET /v1/info | js 'd["gpus"]["free"]')" == "$TOTAL" ] && ok "delete freed the GPU" || bad "delete did not free the GPU"
api DELETE "/v1/sandboxes/$NID" >/dev/null

# ---- 3. a store image's GPU sandbox: the driver's files bound in where the toolkit puts them ----
# (a tiny image: sh, coreutils and the libraries nvidia-smi needs, copied from the host; no driver)
if MKIMAGE_LIBS_OF=$SMI "$PY" "$SRC/tests/integration/mkimage.py" rootfs "$T/img.tar" 2>"$T/mkimage.log" &&
  [ "$(api POST "/v1/images?name=gpu-check" "@$T/img.tar" | js 'str(d.get("name", d)).split(":")[0]')" == gpu-check ]; then
  I=$(create '{"image":"gpu-check","gpus":1,"memory":"1Gi","network":"none"}')
  IID=$(echo "$I" | js 'd.get("id","")')
  A=$(run_in "$IID" 'nvidia-smi -L && ls /usr/lib/*-linux-gnu | grep -c -e libcuda -e libnvidia')
  [ "$(echo "$A" | code_of)" == 0 ] && ok "nvidia-smi in a store image's GPU sandbox: $(echo "$A" | out_of | grep . | tr '\n' ' ')(driver files in its library directory)" ||
    bad "nvidia-smi in a store image's GPU sandbox ($IID): $(echo "$A" | out_of | tail -3 | tr '\n' ' ')"
  [ -n "$IID" ] && api DELETE "/v1/sandboxes/$IID" >/dev/null
else
  bad "the store image for the GPU check: $(tail -3 "$T/mkimage.log" | tr '\n' ' ')"
fi

# ---- 4. the reference loop with the trainer on CUDA ----
if [ "$DEVICE" == cuda ] && ! "$PY" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  bad "GRPO loop: $PY has no torch with CUDA"
  exit 1
fi
"$PY" "$SRC/trainer/server.py" --port 0 --port-file "$T/port" --device "$DEVICE" --seed 1 >"$T/trainer.log" 2>&1 &
TPID=$!
for _ in $(seq 600); do [ -s "$T/port" ] && break; kill -0 "$TPID" 2>/dev/null || break; sleep 0.1; done
[ -s "$T/port" ] || { tail -5 "$T/trainer.log" | sed 's/^/gpu-check: trainer: /'; bad "the trainer did not start on $DEVICE"; exit 1; }
URL=http://127.0.0.1:$(cat "$T/port")
"$BUNDLE/bin/sbx" grpo --host "$SOCK" --trainer "$URL" --tasks "$SRC/tasks/toy-files.jsonl" \
  --out "$T/train" --steps "$STEPS" --tasks-per-step 8 --group-size 8 --seed 3 \
  --gpu-hour-usd 2.0 >"$T/grpo.log" 2>&1 && ok "sbx grpo: $STEPS steps with the trainer on $DEVICE" ||
  { tail -5 "$T/grpo.log" | sed 's/^/gpu-check: grpo: /'; bad "sbx grpo"; }
"$PY" - "$URL" "$T/train" <<'PY' | tee -a "$REPORT"
import json, sys, urllib.request
st = json.load(urllib.request.urlopen(sys.argv[1] + "/v1/state"))
s = json.load(open(sys.argv[2] + "/summary.json"))
steps, wall = max(1, s.get("steps", 0)), s["seconds"]
gen, train = st["generation_seconds"], st["training_seconds"]
rest = max(0.0, wall - gen - train)
print(f"gpu-check: step time ({st['device']}), {steps} steps, {wall:.1f} s: per step {wall / steps:.2f} s"
      f" = generation {gen / steps:.3f} s + training {train / steps:.3f} s + sandboxes {rest / steps:.2f} s;"
      f" the GPU waits on tools {100 * rest / wall:.0f}% of the time; reward {s.get('first_reward_mean')} -> {s.get('last_reward_mean')}")
PY
cp "$T/train/summary.json" "$OUT/summary.json" 2>/dev/null
say "result: $([ $FAILED == 0 ] && echo all passed || echo FAILED)"
exit $FAILED
