# The small fleet world of test_fleet_daemon.sh and test_fleet_watch.sh (sourced after
# tests/lib/daemon.sh; never a test itself): a real etcd (Debian's etcd-server) and up to three
# real daemons (a, b, c) in one private network namespace the case makes (loopback only:
# nothing leaves it), each on its own TCP port with TLS (a certificate made here with openssl)
# and the shared fleet token.

PREFIX=/sbxtest
TTL=3 # short for a fast test, not so short that a loaded machine misses a keepalive
ETCD_PID='' ETCD_DIR='' NS=()
declare -gA PORT=([a]=7441 [b]=7442 [c]=7443)

fleet_prereqs() {
  require_root
  command -v etcd >/dev/null || skip "etcd is needed (Debian's etcd-server, tests/deps.sh)"
  command -v openssl >/dev/null || skip "openssl is needed"
  command -v jq >/dev/null || skip "jq is needed"
}

etcd_start() { # [PORT]: in the case's netns, its data in the case's dir (kept across a restart);
  # on another client port than 2379 the daemons do not reach it (a change made "while down")
  local port=${1:-2379}
  ETCD_DIR=$DAEMON_ROOT/etcd
  "${NS[@]}" etcd --name t --data-dir "$ETCD_DIR/data" --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster t=http://127.0.0.1:2380 >>"$DAEMON_ROOT/etcd.log" 2>&1 &
  ETCD_PID=$!
  for _ in $(seq 100); do
    "${NS[@]}" curl -s --max-time 1 "http://127.0.0.1:$port/health" | grep -q true && return 0
    kill -0 "$ETCD_PID" 2>/dev/null || { tail -20 "$DAEMON_ROOT/etcd.log" >&2; fail "etcd exited"; }
    sleep 0.1
  done
  fail "etcd did not become healthy"
}

etcd_stop() {
  [ -n "$ETCD_PID" ] || return 0
  kill -TERM "$ETCD_PID" 2>/dev/null
  wait "$ETCD_PID" 2>/dev/null || true
  ETCD_PID=''
}

# The world: a netns, certificates, etcd. The daemons (a, b, c) start through fleet_daemon.
world() {
  fleet_prereqs
  daemon_netns
  NS=(nsenter "--net=/proc/$NSPID/ns/net")
  daemon_at_exit etcd_stop
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$DAEMON_ROOT/key.pem" -out "$DAEMON_ROOT/cert.pem" -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 2>/dev/null || fail "openssl could not make a certificate"
  etcd_start
}

fleet_daemon() { # NAME [flags...]: start (or restart) daemon NAME in the fleet
  local n=$1
  shift
  daemon_start "$n" --tcp "127.0.0.1:${PORT[$n]}" --token "tok-$n" --fleet-token ftok \
    --tls-cert "$DAEMON_ROOT/cert.pem" --tls-key "$DAEMON_ROOT/key.pem" \
    --fleet-etcd http://127.0.0.1:2379 --fleet-prefix "$PREFIX" --node-name "$n" \
    --advertise-url "https://127.0.0.1:${PORT[$n]}" --fleet-ttl "$TTL" "$@"
}

# HTTPS to node NAME with the fleet token, following redirects with it: sets CODE, BODY, HDRS.
# Without -L: freq0 (the redirect itself).
freq() { _freq --location-trusted "$@"; }
freq0() { _freq "" "$@"; }
_freq() {
  local follow=$1 n=$2 m=$3 p=$4
  shift 4
  CODE=$("${NS[@]}" curl -s --max-time 30 --cacert "$DAEMON_ROOT/cert.pem" ${follow:+"$follow"} \
    -H "Authorization: Bearer ftok" -X "$m" -o "$DAEMON_ROOT/body" -D "$DAEMON_ROOT/hdrs" \
    -w '%{http_code}' "$@" "https://127.0.0.1:${PORT[$n]}$p") || true
  BODY=$(cat "$DAEMON_ROOT/body" 2>/dev/null)
  HDRS=$(cat "$DAEMON_ROOT/hdrs" 2>/dev/null)
}
fexpect() { # CODE [jq-expression]
  [ "$CODE" == "$1" ] || fail "expected HTTP $1, got $CODE: $BODY"
  [ -z "${2:-}" ] || echo "$BODY" | jq -e "$2" >/dev/null || fail "expected $2 in: $BODY"
}
freq_until() { # SECONDS NAME JQ METHOD PATH [curl args...]: freq until its answer satisfies JQ
  local secs=$1 n=$2 cond=$3
  shift 3
  for _ in $(seq $((secs * 10))); do
    freq "$n" "$@"
    echo "$BODY" | jq -e "$cond" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
}
header() { tr -d '\r' <<<"$HDRS" | awk -v h="$1:" 'tolower($1) == tolower(h) {print $2}' | tail -1; }

# Until node NAME's /v1/fleet satisfies a jq expression (the fleet's view is a second behind).
wait_view() { # NAME JQ [seconds]
  for _ in $(seq $((${3:-15} * 10))); do
    freq "$1" GET /v1/fleet
    [ "$CODE" == 200 ] && echo "$BODY" | jq -e "$2" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  fail "node $1's fleet view never had $2: $BODY"
}
node() { echo "(.nodes[] | select(.name == \"$1\"))"; } # a jq path to node NAME's record

etcd_key() { # KEY: its value, or nothing
  "${NS[@]}" curl -s http://127.0.0.1:2379/v3/kv/range -d "{\"key\":\"$(printf %s "$1" | base64 -w0)\"}" |
    jq -r '.kvs[0].value // empty' | base64 -d
}

etcd_lease_of() { # KEY: the etcd lease its value is attached to
  "${NS[@]}" curl -s http://127.0.0.1:2379/v3/kv/range -d "{\"key\":\"$(printf %s "$1" | base64 -w0)\"}" |
    jq -r '.kvs[0].lease // empty'
}
proxy_says() { # REGEX: until the relay's log has a line matching it (5 s)
  local i
  for i in $(seq 50); do grep -qE "$1" "$DAEMON_ROOT/proxy.log" && return 0; sleep 0.1; done
  fail "the relay never said /$1/: $(cat "$DAEMON_ROOT/proxy.log")"
}

freeze_proxy() { # a relay to etcd on 127.0.0.1:2479 in the world (etcd_freeze_proxy.py: SIGUSR1,
  # SIGUSR2, SIGHUP, SIGWINCH and SIGALRM, as it says); PROXY its pid, killed at the case's end
  "${NS[@]}" python3 "$(dirname "$0")/etcd_freeze_proxy.py" 2479 2379 2>"$DAEMON_ROOT/proxy.log" &
  PROXY=$!
  daemon_at_exit kill "$PROXY"
  local i
  for i in $(seq 50); do grep -q listening "$DAEMON_ROOT/proxy.log" && break; sleep 0.1; done
  grep -q listening "$DAEMON_ROOT/proxy.log" || fail "the relay did not start: $(cat "$DAEMON_ROOT/proxy.log")"
}
