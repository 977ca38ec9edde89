#!/usr/bin/env python3
"""WebSocket scenarios for tests/integration/test_processes.sh: a small client of the daemon's
attach endpoints (docs/API.md "Processes and attach") built on Debian's python3-websockets, the
way an agent keeps a persistent session. Usage: ws_procs.py SOCKET SANDBOX_ID SCENARIO [ARGS].
Each scenario asserts what it sees and exits 1 with a message on the first difference."""
import asyncio
import hashlib
import json
import os
import ssl
import sys

import websockets
import websockets.client


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


class Session:
    """One attachment: frames in both directions, stdout/stderr gathered."""

    def __init__(self, ws):
        self.ws = ws
        self.out = {1: bytearray(), 2: bytearray()}
        self.controls = []
        self.exit = None

    async def send_stdin(self, data):
        await self.ws.send(b"\x00" + data)

    async def control(self, obj):
        await self.ws.send(json.dumps(obj))

    async def recv(self, timeout=20):
        m = await asyncio.wait_for(self.ws.recv(), timeout)
        if isinstance(m, bytes):
            if not m or m[0] not in (1, 2):
                fail("bad server data frame %r" % m[:8])
            self.out[m[0]] += m[1:]
            return None
        j = json.loads(m)
        self.controls.append(j)
        if j.get("type") == "exit":
            self.exit = j
        return j

    async def until_output(self, needle, ch=1, timeout=20):
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while needle not in self.out[ch]:
            if self.exit:
                fail("exited before %r appeared; out=%r" % (needle, bytes(self.out[ch][-300:])))
            left = end - loop.time()
            if left <= 0:
                fail("no %r within %ss; out=%r" % (needle, timeout, bytes(self.out[ch][-300:])))
            try:
                await self.recv(left)
            except asyncio.TimeoutError:
                fail("no %r within %ss; out=%r" % (needle, timeout, bytes(self.out[ch][-300:])))

    async def until_control(self, typ, timeout=20):
        while True:
            j = await self.recv(timeout)
            if j and j.get("type") == typ:
                return j
            if j and j.get("type") == "error":
                fail("waiting for %s: %r" % (typ, j))

    async def until_exit(self, timeout=30):
        while not self.exit:
            await self.recv(timeout)
        return self.exit

    async def closed_code(self, timeout=10):
        try:
            while True:
                await self.recv(timeout)
        except websockets.exceptions.ConnectionClosed as e:
            return e.code


def connect(sock, path, protocol=True):
    """sock: a Unix socket path, or tcp:HOST:PORT (the bearer token from $SBX_TOKEN)."""
    sub = ["v1.sandboxd"] if protocol else None
    if sock.startswith("tcp:") or sock.startswith("tls:"):
        tok = os.environ.get("SBX_TOKEN")
        tls = None
        if sock.startswith("tls:"):  # wss://, trusting the certificate in $SBX_CA
            tls = ssl.create_default_context(cafile=os.environ["SBX_CA"])
        return websockets.client.connect(
            ("wss://" if tls else "ws://") + sock[4:] + path, max_size=None, subprotocols=sub,
            ping_interval=None, ssl=tls,
            extra_headers={"Authorization": "Bearer " + tok} if tok else None)
    return websockets.client.unix_connect(sock, "ws://sd" + path, max_size=None,
                                          subprotocols=sub, ping_interval=None)


async def start(sock, sb, body):
    ws = await connect(sock, "/v1/sandboxes/%s/exec/attach" % sb)
    s = Session(ws)
    await ws.send(json.dumps(body))
    j = await s.until_control("start")
    s.pid = j["pid"]
    return s


