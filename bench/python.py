#!/usr/bin/env python3
"""bench/python.py: the Python SDK's create -> exec -> terminate (Sandbox, and AsyncSandbox on one
event loop) next to the same three libsbx calls made directly (ctypes, no SDK layer) and the
same cycle from C (bench/lat.c, $SBX_BENCH_LAT), interleaved in the same run, 128 AsyncSandbox
episodes at once (threads seen), and POST /run_code of a trivial Python program at 1, 16 and 128
concurrent clients, beside the same program run directly (the floor, SBX_BENCH_FLOOR) and in a
fresh bubblewrap or crun sandbox (the peers: SBX_BENCH_BWRAP and SBX_BENCH_CRUN, each the JSON
argument list of a command that runs it; "{i}" numbers a crun container). Prints one JSON object
per measurement (name, n, p50_ms, p99_ms, and rps for the rows at 16 and 128). Needs SBX_HOST
(the daemon), SANDBOXD_SF_URL (its --sandboxfusion-listen URL) and SANDBOXD_LIBSBX. Run by
bench/python.sh."""
import asyncio
import concurrent.futures
import ctypes
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

import sandboxd
from sandboxd import _lib


def stats(name, ms, extra=None):
    ms = sorted(ms)
    out = {"name": name, "n": len(ms), "p50_ms": round(ms[len(ms) // 2], 3),
           "p99_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.99))], 3)}
    out.update(extra or {})
    print(json.dumps(out), flush=True)


CPU = 0.5  # the cycles' shape: bench/python.sh's warm pool (apart from /run_code's)


def sdk_cycle():
    t = time.perf_counter()
    sb = sandboxd.Sandbox.create(cpu=CPU)
    sb.run("true")
    sb.terminate()
    sb.close()
    return (time.perf_counter() - t) * 1000


async def aio_cycle():
    t = time.perf_counter()
    sb = await sandboxd.AsyncSandbox.create(cpu=CPU)
    await sb.run("true")
    await sb.terminate()
    await sb.close()
    return (time.perf_counter() - t) * 1000


async def aio_episodes(n):
    """n episodes at once (create, run, terminate): wall seconds and the most threads seen."""
    peak = [threading.active_count()]

    async def one(i):
        async with await sandboxd.AsyncSandbox.create(cpu=0.01, memory="16Mi") as sb:
            peak[0] = max(peak[0], threading.active_count(), len(os.listdir("/proc/self/task")))
            assert (await sb.run("echo", str(i))).stdout == f"{i}\n"

    t = time.perf_counter()
    await asyncio.gather(*[one(i) for i in range(n)])
    return time.perf_counter() - t, peak[0]


def c_cycle():
    """The same cycle from C (bench/lat.c: curl on the socket, no libsbx), one warm-up + one."""
    out = subprocess.run([os.environ["SBX_BENCH_LAT"], "cycle", "c", "1",
                          os.environ["SBX_HOST"].removeprefix("unix:"), json.dumps({"cpu": CPU})],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out.splitlines()[0])["p50_ms"]


def libsbx_cycle(client):
    L = _lib.lib()
    err = _lib.SbxErr()
    t = time.perf_counter()
    o = _lib.CreateOpts()
    L.sbx_create_opts_init(ctypes.byref(o))
    o.cpu = CPU
    h = ctypes.c_void_p()
    assert L.sbx_sandbox_create(client, ctypes.byref(o), ctypes.byref(h), ctypes.byref(err)) == 0
    e = _lib.ExecOpts()
    L.sbx_exec_opts_init(ctypes.byref(e))
    argv = (ctypes.c_char_p * 2)(b"true", None)
    e.argv = ctypes.cast(argv, ctypes.POINTER(ctypes.c_char_p))
    r = _lib.ExecResult()
    assert L.sbx_sandbox_exec(h, ctypes.byref(e), ctypes.byref(r), ctypes.byref(err)) == 0
    L.sbx_exec_result_free(ctypes.byref(r))
    assert L.sbx_sandbox_terminate(h, ctypes.byref(err)) == 0
    L.sbx_sandbox_free(h)
    return (time.perf_counter() - t) * 1000


def run_code(url):
    body = json.dumps({"code": "print(1)", "language": "python"}).encode()
    req = urllib.request.Request(url + "/run_code", data=body, headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as resp:
        out = json.load(resp)
    assert out["status"] == "Success", out
    return (time.perf_counter() - t) * 1000


# The floor's program: SBX_BENCH_FLOOR (a JSON argument list: the sandbox image's python3, which
# the peers run too), else this interpreter
FLOOR = json.loads(os.environ.get("SBX_BENCH_FLOOR") or "[]") or [
    sys.executable if os.path.isabs(sys.executable) else "python3", "-c", "print(1)"]


def floor():
    """The floor: python3 -c 'print(1)' run directly (what /run_code print(1) does inside)."""
    t = time.perf_counter()
    subprocess.run(FLOOR, stdout=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000


def peers():
    """The peers that can run here: (name, a function that runs the floor's program in a fresh
    sandbox of it and returns its milliseconds), each missing one said loudly."""
    out, seq = [], itertools.count()
    for name in ("bwrap", "crun"):
        argv = json.loads(os.environ.get(f"SBX_BENCH_{name.upper()}") or "[]")
        if not argv:
            print(f"!!! bench: {name} is not installed or cannot run here: its rows are SKIPPED",
                  file=sys.stderr, flush=True)
            continue

        def run(argv=argv):
            i = str(next(seq))
            t = time.perf_counter()
            subprocess.run([a.replace("{i}", i) for a in argv], stdout=subprocess.DEVNULL, check=True)
            return (time.perf_counter() - t) * 1000
        out.append((name, run))
    return out


def rate(fn, conc, total):
    t = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(conc) as ex:
        ms = list(ex.map(lambda _: fn(), range(total)))
    return ms, total / (time.perf_counter() - t)


def main():
    n = int(os.environ.get("SBX_BENCH_N", "50"))
    url = os.environ["SANDBOXD_SF_URL"]
    client = sandboxd.default_client().handle()
    sdk, raw, aio, c = [], [], [], []
    loop = asyncio.new_event_loop()
    for _ in range(n):  # interleaved: all four see the same machine load
        c.append(c_cycle())
        sdk.append(sdk_cycle())
        raw.append(libsbx_cycle(client))
        aio.append(loop.run_until_complete(aio_cycle()))
    p50 = lambda v: sorted(v)[len(v) // 2]
    stats("c.cycle", c)
    stats("python.libsbx.cycle", raw, {"p50_vs_c": round(p50(raw) / p50(c), 2)})
    stats("python.sdk.cycle", sdk, {"p50_vs_c": round(p50(sdk) / p50(c), 2),
                                    "p50_vs_libsbx": round(p50(sdk) / p50(raw), 2)})
    stats("python.aio.cycle", aio, {"p50_vs_c": round(p50(aio) / p50(c), 2),
                                    "p50_vs_libsbx": round(p50(aio) / p50(raw), 2)})
    base = threading.active_count()
    secs, peak = loop.run_until_complete(aio_episodes(128))
    print(json.dumps({"name": "python.aio.episodes128", "seconds": round(secs, 2),
                      "threads_before": base, "threads_peak": peak}), flush=True)
    loop.close()
    sf, fl, others = [], [], peers()
    pl = {name: [] for name, _ in others}
    for _ in range(n):  # interleaved with the floor and the peers
        sf.append(run_code(url))
        fl.append(floor())
        for name, fn in others:
            pl[name].append(fn())
    stats("floor.python_print1", fl)
    vs = lambda v, w, key: {key: round(p50(v) / p50(w), 2)}
    c1 = vs(sf, fl, "p50_vs_floor")
    for name, _ in others:
        stats(f"peer.{name}.python_print1.c1", pl[name], vs(pl[name], fl, "p50_vs_floor"))
        c1.update(vs(sf, pl[name], f"p50_vs_{name}"))
    stats("sandboxfusion.run_code.c1", sf, c1)
    cores = os.cpu_count() or 1
    for conc in (16, 128):
        total = max(n, conc * 2)
        _, f1 = rate(floor, cores, total)  # the machine's floor: one python start per core
        ms, rps = rate(lambda: run_code(url), conc, total)
        peer_ms, peer_rps = {}, {}
        for name, fn in others:  # the same count at the same concurrency, one at a time
            peer_ms[name], peer_rps[name] = rate(fn, conc, total)
        _, f2 = rate(floor, cores, total)
        fr = (f1 + f2) / 2
        for name, _ in others:
            stats(f"peer.{name}.python_print1.c{conc}", peer_ms[name],
                  {"rps": round(peer_rps[name], 2), "floor_rps": round(fr, 2),
                   "of_floor": round(peer_rps[name] / fr, 2)})
        extra = {"rps": round(rps, 2), "floor_rps": round(fr, 2), "of_floor": round(rps / fr, 2)}
        extra.update({f"vs_{name}": round(rps / r, 2) for name, r in peer_rps.items()})
        stats(f"sandboxfusion.run_code.c{conc}", ms, extra)

if __name__ == "__main__":
    sys.exit(main())
