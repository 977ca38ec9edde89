# The fleet's test world (sourced by test_fleet.sh and bench/fleet.sh after tests/lib/daemon.sh;
# never a test itself). Everything lives in network namespaces the world creates:
#   hub netns:  bridge br0 192.0.2.1/24, etcd on http://192.0.2.1:2379; clients (sbx, curl,
#               Python) run here (hub CMD...)
#   node NAME:  its own netns, veth eth0 192.0.2.(10+i)/24 on br0, a sandboxd with
#               --tcp 192.0.2.(10+i):7443 over HTTPS (a certificate for that address signed by
#               the world's CA), its own --token tok-NAME and the shared --fleet-token.
# world_up makes the hub, the CA and etcd; node_up NAME I [flags] a node (again: a restart on the
# same netns and directories); node_host_kill NAME takes a whole "host" away (daemon, shims,
# sandboxes, netns). The cleanup (daemon.sh's EXIT trap, via daemon_at_exit) stops etcd and
# releases every netns; daemon.sh sweeps the daemons.

FLEET_NET=192.0.2
FLEET_PREFIX=/sbxtest
FLEET_TTL=${FLEET_TTL:-2}
FLEET_TOKEN=fleet-token-$$-$RANDOM
HUBPID='' ETCDPID='' W='' HOLDER_PID=''
declare -gA NODE_NS=() NODE_IP=()

hub() { nsenter --net="/proc/$HUBPID/ns/net" "$@"; }
etcd_url() { echo "http://$FLEET_NET.1:2379"; }
fleet_addr() { echo "etcd://$FLEET_NET.1:2379$FLEET_PREFIX"; }
# the CLI against the fleet from the hub (its own token: the fleet's; the world's CA)
sbxf() { hub env SBX_TOKEN="$FLEET_TOKEN" SBX_CA="$W/ca.pem" "$(bin sbx)" --host "$(fleet_addr)" "$@"; }
# curl to a node's HTTPS listener from the hub: fcurl NAME METHOD PATH [curl args]
fcurl() {
  local n=$1 m=$2 p=$3; shift 3
  hub curl -s --max-time 30 --cacert "$W/ca.pem" -H "Authorization: Bearer $FLEET_TOKEN" \
    -X "$m" "$@" "https://${NODE_IP[$n]}:7443$p"
}
etcdctl_() { hub env ETCDCTL_API=3 etcdctl --endpoints "$(etcd_url)" "$@"; }

world_down() {
  [ -n "$ETCDPID" ] && kill -KILL "$ETCDPID" 2>/dev/null && wait "$ETCDPID" 2>/dev/null
  local n
  for n in "${!NODE_NS[@]}"; do
    [ -n "${NODE_NS[$n]}" ] && kill "${NODE_NS[$n]}" 2>/dev/null && wait "${NODE_NS[$n]}" 2>/dev/null
  done
  [ -n "$HUBPID" ] && kill "$HUBPID" 2>/dev/null && wait "$HUBPID" 2>/dev/null
  HUBPID='' ETCDPID=''
}

netns_holder() { # HOLDER_PID: a sleep holding a new netns
  unshare --net sleep infinity </dev/null >/dev/null 2>&1 &
  local pid=$!
  for _ in $(seq 50); do
    [ "$(readlink /proc/$pid/ns/net)" != "$(readlink /proc/self/ns/net)" ] && break
    sleep 0.02
  done
  HOLDER_PID=$pid
}

world_certs() { # a CA and one certificate per node address (SAN IP), with openssl
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=sbx-test-ca" \
    -keyout "$W/ca.key" -out "$W/ca.pem" >/dev/null 2>&1 || fail "openssl: CA"
  local i
  for i in 1 2 3 4 5; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$FLEET_NET.1$i" -keyout "$W/n$i.key" \
      -out "$W/n$i.csr" >/dev/null 2>&1 || fail "openssl: key $i"
    printf 'subjectAltName=IP:%s.1%s\n' "$FLEET_NET" "$i" >"$W/n$i.ext"
    openssl x509 -req -in "$W/n$i.csr" -CA "$W/ca.pem" -CAkey "$W/ca.key" -CAcreateserial \
      -days 2 -extfile "$W/n$i.ext" -out "$W/n$i.pem" >/dev/null 2>&1 || fail "openssl: cert $i"
  done
}

etcd_start() {
  nsenter --net="/proc/$HUBPID/ns/net" etcd --name world --data-dir "$W/etcd" --listen-client-urls "$(etcd_url)" \
    --advertise-client-urls "$(etcd_url)" --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster world=http://127.0.0.1:2380 >>"$W/etcd.log" 2>&1 &
  ETCDPID=$!
  for _ in $(seq 100); do
    hub curl -s --max-time 1 "$(etcd_url)/health" 2>/dev/null | grep -q true && return 0
    kill -0 "$ETCDPID" 2>/dev/null || break
    sleep 0.1
  done
  tail -20 "$W/etcd.log" >&2
  fail "etcd did not start"
}

