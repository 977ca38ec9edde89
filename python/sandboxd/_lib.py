"""ctypes declarations of libsbx (client/include/sbx.h) and how the library is found.

The library is looked up in $SANDBOXD_LIBSBX (a path to libsbx.so.0), then next to this
package, then by ctypes.util.find_library("sbx"), then as the plain soname "libsbx.so.0".
"""
from __future__ import annotations

import _signal
import ctypes
import ctypes.util
import os
import signal
import socket
import threading
from typing import Any, Optional

from .errors import InvalidArgument

c_char_p = ctypes.c_char_p
c_void_p = ctypes.c_void_p
c_size_t = ctypes.c_size_t
c_uint64 = ctypes.c_uint64
c_int = ctypes.c_int


class SbxErr(ctypes.Structure):
    _fields_ = [
        ("code", c_int),
        ("http_status", ctypes.c_long),
        ("api_code", ctypes.c_char * 64),
        ("message", ctypes.c_char * 512),
    ]


class CreateOpts(ctypes.Structure):
    _fields_ = [
        ("image", c_char_p),
        ("cpu", ctypes.c_double),
        ("memory", c_uint64),
        ("disk", c_uint64),
        ("pids", ctypes.c_uint),
        ("env", ctypes.POINTER(c_char_p)),
        ("labels", ctypes.POINTER(c_char_p)),
        ("idle_timeout_ms", c_uint64),
        ("timeout_ms", c_uint64),
        ("max_cost_usd", ctypes.c_double),
        ("network", c_char_p),
        ("idempotency_key", c_char_p),
        ("lease_id", c_char_p),
        ("profile", c_char_p),
        ("gpus", ctypes.c_uint),
        ("isolation", c_char_p),
    ]


class ForkOpts(ctypes.Structure):
    _fields_ = [("count", ctypes.c_uint), ("overrides", CreateOpts)]


OUTPUT_CB = ctypes.CFUNCTYPE(None, c_void_p, c_int, ctypes.POINTER(ctypes.c_char), c_size_t)


class ExecOpts(ctypes.Structure):
    _fields_ = [
        ("argv", ctypes.POINTER(c_char_p)),
        ("shell", c_int),
        ("env", ctypes.POINTER(c_char_p)),
        ("cwd", c_char_p),
        ("stdin_data", c_void_p),
        ("stdin_len", c_size_t),
        ("timeout_ms", c_uint64),
        ("max_output", c_uint64),
        ("on_output", OUTPUT_CB),
        ("userdata", c_void_p),
        ("user", c_char_p),
    ]


class ExecResult(ctypes.Structure):
    _fields_ = [
        ("exit_code", c_int),
        ("signal", c_int),
        ("reason", ctypes.c_char * 32),
        ("duration_s", ctypes.c_double),
        ("stdout_data", ctypes.POINTER(ctypes.c_char)),
        ("stdout_len", c_size_t),
        ("stderr_data", ctypes.POINTER(ctypes.c_char)),
        ("stderr_len", c_size_t),
        ("stdout_bytes", c_uint64),
        ("stderr_bytes", c_uint64),
        ("stdout_truncated", c_int),
        ("stderr_truncated", c_int),
    ]


# name -> (restype, argtypes); every sbx_code call returns c_int.
_P = ctypes.POINTER

