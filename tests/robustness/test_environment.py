"""The daemon's surroundings changed under it while it runs: its memory folder swapped for
a file, MEMORY.md swapped for a FIFO or a device. Each gives a stable error kind, the
daemon keeps serving, and nothing there is read, written or waited on; another process
holding the ledger's lock; the data directory removed or full."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.robustness.helpers import (
    BRIEF_BUSY_TIMEOUT_S,
    IS_ROOT,
    fill_disk,
    generalized,
    remote_error,
    serves_other_workspace,
    tiny_tmpfs,
)
from tests.support import DaemonProcess, RawConnection, ping_ok


def test_the_memory_folder_replaced_by_a_file(served: DaemonProcess) -> None:
    """memory/ swapped for a regular file: read_state says error, writes are
    invalid_workspace (not_a_directory), the file is left as it was, other workspaces are
    served, and once the folder is back the workspace works again."""
    w = str(served.workspace)
    served.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    memory = served.workspace / "memory"
    for child in memory.iterdir():
        child.unlink()
    memory.rmdir()
    memory.write_bytes(b"the user's own file")
    state = served.call("read_state", {"workspace": w})
    assert state["status"] == "error" and "not a directory" in state["reason"]
    for method, params in [
        ("add_entry", {"workspace": w, "title": "T", "content": "c"}),
        ("list_proposals", {"workspace": w}),
    ]:
        exc = remote_error(served, method, params)
        assert (method, exc.kind, exc.data.get("reason")) == (method, "invalid_workspace", "not_a_directory")
        assert generalized(exc, str(served.root))
    assert memory.read_bytes() == b"the user's own file"
    serves_other_workspace(served, served.root / "other")
    memory.unlink()
    served.call("add_entry", {"workspace": w, "title": "Back", "content": "a folder again"})
    assert served.call("read_state", {"workspace": w})["status"] == "ok"


def _fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def _dev_zero_link(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _null_device(path: Path) -> None:
    if not IS_ROOT:
        pytest.skip("making a device node needs root")
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers


@pytest.mark.parametrize(
    "plant", [_fifo, _dev_zero_link, _null_device], ids=["fifo", "dev-zero-symlink", "char-device"]
)
def test_memory_md_replaced_by_something_that_is_not_a_file(
    served: DaemonProcess, plant: Callable[[Path], None]
) -> None:
    """MEMORY.md swapped for a FIFO (no writer: an open for reading would wait forever), a
    symlink to /dev/zero (endless) or a device: read_state says error at once, writes
    are refused with a stable kind, what was planted stays, and the daemon keeps serving."""
    w = str(served.workspace)
    served.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    path = served.workspace / "memory" / "MEMORY.md"
    path.unlink()
    plant(path)
    planted = os.lstat(path)
    state = served.call("read_state", {"workspace": w, "includeEntries": True}, timeout=15)
    assert state["status"] == "error" and state["entryCount"] == 0
    exc = remote_error(served, "add_entry", {"workspace": w, "title": "T", "content": "c"})
    assert (exc.kind, exc.data.get("reason")) in (
        ("io_error", "not_a_file"),
        ("invalid_workspace", "symlink"),
    )
    assert ping_ok(served.socket)
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (planted.st_ino, planted.st_mode)
    serves_other_workspace(served, served.root / "other")


HOLD_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("INSERT INTO meta (key, value) VALUES ('held', 'by another process')")
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
conn.execute("ROLLBACK")
"""


@contextlib.contextmanager
def ledger_locked_by_another_process(daemon: DaemonProcess) -> Iterator[None]:
    """A `sqlite3`-shell-like process holding the workspace ledger's write lock."""
    [ledger_dir] = list((daemon.data_dir / "workspaces").iterdir())
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_WRITE_LOCK, str(ledger_dir / "ledger.sqlite3")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        holder.stdout.close()


def test_a_ledger_locked_by_another_process_fails_fast_and_recovers(
    brief_busy_daemon: DaemonProcess,
) -> None:
    """Another process holding the ledger's write lock (a `sqlite3` shell in a write
    transaction): writes fail with io_error ledger_busy, a crowd of them is answered in
    about one busy timeout rather than one timeout each, other workspaces are served
    meanwhile, and once the lock is released writes go through again."""
    daemon = brief_busy_daemon
    w = str(daemon.workspace)
    sid = daemon.call("open_session", {"workspace": w})["sessionId"]
    with ledger_locked_by_another_process(daemon):
        calls: list[tuple[str, dict[str, Any]]] = [("open_session", {"workspace": w})] * 5 + [
            (
                "append_events",
                {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "x"}]},
            )
        ] * 3
        started = time.monotonic()
        with ThreadPoolExecutor(len(calls)) as pool:
            crowd = [pool.submit(remote_error, daemon, method, params) for method, params in calls]
            serves_other_workspace(daemon, daemon.root / "other")
            errors = [future.result() for future in crowd]
        elapsed = time.monotonic() - started
        assert {(e.kind, e.data.get("reason")) for e in errors} == {("io_error", "ledger_busy")}
        assert "locked by another process" in errors[0].message
        # One timeout each, in turn, would be len(calls) timeouts.
        assert elapsed < 3 * BRIEF_BUSY_TIMEOUT_S, elapsed
    got = daemon.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "after"}]},
    )
    assert got["lastSeq"] == 1
    assert daemon.call("open_session", {"workspace": w})["sessionId"]


