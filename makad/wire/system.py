"""Wire types of the daemon-level methods: ping, status, rpc.discover, shutdown."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from msgspec import UNSET, Meta, UnsetType

from makad.core.types import DurationMs, UnixMs
from makad.errors import ShuttingDown
from makad.wire.base import MethodSpec, Params, Result


class NoParams(Params):
    """A method that takes no params (an empty object, or none at all)."""


class WorkspaceWarning(Result, kw_only=True):
    """A workspace warning (as in read_state) the daemon has seen since it started."""

    workspace: str
    kind: str
    message: str
    at: UnixMs


class ContextPaths(Result):
    """How many build_context calls of one workspace took each ``trace.path`` since start."""

    workspace: str
    fast: int = 0
    bounded: int = 0
    slow: int = 0
    fallback: int = 0


class IndexFailure(Result, kw_only=True):
    """A workspace whose semantic indexing keeps failing: the latest error, how many turns
    in a row failed, and the wait before the next try (doubling, at most five minutes)."""

    workspace: str
    error: str
    attempts: int
    retry_after_ms: DurationMs


class SemanticStatus(Result, kw_only=True):
    """The semantic channel (makad's docs/SEMANTIC.md): its model and how far indexing has got.

    ``state``: ``loading`` (requests go on lexically meanwhile), ``ready``, or ``failed``
    (``message`` says why; the daemon goes on without the channel). While ``ready``,
    ``message`` is set when a workspace's indexing keeps failing (``indexFailures`` lists
    each: its vectors stay as they are and it is tried again later). ``caughtUp``: every
    event appended and every entry written so far has its vector (never while ``loading``
    or ``failed``). ``eventsPerSecond``: the indexer's throughput since start (its
    embedding time only).
    """

    model: Annotated[
        str,
        Meta(
            description="What --embedding-model named while state is loading (or failed), "
            "then the name its vectors are stored under: the model folder's or file's name "
            "and a digest of its weights (model-1ddd09b6d051)."
        ),
    ]
    state: Literal["loading", "ready", "failed"]
    message: str | None = None
    load_ms: Annotated[
        float | None, Meta(description="A length of time in milliseconds, fractional, or null.")
    ] = None
    events_indexed: int = 0
    events_pending: int = 0
    entries_indexed: int = 0
    entries_pending: int = 0
    caught_up: bool = False
    events_per_second: float | None = None
    index_failures: list[IndexFailure] = []


class DaemonLimits(Result, kw_only=True):
    """The caps this daemon enforces (x-limits in the OpenRPC document lists the defaults):
    a client splits what it sends to stay within them."""

    max_message_bytes: Annotated[
        int, Meta(description="The largest request message, in bytes (--max-message-bytes).")
    ]
    max_message_values: Annotated[int, Meta(description="The most JSON values one message may hold.")]
    max_append_events: Annotated[int, Meta(description="The most events one append_events may carry.")]
    max_event_bytes: Annotated[int, Meta(description="The largest event, in bytes as JSON.")]
    max_reply_bytes: Annotated[int, Meta(description="The largest reply, in bytes (--max-reply-bytes).")]


class StatusResult(Result):
    version: str
    pid: int
    uptime_ms: DurationMs
    # The path the daemon listens on: the one systemd bound when socket-activated.
    socket: str
    data_dir: str
    connections: int
    # Workspaces the daemon found replaced (new_workspace), whose ledger it reset, or whose
    # ledger a full disk keeps read-only (ledger_read_only); and the data directory's disk
    # with no room left (disk_full, its ``workspace`` the data directory).
    warnings: list[WorkspaceWarning] = []
    # True when the listening socket came from systemd (LISTEN_FDS), not --socket.
    socket_activated: bool = False
    # Per workspace: build_context calls by trace.path (fast, bounded, slow, fallback).
    context_paths: list[ContextPaths] = []
    # Present when a model is configured (``--embedding-model``): the semantic channel.
    semantic: SemanticStatus | UnsetType = UNSET
    # The caps it enforces, as started (its --max-message-bytes, not only the default).
    limits: DaemonLimits | UnsetType = UNSET


class ShutdownResult(Result):
    stopping: bool


# Why the daemon stops: the ``shutdown`` method, SIGTERM/SIGINT/SIGHUP (``systemctl stop``,
# Ctrl-C, its terminal closed), its services could not be loaded, or its data directory or
# its socket file was removed or replaced under it.
StopReason = Literal["shutdown", "signal", "start_failed", "data_dir_lost", "socket_lost"]
# The notification every open connection gets when the daemon stops on purpose (no
# ``subscribe`` needed): clients that see it do not start a new daemon on their own.
DAEMON_STOPPING = "daemon_stopping"


class DaemonStopping(Result):
    """Params of ``daemon_stopping``."""

    reason: StopReason


METHODS: list[MethodSpec] = [
    MethodSpec("ping", NoParams, str, 'Liveness check: answers "pong".', inline=True),
    MethodSpec(
        "status",
        NoParams,
        StatusResult,
        "Daemon version, pid, uptime, socket, data directory, open connections, "
        "warnings (a corrupt ledger reset, a workspace replaced, a ledger read-only on a full "
        "disk), the caps it enforces on messages (limits), and, when a model is "
        "configured, how far the semantic channel's indexing has got.",
        inline=True,
    ),
    MethodSpec(
        "rpc.discover",
        NoParams,
        dict[str, Any],
        "This daemon's OpenRPC document (protocol/openrpc.json).",
        inline=True,
    ),
    MethodSpec(
        "shutdown",
        NoParams,
        ShutdownResult,
        "Stop accepting connections, let in-flight requests finish, exit 0. Every open "
        'connection gets a daemon_stopping notification ({reason: "shutdown"}) first: clients '
        "that start makad on demand do not start it again after it.",
        errors=(ShuttingDown,),
    ),
]
