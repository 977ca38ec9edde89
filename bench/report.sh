# shellcheck shell=bash
# bench/report.sh: turns bench/run.sh's JSON lines ($RES) and notes ($NOTES) into the Markdown
# report (report_md) and the JSON file (report_json). Sourced by run.sh; ratios with awk.

# jget NAME FIELD: a field of the result line named NAME (empty when absent).
jget() {
  grep -F "\"name\":\"$1\"," "$RES" 2>/dev/null | head -n 1 |
    sed -n "s/.*\"$2\":\"\{0,1\}\([^,}\"]*\).*/\1/p" || true
}
ratio() { # ratio A B: A / B with two decimals, empty if either is missing
  [ -n "$1" ] && [ -n "$2" ] || return 0
  awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b }'
}
le() { awk -v a="$1" -v b="$2" 'BEGIN{ exit !(a <= b) }'; }

# row NAME LABEL [PEER PEERLABEL]
row() {
  local n p50 p99 r=""
  n=$(jget "$1" n)
  [ -n "$n" ] && [ "$n" != 0 ] || return 0
  p50=$(jget "$1" p50_ms)
  p99=$(jget "$1" p99_ms)
  [ -z "${3:-}" ] || r=$(ratio "$p50" "$(jget "$3" p50_ms)")
  echo "| $2 | $n | $p50 | $p99 | ${4:-} | ${r:+${r}×} |"
}

machine() {
  local mode=v2
  [ "$(stat -f -c %T /sys/fs/cgroup)" = tmpfs ] && mode="v1 (hybrid: cgroup2 at /sys/fs/cgroup/unified)"
  echo "- date: $(date -u +%Y-%m-%dT%H:%MZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- CPUs: $(nproc) ($(awk -F': ' '/model name/{print $2; exit}' /proc/cpuinfo))"
  echo "- memory: $(awk '/MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "- kernel: $(uname -r); cgroup mode: $mode"
  echo "- peers: $(bwrap --version 2>/dev/null || echo 'bwrap missing'), $(crun --version 2>/dev/null | head -n 1 || echo 'crun missing'), $(dockerd --version 2>/dev/null || echo 'dockerd missing (apt-get install docker.io)')"
  echo "- command: \`make bench\` (SBX_BENCH_N=$N SBX_BENCH_NFAST=$NFAST SBX_BENCH_BURST=$BURST SBX_BENCH_BURST_ROUNDS=$BURST_ROUNDS SBX_BENCH_IDLE=$IDLE${SBX_BENCH_POOL:+ SBX_BENCH_POOL=$SBX_BENCH_POOL})"
}

# goal LABEL VALUE LIMIT UNIT: one line of the goals table
goal() {
  local verdict="not measured"
  if [ -n "$2" ]; then
    if le "$2" "$3"; then verdict="**reached**"; else verdict="**not reached**"; fi
  fi
  echo "| $1 | ${2:-–}${2:+ $4} | ≤ $3 $4 | $verdict |"
}

goals() {
  local bw cold pool exec burst idle net
  # the interleaved peers when there are (same load), else the peers measured alone
  bw=$(jget api.cycle.peer p50_ms)
  [ -n "$bw" ] || bw=$(jget spawn.bwrap p50_ms)
  cold=$(ratio "$(jget api.cycle p50_ms)" "$bw")
  pool=$(ratio "$(jget api.cycle_pool p50_ms)" "$(jget api.cycle_pool.peer p50_ms)")
  local fe
  fe=$(jget api.exec.peer p50_ms)
  [ -n "$fe" ] || fe=$(jget spawn.true p50_ms)
  exec=$(ratio "$(jget api.exec p50_ms)" "$fe")
  burst=$(jget api.burst p50_ms)
  local bpool
  bpool=$(jget api.burst_pool p50_ms)
  idle=$(awk -v b="$(jget api.idle per_sandbox_bytes)" 'BEGIN{ if (b != "") printf "%.3f", b / 1048576 }')
  net=$(jget api.cycle_pool_net_open.create p50_ms)
  local poolnote="" netnote=""
  if [ -z "$pool" ] && [ -n "$cold" ]; then # no pool in this daemon: judge the cold value
    pool=$cold poolnote=" (no pool: cold value)"
  fi
  if [ -z "$net" ] && [ -n "$(jget api.cycle_net_open.create p50_ms)" ]; then
    net=$(jget api.cycle_net_open.create p50_ms) netnote=" (no pool: cold value)"
  fi
  echo "| goal | measured | target | verdict |"
  echo "|---|---|---|---|"
  goal "create → \`true\` done → destroy, from a pool, p50 vs bwrap$poolnote" "$pool" 0.5 "×"
  goal "create → \`true\` done → destroy, cold, p50 vs bwrap" "$cold" 1.0 "×"
  goal "command round trip p50 vs fork+exec+wait of \`true\`" "$exec" 1.3 "×"
  goal "the same from Python (http.client) vs \`subprocess.run(['/bin/true'])\`" \
    "$(ratio "$(jget api.exec_py p50_ms)" "$(jget api.exec_py.peer p50_ms)")" 1.3 "×"
  goal "$BURST creates at once from a full pool, all ready (p50 of 3 rounds)" "$bpool" 300 ms
  goal "$BURST creates at once, cold, all ready (p50 of $BURST_ROUNDS rounds)" "$burst" 300 ms
  local made
  made=$(jget api.idle sandboxes)
  goal "memory per idle sandbox${made:+ ($made of $IDLE asked)}" "$idle" 1 MiB
  goal "networked (\`open\`) create from a pool, p50$netnote" "$net" 5 ms
  goal "\`sbx exec ID -- true\`, whole process, p50" "$(jget spawn.sbx_exec p50_ms)" 5 ms
}

