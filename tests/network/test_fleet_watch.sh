#!/usr/bin/env bash
# How a node learns the fleet from etcd (docs/FLEET.md "Watching etcd"): one range read of P/,
# then one /v3/watch stream from its revision + 1 (sandboxd/fleet/watch.c), in the small world
# of fleetd_world.sh (a real etcd, real daemons, one private netns). Checked: another node's
# join, drain, lease end and departure reach a node through the stream, with no second read
# and no polling (etcd's own Range counter stands still while the fleet is idle, where the
# old way, --fleet-read poll, reads four prefixes a second); a stream broken by an etcd restart
# resumes from its revision and brings the changes made while it was down; a resume point
# etcd compacted away makes the node read everything again; a stream that stays open but goes
# silent (etcd_freeze_proxy.py) is given up once the node's own put has not come back in 5 s;
# a node's own drain holds while its view is older than the drain; a watch refused for a while
# resumes within TTL/3 of etcd taking watches again; a wiped etcd (a new store, its revisions
# behind or past the nodes') has every node back in every node's view, ends no sandbox of a
# lease that lives on its owner (which puts the key again), and keeps a drained node drained;
# an etcd restored from a backup (the node's etcd lease lives on) has the node follow its drain.
DAEMON_TAG=fleetw
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/fleetd_world.sh"

# etcd's count of one gRPC method (the JSON gateway's calls go through them): Range, Put...
etcd_calls() { # METHOD [PORT]
  "${NS[@]}" curl -s "http://127.0.0.1:${2:-2379}/metrics" |
    awk -v m="grpc_method=\"$1\"" '/^grpc_server_handled_total/ && index($0, m) {n += $2} END {print n + 0}'
}
etcd_post() { # PORT PATH JSON: a call to the gateway (the test's own, not a node's)
  "${NS[@]}" curl -s --max-time 5 "http://127.0.0.1:$1$2" -d "$3"
}
b64() { printf %s "$1" | base64 -w0; }
etcd_put_at() { # PORT KEY VALUE
  etcd_post "$1" /v3/kv/put "{\"key\":\"$(b64 "$2")\",\"value\":\"$(b64 "$3")\"}" | jq -e .header >/dev/null ||
    fail "put $2 on etcd :$1"
}
etcd_del_at() { # PORT KEY
  etcd_post "$1" /v3/kv/deleterange "{\"key\":\"$(b64 "$2")\"}" | jq -e .header >/dev/null ||
    fail "delete $2 on etcd :$1"
}
watch_of() { freq "$1" GET /v1/fleet; fexpect 200; jq -c .watch <<<"$BODY"; } # NAME

TEST_TIMEOUT_watch_sees_the_fleet=90
test_watch_sees_the_fleet() { # join, drain, lease end, departure: all through one stream
  world
  fleet_daemon a
  wait_view a "([$(node a)] | length == 1) and .watch.mode == \"watch\""
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2" # b's join
  # idle: nobody reads (the old way: 4 Ranges a second per node); a window of 3 s
  local r0 r1
  r0=$(etcd_calls Range)
  sleep 3
  r1=$(etcd_calls Range)
  [ "$r1" == "$r0" ] || fail "etcd served $((r1 - r0)) Range calls in 3 s of an idle fleet: someone polls"
  # drain: b hears its own drain through the stream, a hears it too
  freq a POST /v1/fleet/nodes/b/drain
  fexpect 204
  wait_view b "$(node b) | .state == \"draining\""
  wait_view a "$(node b) | .draining == true"
  freq b POST /v1/fleet/nodes/b/undrain
  fexpect 204
  wait_view a "$(node b) | .draining == false and .free > 0"
  # a lease made on b covers a sandbox on a; deleted on b, the key's delete ends it on a
  freq b POST /v1/leases -d '{"ttl":60}'
  fexpect 201 '.fleet == true'
  local lease on_a i
  lease=$(jq -r .id <<<"$BODY")
  freq a POST /v1/sandboxes -d "{\"lease\":\"$lease\"}"
  fexpect 201 '.id | endswith(".a")'
  on_a=$(jq -r .id <<<"$BODY")
  freq b DELETE "/v1/leases/$lease"
  [[ "$CODE" == 20* ]] || fail "delete the lease on b: $CODE $BODY"
  freq_until 10 a '.state == "ended"' GET "/v1/sandboxes/$on_a"
  fexpect 200 '.state == "ended"'
  grep -q "lease ended in the fleet" "${DAEMON_DIR[a]}/log" || fail "a's log does not say why"
  # departure: b stops (SIGTERM revokes its etcd lease: the key's delete reaches a)
  daemon_use b
  stop_daemon
  wait_view a "[$(node b)] | length == 0"
  # all of it came through the one stream opened at start, after the one read
  wait_view a '.watch.reads == 1 and .watch.streams == 1 and .watch.compacted == 0'
}

