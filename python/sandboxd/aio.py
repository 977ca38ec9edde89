"""The asyncio flavour: AsyncSandbox and AsyncProcess on libsbx's asynchronous API, driven by the
running event loop itself: no thread per sandbox or per command.

Each (Client, event loop) pair gets one standalone libsbx async handle (sbx_async_new_standalone,
with a libuv loop of its own): the event loop watches its descriptor (add_reader) and its next
timer (call_later) and then runs what is due (sbx_async_run); libsbx's callbacks resolve asyncio
futures. Calls with no asynchronous form in libsbx (set_timeout, get_host) run the synchronous
call on a worker thread of the Client (AsyncSandbox._blocking); wait_for_port is a loop of
port_request probes on the event loop."""
from __future__ import annotations

import asyncio
import codecs
import ctypes
import io
import itertools
import json
import threading
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, TypeVar, Union

from . import _lib
from .errors import (E_CONFLICT, Conflict, InvalidArgument, SandboxdError, _cleanup_failed,
                     from_err)
from .objects import CommandResult, SandboxInfo, _Pipe, _result
from .args import (Duration, Size, _check, _check_port, _create_request, _exec_args, _exec_opts,
                   _fork_request, _info, _port_body, parse_duration_ms)
from .sandbox import Client, Lease, Sandbox, _renew_seconds, _set_token, default_client
T = TypeVar("T")

# ---- the engine: one standalone libsbx async handle per (Client, event loop) ----

class _Engine:
    """libsbx's async handle on its own client handle, run by one asyncio loop."""

    def __init__(self, client: Client, loop: asyncio.AbstractEventLoop):
        L = _lib.lib()
        if not hasattr(L, "sbx_async_new_standalone"):
            raise SandboxdError("this libsbx has no sbx_async_new_standalone", "unsupported")
        self._loop = weakref.ref(loop)  # the loop owns the engine, not the other way round
        self.c = ctypes.c_void_p()
        self.h = ctypes.c_void_p()
        err = _lib.SbxErr()
        _check(L.sbx_client_new(_lib.cstr(client.hosts or None, "hosts"),
                                ctypes.byref(self.c), ctypes.byref(err)), err)
        _set_token(self.c, client.token)  # (frees self.c when it raises)
        rc = L.sbx_async_new_standalone(self.c, ctypes.byref(self.h), ctypes.byref(err))
        if rc != 0:
            L.sbx_client_free(self.c)
            raise from_err(rc, err)
        self.fd = L.sbx_async_fd(self.h)
        self._timer: Optional[asyncio.TimerHandle] = None
        self._soon = False
        self.closed = False
        loop.add_reader(self.fd, self.run)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        if loop is None:
            raise RuntimeError("the event loop of this sandboxd engine is gone")
        return loop

    def run(self) -> None:
        """Run what is due (callbacks included), then wait for the next timer."""
        self._soon = False
        if self.closed:
            return
        L = _lib.lib()
        L.sbx_async_run(self.h)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        t = L.sbx_async_timeout_ms(self.h)
        if t == 0:
            self.kick()
        elif t > 0:
            self._timer = self.loop.call_later(t / 1000.0, self.run)

    def kick(self) -> None:
        """Run soon (after starting an operation: its first steps are due at once)."""
        if not self._soon and not self.closed:
            self._soon = True
            self.loop.call_soon(self.run)

    def close(self) -> None:
        """Free the handle (what is in flight is called back cancelled) and the client."""
        if self.closed:
            return
        self.closed = True
        loop = self._loop()
        if loop is not None and not loop.is_closed():
            loop.remove_reader(self.fd)
            if self._timer is not None:
                self._timer.cancel()
        L = _lib.lib()
        L.sbx_async_free(self.h)
        L.sbx_client_free(self.c)


