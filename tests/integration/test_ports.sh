#!/usr/bin/env bash
# Inbound ports (docs/API.md "Ports"): "ports" at create and POST .../ports, GET .../ports, and the
# HTTP proxy .../ports/{port}/REST to a server a background command runs in the sandbox (network
# "none": the connection is made in the sandbox's own network namespace). Bad input: ports out of
# range (400 naming ports), a port not opened (404 port_not_open), an open port nothing listens on
# (502 with a message); a second sandbox cannot reach the first's port; after delete: 404.

DAEMON_TAG=ports
source "$(dirname "$0")/../lib/daemon.sh"

PY=${SBX_PYTHON:-/usr/bin/python3}

# A tiny server: GET serves files under /tmp/www, POST echoes the body with the path.
SERVER='
import http.server, os, sys
os.chdir("/tmp/www")
class H(http.server.SimpleHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        b = self.rfile.read(n)
        out = b"path=" + self.path.encode() + b" x-test=" + (self.headers.get("X-Test") or "").encode() + b" auth=" + (self.headers.get("Authorization") or "").encode() + b" body=" + b
        self.send_response(201)
        self.send_header("Content-Type", "text/x-echo")
        self.send_header("X-Env-Episode", "ep-7")
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'

exec_ok() { # ID CMD: run a shell command in the sandbox, exit 0
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg c "$2" '{argv:[$c], shell:true}')"
  expect 200 '.exit_code == 0'
}
serve() { # ID PORT: start the server in the background and wait until it answers through the proxy
  exec_ok "$1" "mkdir -p /tmp/www && printf 'hello from %s\n' $1 >/tmp/www/hello.txt"
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg s "$SERVER" --arg p "$2" \
    '{argv:["python3","-c",$s,$p], background:true}')"
  expect 201 '.background == true'
  local i
  for i in $(seq 100); do
    req GET "/v1/sandboxes/$1/ports/$2/hello.txt"
    [ "$CODE" == 200 ] && return 0
    sleep 0.1
  done
  fail "the server on port $2 of $1 did not answer through the proxy in 10 s: $CODE $BODY"
}

TEST_TIMEOUT_proxy=60
test_proxy() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  start_daemon
  create '{"ports":[8000], "network":"none"}'
  req GET "/v1/sandboxes/$ID/ports"
  expect 200 "length == 1 and .[0].port == 8000 and .[0].url == \"/v1/sandboxes/$ID/ports/8000/\""
  # before anything listens: 502 with a message
  req GET "/v1/sandboxes/$ID/ports/8000/"
  expect 502 '.code == "port_unreachable" and (.message | test("refused"))'
  serve "$ID" 8000
  [ "$BODY" == "hello from $ID" ] || fail "GET through the proxy: $BODY"
  grep -qi '^content-type: text/plain' "$D/headers" || fail "no Content-Type from the server: $(cat "$D/headers")"
  # POST with a body, a query and a header, echoed back with the server's status
  req POST "/v1/sandboxes/$ID/ports/8000/echo/x?a=1&b=two" -H 'X-Test: yes' --data-binary 'some bytes'
  expect 201
  [ "$BODY" == "path=/echo/x?a=1&b=two x-test=yes auth= body=some bytes" ] || fail "POST echo: $BODY"
  # the server's own headers come back (both Set-Cookie lines), its hop-by-hop ones do not
  grep -qi '^x-env-episode: ep-7' "$D/headers" || fail "X-Env-Episode not relayed: $(cat "$D/headers")"
  [ "$(grep -ci '^set-cookie: [ab]=' "$D/headers")" == 2 ] || fail "Set-Cookie lines: $(cat "$D/headers")"
  grep -qi '^content-type: text/x-echo' "$D/headers" || fail "Content-Type: $(cat "$D/headers")"
  [ "$(grep -ci '^connection:\|^date:' "$D/headers")" -le 2 ] || fail "hop-by-hop doubled: $(cat "$D/headers")"
  # a 404 of the server is passed through as its own answer
  req GET "/v1/sandboxes/$ID/ports/8000/no-such-file"
  expect 404
  # the daemon's egress policy is untouched: network none still has no route out
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["python3","-c","import socket; socket.create_connection((\"10.255.255.1\", 80), timeout=1)"]}'
  expect 200 '.exit_code != 0'
  # a port opened later
  req POST "/v1/sandboxes/$ID/ports" -d '{"port":8001}'
  expect 200 'map(.port) == [8000, 8001]'
  req POST "/v1/sandboxes/$ID/ports" -d '{"port":8001}'
  expect 200 'map(.port) == [8000, 8001]'
  serve "$ID" 8001
  # a port not opened
  req GET "/v1/sandboxes/$ID/ports/8002/"
  expect 404 '.code == "port_not_open"'
  # after delete
  req DELETE "/v1/sandboxes/$ID"
  expect 204
  req GET "/v1/sandboxes/$ID/ports/8000/hello.txt"
  expect 404 '.code == "port_not_open" or .code == "not_found"'
}

