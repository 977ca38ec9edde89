"""The synchronous SDK: Client, Sandbox, Egress and Lease (what a Sandbox hands out, its
processes, results and files, lives in objects.py; the argument checks in args.py).

Every call goes through libsbx (ctypes), so endpoint selection, placement and error mapping
are the C library's. libsbx's client handle is not thread-safe, so each thread gets its own
(``Client`` keeps one per thread) and a ``Sandbox`` opens a handle per thread that uses it. A
child made by os.fork() starts over with handles and worker threads of its own.
"""
from __future__ import annotations

import concurrent.futures
import ctypes
import io
import json
import os
import signal
import tarfile
import threading
from typing import Any, Callable, Collection, Dict, List, Mapping, Optional, Sequence, Union

from . import _lib
from .errors import (E_INTERRUPTED, InvalidArgument, NotFound, SandboxdError, Unauthorized,
                     _cleanup_failed)
from .objects import CommandResult, Process, RemoteFile, SandboxInfo, _result
from .args import (Duration, Egress, Size, _call, _check, _check_port, _create_request,
                   _data_member, _exec_args, _exec_opts, _fork_request, _info, _port_body,
                   parse_duration_ms, parse_size)  # noqa: F401 (the package takes parse_size here)

# Bumped in a child made by os.fork() (multiprocessing's default on Linux): the libsbx clients
# it inherited share their kept-alive connections with the parent (both processes' answers
# would cross) and the worker threads they hand work to are not in the child. Client and
# Sandbox compare it with the value they were set up under and start over when it differs.
_forks = 0
_fork_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _forks, _fork_lock, _default_lock
    _forks += 1
    _fork_lock = threading.Lock()  # (either could have been held by a thread of the parent)
    _default_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Client:
    """Where the daemon is: ``hosts`` as libsbx takes it (None: $SBX_HOST, else the default
    socket; "unix:/path", a socket path, "http://host:port", or several separated by commas,
    or a fleet "etcd://host:2379/prefix"), and a bearer token for TCP (None: $SBX_TOKEN).
    https:// endpoints are checked against the CA file in $SBX_CA (else the system's)."""

    def __init__(self, hosts: Optional[str] = None, token: Optional[str] = None,
                 max_threads: int = 256):
        self.hosts = hosts
        self.token = token
        self._max_threads = max_threads
        self._closed = False
        self._start()
        self.handle()  # fail early on a bad host list

    def _start(self) -> None:
        """No libsbx clients yet, a new worker pool (also in a child after os.fork(): what
        was inherited is the parent's, left alone there: freeing it could close or shut down
        a connection the parent still uses)."""
        self._local = threading.local()
        self._all: List[ctypes.c_void_p] = []
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self._max_threads,
                                                           thread_name_prefix="sandboxd-exec")
        self._forks = _forks

    def _check_open(self) -> None:
        """SandboxdError ("closed") after close(); in a child after os.fork(), start over."""
        if self._closed:
            raise SandboxdError("this Client is closed", "closed")
        if self._forks != _forks:
            with _fork_lock:
                if self._forks != _forks:
                    self._start()

    def handle(self) -> ctypes.c_void_p:
        """This thread's libsbx client (made on first use)."""
        self._check_open()
        h = getattr(self._local, "h", None)
        if h is not None:
            return h
        h = self._new_handle()
        _lib.watch_interrupts(h)
        self._local.h = h
        with self._lock:
            self._all.append(h)
        return h

    def _new_handle(self) -> ctypes.c_void_p:
        """A libsbx client of this Client's hosts and token, owned by the caller."""
        h = ctypes.c_void_p()
        err = _lib.SbxErr()
        L = _lib.lib()
        _check(L.sbx_client_new(_lib.cstr(self.hosts or None, "hosts"), ctypes.byref(h),
                                ctypes.byref(err)), err)
        _set_token(h, self.token)
        return h

    def info(self) -> Dict[str, Any]:
        """GET /v1/info of the first endpoint."""
        out = ctypes.c_void_p()
        _call(_lib.lib().sbx_client_info, self.handle(), ctypes.byref(out))
        return json.loads(_lib.take_string(out))

    def list(self, label: Optional[str] = None) -> List[Dict[str, Any]]:
        """The sandboxes (running and recently ended) as dicts; ``label`` "k=v" filters."""
        out = ctypes.c_void_p()
        _call(_lib.lib().sbx_client_list, self.handle(), _lib.cstr(label or None, "label"),
              ctypes.byref(out))
        return json.loads(_lib.take_string(out))

    def nodes(self) -> Dict[str, Any]:
        """The fleet: {"prefix", "etcd", "nodes": [{"name", "url", "state", "free", ...}]}."""
        out = ctypes.c_void_p()
        _call(_lib.lib().sbx_client_nodes, self.handle(), ctypes.byref(out))
        return json.loads(_lib.take_string(out))

    def drain(self, node: str, drain: bool = True) -> None:
        """No new sandboxes on ``node`` (running ones finish); ``drain=False`` undoes it."""
        _call(_lib.lib().sbx_node_drain, self.handle(), _lib.cstr(node, "node"),
              1 if drain else 0)

    def submit(self, fn: Callable, *args: Any) -> concurrent.futures.Future:
        self._check_open()
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        """Free the libsbx clients (and their connections) this Client made for the threads
        that called it, once its worker threads (``submit``, ``Sandbox.exec``) have finished:
        it waits for them. Not to be called from one of them, nor while another thread still
        calls this Client or a Sandbox made with it; those calls, and any after, raise
        SandboxdError ("closed"). A Lease's renewing thread has a client of its own, freed when
        it stops. AsyncSandbox's are its event loop's, but for its set_timeout and get_host,
        which run on this Client's worker threads (waited for too). Also as a context manager."""
        self._closed = True
        self._pool.shutdown(wait=True)
        with self._lock:
            hs, self._all = self._all, []
            self._local = threading.local()
        for h in hs:
            _lib.lib().sbx_client_free(h)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _set_token(h: ctypes.c_void_p, token: Optional[str]) -> None:
    """Give the libsbx client h the token (None or "": keep $SBX_TOKEN's). libsbx refuses one
    with a control character (a token file's trailing newline): h is freed and InvalidArgument
    naming ``token`` raised, rather than going on with $SBX_TOKEN or no token."""
    if not token:
        return
    L = _lib.lib()
    try:
        rc = L.sbx_client_set_token(h, _lib.cstr(token, "token"))
        if rc != 0:
            raise InvalidArgument("token: refused by libsbx (a control character, such as a "
                                  "trailing newline?)", "invalid_argument", 0, rc)
    except BaseException:
        L.sbx_client_free(h)
        raise


