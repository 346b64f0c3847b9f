"""Saves by real editors and tools while the daemon's watch restarts or waits for more
folders to join its restart, over a real daemon and a raw subscription: each save is taken
in, and heard by the subscriber, whatever happened to the folder meanwhile."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.test_idle_workspaces import wait_for, watched
from tests.support import DaemonProcess, RawConnection

_ids = itertools.count(1)


def memory(ws: Path) -> Path:
    return ws / "memory" / "MEMORY.md"


def seeded(d: DaemonProcess, name: str) -> Path:
    ws = d.root / name
    ws.mkdir()
    d.call("add_entry", {"workspace": str(ws), "title": "Seed", "content": "kept by the daemon"})
    return ws


def subscribe(conn: RawConnection, ws: Path) -> None:
    reply = conn.request(
        {"jsonrpc": "2.0", "id": next(_ids), "method": "subscribe", "params": {"workspace": str(ws)}}
    )
    assert "result" in reply, reply


def next_external_edit(conn: RawConnection, ws: Path) -> dict[str, Any]:
    """The next memory_changed for ``ws`` caused by a save (the connection's timeout fails it)."""
    while True:
        message = conn.recv_message()
        params = message.get("params", {})
        if (
            message.get("method") == "memory_changed"
            and params.get("workspace") == str(ws)
            and params.get("cause") == "external_edit"
        ):
            return dict(params)


def titles(d: DaemonProcess, ws: Path) -> list[str]:
    state = d.call("read_state", {"workspace": str(ws), "includeEntries": True})
    return [entry["title"] for entry in state["entries"]]


def git(ws: Path, *args: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    subprocess.run(["git", "-C", str(ws), *args], check=True, capture_output=True, env=env)


def save_as_vim(path: Path, text: str) -> None:
    """A save the way vim makes one with 'backupcopy=no': a backup by rename, a new file."""
    backup = path.with_name(path.name + "~")
    os.rename(path, backup)
    path.write_text(text, encoding="utf-8")
    backup.unlink()


def test_git_checkouts_of_memory_md_are_heard(module_daemon: DaemonProcess) -> None:
    """MEMORY.md removed by a git checkout of a branch without it and brought back by one
    of the branch with it: each checkout reaches the subscriber, and so does a save after."""
    d = module_daemon
    ws = seeded(d, "checkout")
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "memory/MEMORY.md")
    git(ws, "commit", "-q", "-m", "memory")
    git(ws, "checkout", "-q", "-b", "bare")
    git(ws, "rm", "-q", "memory/MEMORY.md")
    git(ws, "commit", "-q", "-m", "no memory")
    git(ws, "checkout", "-q", "main")
    with RawConnection(d.socket) as conn:
        subscribe(conn, ws)
        wait_for(lambda: watched(d, str(ws)), "watched")
        git(ws, "checkout", "-q", "bare")
        next_external_edit(conn, ws)
        assert titles(d, ws) == []
        git(ws, "checkout", "-q", "main")
        next_external_edit(conn, ws)
        assert titles(d, ws) == ["Seed"]
        save_as_vim(memory(ws), memory(ws).read_text() + "\n## After checkout\nsaved by hand\n")
        next_external_edit(conn, ws)
    assert titles(d, ws) == ["Seed", "After checkout"]


def test_a_save_in_memory_restored_by_copy_is_heard(module_daemon: DaemonProcess) -> None:
    """memory/ moved aside and copied back with its times (cp -a): a save in the copy is
    heard by the subscriber."""
    d = module_daemon
    ws = seeded(d, "restored")
    with RawConnection(d.socket) as conn:
        subscribe(conn, ws)
        wait_for(lambda: watched(d, str(ws)), "watched")
        os.rename(ws / "memory", ws / "memory.bak")
        subprocess.run(["cp", "-a", str(ws / "memory.bak"), str(ws / "memory")], check=True)
        assert titles(d, ws) == ["Seed"]
        save_as_vim(memory(ws), memory(ws).read_text() + "\n## After restore\nsaved by hand\n")
        next_external_edit(conn, ws)
    assert titles(d, ws) == ["Seed", "After restore"]
