# bench/exec_floor.py [--json NAME] SOCK [SOCK2] [N]: the exec round trip of a running sandbox as a Python
# trainer sees it (http.client, one keep-alive connection over the daemon's Unix socket, POST
# exec {"argv":["true"]}, the answer read whole), interleaved request by request with the
# Python floor, `subprocess.run(["/bin/true"])` in the same loop (issue 28 goal 4). With SOCK2
# (another daemon, e.g. another build) its round trips are interleaved too and compared with
# SOCK's. Prints p50/p99 of each and the ratios; with --json NAME (one socket), two result lines
# in bench/lat.c's format instead, NAME (the exec) and NAME.peer (the floor), for bench/run.sh.
# Python's subprocess starts /bin/true with vfork, so this floor is lower than lat's fork+exec.
# bench/exec_floor.py --parts SOCK [N]: the round trip split into its parts (see parts()).
# bench/exec_floor.py --peers SOCK [N]: the round trip beside the peers' ways of running a
# command in a sandbox that already runs (see peers(); bench/exec_peers.sh sets them up).
# bench/exec_floor.py --sdk SOCK [N]: the goal's loop for the Python SDK too (see sdk(); the
# package from python/, libsbx from $SANDBOXD_LIBSBX, e.g. build/libsbx.so.0).
# bench/exec_floor.py --model EXEC_MODEL SOCK [N]: the goal's loop for bench/exec_model.c's
# lower bound, 0 to 2 hops, pipes and reapers, beside the daemon's exec from the minimal client (see model()).
# Standard library only (and, for --sdk, the project's own Python SDK).
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import time


