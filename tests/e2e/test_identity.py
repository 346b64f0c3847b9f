"""Workspace identity over the socket: a workspace is the directory on disk, not its spelling."""

from __future__ import annotations

import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from maka import Client
from makad.store.identity import BINDING_FILE, ID_FILE
from makad.store.ledger import Ledger
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess

SWITCHES = {"agentReadEnabled": True, "historyRecallEnabled": True, "extractToolEnabled": True}


def data_dir(d: DaemonProcess, path: Path) -> Path:
    return d.data_dir / "workspaces" / workspace_id(path.resolve())


def entries(d: DaemonProcess, workspace: str) -> list[str]:
    state = d.call("read_state", {"workspace": workspace, "includeEntries": True})
    return [e["content"] for e in state["entries"]]


def beside(d: DaemonProcess, name: str) -> Path:
    """A path of this test's own next to its workspace (the module's daemon serves others)."""
    return d.workspace.parent / f"{d.workspace.name}-{name}"


def kinds(warnings: list[dict[str, Any]]) -> list[str]:
    return [w["kind"] for w in warnings]


def settle_in_use(d: DaemonProcess, ws: Path) -> str:
    """A workspace with its privacy switches on, an entry and a session of history."""
    w = str(ws)
    d.call("set_settings", {"workspace": w, **SWITCHES})
    d.call("add_entry", {"workspace": w, "title": "Secret plan", "content": "launch on friday"})
    sid: str = d.call("open_session", {"workspace": w})["sessionId"]
    d.call(
        "append_events",
        {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "the friday launch"}]},
    )
    return sid


def test_a_symlink_repointed_sends_writes_to_the_new_target(shared_daemon: DaemonProcess) -> None:
    """Writes through a symlink follow it when it is repointed, also on an open connection;
    the old target keeps exactly what was written while the link pointed at it."""
    first, second = beside(shared_daemon, "first"), beside(shared_daemon, "second")
    first.mkdir()
    second.mkdir()
    link = beside(shared_daemon, "current")
    link.symlink_to(first)
    with shared_daemon.client() as client:
        client.call("add_entry", {"workspace": str(link), "title": "A", "content": "written to first"})
        tmp = beside(shared_daemon, "current.tmp")
        tmp.symlink_to(second)
        os.replace(tmp, link)
        client.call("add_entry", {"workspace": str(link), "title": "B", "content": "written to second"})
    assert entries(shared_daemon, str(first)) == ["written to first"]
    assert entries(shared_daemon, str(second)) == ["written to second"]
    assert entries(shared_daemon, str(link)) == ["written to second"]


def test_a_folder_deleted_and_made_again_is_a_new_workspace(daemon: DaemonProcess) -> None:
    """The folder deleted and created again at the same path (even with the same inode):
    privacy switches are back at their defaults, history is gone from it, read_state and
    status say it is a new workspace, and the old data directory is kept, not deleted."""
    ws = daemon.workspace
    settle_in_use(daemon, ws)
    old_data = data_dir(daemon, ws)
    old_ledger = (old_data / "ledger.sqlite3").stat().st_ino
    old_id = (ws / "memory" / ID_FILE).read_text()
    shutil.rmtree(ws)
    ws.mkdir()
    w = str(ws)
    state = daemon.call("read_state", {"workspace": w})
    assert state["status"] == "ok" and state["entryCount"] == 0
    assert state["agentReadEnabled"] is False
    assert kinds(state["warnings"]) == ["new_workspace"]
    settings = daemon.call("get_settings", {"workspace": w})
    assert not any(settings[k] for k in SWITCHES)
    assert daemon.call("list_sessions", {"workspace": w})["sessions"] == []
    assert kinds(daemon.call("status")["warnings"]) == ["new_workspace"]
    [retired] = list((daemon.data_dir / "retired").iterdir())
    assert retired.name.startswith(old_data.name + "-")
    assert (retired / "ledger.sqlite3").stat().st_ino == old_ledger
    # The revision moved on (persisted), which binds the new folder to a new id.
    assert (ws / "memory" / ID_FILE).read_text() != old_id