async def sc_repl(sock, sb):
    """A persistent Python REPL: state kept between inputs, stderr apart, exit code."""
    s = await start(sock, sb, {"argv": ["python3", "-i", "-q", "-u"]})
    if s.ws.subprotocol != "v1.sandboxd":
        fail("subprotocol not echoed: %r" % s.ws.subprotocol)
    pong = await s.ws.ping(b"are-you-there")
    await asyncio.wait_for(pong, 10)  # the server answers pings
    await s.send_stdin(b"x = 6 * 7\n")
    await s.send_stdin(b"print('answer', x)\n")
    await s.until_output(b"answer 42\n")
    await s.send_stdin(b"import sys; print('to-err', file=sys.stderr)\n")
    await s.until_output(b"to-err\n", ch=2)
    await s.send_stdin(b"x += 1; print('now', x)\n")
    await s.until_output(b"now 43\n")
    await s.send_stdin(b"raise SystemExit(5)\n")
    e = await s.until_exit()
    if e["exit_code"] != 5 or e["reason"] != "exited":
        fail("exit record %r" % e)
    code = await s.closed_code()
    if code != 1000:
        fail("close code %r" % code)
    print(s.pid)


async def sc_stdin_bytes(sock, sb, mb):
    """MB megabytes of random bytes through stdin, byte-exact (sha256 both sides)."""
    n = int(mb) << 20
    data = os.urandom(n)
    s = await start(sock, sb, {"argv": ["sha256sum"]})
    for off in range(0, n, 65536):
        await s.send_stdin(data[off:off + 65536])
    await s.control({"type": "eof"})
    e = await s.until_exit(120)
    want = hashlib.sha256(data).hexdigest()
    out = s.out[1].decode()
    if out.split()[:1] != [want]:
        fail("stdin not byte-exact: want %s (%d bytes), got %r" % (want, n, out))
    if e["exit_code"] != 0:
        fail("exit %r" % e)


async def sc_tty(sock, sb):
    """A terminal: isatty, TERM, size, resize, one stream, Ctrl-C through the tty and a signal
    message interrupt a sleep but not the shell, exit 3."""
    s = await start(sock, sb, {"argv": ["sh", "-i"], "tty": True, "term": "xterm-256color",
                               "tty_size": {"rows": 30, "cols": 100}})
    await s.send_stdin(b"echo T=$TERM; stty size; tty; echo err >&2\n")
    await s.until_output(b"T=xterm-256color")
    await s.until_output(b"30 100")
    await s.until_output(b"/dev/pts/")
    await s.until_output(b"err")
    if s.out[2]:
        fail("a tty has one stream, got stderr %r" % bytes(s.out[2]))
    await s.control({"type": "resize", "rows": 50, "cols": 132})
    await s.send_stdin(b"stty size\n")
    await s.until_output(b"50 132")
    await s.control({"type": "resize", "rows": 0, "cols": 0})
    j = await s.until_control("error")
    if j.get("code") != "invalid_argument":
        fail("resize 0x0: %r" % j)
    await s.control({"type": "resize", "rows": 5000, "cols": 80})
    j = await s.until_control("error")
    await s.control({"type": "signal", "signal": "NOPE"})
    j = await s.until_control("error")
    if "unknown signal" not in j.get("message", ""):
        fail("unknown signal: %r" % j)
    # Ctrl-C as a byte: the line discipline interrupts the foreground sleep, not the shell
    # (the shell drops the rest of an interrupted line: the status is asked on the next one)
    await s.send_stdin(b"sleep 30\n")
    await asyncio.sleep(0.5)
    await s.send_stdin(b"\x03")
    await s.send_stdin(b"echo after-$?\n")
    await s.until_output(b"after-130")
    # the signal message: to the terminal's foreground process group
    await s.send_stdin(b"sleep 31\n")
    await asyncio.sleep(0.5)
    await s.control({"type": "signal", "signal": "SIGINT"})
    await s.send_stdin(b"echo again-$?\n")
    await s.until_output(b"again-130")
    await s.send_stdin(b"echo alive\n")
    await s.until_output(b"alive")
    await s.send_stdin(b"exit 3\n")
    e = await s.until_exit()
    if e["exit_code"] != 3:
        fail("exit %r" % e)


