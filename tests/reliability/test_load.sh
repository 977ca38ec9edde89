#!/usr/bin/env bash
# Load: 128 sandboxes churning (create, exec, file upload and download, exec, destroy, again)
# against a real daemon for $SBX_LOAD_SECONDS (default 120) seconds. Every request must
# succeed; the daemon's RSS and fd count are sampled every 2 s and must stay flat (after a
# warm-up) and come back once everything is destroyed; nothing may be left behind. Prints
# p50/p99/max latency per operation and the throughput (docs/RELIABILITY.md has a longer run).

source "$(dirname "$0")/rel.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
export HERE

TEST_TIMEOUT_churn_128=$(( ${SBX_LOAD_SECONDS:-120} + 150 ))
TEST_PASS_churn_128=sanitized # the long load runs once: under ASan+UBSan (tests/README.md)
test_churn_128() {
  rel_setup
  local secs=${SBX_LOAD_SECONDS:-120} workers=${SBX_LOAD_WORKERS:-128}
  ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16" start_daemon --max-sandboxes $((workers + 16))
  local fresh_fds fresh_rss; fresh_fds=$(daemon_fds); fresh_rss=$(daemon_rss_kb)
  ( while kill -0 "$DPID" 2>/dev/null; do
      echo "$(date +%s) $(daemon_rss_kb) $(daemon_fds)"; sleep 2
    done ) >"$D/samples" 2>/dev/null &
  local sampler=$!
  D=$D "$PY" - "$SOCK" "$secs" "$workers" <<'PY' || { kill "$sampler"; fail "the load run had errors"; }
import os, sys, threading, time
sys.path.insert(0, os.environ["HERE"])
import sdclient
sock, secs, workers = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
T = sdclient.Timer()
errors, cycles, lock = [], [0], threading.Lock()
deadline = time.monotonic() + secs

def check(r, status, what):
    if r.status != status:
        raise RuntimeError("%s: HTTP %d %s" % (what, r.status, r.body[:200]))
    return r

def worker(k):
    payload = os.urandom(4096 + k)
    while time.monotonic() < deadline and not errors:
        try:
            r = check(T.time("create", sdclient.request, sock, "POST", "/v1/sandboxes",
                             {"memory": "64Mi", "cpu": 0.1, "labels": {"w": str(k)}}), 201, "create")
            sid = r.json()["id"]
            base = "/v1/sandboxes/" + sid
            r = check(T.time("exec", sdclient.request, sock, "POST", base + "/exec",
                             {"argv": ["sh", "-c", "echo $((6*7))"]}), 200, "exec")
            if r.json()["stdout"] != "42\n":
                raise RuntimeError("exec output %r" % r.body[:200])
            check(T.time("put", sdclient.request, sock, "PUT", base + "/files?path=/workspace/f.bin",
                         payload, {"Content-Type": "application/octet-stream"}), 204, "put")
            r = check(T.time("get", sdclient.request, sock, "GET", base + "/files?path=/workspace/f.bin"),
                      200, "get")
            if r.body != payload:
                raise RuntimeError("file round trip differs")
            r = check(T.time("exec", sdclient.request, sock, "POST", base + "/exec",
                             {"argv": ["wc", "-c", "/workspace/f.bin"]}), 200, "exec2")
            if not r.json()["stdout"].startswith(str(len(payload))):
                raise RuntimeError("exec2 output %r" % r.body[:200])
            check(T.time("delete", sdclient.request, sock, "DELETE", base), 204, "delete")
            with lock:
                cycles[0] += 1
        except Exception as e:
            with lock:
                errors.append("worker %d: %s" % (k, e))

t0 = time.monotonic()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(workers)]
[t.start() for t in ts]
[t.join() for t in ts]
el = time.monotonic() - t0
print("%d workers, %.0f s: %d sandbox cycles (%.1f/s), %d errors" % (workers, el, cycles[0], cycles[0] / el, len(errors)))
open(os.environ["D"] + "/cycles", "w").write(str(cycles[0]))
print(T.report())
for e in errors[:10]: print("ERROR", e)
sys.exit(1 if errors or cycles[0] < workers else 0)
PY
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  # flat: after a warm-up of a quarter of the run, the last samples are not above the early ones
  local n; n=$(wc -l <"$D/samples")
  [ "$n" -ge 8 ] || fail "too few samples ($n)"
  local q=$(( n / 4 ))
  local early_rss late_rss early_fds late_fds
  early_rss=$(sed -n "$((q + 1)),$((2 * q))p" "$D/samples" | awk '{print $2}' | sort -n | tail -1)
  late_rss=$(tail -n "$q" "$D/samples" | awk '{print $2}' | sort -n | tail -1)
  # the fd count moves with the requests in flight at the sample (one sample of 220 against a
  # warm maximum of 190 was seen, with no leak): a leak moves the whole window, so the windows'
  # medians are compared; the exact leak check is the one after the run (fresh + 2)
  early_fds=$(sed -n "$((q + 1)),$((2 * q))p" "$D/samples" | awk '{print $3}' | sort -n | sed -n "$(( (q + 1) / 2 ))p")
  late_fds=$(tail -n "$q" "$D/samples" | awk '{print $3}' | sort -n | sed -n "$(( (q + 1) / 2 ))p")
  echo "daemon RSS KiB: fresh $fresh_rss, warm max $early_rss, late max $late_rss; fds: fresh $fresh_fds, warm median $early_fds, late median $late_fds"
  # Ended sandboxes stay listed for 10 minutes (docs/API.md), each a few KiB: allow 8 KiB per
  # sandbox destroyed during the run, beyond that the RSS must not grow.
  local cycles; cycles=$(cat "$D/cycles")
  local allow=$(( early_rss + early_rss / 5 + 8192 + 8 * cycles ))
  echo "RSS allowance $allow KiB ($cycles ended sandboxes retained, 8 KiB each)"
  [ "$late_rss" -le "$allow" ] || fail "daemon RSS grew under load: $early_rss -> $late_rss KiB"
  [ "$late_fds" -le $(( early_fds + early_fds / 10 + 8 )) ] || fail "daemon fds grew under load: $early_fds -> $late_fds"
  wait_no_leaks 30
  sleep 1
  [ "$(daemon_fds)" -le $((fresh_fds + 2)) ] || { ls -l "/proc/$DPID/fd" >&2; fail "daemon fds after the run: $(daemon_fds), fresh: $fresh_fds"; }
  req GET /metrics
  grep -E '^sandboxd_sandbox_creates_total|^sandboxd_execs_total' "$D/body"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
