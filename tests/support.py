"""Test support: start/stop a real makad subprocess and talk raw bytes to it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from maka import Client
from makad.settings import MAX_SOCKET_PATH_BYTES

STARTUP_TIMEOUT_S = 20.0
# The tests put sockets at most this far below a temp root (``/mkXXXXXXXX`` and
# ``/run/maka/makad.sock``, and a margin); AF_UNIX allows MAX_SOCKET_PATH_BYTES in all.
SOCKET_BELOW_ROOT_BYTES = 40
FALLBACK_TEMP_ROOT = "/tmp"


def short_temp_root(base: str | None = None) -> str:
    """Where the tests make their temp dirs: ``$TMPDIR`` (Python's temp dir) when the
    sockets below it stay within the AF_UNIX limit, else /tmp."""
    chosen = base if base is not None else tempfile.gettempdir()
    if len(os.fsencode(chosen)) + SOCKET_BELOW_ROOT_BYTES <= MAX_SOCKET_PATH_BYTES:
        return chosen
    return FALLBACK_TEMP_ROOT


def inotify_watched_inodes(pid: int) -> set[int]:
    """The inodes of the folders process ``pid``'s inotify watches are on (from /proc)."""
    found: set[int] = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd}").read_text()
        except OSError:
            continue  # closed meanwhile (the watch restarting)
        for line in info.splitlines():
            if line.startswith("inotify wd:"):
                fields = dict(part.split(":", 1) for part in line.split()[1:])
                found.add(int(fields["ino"], 16))
    return found


def short_temp_dir(prefix: str = "mk") -> Path:
    """A fresh private temp dir under ``short_temp_root()`` (the caller removes it)."""
    return Path(tempfile.mkdtemp(prefix=prefix, dir=short_temp_root()))


class DaemonProcess:
    """A makad subprocess bound to ``<root>/s.sock`` with data in ``<root>/data``."""

    def __init__(self, root: Path, env: dict[str, str] | None = None) -> None:
        self.root = root
        self.socket = root / "s.sock"
        self.data_dir = root / "data"
        self.workspace = root / "ws"
        self.workspace.mkdir(exist_ok=True)
        self.extra_env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.stderr_path = root / "makad.log"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "makad",
            "--socket",
            str(self.socket),
            "--data-dir",
            str(self.data_dir),
            "--log-format",
            "json",
        ]

    def start(self, extra_env: dict[str, str] | None = None) -> None:
        env = {**os.environ, **self.extra_env, **(extra_env or {})}
        self._log = open(self.stderr_path, "a", encoding="utf-8")  # noqa: SIM115
        self.proc = subprocess.Popen(
            self.command(), stdout=subprocess.PIPE, stderr=self._log, text=True, env=env
        )
        try:
            wait_listening(self.proc)
        except BaseException:
            if self.proc.poll() is not None:  # it never listened: nothing is left to stop
                if self.proc.stdout:
                    self.proc.stdout.close()
                self._log.close()
                self.proc = None
            raise

    def client(self, timeout: float = 30.0) -> Client:
        return Client(str(self.socket), timeout=timeout)

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0) -> Any:
        with self.client(timeout) as c:
            return c.call(method, params)

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()

    def restart(self, extra_env: dict[str, str] | None = None) -> None:
        self.stop()
        self.start(extra_env)

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        code: int | None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        else:
            code = self.proc.returncode
        if self.proc.stdout:
            self.proc.stdout.close()
        self._log.close()
        self.proc = None
        return code

    def log_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def wait_for_log(self, event: str, timeout: float = 30.0) -> None:
        """Block until the daemon has logged ``event`` (a JSON log line's event name)."""
        deadline = time.monotonic() + timeout
        while f'"{event}"' not in self.log_text():
            if time.monotonic() >= deadline:
                raise TimeoutError(f"makad did not log {event} in {timeout} s")
            time.sleep(0.01)


class SharedDaemon(DaemonProcess):
    """A module's daemon seen through one test's own workspace. Calls go to the shared
    daemon; stopping, killing or restarting it is refused, as that would pull it from
    under the module's other tests (such a test takes the per-test ``daemon`` fixture)."""

    def __init__(self, shared: DaemonProcess, workspace: Path) -> None:
        self.__dict__.update(shared.__dict__)
        self.workspace = workspace

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise RuntimeError("a shared daemon is not stopped by one test: use the `daemon` fixture")

    start = restart = stop = kill9 = _refuse


def daemon_in_tmp(env: dict[str, str] | None = None) -> Iterator[DaemonProcess]:
    """A started daemon in its own short temp dir, stopped and removed afterwards
    (the body of a module-scoped fixture: ``yield from daemon_in_tmp()``)."""
    root = short_temp_dir()
    proc = DaemonProcess(root, env=env)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


def wait_listening(proc: subprocess.Popen[str]) -> str:
    """Block until the daemon prints its 'listening on' line (or fails)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "listening on" in line:
            return line
        if not line and proc.poll() is not None:
            raise RuntimeError(f"makad exited with {proc.returncode} before listening")
    raise TimeoutError("makad did not start in time")


class RawConnection:
    """A raw socket speaking either NDJSON or Content-Length framing."""

    def __init__(self, path: Path, framing: str = "ndjson", timeout: float = 30.0) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.framing = framing
        self.buffer = b""

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(self, payload: bytes | str) -> None:
        if isinstance(payload, str):
            payload = payload.encode()
        if self.framing == "lsp":
            self.sock.sendall(b"Content-Length: %d\r\n\r\n" % len(payload) + payload)
        else:
            self.sock.sendall(payload + b"\n")

    def recv_message(self) -> Any:
        """The next message in this connection's framing, decoded from JSON."""
        while True:
            if self.framing == "lsp":
                head, sep, rest = self.buffer.partition(b"\r\n\r\n")
                if sep:
                    length = int(head.split(b":", 1)[1])
                    if len(rest) >= length:
                        self.buffer = rest[length:]
                        return json.loads(rest[:length])
            else:
                line, sep, rest = self.buffer.partition(b"\n")
                if sep:
                    self.buffer = rest
                    return json.loads(line)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buffer += chunk

    def request(self, payload: Any) -> Any:
        self.send(json.dumps(payload))
        return self.recv_message()

    def at_eof(self) -> bool:
        """True when the daemon has closed the connection (reads give EOF or reset)."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False


def ping_ok(path: Path) -> bool:
    with RawConnection(path) as conn:
        return conn.request({"jsonrpc": "2.0", "method": "ping", "id": 1})["result"] == "pong"