async def sc_attach(sock, sb, pid, want, stdin="0", replay="0"):
    """Attach to PID late: (with replay) the buffered output, then WANT in stdout."""
    ws = await connect(sock, "/v1/sandboxes/%s/processes/%s/attach?stdin=%s&replay=%s" %
                       (sb, pid, stdin, replay))
    s = Session(ws)
    if stdin == "1":
        await s.send_stdin(b"attached-input\n")
    await s.until_output(want.encode())
    if stdin == "1":
        try:  # the command may have ended already (it read its line)
            await s.control({"type": "eof"})
        except websockets.exceptions.ConnectionClosed:
            pass
        await s.until_exit()  # the exit message comes before the close
    await ws.close()


async def sc_hold(sock, sb, pid):
    """Attach with stdin and print READY, then wait for the exit (the test signals it)."""
    ws = await connect(sock, "/v1/sandboxes/%s/processes/%s/attach?stdin=1" % (sb, pid))
    s = Session(ws)
    print("READY", flush=True)
    e = await s.until_exit(60)
    print(json.dumps(e), flush=True)


async def sc_status(sock, sb, path):
    """The plain HTTP status of an upgrade attempt that must be refused."""
    try:
        ws = await connect(sock, path)
    except websockets.exceptions.InvalidStatusCode as e:
        print(e.status_code)
        return
    await ws.close()
    print(101)


async def sc_bad_frames(sock, sb):
    """Control and frame errors: each gets an error message or a close code; the command goes
    on and can be attached again."""
    s = await start(sock, sb, {"argv": ["cat"]})
    for bad in ["{", "[1]", json.dumps({"type": "nope"}), json.dumps({"type": "resize", "rows": 3,
                                                                      "cols": 3})]:
        await s.ws.send(bad)
        j = await s.until_control("error")
        if j.get("code") != "invalid_argument":
            fail("%s: %r" % (bad, j))
    await s.ws.send(b"\x05zz")  # a channel other than stdin
    await s.until_control("error")
    await s.send_stdin(b"still-here\n")
    await s.until_output(b"still-here\n")
    # an oversized frame: close 1009, the command goes on
    try:
        await s.ws.send(b"\x00" + b"x" * ((1 << 20) + 10))
        code = await s.closed_code()
    except websockets.exceptions.ConnectionClosed as e:
        code = e.rcvd.code if e.rcvd else None
    if code != 1009:
        fail("oversized frame: close %r" % code)
    print(s.pid)


async def raw_upgrade(sock, path):
    """The opening handshake by hand, for frames the library would not send: (reader, writer)."""
    r, w = await asyncio.open_unix_connection(sock)
    w.write(("GET %s HTTP/1.1\r\nHost: sd\r\n"
             "Upgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
             % path).encode())
    head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
    if b" 101 " not in head.split(b"\r\n")[0] or b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" not in head:
        fail("handshake: %r" % head)
    return r, w


async def raw_attach(sock, sb, pid, query=""):
    return await raw_upgrade(sock, "/v1/sandboxes/%s/processes/%s/attach%s" % (sb, pid, query))


async def read_frame(r):
    """One server frame: (opcode, payload)."""
    b = await asyncio.wait_for(r.readexactly(2), 10)
    n = b[1] & 0x7f
    if n == 126:
        n = int.from_bytes(await r.readexactly(2), "big")
    elif n == 127:
        n = int.from_bytes(await r.readexactly(8), "big")
    return b[0] & 0x0f, await r.readexactly(n)


async def sc_raw_frame(sock, sb, pid, hexframe, want_code):
    """Send one raw frame (hex) after attaching to PID; the close code must be WANT_CODE."""
    r, w = await raw_attach(sock, sb, pid)
    w.write(bytes.fromhex(hexframe))
    await w.drain()
    while True:
        op, payload = await read_frame(r)
        if op == 8:
            code = int.from_bytes(payload[:2], "big")
            if code != int(want_code):
                fail("close code %d (%r), want %s" % (code, payload[2:], want_code))
            return


def masked(op, payload, key=b"\x5a\x17\xc3\x08"):
    """A client frame: FIN, opcode OP, masked with KEY (payload under 126 bytes)."""
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes([0x80 | op, 0x80 | len(payload)]) + key + body


