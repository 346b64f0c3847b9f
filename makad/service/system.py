"""ping, status, rpc.discover and shutdown."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import msgspec

from makad import __version__
from makad.core.chain import MAX_APPEND_EVENTS
from makad.core.peer import Peer
from makad.errors import ShuttingDown
from makad.faults import Faults
from makad.service.reply_fit import MAX_EVENT_BYTES
from makad.settings import MAX_MESSAGE_VALUES, DaemonSettings
from makad.wire.base import Handler
from makad.wire.system import (
    ContextPaths,
    DaemonLimits,
    NoParams,
    SemanticStatus,
    ShutdownResult,
    StatusResult,
    StopReason,
    WorkspaceWarning,
)

if TYPE_CHECKING:  # the registry is loaded after the daemon listens (makad.app)
    from makad.store.workspaces import WorkspaceRegistry

# What the daemon answers from the moment it listens, before the rest of it is loaded.
EARLY_METHODS = ("ping", "status", "shutdown")


@dataclass
class DaemonInfo:
    """Facts about the running daemon, wired up by the composition root."""

    settings: DaemonSettings
    started: float = field(default_factory=time.monotonic)
    connection_count: Callable[[], int] = lambda: 0
    # Stop serving; the reason goes to every client (``daemon_stopping``).
    request_stop: Callable[[StopReason], None] = lambda reason: None
    stopping: Callable[[], bool] = lambda: False
    warnings: Callable[[], list[WorkspaceWarning]] = lambda: []
    # Blocking: ENOSPC or EDQUOT when the data directory's disk has no room left, else None.
    no_room: Callable[[], str | None] = lambda: None
    # Since when (Unix ms) ``status`` has found the data directory's disk with no room.
    disk_full_since: int | None = None
    context_paths: Callable[[], list[ContextPaths]] = lambda: []
    # The semantic channel's status (None: no model configured; makad.service.embeddings).
    semantic: Callable[[], SemanticStatus | None] = lambda: None
    # Where the daemon really listens (systemd's socket may be elsewhere than --socket).
    socket_path: str | None = None
    socket_activated: bool = False


def _semantic(info: DaemonInfo) -> dict[str, SemanticStatus]:
    """``status``'s semantic field: the channel's, or ``loading`` while the services load."""
    found = info.semantic()
    if found is None and info.settings.embedding_model:
        found = SemanticStatus(model=info.settings.embedding_model, state="loading")
    return {} if found is None else {"semantic": found}


def _limits(info: DaemonInfo) -> DaemonLimits:
    return DaemonLimits(
        max_message_bytes=info.settings.max_message_bytes,
        max_message_values=MAX_MESSAGE_VALUES,
        max_append_events=MAX_APPEND_EVENTS,
        max_event_bytes=MAX_EVENT_BYTES,
        max_reply_bytes=info.settings.max_reply_bytes,
    )


DISK_FULL_MESSAGE = (
    "the disk of makad's data directory has no room left ({errno}): reads are served from "
    "what is stored, every write fails with disk_full and changes nothing, until space is freed"
)


async def _disk_warnings(info: DaemonInfo) -> list[WorkspaceWarning]:
    """``disk_full`` while the data directory's disk has no room (asked at each ``status``,
    on a worker thread: a probe that leaves nothing behind), since when it was first found."""
    spent = await anyio.to_thread.run_sync(info.no_room)
    if spent is None:
        info.disk_full_since = None
        return []
    if info.disk_full_since is None:
        info.disk_full_since = time.time_ns() // 1_000_000
    message = DISK_FULL_MESSAGE.format(errno=spent)
    data_dir = str(info.settings.data_dir)
    return [WorkspaceWarning(workspace=data_dir, kind="disk_full", message=message, at=info.disk_full_since)]


def registry_warnings(registry: WorkspaceRegistry) -> list[WorkspaceWarning]:
    """Every open workspace's warnings, oldest first."""
    found = [
        WorkspaceWarning(workspace=ws.name, kind=notice.kind, message=notice.message, at=notice.at)
        for ws in registry.all()
        for notice in ws.warnings()
    ]
    return sorted(found, key=lambda w: w.at)


class SystemService:
    def __init__(self, info: DaemonInfo, discover_doc: Callable[[], dict[str, Any]]) -> None:
        self._info = info
        # Built on the first rpc.discover: a schema of every method is no start-up work.
        self._make_doc = discover_doc
        self._doc: dict[str, Any] | None = None

    def handlers(self) -> dict[str, Handler]:
        return {
            "ping": self.ping,
            "status": self.status,
            "rpc.discover": self.discover,
            "shutdown": self.shutdown,
        }

    async def ping(self, params: NoParams, peer: Peer) -> str:
        return "pong"

    async def status(self, params: NoParams, peer: Peer) -> StatusResult:
        info = self._info
        return StatusResult(
            version=__version__,
            pid=os.getpid(),
            uptime_ms=int((time.monotonic() - info.started) * 1000),
            socket=info.socket_path or str(info.settings.socket_path),
            socket_activated=info.socket_activated,
            data_dir=str(info.settings.data_dir),
            connections=info.connection_count(),
            warnings=[*await _disk_warnings(info), *info.warnings()],
            context_paths=info.context_paths(),
            limits=_limits(info),
            **_semantic(info),
        )

    async def discover(self, params: NoParams, peer: Peer) -> dict[str, Any]:
        if self._doc is None:
            self._doc = self._make_doc()
        return self._doc

    async def shutdown(self, params: NoParams, peer: Peer) -> ShutdownResult:
        if self._info.stopping():
            raise ShuttingDown("the daemon is already stopping")
        self._info.request_stop("shutdown")
        return ShutdownResult(stopping=True)


def inject_faults(faults: Faults, handlers: dict[str, Handler]) -> None:
    """Test-only: ``unencodable_reply`` makes ``status`` answer a string that cannot be
    encoded as UTF-8 (as a file name in a legacy encoding would)."""
    if faults.point != "unencodable_reply":
        return
    status = handlers["status"]

    async def unencodable_status(params: Any, peer: Any) -> Any:
        result = await status(params, peer)
        return msgspec.structs.replace(result, socket=result.socket + "\udcff")

    handlers["status"] = unencodable_status
