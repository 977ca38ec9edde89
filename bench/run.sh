#!/usr/bin/env bash
# bench/run.sh: `make bench`. Measures sandboxd side by side with its peers (plain fork+exec,
# bubblewrap, crun, Docker when installed) in one run and reports p50/p99 and ratios (never
# pass/fail on timings).
# Usage: bench/run.sh [BUILD_DIR]. Knobs (environment): SBX_BENCH_N (iterations of the slow
# loops, default 100), SBX_BENCH_NFAST (fast loops, default 500), SBX_BENCH_BURST (128),
# SBX_BENCH_BURST_ROUNDS (3), SBX_BENCH_IDLE (1000), SBX_BENCH_IDLE_BODY (the idle sandboxes'
# create body, default {}), SBX_BENCH_DAEMON_ARGS (extra daemon flags),
# SBX_BENCH_POOL (0: no warm-pool rows; else bench/pool.sh runs, a pool of max(N, BURST)).
# Writes bench/results/latest.{md,json}; needs root (crun, bwrap --unshare-all, the daemon).
set -euo pipefail

B=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${SBX_BENCH_N:-100}
NFAST=${SBX_BENCH_NFAST:-500}
BURST=${SBX_BENCH_BURST:-128}
BURST_ROUNDS=${SBX_BENCH_BURST_ROUNDS:-3}
IDLE=${SBX_BENCH_IDLE:-1000}
OUTDIR=$ROOT/bench/results
if [ "$(id -u)" -ne 0 ]; then
  echo "bench: needs root (crun, unshare, mounts, the daemon's cgroups): sudo make bench" >&2
  exit 1
fi
source "$ROOT/bench/common.sh"

# ---- peers ----
log "peers: fork+exec+wait of /bin/true, bubblewrap, crun"
run_lat spawn spawn.true "$NFAST" /bin/true
if command -v bwrap >/dev/null; then
  run_lat spawn spawn.bwrap "$N" "${BWRAP[@]}"
else
  loud "bubblewrap is not installed (make deps)"
fi

if crun_init; then
  crun_bundle "$T/bundle" '["/usr/bin/true"]'
  CRUN=(crun --root "$CRUN_ROOT" run --bundle "$T/bundle" 'sbxbench-crun-{i}')
  ${CRUN_WRAP[@]+"${CRUN_WRAP[@]}"} "$LAT" spawn spawn.crun "$N" "${CRUN[@]}" | tee -a "$RES" >&2
fi

# Docker (Debian's docker.io, a bench-only peer) when dockerd and docker are installed
source "$ROOT/bench/docker.sh"
docker_bench
# the floor of an attached round trip (issue 14): one line through `cat` on local pipes
if attach_rtt_build; then "$RTT" pipe attach.rtt.pipe "$NFAST" cat | tee -a "$RES" >&2; fi

# ---- sandboxd ----
# The daemon caps sandboxes by default (memory / 256 MiB); raise the cap so that the burst and
# the idle test meet the node's real limits, and say so.
CAP_ARGS=()
if [ -x "$B/sandboxd" ] && "$B/sandboxd" --help 2>&1 | grep -q -- --max-sandboxes; then
  CAP_ARGS=(--max-sandboxes $((IDLE > BURST ? IDLE + 16 : BURST + 16)))
  note "the daemon runs with \`${CAP_ARGS[*]}\` (its default cap is host memory / 256 MiB) and its default \`--max-starting\` (2 × CPUs); extra flags: \`${SBX_BENCH_DAEMON_ARGS:-none}\`."
fi

DAEMON_OK=0
if [ ! -x "$B/sandboxd" ] || [ ! -x "$B/sbx-shim" ]; then
  loud "sandboxd sections: $B/sandboxd or $B/sbx-shim is missing (run make)"
elif [ ! -f policy/seccomp.json ]; then
  loud "sandboxd sections: policy/seccomp.json is missing (the seccomp branch has not landed)"
elif ! start_daemon "${CAP_ARGS[@]}"; then
  loud "sandboxd sections: $B/sandboxd did not become healthy: $(tail -n 3 "$T/daemon.log" | tr '\n' ' ')" \
    "the table below has the peers only"
else
  DAEMON_OK=1
fi