def test_the_data_directory_removed_while_running_stops_the_daemon(daemon: DaemonProcess) -> None:
    """The data directory deleted under a running daemon (its ledgers, its lock): the
    daemon tells its clients (daemon_stopping, reason data_dir_lost) and exits 1 rather
    than serve on without state while a second daemon could take the same folder; the
    memory files are untouched, and a daemon started again serves them from a fresh folder."""
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    memory = (daemon.workspace / "memory" / "MEMORY.md").read_bytes()
    assert daemon.proc is not None
    with RawConnection(daemon.socket, timeout=30) as conn:
        assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 1})["result"] == "pong"
        shutil.rmtree(daemon.data_dir)
        note = conn.recv_message()
        assert note == {"jsonrpc": "2.0", "method": "daemon_stopping", "params": {"reason": "data_dir_lost"}}
    assert daemon.proc.wait(timeout=30) == 1
    assert '"data_dir_lost"' in daemon.log_text()
    assert (daemon.workspace / "memory" / "MEMORY.md").read_bytes() == memory
    daemon.restart()
    state = daemon.call("read_state", {"workspace": w})
    assert state["status"] == "ok" and state["entryCount"] == 1


def test_a_workspace_first_opened_on_a_full_data_disk_says_the_disk_is_full(short_tmp: Path) -> None:
    """The data directory's disk full when a workspace is first used (its identity, its
    ledger to create): read_state, add_entry and open_session are io_error disk_full, not
    "unreadable"; the memory folder gets no half entry; once space is freed it opens."""
    data = short_tmp / "data"
    with tiny_tmpfs(data, 2048):
        d = DaemonProcess(short_tmp)
        d.start()
        try:
            d.call("read_state", {"workspace": str(d.workspace)})
            fresh = short_tmp / "fresh"
            fresh.mkdir()
            w = str(fresh)
            filler = fill_disk(data)
            for method, params in [
                ("read_state", {"workspace": w}),
                ("add_entry", {"workspace": w, "title": "T", "content": "c"}),
                ("open_session", {"workspace": w}),
            ]:
                exc = remote_error(d, method, params)
                assert (method, exc.kind, exc.data.get("reason")) == (method, "io_error", "disk_full")
                assert "disk is full" in exc.message and generalized(exc, str(short_tmp))
            assert not (fresh / "memory" / "MEMORY.md").exists()
            filler.unlink()
            d.call("add_entry", {"workspace": w, "title": "T", "content": "fits now"})
            assert d.call("open_session", {"workspace": w})["sessionId"]
        finally:
            d.stop()


@pytest.mark.parametrize("how", ["removed", "replaced"])
def test_the_socket_file_removed_or_replaced_while_running_stops_the_daemon(
    daemon: DaemonProcess, how: str
) -> None:
    """The socket file deleted under a running daemon (its runtime folder cleaned at
    logout, a stray rm) or replaced by another socket: no client can reach the daemon, yet
    it held the locks that keep a new one from starting. It tells the clients connected
    (daemon_stopping, reason socket_lost) and exits 1, leaving whatever is at the path
    now; a new daemon then starts on the same path and data."""
    assert daemon.proc is not None
    stranger: socket.socket | None = None
    try:
        with RawConnection(daemon.socket, timeout=30) as conn:
            assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 1})["result"] == "pong"
            daemon.socket.unlink()
            if how == "replaced":
                stranger = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                stranger.bind(str(daemon.socket))
            note = conn.recv_message()
            assert note == {
                "jsonrpc": "2.0",
                "method": "daemon_stopping",
                "params": {"reason": "socket_lost"},
            }
        assert daemon.proc.wait(timeout=30) == 1
        assert '"socket_lost"' in daemon.log_text()
        if stranger is not None:
            assert stat.S_ISSOCK(os.lstat(daemon.socket).st_mode)  # not the daemon's to remove
            stranger.close()
            daemon.socket.unlink()
    finally:
        if stranger is not None:
            stranger.close()
    daemon.restart()
    assert ping_ok(daemon.socket)


