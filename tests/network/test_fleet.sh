#!/usr/bin/env bash
# The fleet (issue 15, docs/FLEET.md): a real etcd and three real daemons, each in its own
# network namespace with its own address, token and TLS certificate (tests/network/
# fleet_world.sh), reached by the CLI and the Python SDK through the fleet address
# (etcd://192.0.2.1:2379/sbxtest) or through any node's https:// URL.
DAEMON_TAG=fleet
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/fleet_world.sh"

fleet3() { # a, b, c with FLAGS... each
  world_up
  node_up a 1 "$@"
  node_up b 2 "$@"
  node_up c 3 "$@"
  wait_nodes "a b c" 10
}

TEST_TIMEOUT_nodes_appear=60
test_nodes_appear() {
  fleet3 --max-sandboxes 3
  local js
  js=$(sbxf --json nodes)
  echo "$js" | jq -e '.etcd == "ok" and (.nodes | length) == 3' >/dev/null || fail "nodes: $js"
  echo "$js" | jq -e 'all(.nodes[]; .max == 3 and .free == 3 and .state == "ready" and
    (.url | startswith("https://192.0.2.1")) and .heartbeat_age_s < 10)' >/dev/null ||
    fail "capacity: $js"
  sbxf nodes | grep -E '^b +ready +https://192.0.2.12:7443 +3 ' >/dev/null || fail "table: $(sbxf nodes)"
  # the same view through one node's URL, over HTTPS with its own token
  js=$(hub env SBX_TOKEN=tok-a SBX_CA="$W/ca.pem" "$(bin sbx)" --host "https://192.0.2.11:7443" --json nodes)
  echo "$js" | jq -e '.self == "a" and (.nodes | length) == 3' >/dev/null || fail "via a: $js"
  # without the CA the certificate is refused
  if hub env SBX_TOKEN=tok-a "$(bin sbx)" --host "https://192.0.2.11:7443" nodes >/dev/null 2>&1; then
    fail "an unknown CA was accepted"
  fi
}

# ---- the client alone: nodes registered by hand in etcd, daemons not in fleet mode ----
# (what libsbx does with the published records: placement, skipping, typed errors)
plain3() { # three plain daemons (plain HTTP, the fleet token as their token) and their records
  world_up
  local n i=0
  for n in a b c; do
    i=$((i + 1))
    node_net "$n" "$i"
    DAEMON_WRAP=(nsenter "--net=/proc/${NODE_NS[$n]}/ns/net")
    daemon_start "$n" --tcp "${NODE_IP[$n]}:7443" --token "$FLEET_TOKEN" --max-sandboxes 2
    DAEMON_WRAP=()
    etcdctl_ put "$FLEET_PREFIX/nodes/$n" "{\"name\":\"$n\",\"url\":\"http://${NODE_IP[$n]}:7443\",
      \"version\":\"t\",\"heartbeat\":$(date +%s),\"draining\":false,\"max\":2,\"active\":0,
      \"starting\":0,\"free\":2,\"pools\":[]}" >/dev/null || fail "etcdctl put"
  done
}

py() { # the Python SDK (through libsbx) in the hub, against the fleet address
  hub env SANDBOXD_LIBSBX="$(bin libsbx.so.0)" PYTHONPATH="$SBX_SRC_DIR/python" SBX_CA="$W/ca.pem" \
    SBX_TOKEN="$FLEET_TOKEN" SBX_HOST="$(fleet_addr)" python3 "$@"
}

quiet_kill() { kill "$1" 2>/dev/null || true; }

count_on() { # NAME: sandboxes not ended, asked on its Unix socket
  curl -s --max-time 10 --unix-socket "${DAEMON_SOCK[$1]}" http://sd/v1/sandboxes |
    jq '[.[] | select(.state != "ended")] | length'
}

TEST_TIMEOUT_client_places_and_skips=120
test_client_places_and_skips() {
  plain3
  [ "$(sbxf --json nodes | jq '.nodes | length')" == 3 ] || fail "nodes from etcd"
  local r=$DAEMON_ROOT pypid n
  # one client process: it places 6 creates over the 3 x 2 published slots, then (after the
  # shell took host c away and stopped b's daemon) gets typed errors for their sandboxes only
  py - "$r" <<'PY' &
import os, sys, time, sandboxd
r = sys.argv[1]
c = sandboxd.Client()
sbs = [sandboxd.Sandbox.create(client=c, memory="128Mi") for _ in range(6)]
try:
    sandboxd.Sandbox.create(client=c, memory="128Mi")
    sys.exit("a 7th create fitted in a fleet of 3 x 2")
except sandboxd.NodeFull:
    pass
open(r + "/ids.tmp", "w").write("\n".join(s.id for s in sbs) + "\n")
os.rename(r + "/ids.tmp", r + "/ids")
while not os.path.exists(r + "/go"):
    time.sleep(0.05)
lost = set(open(r + "/lost").read().split())
for s in sbs:
    try:
        out = s.run("echo", "hi")
        if s.id in lost or out.stdout not in (b"hi\n", "hi\n"):
            sys.exit(f"{s.id}: exec answered on a lost node: {out}")
    except sandboxd.NodeUnavailable as e:
        if s.id not in lost:
            sys.exit(f"{s.id}: {e}")
        print("typed:", e, file=sys.stderr)
PY
  pypid=$!
  daemon_at_exit quiet_kill "$pypid" # (when the case fails before the client finished)
  for _ in $(seq 300); do [ -e "$r/ids" ] || ! kill -0 $pypid 2>/dev/null && break; sleep 0.1; done
  [ -e "$r/ids" ] || { wait $pypid; fail "the creates did not finish"; }
  for n in a b c; do assert_eq "$(count_on $n)" 2 "sandboxes on $n"; done
  [ "$(sbxf ls --json | jq length)" == 6 ] || fail "sbx ls across the fleet: $(sbxf ls --json)"
  for n in b c; do
    curl -s --max-time 10 --unix-socket "${DAEMON_SOCK[$n]}" http://sd/v1/sandboxes | jq -r '.[].id'
  done >"$r/lost"
  node_host_kill c                               # host c is gone, and so is its record
  etcdctl_ del "$FLEET_PREFIX/nodes/c" >/dev/null
  node_kill9 b                                   # b's daemon is down; its record stays
  touch "$r/go"
  wait $pypid || fail "the fleet client's errors were not typed"
  # a's sandboxes are still listed; b (not answering) and c (gone) are skipped
  [ "$(sbxf ls --json | jq length)" == 2 ] || fail "sbx ls after the failures: $(sbxf ls --json)"
  hub env SBX_TOKEN="$FLEET_TOKEN" "$(bin sbx)" --host "$(fleet_addr)" exec "$(sed -n 1p "$r/lost")" true \
    2>"$r/err" && fail "exec on a lost sandbox succeeded"
  grep -q "node" "$r/err" || fail "the CLI's error does not name the node: $(cat "$r/err")"
}

source "$(dirname "$0")/../lib/lib.sh"
