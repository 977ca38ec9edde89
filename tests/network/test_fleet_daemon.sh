#!/usr/bin/env bash
# The daemon side of the fleet (docs/FLEET.md), small and fast: a real etcd (Debian's etcd-server)
# and two or three real daemons in one private network namespace the case makes (loopback only:
# nothing leaves it), each on its own TCP port with TLS (a certificate made here with openssl) and
# the shared fleet token. Checked: registration with capacity, 307 routing (curl --location-trusted
# with the token), placement away from a full node, the 503 when all are full, drain and undrain (a
# create with volumes or GPU uuids is not run or sent on from a drained node), a re-registration
# whose first put fails, a re-registration within TTL/3 of etcd's return after an outage longer than
# the TTL (etcd_freeze_proxy.py), a node with a TTL of 2 s whose connections to etcd went dead
# keeping its lease, a kill -9 (the node leaves within its TTL, its ids answer 503
# node_unavailable, a restart re-registers and serves its sandboxes again), etcd stopped and
# restarted, leases across nodes, a sandbox's port proxy reached through another node (307 to the
# owner, the server's answer and headers back). The bigger world: test_fleet.sh.
DAEMON_TAG=fleetd
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/fleetd_world.sh"

TEST_TIMEOUT_config=30
test_config() { # the fleet's settings are checked at start, with a message naming the problem
  local out rc sd=$SBX_BUILD_DIR/sandboxd
  daemon_init
  echo '{}' >"$DAEMON_ROOT/empty.json"
  bad() { # MESSAGE-REGEX FLAGS...: sandboxd refuses to start (exit 2) saying so
    local re=$1
    shift
    rc=0
    out=$("$sd" --config "$DAEMON_ROOT/empty.json" "$@" 2>&1) || rc=$?
    [ "$rc" == 2 ] || fail "sandboxd $* exited $rc: $out"
    grep -qE -- "$re" <<<"$out" || fail "sandboxd $*: expected /$re/ in: $out"
  }
  bad 'needs --advertise-url' --fleet-etcd http://127.0.0.1:2379
  bad 'node-name: expected' --fleet-etcd http://127.0.0.1:2379 --advertise-url https://h:1 \
    --node-name Bad_Name
  bad 'fleet-ttl: at least 2' --fleet-etcd http://127.0.0.1:2379 --advertise-url https://h:1 \
    --fleet-ttl 1
  bad 'fleet-read: "watch" or "poll"' --fleet-etcd http://127.0.0.1:2379 --advertise-url https://h:1 \
    --fleet-read sometimes
  bad 'go together' --tls-cert /nonexistent.pem
  bad 'needs --token' --tcp 127.0.0.1:1
  echo '{"node_labels": {"zone": 1}}' >"$DAEMON_ROOT/labels.json"
  sd_conf=$DAEMON_ROOT/labels.json
  rc=0
  out=$("$sd" --config "$sd_conf" 2>&1) || rc=$?
  [ "$rc" == 2 ] && grep -q 'node_labels must be' <<<"$out" || fail "node_labels not strings: $rc $out"
}