# A server that echoes the request target it got and the names of the headers it got.
ECHO_SERVER='
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        names = ",".join(sorted(k.lower() for k in self.headers.keys()))
        out = ("path=" + self.path + " headers=" + names).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'
start_py() { # ID PORT SCRIPT: run a python3 server in the background, wait until its port answers
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg s "$3" --arg p "$2" \
    '{argv:["python3","-c",$s,$p], background:true}')"
  expect 201 '.background == true'
  local i
  for i in $(seq 100); do
    req GET "/v1/sandboxes/$1/ports/$2/ready"
    [ "$CODE" == 200 ] && return 0
    sleep 0.1
  done
  fail "the server on port $2 of $1 did not answer through the proxy in 10 s: $CODE $BODY"
}

# The path goes on as the client encoded it (libmicrohttpd decodes it; the proxy escapes it
# again): an encoded space, '?' or CRLF is never request syntax at the server (no injected
# header); the query goes on; hop-by-hop request headers (Proxy-Authorization, Expect, the
# ones the client's Connection names) do not.
TEST_TIMEOUT_proxy_target=60
test_proxy_target() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  start_daemon
  create '{"ports":[8000], "network":"none"}'
  start_py "$ID" 8000 "$ECHO_SERVER"
  local u="/v1/sandboxes/$ID/ports/8000"
  req GET "$u/a%20b/c%3Fd%25e?x=1&y=two%20three"
  expect 200
  [ "${BODY%% headers=*}" == "path=/a%20b/c%3Fd%25e?x=1&y=two%20three" ] || fail "encoded path: $BODY"
  req GET "$u/x%20HTTP/1.0%0D%0AX-Injected:%20yes%0D%0AY:"
  expect 200
  [ "${BODY%% headers=*}" == "path=/x%20HTTP/1.0%0D%0AX-Injected:%20yes%0D%0AY:" ] || fail "CRLF in the path: $BODY"
  [[ "$BODY" != *x-injected* && "$BODY" != *",y,"* ]] || fail "a header was injected: $BODY"
  req GET "$u/h" -H 'Proxy-Authorization: Basic eDp5' -H 'Connection: X-Secret, keep-alive' \
    -H 'X-Secret: s' -H 'X-Kept: k' -H 'Expect: 100-continue'
  expect 200
  [[ "$BODY" == *x-kept* ]] || fail "X-Kept did not reach the server: $BODY"
  [[ "$BODY" != *proxy-authorization* && "$BODY" != *x-secret* && "$BODY" != *expect* ]] ||
    fail "a hop-by-hop header reached the server: $BODY"
  # an encoded NUL in the query is refused, not cut
  req GET "$u/q?a=b%00c"
  expect 400 '.code == "invalid_argument"'
}

# A raw server: /ready answers 200; /interim a 103 Early Hints, then the final 200, and keeps
# the connection open; /refuse answers a WebSocket upgrade 403 with a chunked body and keeps
# the connection open (HTTP/1.1).
RAW_SERVER='
import socket, sys, threading, time
def serve(c):
    d = b""
    while b"\r\n\r\n" not in d:
        b = c.recv(4096)
        if not b: return
        d += b
    path = d.split(b" ")[1]
    if path.endswith(b"/interim"):
        c.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n")
        time.sleep(0.2)
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nfinal")
    elif path.endswith(b"/refuse"):
        c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"6\r\nno ws \r\n4;x=y\r\nhere\r\n0\r\nX-Trailer: t\r\n\r\n")
    else:
        c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        c.close()
        return
    time.sleep(60)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
'