async def sc_linger(sock, sb, pid):
    """Attach with stdin to PID (a command that ends once it read a line) and send a line. After
    the exit record and its close frame the server still takes our frames, and closes the
    connection on our close frame: no reset, which could have dropped its last frames."""
    r, w = await raw_attach(sock, sb, pid, "?stdin=1")
    w.write(masked(0x2, b"\x00x\n"))
    out, exit_rec = b"", None
    while True:
        op, payload = await read_frame(r)
        if op == 0x2:
            out += payload[1:]
        elif op == 0x1 and json.loads(payload).get("type") == "exit":
            exit_rec = json.loads(payload)
        elif op == 0x8:
            break
    if b"got-x" not in out or not exit_rec or exit_rec.get("exit_code") != 0:
        fail("before the close: out=%r exit=%r" % (out, exit_rec))
    try:
        for _ in range(3):  # frames after the server's close are read and dropped
            w.write(masked(0x9, b"late"))
            await w.drain()
            await asyncio.sleep(0.2)
        w.write(masked(0x8, (1000).to_bytes(2, "big")))  # our close: now the server closes
        await w.drain()
        end = await asyncio.wait_for(r.read(1), 10)
    except (ConnectionResetError, BrokenPipeError) as e:
        fail("the server reset the connection after its close frame: %r" % e)
    if end != b"":
        fail("data after the server's close frame: %r" % end)
    w.close()


async def early_frames(sock, sb, frames):
    """Upgrade .../exec/attach and send FRAMES in one write, without waiting for the start:
    (stdout, the text messages) up to the server's close."""
    r, w = await raw_upgrade(sock, "/v1/sandboxes/%s/exec/attach" % sb)
    w.write(b"".join(frames))
    await w.drain()
    out, msgs = b"", []
    while True:
        try:
            op, payload = await read_frame(r)
        except asyncio.TimeoutError:
            fail("no close within 10 s: out=%r messages=%r" % (out, msgs))
        if op == 0x2 and payload[:1] == b"\x01":
            out += payload[1:]
        elif op == 0x1:
            msgs.append(json.loads(payload))
        elif op == 0x8:
            w.write(masked(0x8, payload[:2]))
            w.close()
            return out, msgs


async def sc_early_stdin(sock, sb):
    """Stdin frames and an eof sent with the exec body, before its start: the body's stdin is
    written first, then the frames, in order, then the eof; with a tty too."""
    def body(b):
        return masked(0x1, json.dumps(b).encode())
    eof = masked(0x1, b'{"type":"eof"}')
    cases = [
        ([body({"argv": ["cat"], "stdin": "A\n"}), eof], b"A\n"),
        ([body({"argv": ["cat"], "stdin": "A\n"}), masked(0x2, b"\x00B\n"),
          masked(0x2, b"\x00C\n"), eof], b"A\nB\nC\n"),
        ([body({"argv": ["cat"]}), masked(0x2, b"\x00B\n"), eof], b"B\n"),
        ([body({"argv": ["sh", "-c", "read x; echo got=$x"], "tty": True}),
          masked(0x2, b"\x00hello\n")], b"got=hello"),
    ]
    for frames, want in cases:
        out, msgs = await early_frames(sock, sb, frames)
        types = [m.get("type") for m in msgs]
        ok = out == want if b"got=" not in want else want in out
        if not ok or types != ["start", "exit"] or msgs[-1].get("exit_code") != 0:
            fail("early frames: want %r, got %r, messages %r" % (want, out, msgs))