def test_a_folder_made_again_while_the_daemon_was_down_is_new_too(daemon: DaemonProcess) -> None:
    """The same replacement seen at the next start: switches at their defaults, revisions
    carry on past the old workspace's, and a second restart keeps the new identity."""
    ws = daemon.workspace
    settle_in_use(daemon, ws)
    before = daemon.call("read_state", {"workspace": str(ws)})["revision"]
    daemon.stop()
    shutil.rmtree(ws)
    ws.mkdir()
    daemon.start()
    state = daemon.call("read_state", {"workspace": str(ws)})
    assert state["agentReadEnabled"] is False and kinds(state["warnings"]) == ["new_workspace"]
    assert state["revision"] > before
    daemon.call("set_settings", {"workspace": str(ws), "agentReadEnabled": True})
    daemon.restart()
    state = daemon.call("read_state", {"workspace": str(ws)})
    assert state["agentReadEnabled"] is True and state["warnings"] == []


def test_the_memory_folder_deleted_while_running_starts_over(shared_daemon: DaemonProcess) -> None:
    """memory/ holds the id: deleting it (with MEMORY.md) is a new workspace, fail closed."""
    ws = shared_daemon.workspace
    settle_in_use(shared_daemon, ws)
    shutil.rmtree(ws / "memory")
    settings = shared_daemon.call("get_settings", {"workspace": str(ws)})
    assert not any(settings[k] for k in SWITCHES)
    added = shared_daemon.call("add_entry", {"workspace": str(ws), "title": "T", "content": "fresh"})
    assert added["entry"]["content"] == "fresh"
    assert (ws / "memory" / ID_FILE).is_file()


def test_spellings_of_one_directory_share_one_workspace(daemon: DaemonProcess) -> None:
    """Trailing slash, dot segments and a symlink name the same workspace: one revision
    counter, one data directory, each spelling sees the others' writes."""
    ws = daemon.workspace
    link = daemon.root / "alias"
    link.symlink_to(ws)
    spellings = [str(ws), f"{ws}/", f"{ws}/./", f"{ws}/../{ws.name}", str(link)]
    revisions = []
    for i, spelling in enumerate(spellings):
        revisions.append(
            daemon.call(
                "add_entry", {"workspace": spelling, "title": f"T{i}", "content": f"via spelling {i}"}
            )["revision"]
        )
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions)
    assert len(entries(daemon, str(link))) == len(spellings)
    assert [p.name for p in (daemon.data_dir / "workspaces").iterdir()] == [data_dir(daemon, ws).name]


def test_identity_survives_restarts_and_editor_saves(daemon: DaemonProcess) -> None:
    """Saving MEMORY.md by temp file and rename, and restarting, keep the workspace (and its
    switches): only the id file decides."""
    ws = daemon.workspace
    settle_in_use(daemon, ws)
    memory = ws / "memory" / "MEMORY.md"
    tmp = memory.with_name("MEMORY.md.swp")
    tmp.write_text(memory.read_text() + "\n## By hand\nan editor save\n")
    os.replace(tmp, memory)
    daemon.restart()
    state = daemon.call("read_state", {"workspace": str(ws)})
    assert state["agentReadEnabled"] is True and state["warnings"] == []
    assert len(daemon.call("list_sessions", {"workspace": str(ws)})["sessions"]) == 1


def test_reads_create_nothing_and_the_first_write_binds(shared_daemon: DaemonProcess) -> None:
    """Reading a workspace creates no memory/ folder; the first write of any kind (here a
    session) creates memory/.maka-id (0600) and records it in the data directory."""
    w = str(shared_daemon.workspace)
    for method in ("read_state", "get_settings", "list_sessions", "list_proposals"):
        shared_daemon.call(method, {"workspace": w})
    assert not (shared_daemon.workspace / "memory").exists()
    shared_daemon.call("open_session", {"workspace": w})
    id_file = shared_daemon.workspace / "memory" / ID_FILE
    assert oct(id_file.stat().st_mode & 0o777) == "0o600"
    recorded = (data_dir(shared_daemon, shared_daemon.workspace) / BINDING_FILE).read_text().strip()
    assert recorded == id_file.read_text().strip() and len(recorded) == 32


def test_reads_create_nothing_also_once_the_daemon_stops(daemon: DaemonProcess) -> None:
    """A workspace only read is left without a memory/ folder by a clean stop too (what its
    ledger keeps for its first write is not written on its own then)."""
    w = str(daemon.workspace)
    for method in ("read_state", "get_settings", "list_sessions"):
        daemon.call(method, {"workspace": w})
    daemon.stop()
    assert not (daemon.workspace / "memory").exists()


