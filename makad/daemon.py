"""Composition root: settings → server (ping, status, shutdown) → services loaded in a
worker thread (``makad.app``) and added to the dispatcher; signals; systemd.

Start-up order matters: the single-instance lock is taken *before* anything
touches the socket path, because binding over a live daemon's socket would
silently steal its address: binding first unlinks the socket file at the path,
live or stale (docs/ARCHITECTURE.md, "Traps in the libraries underneath").
"""

from __future__ import annotations

import atexit
import errno
import fcntl
import os
import resource
import signal
import socket
import stat
import sys
import threading
from collections.abc import Callable
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import anyio
import anyio.to_thread
import structlog
from anyio.abc import SocketListener

from makad import __version__, heap, logs, systemd
from makad.faults import Faults
from makad.private_files import NotPrivate, open_private, secure_folder, tighten_tree
from makad.rpc.dispatch import Dispatcher, new_ref
from makad.rpc.server import Limits, Server
from makad.service.system import EARLY_METHODS, DaemonInfo, SystemService, inject_faults
from makad.settings import MAX_SOCKET_PATH_BYTES, DaemonSettings, default_socket_path, load
from makad.store.system_folders import system_folder
from makad.wire.system import METHODS as SYSTEM_METHODS
from makad.wire.system import StopReason

if TYPE_CHECKING:
    from makad.app import App

log = structlog.get_logger("makad")

# Descriptors kept for everything but client connections (ledgers, watcher, backups…).
RESERVED_FDS = 256
# Linux refuses a soft limit over fs.nr_open; when the hard limit is "unlimited" aim here.
NOFILE_CEILING = 1 << 20
# How often the daemon checks that its data directory and its socket file are still there
# (``Surroundings``).
SURROUNDINGS_CHECK_S = 2.0


class StartupError(Exception):
    """The daemon cannot start; the message says why and what to do."""

    exit_code = 1


class UnsafeFolder(StartupError):
    """A folder (or file) the daemon would listen or keep data in can be changed by someone
    else: it refuses to start there (exit status ``EXIT_UNSAFE``, which a supervisor should
    not restart: nothing changes until the user does)."""

    exit_code = 78  # EX_CONFIG (sysexits.h): a configuration error


EXIT_UNSAFE = UnsafeFolder.exit_code
SOCKET_ELSEWHERE = "--socket or MAKAD_SOCKET, or set XDG_RUNTIME_DIR to a private folder"
DATA_ELSEWHERE = "--data-dir or MAKAD_DATA_DIR"
USER_MEMORY_ELSEWHERE = "--user-memory or MAKAD_USER_MEMORY"
# makad.store.workspaces.MEMORY_DIR, not imported: the store loads after the socket listens.
MEMORY_FOLDER = "memory"


def secure_socket_folder(path: Path) -> None:
    """Make the socket's folder (0700) and refuse one that anyone but this uid (and root,
    above it) can change: its owner could swap the socket for a server of their own."""
    _secure(path, "socket folder", SOCKET_ELSEWHERE, tighten=False)


def secure_data_dir(path: Path) -> None:
    """Make the data directory (0700), refuse one another uid could change, and make it
    owner-only when it is ours but looser (what is inside: ``tighten_tree`` at load)."""
    _secure(path, "data directory", DATA_ELSEWHERE, tighten=True)


def secure_user_memory(path: Path) -> None:
    """The user-level memory's folder outside the data directory (``--user-memory``): every
    workspace's context carries its MEMORY.md, so its ``memory/`` must be ours and the folders
    above it changeable by nobody else, like the data directory's. A symlink to it (which
    the user may repoint) is checked where it leads now; ``memory/`` is made 0700 if missing."""
    real = Path(os.path.realpath(path))
    system = system_folder(real)
    if system is not None:  # refused as a workspace is, before a memory/ is made there
        raise UnsafeFolder(
            f"the user-level memory folder {path}: {system} holds no memory; name a folder of "
            f"yours ({USER_MEMORY_ELSEWHERE})"
        )
    _secure(real / MEMORY_FOLDER, "user-level memory folder", USER_MEMORY_ELSEWHERE, tighten=True)


