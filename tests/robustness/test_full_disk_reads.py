"""A full disk never stops reads: a daemon started again on a disk with no room left (its
data directory, the workspace's folder and the user level's folder all on one small
tmpfs) answers every read method of a workspace it knew — one with sessions and no
memory files, one with memory and proposals, and the user level — changes no file, and
refuses writes with io_error ``disk_full``; once space is freed, writes work again
without a restart."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.robustness.helpers import fill_disk, remote_error, snapshot, tiny_tmpfs
from tests.support import DaemonProcess

EVENT = {"type": "user_message", "text": "the deploy script is flaky"}


@pytest.fixture
def disk(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon whose data directory and workspace are on one small tmpfs (the user level's
    folder, inside the data directory, too)."""
    with tiny_tmpfs(short_tmp / "disk", 2048):
        d = DaemonProcess(short_tmp)
        d.data_dir = short_tmp / "disk" / "data"
        d.workspace = short_tmp / "disk" / "ws"
        d.workspace.mkdir()
        d.start()
        try:
            yield d
        finally:
            d.stop()


def _session(d: DaemonProcess) -> str:
    w = str(d.workspace)
    sid = str(d.call("open_session", {"workspace": w})["sessionId"])
    d.call("append_events", {"workspace": w, "sessionId": sid, "events": [EVENT]})
    return sid


def _files(d: DaemonProcess) -> dict[str, bytes | str]:
    """Every file of the workspace and of the daemon's data directory, but the instance
    lock (it names the running daemon) and SQLite's own ``-wal`` and ``-shm`` companions."""
    data = {
        f"data/{k}": v
        for k, v in snapshot(d.data_dir).items()
        if k != "makad.lock" and not k.endswith(("-wal", "-shm"))
    }
    return {**data, **{f"ws/{k}": v for k, v in snapshot(d.workspace).items()}}


def _reads(d: DaemonProcess, w: str, sid: str | None, entry: str | None) -> dict[str, Any]:
    """Each read method's answer for workspace ``w`` (the session and entry ones when given)."""
    calls: list[tuple[str, dict[str, Any]]] = [
        ("read_state", {"workspace": w, "includeEntries": True}),
        ("get_settings", {"workspace": w}),
        ("list_proposals", {"workspace": w}),
        ("list_backups", {"workspace": w}),
        ("export_memories", {"workspace": w}),
        ("subscribe", {"workspace": w}),
    ]
    if w != "@user":  # the user level has no sessions, history or context of its own
        calls += [
            ("search_history", {"workspace": w, "query": "deploy"}),
            ("build_context", {"workspace": w, "budgetTokens": 800}),
            ("get_attention", {"workspace": w}),
            ("list_sessions", {"workspace": w}),
            ("suggest", {"workspace": w}),
            ("list_episodes", {"workspace": w}),
            ("consolidation_candidates", {"workspace": w}),
        ]
    if sid is not None:
        calls += [
            ("read_events", {"workspace": w, "sessionId": sid}),
            ("retrieve", {"workspace": w, "refs": [f"event:{sid}:1"]}),
            ("get_working_state", {"workspace": w, "sessionId": sid}),
            ("list_checkpoints", {"workspace": w, "sessionId": sid}),
            ("build_context", {"workspace": w, "sessionId": sid, "budgetTokens": 800}),
        ]
    if entry is not None:
        calls.append(("memory_history", {"workspace": w, "id": entry}))
    answers: dict[str, Any] = {"status": d.call("status")}
    for method, params in calls:
        key = method if "sessionId" not in params or method != "build_context" else "build_context(session)"
        answers[key] = d.call(method, params)
    return answers


def _setup(d: DaemonProcess, variant: str) -> tuple[str, str | None, str | None]:
    """The workspace (or level) to read, its session and an entry, as ``variant`` has them."""
    w = str(d.workspace)
    if variant == "sessions":
        return w, _session(d), None
    if variant == "memory":
        d.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
        entry = d.call("add_entry", {"workspace": w, "title": "Deploys", "content": "use make to deploy"})
        d.call("propose", {"workspace": w, "title": "Tea", "content": "Ana drinks tea."})
        return w, _session(d), entry["entry"]["id"]
    assert variant == "user"
    for level in ("@user", w):
        d.call("set_settings", {"workspace": level, "agentReadEnabled": True})
    entry = d.call("add_entry", {"workspace": "@user", "title": "Editor", "content": "I use vim to deploy"})
    _session(d)
    return "@user", None, entry["entry"]["id"]


