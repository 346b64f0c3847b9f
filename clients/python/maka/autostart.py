"""Start makad on demand when nothing answers on the socket, the way gpg-agent is started.

A client that finds no daemon (no socket file, or one a killed daemon left behind) runs
``python -m makad --socket SOCKET`` with the same interpreter, fully detached: a small
launcher forks it into a session of its own and exits at once, so the daemon is not the
client's child (it is re-parented to init, or the nearest subreaper) and nothing of the
client's reaches it: stdin from /dev/null, stdout and stderr appended to
``<user log dir>/makad.log`` (``~/.local/state/maka/log/makad.log`` on Linux), working
directory ``/``. Everything else is makad's default or comes from the environment the
client runs in (``MAKAD_DATA_DIR`` …), so an autostarted daemon is the one ``makad``
would have started. The client then waits, at most ``START_TIMEOUT_S``, for the socket to
answer. It says "started one" only once the daemon answers; a daemon that exits at once
(bad settings, an unusable data dir …) is reported as a failure, with its last logged line
and the log's path, and for ``RETRY_AFTER_FAILURE_S`` after that the same client process
does not start another: each connect in that time raises the same failure at once (a
long-lived client such as ``maka mcp`` would otherwise start a doomed daemon per call).

Race-safe without a lock of its own: two clients that find nothing at the same moment both
start a process, but makad takes an exclusive lock before it touches the socket; the
second process exits at once ("already serving") and both clients connect to the first.

Only a client's first connect may start a daemon, and a reconnect after an unannounced
loss (a crash); a daemon that says it stops on purpose (the ``daemon_stopping``
notification: ``shutdown``, ``maka stop``, SIGTERM) stays stopped, whatever its clients.
A daemon that stopped because its data directory or socket file was removed under it
(``data_dir_lost``, ``socket_lost``) did not stop on purpose: it is started again.

``MAKA_NO_AUTOSTART=1`` refuses everywhere (also where the caller asked for autostart).
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import platformdirs

from maka.errors import DaemonUnavailable
from maka.notifications import DAEMON_STOPPING, Notification

# anyio and makad.private_files (which loads the daemon's package, structlog with it) are
# imported where a daemon is started or its log read: a client that finds one running, as
# nearly every `maka` command does, never pays for them.

NO_AUTOSTART_ENV = "MAKA_NO_AUTOSTART"
START_TIMEOUT_S = 15.0
# After an autostarted daemon exited at once, this process starts none for so long.
RETRY_AFTER_FAILURE_S = 10.0
LOG_ROTATE_BYTES = 4 << 20
# Variables addressed to the client's own supervisor: a daemon that inherited them would
# take a socket or send readiness meant for someone else.
SUPERVISOR_ENV = ("LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET")
LOST_RACE = "already serving"
# Forks the daemon into a session of its own, prints its pid and exits: the daemon is
# then nobody's child but init's (run with -I -S: no site, no user paths, a few ms).
_DETACH = """
import os, sys
pid = os.fork()
if pid == 0:
    os.setsid()
    os.dup2(2, 1)
    try:
        os.execv(sys.argv[1], sys.argv[1:])
    except OSError as exc:
        os.write(2, f"maka: cannot run {sys.argv[1]}: {exc.strerror}\\n".encode())
        os._exit(127)