def _secure(path: Path, what: str, elsewhere: str, *, tighten: bool) -> None:
    try:
        secure_folder(path, what=what, elsewhere=elsewhere, tighten=tighten)
    except NotPrivate as exc:
        raise UnsafeFolder(str(exc)) from None
    except OSError as exc:  # e.g. a folder on the way that this uid may not search
        where = exc.filename if exc.filename is not None else path
        raise StartupError(f"the {what} {path} cannot be made or checked ({where}: {exc.strerror})") from None


def check_socket_path(path: Path) -> None:
    if len(os.fsencode(path)) > MAX_SOCKET_PATH_BYTES:
        raise StartupError(
            f"socket path {path} is {len(os.fsencode(path))} bytes, over the AF_UNIX limit of "
            f"{MAX_SOCKET_PATH_BYTES}: choose a shorter one (--socket or MAKAD_SOCKET, or a "
            "shorter XDG_RUNTIME_DIR)"
        )


def take_instance_lock(settings: DaemonSettings) -> int:
    """Hold an exclusive flock on the lock file beside the socket for the life of the
    process; returns its descriptor. The file is opened without following a symlink and
    must be a regular file of ours (``open_private``): whatever someone planted there is
    refused, never truncated or re-moded."""
    return _hold_lock(
        settings.lock_path,
        "instance lock",
        lambda holder, _socket: (
            f"another makad (pid {holder}) is already serving {settings.socket_path}: "
            f"use that one, or stop it first with `{_stop_command(settings.socket_path)}`"
        ),
    )


def _stop_command(socket_path: Path) -> str:
    """The ``maka stop`` that reaches the daemon on ``socket_path``."""
    if socket_path == default_socket_path():
        return "maka stop"
    import shlex  # only when a second daemon is refused: start-up does not pay for it

    return f"maka --socket {shlex.quote(str(socket_path))} stop"


def take_data_lock(settings: DaemonSettings) -> int:
    """Hold an exclusive flock in the data directory for the life of the process: two
    daemons on one data directory (another socket: another MAKAD_SOCKET or
    XDG_RUNTIME_DIR) would both write its ledgers, revisions and memory files. The lock
    file names the holder's socket too, so the one refused can say where it serves."""
    return _hold_lock(
        settings.data_lock_path,
        "data directory lock",
        lambda holder, socket_path: _data_dir_taken(settings.data_dir, holder, socket_path),
        note=str(settings.socket_path),
    )


def _data_dir_taken(data_dir: Path, holder: str, socket_path: str) -> str:
    """Why a second daemon on ``data_dir`` is refused, and how to reach or stop the first."""
    if not socket_path:  # a lock written without its socket: an older makad, a full disk
        return (
            f"another makad (pid {holder}) already uses the data directory {data_dir} on "
            "another socket (one daemon per data directory): use that daemon's socket, stop "
            "it, or give this one another --data-dir"
        )
    import shlex  # only when a second daemon is refused: start-up does not pay for it

    quoted = shlex.quote(socket_path)
    return (
        f"another makad (pid {holder}) already uses the data directory {data_dir}, serving "
        f"on {socket_path} (one daemon per data directory): use that daemon "
        f"(`maka --socket {quoted} …`, or MAKAD_SOCKET={quoted}), stop it with "
        f"`{_stop_command(Path(socket_path))}`, or give this one another --data-dir"
    )


FileId = tuple[int, int]