TEST_TIMEOUT_watch_resume_and_compaction=120
test_watch_resume_and_compaction() { # a broken stream resumes from its revision; compacted: read again
  world
  fleet_daemon a
  fleet_daemon b
  wait_view a "([$(node a), $(node b)] | length == 2) and .watch.reads == 1 and .watch.streams == 1"
  # etcd goes away; while the streams are down, changes are made (on another client port the
  # daemons do not use), then etcd is back where they look for it
  etcd_stop
  etcd_start 2399
  local z='{"name":"z","url":"https://127.0.0.1:7449","version":"t","draining":false,"max":1,"active":0,"starting":0,"free":1,"pools":[]}'
  etcd_put_at 2399 "$PREFIX/nodes/z" "$z"
  etcd_put_at 2399 "$PREFIX/drain/b" 1
  etcd_stop
  etcd_start
  wait_view a "([$(node z)] | length == 1) and ($(node b) | .draining == true)" 30
  wait_view b "$(node b) | .state == \"draining\"" 30
  # resumed from the revision: no second read
  wait_view a '.watch.reads == 1 and .watch.streams >= 2 and .watch.compacted == 0'
  # again, and this time etcd compacts its history past the point the streams resume from
  etcd_stop
  etcd_start 2399
  etcd_del_at 2399 "$PREFIX/nodes/z"
  etcd_del_at 2399 "$PREFIX/drain/b"
  local rev
  rev=$(etcd_post 2399 /v3/kv/range "{\"key\":\"$(b64 /)\"}" | jq -r .header.revision)
  etcd_post 2399 /v3/kv/compaction "{\"revision\":\"$rev\",\"physical\":true}" | jq -e .header >/dev/null ||
    fail "compaction at $rev"
  etcd_stop
  etcd_start
  wait_view a "([$(node z)] | length == 0) and ($(node b) | .draining == false)" 30
  wait_view b "$(node b) | .state == \"ready\"" 30
  wait_view a '.watch.reads == 2 and .watch.compacted >= 1' # read again, watched from there
  wait_view b '.watch.reads == 2 and .watch.compacted >= 1'
  # and the new stream works: a's drain reaches b
  freq b POST /v1/fleet/nodes/a/drain
  fexpect 204
  wait_view b "$(node a) | .draining == true"
  wait_view a "$(node a) | .state == \"draining\""
}