_default: Optional[Client] = None
_default_lock = threading.Lock()


def default_client() -> Client:
    """The client used when none is given (from $SBX_HOST / $SBX_TOKEN)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


class Lease:
    """A lease: sandboxes created with ``lease=`` end when it is not renewed within its ttl.
    ``with Lease.create("60s", renew_every=20) as lease:`` renews it from a thread until the
    block ends. ``error``: the last failure of that thread's renewals (None when none failed);
    ``renewing``: whether the thread still runs."""

    def __init__(self, lease_id: str, client: Optional[Client] = None):
        self.id = lease_id
        self.client = client or default_client()
        self.error: Optional[SandboxdError] = None
        self._stop: Optional[threading.Event] = None
        self._thread: Optional[threading.Thread] = None

    @property
    def renewing(self) -> bool:
        """Whether a keep_alive thread is renewing the lease (False after stop(), and once a
        renewal found the lease gone or the token refused)."""
        return self._thread is not None and self._thread.is_alive()

    @classmethod
    def create(cls, ttl: Duration = "60s", client: Optional[Client] = None,
               renew_every: Optional[Duration] = None) -> "Lease":
        """A new lease of ``ttl``; ``renew_every`` (seconds or a duration like "20s"; None:
        no renewing) starts keep_alive. A bad ttl or renew_every is InvalidArgument naming it,
        before the lease is made."""
        client = client or default_client()
        if renew_every is not None:
            _renew_seconds(renew_every)
        out = ctypes.c_void_p()
        _call(_lib.lib().sbx_lease_create, client.handle(), parse_duration_ms(ttl, "ttl"),
              ctypes.byref(out))
        lease = cls(_lib.take_string(out), client)
        if renew_every is not None:
            lease.keep_alive(renew_every)
        return lease

    def renew(self, _handle: Optional[ctypes.c_void_p] = None) -> None:
        """Renew now (NotFound when it already expired)."""
        _call(_lib.lib().sbx_lease_renew, _handle or self.client.handle(),
              _lib.cstr(self.id, "lease"))

    def keep_alive(self, every: Duration) -> None:
        """Renew every ``every`` seconds (or a duration like "20s": 0, negative, NaN and
        infinite ones are InvalidArgument naming renew_every) from a background thread until
        ``stop()``. A renewal
        that fails (the daemon restarting or unreachable, a 5xx, a 503) is kept in ``error``
        and tried again, after 0.5 s, then twice as long each time up to ``every``: a short
        outage within the ttl costs nothing. Only NotFound (the lease expired or was deleted:
        its sandboxes are gone) and Unauthorized (a wrong or missing token: trying again cannot
        help) end the thread."""
        every = _renew_seconds(every)
        self.stop()
        self._stop = threading.Event()
        stop = self._stop

        h = self.client._new_handle()  # the thread's own: Client.close() leaves it alone

        def loop() -> None:
            wait, retry = every, 0.0
            try:
                while not stop.wait(wait):
                    if self._renew_for_thread(h):
                        wait, retry = every, 0.0
                    else:
                        retry = min(every, retry * 2 if retry else 0.5)
                        wait = retry
            except (NotFound, Unauthorized):
                pass
            finally:
                _lib.lib().sbx_client_free(h)

        self._thread = threading.Thread(target=loop, daemon=True, name=f"lease-{self.id}")
        self._thread.start()

    def _renew_for_thread(self, h: ctypes.c_void_p) -> bool:
        """keep_alive's renewal: True when it went through, False (kept in ``error``) when it
        failed; NotFound (the lease is gone) and Unauthorized (the token is refused) are kept
        and raised."""
        try:
            self.renew(h)
            return True
        except SandboxdError as e:
            self.error = e
            if isinstance(e, (NotFound, Unauthorized)):
                raise
            return False

    def stop(self) -> None:
        """Stop renewing (its sandboxes then end when the ttl runs out)."""
        if self._stop:
            self._stop.set()
            if self._thread:
                self._thread.join()
        self._stop = self._thread = None

    def delete(self) -> None:
        """Delete the lease now: its sandboxes are terminated."""
        self.stop()
        L = _lib.lib()
        if not hasattr(L, "sbx_lease_delete"):
            raise SandboxdError("this libsbx has no sbx_lease_delete", "unsupported")
        _call(L.sbx_lease_delete, self.client.handle(), _lib.cstr(self.id, "lease"))

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        """Stop renewing and delete the lease (its sandboxes end with it). When the block
        raised, that exception goes on, with a failed delete as a note on it."""
        self.stop()
        if hasattr(_lib.lib(), "sbx_lease_delete"):
            try:
                self.delete()
            except NotFound:
                pass
            except Exception as e:
                _cleanup_failed(exc, f"deleting lease {self.id}", e)

    def __repr__(self) -> str:
        return f"Lease({self.id!r})"


def _end_unowned(handles: List[Optional[int]]) -> None:
    """Sandboxes libsbx made that no Sandbox object came to own (an exception right after the
    call: a KeyboardInterrupt from a Ctrl-C during it is raised there): ended and freed, else
    they would run on, out of the caller's reach, until their timeouts."""
    L = _lib.lib()
    for h in handles:
        if h:
            L.sbx_sandbox_terminate(h, ctypes.byref(_lib.SbxErr()))
            L.sbx_sandbox_free(h)