def _engine(client: Client) -> _Engine:
    """The running loop's engine for client (made on first use); engines of closed loops go."""
    loop = asyncio.get_running_loop()
    engines = client.__dict__.setdefault("_aio_engines", weakref.WeakKeyDictionary())
    for other, e in list(engines.items()):
        if other.is_closed():
            e.close()
            del engines[other]
    e = engines.get(loop)
    if e is None:
        e = engines[loop] = _Engine(client, loop)
        weakref.finalize(loop, e.close)
    return e


# ---- operations in flight: userdata keys -> what the callback resolves ----

_ops: Dict[int, Tuple[asyncio.Future, _Engine, Callable[..., Any]]] = {}
_streams: Dict[int, "AsyncProcess"] = {}
_keys = itertools.count(1)


def _resolve(key: Optional[int], err: Any, *raw: Any) -> None:
    """A callback: the future of key gets convert(*raw), or the error (err is a pointer). A
    future nobody awaits (cancelled, or its loop closed: sbx_async_free's SBX_E_IO at the
    engine's end) gets nothing: an exception set there would be logged as never retrieved."""
    fut, eng, convert = _ops.pop(key or 0, (None, None, None))
    _streams.pop(key or 0, None)
    if fut is None:
        return
    try:
        if fut.cancelled() or fut.get_loop().is_closed():
            convert(*raw, orphan=eng) if not err else None
        elif err:
            fut.set_exception(from_err(err.contents.code, err.contents))
        else:
            fut.set_result(convert(*raw))
    except Exception as e:  # a closed loop, a bad answer: never an exception into C
        if not fut.done():
            try:
                fut.set_exception(e)
            except RuntimeError:
                pass


def _on_create(ud: Optional[int], sb: Optional[int], err: Any) -> None:
    _resolve(ud, err, sb)


def _on_exec(ud: Optional[int], res: Any, err: Any) -> None:
    _resolve(ud, err, res)


def _on_data(ud: Optional[int], data: Optional[int], n: int, err: Any) -> None:
    _resolve(ud, err, data, n)


def _on_done(ud: Optional[int], err: Any) -> None:
    _resolve(ud, err)


def _on_fork(ud: Optional[int], sbs: Any, n: int, err: Any) -> None:
    _resolve(ud, err, sbs, n)


def _on_port(ud: Optional[int], status: int, body: Optional[int], n: int, err: Any) -> None:
    _resolve(ud, err, status, body, n)


def _on_lease(ud: Optional[int], lease_id: Optional[int], err: Any) -> None:
    _resolve(ud, err, lease_id)


def _on_output(ud: Optional[int], stream: int, data: Any, n: int) -> None:
    p = _streams.get(ud or 0)
    if p is not None:
        p._feed(stream, ctypes.string_at(data, n))


# one C function pointer per callback kind, alive as long as the module
_CREATE = _lib.CREATE_CB(_on_create)
_EXEC = _lib.EXEC_CB(_on_exec)
_DATA = _lib.DATA_CB(_on_data)
_DONE = _lib.DONE_CB(_on_done)
_FORK = _lib.FORK_CB(_on_fork)
_PORT = _lib.PORT_CB(_on_port)
_LEASE = _lib.LEASE_CB(_on_lease)
_OUTPUT = _lib.OUTPUT_CB(_on_output)


def _start(eng: _Engine, convert: Callable[..., Any], call: Callable[[int], int],
           key: Optional[int] = None) -> "asyncio.Future[Any]":
    """Start one operation: call(key) submits it (returning an sbx_code); the future resolves
    with convert(callback arguments)."""
    fut = eng.loop.create_future()
    key = key or next(_keys)
    _ops[key] = (fut, eng, convert)
    rc = call(key)
    if rc != 0:
        _ops.pop(key, None)
        raise from_err(rc, _refusal(eng, rc))
    eng.kick()
    return fut


def _refusal(eng: _Engine, rc: int) -> _lib.SbxErr:
    """Why libsbx refused the call that just returned rc on eng's handle (its message), or an
    empty sbx_err where this libsbx cannot say (no sbx_async_submit_error)."""
    err = _lib.SbxErr()
    L = _lib.lib()
    if hasattr(L, "sbx_async_submit_error") and \
            L.sbx_async_submit_error(eng.h, ctypes.byref(err)) == rc:
        return err
    return _lib.SbxErr()