async def sc_stdin_stalled(sock, sb):
    """A command that never reads stdin: the server stops reading the socket (the client's
    writes stop completing) instead of buffering; the command is then killed by a signal."""
    s = await start(sock, sb, {"argv": ["sleep", "1000"]})
    chunk = b"z" * 65536
    sent = 0
    try:
        while sent < (64 << 20):
            await asyncio.wait_for(s.send_stdin(chunk), 3)
            sent += len(chunk)
    except asyncio.TimeoutError:
        pass
    if sent >= (64 << 20):
        fail("the server took 64 MB for a command that does not read")
    # the socket is full in both directions now: the signal goes over plain HTTP
    r, w = await asyncio.open_unix_connection(sock)
    body = b'{"signal":"KILL"}'
    w.write(b"POST /v1/sandboxes/%s/processes/%d/signal HTTP/1.1\r\nHost: sd\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" %
            (sb.encode(), s.pid, len(body), body))
    status = (await asyncio.wait_for(r.readline(), 10)).split()[1]
    w.close()
    if status != b"204":
        fail("signal over HTTP: %r" % status)
    e = await s.until_exit()
    if e.get("signal") != 9:
        fail("exit %r" % e)


async def sc_first_binary(sock, sb):
    ws = await connect(sock, "/v1/sandboxes/%s/exec/attach" % sb)
    s = Session(ws)
    await ws.send(b"\x00hello")
    j = await s.until_control("error") if False else await s.recv()
    if not j or j.get("code") != "invalid_argument":
        fail("first binary: %r" % j)
    code = await s.closed_code()
    if code != 1008:
        fail("first binary: close %r" % code)


async def sc_bad_body(sock, sb):
    ws = await connect(sock, "/v1/sandboxes/%s/exec/attach" % sb)
    s = Session(ws)
    await ws.send(json.dumps({"argv": [], "tty": True}))
    j = await s.recv()
    if not j or j.get("code") != "invalid_argument" or "argv" not in j.get("message", ""):
        fail("bad body: %r" % j)
    code = await s.closed_code()
    if code != 1008:
        fail("bad body: close %r" % code)


async def sc_too_large(sock, sb):
    """An argv too large for the shim's request: invalid_argument naming it, close 1008."""
    ws = await connect(sock, "/v1/sandboxes/%s/exec/attach" % sb)
    s = Session(ws)
    await ws.send(json.dumps({"argv": ["echo", "a" * 70000]}))
    j = await s.recv()
    if not j or j.get("code") != "invalid_argument" or \
            not j.get("message", "").startswith("argv and env: too large"):
        fail("too large: %r" % j)
    code = await s.closed_code()
    if code != 1008:
        fail("too large: close %r" % code)


async def sc_output_unread(sock, sb, mb, pidfile):
    """MB megabytes of output to a client that reads nothing until told (a file appears): the
    daemon stops reading the command instead of buffering; then every byte arrives."""
    n = int(mb) << 20
    s = await start(sock, sb, {"argv": ["head", "-c", str(n), "/dev/zero"]})
    with open(pidfile + ".tmp", "w") as f:
        f.write(str(s.pid))
    os.rename(pidfile + ".tmp", pidfile)
    while not os.path.exists(pidfile + ".go"):
        await asyncio.sleep(0.05)
    e = await s.until_exit(120)
    if len(s.out[1]) != n or e["stdout_bytes"] != n:
        fail("got %d bytes (exit %r), want %d" % (len(s.out[1]), e, n))


async def sc_many(sock, sb, pid):
    """Eight attachments (readers) are let in, a ninth gets 409; all see the same output."""
    path = "/v1/sandboxes/%s/processes/%s/attach" % (sb, pid)
    conns = [await connect(sock, path) for _ in range(8)]
    try:
        ws = await connect(sock, path)
        await ws.close()
        fail("a ninth attachment was let in")
    except websockets.exceptions.InvalidStatusCode as e:
        if e.status_code != 409:
            fail("ninth attachment: HTTP %d" % e.status_code)
    sessions = [Session(c) for c in conns]
    for s in sessions:
        await s.until_output(b"tick")
    for c in conns:
        await c.close()


def main():
    sock, sb, name = sys.argv[1:4]
    fn = globals().get("sc_" + name)
    if not fn:
        fail("no scenario " + name)
    asyncio.run(fn(sock, sb, *sys.argv[4:]))


if __name__ == "__main__":
    main()
