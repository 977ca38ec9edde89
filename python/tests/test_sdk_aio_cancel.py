"""AsyncSandbox under cancellation and Ctrl-C (tests/integration/test_python.sh `sdk_aio_cancel`):
asyncio.wait_for and Task.cancel of every kind of call raise at once and leave the AsyncSandbox
usable, with nothing printed ("Future exception was never retrieved" and the like) and nothing
left in flight; a create or fork cancelled as the loop ends (asyncio.run's end, a Ctrl-C
included) still ends the sandboxes it makes; a Ctrl-C while asyncio.run awaits a long run()
ends the program at once with KeyboardInterrupt; many calls on one engine, half of them
cancelled, give the others their own answers; a call cancelled while a daemon is slow to answer
(LateDaemon, a stand-in on a Unix socket) holds nothing up and has nothing freed under it. The
daemon's shim waits while $SBX_AIO_HOLD exists: a create or fork stays in flight as long as a
case needs. The scenarios that watch stderr run in a child Python (what it prints at its exit
counts too)."""
import asyncio
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import sandboxd
from sandboxd import AsyncSandbox, create_lease

SMALL = dict(cpu=0.25, memory="64Mi")
HOLD = os.environ["SBX_AIO_HOLD"]


def child(code, *args, env=None):
    """Start a child Python running code (dedented) with args; Python's own SIGINT handler."""
    code = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n" + \
        textwrap.dedent(code)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env or os.environ)


def finish(p, timeout=30):
    """The child's exit within timeout, and the rest of its stdout and stderr (read from the
    pipes' own buffers: communicate() would drop what a readline() buffered ahead; the children
    write too little to fill a pipe)."""
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        pytest.fail(f"the child still runs after {timeout} s: stdout {p.stdout.read()!r}, "
                    f"stderr {p.stderr.read()!r}")
    return p.stdout.read(), p.stderr.read()


def stop(p, sb=None):
    """A test's end: its child killed if it still runs, its sandbox (if any) ended and freed."""
    if p.poll() is None:
        p.kill()
        p.wait()
    if sb is not None:
        sb.terminate()
        sb.close()


def listed(label):
    return [s["state"] for s in sandboxd.Client().list(label)]


def wait_listed(label, ok, what, limit=30):
    end = time.monotonic() + limit
    while not ok(listed(label)):
        assert time.monotonic() < end, f"{what}: {listed(label)}"
        time.sleep(0.05)


def end_all(label):
    for s in sandboxd.Client().list(label):
        if s["state"] != "ended":
            sb = sandboxd.Sandbox.open(s["id"])
            sb.terminate()
            sb.close()


@pytest.fixture
def hold():
    """Creates and forks wait in the shim while the file exists (removed after the case)."""
    open(HOLD, "w").close()
    yield
    if os.path.exists(HOLD):
        os.unlink(HOLD)