def _nothing(*_: Any, orphan: Optional[_Engine] = None) -> None:
    return None


def _bytes(data: Optional[int], n: int, orphan: Optional[_Engine] = None) -> bytes:
    return ctypes.string_at(data, n) if data and n else b""


def _end_orphan(eng: _Engine, h: int) -> None:
    """A sandbox nobody awaits any more (its create or fork gave up on it, see _reap): end it
    while the engine runs, free it."""
    L = _lib.lib()
    if not eng.closed and L.sbx_async_terminate(eng.h, h, _DONE, None) == 0:
        eng.kick()
    L.sbx_sandbox_free(h)


# How long a cancelled create or fork goes on (through asyncio.run's end) to end what it makes.
_REAP_S = 30.0
_reapers: "set[asyncio.Task]" = set()  # (the loop holds tasks weakly)


async def _made(fut: "asyncio.Future[T]") -> T:
    """Await a create's or fork's future; cancelled, the request goes on and _reap ends the
    sandboxes it makes (before: a cancel near the loop's end, asyncio.run's at a Ctrl-C
    included, closed the loop before the answer came, and the sandbox ran on, nobody's)."""
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        t = fut.get_loop().create_task(_reap(fut))
        _reapers.add(t)
        t.add_done_callback(_reapers.discard)
        raise


async def _through(fut: asyncio.Future, end: float) -> bool:
    """Wait for fut until the loop's time end, through cancellations (asyncio.run cancels every
    task at its end, then runs the loop until they finish); whether it is done."""
    loop = asyncio.get_running_loop()
    while not fut.done() and loop.time() < end:
        try:
            await asyncio.wait((fut,), timeout=end - loop.time())
        except asyncio.CancelledError:
            pass
    return fut.done()


async def _reap(fut: asyncio.Future) -> None:
    """End and free the sandboxes of a cancelled create or fork once it answers (up to _REAP_S;
    a later answer is ended by _end_orphan if the loop still runs then)."""
    end = asyncio.get_running_loop().time() + _REAP_S
    if not await _through(fut, end):
        fut.cancel()
        return
    if fut.cancelled() or fut.exception() is not None:
        return  # nothing was made
    made = fut.result()
    for sb in made if isinstance(made, list) else [made]:
        eng, h = sb._on()
        t = _start(eng, _nothing, lambda k: _lib.lib().sbx_async_terminate(eng.h, h, _DONE, k))
        if await _through(t, end) and not t.cancelled():
            t.exception()  # (retrieved: a failed terminate is not logged)
        await sb.close()


# ---- processes ----