# i18row LABEL OURS PEER PEERLABEL GOAL DOCKER: one line of the issue-18 table (p50s, ms)
i18row() {
  local o p d r rd
  o=$(jget "$2" p50_ms)
  [ -n "$o" ] || return 0
  p=$(jget "$3" p50_ms)
  d=$(jget "$6" p50_ms)
  r=$(ratio "$o" "$p")
  rd=$(ratio "$o" "$d")
  echo "| $1 | $o | ${p:+$4 $p} | ${r:+${r}×} | $5 | ${d:-not measured} | ${rd:+${rd}×} |"
}

# the speed issue's table (issue 18), with Docker as the fourth column when it was measured
issue18() {
  echo "| cycle | sandboxd p50 | peer p50 (same run) | ratio | goal | Docker p50 | sandboxd / Docker |"
  echo "|---|---|---|---|---|---|---|"
  i18row "create → exec \`true\` → delete, pooled" api.cycle_pool api.cycle_pool.peer "bwrap, interleaved," "≤ 0.5×" spawn.docker_run
  i18row "same, cold" api.cycle api.cycle.peer "bwrap, interleaved," "≤ 1.0×" spawn.docker_run
  i18row "exec round trip in a running sandbox" api.exec api.exec.peer "fork+exec, interleaved," "≤ 1.3×" spawn.docker_exec
  i18row "the same from Python" api.exec_py api.exec_py.peer "subprocess.run, interleaved," "≤ 1.3×" spawn.docker_exec
  i18row "\`sbx exec ID -- true\`, whole process" spawn.sbx_exec spawn.true "fork+exec" "≤ 5 ms" spawn.docker_exec
  i18row "attached round trip of a line (libsbx)" attach.rtt.libsbx attach.rtt.pipe "local pipes" "" attach.rtt.docker
  i18row "attached round trip of a line (\`sbx exec -i\`)" attach.rtt.cli attach.rtt.pipe "local pipes" "" attach.rtt.docker
}

