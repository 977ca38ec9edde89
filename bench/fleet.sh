#!/usr/bin/env bash
# bench/fleet.sh: the fleet's numbers (docs/BENCHMARKS.md, "Fleet"), in the test world of
# tests/network/fleet_world.sh (etcd and three daemons, each in its own netns, HTTPS):
#   1. a create through a node that must forward it (drained: 307 to another node) next to a
#      create the node keeps (sequential, median and p90 over FLEET_BENCH_SEQ creates),
#   2. 3 x N concurrent creates through one endpoint, all running: wall time and how they
#      spread (N = FLEET_BENCH_N, default 128; each node's max is 1.5 x N, so there is room
#      left), once through node a's URL (a keeps what it can, then redirects) and once through
#      the fleet address (libsbx places by power of two choices),
#   3. placement balance: free slots per node after each burst,
#   4. how long a kill -9'd node takes to leave the fleet (its TTL: FLEET_TTL, default 5 s).
# Needs root, etcd, openssl, jq. Usage: sudo bench/fleet.sh [BUILD_DIR]
set -euo pipefail
SBX_SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
SBX_BUILD_DIR=$(cd "${1:-$SBX_SRC_DIR/build}" && pwd)
export SBX_SRC_DIR SBX_BUILD_DIR
fail() { echo "bench/fleet: FAIL: $*" >&2; exit 1; }
skip() { echo "bench/fleet: SKIPPED (prerequisite missing): $*" >&2; exit 77; }
bin() { echo "$SBX_BUILD_DIR/$1"; }
N=${FLEET_BENCH_N:-128}
SEQ=${FLEET_BENCH_SEQ:-20}
export FLEET_TTL=${FLEET_TTL:-5}
DAEMON_TAG=fleetbench DAEMON_LOG_LEVEL=info
source "$SBX_SRC_DIR/tests/lib/daemon.sh"
source "$SBX_SRC_DIR/tests/network/fleet_world.sh"

world_up
for i in 1 2 3; do
  n=$(printf "\\x$(printf %x $((96 + i)))")
  node_up "$n" "$i" --max-sandboxes $((N * 3 / 2)) --max-starting 16
done
wait_nodes "a b c" 20
wait_views "a b c" 20

py() {
  hub env SANDBOXD_LIBSBX="$(bin libsbx.so.0)" PYTHONPATH="$SBX_SRC_DIR/python" SBX_CA="$W/ca.pem" \
    SBX_TOKEN="$FLEET_TOKEN" python3 "$@"
}

echo "== 1. create: kept by the node vs forwarded (307) by a drained node ($SEQ each)"
seq_creates() { # URL LABEL
  py - "$1" "$2" "$SEQ" <<'PY'
import statistics, sys, time, sandboxd
url, label, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = sandboxd.Client(url)
for _ in range(2):  # warm-up: connections, TLS sessions, the image's first use
    sandboxd.Sandbox.create(client=c, memory="128Mi").terminate()
ms, nodes = [], {}
for _ in range(n):
    t = time.perf_counter()
    s = sandboxd.Sandbox.create(client=c, memory="128Mi")
    ms.append((time.perf_counter() - t) * 1000)
    node = s.id.split(".", 1)[1]
    nodes[node] = nodes.get(node, 0) + 1
    s.terminate()
ms.sort()
print(f"{label}: median {statistics.median(ms):.1f} ms, p90 {ms[int(len(ms) * 0.9) - 1]:.1f} ms, on {nodes}")
PY
}
seq_creates "https://${NODE_IP[a]}:7443" "local (through a, kept on a)"
sbxf node drain a
for _ in $(seq 50); do
  [ "$(fcurl a GET /v1/fleet | jq -r '.nodes[] | select(.name == "a") | .state')" == draining ] && break
  sleep 0.1
done
seq_creates "https://${NODE_IP[a]}:7443" "forwarded (through drained a)"
sbxf node undrain a
sleep 2

burst() { # ADDRESS LABEL
  echo "== 2. 3 x $N concurrent creates through $2"
  py - "$1" "$((3 * N))" <<'PY'
import concurrent.futures as cf, sys, time, sandboxd
url, total = sys.argv[1], int(sys.argv[2])
c = sandboxd.Client(url, max_threads=128)
def one(_):
    for attempt in range(60):  # a node that filled up meanwhile answers 503: retry, as clients do
        try:
            return sandboxd.Sandbox.create(client=c, memory="64Mi", cpu=0.1).id
        except sandboxd.NodeFull:
            time.sleep(0.25)
    raise RuntimeError("full after 60 attempts")
t = time.perf_counter()
with cf.ThreadPoolExecutor(128) as ex:
    ids = list(ex.map(one, range(total)))
wall = time.perf_counter() - t
per = {}
for i in ids:
    per[i.split(".", 1)[1]] = per.get(i.split(".", 1)[1], 0) + 1
print(f"{len(ids)} running in {wall:.1f} s ({len(ids) / wall:.1f}/s), per node {dict(sorted(per.items()))}")
PY
  echo "== 3. placement balance: free slots per node after the burst"
  sleep 1.5
  sbxf nodes
  local n
  for n in a b c; do # end the burst's sandboxes (through each node's socket)
    daemon_use "$n"
    curl -s --unix-socket "$SOCK" http://sd/v1/sandboxes | jq -r '.[] | select(.state != "ended") | .id' |
      xargs -r -P 16 -I{} curl -s -o /dev/null --unix-socket "$SOCK" -X DELETE "http://sd/v1/sandboxes/{}"
  done
  sleep 2
}
burst "https://${NODE_IP[a]}:7443" "one node's URL (a)"
burst "$(fleet_addr)" "the fleet address (client placement)"

echo "== 4. a kill -9'd node leaving the fleet (TTL ${FLEET_TTL} s)"
node_kill9 c
t0=$(date +%s.%N)
for _ in $(seq 400); do
  [ -n "$(etcdctl_ get --prefix "$FLEET_PREFIX/nodes/c" --keys-only)" ] || break
  sleep 0.05
done
t1=$(date +%s.%N)
printf 'node c gone from etcd after %.2f s\n' "$(echo "$t1 - $t0" | bc -l)"