# An interim 1xx answer is skipped: the client gets the final one at once, not the 103 (nor a
# 504 after the answer timeout). A refused WebSocket upgrade whose 403 is chunked on a kept
# connection comes back at once, de-chunked. An upgrade with a body is a 400.
TEST_TIMEOUT_proxy_framing=60
test_proxy_framing() {
  "$PY" -c 'import socket' 2>/dev/null || skip "python3 is not installed"
  start_daemon
  create '{"ports":[8000], "network":"none"}'
  start_py "$ID" 8000 "$RAW_SERVER"
  local u="http://sd/v1/sandboxes/$ID/ports/8000" t0=$SECONDS
  CODE=$(curl -s --max-time 10 --unix-socket "$SOCK" -o "$D/body" -D "$D/headers" -w '%{http_code}' \
    "$u/interim") || true
  BODY=$(cat "$D/body" 2>/dev/null)
  [ "$CODE" == 200 ] && [ "$BODY" == final ] || fail "after a 103: $CODE $BODY"
  grep -qi '^content-type: text/plain' "$D/headers" || fail "the final head's headers: $(cat "$D/headers")"
  CODE=$(curl -s --max-time 10 --unix-socket "$SOCK" -o "$D/body" -D "$D/headers" -w '%{http_code}' \
    -H 'Upgrade: websocket' -H 'Connection: Upgrade' -H 'Sec-WebSocket-Version: 13' \
    -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' "$u/refuse") || true
  BODY=$(cat "$D/body" 2>/dev/null)
  [ "$CODE" == 403 ] && [ "$BODY" == "no ws here" ] || fail "a refused upgrade: $CODE $BODY"
  # an upgrade with a body is refused here: it would go unframed (no Content-Length), and a
  # server that declines the upgrade would read the body as a request of its own
  req GET "/v1/sandboxes/$ID/ports/8000/refuse" -H 'Upgrade: websocket' -H 'Connection: Upgrade' \
    -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
    --data-binary $'GET /smuggled HTTP/1.0\r\n\r\n'
  expect 400 '.message == "Upgrade: a websocket upgrade carries no body"'
  [ $((SECONDS - t0)) -lt 10 ] || fail "the answers took $((SECONDS - t0)) s"
}

# A WebSocket upgrade through the proxy: an echo server (python3-websockets) in the sandbox.
WS_SERVER='
import asyncio, sys, websockets
async def echo(ws, path=None):
    async for m in ws:
        await ws.send(("echo:" + m) if isinstance(m, str) else m[::-1])
async def main():
    async with websockets.serve(echo, "127.0.0.1", int(sys.argv[1]), subprotocols=["p1"]):
        await asyncio.Future()
asyncio.run(main())
'
WS_CLIENT='
import asyncio, sys, websockets.client
async def main():
    async with websockets.client.unix_connect(sys.argv[1], "ws://sd" + sys.argv[2], subprotocols=["p1"]) as ws:
        assert ws.subprotocol == "p1", ws.subprotocol
        await ws.send("hi"); assert await ws.recv() == "echo:hi"
        big = bytes(range(256)) * 4096
        await ws.send(big); assert await ws.recv() == big[::-1]
    print("ok")
asyncio.run(main())
'
ws_first() { # SCRIPT ARGS...: a WebSocket client, again until it succeeds (its server starts) -> OUT
  local i
  for i in $(seq 100); do
    OUT=$(timeout 10 "$PY" -c "$@" 2>&1) && return 0
    sleep 0.1
  done
}

TEST_TIMEOUT_websocket=60
test_websocket() {
  "$PY" -c 'import websockets.client' 2>/dev/null || skip "python3-websockets is not installed (tests/deps.sh installs it)"
  start_daemon
  create '{"ports":[8100]}'
  req POST "/v1/sandboxes/$ID/exec" -d "$(jq -nc --arg s "$WS_SERVER" '{argv:["/usr/bin/python3","-c",$s,"8100"], background:true}')"
  expect 201
  ws_first "$WS_CLIENT" "$SOCK" "/v1/sandboxes/$ID/ports/8100/"
  [ "$OUT" == ok ] || fail "WebSocket through the proxy: $OUT"
  # the daemon is fine afterwards
  req GET "/v1/sandboxes/$ID/ports"
  expect 200
}

# An open connection through the port proxy counts as activity for the idle timeout, as a
# running command does: a WebSocket held open and silent for more than twice the idle timeout
# keeps its sandbox, whose server runs detached (no command the daemon counts), and still
# echoes at its end; once it has closed, the sandbox ends idle after the timeout.
WS_HOLD='
import asyncio, sys, websockets.client
async def main():
    async with websockets.client.unix_connect(sys.argv[1], "ws://sd" + sys.argv[2], subprotocols=["p1"]) as ws:
        await ws.send("hi"); assert await ws.recv() == "echo:hi"
        await asyncio.sleep(float(sys.argv[3]))
        await ws.send("bye"); assert await asyncio.wait_for(ws.recv(), 5) == "echo:bye"
    print("ok")
asyncio.run(main())
'
TEST_TIMEOUT_idle_connection=60
test_idle_connection() {
  "$PY" -c 'import websockets.client' 2>/dev/null || skip "python3-websockets is not installed (tests/deps.sh installs it)"
  start_daemon
  create '{"ports":[8100],"idle_timeout":"2s"}'
  req POST "/v1/sandboxes/$ID/exec" -d "$(jq -nc --arg s "$WS_SERVER" \
    '{argv:["sh","-c","/usr/bin/python3 -c \"$0\" 8100 </dev/null >/dev/null 2>&1 &",$s]}')"
  expect 200 '.exit_code == 0'
  ws_first "$WS_HOLD" "$SOCK" "/v1/sandboxes/$ID/ports/8100/" 0
  [ "$OUT" == ok ] || fail "WebSocket through the proxy: $OUT"
  local out
  req GET "/v1/sandboxes/$ID"; expect 200 '.state == "running" and .usage.commands_running == 0'
  out=$(timeout 20 "$PY" -c "$WS_HOLD" "$SOCK" "/v1/sandboxes/$ID/ports/8100/" 5 2>&1) ||
    fail "a WebSocket held open for 5 s (idle timeout 2 s): $out"
  [ "$out" == ok ] || fail "a WebSocket held open for 5 s: $out"
  sleep 4.5 # no call, no connection: idle
  req GET "/v1/sandboxes/$ID"
  expect 200 '.state == "ended" and .end.reason == "idle_timeout" and (.end.message | contains("connection"))'
}