TEST_TIMEOUT_registration=60
test_registration() { # every node appears with its capacity, on an etcd lease; TLS only
  world
  daemon_use a
  echo '{"node_labels": {"zone": "z1"}}' >"$D/config.json"
  fleet_daemon a --max-sandboxes 3 --config "$D/config.json"
  fleet_daemon b --max-sandboxes 5
  wait_view a "[$(node a), $(node b)] | length == 2"
  echo "$BODY" | jq -e ".self == \"a\" and .etcd == \"ok\" and .prefix == \"$PREFIX\"" >/dev/null ||
    fail "view: $BODY"
  echo "$BODY" | jq -e "$(node b) | .max == 5 and .free == 5 and .active == 0 and .state == \"ready\"
    and .url == \"https://127.0.0.1:7442\" and .heartbeat_age_s < 30 and .cpus > 0" >/dev/null ||
    fail "b's record: $BODY"
  echo "$BODY" | jq -e "$(node a) | .labels == {\"zone\": \"z1\"}" >/dev/null || fail "a's labels: $BODY"
  local rec
  rec=$(etcd_key "$PREFIX/nodes/a")
  jq -e '.name == "a" and .max == 3 and (.heartbeat | type) == "number"' <<<"$rec" >/dev/null ||
    fail "P/nodes/a in etcd: $rec"
  "${NS[@]}" curl -s http://127.0.0.1:2379/v3/kv/range \
    -d "{\"key\":\"$(printf %s "$PREFIX/nodes/a" | base64 -w0)\"}" | jq -e '.kvs[0].lease | tonumber > 0' \
    >/dev/null || fail "P/nodes/a is not on an etcd lease"
  # capacity is published when it changes
  daemon_use a
  create
  [[ "$ID" == sb-*.a ]] || fail "a fleet id names its node: $ID"
  wait_view b "$(node a) | .active == 1 and .free == 2"
  # the TCP listener speaks TLS only, and takes the fleet token or the node's own
  local plain
  plain=$("${NS[@]}" curl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:7441/healthz) || true
  [ "$plain" != 200 ] || fail "plain HTTP was served on the TLS listener"
  CODE=$("${NS[@]}" curl -s -o /dev/null -w '%{http_code}' --cacert "$DAEMON_ROOT/cert.pem" \
    -H "Authorization: Bearer tok-a" https://127.0.0.1:7441/v1/info)
  assert_eq "$CODE" 200 "a's own token"
  CODE=$("${NS[@]}" curl -s -o /dev/null -w '%{http_code}' --cacert "$DAEMON_ROOT/cert.pem" \
    -H "Authorization: Bearer tok-b" https://127.0.0.1:7441/v1/info)
  assert_eq "$CODE" 401 "b's token on a"
  freq a GET /v1/info
  fexpect 200 '.node == "a" and .fleet == true'
}

# A server in the sandbox for the port case: every answer is "METHOD PATH BODY" + a header.
FLEET_PORT_SERVER='
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        b = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        out = b"POST " + self.path.encode() + b" " + b
        self.send_response(200)
        self.send_header("X-Node-Test", "yes")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", 8000), H).serve_forever()
'
TEST_TIMEOUT_routing=60
test_routing() { # any node answers for any sandbox: 307 to its owner
  world
  fleet_daemon a
  fleet_daemon b
  wait_view b "[$(node a), $(node b)] | length == 2"
  freq a POST /v1/sandboxes -d '{}'
  fexpect 201 '.state == "running"'
  local id
  id=$(jq -r .id <<<"$BODY")
  freq0 b GET "/v1/sandboxes/$id/files" -G -d path=/workspace
  fexpect 307
  assert_eq "$(header Location)" "https://127.0.0.1:7441/v1/sandboxes/$id/files?path=%2Fworkspace" \
    "Location"
  freq b GET "/v1/sandboxes/$id"
  fexpect 200 ".id == \"$id\" and .state == \"running\""
  freq b POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","echo routed; hostname"]}'
  fexpect 200 ".exit_code == 0 and (.stdout | startswith(\"routed\"))"
  freq b POST "/v1/sandboxes/$id/exec" -H 'Accept: application/x-ndjson' \
    -d '{"argv":["sh","-c","echo one; echo two"]}'
  fexpect 200
  [ "$(jq -rs 'map(select(.type == "stdout") | .data) | join("")' <<<"$BODY")" == $'one\ntwo' ] ||
    fail "streamed output through b: $BODY"
  jq -es 'last | .type == "exit" and .exit_code == 0' <<<"$BODY" >/dev/null || fail "no exit: $BODY"
  freq b PUT "/v1/sandboxes/$id/files?path=/tmp/x" -H 'Content-Type: application/octet-stream' \
    --data-binary 'through b'
  [[ "$CODE" == 2* ]] || fail "PUT files through b: $CODE $BODY"
  freq b GET "/v1/sandboxes/$id/files?path=/tmp/x"
  assert_eq "$BODY" "through b" "file read back through b"
  # inbound ports through b: the port is opened and its proxy URL reached through b (307 to a)
  freq b POST "/v1/sandboxes/$id/ports" -d '{"port":8000}'
  fexpect 200 "map(.url) == [\"/v1/sandboxes/$id/ports/8000/\"]"
  freq b POST "/v1/sandboxes/$id/exec" -d "$(jq -nc --arg s "$FLEET_PORT_SERVER" \
    '{argv:["python3","-c",$s], background:true}')"
  fexpect 201
  for _ in $(seq 100); do
    freq b POST "/v1/sandboxes/$id/ports/8000/step" --data-binary 'left'
    [ "$CODE" == 200 ] && break
    sleep 0.1
  done
  fexpect 200
  assert_eq "$BODY" "POST /step left" "the port's answer through b"
  assert_eq "$(header X-Node-Test)" "yes" "the server's header through b"
  # an encoded '?', '#', '%', space and '/' in the path: the server sees the request line the
  # owner itself would send it ('/' arrives decoded: api/ports.c put_path), through b as from a
  local enc="/v1/sandboxes/$id/ports/8000/a%3Fq%23f%2541%2Fb%20c?x=1"
  for n in a b; do
    freq "$n" POST "$enc" --data-binary 'enc'
    fexpect 200
    assert_eq "$BODY" "POST /a%3Fq%23f%2541/b%20c?x=1 enc" "an encoded path through $n"
  done
  freq0 b GET "/v1/sandboxes/$id/ports/8000/x%0D%0Ay"
  fexpect 307
  assert_eq "$(header Location)" "https://127.0.0.1:7441/v1/sandboxes/$id/ports/8000/x%0D%0Ay" \
    "Location of an encoded CR LF"
  freq0 b GET "/v1/sandboxes/$id/ports/8000/state?q=1"
  fexpect 307
  assert_eq "$(header Location)" "https://127.0.0.1:7441/v1/sandboxes/$id/ports/8000/state?q=1" "Location"
  freq b DELETE "/v1/sandboxes/$id"
  fexpect 204
  freq a GET "/v1/sandboxes/$id"
  fexpect 200 '.state == "ended"'
  freq b GET "/v1/sandboxes/$id/ports/8000/state"
  fexpect 404 '.code == "port_not_open"'
  freq b GET /v1/sandboxes/sb-0123456789abcdef.nosuchnode
  fexpect 404 '.code == "not_found"'
}

TEST_TIMEOUT_placement=90
test_placement() { # a full node sends creates elsewhere; full everywhere is 503 + Retry-After
  world
  fleet_daemon a --max-sandboxes 1
  fleet_daemon b --max-sandboxes 2
  wait_view a "$(node b) | .free == 2"
  freq a POST /v1/sandboxes -d '{}'
  fexpect 201
  [[ "$(jq -r .id <<<"$BODY")" == *.a ]] || fail "the first create stays on a: $BODY"
  freq0 a POST /v1/sandboxes -d '{}'
  fexpect 307
  assert_eq "$(header Location)" "https://127.0.0.1:7442/v1/sandboxes?placed=1" "Location"
  local i
  for i in 1 2; do
    wait_view a "$(node b) | .free >= 1"
    freq a POST /v1/sandboxes -d '{}'
    fexpect 201 '.id | endswith(".b")'
  done
  wait_view a "$(node b) | .free == 0"
  freq a POST /v1/sandboxes -d '{}'
  fexpect 503 '.code == "node_full"'
  [ -n "$(header Retry-After)" ] || fail "503 without Retry-After: $HDRS"
  # a placed create is never sent on again
  freq0 b POST '/v1/sandboxes?placed=1' -d '{}'
  fexpect 503 '.code == "node_full"'
}

TEST_TIMEOUT_drain=60
test_drain() { # a drained node takes no new creates, its running sandboxes go on
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq b POST /v1/sandboxes -d '{}'
  fexpect 201
  local id
  id=$(jq -r .id <<<"$BODY")
  freq a POST /v1/fleet/nodes/b/drain -d '{"force":true}' # a drain takes no fields: not ignored
  fexpect 400 '.message | startswith("force: unknown field")'
  assert_eq "$(etcd_key "$PREFIX/drain/b")" "" "P/drain/b after a refused drain"
  freq a POST /v1/fleet/nodes/b/drain
  fexpect 204
  assert_eq "$(etcd_key "$PREFIX/drain/b")" 1 "P/drain/b"
  wait_view a "$(node b) | .state == \"draining\" and .draining == true and .free == 0"
  wait_view b "$(node b) | .state == \"draining\""
  freq0 b POST /v1/sandboxes -d '{}'
  fexpect 307
  assert_eq "$(header Location)" "https://127.0.0.1:7441/v1/sandboxes?placed=1" "Location"
  freq b POST /v1/sandboxes -d '{}'
  fexpect 201 '.id | endswith(".a")'
  freq0 b POST '/v1/sandboxes?placed=1' -d '{}' # sent here by another node: still refused
  fexpect 503 '.code == "node_draining"'
  freq0 b POST /v1/sandboxes -d '{"gpus":["GPU-b-0"]}' # named GPUs are b's: never sent on
  fexpect 503 '.code == "node_draining"'
  freq b POST "/v1/sandboxes/$id/exec" -d '{"argv":["true"]}'
  fexpect 200 '.exit_code == 0'
  freq b POST /v1/fleet/nodes/b/undrain
  fexpect 204
  wait_view a "$(node b) | .state == \"ready\" and .free > 0"
  freq b POST /v1/sandboxes -d '{}'
  fexpect 201 '.id | endswith(".b")'
}

TEST_TIMEOUT_drain_volumes=60
test_drain_volumes() { # a create with volumes (this node's) on a drained node: refused, not run
  command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is needed (e2fsprogs, tests/deps.sh)"
  [ -e /dev/loop-control ] || skip "loop devices are needed (/dev/loop-control)"
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq b POST /v1/volumes -d '{"name":"vb","size":"16Mi"}'
  fexpect 201
  daemon_at_exit "${NS[@]}" curl -s --max-time 10 --cacert "$DAEMON_ROOT/cert.pem" \
    -H "Authorization: Bearer ftok" -X DELETE https://127.0.0.1:7442/v1/volumes/vb
  freq a POST /v1/fleet/nodes/b/drain
  fexpect 204
  wait_view b "$(node b) | .state == \"draining\""
  freq0 b POST /v1/sandboxes -d '{"volumes":[{"name":"vb","path":"/cache"}]}'
  fexpect 503 '.code == "node_draining"'
  freq b GET /v1/sandboxes
  fexpect 200 'length == 0'
  freq b POST /v1/fleet/nodes/b/undrain
  fexpect 204
  wait_view b "$(node b) | .state == \"ready\""
  freq0 b POST /v1/sandboxes -d '{"volumes":[{"name":"vb","path":"/cache"}]}'
  fexpect 201 '.id | endswith(".b")'
  freq b DELETE "/v1/sandboxes/$(jq -r .id <<<"$BODY")"
  fexpect 204
}

TEST_TIMEOUT_reregister_after_a_failed_put=60
test_reregister_after_a_failed_put() { # a node whose lease expired registers again in full,
  # even when a call fails halfway (its lease granted, the put after it not made)
  world
  freeze_proxy
  local proxy=$PROXY i lease
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view b "[$(node a), $(node b)] | length == 2"
  # a's etcd lease ends (as after a partition longer than the TTL); the first put a makes after
  # it found out and got a new lease fails
  kill -USR2 "$proxy"
  for i in $(seq 50); do grep -q armed "$DAEMON_ROOT/proxy.log" && break; sleep 0.1; done
  lease=$("${NS[@]}" curl -s http://127.0.0.1:2379/v3/kv/range \
    -d "{\"key\":\"$(printf %s "$PREFIX/nodes/a" | base64 -w0)\"}" | jq -r '.kvs[0].lease')
  [[ "$lease" =~ ^[0-9]+$ ]] || fail "P/nodes/a's lease: $lease"
  "${NS[@]}" curl -s http://127.0.0.1:2379/v3/lease/revoke -d "{\"ID\":\"$lease\"}" | jq -e .header >/dev/null ||
    fail "revoke a's lease"
  wait_view b "[$(node a)] | length == 0"
  for i in $(seq 100); do grep -q 'failed a put' "$DAEMON_ROOT/proxy.log" && break; sleep 0.1; done
  grep -q 'failed a put' "$DAEMON_ROOT/proxy.log" || fail "a made no put: $(cat "$DAEMON_ROOT/proxy.log")"
  # a is back in the node list (well before its 30 s heartbeat), and a member
  wait_view b "$(node a) | .url == \"https://127.0.0.1:7441\"" 10
  assert_eq "$(etcd_key "$PREFIX/members/a")" "https://127.0.0.1:7441" "P/members/a"
}

now_ms() { local t=${EPOCHREALTIME//[.,]/}; echo $((t / 1000)); }

TEST_TIMEOUT_reregister_soon_after_an_outage=90
test_reregister_soon_after_an_outage() { # a node whose etcd was away for longer than its
  # retries take to space out registers again within TTL/3 of etcd's return (its retries grew to
  # 5 s apart whatever the TTL: it stayed out of the node list, its ids 503 elsewhere, for up
  # to 5 s more)
  world
  freeze_proxy
  local proxy=$PROXY i id t0 up took
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view b "[$(node a), $(node b)] | length == 2"
  freq a POST /v1/sandboxes -d '{}'
  fexpect 201 '.id | endswith(".a")'
  id=$(jq -r .id <<<"$BODY")
  kill -HUP "$proxy" # etcd away for a: each call fails at once, and its retries space out
  wait_view a '.etcd == "unreachable"' 5
  t0=$(now_ms) # a's first failure (within 0.2 s): the retries count from it
  grep -q '^down' "$DAEMON_ROOT/proxy.log" || fail "the relay did not go down: $(cat "$DAEMON_ROOT/proxy.log")"
  wait_view b "[$(node a)] | length == 0" $((TTL * 3)) # a's lease expired
  freq b GET "/v1/sandboxes/$id"
  fexpect 503 '.code == "node_unavailable"'
  # back 8.5 s after the first failure: retries doubling from 0.5 s to 5 s were made at 0.5,
  # 1.5, 3.5 and 7.5 s, the next at 12.5 s; spaced TTL/3 (1 s) at most, one comes within 1 s
  i=$((t0 + 8500 - $(now_ms)))
  [ "$i" -gt 0 ] || fail "a's lease took $((8500 - i)) ms to expire (TTL $TTL s)"
  sleep "$((i / 1000)).$(printf %03d $((i % 1000)))"
  kill -HUP "$proxy"
  up=$(now_ms)
  wait_view b "$(node a) | .url == \"https://127.0.0.1:7441\"" 15
  took=$(($(now_ms) - up))
  echo "a back in b's node list $took ms after etcd came back" >&2
  [ "$took" -le 2500 ] || fail "a was in b's node list again only $took ms after etcd came back (TTL ${TTL} s: within 2500 ms expected)"
  freq b GET "/v1/sandboxes/$id"
  fexpect 200 '.state == "running"'
}

TEST_TIMEOUT_lease_kept_over_a_dead_connection=60
test_lease_kept_over_a_dead_connection() { # a node with the shortest TTL (2 s) whose connection
  # to etcd went dead (a relay or a NAT that lost it; etcd away for 0.5 s, then answering new
  # connections) keeps its etcd lease and its place in the node list, and never finds etcd
  # unreachable: its keepalive gives up on the dead connection within TTL/3 and is sent again at
  # once on a new one, and its watch reopens its stream (each etcd call waited up to 3 s whatever the TTL: the keepalive stuck on
  # the dead connection outlived the lease, a left the node list and registered again)
  world
  freeze_proxy
  local proxy=$PROXY i lease
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479 --fleet-ttl 2
  fleet_daemon b
  wait_view b "[$(node a), $(node b)] | length == 2"
  lease=$(etcd_lease_of "$PREFIX/nodes/a")
  [[ "$lease" =~ ^[0-9]+$ ]] || fail "P/nodes/a's lease: $lease"
  kill -WINCH "$proxy"
  proxy_says '^stalled [1-9]'
  sleep 0.5
  kill -WINCH "$proxy"
  proxy_says '^unstalled'
  for i in $(seq 40); do # 4 s or more: two TTLs
    freq b GET /v1/fleet
    fexpect 200 "[$(node a)] | length == 1"
    sleep 0.1
  done
  assert_eq "$(etcd_lease_of "$PREFIX/nodes/a")" "$lease" "a's etcd lease"
  ! grep -q 'etcd unreachable' "${DAEMON_DIR[a]}/log" || fail "a found etcd unreachable: $(grep fleet "${DAEMON_DIR[a]}/log")"
  # a's watch stream was on a dead connection too: it was reopened with the keepalive's
  freq b POST /v1/fleet/nodes/b/drain
  fexpect 204
  wait_view a "$(node b) | .draining == true" 3
}

TEST_TIMEOUT_kill9=90
test_kill9() { # a killed daemon leaves within its TTL, its ids answer 503; a restart re-registers
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq b POST /v1/sandboxes -d '{}'
  fexpect 201
  local id
  id=$(jq -r .id <<<"$BODY")
  daemon_use b
  kill -KILL "$DPID"
  wait "$DPID" 2>/dev/null || true
  wait_view a "[$(node b)] | length == 0" $((TTL * 5))
  freq a GET "/v1/sandboxes/$id"
  fexpect 503 '.code == "node_unavailable"'
  [ -n "$(header Retry-After)" ] || fail "503 without Retry-After"
  [ -n "$(etcd_key "$PREFIX/members/b")" ] || fail "b is not in P/members/"
  daemon_use a # a daemon started after b left knows it from P/members/: 503 too, never 404
  stop_daemon
  fleet_daemon a
  wait_view a "[$(node a)] | length == 1"
  freq a GET "/v1/sandboxes/$id"
  fexpect 503 '.code == "node_unavailable"'
  fleet_daemon b # the shim kept the sandbox running: the restart re-adopts it
  wait_view a "$(node b) | .active == 1"
  freq a POST "/v1/sandboxes/$id/exec" -d '{"argv":["echo","back"]}'
  fexpect 200 '.stdout == "back\n"'
}

TEST_TIMEOUT_etcd_restart=90
test_etcd_restart() { # etcd down: local service goes on; etcd back: the nodes register again
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  etcd_stop
  wait_view a '.etcd == "unreachable"'
  echo "$BODY" | jq -e "[$(node b)] | length == 1" >/dev/null || fail "the last known view: $BODY"
  freq a POST /v1/sandboxes -d '{}'
  fexpect 201 '.id | endswith(".a")'
  local id
  id=$(jq -r .id <<<"$BODY")
  freq a POST "/v1/sandboxes/$id/exec" -d '{"argv":["true"]}'
  fexpect 200 '.exit_code == 0'
  sleep $((TTL + 1)) # past the nodes' etcd lease TTL: etcd expires them when it is back
  etcd_start
  wait_view a ".etcd == \"ok\" and ([$(node a), $(node b)] | length == 2) and ($(node a) | .active == 1)" 30
  wait_view b ".etcd == \"ok\" and ([$(node a)] | length == 1)" 30
}

TEST_TIMEOUT_leases=90
test_leases() { # a trainer's lease covers its sandboxes on every node
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq a POST /v1/leases -d '{"ttl":5}'
  fexpect 201 '.fleet == true and (.id | endswith(".a"))'
  local lease on_b on_a
  lease=$(jq -r .id <<<"$BODY")
  [ -n "$(etcd_key "$PREFIX/leases/$lease")" ] || fail "P/leases/$lease is not in etcd"
  freq b POST /v1/sandboxes -d "{\"lease\":\"$lease\"}"
  fexpect 201 '.id | endswith(".b")'
  on_b=$(jq -r .id <<<"$BODY")
  freq a POST /v1/sandboxes -d "{\"lease\":\"$lease\"}"
  fexpect 201
  on_a=$(jq -r .id <<<"$BODY")
  # renewed (through b: a 307 to a), the sandbox on b lives past the lease's TTL
  local i start=$SECONDS
  while [ $((SECONDS - start)) -le 7 ]; do
    freq b POST "/v1/leases/$lease/renew"
    fexpect 200
    sleep 0.5
  done
  freq b GET "/v1/sandboxes/$on_b"
  fexpect 200 '.state == "running"'
  # no longer renewed: the sandboxes end on both nodes
  freq_until 30 b '.state == "ended"' GET "/v1/sandboxes/$on_b"
  fexpect 200 '.state == "ended"'
  grep -q "lease ended in the fleet" "${DAEMON_DIR[b]}/log" || fail "b's log does not say why"
  # a ends its own on its lease's expiry, by its own clock (250 ms ticks): it may come a little
  # after etcd removed the key that b saw go
  freq_until 5 a '.state == "ended"' GET "/v1/sandboxes/$on_a"
  fexpect 200 '.state == "ended"'
  [ -z "$(etcd_key "$PREFIX/leases/$lease")" ] || fail "P/leases/$lease outlived its lease"
  # another node's lease that does not exist
  freq b POST /v1/sandboxes -d '{"lease":"ls-0123456789abcdef.a"}'
  fexpect 404 '.code == "not_found"'
}

TEST_TIMEOUT_lease_after_owner_restart=90
test_lease_after_owner_restart() { # a lease deleted on its owner after the owner restarted ends
  # its sandboxes elsewhere at once (the old etcd lease's id was gone with the old daemon: the
  # key stayed for the rest of the lease's TTL, and so did the sandboxes)
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq a POST /v1/leases -d '{"ttl":300}'
  fexpect 201
  local lease on_b i
  lease=$(jq -r .id <<<"$BODY")
  freq b POST /v1/sandboxes -d "{\"lease\":\"$lease\"}"
  fexpect 201
  on_b=$(jq -r .id <<<"$BODY")
  daemon_use a
  stop_daemon
  fleet_daemon a
  wait_view b "[$(node a)] | length == 1"
  freq a DELETE "/v1/leases/$lease"
  fexpect 204
  freq_until 10 b '.state == "ended"' GET "/v1/sandboxes/$on_b"
  fexpect 200 '.state == "ended"'
  [ -z "$(etcd_key "$PREFIX/leases/$lease")" ] || fail "P/leases/$lease outlived its deletion"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
