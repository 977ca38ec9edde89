"""The SDK's argument checks and conversions (python/sandboxd/sandbox.py's and aio.py's): sizes,
durations and counts checked into what libsbx takes, the ctypes option structs filled from
keyword arguments (Egress, a network policy, is one), libsbx's return codes raised as
exceptions, and the rules for unpacking a downloaded archive."""
from __future__ import annotations

import ctypes
import json
import math
import os
import tarfile
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import _lib
from .errors import EndReason, InvalidArgument, SandboxdError, from_err
from .objects import SandboxInfo
from .volume import volumes_json

Size = Union[int, str]
Duration = Union[int, float, str]


def _check(rc: int, err: _lib.SbxErr) -> None:
    if rc != 0:
        raise from_err(rc, err)


def _call(fn: Callable, *args: Any) -> None:
    err = _lib.SbxErr()
    _check(fn(*args, ctypes.byref(err)), err)


def _check_port(port: Any) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidArgument("port: must be an integer 1..65535", "invalid_argument")


def _port_body(body: Union[bytes, str, None]) -> Optional[bytes]:
    """port_request's body as bytes: str is sent as UTF-8 (as write_file and stdin take it)."""
    if body is None:
        return None
    if isinstance(body, str):
        return body.encode()
    if isinstance(body, (bytes, bytearray, memoryview)):
        return bytes(body)
    raise InvalidArgument("port_request: body must be bytes or str", "invalid_argument")


def _extra_create_fields(ports: Any, entrypoint: Any, volumes: Any = None,
                         on_idle: Optional[str] = None, pausable: Optional[bool] = None
                         ) -> Optional[str]:
    """The create fields sbx_create_opts has no member for, as JSON (None: none)."""
    extra: Dict[str, Any] = {}
    vols = volumes_json(volumes)
    if vols is not None:  # [] too: none (a fork's: none of its source's volumes)
        extra["volumes"] = vols
    if on_idle is not None:
        extra["on_idle"] = on_idle
    if pausable is not None:
        extra["pausable"] = pausable  # the daemon checks the type (400 names the field)
    if ports is not None:
        if not isinstance(ports, (list, tuple)) or not all(
                isinstance(p, int) and not isinstance(p, bool) for p in ports):
            raise InvalidArgument("ports: must be a list of integers 1..65535", "invalid_argument")
        extra["ports"] = list(ports)
    if entrypoint is not None and entrypoint is not False:
        if entrypoint is not True and (not isinstance(entrypoint, (list, tuple)) or
                                       not all(isinstance(a, str) for a in entrypoint)):
            raise InvalidArgument("entrypoint: True or a list of strings", "invalid_argument")
        extra["entrypoint"] = True if entrypoint is True else list(entrypoint)
    return json.dumps(extra) if extra else None


_U64_MAX = 2 ** 64 - 1  # sizes and durations travel to libsbx as uint64_t
_UINT_MAX = 2 ** 32 - 1  # counts (pids, fork's n) as unsigned int
_MAX_MS = 10 ** 15  # libsbx's duration parser's limit (~31000 years)


def _positive(what: str, unit: str = "") -> InvalidArgument:
    """The refusal of a zero, negative or NaN value: 0 would mean "the default" to libsbx."""
    return InvalidArgument(f"{what}: must be positive{unit} (None keeps the default)",
                           "invalid_argument")


def parse_size(v: Optional[Size], what: str) -> int:
    """Bytes from an int or a string like "512Mi" / "2Gi" (0 for None). Zero ("0", "0Gi") and
    anything over 2**64-1 bytes are InvalidArgument naming ``what``."""
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, (int, str)):
        raise InvalidArgument(f"{what}: expected bytes or a size like \"2Gi\"", "invalid_argument")
    if isinstance(v, int):
        n = v
    else:
        out = ctypes.c_uint64()
        if _lib.lib().sbx_parse_size(_lib.cstr(v, what), ctypes.byref(out)) != 0:
            raise InvalidArgument(f"{what}: {v!r} is not a size (like 512Mi, 2Gi)",
                                  "invalid_argument")
        n = out.value
    if n <= 0:
        raise _positive(what)
    if n > _U64_MAX:
        raise InvalidArgument(f"{what}: more than 2**64-1 bytes", "invalid_argument")
    return n


