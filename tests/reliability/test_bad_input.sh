#!/usr/bin/env bash
# Bad input on every endpoint against a real daemon: malformed JSON, wrong types, negative and
# overflowing numbers (1e400, 2^64), NUL bytes (JSON \u0000 and %00 in query arguments),
# invalid UTF-8, path traversal and symlink tricks in the files API, huge headers, huge
# bodies. Each answer is a 4xx naming the problem (JSON {code, message}; 431 for headers too
# large comes from libmicrohttpd), and nothing changes: the sandbox list, the lease list, the
# sandbox's files and the host stay as they were, and the daemon keeps serving.

source "$(dirname "$0")/rel.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
export HERE

TEST_TIMEOUT_every_endpoint=120
test_every_endpoint() {
  rel_setup
  start_daemon
  create; local id=$ID
  req POST /v1/leases -d '{"ttl":"5m"}'; expect 201
  local lease; lease=$(echo "$BODY" | jq -r .id)
  echo host-secret >"$D/secret"
  req POST "/v1/sandboxes/$id/exec" -d "{\"argv\":[\"sh\",\"-c\",\"mkdir -p /workspace/d && echo keep > /workspace/d/f && ln -s $D /workspace/hostdir && ln -s $D/secret /workspace/abs && ln -s ../../../../../../..$D/secret /workspace/rel && ln -s /workspace/d /workspace/inlink\"]}"
  expect 200 '.exit_code == 0'
  "$PY" - "$SOCK" "$id" "$lease" "$D" <<'PY' || fail "bad input was not refused cleanly (above)"
import json, os, sys
sys.path.insert(0, os.environ["HERE"])
import sdclient
sock, sid, lease, D = sys.argv[1:]
S = "/v1/sandboxes/" + sid
bad, tried = [], [0]

def snapshot():
    lst = sdclient.request(sock, "GET", "/v1/sandboxes").json()
    keep = [(s["id"], s["state"], json.dumps(s["limits"], sort_keys=True), s["expires_at"],
             json.dumps(s["labels"], sort_keys=True)) for s in lst]
    fr = sdclient.request(sock, "POST", S + "/exec", {"argv": ["sh", "-c",
        "cd /workspace && find . | sort && cat d/f"]}).json()
    files = fr.get("stdout", fr)
    return keep, files

def try_(method, path, body=b"", headers=None, want=None, may_drop=False):
    tried[0] += 1
    try:
        r = sdclient.request(sock, method, path, body, headers, timeout=20)
    except (BrokenPipeError, ConnectionResetError) as e:
        if may_drop:  # refused while the client was still sending: fine, if the daemon lives
            return
        bad.append((method, path[:80], repr(body)[:80], "no answer: %s" % e)); return
    except Exception as e:
        bad.append((method, path[:80], repr(body)[:80], "no answer: %s" % e)); return
    ok = 400 <= r.status < 500 and (want is None or r.status in want)
    if ok and r.status != 431:
        try:
            j = r.json()
            ok = isinstance(j.get("code"), str) and isinstance(j.get("message"), str) and j["message"]
        except Exception:
            ok = False
    if not ok:
        bad.append((method, path[:80], repr(body)[:80], r.status, r.body[:160]))

before = snapshot()
# bodies that are not JSON, or JSON of the wrong shape, on every JSON endpoint
json_eps = [("POST", "/v1/sandboxes"), ("POST", S + "/exec"), ("POST", S + "/timeout"),
            ("POST", "/v1/leases")]
garbage = [b"{", b"[1,2]", b"\"str\"", b"null", b"42", b"{\"a\":}", b"{\"a\":1}}", b"\xff\xfe{}",
           b"{\"labels\":{\"k\":\"\xc3\x28\"}}", b"{\"x\":\"\\ud800\"}", b"{\"k\":1e400}",
           b"{\"k\":18446744073709551616}", b"{\"k\":-18446744073709551617}", b"{\"a\":\"\\u0000\"}",
           b"{\"a\\u0000\":1}", b"\x00", b"{}" + b"\x00"]
for m, p in json_eps:
    for g in garbage:
        if p.endswith("/v1/sandboxes") and g in (b"{\"a\":1}",):
            continue
        try_(m, p, g)
# wrong types and out-of-range values per field
fields = {
    "/v1/sandboxes": {"cpu": ["x", -1, 0, 1e400, 1e308, True, [], {}], "memory": [-1, 1e400, 18446744073709551615, "1e999Gi", "-1Mi", "Mi", 0.5, 15],
                      "disk": [-1, "99999999999999999999Gi", 2 ** 63], "pids": [-1, 2 ** 63, 1.5, "8", 7, 65537],
                      "timeout": [-1, 0, 1e400, "1e400s", "-5s", "9999999h", "", "5x", 2 ** 64 - 1],
                      "idle_timeout": [-1, 0.0001, "1ms", "7d1s"], "max_cost_usd": [-1, 0, "1", 1e400, -0.0],
                      "env": [[], "A=B", {"": "x"}, {"A=B": "x"}, {"A": 1}, {"A": "b\u0000"}],
                      "labels": [[], {"k": 5}, {"k": None}], "image": [5, "relative/path", "/no/such", "", "/etc/passwd"],
                      "network": [5, "closed", {"allow": "1.2.3.4"}, {"allow": ["300.1.1.1"]}, {"allow": ["169.254.169.254"]}],
                      "lease": [5, "", "ls-nope"]},
    S + "/exec": {"argv": [None, [], "echo", [5], [""] * 0, ["a"] * 5000, [["x"]]], "shell": ["yes", 1],
                  "env": [[], {"A": 5}, {"A=B": "x"}], "cwd": ["relative", "/a/../../etc", 5, ""],
                  "stdin": [5, []], "stdin_b64": ["!!", 5, "a"], "timeout": [-1, 0, 1e400, "forever", 2 ** 64],
                  "max_output": [-1, "1Ti", 2 ** 64, 1e400, "-1"]},
    S + "/timeout": {"timeout": [None, -1, 0, 1e400, "7d1s", "x", 2 ** 64]},
    "/v1/leases": {"ttl": [-1, 0, 1e400, "8d", "x", 2 ** 64, []]},
}
for p, fs in fields.items():
    for f, vals in fs.items():
        for v in vals:
            base = {"argv": ["true"]} if p.endswith("/exec") and f != "argv" else {}
            base[f] = v
            body = json.dumps(base).encode().replace(b"Infinity", b"1e400")
            try_("POST", p, body, want=(400, 404))
try_("POST", S + "/timeout", b"{}", want=(400,))
# files API: traversal, relative, NUL, symlinks out of the root, bad modes, bad media types
ob = {"Content-Type": "application/octet-stream"}
for q in ["/workspace/../../etc/passwd", "workspace/x", "", "/workspace/a%00b", "%00", "/workspace/../%ff%fe/x",
          "/" + "a/" * 3000, "/workspace/./../x", "..", "/workspace/d/.."]:
    try_("PUT", S + "/files?path=" + q, b"planted", ob)
    try_("GET", S + "/files?path=" + q)
try_("PUT", S + "/files?path=/workspace/hostdir/planted", b"planted", ob)
for q in ["/workspace/x&mode=8", "/workspace/x&mode=-1", "/workspace/x&mode=04755", "/workspace/x&mode=1e3",
          "/workspace/x&mode=99999999999999999999999", "/workspace/x&mode=0777%00"]:
    try_("PUT", S + "/files?path=" + q, b"x", ob)
try_("PUT", S + "/files?path=/workspace/x", b"x", {"Content-Type": "text/plain"}, want=(415,))
try_("PUT", S + "/files", b"x", ob)
# a tar with escapes
import io, tarfile
for name, kind, link in [("../evil", "f", ""), ("a/../../evil", "f", ""), ("l", "s", "/etc")]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        ti = tarfile.TarInfo(name)
        if kind == "f":
            ti.size = 1; t.addfile(ti, io.BytesIO(b"x"))
        else:
            ti.type = tarfile.SYMTYPE if kind == "s" else tarfile.LNKTYPE; ti.linkname = link; t.addfile(ti)
        if kind == "s":
            ti2 = tarfile.TarInfo("l/planted"); ti2.size = 1; t.addfile(ti2, io.BytesIO(b"x"))
    try_("PUT", S + "/files?path=/workspace/tarred", buf.getvalue(), {"Content-Type": "application/x-tar"})
try_("PUT", S + "/files?path=/workspace/tarred", b"not a tar at all" * 100, {"Content-Type": "application/x-tar"})
# ids and methods
for p in ["/v1/sandboxes/sb-%00", "/v1/sandboxes/" + "a" * 5000, "/v1/sandboxes/../v1/info",
          "/v1/leases/%ff/renew", "/v1/sandboxes/" + sid + "/nothing"]:
    try_("GET", p, want=(400, 404, 405))
try_("PATCH", S, b"{}", want=(405,))
try_("DELETE", "/v1/leases/ls-nope", want=(404,))
# huge headers and bodies
try_("GET", "/v1/info", headers={"X-Big": "a" * 200000}, want=(431, 413, 400), may_drop=True)
try_("GET", "/v1/info", headers={"X-H%d" % i: "v" * 100 for i in range(2000)}, want=(431, 413, 400), may_drop=True)
try_("POST", S + "/exec", headers={"Accept": "a" * 100000}, body=b"{}", want=(431, 413, 400), may_drop=True)
for m, p in json_eps:
    try_(m, p, b" " * (1 << 20) + b"{}", want=(413,))
try_("POST", "/v1/sandboxes", b"{}", {"Idempotency-Key": "k" * 300}, want=(400,))
after = snapshot()
if before != after:
    bad.append(("state changed", before, after))
if os.path.exists(D + "/planted"):
    bad.append(("a PUT wrote on the host",))
if sdclient.request(sock, "GET", "/v1/leases/%s/renew" % lease).status not in (404, 405) and \
   sdclient.request(sock, "POST", "/v1/leases/%s/renew" % lease).status != 200:
    bad.append(("the lease was lost",))
for b in bad[:30]:
    print("BAD", b)
print("bad requests sent: %d, problems: %d" % (tried[0], len(bad)))
sys.exit(1 if bad else 0)
PY
  req GET /healthz; expect 200
  req GET "/v1/sandboxes/$id/files?path=/workspace/d/f"; expect 200
  [ "$BODY" == keep ] || fail "a file changed: $BODY"
  kill -0 "$DPID" || fail "the daemon died"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