# The clients: libsbx's sbx_sandbox_port_url through `sbx port` and Python's Sandbox.get_host.
TEST_TIMEOUT_clients=60
test_clients() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  start_daemon
  create
  local url
  url=$(SBX_HOST="unix:$SOCK" "$(bin sbx)" port "$ID" 8000) || fail "sbx port failed: $url"
  [ "$url" == "http://localhost/v1/sandboxes/$ID/ports/8000/" ] || fail "sbx port printed $url"
  serve "$ID" 8000
  # the URL it printed answers (through the daemon's socket)
  [ "$(curl -s --max-time 10 --unix-socket "$SOCK" "${url}hello.txt")" == "hello from $ID" ] ||
    fail "the URL sbx port printed does not reach the server"
  SBX_HOST="unix:$SOCK" "$(bin sbx)" port "$ID" 70000 2>/dev/null && fail "sbx port took 70000"
  url=$(env $(asan_env) SBX_HOST="unix:$SOCK" SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" \
    PYTHONPATH="$SBX_SRC_DIR/python" PYTHONDONTWRITEBYTECODE=1 "$PY" -c '
import sys, sandboxd
sb = sandboxd.Sandbox.attach(sys.argv[1])
print(sb.get_host(9000))
try:
    sb.get_host(0)
    print("get_host(0) was taken")
except sandboxd.InvalidArgument:
    pass
' "$ID") || fail "python get_host failed: $url"
  [ "$url" == "http://localhost/v1/sandboxes/$ID/ports/9000/" ] || fail "get_host printed $url"
  req GET "/v1/sandboxes/$ID/ports"
  expect 200 'map(.port) == [8000, 9000]'
}

# Over TCP the proxy needs the daemon's bearer token like the rest of the API, and the token is
# not passed on to the sandbox's server.
TEST_TIMEOUT_tcp_token=60
test_tcp_token() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  local port=$(free_port) tok="tok-$RANDOM-$RANDOM"
  start_daemon --tcp "127.0.0.1:$port" --token "$tok"
  create '{"ports":[8000]}'
  serve "$ID" 8000
  local u="http://127.0.0.1:$port/v1/sandboxes/$ID/ports/8000"
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "$u/hello.txt")" == 401 ] ||
    fail "the proxy over TCP answered without a token"
  [ "$(curl -s --max-time 10 -H "Authorization: Bearer $tok" "$u/hello.txt")" == "hello from $ID" ] ||
    fail "the proxy over TCP with the token did not answer"
  [ "$(curl -s --max-time 10 -H "Authorization: Bearer $tok" -H 'X-Test: t' --data-binary b "$u/e")" == \
    "path=/e x-test=t auth= body=b" ] || fail "POST over TCP (or the token reached the sandbox)"
}