def parse_duration_ms(v: Optional[Duration], what: str) -> int:
    """Milliseconds from seconds (a number) or a string like "30s" / "5m" (0 for None), rounded
    to the nearest millisecond as libsbx rounds a string. One that rounds to 0 ("0s", 0.0004,
    "0.4ms"), a negative, NaN or infinite one, or one of 10**15 ms or more is InvalidArgument
    naming ``what``."""
    if v is None:
        return 0
    if isinstance(v, bool):
        raise InvalidArgument(f"{what}: expected seconds or a duration like \"5m\"", "invalid_argument")
    if isinstance(v, (int, float)):
        try:
            ms = float(v) * 1000
        except OverflowError:
            ms = math.inf
        if not ms > 0:  # NaN too
            raise _positive(what)
        if not ms < _MAX_MS:
            raise InvalidArgument(f"{what}: too long (under 10**12 seconds)", "invalid_argument")
        n = math.floor(ms + 0.5)
    elif isinstance(v, str):
        out = ctypes.c_uint64()
        if _lib.lib().sbx_parse_duration(_lib.cstr(v, what), ctypes.byref(out)) != 0:
            raise InvalidArgument(f"{what}: {v!r} is not a duration (like 30s, 5m)",
                                  "invalid_argument")
        n = out.value
    else:
        raise InvalidArgument(f"{what}: expected seconds or a duration like \"5m\"", "invalid_argument")
    if n <= 0:
        raise _positive(what, ", at least 1ms")
    return n


def _number(v: Any, what: str) -> float:
    """A finite, positive number (cpu, max_cost) as a float: NaN and infinity are refused, as
    libsbx would drop them from the request and the default would apply."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise InvalidArgument(f"{what}: must be a positive number", "invalid_argument")
    try:
        f = float(v)
    except OverflowError:
        f = math.inf
    if not f > 0:
        raise _positive(what)
    if not math.isfinite(f):
        raise InvalidArgument(f"{what}: must be a finite number", "invalid_argument")
    return f


def _count(v: Any, what: str) -> int:
    """A positive integer that fits an unsigned int (pids, fork's n): a larger one would wrap."""
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _UINT_MAX:
        raise InvalidArgument(f"{what}: must be a positive integer (at most {_UINT_MAX})",
                              "invalid_argument")
    return v


def _kv(m: Optional[Mapping[str, str]], what: str) -> Optional[List[str]]:
    if m is None:
        return None
    out = []
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, str) or "=" in k or not k:
            raise InvalidArgument(f"{what}: keys and values must be strings, keys without '='",
                                  "invalid_argument")
        out.append(f"{k}={v}")
    return out



def _fill_create_opts(o: _lib.CreateOpts, image: Optional[str] = None,
                      cpu: Optional[float] = None, memory: Optional[Size] = None,
                      disk: Optional[Size] = None, pids: Optional[int] = None,
                      env: Optional[Mapping[str, str]] = None,
                      labels: Optional[Mapping[str, str]] = None,
                      idle_timeout: Optional[Duration] = None, timeout: Optional[Duration] = None,
                      max_cost: Optional[float] = None, network: Optional[Egress] = None,
                      lease: Union["Lease", str, None] = None,
                      idempotency_key: Optional[str] = None,
                      profile: Optional[str] = None, gpus: Optional[int] = None,
                      isolation: Optional[str] = None) -> List[Any]:
    """Fill an sbx_create_opts from keyword arguments (None keeps the C default). Returns the
    ctypes objects that must stay alive while o is used."""
    keep: List[Any] = []
    if cpu is not None:
        o.cpu = _number(cpu, "cpu")
    if pids is not None:
        o.pids = _count(pids, "pids")
    if max_cost is not None:
        o.max_cost_usd = _number(max_cost, "max_cost")
    if network is not None and not isinstance(network, Egress):
        raise InvalidArgument("network: use Egress.none(), Egress.open() or Egress.allow([...])",
                              "invalid_argument")
    o.image = _lib.cstr(image, "image")
    o.memory = parse_size(memory, "memory")
    o.disk = parse_size(disk, "disk")
    o.idle_timeout_ms = parse_duration_ms(idle_timeout, "idle_timeout")
    o.timeout_ms = parse_duration_ms(timeout, "timeout")
    o.network = _lib.cstr(network.value, "network") if network else None
    o.idempotency_key = _lib.cstr(idempotency_key, "idempotency_key")
    o.lease_id = _lib.cstr(lease if lease is None or isinstance(lease, str) else lease.id,
                           "lease")  # (a Lease: sandbox.py)
    if profile is not None and not isinstance(profile, str):
        raise InvalidArgument("profile: must be a string (\"grading\")", "invalid_argument")
    o.profile = _lib.cstr(profile, "profile")
    if gpus is not None:
        if isinstance(gpus, bool) or not isinstance(gpus, int) or not 0 <= gpus <= 64:
            raise InvalidArgument("gpus: must be a number of GPUs in [0, 64]", "invalid_argument")
        o.gpus = gpus
    if isolation is not None and isolation not in ("native", "gvisor"):
        raise InvalidArgument("isolation: must be \"native\" or \"gvisor\"", "invalid_argument")
    o.isolation = _lib.cstr(isolation, "isolation")
    keep += [o.image, o.network, o.idempotency_key, o.lease_id, o.profile, o.isolation]
    for name, m in (("env", env), ("labels", labels)):
        arr = _lib.strv(_kv(m, name), name)
        if arr is not None:
            keep.append(arr)
            setattr(o, name, ctypes.cast(arr, ctypes.POINTER(ctypes.c_char_p)))
    return keep