class UnixConn(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost")
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(self.path)


def req(c, method, path, body=None):
    c.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    return r.status, r.read()


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# Run inside the sandbox and on the host by --parts: /bin/true started and waited for as Python's
# subprocess does it (vfork, via posix_spawn), without subprocess's own bookkeeping.
SPAWN = """import os, statistics, sys, time
t = []
for i in range(int(sys.argv[1]) + 20):
    a = time.perf_counter()
    os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0)
    t.append((time.perf_counter() - a) * 1e3)
print("%.4f" % statistics.median(t[20:]))
"""


def interleaved(fns, n):
    """Milliseconds of each call of each fn, n rounds after 20 that warm up, the order reversed
    every other round so that none always follows the same one."""
    t = [[] for _ in fns]
    for i in range(n + 20):
        for k in (range(len(fns)) if i % 2 else reversed(range(len(fns)))):
            a = time.perf_counter()
            fns[k]()
            if i >= 20:
                t[k].append((time.perf_counter() - a) * 1e3)
    return t


def expect(status, fn):
    """fn, a request, checked for the HTTP status it must answer."""
    def call():
        st = fn()[0]
        assert st == status, st
    return call


def exec_true(c, sid):
    """POST exec {"argv":["true"]} in sandbox sid on connection c, checked to exit 0."""
    def call():
        st, b = req(c, "POST", "/v1/sandboxes/%s/exec" % sid, '{"argv":["true"]}')
        assert st == 200 and json.loads(b)["exit_code"] == 0, (st, b)
    return call


def exec_true_minimal(sock, sid):
    """POST exec {"argv":["true"]} as a minimal client sends it: the request in one send on a
    keep-alive socket of its own, the answer read until its end (no header parsing, as little
    Python as can be), checked to exit 0."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock)
    body = b'{"argv":["true"]}'
    msg = (b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
           b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (sid.encode(), len(body), body))

    def call():
        s.sendall(msg)
        buf = s.recv(65536)
        while True:
            head, _, rest = buf.partition(b"\r\n\r\n")
            if _:
                m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
                if (len(rest) >= int(m.group(1))) if m else rest.endswith(b"0\r\n\r\n"):
                    break
            buf += s.recv(65536)
        assert buf.startswith(b"HTTP/1.1 200") and b'"exit_code":0' in buf, buf
    return call


def parts(sock, n):
    """--parts: the round trip split into what any design pays (the HTTP request itself, starting
    /bin/true in the sandbox) and the rest (daemon -> shim -> init -> reaper and back), each
    interleaved with the floor, and the best ratio to the floor a design with no rest could reach;
    beside them the same exec from a minimal client, to tell the daemon's part from
    http.client's."""
    c = UnixConn(sock)
    st, b = req(c, "POST", "/v1/sandboxes", "{}")
    assert st == 201, (st, b)
    sid = json.loads(b)["id"]
    ex = "/v1/sandboxes/%s/exec" % sid
    rows = [("GET /v1/sandboxes/ID (the HTTP request alone)", expect(200, lambda: req(c, "GET", "/v1/sandboxes/" + sid))),
            ("exec of a missing program (no program runs)", expect(400, lambda: req(c, "POST", ex, '{"argv":["/nonexistent"]}'))),
            ("exec true", exec_true(c, sid)),
            ("exec true, a minimal client (one send, no parsing)", exec_true_minimal(sock, sid)),
            ("subprocess.run(['/bin/true']) (floor)", lambda: subprocess.run(["/bin/true"], check=True))]
    try:
        t = interleaved([fn for _, fn in rows], n)
        st, b = req(c, "POST", ex, json.dumps({"argv": ["python3", "-c", SPAWN, str(n)]}))
        out = json.loads(b)
        assert st == 200 and out["exit_code"] == 0, (st, b)
        spawn_in = float(out["stdout"])
    finally:
        req(c, "DELETE", "/v1/sandboxes/" + sid)
    spawn_host = float(subprocess.run([sys.executable, "-c", SPAWN, str(n)], check=True,
                                      capture_output=True, text=True).stdout)
    p50 = [statistics.median(xs) for xs in t]
    floor = p50[4]
    for (name, _), m, xs in zip(rows, p50, t):
        print("%-50s p50 %.3f ms p99 %.3f ms  %.2fx the floor" % (name, m, pct(xs, 99), m / floor))
    print("%-50s p50 %.3f ms (host: %.3f ms)" % ("/bin/true by posix_spawn+waitpid in the sandbox", spawn_in, spawn_host))
    print("rest of the round trip (exec true - GET - spawn in the sandbox): %.3f ms" % (p50[2] - p50[0] - spawn_in))
    print("http.client's own share (exec true - the minimal client's): %.3f ms" % (p50[2] - p50[3]))
    print("best ratio with no rest (GET + spawn in the sandbox) / floor: %.2fx" % ((p50[0] + spawn_in) / floor))


def paired(rows, n):
    """The goal's loop for each row: each call right after a floor's run, the pairs in a
    rotating order; prints each row's p50 and its ratio to the floors that followed it."""
    floor = lambda: subprocess.run(["/bin/true"], check=True)
    t = [([], []) for _ in rows]
    for i in range(n + 20):
        for k in [(i + j) % len(rows) for j in range(len(rows))]:
            for j, fn in enumerate((rows[k][1], floor)):
                a = time.perf_counter()
                fn()
                if i >= 20:
                    t[k][j].append((time.perf_counter() - a) * 1e3)
    for (name, _), (ex, fl) in zip(rows, t):
        m, f = statistics.median(ex), statistics.median(fl)
        print("%-48s n=%d p50 %.3f ms p99 %.3f ms  %.2fx its floor (p50 %.3f ms)"
              % (name, n, m, pct(ex, 99), m / f, f))


def sdk(sock, n):
    """--sdk: the goal's loop (each exec right after a floor's run) for two clients in one run:
    the Python SDK's Sandbox.run("true") (ctypes over libsbx, which speaks HTTP with libcurl) and
    http.client, as the default mode (paired())."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import sandboxd
    sb = sandboxd.Sandbox.create(client=sandboxd.Client("unix:" + sock))
    c = UnixConn(sock)

    def sdk_true():
        r = sb.run("true")
        assert r.exit_code == 0, r
    try:
        paired([("exec true, the Python SDK (Sandbox.run)", sdk_true),
                ("exec true, http.client", exec_true(c, sb.id))], n)
    finally:
        sb.terminate()


MODELS = [["0"], ["1"], ["2"], ["2", "pipes"], ["2", "pipes", "reaper"], ["2", "pipes", "keep"],
          ["2", "pipes", "keep", "norelease"], ["1", "pipes", "keep"]]


def model(exe, sock, n):
    """--model: sandboxd's exec from the minimal client beside each variant in MODELS of
    bench/exec_model.c (a listener and 0-2 persistent helpers, the last of which runs /bin/true;
    optionally the command's pipes passed down, and a reaper per command or one kept), all in the
    goal's loop (paired()): what a daemon with helpers can reach at best here, against this one.
    No HTTP, JSON or sandbox in the model; its variants are described in exec_model.c."""
    st, b = req(UnixConn(sock), "POST", "/v1/sandboxes", "{}")
    assert st == 201, (st, b)
    sid = json.loads(b)["id"]
    procs, rows = [], [("exec true (sandboxd, the minimal client)", exec_true_minimal(sock, sid))]
    try:
        for i, args in enumerate(MODELS):
            path = "%s.model%d" % (sock, i)
            procs.append(subprocess.Popen([exe, path] + args))
            for _ in range(100):
                if os.path.exists(path):
                    break
                time.sleep(0.02)
            s = socket.socket(socket.AF_UNIX)
            s.connect(path)

            def call(s=s):
                s.send(b"x")
                assert s.recv(16) == b"0"
            name = "model: %s hop%s" % (args[0], "" if args[0] == "1" else "s")
            rows.append((" + ".join([name] + args[1:]), call))
        paired(rows, n)
    finally:
        for p in procs:  # SIGTERM: the listener ends its hops and reaps them
            p.terminate()
            p.wait()
        for i in range(len(MODELS)):
            try:
                os.unlink("%s.model%d" % (sock, i))
            except FileNotFoundError:
                pass
        req(UnixConn(sock), "DELETE", "/v1/sandboxes/" + sid)


def sandbox_pid(root):
    """The first process under root (a bwrap) whose name is sleep: the sandbox's own process."""
    for _ in range(100):
        todo = [str(root)]
        while todo:
            pid = todo.pop()
            try:
                if pid != str(root) and open("/proc/%s/comm" % pid).read().strip() == "sleep":
                    return pid
                todo += open("/proc/%s/task/%s/children" % (pid, pid)).read().split()
            except OSError:
                pass
        time.sleep(0.05)
    raise RuntimeError("no sleep under bwrap %d" % root)


def peers(sock, n):
    """--peers: exec true in a running sandbox, interleaved with the floor and with the peers'
    ways of running /bin/true in a sandbox that already runs: `nsenter -a` into a bubblewrap
    sandbox (SBX_BENCH_BWRAP_SLEEP: the JSON argv of a bwrap that runs sleep; no daemon, no
    seccomp, the sandbox's root user) and `crun exec` into a crun container
    (SBX_BENCH_CRUN_PREFIX: the JSON argv of crun before its subcommand, SBX_BENCH_CRUN_BUNDLE: a
    bundle whose process sleeps)."""
    c = UnixConn(sock)
    st, b = req(c, "POST", "/v1/sandboxes", "{}")
    assert st == 201, (st, b)
    sid = json.loads(b)["id"]
    run = lambda argv: subprocess.run(argv, check=True)
    rows = [("exec true (sandboxd, HTTP)", exec_true(c, sid)),
            ("subprocess.run(['/bin/true']) (floor)", lambda: run(["/bin/true"]))]
    bw, crun, cname = None, None, "sbxbench-crun-exec-%d" % os.getpid()
    try:
        if os.environ.get("SBX_BENCH_BWRAP_SLEEP"):
            bw = subprocess.Popen(json.loads(os.environ["SBX_BENCH_BWRAP_SLEEP"]))
            target = sandbox_pid(bw.pid)
            rows.append(("nsenter -a into a bubblewrap sandbox", lambda: run(["nsenter", "-t", target, "-a", "/bin/true"])))
        else:
            print("!!! exec_floor: no bubblewrap: its row is SKIPPED", file=sys.stderr)
        if os.environ.get("SBX_BENCH_CRUN_PREFIX"):
            crun = json.loads(os.environ["SBX_BENCH_CRUN_PREFIX"])
            run(crun + ["run", "-d", "--bundle", os.environ["SBX_BENCH_CRUN_BUNDLE"], cname])
            rows.append(("crun exec into a crun container", lambda: run(crun + ["exec", cname, "/bin/true"])))
        else:
            print("!!! exec_floor: no crun: its row is SKIPPED", file=sys.stderr)
        t = interleaved([fn for _, fn in rows], n)
    finally:  # the peers first: a failed DELETE must not leave them running
        if bw:
            bw.kill()
            bw.wait()
        if crun:
            subprocess.run(crun + ["delete", "-f", cname], stderr=subprocess.DEVNULL)
        req(UnixConn(sock), "DELETE", "/v1/sandboxes/" + sid)
    floor = statistics.median(t[1])
    for (name, _), xs in zip(rows, t):
        m = statistics.median(xs)
        print("%-42s n=%d p50 %.3f ms p99 %.3f ms  %.2fx the floor" % (name, len(xs), m, pct(xs, 99), m / floor))


def main():
    args = sys.argv[1:]
    if args[:1] == ["--model"]:
        model(args[1], args[2], int(args[3]) if len(args) > 3 else 300)
        return
    if args[:1] in (["--parts"], ["--peers"], ["--sdk"]):
        mode = {"--parts": parts, "--peers": peers, "--sdk": sdk}[args[0]]
        mode(args[1], int(args[2]) if len(args) > 2 else 300)
        return
    json_name = None
    if len(args) > 2 and args[0] == "--json":
        json_name, args = args[1], args[2:]
    n = int(args.pop()) if len(args) > 1 and args[-1].isdigit() else 300
    conns = [UnixConn(p) for p in args]
    ids = []
    for c in conns:
        st, b = req(c, "POST", "/v1/sandboxes", "{}")
        assert st == 201, (st, b)
        ids.append(json.loads(b)["id"])
    names = ["exec %s" % p for p in args] + ["subprocess.run(['/bin/true'])"]
    try:
        t = interleaved([exec_true(c, i) for c, i in zip(conns, ids)] +
                        [lambda: subprocess.run(["/bin/true"], check=True)], n)
    finally:
        for c, i in zip(conns, ids):
            req(c, "DELETE", "/v1/sandboxes/" + i)
    floor = statistics.median(t[-1])
    if json_name and len(conns) == 1:
        for name, xs in ((json_name, t[0]), (json_name + ".peer", t[1])):
            print(json.dumps({"name": name, "n": len(xs), "p50_ms": round(statistics.median(xs), 3),
                              "p99_ms": round(pct(xs, 99), 3), "min_ms": round(min(xs), 3),
                              "mean_ms": round(statistics.fmean(xs), 3),
                              "max_ms": round(max(xs), 3)}, separators=(",", ":")))
        return
    for name, xs in zip(names, t):
        print("%-48s n=%d p50 %.3f ms p99 %.3f ms  %.2fx the Python floor"
              % (name, len(xs), statistics.median(xs), pct(xs, 99), statistics.median(xs) / floor))
    if len(conns) == 2:
        print("second / first: %.2f" % (statistics.median(t[1]) / statistics.median(t[0])))


if __name__ == "__main__":  # (bench/exec_trace.sh imports the client)
    main()