os.write(1, str(pid).encode())
"""

log = logging.getLogger("maka.autostart")
T = TypeVar("T")
# Per socket path: when (time.monotonic()) a daemon started for it exited at once, and why.
_failed: dict[str, tuple[float, DaemonUnavailable]] = {}


def refused() -> bool:
    """True when the environment says never to start a daemon (MAKA_NO_AUTOSTART set)."""
    return os.environ.get(NO_AUTOSTART_ENV, "").strip().lower() not in ("", "0", "false", "no", "off")


# The longest Unix socket path connect() takes (sun_path less its NUL: 108 on Linux,
# 104 on macOS and the BSDs).
MAX_SOCKET_PATH_BYTES = 107 if sys.platform.startswith("linux") else 103
# What a connect error that means "no daemon there" says to a person.
WHY_NOBODY: dict[type[OSError], str] = {
    FileNotFoundError: "no socket there",
    ConnectionRefusedError: "the socket file is there but nothing listens on it",
}


def nobody_listening(exc: OSError) -> bool:
    """A connect error that means no daemon runs there (as opposed to one we may not use)."""
    return isinstance(exc, FileNotFoundError | ConnectionRefusedError)


def unavailable(
    socket_path: str, exc: OSError, requested: bool, stopped: str | None = None
) -> DaemonUnavailable:
    """The error for a failed connect, saying when autostart was refused by the environment,
    or was not tried because the daemon had said it stopped on purpose (``stopped``)."""
    size = len(os.fsencode(socket_path))
    if not nobody_listening(exc) and size > MAX_SOCKET_PATH_BYTES:
        return DaemonUnavailable(
            socket_path,
            "path too long",
            message=f"cannot use the socket {socket_path}: its path is {size} bytes, over the "
            f"{MAX_SOCKET_PATH_BYTES} a Unix socket path may have; pass a shorter --socket or "
            "MAKAD_SOCKET (and start makad with the same)",
        )
    if isinstance(exc, BlockingIOError):  # maka.dial waited out the timeout
        return DaemonUnavailable(
            socket_path,
            "listen queue full",
            message=f"makad on {socket_path} is too busy to take a connection: {exc.strerror}; "
            "try again, or give the client a longer timeout (`maka --timeout S`)",
        )
    reason = (
        WHY_NOBODY.get(type(exc), type(exc).__name__) if nobody_listening(exc) else (exc.strerror or str(exc))
    )
    if requested and nobody_listening(exc) and refused():
        # (The reason goes inside parentheses of the message: none nested in it.)
        reason += f"; autostart is off: {NO_AUTOSTART_ENV} is set"
    elif stopped is not None and nobody_listening(exc):
        reason += (
            f"; makad was stopped on purpose, reason {stopped}, so this client does not start it "
            "again: any new `maka` command does"
        )
    return DaemonUnavailable(socket_path, reason)


# Stops that say the daemon lost its surroundings (its data directory or its socket file
# removed or replaced under it), not that anyone asked it to stop: what its clients need
# then is a new daemon, so they start one as after a crash.
LOST_SURROUNDINGS = frozenset({"data_dir_lost", "socket_lost"})


def stop_reason(message: Mapping[str, Any]) -> str | None:
    """The reason in a ``daemon_stopping`` notification, else None."""
    if message.get("method") != DAEMON_STOPPING:
        return None
    params = message.get("params")
    reason = params.get("reason") if isinstance(params, Mapping) else None
    return reason if isinstance(reason, str) and reason else "stopped"


class StopAware:
    """What the sync and async clients share about starting a daemon: a connect that found
    none starts one only when asked to (``autostart``), when the environment allows it,
    and when no daemon said it stopped on purpose (``daemon_stopped``, from the
    ``daemon_stopping`` notifications the client sees)."""

    socket_path: str
    autostart: bool
    daemon_stopped: str | None
    on_notification: Callable[[Notification], None] | None

    def _seen(self, message: Notification) -> None:
        """A notification as it is read: a stop on purpose is noted, the callback called."""
        reason = stop_reason(message)
        if reason is not None and reason not in LOST_SURROUNDINGS:
            self.daemon_stopped = reason
        if self.on_notification is not None:
            self.on_notification(message)

    def _check_may_start(self, exc: OSError) -> None:
        """After a failed connect: raise why no daemon will be started, unless one may be."""
        if not (self.autostart and self.daemon_stopped is None and nobody_listening(exc) and not refused()):
            raise unavailable(self.socket_path, exc, self.autostart, self.daemon_stopped) from None


def process_gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its parent to reap it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # the pid is someone else's now
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (macOS): the kill above said it runs
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


def log_path() -> Path:
    return Path(platformdirs.user_log_dir("maka", appauthor=False)) / "makad.log"


def daemon_command(socket_path: str) -> list[str]:
    """makad from this interpreter (the same installation as the client), else from PATH."""
    if sys.executable and importlib.util.find_spec("makad") is not None:
        return [sys.executable, "-m", "makad", "--socket", socket_path]
    found = shutil.which("makad")
    if found is None:
        raise DaemonUnavailable(socket_path, "no daemon, and makad is not installed here to start one")
    return [found, "--socket", socket_path]


@dataclass
class Launch:
    """A makad process this client started (not its child), and where its output goes."""

    socket_path: str
    pid: int
    log: Path
    log_offset: int

    def failure(self) -> DaemonUnavailable | None:
        """Why it gave up, or None while it runs or when it lost the start race to another."""
        if not process_gone(self.pid):
            return None
        said = _read_from(self.log, self.log_offset)
        if LOST_RACE in said:
            return None  # another makad holds the lock: it answers shortly
        last = next((line.strip() for line in reversed(said.splitlines()) if line.strip()), "")
        why = last[:300] or "it wrote nothing to its log"
        return DaemonUnavailable(
            self.socket_path,
            f"autostart failed: {why}",
            message=f"could not start makad on {self.socket_path}: the daemon started for it "
            f"exited at once: {why} — its log: {self.log}",
        )

    def timed_out(self, timeout: float) -> DaemonUnavailable:
        return DaemonUnavailable(
            self.socket_path,
            f"autostarted makad (pid {self.pid}) did not answer within {timeout:g} s (log: {self.log})",
        )


def _absolute_model_path(env: dict[str, str]) -> dict[str, str]:
    """``MAKAD_EMBEDDING_MODEL`` made absolute when it names a path relative to this
    directory: the daemon runs in ``/``, where it would name another (or none)."""
    spec = env.get("MAKAD_EMBEDDING_MODEL", "").strip()
    if not spec or os.path.isabs(os.path.expanduser(spec)) or not os.path.exists(spec):
        return {}
    return {"MAKAD_EMBEDDING_MODEL": os.path.abspath(spec)}


def launch(socket_path: str) -> Launch:
    """Start a detached makad for ``socket_path`` (blocking: a few milliseconds)."""
    from makad.private_files import NotPrivate, make_dirs, open_private

    command = daemon_command(socket_path)
    path = log_path()
    try:
        make_dirs(path.parent)
        _rotate(path)
        # Never through a symlink, a FIFO or a hard link someone planted at the log's path.
        fd = open_private(path, os.O_WRONLY | os.O_APPEND)
    except NotPrivate as exc:
        raise DaemonUnavailable(socket_path, f"cannot start makad: its log {exc}") from None
    try:
        offset = os.fstat(fd).st_size
        env = {k: v for k, v in os.environ.items() if k not in SUPERVISOR_ENV}
        env.update(_absolute_model_path(env))
        launcher = subprocess.run(
            [_interpreter(socket_path), "-I", "-S", "-c", _DETACH, *command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=fd,
            cwd="/",
            env=env,
            close_fds=True,
            check=False,
            timeout=START_TIMEOUT_S,
        )
    finally:
        os.close(fd)
    try:
        pid = int(launcher.stdout)
    except ValueError:
        raise DaemonUnavailable(
            socket_path, f"could not start makad (launcher status {launcher.returncode}; log: {path})"
        ) from None
    log.debug("no makad answered on %s: starting one (pid %d, log %s)", socket_path, pid, path)
    return Launch(socket_path, pid, path, offset)


def _announce(started: Launch) -> None:
    _failed.pop(started.socket_path, None)
    serving = lock_holder(started.socket_path)
    if serving is not None and serving != started.pid:
        # Another client's start took the lock first: the process this one launched exits.
        log.info(
            "no makad answered on %s: started one, as another client did at the same moment; "
            "theirs serves (pid %d, log %s)",
            started.socket_path,
            serving,
            started.log,
        )
        return
    log.info(
        "no makad answered on %s: started one (pid %d, log %s)", started.socket_path, started.pid, started.log
    )


def lock_holder(socket_path: str) -> int | None:
    """The pid the daemon serving ``socket_path`` wrote into its lock file
    (``SOCKET.lock``), or None when it cannot be read."""
    try:
        fd = os.open(socket_path + ".lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        written = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    return int(written) if written.isdigit() else None


def _held_back(socket_path: str) -> None:
    """Raise the failure of the daemon last started for ``socket_path`` when it was less than
    ``RETRY_AFTER_FAILURE_S`` ago, saying when this client tries again."""
    failed = _failed.get(socket_path)
    if failed is None:
        return
    at, exc = failed
    left = at + RETRY_AFTER_FAILURE_S - time.monotonic()
    if left <= 0:
        del _failed[socket_path]
        return
    raise DaemonUnavailable(
        socket_path,
        exc.reason,
        message=f"{exc} (this client starts another in {max(1, round(left))} s, at the next call)",
    )


def _interpreter(socket_path: str) -> str:
    """A Python to run the launcher with: this one, else python3 from PATH."""
    found = sys.executable or shutil.which("python3")
    if not found:
        raise DaemonUnavailable(socket_path, "no Python interpreter found to start makad with")
    return found


class _Wait:
    """The bounded wait for a launched daemon: what to do after each refused connect."""

    def __init__(self, started: Launch, timeout: float) -> None:
        self.started = started
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.delay = 0.01

    def pause_after(self, exc: OSError) -> float:
        """Seconds to wait before the next attempt; raises once waiting cannot help."""
        if not nobody_listening(exc):
            raise unavailable(self.started.socket_path, exc, True) from None
        failed = self.started.failure()
        if failed is not None:
            _failed[self.started.socket_path] = (time.monotonic(), failed)
            raise failed
        if time.monotonic() >= self.deadline:
            raise self.started.timed_out(self.timeout)
        delay, self.delay = self.delay, min(self.delay * 2, 0.2)
        return delay


def start_and_connect(socket_path: str, connect: Callable[[], T], wait_s: float = START_TIMEOUT_S) -> T:
    """Launch makad, then ``connect()`` until it answers (bounded by ``wait_s``)."""
    _held_back(socket_path)
    wait = _Wait(launch(socket_path), wait_s)
    while True:
        try:
            connected = connect()
        except OSError as exc:
            pause = wait.pause_after(exc)
        else:
            _announce(wait.started)
            return connected
        time.sleep(pause)


async def start_and_connect_async(
    socket_path: str, connect: Callable[[], Awaitable[T]], wait_s: float = START_TIMEOUT_S
) -> T:
    """``start_and_connect`` for async clients: the launch runs in a worker thread."""
    import anyio

    _held_back(socket_path)
    wait = _Wait(await anyio.to_thread.run_sync(launch, socket_path), wait_s)
    while True:
        try:
            connected = await connect()
        except OSError as exc:
            pause = wait.pause_after(exc)
        else:
            _announce(wait.started)
            return connected
        await anyio.sleep(pause)


def _rotate(path: Path) -> None:
    from makad.private_files import regular_file_stat

    with contextlib.suppress(OSError):
        st = regular_file_stat(path)
        if st is not None and st.st_size > LOG_ROTATE_BYTES:
            os.replace(path, path.with_name(path.name + ".1"))


def _read_from(path: Path, offset: int) -> str:
    from makad.private_files import open_regular, read_open

    try:
        fd = open_regular(path)
    except OSError:
        return ""
    try:
        os.lseek(fd, offset, os.SEEK_SET)
        return read_open(fd, path, 64 << 10).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
