"""Minimal HTTP/1.1 client for the sandboxd Unix socket, used by the reliability tests
(not a test itself): one request per connection, JSON in and out, NDJSON streams read line by
line, and latency accounting."""
import json
import socket
import time


class Resp:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body) if self.body else None


def connect(path, timeout=60.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    return s


def send_request(s, method, target, body=b"", headers=None):
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    h = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
    s.sendall(("%s %s HTTP/1.1\r\nHost: sd\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n"
               % (method, target, len(body), h)).encode() + body)


def read_head(f):
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed before a status line")
    status = int(line.split()[1])
    headers = {}
    while True:
        line = f.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def read_body(f, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while True:
            n = int(f.readline().split(b";")[0], 16)
            if n == 0:
                f.readline()
                return out
            out += f.read(n)
            f.readline()
    if "content-length" in headers:
        return f.read(int(headers["content-length"]))
    return f.read()


def request(path, method, target, body=b"", headers=None, timeout=60.0):
    s = connect(path, timeout)
    try:
        send_request(s, method, target, body, headers)
        f = s.makefile("rb")
        status, hdrs = read_head(f)
        return Resp(status, hdrs, read_body(f, hdrs))
    finally:
        s.close()


def chunks(f):
    """Yield the chunks of a chunked body as they arrive."""
    while True:
        line = f.readline()
        if not line:
            return
        n = int(line.split(b";")[0], 16)
        if n == 0:
            f.readline()
            return
        data = f.read(n)
        f.readline()
        yield data


def percentile(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class Timer:
    def __init__(self):
        self.samples = {}

    def time(self, name, fn, *a, **kw):
        t = time.monotonic()
        try:
            return fn(*a, **kw)
        finally:
            self.samples.setdefault(name, []).append(time.monotonic() - t)

    def report(self):
        out = []
        for k in sorted(self.samples):
            xs = self.samples[k]
            out.append("%-8s n=%-6d p50=%7.1f ms  p99=%7.1f ms  max=%7.1f ms" % (
                k, len(xs), percentile(xs, 50) * 1e3, percentile(xs, 99) * 1e3, max(xs) * 1e3))
        return "\n".join(out)