CALLS = r"""
import asyncio, gc, time
import sandboxd
from sandboxd import AsyncSandbox, aio

SMALL = dict(cpu=0.25, memory="64Mi")

async def prompt(what, aw, cancel_after=None):
    t0 = time.monotonic()
    try:
        if cancel_after is None:
            await asyncio.wait_for(aw, 0.3)
        else:
            t = asyncio.ensure_future(aw)
            await asyncio.sleep(cancel_after)
            t.cancel()
            await t
    except (asyncio.TimeoutError, asyncio.CancelledError):
        took = time.monotonic() - t0
        assert took < 1.0, f"{what}: {took:.2f} s"
    else:
        raise AssertionError(f"{what}: not cancelled")

async def usable(sb, i):
    assert (await sb.run("echo", str(i))).stdout == f"{i}\n"

def idle(eng):
    return (len(aio._ops), len(aio._streams), sandboxd._lib.lib().sbx_async_pending(eng.h))

async def main():
    sb = await AsyncSandbox.create(**SMALL)
    try:
        await sb.write_file("/tmp/big", b"x" * (8 << 20))
        await prompt("wait_for run", sb.run("sleep 5", shell=True)); await usable(sb, 1)
        await prompt("cancel run", sb.run("sleep 5", shell=True), 0.2); await usable(sb, 2)
        p = await sb.exec("sleep", "5")
        await prompt("wait_for exec's wait", p.wait()); await usable(sb, 3)
        await prompt("cancel read_stdout", p.read_stdout(), 0.2); await usable(sb, 4)
        await prompt("cancel read_file", sb.read_file("/tmp/big"), 0); await usable(sb, 5)
        await prompt("cancel write_file", sb.write_file("/tmp/w", b"y" * (8 << 20)), 0)
        await usable(sb, 6)
        await prompt("cancel inspect", sb.inspect(), 0); await usable(sb, 7)
        await prompt("cancel fork", sb.fork(1, labels={"aio": "calls-fork"}), 0.01)
        await usable(sb, 8)
        gone = await sb.exec("sleep", "1000")  # its wait is never awaited, and it fails
    finally:
        await sb.terminate()
    eng = aio._engine(sb.client)
    for _ in range(100):  # the late answers come and go
        if idle(eng) == (0, 0, 0):
            break
        await asyncio.sleep(0.05)
    assert idle(eng) == (0, 0, 0), idle(eng)
    await sb.close()
    return sb.id

async def left_running():
    sb = await AsyncSandbox.create(**SMALL)
    await sb.exec("sleep", "1000")  # in flight when the loop closes
    return sb.id

sid = asyncio.run(main())
sid2 = asyncio.run(left_running())

async def end(sid):
    sb = AsyncSandbox(sandbox_id=sid)
    await sb.terminate()
    await sb.close()

asyncio.run(end(sid2))  # the next loop frees the last one's engine
gc.collect()
assert (len(aio._ops), len(aio._streams)) == (0, 0), (aio._ops, aio._streams)
print("done", sid, sid2, flush=True)
"""


def test_every_call_cancels_at_once_quietly_and_the_sandbox_still_works():
    """wait_for and cancel of run, exec's wait and read, the file calls, inspect, fork:
    each raises within a second and the next call works; late answers are dropped with nothing
    printed (an exec whose wait nobody awaits failed later: "Future exception was never
    retrieved"), nothing stays in flight, and an exec still in flight when asyncio.run ends
    neither prints nor stays registered after the next loop frees its engine."""
    p = child(CALLS)
    out, err = finish(p, 90)
    assert p.returncode == 0 and out.startswith("done "), f"stdout {out!r}, stderr {err!r}"
    assert err == "", f"the child printed: {err}"
    wait_listed("aio=calls-fork", lambda s: s and all(x == "ended" for x in s),
                "the cancelled fork's sandbox")


CREATE_AT_END = r"""
import asyncio, sys, time
from sandboxd import AsyncSandbox, create_lease

async def main():
    sb = None
    if sys.argv[1] == "fork":
        sb = await AsyncSandbox.create(cpu=0.25, memory="64Mi")
        print(sb.id, flush=True)
        sys.stdin.readline()  # the shim is held now
        call = sb.fork(2, labels={"aio": "end-fork"})
    else:
        call = AsyncSandbox.create(cpu=0.25, memory="64Mi", labels={"aio": "end-create"})
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(call, 0.3)
    except asyncio.TimeoutError:
        print("timeout", round(time.monotonic() - t0, 3), flush=True)
    if sb is not None:
        await sb.terminate()
        await sb.close()

asyncio.run(main())
print("exit", flush=True)
"""