report_md() {
  echo "# sandboxd benchmarks: latest run"
  echo
  machine
  echo
  if grep -q SKIPPED "$NOTES"; then
    echo "**Some sections were SKIPPED; see Notes at the end.**"
    echo
  fi
  echo "## Latency (ms; ratio = p50 / the peer's p50)"
  echo
  echo "| measurement | n | p50 | p99 | peer | ratio |"
  echo "|---|---|---|---|---|---|"
  row spawn.true "fork + exec + wait of \`/bin/true\`"
  row spawn.bwrap "bwrap --unshare-all … \`true\` (whole process)" spawn.true "fork+exec"
  row spawn.crun "crun run \`true\` (whole process, OCI bundle)" spawn.true "fork+exec"
  row api.cycle "sandboxd API: create → exec \`true\` → delete (cold)" api.cycle.peer "bwrap, interleaved"
  row api.cycle.peer "… bwrap \`true\` run before each of those cycles (interleaved)" spawn.bwrap "bwrap, alone"
  row api.cycle_pool "sandboxd API: create → exec \`true\` → delete (pool)" api.cycle_pool.peer "bwrap, interleaved"
  row api.cycle_pool.create "… of which create (a hand-out from the pool)" api.cycle_pool.peer "bwrap, interleaved"
  row api.cycle_pool.exec "… of which the first exec \`true\` in the sandbox" api.exec "exec in a running sandbox"
  row api.cycle_pool.delete "… of which delete" api.cycle_pool.peer "bwrap, interleaved"
  row spawn.sbx_run "\`sbx run -- true\` (whole process)" spawn.bwrap bwrap
  row spawn.sbx_exec "\`sbx exec ID -- true\` in a running sandbox (whole process)" spawn.true "fork+exec"
  row spawn.sbx_version "\`sbx --version\` (the CLI's start alone)" spawn.true "fork+exec"
  row api.cycle.create "… of which create (POST /v1/sandboxes)" spawn.bwrap bwrap
  row api.cycle.exec "… of which exec \`true\`" spawn.true "fork+exec"
  row api.cycle.delete "… of which delete" spawn.bwrap bwrap
  row api.cycle_tmpfs "create → exec → delete with the run dir on tmpfs (as /run in production)" api.cycle_tmpfs.peer "bwrap, interleaved"
  row api.cycle_tmpfs.create "… of which create (run dir on tmpfs)" api.cycle.create "run dir on /tmp"
  row api.exec "command round trip: POST exec \`true\` in a running sandbox" api.exec.peer "fork+exec, interleaved"
  row api.exec.peer "… fork + exec + wait of \`/bin/true\` before each round trip (interleaved)" spawn.true "fork+exec, alone"
  row api.exec_py "the same round trip from Python (http.client, keep-alive)" api.exec_py.peer "subprocess.run, interleaved"
  row api.exec_py.peer "… \`subprocess.run(['/bin/true'])\` (vfork) between those round trips" api.exec.peer "fork+exec, interleaved"
  row api.burst "$BURST creates at once: until all are ready (per round)"
  row api.burst.each "… each create's latency within the burst"
  row api.burst.delete_all "… then deleting them (32 at a time)"
  row api.burst_pool "$BURST creates at once from a full pool of $BURST: until all are ready (per round)"
  row api.netns_none.create "networking daemon: create with network \`none\`" api.cycle.create "default daemon"
  row api.cycle_net_open.create "networking daemon: create with network \`open\` (cold)" api.netns_none.create "network none"
  row api.cycle_net_open "networking daemon: create(\`open\`) → exec → delete" api.netns_none "network none"
  row api.cycle_pool_net_open.create "create with network \`open\` (pool)" api.cycle_pool.create "none, pool"
  row spawn.docker_run "\`docker run --rm --network none IMG true\` (whole client process)" spawn.bwrap bwrap
  row spawn.docker_exec "\`docker exec C true\` in a running container (whole client process)" spawn.true "fork+exec"
  row attach.rtt.pipe "attached round trip: one line through \`cat\` on local pipes (the floor)"
  row attach.rtt.libsbx "attached round trip through libsbx (\`sbx_process\`, WebSocket)" attach.rtt.pipe pipes
  row attach.rtt.cli "attached round trip through \`sbx exec -i ID -- cat\`" attach.rtt.pipe pipes
  row attach.rtt.docker "attached round trip through \`docker exec -i C cat\`" attach.rtt.pipe pipes
  row grpo.concurrent "GRPO step, 128 episodes in flight" grpo.sequential "one at a time"
  row grpo.sequential "GRPO step, one episode at a time"
  echo
  if [ -n "$(jget api.idle sandboxes)" ]; then
    echo "## Idle sandboxes"
    echo
    awk -v s="$(jget api.idle sandboxes)" -v k="$(jget api.idle requested)" \
      -v pss="$(jget api.idle pss_bytes)" -v km="$(jget api.idle kmem_bytes)" \
      -v per="$(jget api.idle per_sandbox_bytes)" -v r0="$(jget api.idle daemon_rss_before_bytes)" \
      -v r1="$(jget api.idle daemon_rss_bytes)" -v procs="$(jget api.idle procs)" \
      -v t="$(jget api.idle create_all_ms)" 'BEGIN{
      M = 1048576
      printf "| sandboxes (asked %d) | processes | PSS total | kernel memory (cgroups) | per sandbox | daemon RSS before → after | time to create all |\n", k
      print "|---|---|---|---|---|---|---|"
      printf "| %d | %d | %.1f MiB | %s | %.3f MiB | %.1f → %.1f MiB | %.0f ms |\n", s, procs, pss / M,
        (km < 0 ? "n/a" : sprintf("%.1f MiB", km / M)), per / M, r0 / M, r1 / M, t }'
    echo
  fi
  echo "## The speed issue's table (issue 18; Docker: \`docker run --rm\`, \`docker exec\`, \`docker exec -i\`)"
  echo
  issue18
  echo
  echo "## Goals"
  echo
  goals
  echo
  if [ -s "$NOTES" ]; then
    echo "## Notes"
    echo
    cat "$NOTES"
    echo
  fi
}

report_json() {
  echo "{\"machine\":{\"nproc\":$(nproc),\"mem_kib\":$(awk '/MemTotal/{print $2}' /proc/meminfo),\"kernel\":\"$(uname -r)\",\"cgroup_fs\":\"$(stat -f -c %T /sys/fs/cgroup)\"},"
  echo "\"results\":["
  sed '$!s/$/,/' "$RES"
  echo "]}"
}
