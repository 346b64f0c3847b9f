"""A JSON-RPC server run as another user (``nobody``): what another local user could put
on the socket path. It answers every request with ``"pong"`` and reports every byte it got,
so a test can tell that a client refused it before sending anything."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

SERVER = r"""
import json, socket, sys, threading
path = sys.argv[1]
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(16)
print("listening as", __import__("os").geteuid(), flush=True)

def serve(conn):
    buffered = b""
    with conn:
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                return
            print("received", len(chunk), flush=True)
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                try:
                    request_id = json.loads(line).get("id")
                except ValueError:
                    request_id = None
                if request_id is not None:
                    reply = {"jsonrpc": "2.0", "id": request_id, "result": "pong"}
                    conn.sendall(json.dumps(reply).encode() + b"\n")

while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


def nobody() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam("nobody")
    except KeyError:
        return None


NOBODY = nobody()
SKIP_REASON = (
    "needs root (to act as, or give files to, another user: nobody)"
    if os.geteuid() != 0
    else "no `nobody` account here"
    if NOBODY is None
    else ""
)
needs_nobody = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON or "-")


def runnable_by_anyone(path: str) -> bool:
    """Whether a user with no rights of its own can run ``path`` (every folder above it
    searchable, the file executable by others)."""
    real = Path(os.path.realpath(path))
    if not real.is_file() or not real.stat().st_mode & 0o001:
        return False
    return all(folder.stat().st_mode & 0o001 for folder in real.parents)


def interpreter() -> str:
    """A Python that ``nobody`` can run (the test's may live in root's private home)."""
    for candidate in ("/usr/bin/python3", getattr(sys, "_base_executable", sys.executable), sys.executable):
        if runnable_by_anyone(candidate):
            return candidate
    pytest.skip("no Python here that nobody may run, for the server run as nobody")


class Impostor:
    """The server, as ``nobody``, on ``<folder of nobody's>/s.sock``."""

    def __init__(self) -> None:
        assert NOBODY is not None
        self.uid = NOBODY.pw_uid
        self.root = Path(tempfile.mkdtemp(prefix="mki", dir="/tmp"))
        os.chown(self.root, NOBODY.pw_uid, NOBODY.pw_gid)
        self.socket = self.root / "s.sock"
        self._received = 0
        self._lock = threading.Lock()
        self.proc = subprocess.Popen(
            [interpreter(), "-I", "-c", SERVER, str(self.socket)],
            user=NOBODY.pw_uid,
            group=NOBODY.pw_gid,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line.startswith(f"listening as {self.uid}"), line
        self._counter = threading.Thread(target=self._count, daemon=True)
        self._counter.start()

    def _count(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("received "):
                with self._lock:
                    self._received += int(line.split()[1])

    def received(self) -> int:
        """Bytes received so far (read a moment after the client is done)."""
        with self._lock:
            return self._received

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        self._counter.join(timeout=10)  # it reads to the end of the output, then stops
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        shutil.rmtree(self.root, ignore_errors=True)
