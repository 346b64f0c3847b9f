"""Wire types of the daemon-level methods: ping, status, rpc.discover, shutdown."""

from __future__ import annotations

from typing import Any

from makad.errors import ShuttingDown
from makad.wire.base import MethodSpec, Params, Result


class NoParams(Params):
    """A method that takes no params (an empty object, or none at all)."""


class StatusResult(Result):
    version: str
    pid: int
    uptime_ms: int
    socket: str
    data_dir: str
    connections: int


class ShutdownResult(Result):
    stopping: bool


METHODS: list[MethodSpec] = [
    MethodSpec("ping", NoParams, str, "Liveness check: answers \"pong\".", inline=True),
    MethodSpec("status", NoParams, StatusResult,
               "Daemon version, pid, uptime, socket, data directory and open connections.",
               inline=True),
    MethodSpec("rpc.discover", NoParams, dict[str, Any],
               "This daemon's OpenRPC document (protocol/openrpc.json).", inline=True),
    MethodSpec("shutdown", NoParams, ShutdownResult,
               "Stop accepting connections, let in-flight requests finish, exit 0.",
               errors=(ShuttingDown,)),
]
