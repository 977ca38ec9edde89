"""The SDK's object lifetimes against a real daemon (tests/integration/test_python.sh
`sdk_lifecycle`): a KeyboardInterrupt right after libsbx made a sandbox (a Ctrl-C during create
or fork is raised there) ends what it made, a child of os.fork() talks over connections and
worker threads of its own, a lease's renew_every is checked as durations are, exec through
a closed Client raises SandboxdError ("closed") as every other call does, and a terminate that
fails on leaving a with block that raised does not replace the block's exception."""
import math
import os
import signal
import time

import pytest

import sandboxd
from sandboxd import InvalidArgument, Lease, Sandbox, SandboxdError, _lib

SMALL = dict(cpu=0.25, memory="64Mi")


def running(client):
    return {s["id"] for s in client.list() if s["state"] != "ended"}


def interrupted_after(monkeypatch, name):
    """libsbx's ``name`` does its work, then a KeyboardInterrupt comes: where Python raises the
    one of a Ctrl-C pressed during the call (at the first check after the call returns)."""
    L = _lib.lib()
    real = getattr(L, name)

    def call(*args):
        rc = real(*args)
        assert rc == 0
        raise KeyboardInterrupt

    monkeypatch.setattr(L, name, call)


def test_a_keyboard_interrupt_right_after_create_or_fork_ends_what_they_made(monkeypatch, client):
    before = running(client)
    with monkeypatch.context() as m:
        interrupted_after(m, "sbx_sandbox_create")
        with pytest.raises(KeyboardInterrupt):
            with Sandbox.create(client=client, **SMALL):
                pass
    assert running(client) == before, "a sandbox made by the interrupted create runs on"
    with Sandbox.create(client=client, **SMALL) as base:
        with monkeypatch.context() as m:
            interrupted_after(m, "sbx_sandbox_fork")
            with pytest.raises(KeyboardInterrupt):
                base.fork(2)
        assert running(client) == before | {base.id}, "forks of the interrupted fork run on"


def _child(sb):
    """In the forked child: commands on the parent's sandbox (while the parent runs its own),
    a streamed exec (a worker thread) and a sandbox of its own. Its exit status says."""
    for i in range(30):
        r = sb.run("echo", f"child {i}")
        if r.stdout != f"child {i}\n":
            return 2
    if sb.exec("echo", "streamed").wait(timeout=20).exit_code != 0:
        return 3
    with Sandbox.create(**SMALL) as own:
        if own.run("echo", "own").stdout != "own\n":
            return 4
    return 0


def test_a_forked_child_has_connections_and_threads_of_its_own():
    """multiprocessing forks on Linux: the child inherited the parent's kept-alive connections
    (answers crossed between the processes: "exec answer without a reason", a create "without
    a valid id", or the other's answer) and a worker pool whose threads it does not have (an
    exec never started)."""
    with Sandbox.create(**SMALL) as sb:
        sb.exec("true").wait()  # the parent's connection is open, an idle worker thread waits
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(sb)
            except BaseException as e:  # (never back into pytest in the child)
                os.write(2, f"child: {type(e).__name__}: {e}\n".encode())
            finally:
                os._exit(code)
        try:
            for i in range(30):
                assert sb.run("echo", f"parent {i}").stdout == f"parent {i}\n"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    break
                time.sleep(0.05)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child did not finish within 60 s")
        except BaseException:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
            raise
        assert os.waitstatus_to_exitcode(status) == 0
        assert sb.run("echo", "after").stdout == "after\n"


def test_lease_renew_every_is_checked_as_durations_are():
    with Lease.create("30s", renew_every="50ms") as lease:  # was a TypeError in the thread
        time.sleep(0.4)
        assert lease.renewing and lease.error is None
    for bad in (0, -1, math.nan, math.inf, "0s", "soon", True):
        with pytest.raises(InvalidArgument, match="renew_every"):
            Lease.create("30s", renew_every=bad)  # -1 and NaN renewed without pause
    lease = Lease.create("30s")
    try:
        with pytest.raises(InvalidArgument, match="renew_every"):
            lease.keep_alive(-0.5)
        assert not lease.renewing
    finally:
        lease.delete()


def test_exec_through_a_closed_client_raises_closed():
    c = sandboxd.Client()
    sb = Sandbox.create(client=c, **SMALL)
    c.close()
    try:
        with pytest.raises(SandboxdError) as e:  # was RuntimeError from its worker pool
            sb.exec("true")
        assert e.value.code == "closed"
    finally:
        with sandboxd.Client() as c2:
            Sandbox.open(sb.id, client=c2).terminate()


def test_a_failed_terminate_on_leaving_a_with_block_does_not_replace_its_exception(monkeypatch,
                                                                                  client):
    """The block's own exception goes on (it is what went wrong first) with the terminate's
    failure as a note; after a block that ended normally the terminate's failure is raised.
    Sandbox and AsyncSandbox alike, and a Lease's delete."""
    import asyncio
    from sandboxd.aio import AsyncSandbox
    L = _lib.lib()
    made = []
    try:
        sb = Sandbox.create(client=client, **SMALL)
        made.append(sb.id)
        with monkeypatch.context() as m:
            m.setattr(L, "sbx_sandbox_terminate", lambda *a: 8)  # SBX_E_SERVER
            with pytest.raises(ValueError, match="the block's own") as ei:
                with sb:
                    raise ValueError("the block's own")
            notes = getattr(ei.value, "__notes__", [])
            assert any(f"terminating sandbox {sb.id} on leaving the with block failed too"
                       in n for n in notes), notes
            sb = Sandbox.open(sb.id, client=client)
            with pytest.raises(SandboxdError):
                with sb:
                    pass

        async def in_async():
            asb = await AsyncSandbox.create(client=client, **SMALL)
            made.append(asb.id)
            with monkeypatch.context() as m:
                m.setattr(L, "sbx_async_terminate", lambda *a: 8)
                with pytest.raises(KeyError) as ei:
                    async with asb:
                        raise KeyError("the async block's own")
            notes = getattr(ei.value, "__notes__", [])
            assert any(f"terminating sandbox {asb.id} on leaving the with block" in n
                       for n in notes), notes
        asyncio.run(in_async())
        lease = Lease.create("60s", client=client)
        with monkeypatch.context() as m:
            m.setattr(L, "sbx_lease_delete", lambda *a: 8)
            with pytest.raises(ValueError) as ei:
                with lease:
                    raise ValueError("the lease block's own")
        notes = getattr(ei.value, "__notes__", [])
        assert any(f"deleting lease {lease.id} on leaving the with block" in n
                   for n in notes), notes
        lease.delete()
    finally:
        for sid in made:
            Sandbox.open(sid, client=client).terminate()
