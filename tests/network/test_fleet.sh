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
  wait_views "a b c" 10
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

py() { # the Python SDK (through libsbx) in the hub, against the fleet address (nsenter and env
  # exec: in the background, $! is the Python process itself)
  nsenter --net="/proc/$HUBPID/ns/net" env $(asan_env) SANDBOXD_LIBSBX="$(bin libsbx.so.0)" PYTHONPATH="$SBX_SRC_DIR/python" SBX_CA="$W/ca.pem" \
    SBX_TOKEN="$FLEET_TOKEN" SBX_HOST="$(fleet_addr)" python3 "$@"
}

quiet_kill() { kill "$1" 2>/dev/null || true; }

count_on() { # NAME [LABEL=VALUE]: sandboxes not ended (with that label), asked on its Unix socket
  curl -s --max-time 10 --unix-socket "${DAEMON_SOCK[$1]}" "http://sd/v1/sandboxes${2:+?label=$2}" |
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
deadline = time.time() + 100  # the case times out before: never outlive it
while not os.path.exists(r + "/go") and time.time() < deadline:
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

sbxn() { # NAME ARGS...: the CLI through one node's https:// URL (the fleet token, the CA)
  local n=$1
  shift
  hub env SBX_TOKEN="$FLEET_TOKEN" "$(bin sbx)" --cacert "$W/ca.pem" \
    --host "https://${NODE_IP[$n]}:7443" "$@"
}
node_of() { echo "${1#*.}"; } # the node part of an id

TEST_TIMEOUT_spread_through_one_node=90
test_spread_through_one_node() {
  fleet3 --max-sandboxes 2
  local i id='' n
  declare -A per=()
  for i in $(seq 6); do # a takes two, then (full) sends the others to b and c
    # a places by the capacity it last read (once a second): a 503 from a node that filled
    # up meanwhile is what a client retries after Retry-After
    id=''
    for _ in $(seq 20); do id=$(sbxn a create --memory 128Mi 2>/dev/null) && break; sleep 0.3; done
    [ -n "$id" ] || fail "create $i through a"
    n=$(node_of "$id")
    per[$n]=$((${per[$n]:-0} + 1))
  done
  for n in a b c; do
    assert_eq "${per[$n]:-0}" 2 "creates placed on $n"
    assert_eq "$(count_on $n)" 2 "sandboxes running on $n"
  done
  sbxn a create --memory 128Mi 2>"$DAEMON_ROOT/err" && fail "a 7th create fitted in 3 x 2"
  grep -qiE "full|retry" "$DAEMON_ROOT/err" || fail "full everywhere: $(cat "$DAEMON_ROOT/err")"
  [ "$(sbxf ls --json | jq length)" == 6 ] || fail "sbx ls across the fleet"
  [ "$(sbxf ls | grep -c '^sb-')" == 6 ] || fail "sbx ls table: $(sbxf ls)"
  # through one node's URL too: the client asks that node for the fleet, then every node
  [ "$(sbxn b ls --json | jq length)" == 6 ] || fail "sbx ls through b: $(sbxn b ls --json)"
}

TEST_TIMEOUT_reach_through_any_node=90
test_reach_through_any_node() {
  fleet3 --max-sandboxes 2
  local id r=$DAEMON_ROOT n out
  id=$(sbxn c create --memory 128Mi) || fail "create on c"
  assert_eq "$(node_of "$id")" c "node part of $id"
  printf 'payload-%s\n' "$RANDOM" >"$r/up.txt"
  for n in a b; do # every call through a node that does not hold it: 307 to c
    out=$(sbxn $n exec "$id" sh -c 'for i in 1 2 3; do echo line$i; done; echo err >&2') ||
      fail "exec through $n"
    assert_eq "$out" "$(printf 'line1\nline2\nline3')" "streamed output through $n"
    sbxn $n cp "$r/up.txt" "$id:/workspace/up-$n.txt" || fail "upload through $n"
    sbxn $n cp "$id:/workspace/up-$n.txt" "$r/down-$n.txt" || fail "download through $n"
    cmp "$r/up.txt" "$r/down-$n.txt" || fail "file round trip through $n"
  done
  # the NDJSON stream itself, by curl through a (307 followed with the token)
  hub curl -s --max-time 30 --cacert "$W/ca.pem" --location-trusted \
    -H "Authorization: Bearer $FLEET_TOKEN" -H 'Accept: application/x-ndjson' \
    -H 'Content-Type: application/json' -d '{"argv":["echo","nd"]}' \
    "https://${NODE_IP[a]}:7443/v1/sandboxes/$id/exec" >"$r/nd" || fail "curl exec through a"
  jq -se 'any(.[]; .type == "stdout") and any(.[]; .type == "exit")' "$r/nd" >/dev/null ||
    fail "NDJSON events: $(cat "$r/nd")"
  assert_eq "$(count_on c)" 1 "the sandbox is on c"
  sbxn b rm "$id" || fail "delete through b"
  for _ in $(seq 50); do [ "$(count_on c)" == 0 ] && break; sleep 0.1; done
  assert_eq "$(count_on c)" 0 "the sandbox is gone from c"
}

TEST_TIMEOUT_drain=90
test_drain() {
  fleet3 --max-sandboxes 4
  local id keep i
  keep=$(sbxn b create --memory 128Mi) || fail "create on b"
  assert_eq "$(node_of "$keep")" b "before the drain"
  sbxf node drain b || fail "sbx node drain b"
  for _ in $(seq 50); do
    [ "$(sbxf --json nodes | jq -r '.nodes[] | select(.name == "b") | .state')" == draining ] && break
    sleep 0.1
  done
  sbxf nodes | grep -qE '^b +draining ' || fail "b is not shown draining: $(sbxf nodes)"
  for i in 1 2 3; do # through b itself and through the fleet address: never on b
    # b places by the view it last read (each second): a node that filled up meanwhile
    # answers 503 node_full, which a client retries after Retry-After (docs/FLEET.md)
    id=''
    for _ in $(seq 20); do
      id=$(sbxn b create --memory 128Mi 2>"$DAEMON_ROOT/err") && break
      grep -q "the node is full" "$DAEMON_ROOT/err" || break
      sleep 0.3
    done
    [ -n "$id" ] || fail "create through drained b: $(cat "$DAEMON_ROOT/err")"
    [ "$(node_of "$id")" != b ] || fail "a create landed on drained b"
    id=$(sbxf create --memory 128Mi) || fail "create through the fleet"
    [ "$(node_of "$id")" != b ] || fail "the client placed a create on drained b"
  done
  [ "$(sbxf exec "$keep" echo still)" == still ] || fail "a running sandbox on drained b"
  sbxf node undrain b || fail "undrain"
  for _ in $(seq 50); do
    [ "$(sbxf --json nodes | jq -r '.nodes[] | select(.name == "b") | .state')" == ready ] && break
    sleep 0.1
  done
  id=$(sbxn b create --memory 128Mi) || fail "create on b after undrain"
  assert_eq "$(node_of "$id")" b "b takes creates again"
}

TEST_TIMEOUT_daemon_kill9=120
test_daemon_kill9() {
  fleet3 --max-sandboxes 2
  local id
  id=$(sbxn c create --memory 128Mi) || fail "create on c"
  node_kill9 c
  wait_nodes "a b" $((FLEET_TTL + 8)) # it leaves within its TTL
  sbxn a exec "$id" true 2>"$DAEMON_ROOT/err" && fail "exec on a sandbox of a dead node"
  grep -q "node" "$DAEMON_ROOT/err" || fail "error does not say node: $(cat "$DAEMON_ROOT/err")"
  sbxf exec "$id" true 2>"$DAEMON_ROOT/err" && fail "exec through the fleet on a dead node"
  grep -q "node c" "$DAEMON_ROOT/err" || fail "fleet error: $(cat "$DAEMON_ROOT/err")"
  # its shim kept the sandbox; the restarted daemon adopts it and re-registers
  node_up c 3 --max-sandboxes 2
  wait_nodes "a b c" 15
  wait_views "a b c" 15 # each node routes by its own view (refreshed each second): wait for c there
  [ "$(sbxn a exec "$id" echo back)" == back ] || fail "the sandbox after c's restart"
}

TEST_TIMEOUT_host_gone=120
test_host_gone() {
  fleet3 --max-sandboxes 2
  local id r=$DAEMON_ROOT
  id=$(sbxn c create --memory 128Mi) || fail "create on c"
  node_host_kill c
  wait_nodes "a b" $((FLEET_TTL + 8))
  # and a's own list (read each second): until then a may still send the exec to c by a 307,
  # which the client follows into a connect timeout (10 s) on the host that is gone
  wait_views "a b" 5
  sbxn a exec "$id" true 2>"$r/err" && fail "exec on a sandbox of a gone host"
  grep -q "node" "$r/err" || fail "through a: $(cat "$r/err")"
  py - "$id" <<'PY' || fail "python: no typed error"
import sys, sandboxd
try:
    sandboxd.Sandbox.attach(sys.argv[1]).run("true")
    sys.exit("a sandbox of a gone host answered")
except sandboxd.NodeUnavailable:
    pass
PY
  # the rest of the fleet goes on
  id=$(sbxf create --memory 128Mi) || fail "create after c went"
  [ "$(node_of "$id")" != c ] || fail "placed on the gone host"
}

TEST_TIMEOUT_lease_all_nodes=90
test_lease_all_nodes() {
  fleet3 --max-sandboxes 1
  py - <<'PY' || fail "lease across nodes"
import sys, time, sandboxd
lease = sandboxd.Lease.create("3s", renew_every=0.7)
sbs = [sandboxd.Sandbox.create(memory="128Mi", lease=lease) for _ in range(3)]
nodes = sorted(s.id.split(".", 1)[1] for s in sbs)
if nodes != ["a", "b", "c"]:
    sys.exit(f"one per node expected: {nodes}")
time.sleep(5)  # renewed: all alive
for s in sbs:
    if s.run("true").exit_code != 0:
        sys.exit(f"{s.id} before the lease ended")
lease.stop()
deadline = time.time() + 20
while time.time() < deadline:
    states = [s.inspect().state for s in sbs]
    if all(st == "ended" for st in states):
        break
    time.sleep(0.3)
else:
    sys.exit(f"not ended after the lease ran out: {states}")
PY
}

TEST_TIMEOUT_etcd_restart=120
test_etcd_restart() {
  fleet3 --max-sandboxes 2
  local id
  id=$(sbxn b create --memory 128Mi) || fail "create on b"
  etcd_stop
  sbxf nodes >/dev/null 2>&1 && fail "sbx nodes without etcd"
  [ "$(sbxn b exec "$id" echo alive)" == alive ] || fail "a running sandbox while etcd is down"
  for _ in $(seq 100); do # the node notices at its next etcd call (about a second)
    sbxn b --json nodes | jq -e '.etcd == "unreachable"' >/dev/null && break
    sleep 0.1
  done
  # and it stays so: the watch hands the loop its unchanged copy each second, which is no news
  # from etcd (it once turned "ok" again at the next hand-over)
  local t0=$SECONDS view
  while [ $((SECONDS - t0)) -lt 3 ]; do
    view=$(sbxn b --json nodes)
    jq -e '.etcd == "unreachable" and (.nodes | length) == 3' >/dev/null <<<"$view" ||
      fail "/v1/fleet without etcd: $(jq -c "{etcd, nodes: [.nodes[].name]}" <<<"$view")"
    sleep 0.2
  done
  sbxn a exec "$id" echo routed >/dev/null || fail "routing on the last known list"
  id=$(sbxn a create --memory 128Mi) || fail "a local create while etcd is down"
  etcd_start
  wait_nodes "a b c" 20
  # a says "ok" once its own fleet thread has heard etcd again (its next call, about a second;
  # etcd's answer to the client above can come first)
  for _ in $(seq 50); do
    sbxn a --json nodes | jq -e '.etcd == "ok"' >/dev/null && return 0
    sleep 0.1
  done
  fail "etcd back: $(sbxn a --json nodes | jq -c '{etcd, nodes: [.nodes[].name]}')"
}

# Warm pools steer placement (docs/FLEET.md): node a has no pool, node b one of
# {cpu 0.5, memory 256Mi}. A create of that shape through a (room there, but no pool) is sent to
# b (307 ...?placed=1) and served from b's pool; the client placing from etcd sends it to b too;
# a create no pool serves stays where it was asked.
POOL_B='size=2,cpu=0.5,memory=256Mi'
b_ready() { # what NAME's view says of b's pool 0: ready entries
  fcurl "$1" GET /v1/fleet | jq -r '.nodes[] | select(.name == "b") | .pools[0].ready // 0'
}
b_ready_here() { # b's pool 0 as b itself counts it now (its /metrics, on its Unix socket)
  SOCK=${DAEMON_SOCK[b]} metric 'sandboxd_pool_entries{pool="0",state="ready"}'
}
wait_b_ready() { # until b's pool is full again, and a's view and etcd's record say so (a view
  # or a record can still show 2 from before the last take: b itself is asked first)
  for _ in $(seq 100); do
    [ "$(b_ready_here)" == 2 ] && [ "$(b_ready a)" == 2 ] &&
      [ "$(sbxf --json nodes | jq -r '.nodes[] | select(.name == "b") | .pools[0].ready')" == 2 ] &&
      return 0
    sleep 0.1
  done
  fail "b's pool: $(fcurl a GET /v1/fleet)"
}

TEST_TIMEOUT_pool_placement=90
test_pool_placement() {
  world_up
  node_up a 1 --max-sandboxes 16 # more free slots than b: placement by free slots alone picks a
  node_up b 2 --max-sandboxes 8 --pool "$POOL_B"
  wait_nodes "a b" 10
  wait_views "a b" 10
  wait_b_ready
  local r=$DAEMON_ROOT id i
  # the record says what the pool serves, in the forms a create is compared in
  fcurl a GET /v1/fleet | jq -e '.nodes[] | select(.name == "b") | .pools[0] |
    .cpu == 0.5 and .memory == 268435456 and .image == "host" and .network == "none" and
    .profile == "default" and .size == 2' >/dev/null || fail "b's pool record: $(fcurl a GET /v1/fleet)"
  fcurl a GET /v1/fleet | jq -e '.nodes[] | select(.name == "a") | .pools == [] and
    .defaults.cpu == 1 and .defaults.image == "host"' >/dev/null ||
    fail "a's record: $(fcurl a GET /v1/fleet)"
  # through a, with room on a: 307 to b's pool
  fcurl a POST /v1/sandboxes -d '{"cpu":0.5,"memory":"256Mi"}' -D "$r/h" -o /dev/null || fail "curl"
  grep -qiE '^HTTP/[0-9.]+ 307' "$r/h" || fail "not redirected: $(cat "$r/h")"
  grep -qiE "^location: https://${NODE_IP[b]}:7443/v1/sandboxes\?placed=1" "$r/h" ||
    fail "Location: $(cat "$r/h")"
  fcurl a POST /v1/sandboxes -d '{"cpu":0.5,"memory":"256Mi","labels":{"k":"v"}}' \
    --location-trusted >"$r/sb" || fail "create through a"
  jq -e '.pooled == true and (.id | endswith(".b")) and .labels.k == "v"' "$r/sb" >/dev/null ||
    fail "not served by b's pool: $(cat "$r/sb")"
  assert_eq "$(count_on a)" 0 "sandboxes on a"
  # a shape no pool serves stays on a (no redirect): cold there
  id=$(sbxn a create --cpu 0.5 --memory 128Mi) || fail "create of another shape through a"
  assert_eq "$(node_of "$id")" a "a create no pool serves"
  # the client placing from etcd: every create of b's shape goes to b while its pool has ready
  # entries (without pools it would pick a, which has more free slots), straight to b: a
  # redirects none of them (a's log counts its 307s for creates)
  local via_a
  via_a=$(grep -c 'path=/v1/sandboxes status=307' "${DAEMON_DIR[a]}/log")
  [ "$via_a" -ge 2 ] || fail "a's log does not show the two 307s above ($via_a)"
  for i in 1 2 3 4; do
    wait_b_ready
    sbxf create --cpu 0.5 --memory 256Mi --json >"$r/sb" || fail "fleet create $i"
    jq -e '.pooled == true and (.id | endswith(".b"))' "$r/sb" >/dev/null ||
      fail "fleet create $i was not placed on b's pool: $(cat "$r/sb")"
  done
  assert_eq "$(grep -c 'path=/v1/sandboxes status=307' "${DAEMON_DIR[a]}/log")" "$via_a" \
    "creates the client sent to a (then redirected to b)"
}

# A GRPO run against the fleet address while a host goes away (c, or another holding episodes
# when c got none): the run completes; the episodes that lived on it are infrastructure failures
# (excluded), the others are scored. The kill lands
# at a known point: the stand-in trainer holds every completion (--hold-file) until every
# episode of step 1 waits at its first generation, so each holds its own sandbox (created or
# forked, and answered) and none has finished; then the host goes, then the trainer answers.
TEST_TIMEOUT_grpo_node_killed=150 TEST_PASS_grpo_node_killed=sanitized
test_grpo_node_killed() {
  fleet3 --max-sandboxes 12
  local r=$DAEMON_ROOT gpid tpid port held='' n agents=0 on_victim=0 victim=''
  # nsenter execs: $! is the server itself, which the cleanup ends
  nsenter --net="/proc/$HUBPID/ns/net" /usr/bin/python3 "$SBX_SRC_DIR/bench/grpo_fake_server.py" --port-file "$r/port" \
    --delay-ms 100 --hold-file "$r/go" --command 'echo red > b.txt' >"$r/trainer.log" 2>&1 &
  tpid=$!
  daemon_at_exit quiet_kill "$tpid"
  for _ in $(seq 100); do [ -s "$r/port" ] && break; sleep 0.1; done
  [ -s "$r/port" ] || fail "the stand-in trainer did not start"
  port=$(cat "$r/port")
  nsenter --net="/proc/$HUBPID/ns/net" env SBX_TOKEN="$FLEET_TOKEN" SBX_CA="$W/ca.pem" "$(bin sbx)" grpo --host "$(fleet_addr)" \
    --trainer "http://127.0.0.1:$port" --tasks "$SBX_SRC_DIR/tasks/toy-files.jsonl" \
    --out "$r/out" --steps 2 --tasks-per-step 6 --group-size 2 --seed 3 --json \
    >"$r/summary.txt" 2>"$r/grpo.err" &
  gpid=$!
  daemon_at_exit quiet_kill "$gpid"
  # the 12 episodes of step 1 (6 tasks x 2) at the trainer, and the group templates released
  for _ in $(seq 600); do
    held=$(hub curl -s --max-time 5 "http://127.0.0.1:$port/v1/fake_stats" | jq -r .held) || held=''
    [ "$held" == 12 ] && [ "$(( $(count_on a grpo_role=template) + $(count_on b grpo_role=template) +
      $(count_on c grpo_role=template) ))" == 0 ] && break
    kill -0 "$gpid" 2>/dev/null || break
    sleep 0.1
  done
  [ "$held" == 12 ] || { cat "$r/grpo.err" >&2; fail "step 1's episodes did not all reach the trainer ($held held)"; }
  for n in a b c; do agents=$((agents + $(count_on $n grpo_role=agent))); done
  assert_eq "$agents" 12 "episode sandboxes running while the trainer holds them"
  # the node killed: c, or another that holds episodes when placement (two random choices per
  # template) left c none
  for n in c b a; do
    on_victim=$(count_on $n grpo_role=agent)
    if [ "$on_victim" -gt 0 ]; then victim=$n; break; fi
  done
  [ -n "$victim" ] || fail "no node holds an episode's sandbox"
  echo "killing node $victim with $on_victim episode sandboxes"
  node_host_kill "$victim"
  touch "$r/go"
  wait "$gpid" || { cat "$r/grpo.err" >&2; fail "the GRPO run failed"; }
  /usr/bin/python3 - "$r/out/summary.json" "$on_victim" <<'PY' || fail "GRPO summary: $(cat "$r/out/summary.json")"
import json, sys
d = json.load(open(sys.argv[1]))
print(d["stop_reason"], d["episodes"], d["scored"], d["infrastructure_failures"])
assert d["stop_reason"] == "completed", d
# exactly the episodes whose sandbox was on the killed node; step 2 runs on the other two
assert d["infrastructure_failures"] == int(sys.argv[2]), d
assert d["episodes"] == 24 and d["scored"] + d["infrastructure_failures"] == 24, d
PY
  for n in a b c; do
    [ "$n" == "$victim" ] || assert_eq "$(count_on $n)" 0 "sandboxes left running on $n"
  done
}

source "$(dirname "$0")/../lib/lib.sh"
