"""The daemon never touches the disk on its event loop while serving: every method, called
through a real socket on a daemon run in this process, does its file IO and SQLite on
worker threads (a slow or hung disk then stalls only the calls that need it)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from makad.daemon import run
from makad.settings import DaemonSettings
from tests.protocol.test_served_results import Session, _exercise
from tests.support import RawConnection, short_temp_dir

# Audit events that mean the filesystem or SQLite was asked for something (PEP 578).
# ``os.stat``, ``os.lstat`` and ``os.fsync`` raise none: they are wrapped instead.
_DISK_EVENTS = frozenset(
    {
        "open",
        "os.listdir",
        "os.scandir",
        "os.rename",
        "os.remove",
        "os.rmdir",
        "os.mkdir",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "os.link",
        "os.symlink",
        "shutil.copyfile",
        "shutil.rmtree",
        "sqlite3.connect",
    }
)
_WRAPPED = ("stat", "lstat", "fstat", "access", "fsync", "fdatasync")


@dataclass
class LoopWatch:
    """Records each disk access made on the armed loop's thread, with where it was made."""

    loop_thread: int | None = None
    hits: list[tuple[str, str]] = field(default_factory=list)
    busy: bool = False

    def on_loop(self) -> bool:
        return self.loop_thread is not None and threading.get_ident() == self.loop_thread

    def record(self, what: str) -> None:
        if not self.on_loop() or self.busy:
            return
        self.busy = True  # what the check itself reads is not the daemon's
        try:
            frames = _frames()
            if not _allowed(frames):
                ours = [
                    f"{name.rsplit('/makad/', 1)[-1]}:{line} {fn}"
                    for name, line, fn in frames
                    if "/makad/" in name
                ] or [f"{name}:{line} {fn}" for name, line, fn in frames[:8]]
                self.hits.append((what, " <- ".join(ours[:4])))
        finally:
            self.busy = False

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if event in _DISK_EVENTS:
            self.record(f"{event} {args[0]!r}" if args else event)


def _frames() -> list[tuple[str, int, str]]:
    """(file, line, function) of the caller's stack, innermost first (no source read)."""
    frame = sys._getframe(2)
    found = []
    while frame is not None:
        found.append((frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name))
        frame = frame.f_back
    return found


def _allowed(frames: list[tuple[str, int, str]]) -> bool:
    """Disk accesses on the loop this test accepts, each for the reason given."""
    for name, _, fn in frames:
        # A module imported on first use (Python's import system): once per process, and the
        # request-only modules are imported on a worker thread at start-up (makad.warmup).
        if name.startswith("<frozen importlib"):
            return True
        # A logged traceback's source lines (``linecache``): Python's own files, read once
        # and cached, and only when something already went wrong.
        if name.endswith("/linecache.py"):
            return True
        # After the server stopped (the ledgers closed, the socket removed): no call waits.
        if name.endswith("/makad/daemon.py") and fn in ("close", "unlink_socket"):
            return True
    return False


_WATCH = LoopWatch()
_HOOKED = False


def _wrap(name: str) -> Callable[..., Any]:
    real = getattr(os, name)

    def checked(*args: Any, **kwargs: Any) -> Any:
        _WATCH.record(f"os.{name} {args[0]!r}" if args else f"os.{name}")
        return real(*args, **kwargs)

    return checked


def _traced_connect(real: Callable[..., sqlite3.Connection]) -> Callable[..., sqlite3.Connection]:
    """``sqlite3.connect`` whose connections report each statement where it runs: statements
    raise no audit event."""

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection = real(*args, **kwargs)
        connection.set_trace_callback(lambda sql: _WATCH.record(f"sql {sql[:60]!r}"))
        return connection

    return connect


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[LoopWatch]:
    """The process-wide watch, hooked once (an audit hook cannot be removed), reset per test."""
    global _HOOKED
    if not _HOOKED:
        sys.addaudithook(lambda event, args: _WATCH.audit(event, args))
        _HOOKED = True
    for name in _WRAPPED:
        monkeypatch.setattr(os, name, _wrap(name))
    monkeypatch.setattr(sqlite3, "connect", _traced_connect(sqlite3.connect))
    _WATCH.loop_thread = None
    _WATCH.hits = []
    yield _WATCH
    _WATCH.loop_thread = None