now_ms() { local t=${EPOCHREALTIME//[.,]/}; echo $((t / 1000)); }

TEST_TIMEOUT_watch_resumes_within_the_ttl=60
test_watch_resumes_within_the_ttl() { # a watch broken for longer than its retries take to space
  # out resumes within TTL/3 of etcd taking watches again (its retries grew to 5 s apart
  # whatever the TTL: the node's view stayed behind for up to 5 s more)
  world
  freeze_proxy
  local proxy=$PROXY i t0 up took
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view a "([$(node a), $(node b)] | length == 2) and .watch.streams == 1"
  kill -ALRM "$proxy" # a's stream is closed and reopening it fails; its other calls go through
  t0=$(now_ms)
  proxy_says '^watches refused 1$'
  # back 8 s after the break: retries doubling from 0.5 s to 5 s were made at 0.5, 1.5, 3.5 and
  # 7.5 s, the next at 12.5 s; spaced TTL/3 (1 s) at most, one comes within 1 s
  i=$((t0 + 8000 - $(now_ms)))
  sleep "$((i / 1000)).$(printf %03d $((i % 1000)))"
  kill -ALRM "$proxy"
  up=$(now_ms)
  proxy_says '^watches allowed'
  freq b POST /v1/fleet/nodes/b/drain
  fexpect 204
  wait_view a "$(node b) | .draining == true" 15
  took=$(($(now_ms) - up))
  echo "a saw b's drain $took ms after etcd took watches again" >&2
  [ "$took" -le 2500 ] || fail "a saw b's drain only $took ms after etcd took watches again (TTL ${TTL} s: within 2500 ms expected)"
  wait_view a '.watch.reads == 1' # resumed from its revision
}

TEST_TIMEOUT_etcd_wiped=120
test_etcd_wiped() { # etcd restarted empty (its data lost: revisions from 1 again, the nodes' leases
  # gone): every node registers again, every node's view has every node's new record, ids
  # route. Twice: the new etcd's revision still behind the one the nodes had reached when their
  # streams reopen, and past it (a's watch kept away until another application's writes took
  # it there: the stream from a's old revision brought nothing of what was put before; a never
  # saw b's new record)
  world
  freeze_proxy
  local proxy=$PROXY id rev round i t both
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq b POST /v1/sandboxes -d '{}'
  fexpect 201 '.id | endswith(".b")'
  id=$(jq -r .id <<<"$BODY")
  for round in behind ahead; do
    wait_view a "[$(node a), $(node b)] | length == 2" 30
    rev=$(etcd_post 2379 /v3/kv/range "{\"key\":\"$(b64 /)\"}" | jq -r .header.revision)
    t=$EPOCHREALTIME
    [ "$round" == behind ] || { kill -ALRM "$proxy" && proxy_says '^watches refused 1$'; }
    etcd_stop
    rm -rf "$ETCD_DIR/data"
    etcd_start
    if [ "$round" == ahead ]; then # both registered again, then the store is busy elsewhere
      for i in $(seq 100); do
        [ -n "$(etcd_key "$PREFIX/nodes/a")" ] && [ -n "$(etcd_key "$PREFIX/nodes/b")" ] && break
        sleep 0.1
      done
      for i in $(seq $((rev + 5))); do etcd_put_at 2379 "/other/k$i" v; done
      kill -ALRM "$proxy"
      proxy_says '^watches allowed'
    fi
    echo "round $round: revision $rev before the wipe, $(etcd_post 2379 /v3/kv/range "{\"key\":\"$(b64 /)\"}" | jq -r .header.revision) now" >&2
    both="([$(node a), $(node b)] | length == 2) and ($(node a) | .heartbeat > $t) and ($(node b) | .heartbeat > $t)"
    wait_view a "$both" $((TTL * 4))
    wait_view b "$both" $((TTL * 4))
    freq a GET "/v1/sandboxes/$id"
    fexpect 200 '.state == "running" and .node == "b"'
    [ -n "$(etcd_key "$PREFIX/members/a")" ] && [ -n "$(etcd_key "$PREFIX/members/b")" ] ||
      fail "round $round: P/members/ not put again"
  done
}

TEST_TIMEOUT_etcd_wiped_lease_lives=120
test_etcd_wiped_lease_lives() { # a wiped etcd lost a's lease keys; b holds sandboxes of them.
  # b keeps its sandbox of a live lease while a, cut off, is not back yet (b read the key gone
  # in the new store, at a revision past the one its lookup had read it at in the old one, and
  # ended the sandbox while the lease lived on a), and a puts the key again when it registers
  # again; a lease that ended on a meanwhile ends on b within its TTL and two of the fleet's;
  # a delete of the live lease then ends it on b at once, as before a wipe
  world
  freeze_proxy
  local proxy=$PROXY lease short sb sb2 rev t both i
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  wait_view b "[$(node a), $(node b)] | length == 2"
  freq a POST /v1/leases -d '{"ttl":60}'
  fexpect 201 '.fleet == true'
  lease=$(jq -r .id <<<"$BODY")
  freq a POST /v1/leases -d '{"ttl":4}' # not renewed: it ends on a while a is cut off
  fexpect 201 '.fleet == true'
  short=$(jq -r .id <<<"$BODY")
  freq b POST /v1/sandboxes -d "{\"lease\":\"$lease\"}"
  fexpect 201 '.id | endswith(".b")'
  sb=$(jq -r .id <<<"$BODY")
  freq b POST /v1/sandboxes -d "{\"lease\":\"$short\"}"
  fexpect 201 '.id | endswith(".b")'
  sb2=$(jq -r .id <<<"$BODY")
  rev=$(etcd_post 2379 /v3/kv/range "{\"key\":\"$(b64 /)\"}" | jq -r .header.revision)
  t=$EPOCHREALTIME
  kill -HUP "$proxy" # a is cut off from etcd until the next SIGHUP
  proxy_says '^down'
  etcd_stop
  rm -rf "$ETCD_DIR/data"
  etcd_start
  wait_view b "([$(node b)] | length == 1) and ($(node b) | .heartbeat > $t)" $((TTL * 4))
  # the new store's revisions pass the old one's (keys under P/ that no node reads)
  for i in $(seq $((rev + 5))); do etcd_put_at 2379 "$PREFIX/other/k$i" v; done
  wait_view b ".watch.revision > $rev" 10
  sleep $((TTL + 1)) # b's view has the new store without a's lease keys
  freq b GET "/v1/sandboxes/$sb"
  fexpect 200
  [ "$(jq -r .state <<<"$BODY")" == running ] ||
    fail "b's sandbox of a's live lease $lease is $(jq -c '[.state, .["end"].message]' <<<"$BODY") after the wipe: $(grep 'lease' "${DAEMON_DIR[b]}/log" | tail -3)"
  kill -HUP "$proxy" # a is back
  proxy_says '^up'
  both="([$(node a), $(node b)] | length == 2) and ($(node a) | .heartbeat > $t) and ($(node b) | .heartbeat > $t)"
  wait_view a "$both" $((TTL * 4))
  wait_view b "$both" $((TTL * 4))
  for i in $(seq 30); do
    [ -n "$(etcd_key "$PREFIX/leases/$lease")" ] && break
    sleep 0.1
  done
  [ -n "$(etcd_key "$PREFIX/leases/$lease")" ] || fail "a did not put $PREFIX/leases/$lease again after the wipe"
  [ -z "$(etcd_key "$PREFIX/leases/$short")" ] || fail "a put its ended lease $short again"
  # the short lease ended on a: b ends its sandbox once the grace (4 s + 2 TTLs) is over
  freq_until 15 b '.state == "ended"' GET "/v1/sandboxes/$sb2"
  fexpect 200 '.state == "ended" and .end.message == "lease ended in the fleet"'
  freq b GET "/v1/sandboxes/$sb"
  fexpect 200 '.state == "running"'
  freq a POST "/v1/leases/$lease/renew"
  fexpect 200
  # the lease really ends: b ends its sandbox at once, as before a wipe
  freq a DELETE "/v1/leases/$lease"
  [[ "$CODE" == 20* ]] || fail "delete the lease on a: $CODE $BODY"
  freq_until 5 b '.state == "ended"' GET "/v1/sandboxes/$sb"
  fexpect 200 '.state == "ended"'
}

TEST_TIMEOUT_etcd_wiped_drain_kept=120
test_etcd_wiped_drain_kept() { # a wiped etcd lost P/drain/a: a, still drained, puts it again
  # when it registers again and stays drained (it took the new store's view without the key
  # for an undrain); an undrain made while a was only cut off (the store kept its member key)
  # is not undone when a is back
  world
  freeze_proxy
  local proxy=$PROXY rev t both i
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq b POST /v1/fleet/nodes/a/drain
  fexpect 204
  wait_view a "$(node a) | .state == \"draining\""
  rev=$(etcd_post 2379 /v3/kv/range "{\"key\":\"$(b64 /)\"}" | jq -r .header.revision)
  t=$EPOCHREALTIME
  etcd_stop
  rm -rf "$ETCD_DIR/data"
  etcd_start
  both="([$(node a), $(node b)] | length == 2) and ($(node a) | .heartbeat > $t) and ($(node b) | .heartbeat > $t)"
  wait_view a "$both" $((TTL * 4))
  wait_view b "$both" $((TTL * 4))
  for i in $(seq $((rev + 5))); do etcd_put_at 2379 "$PREFIX/other/k$i" v; done
  wait_view a ".watch.revision > $rev" 10
  sleep 2
  ! grep -q "node a undrained" "${DAEMON_DIR[a]}/log" || fail "a took the wiped etcd for an undrain: $(grep 'node a' "${DAEMON_DIR[a]}/log")"
  [ "$(etcd_key "$PREFIX/drain/a")" == 1 ] || fail "a did not put $PREFIX/drain/a again after the wipe"
  wait_view b "$(node a) | .draining == true"
  freq0 a POST /v1/sandboxes -d '{}'
  fexpect 307
  # cut off longer than its TTL (its etcd lease expires), a is undrained through b meanwhile
  kill -HUP "$proxy"
  proxy_says '^down'
  freq b POST /v1/fleet/nodes/a/undrain
  fexpect 204
  wait_view b "[$(node a)] | length == 0" $((TTL * 3))
  t=$EPOCHREALTIME
  kill -HUP "$proxy"
  proxy_says '^up'
  wait_view b "$both" $((TTL * 4))
  wait_view a "$(node a) | .state == \"ready\"" 10
  sleep 2
  [ -z "$(etcd_key "$PREFIX/drain/a")" ] || fail "a put its drain again over the undrain made while it was away"
  wait_view b "$(node a) | .draining == false"
}

TEST_TIMEOUT_etcd_restored_drain_follows=90
test_etcd_restored_drain_follows() { # etcd restored from a backup that still holds a's etcd
  # lease (a's keepalives go on: a does not register again on its own): a's watch sees the
  # revisions go back and begins a new store epoch; a registers again in it, and from then on
  # takes the store's word on its own drain (it kept its drain state for good, deaf to an
  # undrain)
  world
  local snaprev i
  fleet_daemon a
  fleet_daemon b
  wait_view a "[$(node a), $(node b)] | length == 2"
  freq b POST /v1/fleet/nodes/a/drain
  fexpect 204
  wait_view a "$(node a) | .state == \"draining\""
  "${NS[@]}" env ETCDCTL_API=3 etcdctl --endpoints http://127.0.0.1:2379 snapshot save "$DAEMON_ROOT/snap.db" >/dev/null ||
    fail "etcdctl snapshot save"
  snaprev=$(etcd_post 2379 /v3/kv/range "{\"key\":\"$(b64 /)\"}" | jq -r .header.revision)
  for i in $(seq 20); do etcd_put_at 2379 "$PREFIX/other/k$i" v; done
  wait_view a ".watch.revision >= $((snaprev + 20))"
  etcd_stop
  rm -rf "$ETCD_DIR/data"
  env ETCDCTL_API=3 etcdctl snapshot restore "$DAEMON_ROOT/snap.db" --data-dir "$ETCD_DIR/data" \
    --name t --initial-cluster t=http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 >/dev/null 2>&1 || fail "etcdctl snapshot restore"
  etcd_start
  wait_view a ".watch.reads >= 2 and ($(node a) | .draining == true)" 15
  freq b POST /v1/fleet/nodes/a/undrain
  fexpect 204
  wait_view a "$(node a) | .state == \"ready\"" 10
}

TEST_TIMEOUT_watch_silent_stream=90
test_watch_silent_stream() { # a stream that stays open but brings nothing is given up and read again
  world
  # a's etcd is reached through a relay that can make its watch stream go silent, still open
  freeze_proxy
  local proxy=$PROXY i
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view a "([$(node a), $(node b)] | length == 2) and .watch.reads == 1 and .watch.streams == 1 and .watch.stale == 0"
  kill -USR1 "$proxy"
  for i in $(seq 50); do grep -q 'frozen [1-9]' "$DAEMON_ROOT/proxy.log" && break; sleep 0.1; done
  grep -q 'frozen 1$' "$DAEMON_ROOT/proxy.log" || fail "the relay froze no single stream: $(cat "$DAEMON_ROOT/proxy.log")"
  # b drains itself; a's silent stream does not bring it (nothing tells a yet)
  freq b POST /v1/fleet/nodes/b/drain
  fexpect 204
  sleep 2
  freq a GET /v1/fleet
  fexpect 200 "($(node b) | .draining == false) and .watch.stale == 0 and .watch.reads == 1"
  # a puts its own record (a sandbox made on a changes it): the put does not come back through the
  # stream, so 5 s later a gives the stream up and reads everything again, b's drain with it
  freq a POST /v1/sandboxes -d '{}'
  fexpect 201 '.id | endswith(".a")'
  wait_view a ".watch.stale >= 1 and .watch.reads == 2 and ($(node b) | .draining == true)" 20
  # and the stream opened after the read brings changes again
  freq b POST /v1/fleet/nodes/b/undrain
  fexpect 204
  wait_view a "$(node b) | .draining == false"
  wait_view a '.watch.reads == 2'
}

TEST_TIMEOUT_watch_own_drain_holds=60
test_watch_own_drain_holds() { # a node's own drain is not undone by a view read before it
  world
  freeze_proxy
  local proxy=$PROXY i
  fleet_daemon a --fleet-etcd http://127.0.0.1:2479
  fleet_daemon b
  wait_view a "([$(node a), $(node b)] | length == 2) and .watch.reads == 1 and .watch.streams == 1"
  kill -USR1 "$proxy" # a's stream goes silent: its view stays the one before the drain
  for i in $(seq 50); do grep -q 'frozen [1-9]' "$DAEMON_ROOT/proxy.log" && break; sleep 0.1; done
  grep -q 'frozen 1$' "$DAEMON_ROOT/proxy.log" || fail "the relay froze no single stream: $(cat "$DAEMON_ROOT/proxy.log")"
  freq a POST /v1/fleet/nodes/a/drain
  fexpect 204
  # the watch hands its (old) copy over each second: for 3 s, a takes no create all the same
  for i in $(seq 6); do
    freq0 a POST /v1/sandboxes -d '{}'
    fexpect 307
    sleep 0.5
  done
  ! grep -q "node a undrained" "${DAEMON_DIR[a]}/log" || fail "a's drain was undone by an older view"
}

TEST_TIMEOUT_poll_mode=60
test_poll_mode() { # the old way is kept (--fleet-read poll: to measure it): it reads each second
  world
  fleet_daemon a --fleet-read poll
  fleet_daemon b
  wait_view a "([$(node a), $(node b)] | length == 2) and .watch.mode == \"poll\""
  wait_view b "([$(node a), $(node b)] | length == 2) and .watch.mode == \"watch\""
  local r0 r1
  r0=$(etcd_calls Range)
  sleep 3
  r1=$(etcd_calls Range)
  [ $((r1 - r0)) -ge 8 ] || fail "a polling node read only $((r1 - r0)) times in 3 s"
  freq b POST /v1/fleet/nodes/b/drain
  fexpect 204
  wait_view a "$(node b) | .draining == true"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