@pytest.mark.parametrize("what", ["create", "fork"])
def test_a_create_or_fork_cancelled_as_asyncio_run_ends_ends_its_sandboxes(what, hold):
    """wait_for(create or fork, 0.3) as main's last step, its shim held: TimeoutError at once;
    asyncio.run's end waits for the answer and ends what it made (before: the loop closed
    first and the sandboxes ran on, nobody's)."""
    label = f"aio=end-{what}"
    if what == "fork":
        os.unlink(HOLD)
    p = subprocess.Popen([sys.executable, "-c", CREATE_AT_END, what], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=os.environ)
    try:
        if what == "fork":
            parent = p.stdout.readline().strip()
            assert parent.startswith("sb-"), p.stderr.read()
            open(HOLD, "w").close()
            p.stdin.write("go\n")
            p.stdin.flush()
        line = p.stdout.readline()
        assert line.startswith("timeout "), f"{line!r} {p.stderr.read() if not line else ''}"
        assert float(line.split()[1]) < 1.0, line
        wait_listed(label, lambda s: len(s) == (2 if what == "fork" else 1),
                    f"the {what} reached the daemon")
        os.unlink(HOLD)
        out, err = finish(p)
        assert p.returncode == 0 and out == "exit\n", f"stdout {out!r}, stderr {err!r}"
        assert err == "", err
        wait_listed(label, lambda s: all(x == "ended" for x in s),
                    f"the cancelled {what}'s sandboxes ended", 10)
    finally:
        stop(p)
        end_all(label)


CTRL_C = r"""
import asyncio, sys, time
from sandboxd import AsyncSandbox, create_lease

async def main():
    if sys.argv[1] == "create":
        print("creating", flush=True)
        await AsyncSandbox.create(cpu=0.25, memory="64Mi", labels={"aio": sys.argv[2]})
        return
    sb = await AsyncSandbox.create(cpu=0.25, memory="64Mi")
    print(sb.id, flush=True)

    async def body():
        cmd = "touch /tmp/started; exec sleep 1000"
        if sys.argv[1].startswith("exec"):
            p = await sb.exec("sh", "-c", cmd)
            await p.wait()
        else:
            await sb.run(cmd, shell=True)
    try:
        if sys.argv[1].endswith("with"):
            async with sb:
                await body()
        else:
            await body()
    except asyncio.CancelledError:
        print("cancelled", time.monotonic(), flush=True)
        raise

asyncio.run(main())
"""


def noise(err):
    """What stderr holds besides the KeyboardInterrupt's traceback."""
    bad = ("never retrieved", "InvalidStateError", "Exception ignored", "closed",
           "Task was destroyed", "Error in atexit")
    return [ln for ln in err.splitlines() if any(b in ln for b in bad)]


@pytest.mark.parametrize("mode", ["run", "run-with", "exec-with"])
def test_ctrl_c_in_asyncio_run_ends_the_program_at_once(mode):
    """SIGINT while asyncio.run(main()) awaits run("sleep 1000") (or an exec's wait): main is
    cancelled and the program ends within a second with KeyboardInterrupt, nothing else
    printed; the command goes on in the sandbox, as for any client gone, and an async with
    block ends the sandbox."""
    p = child(CTRL_C, mode)
    sb = None
    try:
        sid = p.stdout.readline().strip()
        assert sid.startswith("sb-"), p.stderr.read()
        sb = sandboxd.Sandbox.open(sid)
        end = time.monotonic() + 30
        while True:
            try:
                sb.read_file("/tmp/started")
                break
            except sandboxd.NotFound:
                assert time.monotonic() < end, "the child's command never started"
                time.sleep(0.05)
        time.sleep(0.3)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = finish(p, 10)
        took = time.monotonic() - sent
        assert out.startswith("cancelled "), f"stdout {out!r}, stderr {err!r}"
        assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, (p.returncode, err)
        assert took < 2.0 and float(out.split()[1]) - sent < 1.0, took
        assert noise(err) == [], err
        if mode.endswith("with"):
            assert sb.inspect().state == "ended", "the async with block did not end the sandbox"
        else:
            ps = sb.run("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done",
                        shell=True).stdout
            assert "sleep 1000" in ps, "the cancelled run's command no longer runs"
    finally:
        stop(p, sb)


