#!/usr/bin/env bash
# Strictness of the API at its edges, against a real daemon: every number in the create, exec,
# timeout, fork and lease bodies outside its documented range (docs/API.md) is a 400 naming the
# field; HTTP framing that a proxy could read differently (RFC 9112: two Content-Lengths, a
# space before a header's colon, bare LF line ends, a Transfer-Encoding other than chunked) is
# a 400 and never hangs; an exec that hits the sandbox's own pids limit is a result, not a 500;
# an exec too large for the shim's request is a 400, as is a query parameter an endpoint does
# not take.

DAEMON_TAG=strict
source "$(dirname "$0")/../lib/daemon.sh"

bad_number() { # METHOD PATH BODY FIELD: a 400 invalid_argument whose message starts with FIELD
  req "$1" "$2" -H 'Content-Type: application/json' -d "$3"
  [ "$CODE" == 400 ] || fail "$1 $2 $3: expected 400, got $CODE: $BODY"
  echo "$BODY" | jq -e --arg f "$4:" '.code == "invalid_argument" and (.message | startswith($f))' \
    >/dev/null || fail "$1 $2 $3: the 400 does not name $4: $BODY"
}

test_number_ranges() {
  start_daemon
  create; local id=$ID S=/v1/sandboxes/$ID
  req POST /v1/leases -d '{"ttl":"5m"}'; expect 201
  local c
  for c in '{"cpu":5e-324}' '{"cpu":1e-7}' '{"cpu":0.005}' '{"cpu":1e308}'; do
    bad_number POST /v1/sandboxes "$c" cpu
    bad_number POST "$S/fork" "{\"count\":1,${c:1}" cpu
  done
  for c in '{"max_cost_usd":5e-324}' '{"max_cost_usd":1e308}' '{"max_cost_usd":1e-7}' '{"max_cost_usd":0}'; do
    bad_number POST /v1/sandboxes "$c" max_cost_usd
    bad_number POST "$S/fork" "{\"count\":1,${c:1}" max_cost_usd
  done
  bad_number POST /v1/sandboxes '{"memory":1e308}' memory
  bad_number POST /v1/sandboxes '{"disk":1e-400}' disk
  bad_number POST /v1/sandboxes '{"pids":8.5}' pids
  bad_number POST /v1/sandboxes '{"timeout":5e-324}' timeout
  bad_number POST /v1/sandboxes '{"idle_timeout":1e308}' idle_timeout
  bad_number POST "$S/exec" '{"argv":["true"],"max_output":1e-400}' max_output
  bad_number POST "$S/exec" '{"argv":["true"],"max_output":0}' max_output
  bad_number POST "$S/exec" '{"argv":["true"],"max_output":1e308}' max_output
  bad_number POST "$S/exec" '{"argv":["true"],"timeout":5e-324}' timeout
  bad_number POST "$S/exec" '{"argv":["true"],"timeout":1e308}' timeout
  bad_number POST "$S/timeout" '{"timeout":1e-400}' timeout
  bad_number POST "$S/timeout" '{"timeout":604801}' timeout
  bad_number POST /v1/leases '{"ttl":5e-324}' ttl
  bad_number POST /v1/leases '{"ttl":1e308}' ttl
  bad_number POST "$S/fork" '{"count":1e-400}' count
  bad_number POST "$S/fork" '{"count":257}' count
  # the edges are accepted
  req POST "$S/exec" -d '{"argv":["echo","hello"],"max_output":1,"timeout":0.001}'
  [ "$CODE" == 200 ] || fail "max_output 1: $CODE $BODY"
  req POST "$S/exec" -d '{"argv":["echo","hello"],"max_output":1}'
  expect 200 '.stdout == "h" and .stdout_truncated == true'
  req POST /v1/sandboxes -d '{"cpu":0.01,"max_cost_usd":1e-6}'
  expect 201 '.limits.cpu == 0.01 and .limits.max_cost_usd == 0.000001'
  req POST /v1/sandboxes -d '{"max_cost_usd":1e6}'; expect 201 '.limits.max_cost_usd == 1000000'
  req GET /v1/sandboxes; expect 200 'length == 3'
}

