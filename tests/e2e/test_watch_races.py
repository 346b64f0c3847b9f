"""Saves by real editors and tools while the daemon's watch restarts or waits for more
folders to join its restart, over a real daemon and a raw subscription: each save is taken
in, and heard by the subscriber, whatever happened to the folder meanwhile."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.test_idle_workspaces import wait_for, watched, watched_inodes
from tests.support import DaemonProcess, RawConnection

_ids = itertools.count(1)


def memory(ws: Path) -> Path:
    return ws / "memory" / "MEMORY.md"


def seeded(d: DaemonProcess, name: str) -> Path:
    ws = d.root / name
    ws.mkdir()
    d.call("add_entry", {"workspace": str(ws), "title": "Seed", "content": "kept by the daemon"})
    return ws


class Subscriber:
    """A raw connection's subscriptions and the notifications it received."""

    def __init__(self, conn: RawConnection) -> None:
        self.conn = conn
        self.notes: list[dict[str, Any]] = []

    def subscribe(self, ws: Path) -> None:
        request_id = next(_ids)
        params = {"workspace": str(ws)}
        self.conn.send(
            json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "subscribe", "params": params})
        )
        while (message := self.conn.recv_message()).get("id") != request_id:
            self.notes.append(message)
        assert "result" in message, message

    def external_edit(self, ws: Path) -> dict[str, Any]:
        """The next memory_changed for ``ws`` caused by a save, not taken yet (the
        connection's timeout fails the wait)."""
        while True:
            for i, message in enumerate(self.notes):
                params = message.get("params", {})
                if (
                    message.get("method") == "memory_changed"
                    and params.get("workspace") == str(ws)
                    and params.get("cause") == "external_edit"
                ):
                    del self.notes[i]
                    return dict(params)
            self.notes.append(self.conn.recv_message())


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
        sub = Subscriber(conn)
        sub.subscribe(ws)
        wait_for(lambda: watched(d, str(ws)), "watched")
        git(ws, "checkout", "-q", "bare")
        sub.external_edit(ws)
        assert titles(d, ws) == []
        git(ws, "checkout", "-q", "main")
        sub.external_edit(ws)
        assert titles(d, ws) == ["Seed"]
        save_as_vim(memory(ws), memory(ws).read_text() + "\n## After checkout\nsaved by hand\n")
        sub.external_edit(ws)
    assert titles(d, ws) == ["Seed", "After checkout"]


def test_a_save_in_memory_restored_by_copy_is_heard(module_daemon: DaemonProcess) -> None:
    """memory/ moved aside and copied back with its times (cp -a): a save in the copy is
    heard by the subscriber."""
    d = module_daemon
    ws = seeded(d, "restored")
    with RawConnection(d.socket) as conn:
        sub = Subscriber(conn)
        sub.subscribe(ws)
        wait_for(lambda: watched(d, str(ws)), "watched")
        os.rename(ws / "memory", ws / "memory.bak")
        subprocess.run(["cp", "-a", str(ws / "memory.bak"), str(ws / "memory")], check=True)
        assert titles(d, ws) == ["Seed"]
        save_as_vim(memory(ws), memory(ws).read_text() + "\n## After restore\nsaved by hand\n")
        sub.external_edit(ws)
    assert titles(d, ws) == ["Seed", "After restore"]


def test_saves_right_after_subscribing_to_new_folders_are_heard(module_daemon: DaemonProcess) -> None:
    """Folders the daemon never read, subscribed one after another with a save in each
    right after its subscribe answered (while the watch waits to restart over them): every
    save reaches the subscriber, and read_state shows it at the revision heard."""
    d = module_daemon
    folders = []
    for i in range(30):
        ws = d.root / f"fresh{i}"
        (ws / "memory").mkdir(parents=True)
        memory(ws).write_text("# Memory\n\n## Seed\nwritten by hand\n", encoding="utf-8")
        folders.append(ws)
    with RawConnection(d.socket) as conn:
        sub = Subscriber(conn)
        for ws in folders:
            sub.subscribe(ws)
            save_as_vim(memory(ws), memory(ws).read_text() + "\n## Saved\nright after subscribing\n")
        heard = {ws: sub.external_edit(ws)["revision"] for ws in folders}
    for ws in folders:
        state = d.call("read_state", {"workspace": str(ws), "includeEntries": True})
        assert [entry["title"] for entry in state["entries"]] == ["Seed", "Saved"]
        assert state["revision"] == heard[ws]  # the save's revision: no later one