def _create_request(image: Optional[str] = None, cpu: Optional[float] = None,
                    memory: Optional[Size] = None, disk: Optional[Size] = None,
                    pids: Optional[int] = None, env: Optional[Mapping[str, str]] = None,
                    labels: Optional[Mapping[str, str]] = None,
                    idle_timeout: Optional[Duration] = None, timeout: Optional[Duration] = None,
                    max_cost: Optional[float] = None, network: Optional["Egress"] = None,
                    lease: Union["Lease", str, None] = None,
                    idempotency_key: Optional[str] = None, profile: Optional[str] = None,
                    gpus: Optional[int] = None, ports: Optional[Sequence[int]] = None,
                    entrypoint: Union[bool, Sequence[str], None] = None, volumes: Any = None,
                    on_idle: Optional[str] = None, isolation: Optional[str] = None,
                    pausable: Optional[bool] = None) -> Any:
    """Sandbox.create's arguments as an sbx_create_opts, the ctypes objects it points to (keep
    them while it is used) and the extra JSON fields (bytes or None). Unknown names: TypeError."""
    extra = _extra_create_fields(ports, entrypoint, volumes, on_idle, pausable)
    o = _lib.CreateOpts()
    _lib.lib().sbx_create_opts_init(ctypes.byref(o))
    keep = _fill_create_opts(o, image=image, cpu=cpu, memory=memory, disk=disk, pids=pids,
                             env=env, labels=labels, idle_timeout=idle_timeout, timeout=timeout,
                             max_cost=max_cost, network=network, lease=lease,
                             idempotency_key=idempotency_key, profile=profile, gpus=gpus,
                             isolation=isolation)
    return o, keep, extra.encode() if extra else None


def _fork_request(n: Any, **overrides: Any) -> Any:
    """Sandbox.fork's arguments as an sbx_fork_opts (count n, the overrides checked and named as
    _create_request checks them), the ctypes objects it points to (keep them while it is used)
    and the extra JSON fields for sbx_sandbox_fork_with (bytes or None)."""
    fo = _lib.ForkOpts()
    _lib.lib().sbx_fork_opts_init(ctypes.byref(fo))
    fo.count = _count(n, "n")
    o, keep, extra = _create_request(**overrides)
    fo.overrides = o  # (a copy: its pointers are keep's)
    return fo, keep, extra


def _exec_args(argv: Sequence[str], stdin: Union[bytes, str, None],
               env: Optional[Mapping[str, str]], cwd: Optional[str],
               timeout: Optional[Duration], shell: bool, max_output: Optional[Size],
               user: Optional[str] = None) -> Dict[str, Any]:
    """A command's arguments, checked, as the dict _exec_opts takes (strings as C's bytes)."""
    if not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidArgument("exec: argv must be one or more strings", "invalid_argument")
    if isinstance(stdin, str):
        stdin = stdin.encode()
    if stdin is not None and not isinstance(stdin, (bytes, bytearray)):
        raise InvalidArgument("exec: stdin must be bytes or str", "invalid_argument")
    if user is not None and not isinstance(user, str):
        raise InvalidArgument("exec: user must be a string (\"agent\", \"grader\")",
                              "invalid_argument")
    env_list = _kv(env, "env")
    return {"argv": [_lib.cstr(x, "argv") for x in argv], "stdin": stdin,
            "env": [_lib.cstr(x, "env") for x in env_list] if env_list is not None else None,
            "cwd": _lib.cstr(cwd or None, "cwd"),
            "timeout_ms": parse_duration_ms(timeout, "timeout"), "shell": shell,
            "max_output": parse_size(max_output, "max_output"),
            "user": _lib.cstr(user or None, "user")}