def test_a_hand_made_memory_folder_is_bound_at_the_first_read(shared_daemon: DaemonProcess) -> None:
    """A folder whose memory/MEMORY.md the user typed before any call gets memory/.maka-id
    at the first read (documented so: a read creates it when memory/ is there already)."""
    memory = shared_daemon.workspace / "memory"
    memory.mkdir(mode=0o700)
    (memory / "MEMORY.md").write_text("# Maka Memory\n\n## Tabs\nUse tabs.\n")
    shared_daemon.call("read_state", {"workspace": str(shared_daemon.workspace)})
    recorded = (data_dir(shared_daemon, shared_daemon.workspace) / BINDING_FILE).read_text().strip()
    assert (memory / ID_FILE).read_text().strip() == recorded


def test_a_moved_folder_is_new_at_its_new_path_and_itself_again_back_home(
    shared_daemon: DaemonProcess,
) -> None:
    """Moving the folder makes a new workspace at the new path (switches off); moving it back
    finds its data again, switches on."""
    ws = shared_daemon.workspace
    settle_in_use(shared_daemon, ws)
    moved = beside(shared_daemon, "moved")
    os.rename(ws, moved)
    assert shared_daemon.call("read_state", {"workspace": str(moved)})["agentReadEnabled"] is False
    assert entries(shared_daemon, str(moved)) == ["launch on friday"]
    os.rename(moved, ws)
    state = shared_daemon.call("read_state", {"workspace": str(ws)})
    assert state["agentReadEnabled"] is True and state["warnings"] == []


def test_a_data_directory_from_before_ids_is_adopted(short_tmp: Path) -> None:
    """A data directory written before workspace ids (no identity record) keeps its
    settings: the folder at its path is given an id and the directory is bound to it."""
    proc = DaemonProcess(short_tmp)
    ws = proc.workspace
    (ws / "memory").mkdir(mode=0o700)
    (ws / "memory" / "MEMORY.md").write_text("# Maka Memory\n\n## Old\nfrom the old days\n")
    legacy = data_dir(proc, ws)
    ledger = Ledger(legacy / "ledger.sqlite3")
    ledger.put_settings_json({"agentReadEnabled": True, "__revision__": 7})
    ledger.close()
    proc.start()
    try:
        state = proc.call("read_state", {"workspace": str(ws)})
        assert state["agentReadEnabled"] is True and state["warnings"] == []
        # A revision stored before the data directory's revision clock is replaced by one
        # of its own (higher: a client holding 7 sees a change, never another workspace's 7).
        assert state["revision"] > 7
        assert (legacy / BINDING_FILE).read_text().strip() == (ws / "memory" / ID_FILE).read_text().strip()
    finally:
        proc.stop()


def test_a_subscriber_hears_that_its_workspace_was_replaced(shared_daemon: DaemonProcess) -> None:
    """A subscription names a path: when the folder there is replaced, the subscriber gets
    settings_changed (switches back at defaults) with a revision past the old one."""
    ws = shared_daemon.workspace
    settle_in_use(shared_daemon, ws)
    with Client(str(shared_daemon.socket), timeout=10) as sub:
        base = sub.call("subscribe", {"workspace": str(ws)})["revision"]
        shutil.rmtree(ws)
        ws.mkdir()
        shared_daemon.call("get_settings", {"workspace": str(ws)})
        note = next(sub.notifications())
    assert note["method"] == "settings_changed" and note["params"]["revision"] > base


def test_an_id_file_that_is_a_symlink_is_not_trusted(shared_daemon: DaemonProcess) -> None:
    """memory/.maka-id replaced by a symlink to another workspace's id is no id: the
    workspace is new, and the other workspace's file is left alone."""
    ws = shared_daemon.workspace
    settle_in_use(shared_daemon, ws)
    other = beside(shared_daemon, "other")
    other.mkdir()
    shared_daemon.call("open_session", {"workspace": str(other)})
    id_file = ws / "memory" / ID_FILE
    id_file.unlink()
    id_file.symlink_to(other / "memory" / ID_FILE)
    before = (other / "memory" / ID_FILE).read_bytes()
    assert shared_daemon.call("get_settings", {"workspace": str(ws)})["agentReadEnabled"] is False
    assert (other / "memory" / ID_FILE).read_bytes() == before
    conn = sqlite3.connect(data_dir(shared_daemon, other) / "ledger.sqlite3")
    assert conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 1
    conn.close()
