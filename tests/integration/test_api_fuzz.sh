#!/usr/bin/env bash
# Robustness of the daemon's API: seeded random requests (garbage bytes, truncated and mistyped
# JSON, wrong methods, odd paths and headers) against a real daemon with a real sandbox. Every
# answer must be a well-formed HTTP status below 500 (or a dropped garbage connection), the
# daemon must stay up and answer /healthz, and under sanitizers its log must stay clean.

DAEMON_TAG=fuzz
source "$(dirname "$0")/../lib/daemon.sh"

TEST_TIMEOUT_random_requests=120
test_random_requests() {
  require_root
  command -v jq >/dev/null || skip "jq is needed"
  DAEMON_LOG_LEVEL='' start_daemon --max-sandboxes 4
  python3 - "$D/sd.sock" 7 400 <<'PY' || fail "fuzzing found a problem"
import json, random, socket, sys
path, seed, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
def raw(data, timeout=2.0):
    s = socket.socket(socket.AF_UNIX); s.settimeout(timeout); s.connect(path)
    out = b""
    try:
        s.sendall(data); s.shutdown(socket.SHUT_WR)
        while True:
            b = s.recv(65536)
            if not b: break
            out += b
    except socket.timeout:
        out = b"TIMEOUT"
    except OSError:
        pass
    s.close(); return out
def http(method, p, body=b"", hdrs=""):
    return raw(("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n"
                % (method, p, len(body), hdrs)).encode() + body)
r = http("POST", "/v1/sandboxes", b"{}")
sid = json.loads(r.split(b"\r\n\r\n", 1)[1])["id"]
vals = [None, True, False, 0, -1, 1.5, 1e308, -1e308, "", "x" * 5000, "1Gi", "-5s", "5m", [], {},
        [1, "a"], {"a": 1}, {"a": "b"}, "\u00e9", "ls-x", 2**63, -2**63, "0", "1e3", "../..", "/etc",
        ["sh", "-c", "echo hi"], ["true"], "open", {"allow": ["1.2.3.4"]}]
fields = ["image", "cpu", "memory", "disk", "pids", "env", "labels", "idle_timeout", "timeout",
          "max_cost_usd", "network", "lease", "argv", "shell", "cwd", "stdin", "stdin_b64",
          "max_output", "ttl"]
paths = ["/v1/sandboxes", "/v1/sandboxes/%s/exec" % sid, "/v1/sandboxes/%s/timeout" % sid,
         "/v1/leases", "/v1/sandboxes/%s/files?path=/workspace/x" % sid,
         "/v1/sandboxes/%s/files?path=/workspace" % sid, "/v1/sandboxes/%00",
         "/v1/sandboxes/" + "a" * 3000, "/v1/sandboxes/%s/files?path=" % sid + "/a" * 3000,
         "/v1/leases/ls-1/renew", "/metrics", "/v1/info", "/v1/sandboxes?label=a=b&label=c"]
heads = ["", "Content-Type: application/x-tar\r\n", "Accept: application/x-ndjson\r\n",
         "Idempotency-Key: k\r\n", "Content-Type: application/octet-stream\r\n"]
bad = []
for i in range(n):
    if rnd.random() < 0.1:
        out = raw(bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300))), 0.3)
        if out.startswith(b"HTTP/1.1 5") and not out.startswith(b"HTTP/1.1 503"):
            bad.append(("garbage", out[:80]))
        continue
    body = {rnd.choice(fields): rnd.choice(vals) for _ in range(rnd.randint(0, 5))}
    if "argv" in body and rnd.random() < 0.5:
        body["argv"] = ["true"]
    b = json.dumps(body).encode()
    if rnd.random() < 0.1: b = b[:rnd.randint(0, len(b))]
    if rnd.random() < 0.05: b = b.replace(b"e", b"\xff")
    p = rnd.choice(paths)
    m = rnd.choice(["POST", "GET", "PUT", "DELETE", "PATCH"]) if rnd.random() < 0.3 else \
        ("PUT" if "files" in p else "POST")
    out = http(m, p, b, rnd.choice(heads))
    status = out[9:12]
    # 500s are bugs, except a create that the node could not start (reported as such)
    if not status.isdigit() or (status.startswith(b"5") and status != b"503"):
        bad.append((m, p[:60], b[:80], out[:160]))
print("problems:", len(bad))
for x in bad[:10]: print(x)
alive = http("GET", "/healthz")
sys.exit(0 if not bad and alive.startswith(b"HTTP/1.1 200") else 1)
PY
  kill -0 "$DPID" || fail "the daemon died"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