@pytest.mark.parametrize("twice", [False, True])
def test_ctrl_c_in_a_create_ends_the_sandbox_it_makes(hold, twice):
    """SIGINT while asyncio.run(main()) awaits a create (its shim held): the program waits for
    the create's answer, ends the sandbox, then raises KeyboardInterrupt. A second SIGINT
    while it waits ends the program at once (the sandbox is then left to its idle timeout)."""
    label = f"ctrl-c-create-{int(twice) + 1}"
    p = child(CTRL_C, "create", label)
    try:
        assert p.stdout.readline() == "creating\n", p.stderr.read()
        wait_listed(f"aio={label}", lambda s: s == ["starting"], "the create is held")
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        assert p.poll() is None, "the program did not wait for the create"
        if twice:
            p.send_signal(signal.SIGINT)
            out, err = finish(p, 5)
            assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, err
            return
        os.unlink(HOLD)
        out, err = finish(p, 30)
        assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, (p.returncode, err)
        assert noise(err) == [], err
        wait_listed(f"aio={label}", lambda s: s == ["ended"], "the sandbox ended", 10)
    finally:
        stop(p)
        if os.path.exists(HOLD):
            os.unlink(HOLD)
        wait_listed(f"aio={label}", lambda s: "starting" not in s, "the create landed")
        end_all(f"aio={label}")


