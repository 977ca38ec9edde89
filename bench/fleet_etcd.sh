#!/usr/bin/env bash
# bench/fleet_etcd.sh: what each fleet node costs etcd (docs/FLEET.md "What a node costs
# etcd"), the old way (--fleet-read poll: four prefix reads a second) next to the watch
# (--fleet-read watch, the default), for fleets of FLEET_ETCD_NODES nodes (default "3 30").
# The nodes are real daemons (--max-sandboxes 1, idle: no sandbox is made) in one private
# network namespace with a real etcd on its loopback; each run gets its own key prefix. After
# every node sees the whole fleet and a settling second, a window of FLEET_ETCD_WINDOW seconds
# (default 20) is measured three ways:
#   - etcd's own counters (/metrics): calls started (grpc_server_started_total, every method:
#     each call to the JSON gateway is one, a lease keepalive too; a watch stream counts once,
#     when it opens), watch messages sent (grpc_server_msg_sent_total for Watch), protobuf
#     bytes sent (etcd_network_client_grpc_sent_bytes_total);
#   - the bytes on the wire, from nft counters in the namespace (IP packets from and to port
#     2379: the HTTP/JSON the nodes really get, base64 and headers included).
# The modes are interleaved (poll, watch, poll, watch... FLEET_ETCD_ROUNDS rounds, default 2).
# Needs root, etcd, jq, nft. Usage: sudo bench/fleet_etcd.sh [BUILD_DIR]
set -euo pipefail
SBX_SRC_DIR=$(cd "$(dirname "$0")/.." && pwd)
SBX_BUILD_DIR=$(cd "${1:-$SBX_SRC_DIR/build}" && pwd)
export SBX_SRC_DIR SBX_BUILD_DIR
fail() { echo "bench/fleet_etcd: FAIL: $*" >&2; exit 1; }
skip() { echo "bench/fleet_etcd: SKIPPED (prerequisite missing): $*" >&2; exit 77; }
require_root() { [ "$(id -u)" == 0 ] || skip "root is needed"; }
SIZES=${FLEET_ETCD_NODES:-3 30}
WINDOW=${FLEET_ETCD_WINDOW:-20}
ROUNDS=${FLEET_ETCD_ROUNDS:-2}
DAEMON_TAG=fleetetcd DAEMON_LOG_LEVEL=info DAEMON_WAIT_S=30
source "$SBX_SRC_DIR/tests/lib/daemon.sh"
for c in etcd jq nft; do command -v $c >/dev/null || skip "$c is needed"; done
require_root
daemon_netns
NS=(nsenter "--net=/proc/$NSPID/ns/net")
ETCD_PID=''
etcd_down() { [ -n "$ETCD_PID" ] && kill "$ETCD_PID" 2>/dev/null && wait "$ETCD_PID" 2>/dev/null; ETCD_PID=''; }
daemon_at_exit etcd_down
"${NS[@]}" etcd --name b --data-dir "$DAEMON_ROOT/etcd" --listen-client-urls http://127.0.0.1:2379 \
  --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
  --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster b=http://127.0.0.1:2380 \
  >"$DAEMON_ROOT/etcd.log" 2>&1 &
ETCD_PID=$!
for _ in $(seq 100); do "${NS[@]}" curl -s --max-time 1 http://127.0.0.1:2379/health | grep -q true && break; sleep 0.1; done
"${NS[@]}" nft -f - <<'NFT'
table inet sbxbench {
  chain out {
    type filter hook output priority 0;
    tcp sport 2379 counter
    tcp dport 2379 counter
  }
}
NFT

# etcd's counters: "calls watch_msgs grpc_bytes" (sums over methods)
etcd_counters() {
  "${NS[@]}" curl -s http://127.0.0.1:2379/metrics | awk '
    /^grpc_server_started_total/ {u += $2}
    /^grpc_server_msg_sent_total/ && /grpc_method="Watch"/ {w += $2}
    /^etcd_network_client_grpc_sent_bytes_total/ {b += $2}
    END {printf "%d %d %d\n", u, w, b}'
}
wire_bytes() { # "from_etcd to_etcd" (IP bytes)
  "${NS[@]}" nft -j list chain inet sbxbench out |
    jq -r '[.nftables[] | .rule? // empty | .expr[] | .counter? // empty | .bytes] | "\(.[0]) \(.[1])"'
}

run() { # MODE N ROUND
  local mode=$1 n=$2 round=$3 i names=() prefix="/bench-$1-$2-$3"
  for i in $(seq "$n"); do
    names+=("n$i")
    daemon_start "n$i" --fleet-etcd http://127.0.0.1:2379 --fleet-prefix "$prefix" \
      --node-name "n$i" --advertise-url "https://127.0.0.1:$((9000 + i))" --max-sandboxes 1 \
      --fleet-read "$mode"
  done
  for i in "${names[@]}"; do # every node sees all n
    daemon_use "$i"
    for _ in $(seq 300); do
      [ "$(curl -s --unix-socket "$SOCK" http://sd/v1/fleet | jq '.nodes | length')" == "$n" ] && break
      sleep 0.1
    done
  done
  sleep 1
  local c0 c1 w0 w1
  c0=$(etcd_counters)
  w0=$(wire_bytes)
  sleep "$WINDOW"
  w1=$(wire_bytes)
  c1=$(etcd_counters)
  local load
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  for i in "${names[@]}"; do daemon_use "$i"; stop_daemon; done
  # per node and second
  read -r u0 m0 b0 <<<"$c0"
  read -r u1 m1 b1 <<<"$c1"
  read -r o0 i0 <<<"$w0"
  read -r o1 i1 <<<"$w1"
  awk -v mode="$mode" -v n="$n" -v r="$round" -v t="$WINDOW" -v u=$((u1 - u0)) -v m=$((m1 - m0)) \
    -v b=$((b1 - b0)) -v o=$((o1 - o0)) -v in_=$((i1 - i0)) -v load="$load" 'BEGIN {
      printf "%-5s N=%-3d round %d: per node: %6.2f calls/s, %6.2f watch msgs/s, etcd gRPC out %9.0f B/s, wire out %9.0f B/s, wire in %7.0f B/s (load %s)\n",
        mode, n, r, u / t / n, m / t / n, b / t / n, o / t / n, in_ / t / n, load
      printf "{\"mode\":\"%s\",\"nodes\":%d,\"round\":%d,\"window_s\":%d,\"calls_per_s_node\":%.3f,\"watch_msgs_per_s_node\":%.3f,\"grpc_bytes_out_per_s_node\":%.0f,\"wire_bytes_out_per_s_node\":%.0f,\"wire_bytes_in_per_s_node\":%.0f,\"loadavg\":\"%s\"}\n",
        mode, n, r, t, u / t / n, m / t / n, b / t / n, o / t / n, in_ / t / n, load > "/dev/stderr" }'
}

for n in $SIZES; do
  for round in $(seq "$ROUNDS"); do
    run poll "$n" "$round"
    run watch "$n" "$round"
  done
done
