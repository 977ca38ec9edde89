"""Sandbox.fork and AsyncSandbox.fork with the create fields libsbx sends as extra JSON
(sbx_sandbox_fork_with, sbx_async_fork_with): on_idle, ports, volumes and pausable, named and
checked as Sandbox.create names and checks them; what the daemon's fork refuses raised with its
message (docs/API.md "Additions: warm pools and forks"). And an AsyncSandbox call that libsbx
refuses before sending it: the exception carries libsbx's message (sbx_async_submit_error), as
the synchronous call's does."""
import asyncio
import os

import pytest

import sandboxd
from sandboxd import AsyncSandbox, InvalidArgument, NotFound, Sandbox

SMALL = dict(cpu=0.5, memory="256Mi")
SERVER = "python3 -m http.server 8000 --bind 127.0.0.1 </dev/null >/dev/null 2>&1 &"


def _need(name):
    if not hasattr(sandboxd._lib.lib(), name):
        if os.environ.get("CI") == "true":
            pytest.fail(f"libsbx has no {name} (CI may not skip)")
        pytest.skip(f"SKIP (prerequisite missing): this libsbx has no {name}")


def _end(sbs):
    for f in sbs:
        f.terminate()
        f.close()


def test_fork_of_an_on_idle_pause_sandbox_with_ports():
    """A sandbox made with on_idle="pause" forks with on_idle="end" (its forks cannot pause when
    idle); ports= opens the forks' port; pausable=False makes them plain sandboxes."""
    _need("sbx_sandbox_fork_with")
    with Sandbox.create(on_idle="pause", **SMALL) as sb:
        sb.write_file("/workspace/state", b"base")
        with pytest.raises(InvalidArgument, match='pass "on_idle": "end"'):
            sb.fork()
        forks = sb.fork(2, on_idle="end", ports=[8000], labels={"role": "fork"})
        try:
            for f in forks:
                raw = f.inspect().raw
                assert raw["forked_from"] == sb.id and raw["labels"] == {"role": "fork"}
                assert raw["pause"]["on_idle"] == "end"  # pausable, as the source is
                assert f.read_file("/workspace/state") == b"base"
            forks[0].run("sh", "-c", SERVER)
            forks[0].wait_for_port(8000, "20s")
            status, body = forks[0].port_request(8000, "GET", "/")
            assert status == 200 and b"Directory listing" in body
        finally:
            _end(forks)
        plain = sb.fork(1, on_idle="end", pausable=False)
        try:
            assert "pause" not in plain[0].inspect().raw
        finally:
            _end(plain)


def test_fork_refusals_keep_the_daemons_message():
    """What the daemon's fork refuses stays refused, raised with the daemon's message: on_idle
    "pause", an entrypoint, a volume that does not exist; a bad value is refused by the SDK's
    own checks, as at create."""
    _need("sbx_sandbox_fork_with")
    with Sandbox.create(**SMALL) as sb:
        with pytest.raises(InvalidArgument, match="a fork cannot pause when idle") as e:
            sb.fork(on_idle="pause")
        assert e.value.http_status == 400 and e.value.code == "invalid_argument"
        with pytest.raises(InvalidArgument, match="entrypoint: a fork starts none"):
            sb.fork(entrypoint=True)
        with pytest.raises(NotFound, match="no-such-volume"):
            sb.fork(volumes=[("no-such-volume", "/cache", True)])
        with pytest.raises(InvalidArgument, match="ports"):
            sb.fork(ports=8000)
        with pytest.raises(InvalidArgument, match="pausable"):
            sb.fork(pausable="yes")
        with pytest.raises(TypeError, match="runtime"):
            sb.fork(runtime="gvisor")
        assert [s["id"] for s in sandboxd.Client().list() if s["state"] != "ended"] == [sb.id]


def test_async_fork_takes_the_same_fields():
    _need("sbx_async_fork_with")

    async def main():
        sb = await AsyncSandbox.create(**SMALL)
        try:
            await sb.write_file("/workspace/state", "base")
            forks = await sb.fork(1, pausable=True, volumes=[], ports=[8000])
            try:
                raw = (await forks[0].inspect()).raw
                assert raw["pause"]["on_idle"] == "end" and raw["volumes"] == []
                assert await forks[0].read_file("/workspace/state") == b"base"
                await forks[0].run("sh", "-c", SERVER)
                await forks[0].wait_for_port(8000, "20s")
                assert (await forks[0].port_request(8000, "GET", "/"))[0] == 200
            finally:
                for f in forks:
                    await f.terminate()
                    await f.close()
            with pytest.raises(InvalidArgument, match="a fork cannot pause when idle"):
                await sb.fork(on_idle="pause")
            with pytest.raises(InvalidArgument, match="entrypoint: a fork starts none"):
                await sb.fork(entrypoint=["sleep", "1"])
        finally:
            await sb.terminate()
            await sb.close()
    asyncio.run(main())


def test_async_refusal_before_sending_keeps_libsbx_message():
    """libsbx refuses these before any request (a fork of more than 256, an idempotency key
    with a newline): the AsyncSandbox call raises the class and message the synchronous call
    raises, not a bare "libsbx error N"."""
    _need("sbx_async_submit_error")
    sid = "sb-0123456789abcdef"  # never asked for: libsbx refuses before sending
    with pytest.raises(InvalidArgument) as sync:
        Sandbox._lazy(sid, sandboxd.Client()).fork(300)
    assert str(sync.value.message) == "fork count must be in [1, 256], not 300"
    with pytest.raises(InvalidArgument) as sync_create:
        Sandbox.create(idempotency_key="a\nb", **SMALL)

    async def main():
        with pytest.raises(InvalidArgument) as e:
            await AsyncSandbox(sandbox_id=sid).fork(300)
        assert e.value.message == sync.value.message
        assert e.value.code == sync.value.code and e.value.http_status == 0
        with pytest.raises(InvalidArgument) as e:
            await AsyncSandbox.create(idempotency_key="a\nb", **SMALL)
        assert e.value.message == sync_create.value.message
        assert "control characters" in e.value.message
        # an accepted call after a refused one: its own outcome, not the refusal
        with pytest.raises(NotFound):
            await AsyncSandbox(sandbox_id=sid).inspect()
    asyncio.run(main())