def file_id(path: Path) -> FileId | None:
    """(device, inode) of what is at ``path`` (not followed), None when nothing is."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def data_lock_held(fd: int, lock_path: Path) -> bool:
    """Whether the data directory lock file this process holds is still at its path: not
    deleted (with the whole folder, say) nor replaced. Once it is not, the daemon's state
    is gone and another daemon could take the folder."""
    held = os.fstat(fd)
    return held.st_nlink > 0 and file_id(lock_path) == (held.st_dev, held.st_ino)


class Surroundings:
    """What the daemon needs to find where it left it: the data directory (its lock file)
    and the socket file it bound (None: systemd's, not the daemon's to watch)."""

    def __init__(self, settings: DaemonSettings, data_lock: int, socket_id: FileId | None) -> None:
        self.settings = settings
        self.data_lock = data_lock
        self.socket_id = socket_id
        self.lost: StopReason | None = None

    def check(self) -> StopReason | None:
        """What is gone (blocking: a stat or two): ``data_dir_lost`` when the data directory
        was removed or replaced (its ledgers, identifier key and lock went with it),
        ``socket_lost`` when the socket file was (no client can reach the daemon, yet its
        locks keep a new one from starting); None while both are in place."""
        if not data_lock_held(self.data_lock, self.settings.data_lock_path):
            return "data_dir_lost"
        if self.socket_id is not None and file_id(self.settings.socket_path) != self.socket_id:
            return "socket_lost"
        return None

    async def stop_when_lost(self, server: Server) -> None:
        """Stop the daemon once its data directory or its socket file is gone."""
        while not server.stopping:
            await anyio.sleep(SURROUNDINGS_CHECK_S)
            try:
                lost = await anyio.to_thread.run_sync(self.check)
            except Exception as exc:  # no verdict this time (no thread to be had, a stat): look again later
                log.warning("surroundings_unchecked", error=type(exc).__name__)
                continue
            if lost is not None:
                log.error(lost, data_dir=str(self.settings.data_dir), socket=str(self.settings.socket_path))
                self.lost = lost
                server.request_stop(lost)
                return

    def farewell(self) -> str | None:
        """What to print when the daemon stopped because something was lost."""
        if self.lost == "data_dir_lost":
            return (
                f"the data directory {self.settings.data_dir} was removed or replaced while it ran; "
                "stopped (start makad again to begin afresh there)"
            )
        if self.lost == "socket_lost":
            return (
                f"the socket file {self.settings.socket_path} was removed or replaced while it ran, "
                "so no client could reach it; stopped (start makad again to serve there)"
            )
        return None

    def unlink_socket(self) -> None:
        """Remove the socket file at exit, if it is still the one the daemon bound."""
        path = self.settings.socket_path
        if self.socket_id is not None and file_id(path) == self.socket_id:
            _unlink_quietly(path)


def _hold_lock(lock_path: Path, what: str, busy: Callable[[str, str], str], note: str = "") -> int:
    """Take ``lock_path`` and write this process's pid into it (and ``note`` on the next
    line); when another process holds it, ``busy(its pid, its note)`` is the refusal."""
    try:
        fd = open_private(lock_path)
    except NotPrivate as exc:
        raise UnsafeFolder(f"the {what} {exc}") from None
    except OSError as exc:
        raise StartupError(f"the {what} {lock_path} cannot be opened: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        written = os.pread(fd, 4096, 0).decode("utf-8", "replace")
        os.close(fd)
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        holder, _, holder_note = written.partition("\n")
        raise StartupError(busy(holder.strip() or "unknown", holder_note.strip())) from None
    try:
        os.ftruncate(fd, 0)
        # fsencode: a socket path need not be UTF-8 (surrogate escapes would not encode)
        os.pwrite(fd, os.fsencode(f"{os.getpid()}\n{note}" if note else str(os.getpid())), 0)
    except OSError as exc:  # a full disk: the lock holds all the same, its holder unnamed
        log.warning("lock_pid_not_written", lock=str(lock_path), error=exc.strerror)
    except BaseException:
        os.close(fd)
        raise
    return fd


def bind_socket(path: Path) -> socket.socket:
    """Bind a fresh listening socket, replacing a stale socket file (we hold the lock).

    Its mode (0600) comes from the umask at ``bind``: a mode set by path afterwards would
    follow whatever symlink stood there by then."""
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
    except OSError as exc:  # no room for one more file there, a read-only folder …
        sock.close()
        raise StartupError(f"the socket {path} cannot be made: {exc.strerror}") from None
    finally:
        os.umask(old_umask)
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
        large_slot_hold_s=settings.large_slot_hold_s,
        max_unsent_reply_bytes=settings.max_unsent_reply_bytes,
        shutdown_grace_s=settings.shutdown_grace_s,
        fault_point=faults.point,
    )


def _openrpc_document() -> dict[str, Any]:
    from makad.app import openrpc_document  # loaded: rpc.discover is served with the app

    return openrpc_document()


def load_app_modules(data_dir: Path) -> bytes:
    """Make everything in the data directory owner-only, import the services, stores and
    wire types, and read (or create) the identifier key: the blocking part of building the
    app, done in a worker thread."""
    tightened = tighten_tree(data_dir)
    if tightened:
        log.warning("data_dir_tightened", data_dir=str(data_dir), modes_changed=tightened)
    from makad.app import load_or_create_key  # the import is most of the work

    return load_or_create_key(data_dir)


class Composition:
    """Serve the system methods from the start; load and add every other method after.

    Their modules (services, stores, wire types, the OpenRPC builder) are most of the
    daemon's start-up, so they are imported in a worker thread once the daemon listens;
    a request for one of their methods that arrives first waits for them
    (``Dispatcher.defer_rest``), it is never refused."""

    def __init__(self, info: DaemonInfo, faults: Faults) -> None:
        self.info = info
        self.faults = faults
        self.system = SystemService(info, _openrpc_document)
        early = {name: handler for name, handler in self.system.handlers().items() if name in EARLY_METHODS}
        inject_faults(faults, early)
        catalogue = {spec.name: spec for spec in SYSTEM_METHODS if spec.name in EARLY_METHODS}
        self.dispatcher = Dispatcher(catalogue, early, info.settings.max_reply_bytes)
        self.dispatcher.defer_rest()
        self.app: App | None = None
        self.failure: Exception | None = None
        self.loaded = anyio.Event()

    async def load(self, tg: anyio.abc.TaskGroup, where: str) -> None:
        """Load and build the rest, start its background tasks, register its methods."""
        try:
            key = await anyio.to_thread.run_sync(load_app_modules, self.info.settings.data_dir)
            from makad.app import build_app
            from makad.wire.catalogue import CATALOGUE

            app = build_app(self.info, self.system, self.faults, key)
            self.app = app
            app.watcher.start(tg)
            app.notes.start(tg)
            app.attention.start(tg)
            app.idle.start(tg)
            self.dispatcher.add_rest(CATALOGUE, app.handlers)
            # Logged once everything is served: the first line redacted loads the secret
            # scanner (makad.core.redaction), which the first pong need not wait for.
            log.info("listening", socket=where, data_dir=str(self.info.settings.data_dir), pid=os.getpid())
        except Exception as exc:  # the daemon cannot serve: it stops, and exits 1
            ref = new_ref()
            log.error("start_failed", ref=ref, exc_info=True)
            self.failure = exc
            self.dispatcher.rest_failed(ref)
            self.info.request_stop("start_failed")
        finally:
            self.loaded.set()

    def close(self) -> None:
        if self.app is not None:
            self.app.semantic.stop()
            self.app.registry.close()


def _no_room(data_dir: Path) -> str | None:
    """``status``'s probe of the data directory's disk (on a worker thread; imported there,
    as nothing of the ledger's is needed to start listening)."""
    from makad.store.ledger.recovery import no_room

    return no_room(data_dir)


async def run(settings: DaemonSettings) -> int:
    info = DaemonInfo(settings=settings, no_room=lambda: _no_room(settings.data_dir))
    with ExitStack() as stack:
        activated = systemd.activated_socket()
        if activated is None:
            check_socket_path(settings.socket_path)
            secure_socket_folder(settings.socket_path.parent)
        secure_data_dir(settings.data_dir)
        if settings.user_memory is not None:
            secure_user_memory(settings.user_memory)
        if activated is None:
            stack.callback(os.close, take_instance_lock(settings))
        data_lock = take_data_lock(settings)
        stack.callback(os.close, data_lock)
        if activated is None:
            raw = bind_socket(settings.socket_path)
            surroundings = Surroundings(settings, data_lock, file_id(settings.socket_path))
            stack.callback(surroundings.unlink_socket)
        else:
            raw = activated
            surroundings = Surroundings(settings, data_lock, None)
            info.socket_path = systemd.socket_name(raw) or str(settings.socket_path)
            info.socket_activated = True
        listener: SocketListener = await SocketListener.from_socket(raw)

        # The one fault seam: armed by the test environment only (makad.faults).
        faults = Faults(
            point=settings.fault_point,
            disk_full=settings.fault_disk_full,
            busy_timeout_ms=settings.fault_busy_timeout_ms,
        )
        composition = Composition(info, faults)
        stack.callback(composition.close)
        server = Server(composition.dispatcher, limits_for(settings, raise_open_file_limit(), faults))
        info.connection_count = lambda: len(server.connections)
        info.request_stop = server.request_stop
        info.stopping = lambda: server.stopping

        async with anyio.create_task_group() as tg:
            await tg.start(_stop_on_signals, server)
            where = (
                f"systemd socket {info.socket_path}" if activated is not None else str(settings.socket_path)
            )
            tg.start_soon(composition.load, tg, where)
            tg.start_soon(heap.housekeeping_forever)
            tg.start_soon(surroundings.stop_when_lost, server)
            logs.say(f"makad {__version__} listening on {where}")
            systemd.notify("READY=1")
            await server.run(listener)
            systemd.notify("STOPPING=1")
            await composition.loaded.wait()
            if composition.app is not None:
                composition.app.watcher.stop()
            tg.cancel_scope.cancel()
        log.info("stopped")
    if composition.failure is not None:
        logs.say(f"makad: could not start: {_said(composition.failure)}", "stderr")
        return 1
    farewell = surroundings.farewell()
    if farewell is not None:
        logs.say(f"makad: {farewell}", "stderr")
        return 1
    return 0


async def _stop_on_signals(
    server: Server, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
) -> None:
    # SIGHUP: the terminal makad runs in closed; stopping cleanly beats dying mid-request.
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        task_status.started()
        async for signum in signals:
            log.info("signal", signal=signal.Signals(signum).name)
            server.request_stop("signal")
            return


def _said(exc: Exception) -> str:
    """A start-up failure in a line: the system's reason for an OSError (a full disk, a
    refusal) and the file it names, else the exception."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror + (f" ({exc.filename})" if exc.filename else "")
    return repr(exc)


def _unlink_quietly(path: Path) -> None:
    try:
        if stat.S_ISSOCK(path.lstat().st_mode):
            path.unlink()
    except OSError:
        pass


def main(argv: list[str] | None = None) -> int:
    logs.ensure_standard_streams()
    heap.configure_malloc()
    heap.configure_collector()
    settings = load(argv, stderr_is_tty=sys.stderr.isatty())
    logs.configure(settings.log_format, settings.log_level)
    try:
        return anyio.run(run, settings, backend="asyncio")
    except StartupError as exc:
        logs.say(f"makad: {exc}", "stderr")
        return exc.exit_code
    except KeyboardInterrupt:
        return 0


def run_and_exit() -> NoReturn:
    """The ``makad`` command: ``main()``, then out with its exit code.

    Once ``main()`` has returned everything the daemon opened is closed (ledgers, the
    socket, the locks). What the interpreter would still do is tear down its ~400 modules
    object by object: ~0.1 s of CPU, more than the rest of a stop. Exit handlers (the
    logging module's flush among them) and non-daemon threads are still waited for."""
    code = main()
    # The interpreter's first steps at exit, in its order: threading's exit callbacks (a
    # thread pool left open is told to end there, else a join of its threads would wait
    # for ever), a join of every non-daemon thread, then the exit handlers.
    shutdown_threads = getattr(threading, "_shutdown", None)
    if shutdown_threads is not None:
        shutdown_threads()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):  # a closed or broken stream: nothing more to say
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run_and_exit()
