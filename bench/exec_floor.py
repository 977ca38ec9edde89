# bench/exec_floor.py [--json NAME] SOCK [SOCK2] [N]: the exec round trip of a running sandbox as a Python
# trainer sees it (http.client, one keep-alive connection over the daemon's Unix socket, POST
# exec {"argv":["true"]}, the answer read whole), interleaved request by request with the
# Python floor, `subprocess.run(["/bin/true"])` in the same loop (issue 28 goal 4). With SOCK2
# (another daemon, e.g. another build) its round trips are interleaved too and compared with
# SOCK's. Prints p50/p99 of each and the ratios; with --json NAME (one socket), two result lines
# in bench/lat.c's format instead, NAME (the exec) and NAME.peer (the floor), for bench/run.sh.
# Python's subprocess starts /bin/true with vfork, so this floor is lower than lat's fork+exec.
# Standard library only.
import http.client
import json
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


def main():
    args = sys.argv[1:]
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
    body = '{"argv":["true"]}'
    names = ["exec %s" % p for p in args] + ["subprocess.run(['/bin/true'])"]
    t = [[] for _ in names]
    try:
        for i in range(n + 20):  # the first 20 warm up, not counted
            order = list(range(len(names)))
            if i % 2:
                order.reverse()
            for k in order:
                a = time.perf_counter()
                if k < len(conns):
                    st, b = req(conns[k], "POST", "/v1/sandboxes/%s/exec" % ids[k], body)
                    assert st == 200 and json.loads(b)["exit_code"] == 0, (st, b)
                else:
                    subprocess.run(["/bin/true"], check=True)
                if i >= 20:
                    t[k].append((time.perf_counter() - a) * 1e3)
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


main()