def test_many_calls_on_one_engine_half_cancelled():
    """40 runs at once on two sandboxes of one loop: the even ones cancelled (wait_for 0.2 s)
    and followed by a run each that is in flight when the cancelled one's late answer comes;
    every run still gets its own output, and both sandboxes work after."""

    async def one(sb, i):
        if i % 2 == 1:
            return (await sb.run(f"sleep 1; echo {i}", shell=True)).stdout
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(sb.run(f"sleep 0.5; echo {i}", shell=True), 0.2)
        return (await sb.run(f"sleep 0.6; echo again {i}", shell=True)).stdout

    async def main():
        sbs = [await AsyncSandbox.create(**SMALL) for _ in range(2)]
        try:
            t0 = time.monotonic()
            got = await asyncio.gather(*[one(sbs[i % 4 // 2], i) for i in range(40)])
            took = time.monotonic() - t0
            after = [(await sb.run("echo", "after")).stdout for sb in sbs]
            return got, took, after
        finally:
            for sb in sbs:
                await sb.terminate()
                await sb.close()

    got, took, after = asyncio.run(main())
    assert got == [f"again {i}\n" if i % 2 == 0 else f"{i}\n" for i in range(40)], got
    assert took < 3.0, f"{took:.2f} s"
    assert after == ["after\n"] * 2


PORT_WAIT = r"""
import asyncio, sys, time
from sandboxd import AsyncSandbox, create_lease

async def main():
    sb = await AsyncSandbox.create(cpu=0.25, memory="64Mi", ports=[8000])  # nothing listens
    print(sb.id, flush=True)
    if sys.argv[1] == "with":
        async with sb:
            await sb.wait_for_port(8000, timeout="60s")
        return
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(sb.wait_for_port(8000, timeout="60s"), 0.5)
    except asyncio.TimeoutError:
        print("timeout", round(time.monotonic() - t0, 3), flush=True)
    await sb.terminate()
    await sb.close()

asyncio.run(main())
print("exit", flush=True)
"""


def test_wait_for_port_cancelled_stops_at_once():
    """wait_for(wait_for_port(timeout=60s), 0.5) on a port nothing listens on: TimeoutError
    at once, and the program exits at once, quietly (before, the wait ran on a thread that went
    on for the 60 s and held the interpreter's exit)."""
    p = child(PORT_WAIT, "bare")
    try:
        assert p.stdout.readline().startswith("sb-"), p.stderr.read()
        line = p.stdout.readline()
        assert line.startswith("timeout ") and float(line.split()[1]) < 1.0, line
        t0 = time.monotonic()
        out, err = finish(p, 20)
        assert time.monotonic() - t0 < 5, "the exit waited for the wait"
        assert p.returncode == 0 and out == "exit\n" and err == "", (p.returncode, out, err)
    finally:
        stop(p)


def test_ctrl_c_in_wait_for_port_in_an_async_with_block():
    """SIGINT during wait_for_port in an async with block: KeyboardInterrupt at once, the
    sandbox ended (before, the block's close freed the handle under the pool thread's wait: the
    interpreter died of SIGSEGV, or its exit waited for the 60 s)."""
    p = child(PORT_WAIT, "with")
    sb = None
    try:
        sid = p.stdout.readline().strip()
        assert sid.startswith("sb-"), p.stderr.read()
        sb = sandboxd.Sandbox.open(sid)
        time.sleep(1)
        p.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        out, err = finish(p, 20)
        assert time.monotonic() - t0 < 2, "the exit waited for the wait"
        assert p.returncode == -signal.SIGINT and "KeyboardInterrupt" in err, (p.returncode, err)
        assert noise(err) == [], err
        assert sb.inspect().state == "ended"
    finally:
        stop(p, sb)


def test_async_wait_for_port_errors():
    """The errors of Sandbox.wait_for_port: nothing listening raises Conflict
    port_wait_timeout within the timeout (last reason named), a port not opened NotFound."""

    async def main():
        async with await AsyncSandbox.create(ports=[8000], **SMALL) as sb:
            t0 = time.monotonic()
            with pytest.raises(sandboxd.Conflict) as e:
                await sb.wait_for_port(8000, timeout=1)
            took = time.monotonic() - t0
            with pytest.raises(sandboxd.NotFound) as nf:
                await sb.wait_for_port(8001, timeout=5)
            return e.value, took, nf.value

    e, took, nf = asyncio.run(main())
    assert e.code == "port_wait_timeout" and "within 1.0 s (last: " in e.message, e
    assert 1.0 <= took < 3.0, took
    assert nf.code == "port_not_open", nf


class LateDaemon:
    """A stand-in daemon on a Unix socket: each request is answered (200, JSON) DELAY s after it
    came, so a call cancelled meanwhile has its request still in flight when the answer comes."""
    DELAY = 3.0

    def __init__(self, path):
        self.path, self.seen = path, []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(path)
        self.sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:  # closed: the case is over
                return
            threading.Thread(target=self._answer, args=(c,), daemon=True).start()

    def _answer(self, c):
        with c:
            data = b""
            while b"\r\n\r\n" not in data:
                got = c.recv(65536)
                if not got:
                    return
                data += got
            line = data.split(b"\r\n", 1)[0].decode()
            self.seen.append(line)
            time.sleep(self.DELAY)
            body = (b'[{"port":8000,"url":"/v1/sandboxes/sb-late/ports/8000/"}]'
                    if "/ports" in line else b'{"id":"lease-late"}' if "/leases" in line
                    else b"{}")
            try:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                          b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            except OSError:  # the caller is gone
                pass

    def close(self):
        self.sock.close()
        os.unlink(self.path)


@pytest.fixture
def late(tmp_path):
    d = LateDaemon(str(tmp_path / "late.sock"))
    yield d
    d.close()


LATE = r"""
import asyncio, sys, time
import sandboxd
from sandboxd import AsyncSandbox, create_lease

what, then, path = sys.argv[1:4]
client = sandboxd.Client("unix:" + path)

async def main():
    sb = AsyncSandbox(client=client, sandbox_id="sb-late")
    call = {"get_host": lambda: sb.get_host(8000), "set_timeout": lambda: sb.set_timeout(60),
            "create_lease": lambda: create_lease("60s", client)}[what]()
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(call, 1.0)
    except asyncio.TimeoutError:
        print("timeout", round(time.monotonic() - t0, 3), flush=True)
    await sb.close()  # (as at an async with block's end)
    return sb

sb = asyncio.run(main())
if then == "client":
    client.close()
print("closed", time.monotonic(), flush=True)
if what != "create_lease":
    time.sleep(3.5)  # the answer comes meanwhile
    print("handles", len(sb._sync._handles), flush=True)
"""


def late_child(what, then, late):
    """Run LATE: its call is cancelled after 1 s, the daemon answering at 3 s; the child's
    stdout lines (after "timeout"), the time it took from there to its end, and when that was.
    Freed memory is overwritten (glibc's MALLOC_PERTURB_, without its per-thread cache, which
    would keep a freed handle's fields): a handle freed under a thread crashes it when it goes
    on with it (the sanitized pass's ASan reports it)."""
    env = dict(os.environ, MALLOC_PERTURB_="165", GLIBC_TUNABLES="glibc.malloc.tcache_count=0")
    p = child(LATE, what, then, late.path, env=env)
    try:
        line = p.stdout.readline()
        t0 = time.monotonic()
        assert line.startswith("timeout "), f"{line!r} {p.stderr.read() if not line else ''}"
        assert late.seen, "the request did not reach the daemon"
        out, err = finish(p, 30)
        assert p.returncode == 0 and err == "", (p.returncode, out, err)
        return out.split("\n"), time.monotonic() - t0, t0
    finally:
        stop(p)


def test_create_lease_cancelled_leaves_at_once(late):
    """wait_for(create_lease, 1) while the daemon is slow, then Client.close(): the program
    ends at once (before, the call ran on a thread that held the exit until the answer came,
    its client freed under it by Client.close())."""
    out, took, _ = late_child("create_lease", "client", late)
    assert out[0].startswith("closed ") and took < 1.5, (out, took)


def test_create_lease_on_the_loop():
    """create_lease with renew_every: a Lease that renews, whose delete ends its sandboxes."""

    async def main():
        lease = await create_lease("2s", renew_every=0.3)
        sb = await AsyncSandbox.create(lease=lease, **SMALL)
        return lease, sb

    lease, sb = asyncio.run(main())
    try:
        assert lease.id and lease.renewing
        assert sb.sync.inspect().raw["lease"] == lease.id
        time.sleep(2.5)
        assert sb.sync.inspect().state == "running", "the lease was not renewed"
        lease.delete()
        assert not lease.renewing
        end = time.monotonic() + 10
        while sb.sync.inspect().state != "ended":
            assert time.monotonic() < end, "the lease's delete did not end its sandbox"
            time.sleep(0.05)
    finally:
        sb.sync.terminate()
        sb.sync.close()


@pytest.mark.parametrize("what", ["get_host", "set_timeout"])
@pytest.mark.parametrize("then", ["sandbox", "client"])
def test_a_cancelled_blocking_call_keeps_its_handles(late, what, then):
    """wait_for(get_host or set_timeout, 1) while the daemon is slow (they have no asynchronous
    form: a worker thread waits for the answer), then the AsyncSandbox's close (an async with
    block's end) or Client.close(): nothing is freed under the thread, which gets its answer and
    frees the handles it kept (before: the close freed the sandbox's handle or the thread's
    client under it and the answer crashed the interpreter: SIGSEGV). Client.close() waits for
    the call, as for its other worker threads."""
    out, took, t0 = late_child(what, then, late)
    assert out[0].startswith("closed ") and out[1] == "handles 0", out
    if then == "client":  # (the child's clock is this one's: CLOCK_MONOTONIC)
        assert float(out[0].split()[1]) - t0 > 1.0, "Client.close() did not wait for the call"


def test_blocking_calls_answer_and_free_their_handles():
    """set_timeout and get_host (on the Client's worker threads) answer; close() frees every
    handle once nothing runs, the sync Sandbox still works after."""

    async def main():
        sb = await AsyncSandbox.create(ports=[8000], **SMALL)
        try:
            await sb.set_timeout("20m")
            url = await sb.get_host(8000)
            await sb.close()
            left = len(sb.sync._handles)
            return sb, url, left, (await sb.inspect()).state
        finally:
            await sb.terminate()
            await sb.close()

    sb, url, left, state = asyncio.run(main())
    assert url.endswith(f"/v1/sandboxes/{sb.id}/ports/8000/"), url
    assert (left, state) == (0, "running")
