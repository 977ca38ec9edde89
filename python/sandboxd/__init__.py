"""sandboxd: the Python SDK of sandboxd, a thin ctypes binding over libsbx.

    from sandboxd import Sandbox, Egress
    with Sandbox.create(cpu=1, memory="2Gi", idle_timeout="5m", max_cost=1) as sb:
        p = sb.exec("bash", "-c", "echo hi")
        print(p.stdout.read(), p.wait().exit_code)

Standard library only; libsbx is found through $SANDBOXD_LIBSBX, this package's folder, or the
system's library path.
"""
from .aio import AsyncProcess, AsyncSandbox, create_lease
from .errors import (CommandReason, Conflict, EndReason, InfrastructureFailure, InvalidArgument,
                     NodeFull, NodeUnavailable, NotFound, SandboxdError, TooLarge,
                     Unauthorized)
from .sandbox import (Client, CommandResult, Egress, Lease, Process, RemoteFile, Sandbox,
                      SandboxInfo, default_client, parse_duration_ms, parse_size)
from .volume import Volume, VolumeMount

__version__ = "0.1.0"

__all__ = [
    "AsyncProcess", "AsyncSandbox", "Client", "CommandReason", "CommandResult", "Conflict",
    "Egress", "EndReason", "InfrastructureFailure", "InvalidArgument", "Lease", "NodeFull",
    "NodeUnavailable",
    "NotFound", "Process", "RemoteFile", "Sandbox", "SandboxInfo", "SandboxdError", "TooLarge",
    "Unauthorized", "Volume", "VolumeMount", "create_lease", "default_client",
    "parse_duration_ms", "parse_size",
]