def _renew_seconds(every: Duration) -> float:
    """Lease renewals' period in seconds, checked as durations are (a string "20s" was a
    TypeError that ended the renewing thread; 0, a negative or NaN renewed without pause)."""
    return parse_duration_ms(every, "renew_every") / 1000.0


class _ClassOrInstance:
    """``Sandbox.open(id)`` attaches to a sandbox; ``sb.open(path, mode)`` opens a file in
    one: the same name, told apart by what it is looked up on."""

    def __init__(self, on_class: str, on_instance: str):
        self.on_class, self.on_instance = on_class, on_instance

    def __get__(self, obj: Any, cls: Any) -> Any:
        if obj is None:
            return getattr(cls, self.on_class)
        return getattr(obj, self.on_instance)


class Sandbox:
    """One sandbox. ``Sandbox.create(...)`` makes one, ``Sandbox.open(id)`` attaches to one;
    as a context manager it is terminated when the block ends."""

    def __init__(self, handle: ctypes.c_void_p, client: Client):
        self.client = client
        self.id: str = _lib.lib().sbx_sandbox_id(handle).decode()
        self._handles: Dict[int, ctypes.c_void_p] = {threading.get_ident(): handle}
        self._lock = threading.Lock()
        self._forks = _forks

    # ---- making and finding ----
    @classmethod
    def create(cls, image: Optional[str] = None, cpu: Optional[float] = None,
               memory: Optional[Size] = None, disk: Optional[Size] = None,
               pids: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
               labels: Optional[Mapping[str, str]] = None,
               idle_timeout: Optional[Duration] = None, timeout: Optional[Duration] = None,
               max_cost: Optional[float] = None, network: Optional[Egress] = None,
               lease: Union["Lease", str, None] = None, idempotency_key: Optional[str] = None,
               profile: Optional[str] = None, client: Optional[Client] = None,
               gpus: Optional[int] = None, ports: Optional[Sequence[int]] = None,
               entrypoint: Union[bool, Sequence[str], None] = None, volumes: Any = None,
               on_idle: Optional[str] = None, isolation: Optional[str] = None,
               pausable: Optional[bool] = None) -> "Sandbox":
        """Create a sandbox and wait until it runs. Sizes are bytes or strings ("2Gi"),
        durations seconds or strings ("5m"), ``max_cost`` US dollars; None keeps the
        daemon's default (0, a duration under 1ms, NaN, infinity or an integer too large for
        its field is InvalidArgument, never "the default"). ``profile="grading"`` makes a grading sandbox (docs/GRPO.md: an
        agent and a grader user; run the grader's commands with ``user="grader"``). Raises
        NodeFull, InvalidArgument, NotFound (lease), ... ``ports=[8000]`` opens inbound ports
        (``get_host``); ``entrypoint=True`` starts the image's Entrypoint + Cmd in the
        background once it runs, ``entrypoint=["python3", "srv.py"]`` that command
        (docs/API.md "Entrypoint"). ``isolation="gvisor"`` runs it under gVisor's runsc,
        "native" under namespaces + seccomp (docs/SECURITY.md); None: the daemon's default.
        ``volumes=[vol.mount("/cache", read_only=True)]`` (or
        ``{"/cache": vol}``, or ``[("pip-cache", "/cache", True)]``) mounts named volumes
        (sandboxd.Volume; Conflict while a writable one is taken). ``pausable=True`` makes a
        sandbox that ``pause()`` saves to disk with its processes (docs/API.md "Pause and
        resume"); ``on_idle="pause"`` (pausable too) pauses it when idle instead of ending it
        ("end", the default); both are refused on nodes that cannot pause (SandboxdError,
        unsupported)."""
        client = client or default_client()
        o, keep, extra = _create_request(image=image, cpu=cpu, memory=memory, disk=disk, pids=pids,
                                         env=env, labels=labels, idle_timeout=idle_timeout,
                                         timeout=timeout, max_cost=max_cost, network=network,
                                         lease=lease, idempotency_key=idempotency_key,
                                         profile=profile, gpus=gpus, ports=ports,
                                         entrypoint=entrypoint, volumes=volumes, on_idle=on_idle,
                                         isolation=isolation, pausable=pausable)
        L = _lib.lib()
        h = ctypes.c_void_p()
        try:
            if extra:
                _call(L.sbx_sandbox_create_with, client.handle(), ctypes.byref(o), extra,
                      ctypes.byref(h))
            else:
                _call(L.sbx_sandbox_create, client.handle(), ctypes.byref(o), ctypes.byref(h))
            return cls(h, client)
        except BaseException:
            _end_unowned([h.value])
            raise
        finally:
            del keep

    @classmethod
    def attach(cls, sandbox_id: str, client: Optional[Client] = None) -> "Sandbox":
        """Attach to an existing sandbox (NotFound when there is none). Also spelled
        ``Sandbox.open(id)``."""
        client = client or default_client()
        h = ctypes.c_void_p()
        _call(_lib.lib().sbx_sandbox_open, client.handle(), _lib.cstr(sandbox_id, "sandbox_id"),
              ctypes.byref(h))
        return cls(h, client)

    @classmethod
    def _lazy(cls, sandbox_id: str, client: Client) -> "Sandbox":
        """A Sandbox for a known id without asking the daemon (sbx_sandbox_open_lazy)."""
        h = ctypes.c_void_p()
        _call(_lib.lib().sbx_sandbox_open_lazy, client.handle(),
              _lib.cstr(sandbox_id, "sandbox_id"), ctypes.byref(h))
        return cls(h, client)

    def _handle(self) -> ctypes.c_void_p:
        if self.client._closed:  # (its handles hold the closed Client's)
            raise SandboxdError("this Sandbox's Client is closed", "closed")
        if self._forks != _forks:  # a child of os.fork(): its handles hold the parent's clients
            with _fork_lock:
                if self._forks != _forks:
                    self._handles, self._lock, self._forks = {}, threading.Lock(), _forks
        tid = threading.get_ident()
        h = self._handles.get(tid)  # (a dict read needs no lock: only this thread adds tid's)
        if h is not None:
            return h
        h = ctypes.c_void_p()  # another thread's handle: no GET for a sandbox already known
        _call(_lib.lib().sbx_sandbox_open_lazy, self.client.handle(),
              _lib.cstr(self.id, "sandbox_id"), ctypes.byref(h))
        with self._lock:
            self._handles[tid] = h
        return h

    # ---- commands ----
    def _exec_raw(self, a: Dict[str, Any], cb: Any, text: bool) -> CommandResult:
        L = _lib.lib()
        o, keep = _exec_opts(a, cb)
        res = _lib.ExecResult()
        err = _lib.SbxErr()
        h = self._handle()
        wfd, old = _lib.interrupt_fd(), -1  # Ctrl-C ends the wait (KeyboardInterrupt, below)
        try:
            if wfd >= 0:  # set inside the try, unset first thing after: never left behind
                old = signal.set_wakeup_fd(wfd, warn_on_full_buffer=False)
                if old != -1:  # the program's own (an event loop's): kept, the call waits
                    signal.set_wakeup_fd(old)
            rc = L.sbx_sandbox_exec(h, ctypes.byref(o), ctypes.byref(res), ctypes.byref(err))
        finally:
            if wfd >= 0:
                signal.set_wakeup_fd(old)
                _lib.drop_interrupts()  # (a SIGINT after the call's end: not for the next call)
        try:
            if rc == E_INTERRUPTED:
                _lib.raise_interrupt()
            _check(rc, err)
            return _result(res, text)
        finally:
            if rc == 0:
                L.sbx_exec_result_free(ctypes.byref(res))
            del keep

    def exec(self, *argv: str, stdin: Union[bytes, str, None] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             timeout: Optional[Duration] = None, shell: bool = False,
             max_output: Optional[Size] = None, text: bool = False,
             user: Optional[str] = None) -> Process:
        """Start a command; its output streams while it runs (``p.stdout``, ``p.stderr``)
        and ``p.wait()`` gives the CommandResult. ``stdin`` is sent whole at the start.
        ``user``: "agent" (the default) or, in a grading sandbox, "grader"."""
        a = _exec_args(argv, stdin, env, cwd, timeout, shell, max_output, user)
        return Process(self, a, text)

    def run(self, *argv: str, stdin: Union[bytes, str, None] = None,
            env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
            timeout: Optional[Duration] = None, shell: bool = False,
            max_output: Optional[Size] = None, text: bool = True,
            user: Optional[str] = None) -> CommandResult:
        """Run a command and wait for it: the CommandResult with its output (str by
        default; text=False for bytes). ``user`` as in exec."""
        a = _exec_args(argv, stdin, env, cwd, timeout, shell, max_output, user)
        return self._exec_raw(a, None, text)

    # ---- files ----
    def write_file(self, path: str, data: Union[bytes, str]) -> None:
        """Write one file (parents made; owned by the sandbox user)."""
        cpath = _lib.cstr(path, "path")
        if isinstance(data, str):
            data = data.encode()
        buf = ctypes.create_string_buffer(bytes(data), len(data))
        _call(_lib.lib().sbx_sandbox_write_file, self._handle(), cpath, buf, len(data))

    def read_file(self, path: str) -> bytes:
        """A file's bytes (NotFound when missing)."""
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        _call(_lib.lib().sbx_sandbox_read_file, self._handle(), _lib.cstr(path, "path"),
              ctypes.byref(out), ctypes.byref(n))
        return _lib.take_bytes(out, n.value)

    def open_file(self, path: str, mode: str = "r", encoding: str = "utf-8") -> Any:
        """A file object for ``path`` in the sandbox: modes r, w, a (and + variants), text by
        default, binary with "b". Writes reach the sandbox when the file is closed."""
        if not mode or mode[0] not in "rwa" or any(c not in "rwab+t" for c in mode):
            raise InvalidArgument(f"open: unsupported mode {mode!r}", "invalid_argument")
        f = RemoteFile(self, path, mode)
        if "b" in mode:
            return f
        return io.TextIOWrapper(f, encoding=encoding, write_through=True)

    @staticmethod
    def _tar(local_dir: str) -> bytes:
        """A local directory's contents as a tar (upload_dir's body)."""
        if not os.path.isdir(local_dir):
            raise InvalidArgument(f"upload_dir: {local_dir} is not a directory", "invalid_argument")
        bio = io.BytesIO()
        with tarfile.open(fileobj=bio, mode="w") as tar:
            for name in sorted(os.listdir(local_dir)):
                tar.add(os.path.join(local_dir, name), arcname=name)
        return bio.getvalue()

    def upload_dir(self, local_dir: str, remote_dir: str) -> None:
        """Copy a local directory's contents into ``remote_dir`` (one tar through libsbx)."""
        cdir = _lib.cstr(remote_dir, "remote_dir")
        data = Sandbox._tar(local_dir)
        buf = ctypes.create_string_buffer(data, len(data))
        _call(_lib.lib().sbx_sandbox_put_archive, self._handle(), cdir, buf, len(data))

    def download_dir(self, remote_dir: str, local_dir: str) -> None:
        """Copy ``remote_dir``'s contents into a local directory (made if missing)."""
        out, n = ctypes.c_void_p(), ctypes.c_size_t()
        _call(_lib.lib().sbx_sandbox_get_archive, self._handle(),
              _lib.cstr(remote_dir, "remote_dir"), ctypes.byref(out), ctypes.byref(n))
        Sandbox._unpack(_lib.take_bytes(out, n.value), local_dir)

    @staticmethod
    def _unpack(data: bytes, local_dir: str) -> None:
        """A tar from the sandbox into local_dir (made if missing), refusing unsafe entries."""
        os.makedirs(local_dir, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(local_dir, filter="data")
                return
            # Python without the filter (Debian 12's 3.11.2): its rules by hand, each entry
            # checked right before it is written, against what the ones before made (a link
            # of the archive's own is followed then, as the filter follows it)
            root = os.path.realpath(local_dir)
            for m in tar.getmembers():
                _data_member(root, m)
                tar.extract(m, local_dir)

    open = _ClassOrInstance("attach", "open_file")

    # ---- lifecycle ----
    def fork(self, n: int = 1, **overrides: Any) -> List["Sandbox"]:
        """``n`` copies of this sandbox: each a new Sandbox whose /workspace and /tmp start as
        copies of this one's, with its settings (``overrides``: create's arguments, checked as
        create checks them, e.g. labels=, ports=, volumes=[] for none of this one's,
        pausable=, on_idle="end"). What the daemon's fork refuses is InvalidArgument with its
        message: on_idle="pause", entrypoint=, and a fork of an on_idle="pause" sandbox
        without on_idle="end" (docs/API.md "Additions: warm pools and forks"). All or
        nothing."""
        L = _lib.lib()
        if not hasattr(L, "sbx_sandbox_fork") or not hasattr(L, "sbx_fork_opts_init"):
            raise SandboxdError("this libsbx has no sbx_sandbox_fork", "unsupported")
        o, keep, extra = _fork_request(n, **overrides)
        if extra and not hasattr(L, "sbx_sandbox_fork_with"):
            raise SandboxdError("this libsbx has no sbx_sandbox_fork_with", "unsupported")
        arr = ctypes.POINTER(ctypes.c_void_p)()
        count = ctypes.c_size_t()
        try:
            if extra:
                _call(L.sbx_sandbox_fork_with, self._handle(), ctypes.byref(o), extra,
                      ctypes.byref(arr), ctypes.byref(count))
            else:
                _call(L.sbx_sandbox_fork, self._handle(), ctypes.byref(o), ctypes.byref(arr),
                      ctypes.byref(count))
            return [Sandbox(ctypes.c_void_p(arr[i]), self.client) for i in range(count.value)]
        except BaseException:
            _end_unowned([arr[i] for i in range(count.value)] if arr else [])
            raise
        finally:
            _lib.free(arr)  # the array only: the handles now belong to the Sandbox objects
            del keep

    def commit(self, name: str, strip_setuid: bool = False) -> Dict[str, Any]:
        """Make image ``name`` ("NAME[:TAG]") of this running sandbox's files: its image's
        layers plus one layer of what it changed, its /workspace and /tmp (POST .../commit).
        The sandbox is frozen for the copy. Returns the image object (with "freeze_ms");
        sandboxes are then created from it with ``image=name``. A setuid/setgid file is
        refused unless ``strip_setuid``."""
        L = _lib.lib()
        if not hasattr(L, "sbx_sandbox_commit"):
            raise SandboxdError("this libsbx has no sbx_sandbox_commit", "unsupported")
        if not isinstance(name, str) or not name:
            raise InvalidArgument("commit: name must be a non-empty string", "invalid_argument")
        out = ctypes.c_void_p()
        _call(L.sbx_sandbox_commit, self._handle(), _lib.cstr(name, "name"),
              1 if strip_setuid else 0, ctypes.byref(out))
        return json.loads(_lib.take_string(out))

    def pause(self) -> Dict[str, Any]:
        """Save this pausable sandbox (created with ``pausable=True``, running no command) to
        the node's disk with its processes, their memory and its files (POST .../pause); it
        then costs disk only. Returns the sandbox object ("state": "paused", "pause": the
        checkpoint's size and times). Conflict: not running, not pausable, commands running."""
        return self._move("sbx_sandbox_pause")

    def resume(self, node: Optional[str] = None) -> Dict[str, Any]:
        """Bring this paused sandbox back with the same id, processes and files (POST
        .../resume): here, or in a fleet on ``node`` (its checkpoint moves there; requests
        for the id reach it there). A resume that fails leaves it paused where it was.
        Returns the sandbox object."""
        if node is None:
            return self._move("sbx_sandbox_resume")
        if not isinstance(node, str) or not node:
            raise InvalidArgument("node: a node's name", "invalid_argument")
        return self._move("sbx_sandbox_resume_on", _lib.cstr(node, "node"))

    def _move(self, fn: str, *args: Any) -> Dict[str, Any]:
        L = _lib.lib()
        if not hasattr(L, fn):
            raise SandboxdError(f"this libsbx has no {fn}", "unsupported")
        out = ctypes.c_void_p()
        _call(getattr(L, fn), self._handle(), *args, ctypes.byref(out))
        return json.loads(_lib.take_string(out))

    def inspect(self) -> SandboxInfo:
        """State, limits, usage, cost and end reason (GET /v1/sandboxes/{id})."""
        out = ctypes.c_void_p()
        _call(_lib.lib().sbx_sandbox_inspect, self._handle(), ctypes.byref(out))
        return _info(json.loads(_lib.take_string(out)))

    def set_timeout(self, timeout: Duration) -> None:
        """The sandbox now lives until ``timeout`` from now."""
        _call(_lib.lib().sbx_sandbox_set_timeout, self._handle(), parse_duration_ms(timeout, "timeout"))

    def get_host(self, port: int) -> str:
        """Open TCP ``port`` of the sandbox (idempotent) and return the daemon's URL that proxies
        HTTP to it (docs/API.md "Ports"); over a Unix socket it is reached through that socket."""
        _check_port(port)
        out = ctypes.c_void_p()
        _call(_lib.lib().sbx_sandbox_port_url, self._handle(), port, ctypes.byref(out))
        return _lib.take_string(out)

    def wait_for_port(self, port: int, timeout: Duration = "30s") -> None:
        """Wait until a server answers HTTP on ``port`` (through the daemon's proxy, any
        status). Raises Conflict (``port_wait_timeout``, with the last reason) when nothing
        answers within ``timeout`` (also when a server accepts but does not answer: it returns
        about then), NotFound when the port is not open."""
        _check_port(port)
        _call(_lib.lib().sbx_sandbox_port_wait, self._handle(), port,
              parse_duration_ms(timeout, "timeout"))

    def port_request(self, port: int, method: str, path: str,
                     body: Union[bytes, str, None] = None,
                     content_type: str = "application/json") -> "tuple[int, bytes]":
        """One HTTP request to the server on ``port`` through libsbx: (status, body). A str
        ``body`` is sent as UTF-8. The daemon's own refusals (port not open, nothing
        listening) raise."""
        _check_port(port)
        body = _port_body(body)
        st, out, n = ctypes.c_long(), ctypes.c_void_p(), ctypes.c_size_t()
        _call(_lib.lib().sbx_sandbox_port_request, self._handle(), port,
              _lib.cstr(method, "method"), _lib.cstr(path, "path"),
              _lib.cstr(content_type, "content_type"), body, len(body or b""), ctypes.byref(st),
              ctypes.byref(out), ctypes.byref(n))
        try:
            return st.value, ctypes.string_at(out.value, n.value) if n.value else b""
        finally:
            _lib.free(out)

    def terminate(self) -> None:
        """End the sandbox (idempotent)."""
        _call(_lib.lib().sbx_sandbox_terminate, self._handle())

    def close(self, _keep: Collection[int] = ()) -> None:
        """Free the local handles (the sandbox keeps running); AsyncSandbox keeps those of the
        threads in _keep (its calls still running there: each frees its own, _close_thread)."""
        with self._lock:
            handles = {t: h for t, h in self._handles.items() if t not in _keep}
            self._handles = {t: h for t, h in self._handles.items() if t in _keep}
        for h in handles.values():
            _lib.lib().sbx_sandbox_free(h)

    def _close_thread(self) -> None:
        """Free the calling thread's handle."""
        with self._lock:
            h = self._handles.pop(threading.get_ident(), None)
        _lib.lib().sbx_sandbox_free(h)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        """Terminate and close. When the block raised, that exception goes on, with a failed
        terminate as a note on it (it does not replace it)."""
        try:
            self.terminate()
        except Exception as e:
            _cleanup_failed(exc, f"terminating sandbox {self.id}", e)
        finally:
            self.close()

    def __repr__(self) -> str:
        return f"Sandbox({self.id!r})"

