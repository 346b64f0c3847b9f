"""Composition root: settings → stores → services → server; signals; systemd.

Start-up order matters: the single-instance lock is taken *before* anything
touches the socket path, because binding over a live daemon's socket would
silently steal its address (DESIGN §6).
"""

from __future__ import annotations

import errno
import fcntl
import os
import resource
import signal
import socket
import stat
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import anyio
import msgspec
import structlog
from anyio.abc import SocketListener

from makad import __version__, heap, logs, systemd
from makad import openrpc as openrpc_doc
from makad.core.episodes import Threshold
from makad.faults import Faults
from makad.rpc.dispatch import Dispatcher
from makad.rpc.server import Limits, Server
from makad.service import curator
from makad.service.common import Context
from makad.service.compaction import CompactionService
from makad.service.context import ContextService
from makad.service.episodes import EpisodeService, Evidence
from makad.service.identifiers import Identifiers, load_or_create_key
from makad.service.imports import ImportService
from makad.service.ledger import LedgerService
from makad.service.memory import MemoryFiles, MemoryService
from makad.service.proposals import ProposalService
from makad.service.session_notes import SessionNotesKeeper
from makad.service.sessions import Sessions
from makad.service.system import DaemonInfo, SystemService, registry_warnings
from makad.settings import MAX_SOCKET_PATH_BYTES, DaemonSettings, load
from makad.store.workspaces import WorkspaceRegistry
from makad.warmup import Warmup
from makad.watcher import Watcher
from makad.wire import CATALOGUE
from makad.wire.base import Handler

log = structlog.get_logger("makad")

# Descriptors kept for everything but client connections (ledgers, watcher, backups…).
RESERVED_FDS = 256
# Linux refuses a soft limit over fs.nr_open; when the hard limit is "unlimited" aim here.
NOFILE_CEILING = 1 << 20


class StartupError(Exception):
    """The daemon cannot start; the message says why and what to do."""


def ensure_private_dir(path: Path) -> None:
    """Create a directory (and parents) with mode 0700; refuse a symlink."""
    if path.is_symlink():
        raise StartupError(f"{path} is a symlink; refusing to use it")
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise StartupError(
            f"socket path is {len(os.fsencode(path))} bytes, over the AF_UNIX limit of "
            f"{MAX_SOCKET_PATH_BYTES}: choose a shorter --socket path"
        )