# A field the daemon does not implement is a 400 naming it, never ignored (docs/API.md "Unknown
# fields"): every JSON body, nested objects too, and the daemon's config file; the bodies
# without such a field still work.
unknown_field() { # METHOD PATH BODY FIELD: 400 invalid_argument "FIELD: unknown field ..."
  req "$1" "$2" -H 'Content-Type: application/json' -d "$3"
  [ "$CODE" == 400 ] || fail "$1 $2 $3: expected 400, got $CODE: $BODY"
  local want="$4: unknown field"
  [ "$4" != args ] || want="args: extra pytest arguments are not implemented"
  echo "$BODY" | jq -e --arg f "$want" \
    '.code == "invalid_argument" and (.message | startswith($f))' >/dev/null ||
    fail "$1 $2 $3: the 400 does not name $4: $BODY"
}

TEST_TIMEOUT_unknown_fields_refused=90
test_unknown_fields_refused() {
  start_daemon
  create; local id=$ID S=/v1/sandboxes/$ID
  req GET /v1/sandboxes; expect 200 'length == 1'
  req POST /v1/leases -d '{"ttl":"5m"}'; expect 201
  local f lease; lease=$(echo "$BODY" | jq -r .id)
  # a renew keeps the ttl: one asked for is refused, not ignored; no body or {} renews
  unknown_field POST "/v1/leases/$lease/renew" '{"ttl":"10m"}' ttl
  req POST "/v1/leases/$lease/renew" -d '[]'; expect 400 '.message == "the body must be a JSON object"'
  req POST "/v1/leases/$lease/renew"; expect 200 '.ttl == 300'
  req POST "/v1/leases/$lease/renew" -d '{}'; expect 200 '.ttl == 300'
  req POST /v1/sandboxes -d '{"memory":"256Mi","isolation":64}' # implemented: checked (docs/API.md)
  expect 400 '.message | startswith("isolation: must be")'
  for f in runtime mounts snapshot bogus; do
    unknown_field POST /v1/sandboxes "{\"memory\":\"256Mi\",\"$f\":64}" "$f"
    unknown_field POST "$S/fork" "{\"count\":1,\"$f\":1}" "$f"
    unknown_field POST "$S/exec" "{\"argv\":[\"true\"],\"$f\":1}" "$f"
    unknown_field POST "$S/exec" "{\"argv\":[\"sleep\",\"1\"],\"background\":true,\"$f\":1}" "$f"
    unknown_field POST "$S/timeout" "{\"timeout\":\"5m\",\"$f\":1}" "$f"
    unknown_field POST /v1/leases "{\"ttl\":\"5m\",\"$f\":1}" "$f"
    unknown_field POST "/v1/leases/$lease/renew" "{\"$f\":1}" "$f"
    unknown_field POST /run_code "{\"code\":\"print(1)\",\"language\":\"python\",\"$f\":1}" "$f"
    unknown_field POST /run_jupyter "{\"cells\":[\"1\"],\"$f\":1}" "$f"
  done
  unknown_field POST /v1/sandboxes '{"network":{"allow":["10.0.0.1:80"],"deny":[]}}' network.deny
  unknown_field POST "$S/exec" '{"argv":["true"],"tty":true,"tty_size":{"rows":5,"cols":5,"px":1}}' \
    tty_size.px
  # SandboxFusion's "args" (extra pytest arguments) is not implemented: only its default []
  unknown_field POST /run_code '{"code":"print(1)","language":"pytest","args":["-x"]}' args
  req POST /run_code -d '{"code":"print(1)","language":"python","args":[],"memory_limit_MB":-1}'
  expect 200 '.status == "Success" and .run_result.stdout == "1\n"'
  # a background process's signal body
  req POST "$S/exec" -d '{"argv":["sleep","30"],"background":true}'; expect 201
  local pid; pid=$(echo "$BODY" | jq -r .pid)
  unknown_field POST "$S/processes/$pid/signal" '{"signal":"TERM","group":true}' group
  req POST "$S/processes/$pid/signal" -d '{"signal":"TERM"}'; expect 204
  # a commit's name of the wrong type says so (it said "required")
  req POST "$S/commit" -d '{"name":5}'; expect 400 '.message == "name: must be a string NAME[:TAG]"'
  # a fork takes no GPUs: asking for some is refused, not ignored (it was billed for them)
  req POST "$S/fork" -d '{"count":1,"gpus":1}'
  expect 400 '.message | startswith("gpus: a fork takes no GPUs")'
  req POST "$S/fork" -d '{"count":1,"gpus":["GPU-x"]}'; expect 400 '.message | startswith("gpus:")'
  # nothing was created by the refused creates and forks (the /run_code above made its own)
  req GET /v1/sandboxes; expect 200 '[.[] | select(.labels.sandboxfusion == null)] | length == 1'
  # the same bodies without the field work
  req POST /v1/sandboxes -d '{"memory":"256Mi","network":"none"}'; expect 201
  req POST "$S/exec" -d '{"argv":["echo","ok"],"tty":true,"tty_size":{"rows":5,"cols":5}}'
  expect 200 '.exit_code == 0'
  req POST "$S/timeout" -d '{"timeout":"5m"}'; expect 200
  req POST /v1/leases -d '{"ttl":"5m"}'; expect 201
  # a fork gets the source's files, not its processes: an entrypoint there is refused
  req POST "$S/fork" -d '{"count":1,"entrypoint":["sleep","1"]}'
  expect 400 '.message | startswith("entrypoint: a fork starts none")'
  # the config file: an unknown key stops the daemon at start, naming it; so do a create's
  # own fields in "defaults" (they would never apply) and an entrypoint in a pool entry
  bad_config '{"max_sandboxes":4,"volumes":[{"name":"pip-cache"}]}' 'volumes: unknown field'
  bad_config '{"defaults":{"memory":"1Gi","runtime":"runsc"}}' 'defaults.runtime: unknown field'
  bad_config '{"defaults":{"memory":"1Gi","labels":{"team":"a"}}}' \
    "defaults.labels: a create's own field, not a default"
  bad_config '{"pools":[{"size":1,"entrypoint":["sleep","9"]}]}' 'pools: entrypoint: a warm'
  # defaults no create here could have: every create that set none was a 400 blaming its cpu
  bad_config '{"defaults":{"cpu":1000}}' 'config defaults: cpu: must be in'
  # a port past 65535 listened on another one (99999 on 34463), and the SandboxFusion
  # listener's errors named --tcp
  bad_config '{"tcp":"127.0.0.1:99999","token":"t"}' '--tcp 127.0.0.1:99999: the port must be'
  bad_config '{"sandboxfusion_listen":"127.0.0.1:x"}' '--sandboxfusion-listen 127.0.0.1:x: the port'
  # the objects read elsewhere, key by key and type by type (each was ignored: a typo there
  # gave a daemon without the setting, or without networking)
  bad_config '{"network":true}' 'network: must be an object'
  bad_config '{"network":{"enabled":"yes"}}' 'network.enabled: must be true or false'
  bad_config '{"network":{"enabled":false,"pool":"10.9.0.0/16"}}' 'network.pool: unknown field'
  bad_config '{"network":{"enabled":false,"uplink":["eth0"]}}' 'network.uplink: must be a string'
  bad_config '{"network":{"enabled":false,"dns":["1.1.1.1","1.0.0.1","8.8.8.8","8.8.4.4","9.9.9.9"]}}' \
    'network.dns: must be a list of at most 4'
  # a value networking cannot use stops the start too (networking was off, one line in the log;
  # run in a network namespace of its own, whatever it does)
  BAD_WRAP=(unshare --net)
  bad_config '{"network":{"enabled":true,"pool4":"10.0.0.0/33"}}' \
    'config network: net: pool4 "10.0.0.0/33" must be'
  BAD_WRAP=()
  bad_config '{"image_import":{"max_archiv":"1Gi"}}' 'image_import.max_archiv: unknown field'
  bad_config "{\"gpus\":[{\"device\":\"$DAEMON_ROOT/no-gpu\",\"uid\":\"GPU-1\"}]}" \
    'gpus[0]: uid: unknown field'
}

