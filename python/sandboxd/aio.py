"""The asyncio flavour: AsyncSandbox and AsyncProcess. Each blocking libsbx call runs on a
bounded thread pool (``max_threads``, default 64, or $SANDBOXD_ASYNC_THREADS), so one event
loop can keep hundreds of sandboxes going; a command's completion is awaited without holding
a pool thread."""
from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
from typing import Any, Callable, List, Optional, TypeVar

from .sandbox import (Client, CommandResult, Lease, Process, Sandbox, SandboxInfo,
                      default_client)

T = TypeVar("T")

_pool: Optional[concurrent.futures.ThreadPoolExecutor] = None


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        n = int(os.environ.get("SANDBOXD_ASYNC_THREADS", "64"))
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=n,
                                                      thread_name_prefix="sandboxd-async")
    return _pool


async def _off(fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(fn, *args, **kw))


class AsyncProcess:
    """A running command: ``await p.wait()``; ``await p.read_stdout()`` / ``read_stderr()``
    return what arrives next (b"" or "" at the end)."""

    def __init__(self, proc: Process):
        self._p = proc

    @property
    def stdout(self) -> Any:
        """The blocking stream (use read_stdout() from a coroutine)."""
        return self._p.stdout

    @property
    def stderr(self) -> Any:
        return self._p.stderr

    async def read_stdout(self, n: int = 65536) -> Any:
        return await _off(self._p.stdout.read1 if hasattr(self._p.stdout, "read1")
                          else self._p.stdout.read, n)

    async def read_stderr(self, n: int = 65536) -> Any:
        return await _off(self._p.stderr.read1 if hasattr(self._p.stderr, "read1")
                          else self._p.stderr.read, n)

    async def wait(self) -> CommandResult:
        return await asyncio.wrap_future(self._p.future)


class AsyncSandbox:
    """An asyncio view of a Sandbox: the same calls, as coroutines."""

    def __init__(self, sandbox: Sandbox):
        self.sync = sandbox
        self.id = sandbox.id

    @classmethod
    async def create(cls, **kw: Any) -> "AsyncSandbox":
        """Same arguments as Sandbox.create."""
        return cls(await _off(Sandbox.create, **kw))

    @classmethod
    async def open(cls, sandbox_id: str, client: Optional[Client] = None) -> "AsyncSandbox":
        return cls(await _off(Sandbox.attach, sandbox_id, client))

    async def exec(self, *argv: str, **kw: Any) -> AsyncProcess:
        """Start a command (same arguments as Sandbox.exec)."""
        return AsyncProcess(self.sync.exec(*argv, **kw))

    async def run(self, *argv: str, **kw: Any) -> CommandResult:
        return await _off(self.sync.run, *argv, **kw)

    async def write_file(self, path: str, data: Any) -> None:
        await _off(self.sync.write_file, path, data)

    async def read_file(self, path: str) -> bytes:
        return await _off(self.sync.read_file, path)

    async def upload_dir(self, local_dir: str, remote_dir: str) -> None:
        await _off(self.sync.upload_dir, local_dir, remote_dir)

    async def download_dir(self, remote_dir: str, local_dir: str) -> None:
        await _off(self.sync.download_dir, remote_dir, local_dir)

    async def fork(self, n: int = 1) -> List["AsyncSandbox"]:
        return [AsyncSandbox(s) for s in await _off(self.sync.fork, n)]

    async def inspect(self) -> SandboxInfo:
        return await _off(self.sync.inspect)

    async def set_timeout(self, timeout: Any) -> None:
        await _off(self.sync.set_timeout, timeout)

    async def get_host(self, port: int) -> str:
        return await _off(self.sync.get_host, port)

    async def wait_for_port(self, port: int, timeout: Any = "30s") -> None:
        """Sandbox.wait_for_port off the event loop."""
        await _off(self.sync.wait_for_port, port, timeout)

    async def port_request(self, port: int, method: str, path: str, body: Optional[bytes] = None,
                           content_type: str = "application/json") -> Any:
        return await _off(self.sync.port_request, port, method, path, body, content_type)

    async def terminate(self) -> None:
        await _off(self.sync.terminate)

    async def close(self) -> None:
        self.sync.close()

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self.terminate()
        finally:
            await self.close()

    def __repr__(self) -> str:
        return f"AsyncSandbox({self.id!r})"


async def create_lease(ttl: Any = "60s", client: Optional[Client] = None,
                       renew_every: Optional[float] = None) -> Lease:
    """Lease.create off the event loop."""
    return await _off(Lease.create, ttl, client or default_client(), renew_every)