# libsbx's asynchronous API (client/include/sbx.h "asynchronous API"), driven from asyncio by
# aio.py: the callbacks' types (userdata first, err NULL on success).
CREATE_CB = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, _P(SbxErr))
EXEC_CB = ctypes.CFUNCTYPE(None, c_void_p, _P(ExecResult), _P(SbxErr))
DATA_CB = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_size_t, _P(SbxErr))
DONE_CB = ctypes.CFUNCTYPE(None, c_void_p, _P(SbxErr))
FORK_CB = ctypes.CFUNCTYPE(None, c_void_p, _P(c_void_p), c_size_t, _P(SbxErr))
PORT_CB = ctypes.CFUNCTYPE(None, c_void_p, ctypes.c_long, c_void_p, c_size_t, _P(SbxErr))
LEASE_CB = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, _P(SbxErr))
_ASYNC_SIGNATURES = {
    "sbx_async_new_standalone": (c_int, [c_void_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_async_fd": (c_int, [c_void_p]),
    "sbx_async_timeout_ms": (c_int, [c_void_p]),
    "sbx_async_run": (None, [c_void_p]),
    "sbx_async_free": (None, [c_void_p]),
    "sbx_async_pending": (c_size_t, [c_void_p]),
    "sbx_async_create_with": (c_int, [c_void_p, _P(CreateOpts), c_char_p, CREATE_CB, c_void_p]),
    "sbx_async_exec": (c_int, [c_void_p, c_void_p, _P(ExecOpts), EXEC_CB, c_void_p]),
    "sbx_async_fork": (c_int, [c_void_p, c_void_p, _P(ForkOpts), FORK_CB, c_void_p]),
    "sbx_async_inspect": (c_int, [c_void_p, c_void_p, DATA_CB, c_void_p]),
    "sbx_async_port_request": (c_int, [c_void_p, c_void_p, ctypes.c_uint, c_char_p, c_char_p,
                                       c_char_p, c_void_p, c_size_t, PORT_CB, c_void_p]),
    "sbx_async_write_file": (c_int, [c_void_p, c_void_p, c_char_p, c_void_p, c_size_t, DONE_CB,
                                     c_void_p]),
    "sbx_async_read_file": (c_int, [c_void_p, c_void_p, c_char_p, DATA_CB, c_void_p]),
    "sbx_async_put_archive": (c_int, [c_void_p, c_void_p, c_char_p, c_void_p, c_size_t, DONE_CB,
                                      c_void_p]),
    "sbx_async_get_archive": (c_int, [c_void_p, c_void_p, c_char_p, DATA_CB, c_void_p]),
    "sbx_async_terminate": (c_int, [c_void_p, c_void_p, DONE_CB, c_void_p]),
}
_SIGNATURES = {
    "sbx_code_name": (c_char_p, [c_int]),
    "sbx_parse_size": (c_int, [c_char_p, _P(c_uint64)]),
    "sbx_parse_duration": (c_int, [c_char_p, _P(c_uint64)]),
    "sbx_client_new": (c_int, [c_char_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_client_free": (None, [c_void_p]),
    "sbx_client_set_token": (c_int, [c_void_p, c_char_p]),
    "sbx_client_info": (c_int, [c_void_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_client_list": (c_int, [c_void_p, c_char_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_client_nodes": (c_int, [c_void_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_node_drain": (c_int, [c_void_p, c_char_p, c_int, _P(SbxErr)]),
    "sbx_lease_create": (c_int, [c_void_p, c_uint64, _P(c_void_p), _P(SbxErr)]),
    "sbx_lease_renew": (c_int, [c_void_p, c_char_p, _P(SbxErr)]),
    "sbx_create_opts_init": (None, [_P(CreateOpts)]),
    "sbx_sandbox_create": (c_int, [c_void_p, _P(CreateOpts), _P(c_void_p), _P(SbxErr)]),
    "sbx_sandbox_open": (c_int, [c_void_p, c_char_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_sandbox_open_lazy": (c_int, [c_void_p, c_char_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_sandbox_id": (c_char_p, [c_void_p]),
    "sbx_sandbox_inspect": (c_int, [c_void_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_sandbox_set_timeout": (c_int, [c_void_p, c_uint64, _P(SbxErr)]),
    "sbx_sandbox_port_url": (c_int, [c_void_p, ctypes.c_uint, _P(c_void_p), _P(SbxErr)]),
    # ports and entrypoint: create fields outside sbx_create_opts; the port proxy (client/lib/ports.c)
    "sbx_sandbox_create_with": (c_int, [c_void_p, _P(CreateOpts), c_char_p, _P(c_void_p), _P(SbxErr)]),
    "sbx_sandbox_port_request": (c_int, [c_void_p, ctypes.c_uint, c_char_p, c_char_p, c_char_p,
                                         c_void_p, c_size_t, _P(ctypes.c_long), _P(c_void_p),
                                         _P(c_size_t), _P(SbxErr)]),
    "sbx_sandbox_port_wait": (c_int, [c_void_p, ctypes.c_uint, c_uint64, _P(SbxErr)]),
    "sbx_sandbox_write_file": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, _P(SbxErr)]),
    "sbx_sandbox_read_file": (c_int, [c_void_p, c_char_p, _P(c_void_p), _P(c_size_t), _P(SbxErr)]),
    "sbx_sandbox_put_archive": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, _P(SbxErr)]),
    "sbx_sandbox_get_archive": (c_int, [c_void_p, c_char_p, _P(c_void_p), _P(c_size_t), _P(SbxErr)]),
    "sbx_sandbox_terminate": (c_int, [c_void_p, _P(SbxErr)]),
    "sbx_sandbox_free": (None, [c_void_p]),
    "sbx_exec_opts_init": (None, [_P(ExecOpts)]),
    "sbx_sandbox_exec": (c_int, [c_void_p, _P(ExecOpts), _P(ExecResult), _P(SbxErr)]),
    "sbx_exec_result_free": (None, [_P(ExecResult)]),
}

_VOLUME_SIGNATURES = {
    "sbx_volume_create": [c_void_p, c_char_p, c_uint64, _P(c_void_p), _P(SbxErr)],
    "sbx_volume_list": [c_void_p, _P(c_void_p), _P(SbxErr)],
    "sbx_volume_inspect": [c_void_p, c_char_p, _P(c_void_p), _P(SbxErr)],
    "sbx_volume_remove": [c_void_p, c_char_p, _P(SbxErr)],
}

_lib: Optional[ctypes.CDLL] = None
_libc = ctypes.CDLL(None)
_libc.free.argtypes = [c_void_p]
_libc.free.restype = None
_lock = threading.Lock()


def _candidates() -> list:
    out = []
    env = os.environ.get("SANDBOXD_LIBSBX")
    if env:
        out.append(env)
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(os.path.join(here, "libsbx.so.0"))
    found = ctypes.util.find_library("sbx")
    if found:
        out.append(found)
    out.append("libsbx.so.0")
    return out


def lib() -> ctypes.CDLL:
    """The loaded libsbx, with argument and result types declared (loaded once)."""
    global _lib
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            if path != "libsbx.so.0" and os.sep in path and not os.path.exists(path):
                continue
            try:
                cdll = ctypes.CDLL(path)
                break
            except OSError as e:
                errors.append(f"{path}: {e}")
        else:
            raise OSError("libsbx not found (set SANDBOXD_LIBSBX to libsbx.so.0): " + "; ".join(errors))
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(cdll, name)
            fn.restype = res
            fn.argtypes = args
        if hasattr(cdll, "sbx_lease_delete"):
            cdll.sbx_lease_delete.restype = c_int
            cdll.sbx_lease_delete.argtypes = [c_void_p, c_char_p, _P(SbxErr)]
        if hasattr(cdll, "sbx_sandbox_fork") and hasattr(cdll, "sbx_fork_opts_init"):
            cdll.sbx_fork_opts_init.restype = None
            cdll.sbx_fork_opts_init.argtypes = [_P(ForkOpts)]
            cdll.sbx_sandbox_fork.restype = c_int
            cdll.sbx_sandbox_fork.argtypes = [c_void_p, _P(ForkOpts), _P(_P(c_void_p)),
                                              _P(c_size_t), _P(SbxErr)]
        if hasattr(cdll, "sbx_sandbox_fork_with"):  # fork fields as extra JSON (on_idle, ...)
            cdll.sbx_sandbox_fork_with.restype = c_int
            cdll.sbx_sandbox_fork_with.argtypes = [c_void_p, _P(ForkOpts), c_char_p,
                                                   _P(_P(c_void_p)), _P(c_size_t), _P(SbxErr)]
        if hasattr(cdll, "sbx_async_fork_with"):
            cdll.sbx_async_fork_with.restype = c_int
            cdll.sbx_async_fork_with.argtypes = [c_void_p, c_void_p, _P(ForkOpts), c_char_p,
                                                 FORK_CB, c_void_p]
        if hasattr(cdll, "sbx_async_submit_error"):  # why an async call was refused (aio.py)
            cdll.sbx_async_submit_error.restype = c_int
            cdll.sbx_async_submit_error.argtypes = [c_void_p, _P(SbxErr)]
        if hasattr(cdll, "sbx_async_new_standalone"):  # an older libsbx: aio.py says so
            for name, (res, args) in _ASYNC_SIGNATURES.items():
                fn = getattr(cdll, name)
                fn.restype = res
                fn.argtypes = args
        if hasattr(cdll, "sbx_sandbox_commit"):
            cdll.sbx_sandbox_commit.restype = c_int
            cdll.sbx_sandbox_commit.argtypes = [c_void_p, c_char_p, ctypes.c_uint, _P(c_void_p),
                                                _P(SbxErr)]
        for name in ("sbx_sandbox_pause", "sbx_sandbox_resume"):  # client/lib/pause.c
            if hasattr(cdll, name):
                getattr(cdll, name).restype = c_int
                getattr(cdll, name).argtypes = [c_void_p, _P(c_void_p), _P(SbxErr)]
        if hasattr(cdll, "sbx_sandbox_resume_on"):  # a resume on another node of the fleet
            cdll.sbx_sandbox_resume_on.restype = c_int
            cdll.sbx_sandbox_resume_on.argtypes = [c_void_p, c_char_p, _P(c_void_p), _P(SbxErr)]
        for name in ("sbx_async_pause", "sbx_async_resume"):
            if hasattr(cdll, name):
                getattr(cdll, name).restype = c_int
                getattr(cdll, name).argtypes = [c_void_p, c_void_p, DATA_CB, c_void_p]
        if hasattr(cdll, "sbx_async_lease_create"):  # aio.create_lease
            cdll.sbx_async_lease_create.restype = c_int
            cdll.sbx_async_lease_create.argtypes = [c_void_p, c_uint64, LEASE_CB, c_void_p]
        if hasattr(cdll, "sbx_async_resume_on"):
            cdll.sbx_async_resume_on.restype = c_int
            cdll.sbx_async_resume_on.argtypes = [c_void_p, c_void_p, c_char_p, DATA_CB, c_void_p]
        if hasattr(cdll, "sbx_client_set_interrupt_fd"):  # Ctrl-C during run() (below)
            cdll.sbx_client_set_interrupt_fd.restype = None
            cdll.sbx_client_set_interrupt_fd.argtypes = [c_void_p, c_int, c_int]
        for name, args in _VOLUME_SIGNATURES.items():  # volumes (client/lib/volumes.c)
            if hasattr(cdll, name):
                getattr(cdll, name).restype = c_int
                getattr(cdll, name).argtypes = args
        _lib = cdll
        return cdll


# Ctrl-C during a synchronous run(): Python raises KeyboardInterrupt only once a ctypes call
# returns, and libsbx goes on waiting through the signal. So the main thread's libsbx clients
# watch the read end of a socket pair (sbx_client_set_interrupt_fd) whose write end is the
# interpreter's wakeup fd during run()'s call (Python's signal handler writes the signal's number
# there; Sandbox._exec_raw sets and unsets it), and the call returns SBX_E_INTERRUPTED at a
# SIGINT, one that came between the set and the call too (libsbx counts what the pair holds when
# a call starts: interrupt_fd() empties it first). One pair per process (a child of os.fork()
# makes its own: the parent's would be read by both).
_wake: Optional["tuple[socket.socket, socket.socket]"] = None
_MAIN = threading.main_thread().ident
# (signal.getsignal's enum conversion costs more than the rest of the watch together)
_getsignal = getattr(_signal, "getsignal", signal.getsignal)


def _wake_pair() -> "tuple[socket.socket, socket.socket]":
    global _wake
    if _wake is None:
        _wake = socket.socketpair()
        for s in _wake:
            s.setblocking(False)
    return _wake


def _forget_wake_in_child() -> None:
    """In a child of os.fork(): the parent's pair is closed here (left to the parent)."""
    global _wake
    if _wake is not None:
        for s in _wake:
            s.close()
    _wake = None


os.register_at_fork(after_in_child=_forget_wake_in_child)


def watch_interrupts(h: c_void_p) -> None:
    """A new libsbx client: made in the main thread (where Python runs signal handlers), it
    watches this process's pair for SIGINT (a libsbx without the call: nothing)."""
    L = lib()
    if threading.get_ident() == _MAIN and hasattr(L, "sbx_client_set_interrupt_fd"):
        L.sbx_client_set_interrupt_fd(h, _wake_pair()[0].fileno(), int(signal.SIGINT))


def interrupt_fd() -> int:
    """The wakeup fd for a call a SIGINT may end now: the pair's write end (the pair emptied) in
    the main thread with Python's own SIGINT handler (KeyboardInterrupt); -1 otherwise (a
    handler of the program's, none, or SIGINT ignored: the call waits as before)."""
    if threading.get_ident() != _MAIN or _wake is None or \
            _getsignal(signal.SIGINT) is not signal.default_int_handler:
        return -1
    drop_interrupts()  # what an earlier call left (signals that came as it ended): not for this one
    return _wake[1].fileno()


def drop_interrupts() -> None:
    """Empty the pair: run() calls it after it unsets the wakeup fd, as the bytes of signals that
    came after libsbx's call ended (their KeyboardInterrupt is Python's) are for no call: libsbx
    counts one there when any call of its clients starts."""
    try:
        while _wake is not None and _wake[0].recv(64):
            pass
    except BlockingIOError:
        pass


def raise_interrupt() -> None:
    """A call ended by SIGINT (SBX_E_INTERRUPTED): its KeyboardInterrupt, raised now by the
    pending handler (here, should the handler no longer be Python's own)."""
    ctypes.pythonapi.PyErr_CheckSignals()
    raise KeyboardInterrupt


def take_string(p: c_void_p) -> str:
    """A malloc'd C string returned by libsbx as a Python str (the C buffer is freed)."""
    if not p.value:
        return ""
    try:
        return ctypes.string_at(p.value).decode("utf-8", "replace")
    finally:
        _libc.free(p)


def take_bytes(p: c_void_p, n: int) -> bytes:
    """A malloc'd buffer of n bytes as bytes (freed)."""
    if not p.value:
        return b""
    try:
        return ctypes.string_at(p.value, n)
    finally:
        _libc.free(p)


def free(p) -> None:
    _libc.free(p)


def cstr(v: Any, what: str) -> Optional[bytes]:
    """A str (UTF-8) or bytes as a C string's bytes, None as None. C would cut a string at a NUL
    and send the rest nowhere, so one inside is refused (InvalidArgument naming ``what``)."""
    if v is None:
        return None
    if isinstance(v, str):
        b = v.encode()
    elif isinstance(v, (bytes, bytearray)):
        b = bytes(v)
    else:
        raise InvalidArgument(f"{what}: must be a string", "invalid_argument")
    if b"\0" in b:
        raise InvalidArgument(f"{what}: contains a NUL character", "invalid_argument")
    return b


def strv(items: Any, what: str) -> Optional[ctypes.Array]:
    """A NULL-terminated char* array from an iterable of str or bytes (None for None); each
    goes through cstr (a NUL inside: InvalidArgument naming ``what``)."""
    if items is None:
        return None
    enc = [cstr(s, what) for s in items]
    arr = (c_char_p * (len(enc) + 1))(*enc, None)
    return arr