def _exec_opts(a: Dict[str, Any], cb: Any) -> Any:
    """An sbx_exec_opts from _exec_args's dict (cb: an OUTPUT_CB or None), and the ctypes
    objects it points to (keep them while it is used). ctypes zeroes a new structure as
    sbx_exec_opts_init does (python/tests/test_sdk.py test_exec_opts_need_no_init_call checks
    it), so that call is not made: this runs for every command, and each call into C costs
    about a percent of a round trip."""
    o = _lib.ExecOpts()
    av = a["argv"]  # (bytes, checked by _exec_args)
    argv = (ctypes.c_char_p * (len(av) + 1))(*av, None)
    o.argv = argv
    if a["shell"]:
        o.shell = 1
    ev = a["env"]
    envv = None
    if ev is not None:
        envv = (ctypes.c_char_p * (len(ev) + 1))(*ev, None)
        o.env = envv
    cwd = a["cwd"]
    if cwd is not None:
        o.cwd = cwd
    stdin = a["stdin"]
    sbuf = None
    if stdin is not None:
        sbuf = ctypes.create_string_buffer(bytes(stdin), len(stdin))
        o.stdin_data = ctypes.cast(sbuf, ctypes.c_void_p)
        o.stdin_len = len(stdin)
    if a["timeout_ms"]:
        o.timeout_ms = a["timeout_ms"]
    if a["max_output"]:
        o.max_output = a["max_output"]
    user = a["user"]
    if user is not None:
        o.user = user
    if cb is not None:
        o.on_output = cb
    return o, [argv, envv, cwd, sbuf, user, cb]


def _info(j: Dict[str, Any]) -> "SandboxInfo":
    """SandboxInfo from the sandbox object (GET /v1/sandboxes/{id})."""
    end = j.get("end") or {}
    return SandboxInfo(id=j["id"], state=j["state"], usage=j.get("usage") or {},
                       cost_usd=float(j.get("cost_usd") or 0.0), limits=j.get("limits") or {},
                       labels=j.get("labels") or {}, end_reason=EndReason.parse(end.get("reason")),
                       end_message=end.get("message"), raw=j)


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _data_member(root: str, m: tarfile.TarInfo) -> None:
    """tarfile's "data" filter for a Python that has none: the entry lands in root, a link
    points into root (relative: a symlink from its own directory, a hard link from root), no
    device or FIFO, no setuid/setgid/sticky or group/other write bits, no owner taken from the
    archive. Raises SandboxdError (unsafe_archive) for an entry that breaks them. Paths are
    resolved on disk: call it right before extracting m, after the entries before it."""
    dest = os.path.realpath(os.path.join(root, m.name))
    bad = os.path.isabs(m.name) or not _inside(root, dest) or m.isdev() or m.isfifo()
    if m.issym() or m.islnk():
        base = os.path.dirname(dest) if m.issym() else root
        bad = bad or os.path.isabs(m.linkname) or \
            not _inside(root, os.path.realpath(os.path.join(base, m.linkname)))
    if bad:
        raise SandboxdError(f"download_dir: unsafe entry {m.name!r}", "unsafe_archive")
    m.mode &= 0o755
    m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""


class Egress:
    """A sandbox's network policy: ``Egress.none()`` (the default), ``Egress.open()`` or
    ``Egress.allow(["10.1.2.0/24", "example.com:443"])``."""

    def __init__(self, value: str):
        self.value = value

    @classmethod
    def none(cls) -> "Egress":
        return cls("none")

    @classmethod
    def open(cls) -> "Egress":
        return cls("open")

    @classmethod
    def allow(cls, destinations: Iterable[str]) -> "Egress":
        dests = list(destinations)
        if not all(isinstance(d, str) for d in dests):
            raise InvalidArgument("Egress.allow: destinations must be strings", "invalid_argument")
        return cls(json.dumps({"allow": dests}))

    def __repr__(self) -> str:
        return f"Egress({self.value})"
