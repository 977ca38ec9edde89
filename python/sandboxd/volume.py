"""Named volumes (docs/API.md "Volumes"): file systems of a fixed size on a node that outlive
sandboxes, for caches and datasets.

    cache = Volume.create("pip-cache", size="1Gi")
    with Sandbox.create(volumes=[cache.mount("/cache")]) as sb:          # writable: one at a time
        sb.run("pip", "download", "-d", "/cache", "requests")
    Sandbox.create(volumes={"/cache": cache.mount(read_only=True)})      # read-only: shared

A volume lives on one node (the client's first endpoint); creates that mount it run there.
"""
from __future__ import annotations

import ctypes
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from . import _lib
from .errors import InvalidArgument, SandboxdError, from_err


def _call(fn: Any, *args: Any) -> None:
    err = _lib.SbxErr()
    rc = fn(*args, ctypes.byref(err))
    if rc != 0:
        raise from_err(rc, err)


def _fn(name: str) -> Any:
    L = _lib.lib()
    if not hasattr(L, name):
        raise SandboxdError(f"this libsbx has no {name}", "unsupported")
    return getattr(L, name)


@dataclass(frozen=True)
class VolumeMount:
    """Where a sandbox mounts a volume: ``path`` (absolute), read-only or not."""
    name: str
    path: Optional[str] = None
    read_only: bool = False

    def json(self) -> Dict[str, Any]:
        if not isinstance(self.path, str):
            raise InvalidArgument(f"volumes: {self.name} has no path", "invalid_argument")
        return {"name": self.name, "path": self.path, "read_only": bool(self.read_only)}


class Volume:
    """A named volume of the node the client talks to first."""

    def __init__(self, name: str, client: Any = None, info: Optional[Dict[str, Any]] = None):
        from .sandbox import default_client
        self.name = name
        self.client = client or default_client()
        self._info = info

    @classmethod
    def create(cls, name: str, size: Union[int, str, None] = None, client: Any = None) -> "Volume":
        """POST /v1/volumes: ``size`` bytes or a string like "1Gi" (None: the daemon's
        default, 1Gi). Conflict when the name is taken, InvalidArgument for a bad name or a
        size out of [16Mi, 1Ti]."""
        from .args import parse_size
        from .sandbox import default_client
        client = client or default_client()
        out = ctypes.c_void_p()
        _call(_fn("sbx_volume_create"), client.handle(), _lib.cstr(name, "name"),
              parse_size(size, "size"),
              ctypes.byref(out))
        return cls(name, client, json.loads(_lib.take_string(out)))

    @classmethod
    def get(cls, name: str, client: Any = None) -> "Volume":
        """The volume ``name`` (NotFound when there is none)."""
        v = cls(name, client)
        v.info()
        return v

    @classmethod
    def list(cls, client: Any = None) -> List["Volume"]:
        from .sandbox import default_client
        client = client or default_client()
        out = ctypes.c_void_p()
        _call(_fn("sbx_volume_list"), client.handle(), ctypes.byref(out))
        return [cls(j["name"], client, j) for j in json.loads(_lib.take_string(out))]

    def info(self) -> Dict[str, Any]:
        """GET /v1/volumes/{name}: size, used, created, state, in_use_by."""
        out = ctypes.c_void_p()
        _call(_fn("sbx_volume_inspect"), self.client.handle(), _lib.cstr(self.name, "name"),
              ctypes.byref(out))
        self._info = json.loads(_lib.take_string(out))
        return self._info

    def delete(self) -> None:
        """Remove the volume and its data (Conflict while a sandbox uses it)."""
        _call(_fn("sbx_volume_remove"), self.client.handle(), _lib.cstr(self.name, "name"))

    def mount(self, path: Optional[str] = None, read_only: bool = False) -> VolumeMount:
        """This volume at ``path`` for ``Sandbox.create(volumes=[...])`` (in the dict form
        ``volumes={path: vol.mount(read_only=True)}`` the key is the path)."""
        return VolumeMount(self.name, path, read_only)

    def __repr__(self) -> str:
        return f"Volume({self.name!r})"


VolumeSpec = Union[VolumeMount, Volume, str, Tuple[Any, ...], Mapping[str, Any]]


def _one(e: Any, path: Optional[str] = None) -> Dict[str, Any]:
    if isinstance(e, VolumeMount):
        return (VolumeMount(e.name, path, e.read_only) if path else e).json()
    if isinstance(e, (Volume, str)) and path:
        return VolumeMount(e.name if isinstance(e, Volume) else e, path).json()
    if isinstance(e, tuple) and 2 <= len(e) <= 3 and not path:
        name = e[0].name if isinstance(e[0], Volume) else e[0]
        return VolumeMount(name, e[1], bool(e[2]) if len(e) == 3 else False).json()
    if isinstance(e, Mapping) and not path:
        return dict(e)  # the daemon checks it (400 naming the field)
    raise InvalidArgument("volumes: each is vol.mount(path), (name, path[, read_only]) or "
                          "{path: volume}", "invalid_argument")


def volumes_json(volumes: Union[Sequence[VolumeSpec], Mapping[str, VolumeSpec], None]
                 ) -> Optional[List[Dict[str, Any]]]:
    """The create's "volumes" from a list of mounts or a {path: volume} mapping (None: none)."""
    if volumes is None:
        return None
    if isinstance(volumes, Mapping):
        return [_one(v, p) for p, v in volumes.items()]
    if isinstance(volumes, (str, bytes)) or not isinstance(volumes, Sequence):
        raise InvalidArgument("volumes: a list of mounts or a {path: volume} mapping",
                              "invalid_argument")
    return [_one(v) for v in volumes]