etcd_stop() { kill -KILL "$ETCDPID" 2>/dev/null; wait "$ETCDPID" 2>/dev/null || true; ETCDPID=''; }

world_up() {
  require_root
  command -v jq >/dev/null || skip "jq is needed"
  command -v etcd >/dev/null || skip "etcd is needed (Debian's etcd-server; tests/deps.sh)"
  command -v etcdctl >/dev/null || skip "etcdctl is needed (Debian's etcd-client; tests/deps.sh)"
  command -v openssl >/dev/null || skip "openssl is needed"
  daemon_init
  W=$DAEMON_ROOT/world
  mkdir -p "$W"
  daemon_at_exit world_down
  netns_holder
  HUBPID=$HOLDER_PID
  hub ip link set lo up
  # A fixed address: a bridge without one takes the lowest of its ports' (random) addresses and
  # changes it when that port goes (node_host_kill) or a lower one joins (node_up). The nodes'
  # ARP entries for 192.0.2.1 then point at an address nobody has for up to a minute: etcd and
  # the hub are unreachable from every other node, their etcd leases expire and the whole fleet
  # leaves (host_gone failed so: `sbx nodes` saw "a b c", then "b", then none).
  hub ip link add br0 address 02:53:42:58:00:01 type bridge
  hub ip addr add "$FLEET_NET.1/24" dev br0
  hub ip link set br0 up
  world_certs
  etcd_start
}

node_net() { # NAME I: the node's netns and its veth on the hub's bridge (once)
  local n=$1 i=$2 pid
  [ -n "${NODE_NS[$n]:-}" ] && return 0
  netns_holder
  pid=$HOLDER_PID
  NODE_NS[$n]=$pid NODE_IP[$n]=$FLEET_NET.1$i
  hub ip link add "v-$n" type veth peer name eth0 netns "/proc/$pid/ns/net"
  hub ip link set "v-$n" master br0 up
  nsenter --net="/proc/$pid/ns/net" ip link set lo up
  nsenter --net="/proc/$pid/ns/net" ip addr add "$FLEET_NET.1$i/24" dev eth0
  nsenter --net="/proc/$pid/ns/net" ip link set eth0 up
}

node_up() { # NAME I [flags...]: start (or restart) node NAME at 192.0.2.1I
  local n=$1 i=$2
  shift 2
  node_net "$n" "$i"
  DAEMON_WRAP=(nsenter "--net=/proc/${NODE_NS[$n]}/ns/net")
  daemon_start "$n" --tcp "${NODE_IP[$n]}:7443" --token "tok-$n" --fleet-token "$FLEET_TOKEN" \
    --tls-cert "$W/n$i.pem" --tls-key "$W/n$i.key" --fleet-etcd "$(etcd_url)" \
    --fleet-prefix "$FLEET_PREFIX" --node-name "$n" --advertise-url "https://${NODE_IP[$n]}:7443" \
    --fleet-ttl "$FLEET_TTL" "$@"
  DAEMON_WRAP=()
}

# Wait until `sbx nodes` (from etcd) has exactly the nodes named (sorted, space-separated).
wait_nodes() { # "a b c" SECONDS
  local want=$1 got=''
  for _ in $(seq $(($2 * 10))); do
    got=$(sbxf --json nodes 2>/dev/null | jq -r '[.nodes[].name] | sort | join(" ")') || true
    [ "$got" == "$want" ] && return 0
    sleep 0.1
  done
  fail "fleet nodes: expected '$want', got '$got'"
}

# Wait until every node named sees exactly those nodes in its own list (GET /v1/fleet).
wait_views() { # "a b c" SECONDS
  local want=$1 n got=''
  for n in $want; do
    for _ in $(seq $(($2 * 10))); do
      got=$(fcurl "$n" GET /v1/fleet 2>/dev/null | jq -r '[.nodes[].name] | sort | join(" ")') || true
      [ "$got" == "$want" ] && break
      sleep 0.1
    done
    [ "$got" == "$want" ] || fail "node $n sees '$got', not '$want'"
  done
}

node_kill9() { # NAME: SIGKILL the daemon only (its shims and sandboxes go on)
  daemon_use "$1"
  kill -KILL "$DPID"
  wait "$DPID" 2>/dev/null || true
}

node_host_kill() { # NAME: the whole host goes: daemon, every process in its cgroups, its netns
  local n=$1 f
  node_kill9 "$n"
  daemon_use "$n"
  for f in $(find /sys/fs/cgroup -path "*/$CG/*" -name cgroup.kill 2>/dev/null); do
    echo 1 >"$f" 2>/dev/null || true
  done
  # the shims (supervisors outside the sandboxes' cgroups) of this node's run dir
  for f in /proc/[0-9]*; do
    tr "\0" " " 2>/dev/null <"$f/cmdline" | grep -qF -- "$D/run/" && kill -KILL "${f#/proc/}" 2>/dev/null
  done
  kill "${NODE_NS[$n]}" 2>/dev/null && { wait "${NODE_NS[$n]}" 2>/dev/null || true; }
  NODE_NS[$n]=''
}