bad_config() { # JSON WANT: a daemon with this config file exits at start, saying WANT (BAD_WRAP:
  # a command to run it under)
  local out rc=0
  echo "$1" >"$DAEMON_ROOT/bad.json"
  out=$(timeout 10 ${BAD_WRAP[@]+"${BAD_WRAP[@]}"} "$SBX_BUILD_DIR/sandboxd" --config "$DAEMON_ROOT/bad.json" \
    --socket "$DAEMON_ROOT/bad.sock" --run-dir "$DAEMON_ROOT/bad-run" \
    --state-dir "$DAEMON_ROOT/bad-state" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "the config $1 started the daemon: $out"
  echo "$out" | grep -qF -- "$2" || fail "the config $1: the error does not say \"$2\": $out"
}

# Raw requests over the Unix socket (curl normalises what these tests need to get wrong).
TEST_TIMEOUT_http_framing=60
test_http_framing() {
  local port=$(free_port) tok="tok-$RANDOM-$RANDOM"
  start_daemon --tcp "127.0.0.1:$port" --token "$tok"
  local via
  for via in unix tcp; do # the same on the Unix socket and on the TCP listener
    python3 - "$SOCK" "$port" "$tok" "$via" <<'PY' || fail "HTTP framing over $via (above)"
import json, socket, sys
sock, port, tok, via = sys.argv[1:]
bad = []

def conv(raw, timeout=5):
    """Send raw bytes; return (list of (status, body) answers, closed by the daemon)."""
    if via == "unix":
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(timeout)
        s.connect(sock)
    else:
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=timeout)
    s.sendall(raw)
    data, closed = b"", False
    try:
        while True:
            d = s.recv(65536)
            if not d:
                closed = True
                break
            data += d
    except socket.timeout:
        pass
    s.close()
    out = []
    while data.startswith(b"HTTP/1."):
        head, _, rest = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ")[1])
        n = 0
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v)
        out.append((status, rest[:n]))
        data = rest[n:]
    return out, closed