def take_instance_lock(settings: DaemonSettings) -> IO[str]:
    """Hold an exclusive flock on the lock file for the life of the process."""
    lock_path = settings.lock_path
    handle = open(lock_path, "a+", encoding="utf-8")  # noqa: SIM115 - held until exit
    os.chmod(lock_path, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        handle.seek(0)
        pid = handle.read().strip() or "unknown"
        handle.close()
        raise StartupError(f"another makad (pid {pid}) is already serving {settings.socket_path}") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def bind_socket(path: Path) -> socket.socket:
    """Bind a fresh listening socket, replacing a stale socket file (we hold the lock)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        pass
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise StartupError(f"{path} exists and is not a socket; refusing to replace it")
        path.unlink()
        log.info("stale_socket_removed", socket=str(path))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o177)
    try:
        sock.bind(os.fspath(path))
    finally:
        os.umask(old_umask)
    os.chmod(path, 0o600)
    sock.listen(socket.SOMAXCONN)  # a burst of clients waits instead of failing (EAGAIN)
    return sock


def raise_open_file_limit() -> int:
    """Lift the soft RLIMIT_NOFILE to the hard one; the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = NOFILE_CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            log.warning("nofile_not_raised", soft=soft, hard=hard)
    return NOFILE_CEILING if soft == resource.RLIM_INFINITY else soft


def connection_cap(configured: int, nofile: int) -> int:
    """The configured cap, lowered so connections cannot take the daemon's own descriptors."""
    room = nofile - RESERVED_FDS if nofile > 2 * RESERVED_FDS else nofile // 2
    return max(1, min(configured, room))


def limits_for(settings: DaemonSettings, nofile: int, faults: Faults) -> Limits:
    cap = connection_cap(settings.max_connections, nofile)
    if cap < settings.max_connections:
        log.warning("connection_cap_lowered", configured=settings.max_connections, cap=cap, nofile=nofile)
    return Limits(
        max_message_bytes=settings.max_message_bytes,
        max_connections=cap,
        idle_timeout_s=settings.idle_timeout_s,
        shutdown_grace_s=settings.shutdown_grace_s,
        fault_point=faults.point,
    )


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


@dataclass
class App:
    """Everything the composition root builds before serving."""

    handlers: dict[str, Handler]
    registry: WorkspaceRegistry
    watcher: Watcher
    notes: SessionNotesKeeper
    faults: Faults


def build_app(info: DaemonInfo) -> App:
    settings = info.settings
    # The one fault seam: armed by the test environment only (makad.faults).
    faults = Faults(point=settings.fault_point, disk_full=settings.fault_disk_full)
    registry = WorkspaceRegistry(settings.data_dir, faults=faults, user_dir=settings.user_memory_dir)
    info.warnings = lambda: registry_warnings(registry)
    ctx = Context(
        settings=settings,
        registry=registry,
        faults=faults,
        identifiers=Identifiers(load_or_create_key(settings.data_dir)),
    )
    memory_files = MemoryFiles(ctx)
    memory = MemoryService(ctx, memory_files)
    evidence = Evidence(ctx.faults, Threshold())
    proposals = ProposalService(ctx, memory_files, evidence)
    ctx.recovery.append(memory.clean_temp_files)
    ctx.recovery.append(proposals.recover)
    sessions = Sessions(ctx)
    notes = SessionNotesKeeper(ctx, sessions)
    context = ContextService(ctx, memory_files, sessions)
    info.context_paths = context.path_counts
    if settings.curator.configured:
        curator.prepare_in_background()
    compaction = CompactionService(ctx, sessions)
    episodes = EpisodeService(ctx, sessions, proposals, evidence)
    watcher = Watcher(memory.ingest, settings.watch_debounce_ms)
    warmup = Warmup()

    ctx.on_access = watcher.ensure
    ctx.ready = warmup.ensure  # request-only libraries, once a workspace is in use
    services: list[Any] = [
        SystemService(info, lambda: openrpc_doc.generate(CATALOGUE)),
        memory,
        proposals,
        ImportService(ctx, memory_files),
        context,
        compaction,
        LedgerService(ctx, sessions, notes, on_close=episodes.session_closed),
        episodes,
    ]
    handlers: dict[str, Handler] = {}
    for service in services:
        handlers.update(service.handlers())
    inject_faults(ctx.faults, handlers)
    handlers = ctx.identifiers.wrap(CATALOGUE, handlers)
    return App(handlers=handlers, registry=registry, watcher=watcher, notes=notes, faults=ctx.faults)


async def run(settings: DaemonSettings) -> int:
    info = DaemonInfo(settings=settings)
    with ExitStack() as stack:
        activated = systemd.activated_socket()
        if activated is None:
            check_socket_path(settings.socket_path)
            ensure_private_dir(settings.socket_path.parent)
        ensure_private_dir(settings.data_dir)
        if activated is None:
            stack.enter_context(take_instance_lock(settings))
            raw = bind_socket(settings.socket_path)
            stack.callback(_unlink_quietly, settings.socket_path)
        else:
            raw = activated
            info.socket_path = systemd.socket_name(raw) or str(settings.socket_path)
            info.socket_activated = True
        listener: SocketListener = await SocketListener.from_socket(raw)

        app = build_app(info)
        stack.callback(app.registry.close)
        dispatcher = Dispatcher(CATALOGUE, app.handlers, settings.max_reply_bytes)
        server = Server(dispatcher, limits_for(settings, raise_open_file_limit(), app.faults))
        info.connection_count = lambda: len(server.connections)
        info.request_stop = server.request_stop
        info.stopping = lambda: server.stopping

        async with anyio.create_task_group() as tg:
            await tg.start(_stop_on_signals, server)
            app.watcher.start(tg)
            app.notes.start(tg)
            tg.start_soon(heap.housekeeping_forever)
            where = (
                f"systemd socket {info.socket_path}" if activated is not None else str(settings.socket_path)
            )
            print(f"makad {__version__} listening on {where}", flush=True)
            log.info("listening", socket=where, data_dir=str(settings.data_dir), pid=os.getpid())
            systemd.notify("READY=1")
            await server.run(listener)
            systemd.notify("STOPPING=1")
            app.watcher.stop()
            tg.cancel_scope.cancel()
        log.info("stopped")
    return 0


async def _stop_on_signals(
    server: Server, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            log.info("signal", signal=signal.Signals(signum).name)
            server.request_stop()
            return


def _unlink_quietly(path: Path) -> None:
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    heap.configure_malloc()
    heap.configure_collector()
    settings = load(argv, stderr_is_tty=sys.stderr.isatty())
    logs.configure(settings.log_format, settings.log_level)
    try:
        return anyio.run(run, settings, backend="asyncio")
    except StartupError as exc:
        print(f"makad: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
