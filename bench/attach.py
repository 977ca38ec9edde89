#!/usr/bin/env python3
"""bench/attach.py: the attached process stream (docs/API.md "Processes and attach"): round
trip of one line through `cat` over the WebSocket (write a line, read its echo) next to a
local pipe to `cat`, and stdin throughput (64 MiB into `cat >/dev/null`). Usage: attach.py
SOCKET SANDBOX_ID [N]; prints JSON lines for docs/BENCHMARKS.md."""
import asyncio
import json
import subprocess
import sys
import time

import websockets.client


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))] * 1000


async def attached(sock, sb, argv):
    ws = await websockets.client.unix_connect(sock, "ws://sd/v1/sandboxes/%s/exec/attach" % sb,
                                              max_size=None, ping_interval=None)
    await ws.send(json.dumps({"argv": argv}))
    while True:
        m = await ws.recv()
        if isinstance(m, str) and json.loads(m).get("type") == "start":
            return ws


async def rtt(sock, sb, n):
    ws = await attached(sock, sb, ["cat"])
    times = []
    for i in range(n):
        line = b"line %d\n" % i
        t = time.perf_counter()
        await ws.send(b"\x00" + line)
        got = b""
        while got != line:
            m = await ws.recv()
            if isinstance(m, bytes):
                got += m[1:]
        times.append(time.perf_counter() - t)
    await ws.close()
    return times


def pipe_rtt(n):
    p = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    times = []
    for i in range(n):
        line = b"line %d\n" % i
        t = time.perf_counter()
        p.stdin.write(line)
        got = b""
        while got != line:
            got += p.stdout.read(len(line) - len(got))
        times.append(time.perf_counter() - t)
    p.stdin.close()
    p.wait()
    return times


async def throughput(sock, sb, mib):
    ws = await attached(sock, sb, ["sh", "-c", "cat >/dev/null"])
    chunk = b"\x00" + b"x" * 65536
    t = time.perf_counter()
    for _ in range(mib * 16):
        await ws.send(chunk)
    await ws.send(json.dumps({"type": "eof"}))
    while True:
        m = await ws.recv()
        if isinstance(m, str) and json.loads(m).get("type") == "exit":
            break
    return mib / (time.perf_counter() - t)


def main():
    sock, sb = sys.argv[1:3]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    ws_t = asyncio.run(rtt(sock, sb, n))
    pipe_t = pipe_rtt(n)
    for name, t in (("attached_rtt_ms", ws_t), ("local_pipe_rtt_ms", pipe_t)):
        print(json.dumps({"bench": name, "n": n, "p50": round(pct(t, 0.5), 3),
                          "p99": round(pct(t, 0.99), 3)}))
    print(json.dumps({"bench": "attached_stdin_mib_s",
                      "value": round(asyncio.run(throughput(sock, sb, 64)), 1)}))


if __name__ == "__main__":
    main()