def save_with(tool: int, path: Path, title: str) -> None:
    """A save adding an entry, made the way one of a few real tools makes it."""
    addition = f"\n## {title}\nsaved by tool {tool}\n"
    text = path.read_text(encoding="utf-8") + addition
    kind = tool % 6
    if kind == 0 and shutil.which("vim"):  # vim's own write: backup file, new file, swap file
        script = [f"$put ='## {title}'", f"$put ='saved by tool {tool}'", "wq"]
        command = ["vim", "-u", "NONE", "-i", "NONE", "-N", "-es"]
        subprocess.run([*command, *(f"+{line}" for line in script), str(path)], check=True, timeout=30)
    elif kind == 1:  # sed -i: a temp file renamed over
        subprocess.run(["sed", "-i", f"$a\\\\n## {title}\\nsaved by tool {tool}", str(path)], check=True)
    elif kind == 2:  # cp -p from elsewhere, then the old mtime put back (touch -r)
        before = os.stat(path)
        source = path.with_name(".restore")
        source.write_text(text, encoding="utf-8")
        subprocess.run(["cp", "-p", str(source), str(path)], check=True)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        source.unlink()
    elif kind == 3:  # truncated, then written in a second step (rsync --inplace alike)
        with open(path, "r+", encoding="utf-8") as file:
            file.truncate(0)
            file.flush()
            os.fsync(file.fileno())
            file.write(text)
    elif kind == 4:  # vim's rename dance, emulated
        save_as_vim(path, text)
    else:  # a temp file beside it renamed over it
        temp = path.with_name("MEMORY.md.tmp")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)


def test_tool_saves_while_a_hundred_folders_are_subscribed_are_heard(module_daemon: DaemonProcess) -> None:
    """A hundred folders the daemon never read subscribed one after another, with saves by
    vim, sed -i, cp -p with the mtime put back, truncate-then-write and renames, in the
    first folder and in the one just subscribed, while the watch waits to restart over the
    new ones: read_state shows every save, and the subscriber heard the revision it shows."""
    d = module_daemon
    folders = []
    for i in range(100):
        ws = d.root / f"many{i}"
        (ws / "memory").mkdir(parents=True)
        memory(ws).write_text("# Memory\n\n## Seed\nwritten by hand\n", encoding="utf-8")
        folders.append(ws)
    expected = {ws: ["Seed"] for ws in folders}
    with RawConnection(d.socket) as conn:
        sub = Subscriber(conn)
        for i, ws in enumerate(folders):
            sub.subscribe(ws)
            if i % 10 == 3:
                for target in dict.fromkeys([folders[0], ws]):
                    title = f"Saved {i} in {target.name}"
                    save_with(i + len(expected[target]), memory(target), title)
                    expected[target].append(title)
        for ws, titles_saved in expected.items():
            if len(titles_saved) == 1:
                continue
            state = d.call("read_state", {"workspace": str(ws), "includeEntries": True})
            assert [entry["title"] for entry in state["entries"]] == titles_saved
            while sub.external_edit(ws)["revision"] != state["revision"]:
                pass
    for ws in folders:
        assert titles(d, ws) == expected[ws]


def test_a_workspace_renamed_away_during_a_restart_and_back_is_heard(module_daemon: DaemonProcess) -> None:
    """A subscribed workspace's folder renamed away while another folder's addition
    restarts the watch, and renamed back: a save in it afterwards reaches the subscriber
    with no other call naming the workspace, and read_state shows it."""
    d = module_daemon
    ws = seeded(d, "renamed")
    away = d.root / "renamed.away"
    with RawConnection(d.socket) as conn:
        sub = Subscriber(conn)
        sub.subscribe(ws)
        wait_for(lambda: watched(d, str(ws)), "watched")
        inode = os.stat(ws / "memory").st_ino
        ws.rename(away)
        added = d.root / "added meanwhile"
        (added / "memory").mkdir(parents=True)
        memory(added).write_text("# Memory\n", encoding="utf-8")
        sub.subscribe(added)  # the watch restarts over the folders there are now
        wait_for(lambda: inode not in watched_inodes(d), "unwatched")
        away.rename(ws)
        wait_for(lambda: watched(d, str(ws)), "watched again")
        sub.notes.clear()
        save_as_vim(memory(ws), memory(ws).read_text() + "\n## Back\nsaved by hand\n")
        heard = [sub.external_edit(ws)["revision"]]  # before any call names the workspace
        state = d.call("read_state", {"workspace": str(ws), "includeEntries": True})
        assert [entry["title"] for entry in state["entries"]] == ["Seed", "Back"]
        while state["revision"] not in heard:
            heard.append(sub.external_edit(ws)["revision"])