# A WebSocket through the proxy over the API's TCP listener: the daemon's side of the client's
# connection has TCP keepalive on (a client that vanishes without closing ends the relay, which
# would otherwise hold the sandbox's idle timeout until its lifetime).
WS_TCP_HOLD='
import asyncio, sys, websockets.client
async def main():
    async with websockets.client.connect(sys.argv[1], extra_headers={"Authorization": "Bearer " + sys.argv[2]}) as ws:
        await ws.send("hi"); assert await ws.recv() == "echo:hi"
        print("open", flush=True)
        await asyncio.sleep(float(sys.argv[3]))
    print("ok")
asyncio.run(main())
'
TEST_TIMEOUT_websocket_keepalive=60
test_websocket_keepalive() {
  "$PY" -c 'import websockets.client' 2>/dev/null || skip "python3-websockets is not installed (tests/deps.sh installs it)"
  command -v ss >/dev/null || skip "ss (iproute2) is needed"
  local port=$(free_port) tok="tok-$RANDOM-$RANDOM"
  start_daemon --tcp "127.0.0.1:$port" --token "$tok"
  create '{"ports":[8100]}'
  req POST "/v1/sandboxes/$ID/exec" -d "$(jq -nc --arg s "$WS_SERVER" '{argv:["/usr/bin/python3","-c",$s,"8100"], background:true}')"
  expect 201
  ws_first "$WS_TCP_HOLD" "ws://127.0.0.1:$port/v1/sandboxes/$ID/ports/8100/" "$tok" 0
  [ "$OUT" == "$(printf 'open\nok')" ] || fail "WebSocket over TCP through the proxy: $OUT"
  local i out
  timeout 20 "$PY" -c "$WS_TCP_HOLD" "ws://127.0.0.1:$port/v1/sandboxes/$ID/ports/8100/" "$tok" 5 >"$D/ws.out" 2>&1 &
  local client=$!
  for i in $(seq 100); do grep -q open "$D/ws.out" && break; sleep 0.05; done
  grep -q open "$D/ws.out" || fail "no WebSocket: $(cat "$D/ws.out")"
  for i in $(seq 40); do # (a retransmission timer, shown first, runs until the echo's ACK)
    out=$(ss -tnoH state established "( sport = :$port )")
    [[ "$out" == *"timer:(keepalive"* ]] && break
    sleep 0.05
  done
  wait "$client" || fail "the held WebSocket: $(cat "$D/ws.out")"
  [[ "$out" == *"timer:(keepalive"* ]] || fail "no keepalive on the daemon's side of the connection: $out"
}

TEST_TIMEOUT_bad_ports=30
test_bad_ports() {
  start_daemon
  local b
  for b in '[0]' '[70000]' '[-1]' '["80"]' '[8000,8000]' '8000' \
    '[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]'; do
    req POST /v1/sandboxes -d "{\"ports\":$b}"
    expect 400 '.code == "invalid_argument" and (.message | startswith("ports"))'
  done
  create
  req POST "/v1/sandboxes/$ID/ports" -d '{"port":0}'
  expect 400 '.message | startswith("port")'
  req POST "/v1/sandboxes/$ID/ports" -d '{"port":70000}'
  expect 400 '.message | startswith("port")'
  req POST "/v1/sandboxes/$ID/ports" -d '{}'
  expect 400 '.message | startswith("port")'
  req GET "/v1/sandboxes/$ID/ports/70000/"
  expect 400 '.message | startswith("port")'
  local p
  for p in +8000 08000 8000x 123456 0; do # digits only, no leading zero
    req GET "/v1/sandboxes/$ID/ports/$p/"
    expect 400 '.message | startswith("port")'
  done
  req GET "/v1/sandboxes/$ID/ports"
  expect 200 'length == 0'
  # the daemon is fine afterwards
  req GET /healthz
  expect 200
}

TEST_TIMEOUT_isolated=60
test_isolated() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  start_daemon
  create '{"ports":[8000]}'
  local a=$ID
  serve "$a" 8000
  create '{"ports":[8000]}'
  local b=$ID
  # b's own loopback has nothing on 8000: neither the proxy nor b itself reach a's server
  req GET "/v1/sandboxes/$b/ports/8000/hello.txt"
  expect 502 '.code == "port_unreachable"'
  req POST "/v1/sandboxes/$b/exec" -d '{"argv":["python3","-c","import socket; socket.create_connection((\"127.0.0.1\", 8000), timeout=2)"]}'
  expect 200 '.exit_code != 0'
  # a's server still answers a
  req GET "/v1/sandboxes/$a/ports/8000/hello.txt"
  expect 200
  [ "$BODY" == "hello from $a" ] || fail "a's server: $BODY"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