@pytest.mark.parametrize("variant", ["sessions", "memory", "user"])
def test_a_daemon_started_on_a_full_disk_answers_every_read(disk: DaemonProcess, variant: str) -> None:
    """Started again on a full disk, the daemon answers every read of a workspace it knew
    (with sessions only, with memory and a proposal, the user level) with what is stored,
    at the revision it had, and no file changes; status warns disk_full; a write is
    io_error disk_full; once space is freed the warning goes, and a write works without a
    restart and moves the revision on."""
    d = disk
    w, sid, entry = _setup(d, variant)
    before = d.call("read_state", {"workspace": w})
    d.stop()
    filler = fill_disk(d.data_dir.parent)
    files = _files(d)
    d.start()

    answers = _reads(d, w, sid, entry)
    state = answers["read_state"]
    assert state["revision"] == before["revision"]
    assert state["status"] == before["status"] and state["sha256"] == before["sha256"]
    if sid is not None:
        events = answers["read_events"]["events"]
        assert [e["text"] for e in events] == [EVENT["text"]]
        assert [m["content"] for m in answers["build_context(session)"]["messages"]] == [EVENT["text"]]
        assert [s["sessionId"] for s in answers["list_sessions"]["sessions"]] == [sid]
    if entry is not None:
        assert [e["id"] for e in state["entries"]] == [entry]
        assert answers["memory_history"]
    if variant == "memory":
        assert [p["proposal"]["title"] for p in answers["list_proposals"]["proposals"]] == ["Tea"]
    if variant == "user":
        pack = d.call("build_context", {"workspace": str(d.workspace), "budgetTokens": 800})
        assert "I use vim to deploy" in "".join(s["text"] for s in pack["segments"])
    refused = remote_error(d, "add_entry", {"workspace": w, "title": "More", "content": "not now"})
    assert (refused.kind, refused.data.get("reason")) == ("io_error", "disk_full")
    assert _files(d) == files
    status = answers["status"]
    first = status["warnings"][0]
    assert (first["kind"], first["workspace"]) == ("disk_full", str(d.data_dir)) and "ENOSPC" in first[
        "message"
    ]

    filler.unlink()
    assert "disk_full" not in [w_["kind"] for w_ in d.call("status")["warnings"]]
    added = d.call("add_entry", {"workspace": w, "title": "More", "content": "room again"})
    assert added["revision"] > before["revision"]
    assert d.call("read_state", {"workspace": w})["revision"] == added["revision"]
    if sid is not None:
        appended = d.call("append_events", {"workspace": w, "sessionId": sid, "events": [EVENT]})
        assert appended["lastSeq"] == 2


def _forget_revisions(data_dir: Path) -> None:
    """The ledgers as a daemon that never stored a workspace's revision leaves them."""
    for path in data_dir.rglob("ledger.sqlite3"):
        conn = sqlite3.connect(path)
        try:
            conn.execute("DELETE FROM settings WHERE key = '__revision__'")
            conn.commit()
        finally:
            conn.close()


def test_a_revision_never_stored_is_handed_out_on_a_full_disk_and_never_again(
    disk: DaemonProcess,
) -> None:
    """A workspace whose ledger holds no revision, opened by a daemon started on a full disk,
    reads at a new revision past every one handed out before; a daemon killed and started
    again on the still full disk hands out a later one, never the same; the one stored once
    space is back is later still."""
    d = disk
    w = str(d.workspace)
    sid = _session(d)
    seen = [d.call("read_state", {"workspace": w})["revision"]]
    d.stop()
    _forget_revisions(d.data_dir)
    filler = fill_disk(d.data_dir.parent)
    for _ in range(2):
        d.start()
        state = d.call("read_state", {"workspace": w})
        assert [e["text"] for e in d.call("read_events", {"workspace": w, "sessionId": sid})["events"]] == [
            EVENT["text"]
        ]
        assert state["revision"] > max(seen)
        seen.append(state["revision"])
        d.kill9()
        d.proc = None
    d.start()
    filler.unlink()
    added = d.call("add_entry", {"workspace": w, "title": "More", "content": "room again"})
    assert added["revision"] > max(seen)


@pytest.fixture
def data_disk(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon whose data directory alone is a small tmpfs (the workspace has room)."""
    with tiny_tmpfs(short_tmp / "data", 2048):
        d = DaemonProcess(short_tmp)
        d.start()
        try:
            yield d
        finally:
            d.stop()


def _history_vias(d: DaemonProcess, entry: str) -> list[str]:
    history = d.call("memory_history", {"workspace": str(d.workspace), "id": entry})
    return [(step["data"] or {}).get("via") for step in history["events"]]


def test_a_users_edit_taken_in_on_a_full_disk_is_served_and_recorded_once_freed(
    data_disk: DaemonProcess,
) -> None:
    """The user edits MEMORY.md while the data disk is full: reads serve the edit at a new
    revision; once space is freed the edit is in the entry's history, recorded by the
    daemon's next ledger write, without a restart, with the revision it was read at."""
    d = data_disk
    w = str(d.workspace)
    entry = d.call("add_entry", {"workspace": w, "title": "Deploys", "content": "We deploy on Fridays."})
    entry_id = entry["entry"]["id"]
    sid = _session(d)
    filler = fill_disk(d.data_dir)
    path = d.workspace / "memory" / "MEMORY.md"
    saved = path.with_name("MEMORY.md.tmp")  # saved as editors do: a new file renamed over it
    saved.write_text(path.read_text().replace("Fridays", "Tuesdays"))
    saved.replace(path)

    state = d.call("read_state", {"workspace": w, "includeEntries": True})
    assert "Tuesdays" in state["content"]
    assert state["revision"] > entry["revision"]

    filler.unlink()
    d.call("append_events", {"workspace": w, "sessionId": sid, "events": [EVENT]})
    assert "external_edit" in _history_vias(d, entry_id)
    assert d.call("read_state", {"workspace": w})["revision"] == state["revision"]