if [ "$DAEMON_OK" = 1 ]; then
  SOCK=$T/sock
  log "sandboxd (pid $DPID): create -> exec true -> delete"
  # bwrap runs once before each cycle (reported as api.cycle.peer): both see the same load
  run_lat cycle api.cycle "$N" "$SOCK" '{}' -- "${BWRAP[@]}" || note "api.cycle failed (see stderr)"
  if [ -x "$B/sbx" ]; then
    SBX_HOST=unix:$SOCK run_lat spawn spawn.sbx_run "$N" "$B/sbx" run -- true ||
      note "\`sbx run -- true\` failed (see stderr)"
    # the CLI's own start, and a command in a running sandbox, as whole processes
    run_lat spawn spawn.sbx_version "$NFAST" "$B/sbx" --version || note "\`sbx --version\` failed"
    EXEC_ID=$(curl -s --max-time 30 --unix-socket "$SOCK" -X POST -d '{}' http://x/v1/sandboxes |
      grep -o '"id":"sb-[^"]*"' | head -n 1 | cut -d'"' -f4)
    if [ -n "$EXEC_ID" ]; then
      SBX_HOST=unix:$SOCK run_lat spawn spawn.sbx_exec "$N" "$B/sbx" exec "$EXEC_ID" -- true ||
        note "\`sbx exec ID -- true\` failed (see stderr)"
      # attached round trips of one line through `cat`, next to `docker exec -i C cat`
      if attach_rtt_build; then
        "$RTT" sbx attach.rtt.libsbx "$NFAST" "$SOCK" "$EXEC_ID" | tee -a "$RES" >&2 ||
          note "attached round trip through libsbx failed (see stderr)"
        SBX_HOST=unix:$SOCK "$RTT" pipe attach.rtt.cli "$N" "$B/sbx" exec -i "$EXEC_ID" -- cat |
          tee -a "$RES" >&2 || note "\`sbx exec -i ID -- cat\` failed (see stderr)"
      fi
      curl -s --max-time 30 --unix-socket "$SOCK" -X DELETE "http://x/v1/sandboxes/$EXEC_ID" >/dev/null
    else
      note "\`sbx exec ID -- true\`: the sandbox for it could not be created"
    fi
  fi
  log "sandboxd: exec round trip"
  run_lat exec api.exec "$NFAST" "$SOCK" -- /bin/true || note "api.exec failed (see stderr)"
  # the same from Python (http.client) next to Python's own floor, subprocess.run (issue 28 goal 4)
  python3 bench/exec_floor.py --json api.exec_py "$SOCK" "$NFAST" | tee -a "$RES" >&2 ||
    note "bench/exec_floor.py failed (see stderr)"
  log "sandboxd: $BURST creates at once"
  run_lat burst api.burst "$BURST_ROUNDS" "$BURST" "$SOCK" '{}' || note "api.burst failed (see stderr)"
  log "sandboxd: $IDLE idle sandboxes"
  run_lat idle api.idle "$IDLE" "$SOCK" "$DPID" "$(realpath "$B/sbx-shim")" "$CGPARENT" \
    "${SBX_BENCH_IDLE_BODY:-{\}}" ||
    note "api.idle failed (see stderr)"
  # GRPO hook: bench/grpo.sh BUILD SOCK prints JSON lines named grpo.concurrent (128 episodes
  # in flight) and grpo.sequential (one at a time), in lat's format. Owned by the GRPO engineer.
  if [ -x bench/grpo.sh ]; then
    log "sandboxd: GRPO step"
    bench/grpo.sh "$B" "$SOCK" | tee -a "$RES" >&2 || note "bench/grpo.sh failed"
  else
    note "GRPO step (128 episodes in flight vs one at a time): not measured; bench/grpo.sh is not there yet."
  fi
  if [ "${SBX_BENCH_POOL:-1}" != 0 ]; then
    # bench/pool.sh: daemons of its own with a warm pool it waits to be full (the cycle next to
    # bwrap, 128 creates at once from the pool, the networked pool in a private netns)
    stop_daemon
    log "sandboxd with a warm pool (bench/pool.sh)"
    bench/pool.sh "$B" >>"$RES" || note "bench/pool.sh failed (see stderr)"
  else
    note "no warm-pool rows: SBX_BENCH_POOL=0."
  fi
  stop_daemon

  # The same cycle with the run dir on a tmpfs, as /run is in production ($T/run is on /tmp,
  # which may be a disk): how much of a create is file system work there.
  mkdir -p "$T/runfs"
  if mount -t tmpfs -o mode=0755 sbxbench "$T/runfs"; then
    log "sandboxd: run dir on tmpfs"
    if RUN_DIR=$T/runfs start_daemon "${CAP_ARGS[@]}"; then
      run_lat cycle api.cycle_tmpfs "$N" "$SOCK" '{}' -- "${BWRAP[@]}" ||
        note "api.cycle_tmpfs failed (see stderr)"
      stop_daemon
    fi
    umount -l "$T/runfs"
  fi

  # Networking: a second daemon with networking on ({"network":{"enabled":true}}), inside a
  # private network namespace (only lo; no uplink, so nothing can leave the machine), where
  # its nftables table, veths and NAT live. Both modes are measured against that daemon.
  log "sandboxd: network open vs none (daemon in a private network namespace)"
  echo '{"network":{"enabled":true}}' >"$T/net.json"
  DAEMON_WRAP=(unshare -n -- bash -c 'ip link set lo up && exec "$@"' _)
  if start_daemon "${CAP_ARGS[@]}" --config "$T/net.json"; then
    run_lat cycle api.netns_none "$N" "$SOCK" '{}' || note "creates with network none failed"
    run_lat cycle api.cycle_net_open "$N" "$SOCK" '{"network":"open"}' ||
      note "creates with network \`open\` failed (see stderr)"
    stop_daemon
    note "network rows: a second daemon with \`{\"network\":{\"enabled\":true}}\`, run in a private network namespace (\`unshare -n\`, only lo); \`open\` is compared with \`none\` on that same daemon."
  else
    note "network rows skipped: the daemon did not start with networking on: $(tail -n 2 "$T/daemon.log" | tr '\n' ' ')"
  fi
  unset DAEMON_WRAP
fi

# ---- report ----
source "$ROOT/bench/report.sh"
mkdir -p "$OUTDIR"
report_md >"$OUTDIR/latest.md"
report_json >"$OUTDIR/latest.json"
cat "$OUTDIR/latest.md"
log "wrote $OUTDIR/latest.md and latest.json"