class _Stream(_Pipe):
    """A command's output as it arrives: blocking reads (threads) and awaited reads (the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self._ev = asyncio.Event()

    def feed(self, data: bytes) -> None:
        super().feed(data)
        self._ev.set()

    def finish(self) -> None:
        super().finish()
        self._ev.set()

    async def read_async(self, n: int) -> bytes:
        while True:
            with self._cv:
                if self._buf or self._eof:
                    out = bytes(self._buf[:n])
                    del self._buf[:n]
                    return out
                self._ev.clear()
            await self._ev.wait()


class AsyncProcess:
    """A running command: ``await p.wait()``; ``await p.read_stdout()`` / ``read_stderr()``
    return what arrives next (b"" or "" at the end)."""

    def __init__(self, text: bool):
        self._raw = (_Stream(), _Stream())
        self._text = text
        self._dec = [codecs.getincrementaldecoder("utf-8")("replace") for _ in range(2)]
        self._got = [0, 0]
        self._done: Optional[asyncio.Future] = None
        self._readers: Optional[Tuple[Any, Any]] = None

    def _feed(self, stream: int, data: bytes) -> None:
        i = 0 if stream == 1 else 1
        self._got[i] += len(data)
        self._raw[i].feed(data)

    def _finish(self, res: Any, orphan: Optional[_Engine] = None) -> CommandResult:
        for s in self._raw:
            s.finish()
        r = _result(res.contents, self._text)
        # a stream's end says how much was written, not what was kept: compare
        r.stdout_truncated = r.stdout_truncated or r.stdout_bytes > self._got[0]
        r.stderr_truncated = r.stderr_truncated or r.stderr_bytes > self._got[1]
        return r

    def _readers_(self) -> Tuple[Any, Any]:
        if self._readers is None:
            bufs = [io.BufferedReader(s) for s in self._raw]
            self._readers = (tuple(io.TextIOWrapper(b, encoding="utf-8", errors="replace")
                                   for b in bufs) if self._text else tuple(bufs))
        return self._readers

    @property
    def stdout(self) -> Any:
        """A blocking stream of the output (for a thread; use read_stdout() from a coroutine)."""
        return self._readers_()[0]

    @property
    def stderr(self) -> Any:
        return self._readers_()[1]

    async def _read(self, i: int, n: int) -> Any:
        data = await self._raw[i].read_async(n)
        if not self._text:
            return data
        return self._dec[i].decode(data, final=not data)

    async def read_stdout(self, n: int = 65536) -> Any:
        return await self._read(0, n)

    async def read_stderr(self, n: int = 65536) -> Any:
        return await self._read(1, n)

    async def wait(self) -> CommandResult:
        assert self._done is not None
        return await asyncio.shield(self._done)


# ---- sandboxes ----

# wait_for_port's probes (client/lib/ports.c): the shortest time one is given, and the daemon's
# answers that mean "not yet" (another probe follows)
_PROBE_MIN_S = 0.1
_PORT_LATER = ("port_unreachable", "port_timeout", "request_timeout", "sandbox_not_running")


class AsyncSandbox:
    """An asyncio sandbox: the calls of Sandbox, as coroutines, on the running loop."""

    def __init__(self, sandbox: Optional[Sandbox] = None, *, client: Optional[Client] = None,
                 sandbox_id: Optional[str] = None, _handle: Optional[int] = None,
                 _engine: Optional[_Engine] = None):
        self._sync = sandbox
        self.client: Client = sandbox.client if sandbox else (client or default_client())
        self.id: str = sandbox.id if sandbox else str(sandbox_id)
        self._handles: Dict[_Engine, int] = {}
        if _handle is not None and _engine is not None:
            self._handles[_engine] = _handle
        # _blocking's calls in flight: their threads, and whether close() came during the call
        self._running: Dict[int, bool] = {}
        self._running_lock = threading.Lock()

    @property
    def sync(self) -> Sandbox:
        """The same sandbox as a (blocking) Sandbox."""
        if self._sync is None:
            self._sync = Sandbox._lazy(self.id, self.client)
        return self._sync

    def _on(self) -> Tuple[_Engine, int]:
        """The running loop's engine and this sandbox's handle on it."""
        eng = _engine(self.client)
        h = self._handles.get(eng)
        if h is None:
            p = ctypes.c_void_p()
            err = _lib.SbxErr()
            _check(_lib.lib().sbx_sandbox_open_lazy(eng.c, _lib.cstr(self.id, "sandbox_id"),
                                                    ctypes.byref(p), ctypes.byref(err)), err)
            h = self._handles[eng] = p.value
        return eng, h

    @classmethod
    async def create(cls, *, client: Optional[Client] = None, **kw: Any) -> "AsyncSandbox":
        """Same arguments as Sandbox.create."""
        client = client or default_client()
        o, keep, extra = _create_request(**kw)
        eng = _engine(client)

        def made(h: Optional[int], orphan: Optional[_Engine] = None) -> Any:
            if orphan is not None:
                return _end_orphan(orphan, h)
            sid = _lib.lib().sbx_sandbox_id(h).decode()
            return cls(client=client, sandbox_id=sid, _handle=h, _engine=eng)

        fut = _start(eng, made, lambda k: _lib.lib().sbx_async_create_with(
            eng.h, ctypes.byref(o), extra, _CREATE, k))
        del keep
        return await _made(fut)

    @classmethod
    async def open(cls, sandbox_id: str, client: Optional[Client] = None) -> "AsyncSandbox":
        """Attach to an existing sandbox (NotFound when there is none)."""
        sb = cls(client=client or default_client(), sandbox_id=sandbox_id)
        await sb.inspect()
        return sb

    # ---- commands ----
    async def exec(self, *argv: str, stdin: Union[bytes, str, None] = None,
                   env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                   timeout: Optional[Duration] = None, shell: bool = False,
                   max_output: Optional[Size] = None, text: bool = False,
                   user: Optional[str] = None) -> AsyncProcess:
        """Start a command (same arguments as Sandbox.exec); its output streams while it runs."""
        a = _exec_args(argv, stdin, env, cwd, timeout, shell, max_output, user)
        eng, h = self._on()
        p = AsyncProcess(text)
        key = next(_keys)
        o, keep = _exec_opts(a, _OUTPUT)
        o.userdata = key
        _streams[key] = p

        def finished(res: Any, orphan: Optional[_Engine] = None) -> CommandResult:
            _streams.pop(key, None)
            return p._finish(res)

        try:
            p._done = _start(eng, finished, lambda k: _lib.lib().sbx_async_exec(
                eng.h, h, ctypes.byref(o), _EXEC, k), key)
        except BaseException:
            _streams.pop(key, None)
            raise
        # (its exception retrieved: p.wait() still raises it, and one nobody waits for is
        # not logged as never retrieved)
        p._done.add_done_callback(lambda f: (_streams.pop(key, None),
                                             [s.finish() for s in p._raw],
                                             f.cancelled() or f.exception()))
        del keep
        return p

    async def run(self, *argv: str, stdin: Union[bytes, str, None] = None,
                  env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
                  timeout: Optional[Duration] = None, shell: bool = False,
                  max_output: Optional[Size] = None, text: bool = True,
                  user: Optional[str] = None) -> CommandResult:
        """Run a command and wait for it (same arguments as Sandbox.run)."""
        a = _exec_args(argv, stdin, env, cwd, timeout, shell, max_output, user)
        eng, h = self._on()
        o, keep = _exec_opts(a, None)
        fut = _start(eng, lambda res, orphan=None: _result(res.contents, text),
                     lambda k: _lib.lib().sbx_async_exec(eng.h, h, ctypes.byref(o), _EXEC, k))
        del keep
        return await fut

    # ---- files ----
    async def write_file(self, path: str, data: Union[bytes, str]) -> None:
        cpath = _lib.cstr(path, "path")
        if isinstance(data, str):
            data = data.encode()
        eng, h = self._on()
        buf = ctypes.create_string_buffer(bytes(data), len(data))  # copied by libsbx
        await _start(eng, _nothing, lambda k: _lib.lib().sbx_async_write_file(
            eng.h, h, cpath, buf, len(data), _DONE, k))

    async def read_file(self, path: str) -> bytes:
        cpath = _lib.cstr(path, "path")
        eng, h = self._on()
        return await _start(eng, _bytes, lambda k: _lib.lib().sbx_async_read_file(
            eng.h, h, cpath, _DATA, k))

    async def upload_dir(self, local_dir: str, remote_dir: str) -> None:
        """Sandbox.upload_dir (the tar is made on the loop)."""
        cdir = _lib.cstr(remote_dir, "remote_dir")
        data = Sandbox._tar(local_dir)
        eng, h = self._on()
        buf = ctypes.create_string_buffer(data, len(data))
        await _start(eng, _nothing, lambda k: _lib.lib().sbx_async_put_archive(
            eng.h, h, cdir, buf, len(data), _DONE, k))

    async def download_dir(self, remote_dir: str, local_dir: str) -> None:
        """Sandbox.download_dir (the tar is unpacked on the loop)."""
        cdir = _lib.cstr(remote_dir, "remote_dir")
        eng, h = self._on()
        data = await _start(eng, _bytes, lambda k: _lib.lib().sbx_async_get_archive(
            eng.h, h, cdir, _DATA, k))
        Sandbox._unpack(data, local_dir)

    # ---- lifecycle ----
    async def fork(self, n: int = 1, **overrides: Any) -> List["AsyncSandbox"]:
        """Sandbox.fork: n copies of this sandbox (the same overrides)."""
        L = _lib.lib()
        o, keep, extra = _fork_request(n, **overrides)
        if extra and not hasattr(L, "sbx_async_fork_with"):
            raise SandboxdError("this libsbx has no sbx_async_fork_with", "unsupported")
        eng, h = self._on()

        def made(sbs: Any, count: int, orphan: Optional[_Engine] = None) -> Any:
            hs = [sbs[i] for i in range(count)]
            if orphan is not None:
                return [_end_orphan(orphan, x) for x in hs]
            return [AsyncSandbox(client=self.client, sandbox_id=L.sbx_sandbox_id(x).decode(),
                                 _handle=x, _engine=eng) for x in hs]

        def call(k: int) -> int:
            if extra:
                return L.sbx_async_fork_with(eng.h, h, ctypes.byref(o), extra, _FORK, k)
            return L.sbx_async_fork(eng.h, h, ctypes.byref(o), _FORK, k)

        fut = _start(eng, made, call)
        del keep
        return await _made(fut)

    async def pause(self) -> Dict[str, Any]:
        """Sandbox.pause on the loop: the sandbox object, paused."""
        eng, h = self._on()
        raw = await _start(eng, _bytes, lambda k: _lib.lib().sbx_async_pause(eng.h, h, _DATA, k))
        return json.loads(raw)

    async def resume(self, node: Optional[str] = None) -> Dict[str, Any]:
        """Sandbox.resume on the loop (here, or on ``node`` of the fleet): the sandbox object,
        running again."""
        if node is not None and (not isinstance(node, str) or not node):
            raise InvalidArgument("node: a node's name", "invalid_argument")
        cnode = _lib.cstr(node, "node")
        eng, h = self._on()
        if node is None:
            call = lambda k: _lib.lib().sbx_async_resume(eng.h, h, _DATA, k)  # noqa: E731
        else:
            call = lambda k: _lib.lib().sbx_async_resume_on(eng.h, h, cnode, _DATA, k)  # noqa: E731
        raw = await _start(eng, _bytes, call)
        return json.loads(raw)

    async def inspect(self) -> SandboxInfo:
        eng, h = self._on()
        raw = await _start(eng, _bytes, lambda k: _lib.lib().sbx_async_inspect(eng.h, h, _DATA, k))
        return _info(json.loads(raw))

    async def port_request(self, port: int, method: str, path: str,
                           body: Union[bytes, str, None] = None,
                           content_type: str = "application/json") -> Tuple[int, bytes]:
        """Sandbox.port_request: (status, body) of one HTTP request to ``port`` (a str
        ``body`` is sent as UTF-8)."""
        _check_port(port)
        body = _port_body(body)
        args = (_lib.cstr(method, "method"), _lib.cstr(path, "path"),
                _lib.cstr(content_type, "content_type"))
        eng, h = self._on()
        buf = ctypes.create_string_buffer(body, len(body)) if body else None
        return await _start(
            eng, lambda st, data, n, orphan=None: (st, _bytes(data, n)),
            lambda k: _lib.lib().sbx_async_port_request(
                eng.h, h, port, *args, buf, len(body or b""), _PORT, k))

    async def _blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args), a call of self.sync with no asynchronous form in libsbx, on a worker thread
        of the Client: Client.close() waits for it. Cancelled, the thread goes on until the
        daemon answers; a close() meanwhile leaves the thread's handle to it, freed at its end
        (before, on a pool of aio's own, close() freed that handle under it and Client.close()
        its client: SIGSEGV once the answer came)."""
        sync = self.sync

        def call() -> T:
            tid = threading.get_ident()
            with self._running_lock:
                self._running[tid] = False
            try:
                return fn(*args)
            finally:
                with self._running_lock:
                    closed = self._running.pop(tid)
                if closed:
                    sync._close_thread()

        return await asyncio.wrap_future(self.client.submit(call))

    async def set_timeout(self, timeout: Any) -> None:
        await self._blocking(self.sync.set_timeout, timeout)

    async def get_host(self, port: int) -> str:
        return await self._blocking(self.sync.get_host, port)

    async def wait_for_port(self, port: int, timeout: Duration = "30s") -> None:
        """Sandbox.wait_for_port on the loop: GET / through the daemon's proxy every 0.1 s until
        one is answered (any status), each probe given the time left; the same errors
        (sbx_sandbox_port_wait's). Cancelled, it stops at once (before, it ran on the thread
        pool: the thread went on waiting up to timeout, held the interpreter's exit that long,
        and an async with block's close freed the handle under it)."""
        _check_port(port)
        limit = parse_duration_ms(timeout, "timeout") / 1000.0
        loop = asyncio.get_running_loop()
        end = loop.time() + limit
        while True:
            try:
                await asyncio.wait_for(self.port_request(port, "GET", ""),
                                       max(end - loop.time(), _PROBE_MIN_S))
                return
            except asyncio.TimeoutError:
                last = "no answer within the time given"
            except SandboxdError as e:
                if e.code not in _PORT_LATER:
                    raise
                last = e.message
            if loop.time() >= end:
                raise Conflict(f"port {port} of sandbox {self.id} did not answer within "
                               f"{limit:.1f} s (last: {last})", "port_wait_timeout", 0,
                               E_CONFLICT)
            await asyncio.sleep(0.1)

    async def terminate(self) -> None:
        """End the sandbox (idempotent)."""
        eng, h = self._on()
        await _start(eng, _nothing, lambda k: _lib.lib().sbx_async_terminate(eng.h, h, _DONE, k))

    async def close(self) -> None:
        """Free the local handles (the sandbox keeps running); those of a set_timeout or
        get_host still running on a thread (cancelled) once it ends."""
        handles, self._handles = self._handles, {}
        for h in handles.values():
            _lib.lib().sbx_sandbox_free(h)
        with self._running_lock:  # (a call starting meanwhile opens a handle of its own)
            for tid in self._running:
                self._running[tid] = True
            if self._sync is not None:
                self._sync.close(_keep=self._running)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        """As Sandbox's: a failed terminate is a note on the block's own exception."""
        try:
            await self.terminate()
        except Exception as e:
            _cleanup_failed(exc, f"terminating sandbox {self.id}", e)
        finally:
            await self.close()

    def __repr__(self) -> str:
        return f"AsyncSandbox({self.id!r})"


async def create_lease(ttl: Any = "60s", client: Optional[Client] = None,
                       renew_every: Optional[float] = None) -> Lease:
    """Lease.create on the loop (sbx_async_lease_create; before, on the thread pool: a
    cancelled one's thread went on, held the program's exit until the daemon answered, and
    Client.close() freed its client under it). A lease a cancelled create_lease still makes
    expires after its ttl."""
    client = client or default_client()
    if renew_every is not None:
        _renew_seconds(renew_every)  # (checked before the lease is made, as by Lease.create)
    ms = parse_duration_ms(ttl, "ttl")
    L = _lib.lib()
    if not hasattr(L, "sbx_async_lease_create"):
        raise SandboxdError("this libsbx has no sbx_async_lease_create", "unsupported")
    eng = _engine(client)
    lid = await _start(eng, lambda p, orphan=None: ctypes.string_at(p).decode("utf-8", "replace"),
                       lambda k: L.sbx_async_lease_create(eng.h, ms, _LEASE, k))
    lease = Lease(lid, client)
    if renew_every is not None:
        lease.keep_alive(renew_every)
    return lease