def test_a_socket_folder_with_no_room_for_the_socket_is_a_clear_refusal(short_tmp: Path) -> None:
    """The socket's filesystem has room for the lock file but not the socket (out of
    inodes): makad exits 1 with one line naming the socket and the reason, no traceback."""
    run = short_tmp / "run"
    with tiny_tmpfs(run, 1024, inodes=8):
        fillers = []
        with contextlib.suppress(OSError):
            while True:
                filler = run / f"f{len(fillers)}"
                filler.touch()
                fillers.append(filler)
        fillers[0].unlink()  # room for the lock file only
        socket_path = run / "s.sock"
        result = subprocess.run(
            [sys.executable, "-m", "makad", "--socket", str(socket_path), "--data-dir", str(short_tmp / "d")],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert f"the socket {socket_path} cannot be made: No space left on device" in result.stderr


def test_a_full_data_disk_at_start_is_said_plainly(short_tmp: Path) -> None:
    """The data directory's disk full before the daemon's first start (no room for its
    identifier key): makad exits 1 saying the disk is full, not an exception's repr."""
    data = short_tmp / "data"
    with tiny_tmpfs(data, 256):
        filler = fill_disk(data)
        result = subprocess.run(
            [sys.executable, "-m", "makad", "--socket", str(short_tmp / "s.sock"), "--data-dir", str(data)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        filler.unlink()
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("makad: could not start: No space left on device"), last


def test_a_daemon_started_again_on_a_full_data_disk_reads_and_refuses_writes(short_tmp: Path) -> None:
    """The data directory's disk full when the daemon starts again, so a ledger cannot be
    opened for writing (no room for its shared-memory index): the daemon starts, reads of
    that workspace are served from the ledger as it was (read-only, warning
    ``ledger_read_only``), every write is io_error disk_full with MEMORY.md untouched, and
    once space is freed it writes again and the warning is gone."""
    data = short_tmp / "data"
    with tiny_tmpfs(data, 2048):
        d = DaemonProcess(short_tmp)
        d.start()
        try:
            w = str(d.workspace)
            d.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
            sid = d.call("open_session", {"workspace": w})["sessionId"]
            event = {"type": "user_message", "text": "the deploy script is flaky"}
            d.call("append_events", {"workspace": w, "sessionId": sid, "events": [event]})
            d.stop()
            memory_before = (d.workspace / "memory" / "MEMORY.md").read_bytes()
            filler = fill_disk(data)
            d.start()
            assert ping_ok(d.socket)
            state = d.call("read_state", {"workspace": w, "includeEntries": True})
            assert state["status"] == "ok" and state["entryCount"] == 1
            assert "use make" in state["content"]
            assert [x["kind"] for x in state["warnings"]] == ["ledger_read_only"]
            assert "disk" in state["warnings"][0]["message"]
            assert [s["sessionId"] for s in d.call("list_sessions", {"workspace": w})["sessions"]] == [sid]
            got = d.call("read_events", {"workspace": w, "sessionId": sid})
            assert [e["text"] for e in got["events"]] == ["the deploy script is flaky"]
            hits = d.call("search_history", {"workspace": w, "query": "deploy"})["hits"]
            assert [h["event"]["seq"] for h in hits] == [1]
            assert d.call("get_settings", {"workspace": w})["enabled"] is True
            assert "use make" in d.call("export_memories", {"workspace": w})["data"]
            assert d.call("list_proposals", {"workspace": w})["proposals"] == []
            status_kinds = [x["kind"] for x in d.call("status")["warnings"]]
            assert "ledger_read_only" in status_kinds
            for method, params in [
                ("add_entry", {"workspace": w, "title": "T", "content": "not now"}),
                ("append_events", {"workspace": w, "sessionId": sid, "events": [event]}),
                ("open_session", {"workspace": w}),
                ("set_settings", {"workspace": w, "agentReadEnabled": True}),
            ]:
                exc = remote_error(d, method, params)
                assert (method, exc.kind, exc.data.get("reason")) == (method, "io_error", "disk_full")
                assert "disk is full" in exc.message and generalized(exc, str(short_tmp))
            assert (d.workspace / "memory" / "MEMORY.md").read_bytes() == memory_before
            filler.unlink()
            got = d.call("append_events", {"workspace": w, "sessionId": sid, "events": [event]})
            assert got["lastSeq"] == 2
            d.call("add_entry", {"workspace": w, "title": "Test", "content": "use pytest"})
            state = d.call("read_state", {"workspace": w, "includeEntries": True})
            assert state["status"] == "ok" and state["entryCount"] == 2 and state["warnings"] == []
        finally:
            d.stop()


def test_the_memory_folder_deleted_brings_nothing_back(served: DaemonProcess) -> None:
    """memory/ deleted while the daemon follows the workspace (the user wiping its
    memory, secrets and all): the daemon takes the deletion in as such — it does not make
    the folder again to queue what it held back into PENDING.md as "returned" — and the
    workspace starts over empty (docs/WORKSPACES.md)."""
    w = str(served.workspace)
    for title in ("Build", "Token"):
        served.call("add_entry", {"workspace": w, "title": title, "content": f"{title} note"})
    memory = served.workspace / "memory"
    with RawConnection(served.socket, timeout=30) as sub:
        sub.request({"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"workspace": w}})
        shutil.rmtree(memory)
        while True:  # the daemon has taken the deletion in once it says MEMORY.md changed
            note = sub.recv_message()
            if note.get("method") == "memory_changed":
                break
        assert note["params"].get("returned", []) == []
    assert not (memory / "PENDING.md").exists()
    assert served.call("list_proposals", {"workspace": w})["proposals"] == []
    assert served.call("read_state", {"workspace": w})["entryCount"] == 0
