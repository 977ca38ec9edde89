"""Typed exceptions: every failure of a libsbx call is raised as a SandboxdError subclass
carrying the API's message, its snake_case code and the HTTP status."""
from __future__ import annotations

import enum
from typing import Optional

# sbx_code values (client/include/sbx.h)
OK, E_INVALID, E_NOT_FOUND, E_CONFLICT, E_TOO_LARGE, E_UNAVAILABLE, E_CONNECT, E_AUTH, \
    E_SERVER, E_PROTOCOL, E_NOMEM, E_IO, E_NODE_UNAVAILABLE, E_INTERRUPTED = range(14)


class SandboxdError(Exception):
    """Base class of every sandboxd error.

    Attributes: ``message`` (the API's or the library's words), ``code`` (the API's snake_case
    code such as ``"not_found"``, or the library's code name when no answer came),
    ``http_status`` (0 when no HTTP answer came) and ``sbx_code`` (libsbx's sbx_code).
    """

    def __init__(self, message: str, code: str = "", http_status: int = 0, sbx_code: int = 0):
        super().__init__(message)
        self.message = message
        self.code = code
        self.http_status = http_status
        self.sbx_code = sbx_code

    def __str__(self) -> str:
        return f"{self.message} ({self.code})" if self.code else self.message


class InvalidArgument(SandboxdError):
    """The request was refused as invalid (HTTP 400, 422 such as ``idempotency_key_reused``, or
    a bad argument caught locally)."""


class TooLarge(InvalidArgument):
    """A body or file over the API's size limit (HTTP 413)."""


class NotFound(SandboxdError):
    """No such sandbox, lease or file (HTTP 404)."""


class Conflict(SandboxdError):
    """The sandbox is not in a state that allows this, e.g. it has ended (HTTP 409, or a
    streamed command's ``{"type":"error","code":"conflict"}``)."""


class NodeFull(SandboxdError):
    """Every node is full; retry later (HTTP 503 node_full)."""


class Unauthorized(SandboxdError):
    """The TCP endpoint wants a valid bearer token (HTTP 401/403)."""


class InfrastructureFailure(SandboxdError):
    """A fault of the platform, not of the caller's code: the daemon could not be reached, an
    internal error (5xx), a state that could not be saved, an answer that made no sense."""


class NodeUnavailable(InfrastructureFailure):
    """Fleet: the node that holds the sandbox (its id's node part) left the fleet or stopped
    answering; the sandbox is lost with it."""


class EndReason(str, enum.Enum):
    """Why a sandbox ended (``end.reason`` of the sandbox object)."""

    EXITED = "exited"
    SIGNALED = "signaled"
    COMMAND_TIMEOUT = "command_timeout"
    OOM_KILLED = "oom_killed"
    IDLE_TIMEOUT = "idle_timeout"
    LIFETIME_EXCEEDED = "lifetime_exceeded"
    COST_LIMIT = "cost_limit"
    TERMINATED = "terminated"
    INFRASTRUCTURE_FAILURE = "infrastructure_failure"
    PIDS_LIMIT = "pids_limit"
    MOVED = "moved"

    @classmethod
    def parse(cls, value: Optional[str]) -> Optional["EndReason"]:
        if value is None:
            return None
        try:
            return cls(value)
        except ValueError:
            return cls.INFRASTRUCTURE_FAILURE


class CommandReason(str, enum.Enum):
    """How a command ended (``reason`` of an exec result)."""

    EXITED = "exited"
    SIGNALED = "signaled"
    COMMAND_TIMEOUT = "command_timeout"
    OOM_KILLED = "oom_killed"


_BY_CODE = {
    E_INVALID: InvalidArgument,
    E_TOO_LARGE: TooLarge,
    E_NOT_FOUND: NotFound,
    E_CONFLICT: Conflict,
    E_UNAVAILABLE: NodeFull,
    E_AUTH: Unauthorized,
    E_CONNECT: InfrastructureFailure,
    E_SERVER: InfrastructureFailure,
    E_PROTOCOL: InfrastructureFailure,
    E_NODE_UNAVAILABLE: NodeUnavailable,
}


def from_err(rc: int, err) -> SandboxdError:
    """The exception for an sbx_code and a filled sbx_err."""
    msg = err.message.decode("utf-8", "replace") or f"libsbx error {rc}"
    api = err.api_code.decode("utf-8", "replace")
    if not api:
        from ._lib import lib
        name = lib().sbx_code_name(rc)
        api = name.decode() if name else ""
    cls = _BY_CODE.get(rc, SandboxdError)
    if rc == E_UNAVAILABLE and api not in ("node_full", "") and err.http_status == 503:
        cls = InfrastructureFailure if api != "shutting_down" else NodeFull
    return cls(msg, api, int(err.http_status), rc)


def _add_note(exc: BaseException, note: str) -> None:
    """Attach note to exc (PEP 678: printed under its traceback). Before Python 3.11 it goes to
    ``__notes__`` all the same, which that interpreter does not print."""
    if hasattr(exc, "add_note"):
        exc.add_note(note)
    else:
        exc.__notes__ = [*getattr(exc, "__notes__", []), note]  # type: ignore[attr-defined]


def _cleanup_failed(exc: Optional[BaseException], what: str, err: Exception) -> None:
    """A context manager's cleanup on leaving its block raised err. Raise it when the block
    ended normally (exc None); when the block raised exc, exc goes on (err must not replace it:
    it is what went wrong first) and err is attached to it as a note naming what failed."""
    if exc is None:
        raise err
    _add_note(exc, f"{what} on leaving the with block failed too: {type(err).__name__}: {err}")