def refused(name, raw, want):
    answers, closed = conv(raw)
    if not answers:
        bad.append((name, "no answer (hung)"))
        return
    status, body = answers[0]
    try:
        j = json.loads(body)
    except ValueError:
        j = {}
    if status != 400 or j.get("code") != "invalid_argument" or want not in j.get("message", ""):
        bad.append((name, status, body[:200]))
    elif len(answers) != 1 or not closed:
        bad.append((name, "more was read after the refusal", answers, closed))

H = b"Host: sd\r\nAuthorization: Bearer " + tok.encode() + b"\r\n"
lease = b"{\"ttl\":\"5m\"}"
smuggled = b"POST /v1/sandboxes HTTP/1.1\r\n" + H + b"Content-Length: 2\r\n\r\n{}"
refused("two Content-Length", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Content-Length: 12\r\nContent-Length: 2\r\n\r\n" + lease, "two different Content-Length")
refused("smuggled by two Content-Length", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Content-Length: 0\r\nContent-Length: 50\r\n\r\n" + smuggled, "two different Content-Length")
refused("space before colon", b"GET /healthz HTTP/1.1\r\n" + H + b"X-Foo : bar\r\n\r\n",
        "whitespace before the colon")
refused("Content-Length with a space before colon", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Content-Length : 48\r\n\r\n" + smuggled, "whitespace before the colon")
refused("tab before colon", b"GET /healthz HTTP/1.1\r\n" + H + b"X-Foo\t: bar\r\n\r\n", "not a token")
refused("bare LF everywhere", b"GET /healthz HTTP/1.1\n" + H.replace(b"\r\n", b"\n") + b"\n",
        "request line does not end in CRLF")
refused("bare LF in one field line", b"GET /healthz HTTP/1.1\r\n" + H + b"X-Z: y\nX-A: b\r\n\r\n",
        "does not end in CRLF")
refused("bare CR in a value", b"GET /healthz HTTP/1.1\r\n" + H + b"X-Z: y\rX-A: b\r\n\r\n", "CR or LF")
refused("Transfer-Encoding gzip (hung before)", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Transfer-Encoding: gzip\r\n\r\n" + lease, "Transfer-Encoding")
refused("Transfer-Encoding gzip, chunked", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding")
refused("Transfer-Encoding chunked twice", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "Transfer-Encoding")
refused("Transfer-Encoding and Content-Length", b"POST /v1/leases HTTP/1.1\r\n" + H +
        b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", "both Transfer-Encoding")
refused("Transfer-Encoding in HTTP/1.0", b"POST /v1/leases HTTP/1.0\r\n" + H +
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "HTTP/1.0")

# What is well framed still works: keep-alive, OWS around values, empty values, chunked,
# the same Content-Length twice, and a refusal on a kept-alive connection after a good request.
answers, _ = conv(b"GET /healthz HTTP/1.1\r\n" + H + b"X-A:\r\nX-B:\t v \t\r\nX-C:x\r\n\r\n" +
                  b"POST /v1/leases HTTP/1.1\r\n" + H + b"Content-Length: 12\r\nContent-Length: 12\r\n\r\n" +
                  lease + b"POST /v1/leases HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
                  b"c\r\n" + lease + b"\r\n0\r\n\r\n" + b"GET /healthz HTTP/1.1\n" + H + b"\r\n")
if [a[0] for a in answers] != [200, 201, 201, 400]:
    bad.append(("well-framed keep-alive", answers))
# nothing smuggled got through: no sandbox was created
answers, _ = conv(b"GET /v1/sandboxes HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\n")
if not answers or answers[0] != (200, b"[]\n"):
    bad.append(("sandboxes after the smuggling attempts", answers))
for b in bad:
    print("FAIL:", via, b)
sys.exit(1 if bad else 0)
PY
  done
  req GET /healthz; expect 200
}

# The --tls-cert listener speaks TLS 1.2 and 1.3 only: 1.0 and 1.1 (RFC 8996) are refused by the
# server (the client offers them at its lowest security level, so any refusal is the daemon's).
TEST_TIMEOUT_tls_versions=60
test_tls_versions() {
  command -v openssl >/dev/null || skip "openssl is needed"
  local port=$(free_port) tok="tok-$RANDOM-$RANDOM" v out
  daemon_init
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -keyout "$DAEMON_ROOT/key.pem" -out "$DAEMON_ROOT/cert.pem" -subj /CN=127.0.0.1 2>/dev/null ||
    fail "openssl could not make a certificate"
  start_daemon --tcp "127.0.0.1:$port" --token "$tok" --tls-cert "$DAEMON_ROOT/cert.pem" \
    --tls-key "$DAEMON_ROOT/key.pem"
  for v in 1 1_1 1_2 1_3; do
    out=$(timeout 10 openssl s_client -brief -connect "127.0.0.1:$port" "-tls$v" \
      -cipher 'DEFAULT:@SECLEVEL=0' </dev/null 2>&1) || true
    case $v in
      1 | 1_1) ! echo "$out" | grep -q '^Protocol version' || fail "TLS $v was accepted: $out" ;;
      *) echo "$out" | grep -qx "Protocol version: TLSv${v/_/.}" || fail "TLS $v was refused: $out" ;;
    esac
  done
  curl -s --cacert "$DAEMON_ROOT/cert.pem" -k -H "Authorization: Bearer $tok" \
    "https://127.0.0.1:$port/healthz" | grep -q '"ok"' || fail "HTTPS /healthz"
}

# A command that starts when the sandbox is at its pids limit: 409 pids_limit (the sandbox's
# own limit, like docker exec in a container at its pids limit), not 500 internal; the sandbox
# keeps running and commands start again once processes have exited.
TEST_TIMEOUT_exec_at_pids_limit=60
test_exec_at_pids_limit() {
  start_daemon
  create '{"pids":8}'; local id=$ID S=/v1/sandboxes/$ID
  # forks until the kernel refuses, then marks /workspace/full and holds every pid for 4 s
  local fill='import os,time
n=0
while True:
    try:
        pid=os.fork()
    except OSError:
        break
    if pid==0:
        time.sleep(60); os._exit(0)
    n+=1
open("/workspace/full","w").write(str(n))
time.sleep(60)'
  curl -s --max-time 30 --unix-socket "$SOCK" -X POST "http://sd$S/exec" \
    -d "$(jq -nc --arg p "$fill" '{argv:["python3","-c",$p],timeout:4}')" >"$D/fill.out" &
  local fill_pid=$! i
  for i in $(seq 100); do
    req GET "$S/files?path=/workspace/full"
    [ "$CODE" == 200 ] && break
    sleep 0.05
  done
  [ "$CODE" == 200 ] || fail "the filler did not reach the pids limit: $CODE $BODY"
  req POST "$S/exec" -d '{"argv":["true"]}'
  expect 409 '.code == "pids_limit" and (.message | contains("pids limit (8 processes)"))'
  req POST "$S/exec" -H 'Accept: application/x-ndjson' -d '{"argv":["true"]}'
  expect 409 '.code == "pids_limit"'
  req GET "$S"; expect 200 '.state == "running"'
  wait "$fill_pid"
  jq -e '.reason == "command_timeout"' "$D/fill.out" >/dev/null || fail "filler: $(cat "$D/fill.out")"
  req POST "$S/exec" -d '{"argv":["echo","again"]}'
  expect 200 '.exit_code == 0 and .stdout == "again\n"'
}

# A query parameter an endpoint does not take is a 400 naming it, never ignored (a filter that
# does nothing would list everything; a flag that does nothing would mislead); the ones it
# takes still work, a sandbox port's requests keep their query (test_ports), and so do
# SandboxFusion's endpoints.
TEST_TIMEOUT_unknown_query_refused=60
test_unknown_query_refused() {
  start_daemon
  create; local S=/v1/sandboxes/$ID
  local q
  for q in "GET /v1/sandboxes?state=running state" "DELETE $S?force=1 force" \
    "GET $S/files?path=/workspace&recursive=1 recursive" "GET $S?x=1 x" "GET /healthz?verbose=1 verbose" \
    "GET /v1/images?all=1 all" "GET $S/processes?tail=5 tail" "GET $S/files?path=/workspace&path2 path2" \
    "DELETE $S/processes/1?tail=1 tail"; do
    set -- $q
    req "$1" "$2"
    expect 400 ".code == \"invalid_argument\" and .message == \"$3: unknown query parameter (this daemon does not implement it)\""
  done
  req POST "$S/exec?timeout=5" -d '{"argv":["true"]}'
  expect 400 '.message | startswith("timeout: unknown query parameter")'
  req POST "$S/files?path=/workspace/x" -d x; expect 405 '.code == "method_not_allowed"'
  req GET "$S"; expect 200 '.state == "running"'
  req GET "/v1/sandboxes?label=none=1"; expect 200 'length == 0'
  # 32 label filters are taken; a 33rd is refused, not dropped (the list was broader than asked)
  local q32 i; q32=$(for i in $(seq 32); do printf 'label=k%d&' "$i"; done)
  req GET "/v1/sandboxes?${q32%&}"; expect 200 'length == 0'
  req GET "/v1/sandboxes?${q32}label=k33"; expect 400 '.message == "label: at most 32 filters"'
  req GET "/v1/sandboxes/"; expect 200 'length == 1'
  req PUT "$S/files?path=/workspace/m.sh&mode=0755" -H 'Content-Type: application/octet-stream' \
    --data-binary 'echo ok'
  expect 204
  req GET "$S/files?path=/workspace/m.sh"; expect 200
  [ "$BODY" == "echo ok" ] || fail "the file written with ?path=&mode=: '$BODY'"
  req POST "$S/exec" -d '{"argv":["stat","-c","%a","/workspace/m.sh"]}'; expect 200 '.stdout == "755\n"'
  # a tar's entries carry their own modes: ?mode= with one is refused, not dropped
  echo x >"$DAEMON_ROOT/t.txt"
  tar -C "$DAEMON_ROOT" -cf "$DAEMON_ROOT/m.tar" t.txt
  req PUT "$S/files?path=/workspace&mode=0755" -H 'Content-Type: application/x-tar' \
    --data-binary @"$DAEMON_ROOT/m.tar"
  expect 400 '.message | startswith("mode: only with application/octet-stream")'
  # a body in a Content-Encoding no endpoint decodes is a 415, not stored or parsed as it came
  req PUT "$S/files?path=/workspace/z.gz" -H 'Content-Type: application/octet-stream' \
    -H 'Content-Encoding: gzip' --data-binary 'not really gzip'
  expect 415 '.message | startswith("Content-Encoding gzip: not implemented")'
  req POST "$S/exec" -H 'Content-Encoding: gzip' -d '{"argv":["true"]}'; expect 415
  req GET "$S/files?path=/workspace/z.gz"; expect 404
  req POST "/run_code?x=1" -d '{"code":"print(1)","language":"python"}'
  expect 200 '.status == "Success"'
  # a parameter the endpoint takes, without a value or twice, is refused too (it read as absent,
  # or the first one won); several labels are several filters
  for q in "GET /v1/sandboxes?label label needs a value (name=value)"     "GET $S/processes/1?tail tail needs a value (name=value)"     "PUT $S/files?path=/workspace/a&mode mode needs a value (name=value)"     "PUT $S/files?path=/workspace/b&path=/workspace/c path given more than once"     "PUT $S/files?path=/workspace/d&mode=0600&mode=0777 mode given more than once"; do
    set -- $q
    req "$1" "$2" -H 'Content-Type: application/octet-stream' --data-binary x
    expect 400 ".message == \"$3: ${*:4}\""
  done
  req GET "$S/files?path=/workspace/b"; expect 404
  req GET "/v1/sandboxes?label=a=1&label=b=2"; expect 200 'length == 0'
  # the list and create with a trailing slash take their parameters; the port list with one
  # refuses what it does not take (only a port's own requests keep their query)
  req GET "/v1/sandboxes/?label=none=1"; expect 200 'length == 0'
  req GET "$S/ports/?bogus=1"; expect 400 '.message | startswith("bogus: unknown query parameter")'
  req POST "$S/ports/?bogus=1" -d '{"port":8001}'
  expect 400 '.message | startswith("bogus: unknown query parameter")'
  req GET "$S/ports"; expect 200 'length == 0'
}

# "max_cost_usd": null is no cap (docs/API.md), even where the operator's defaults set one; the
# other fields' null takes the default, and a create without the field gets the default cap.
TEST_TIMEOUT_null_cost_is_no_cap=60
test_null_cost_is_no_cap() {
  daemon_dirs
  echo '{"defaults":{"max_cost_usd":1,"idle_timeout":"10m"}}' >"$D/config.json"
  start_daemon --config "$D/config.json"
  req POST /v1/sandboxes -d '{"max_cost_usd":null,"idle_timeout":null}'
  expect 201 '.limits.max_cost_usd == null and .limits.idle_timeout == 600'
  req POST /v1/sandboxes -d '{}'; expect 201 '.limits.max_cost_usd == 1'
  req POST /v1/sandboxes -d '{"max_cost_usd":2}'; expect 201 '.limits.max_cost_usd == 2'
}

# A GET or DELETE takes no fields: one in its body is a 400 naming it, never ignored (a DELETE
# with "keep_files" kept nothing); an empty body or {} is fine. So are drain and a lease's renew.
TEST_TIMEOUT_bodyless_refuse_fields=60
test_bodyless_refuse_fields() {
  start_daemon
  create; local S=/v1/sandboxes/$ID
  unknown_field DELETE "$S" '{"keep_files":true}' keep_files
  unknown_field GET /v1/sandboxes '{"label":"x"}' label
  unknown_field GET "$S/ports" '{"port":9}' port
  req DELETE "$S" -d 'garbage'; expect 400 '.code == "invalid_json"'
  req DELETE "$S" -d '[1]'; expect 400 '.message == "the body must be a JSON object"'
  req GET "$S"; expect 200 '.state == "running"'
  req GET "$S" -d '{}'; expect 200 '.state == "running"'
  req DELETE "$S" -d '{}'; expect 204
  req GET "$S"; expect 200 '.state == "ended"'
}

# A command whose argv and env do not fit in the shim's request (64 KiB of JSON) is the
# caller's: 400 invalid_argument naming them, from the plain, streamed and background exec
# alike (was 500 internal), and the sandbox goes on; one that fits runs with its argv whole.
TEST_TIMEOUT_exec_too_large=60
test_exec_too_large() {
  start_daemon
  create; local S=/v1/sandboxes/$ID big fits x30
  big=$(head -c 70000 /dev/zero | tr '\0' a)
  fits=$(head -c 60000 /dev/zero | tr '\0' b)
  x30=$(head -c 30000 /dev/zero | tr '\0' c)
  jq -nc --arg b "$big" '{argv:["echo",$b]}' >"$D/argv.json"
  jq -nc --arg b "$big" '{argv:["echo",$b],background:true}' >"$D/bg.json"
  jq -nc --arg x "$x30" '{argv:["true"],env:{A:$x,B:$x,C:$x}}' >"$D/env.json"
  jq -nc --arg b "$fits" '{argv:["sh","-c","printf %s \"$1\" | wc -c","sh",$b]}' >"$D/fits.json"
  local f want='.code == "invalid_argument" and (.message | startswith("argv and env: too large"))'
  for f in argv bg env; do
    req POST "$S/exec" --data-binary "@$D/$f.json"
    expect 400 "$want"
  done
  req POST "$S/exec" -H 'Accept: application/x-ndjson' --data-binary "@$D/argv.json"
  expect 400 "$want"
  req POST "$S/exec" --data-binary "@$D/fits.json"
  expect 200 '.exit_code == 0 and .stdout == "60000\n"'
  # argv at its bound (4096 entries), also behind "shell": true's sh -c; one more is refused
  jq -nc '{argv:(["sh","-c","echo $#","sh"] + [range(4092) | "x"])}' >"$D/n4096.json"
  req POST "$S/exec" --data-binary "@$D/n4096.json"; expect 200 '.stdout == "4092\n"'
  jq -nc '{argv:(["echo $# $0","s"] + [range(4094) | "y"]),shell:true}' >"$D/n4096s.json"
  req POST "$S/exec" --data-binary "@$D/n4096s.json"; expect 200 '.stdout == "4094 s\n"'
  jq -nc '{argv:(["true"] + [range(4096) | "x"])}' >"$D/n4097.json"
  req POST "$S/exec" --data-binary "@$D/n4097.json"
  expect 400 '.message == "argv: has too many elements (at most 4096)"'
  req GET "$S"; expect 200 '.state == "running"'
  req GET "$S/processes"; expect 200 '.processes == []'
  # refused requests, not commands that failed: the exec metrics count none of them
  req GET /metrics; expect 200
  grep -q '^sandboxd_execs_total{outcome="error"} 0$' "$D/body" ||
    fail "too-large requests counted as exec errors: $(grep '^sandboxd_execs_total' "$D/body")"
  # a sandbox's env goes with every command: more than 48 KiB of it is refused where it is
  # asked for (create, fork, the config's defaults), not once per command
  jq -nc --arg x "$x30" '{env:{A:$x,B:$x}}' >"$D/cenv.json"
  jq -nc --arg x "$x30" '{count:1,env:{A:$x,B:$x}}' >"$D/fenv.json"
  local want_env='.code == "invalid_argument" and (.message | startswith("env: too large (60010 bytes"))'
  req POST /v1/sandboxes --data-binary "@$D/cenv.json"; expect 400 "$want_env"
  req POST "$S/fork" --data-binary "@$D/fenv.json"; expect 400 "$want_env"
  jq -nc --arg x "$x30" '{defaults:{env:{A:$x,B:$x}}}' >"$DAEMON_ROOT/bigenv.json"
  local out rc=0
  out=$(timeout 10 "$SBX_BUILD_DIR/sandboxd" --config "$DAEMON_ROOT/bigenv.json" \
    --socket "$DAEMON_ROOT/bad.sock" --run-dir "$DAEMON_ROOT/bad-run" \
    --state-dir "$DAEMON_ROOT/bad-state" 2>&1) || rc=$?
  [ "$rc" -ne 0 ] || fail "a config whose defaults.env is 60 KB started the daemon: $out"
  echo "$out" | grep -q 'defaults: env: too large' || fail "the config error does not name env: $out"
  req GET /v1/sandboxes; expect 200 'length == 1'
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