def serve_in_temp_dir(watch: LoopWatch, exercise: Callable[[Session, str], None], **settings: Any) -> None:
    """``_serve_and_exercise`` in a short temp dir of its own, removed afterwards."""
    root = short_temp_dir()
    try:
        _serve_and_exercise(root, watch, exercise, **settings)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _serve_and_exercise(
    root: Path, watch: LoopWatch, exercise: Callable[[Session, str], None], **more: Any
) -> None:
    """Run a daemon in this thread's event loop; once it serves every method, arm the watch
    and have ``exercise`` call it from another thread (its last call stops the daemon)."""
    workspace = root / "ws"
    workspace.mkdir()
    (root / "warm").mkdir()
    settings = DaemonSettings(
        socket_path=root / "s.sock", data_dir=root / "data", log_format="json", log_level="warning", **more
    )

    def client() -> None:
        deadline = time.monotonic() + 30
        while not settings.socket_path.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        with RawConnection(settings.socket_path, timeout=60) as conn:
            session = Session(conn)
            # Start-up is over once a workspace method answers (the rest is loaded then).
            session.call("get_settings", {"workspace": str(root / "warm")})
            watch.loop_thread = loop_thread
            exercise(session, str(workspace))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, settings)
            await anyio.to_thread.run_sync(client)

    loop_thread = threading.get_ident()
    try:
        anyio.run(main, backend="asyncio")
    finally:
        watch.loop_thread = None


def _everything(s: Session, ws: str) -> None:
    """Every method (``_exercise``), after the paths it does not take: a new workspace and a
    second spelling of it, the user level, a hand edit the watcher takes in, and a folder
    whose id file was swapped."""
    folder = Path(ws)
    link = folder.parent / "link"
    link.symlink_to(folder)
    s.call("subscribe", {"workspace": ws})
    s.call("add_entry", {"workspace": ws, "title": "Shell", "content": "Ana uses zsh."})
    s.call("read_state", {"workspace": str(link)})
    s.call("read_state", {"workspace": "@user"})
    s.call("add_entry", {"workspace": "@user", "title": "Editor", "content": "Ana uses vim."})
    s.call("build_context", {"workspace": ws, "budgetTokens": 1000})
    memory = folder / "memory" / "MEMORY.md"
    memory.write_text(memory.read_text() + "\n## Typed\nBy hand.\n")
    deadline = time.monotonic() + 30
    while not s.notifications and time.monotonic() < deadline:  # the watcher took it in
        s.call("ping")
        time.sleep(0.02)
    assert s.notifications, "the hand edit was not taken in"
    id_file = folder / "memory" / ".maka-id"
    id_file.write_text("0" * 32 + "\n")
    state = s.call("read_state", {"workspace": ws})
    assert "new_workspace" in {w["kind"] for w in state["warnings"]}
    s.call("unsubscribe", {"workspace": ws})
    _exercise(s, ws)


def test_no_method_touches_the_disk_on_the_event_loop(watch: LoopWatch) -> None:
    """Every method served does its file IO and SQLite on worker threads, never on the loop."""
    serve_in_temp_dir(watch, _everything)
    seen = sorted({f"{what}  [{where}]" for what, where in watch.hits})
    assert not seen, "disk access on the event loop:\n" + "\n".join(seen)


def _many_folders(s: Session, ws: str) -> None:
    """Entries and sessions in more folders than ledgers may stay open, each used again
    after its ledger was closed."""
    folders = [str(Path(ws).parent / f"many{n}") for n in range(6)]
    for name in folders:
        os.mkdir(name)
        s.call("add_entry", {"workspace": name, "title": "Note", "content": f"in {name}"})
        sid = s.call("open_session", {"workspace": name})["sessionId"]
        s.call(
            "append_events",
            {"workspace": name, "sessionId": sid, "events": [{"type": "user_message", "text": "hi"}]},
        )
    for name in folders:
        s.call("build_context", {"workspace": name, "budgetTokens": 500})
        s.call("search_history", {"workspace": name, "query": "hi"})
    s.call("shutdown")


def test_ledgers_closed_past_the_cap_reopen_off_the_event_loop(watch: LoopWatch) -> None:
    """Closing ledgers past the open-workspace cap and reopening them is done on worker threads."""
    serve_in_temp_dir(watch, _many_folders, max_open_workspaces=2)
    seen = sorted({f"{what}  [{where}]" for what, where in watch.hits})
    assert not seen, "disk access on the event loop:\n" + "\n".join(seen)


def test_the_watch_sees_a_read_on_the_loop(watch: LoopWatch) -> None:
    """The check fails for a file read on the loop thread, and not for one on a worker thread."""
    root = short_temp_dir()
    try:
        (root / "f").write_text("x")

        async def main() -> None:
            watch.loop_thread = threading.get_ident()
            await anyio.to_thread.run_sync((root / "f").read_text)
            assert watch.hits == []
            os.path.exists(root / "f")  # noqa: ASYNC240 (the blocking call this test must see)
            (root / "f").read_text()
            watch.loop_thread = None

        anyio.run(main, backend="asyncio")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert [what.split()[0] for what, _ in watch.hits] == ["os.stat", "open"]
