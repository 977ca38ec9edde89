"""What a Sandbox hands out: a command's result (CommandResult), a running command and its
output pipes (Process), a file opened in a sandbox (RemoteFile) and the sandbox object's main
fields (SandboxInfo). Sandbox (sandbox.py) makes them; they only call back into it.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import io
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from . import _lib
from .errors import CommandReason, EndReason, NotFound

if TYPE_CHECKING:
    from .sandbox import Sandbox

@dataclass
class CommandResult:
    """How a command ended. ``exit_code`` is None when it was killed by a signal; ``reason`` is
    a CommandReason. ``stdout``/``stderr`` hold the output kept (bytes, or str with text=True;
    empty for a streamed Process, whose streams had it)."""

    exit_code: Optional[int]
    signal: Optional[int]
    reason: CommandReason
    duration: float
    stdout: Union[bytes, str] = b""
    stderr: Union[bytes, str] = b""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0

    @property
    def returncode(self) -> int:
        """subprocess-style: the exit code, or -signal."""
        return self.exit_code if self.exit_code is not None else -(self.signal or 0)


_REASONS = {m.value.encode(): m for m in CommandReason}


def _result(r: _lib.ExecResult, text: bool) -> CommandResult:
    """A CommandResult from libsbx's sbx_exec_result (read once per field: each read is a call
    into ctypes, on every command)."""
    def buf(p: Any, n: int) -> Union[bytes, str]:
        b = ctypes.string_at(p, n) if n and p else b""
        return b.decode("utf-8", "replace") if text else b

    sig, code = r.signal, r.exit_code
    return CommandResult(
        exit_code=None if sig and code < 0 else code, signal=sig or None,
        reason=_REASONS.get(r.reason, CommandReason.EXITED), duration=r.duration_s,
        stdout=buf(r.stdout_data, r.stdout_len), stderr=buf(r.stderr_data, r.stderr_len),
        stdout_bytes=r.stdout_bytes, stderr_bytes=r.stderr_bytes,
        stdout_truncated=bool(r.stdout_truncated), stderr_truncated=bool(r.stderr_truncated))


class _Pipe(io.RawIOBase):
    """Bytes arriving from a running command: reads block until data or the end."""

    def __init__(self) -> None:
        super().__init__()
        self._buf = bytearray()
        self._eof = False
        self._cv = threading.Condition()

    def readable(self) -> bool:
        return True

    def feed(self, data: bytes) -> None:
        with self._cv:
            self._buf += data
            self._cv.notify_all()

    def finish(self) -> None:
        with self._cv:
            self._eof = True
            self._cv.notify_all()

    def readinto(self, b: Any) -> int:
        with self._cv:
            while not self._buf and not self._eof:
                self._cv.wait()
            n = min(len(b), len(self._buf))
            b[:n] = self._buf[:n]
            del self._buf[:n]
            return n


class Process:
    """A command started by ``Sandbox.exec``. ``stdout`` and ``stderr`` are file objects
    readable while it runs (bytes, or text with text=True); ``wait()`` returns the
    CommandResult (or raises the SandboxdError that ended the request)."""

    def __init__(self, sandbox: "Sandbox", opts_args: Dict[str, Any], text: bool):
        self.sandbox = sandbox
        self._raw = (_Pipe(), _Pipe())
        bufs = [io.BufferedReader(p) for p in self._raw]
        if text:
            self.stdout: Any = io.TextIOWrapper(bufs[0], encoding="utf-8", errors="replace")
            self.stderr: Any = io.TextIOWrapper(bufs[1], encoding="utf-8", errors="replace")
        else:
            self.stdout, self.stderr = bufs
        self._text = text
        self._result: Optional[CommandResult] = None
        self._future = sandbox.client.submit(self._run, opts_args)

    def _run(self, a: Dict[str, Any]) -> CommandResult:
        got = [0, 0]

        def on_output(_ud: Any, stream: int, data: Any, n: int) -> None:
            i = 0 if stream == 1 else 1
            got[i] += n
            self._raw[i].feed(ctypes.string_at(data, n))

        cb = _lib.OUTPUT_CB(on_output)
        try:
            r = self.sandbox._exec_raw(a, cb, self._text)
            # a stream's end says how much was written, not what was kept: compare
            r.stdout_truncated = r.stdout_truncated or r.stdout_bytes > got[0]
            r.stderr_truncated = r.stderr_truncated or r.stderr_bytes > got[1]
            return r
        finally:
            for p in self._raw:
                p.finish()

    @property
    def future(self) -> concurrent.futures.Future:
        return self._future

    def wait(self, timeout: Optional[float] = None) -> CommandResult:
        """Wait for the command to end (``timeout`` seconds at most: TimeoutError after)."""
        if self._result is None:
            self._result = self._future.result(timeout)
        return self._result

    def poll(self) -> Optional[int]:
        """The returncode once it ended, else None."""
        if not self._future.done():
            return None
        return self.wait().returncode

    @property
    def returncode(self) -> Optional[int]:
        return self.poll()


class RemoteFile(io.BytesIO):
    """A file in a sandbox opened by ``Sandbox.open``: read modes hold the file's bytes (read
    at open), write and append modes send what was written when closed."""

    def __init__(self, sandbox: "Sandbox", path: str, mode: str):
        self._sandbox, self._path, self._mode = sandbox, path, mode
        initial = b""
        if "r" in mode or "a" in mode:
            try:
                initial = sandbox.read_file(path)
            except NotFound:
                if "r" in mode:
                    raise
        super().__init__(initial)
        if "a" in mode:
            self.seek(0, io.SEEK_END)

    def writable(self) -> bool:
        return any(c in self._mode for c in "wa+")

    def write(self, b: Any) -> int:
        if not self.writable():
            raise io.UnsupportedOperation("not writable")
        return super().write(b)

    def close(self) -> None:
        if not self.closed and self.writable():
            self._sandbox.write_file(self._path, self.getvalue())
        super().close()


@dataclass
class SandboxInfo:
    """``Sandbox.inspect()``: the sandbox object's main fields, and all of it in ``raw``."""

    id: str
    state: str
    usage: Dict[str, Any]
    cost_usd: float
    limits: Dict[str, Any]
    labels: Dict[str, str]
    end_reason: Optional[EndReason]
    end_message: Optional[str]
    raw: Dict[str, Any] = field(repr=False, default_factory=dict)
