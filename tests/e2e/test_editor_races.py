"""Editor saves racing daemon writes lose nothing, over the real socket.

One daemon for the module, started with the test-only fault point
``editor_save_before_rename``: when ``.editor-rename.MEMORY.md`` (or
``.editor-in-place.MEMORY.md``) exists, it lands as an editor save right before the
daemon's own rename -- the window a check-then-rename write lost saves in. Without
those files the daemon behaves as usual, so the other tests share it.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from makad.core.save_merge import RETURNED_NOTE
from makad.store.workspaces import workspace_id
from tests.cli.helpers import MAKA, run_maka
from tests.cli.test_watch import wait_for_line
from tests.support import DaemonProcess, daemon_in_tmp

_WORKSPACES = itertools.count()


@pytest.fixture(scope="module")
def daemon() -> Iterator[DaemonProcess]:
    yield from daemon_in_tmp(env={"MAKAD_FAULT_POINT": "editor_save_before_rename"})


def fresh(d: DaemonProcess, *, gate: bool = True) -> Path:
    ws = d.root / f"race{next(_WORKSPACES)}"
    (ws / "memory").mkdir(parents=True)
    if gate:
        d.call("set_settings", {"workspace": str(ws), "agentReadEnabled": True, "extractToolEnabled": True})
    d.call("add_entry", {"workspace": str(ws), "title": "Seed", "content": "seed entry kept"})
    return ws


def memory(ws: Path) -> Path:
    return ws / "memory" / "MEMORY.md"


def call(d: DaemonProcess, method: str, ws: Path, **params: Any) -> Any:
    return d.call(method, {"workspace": str(ws), **params})


def propose(d: DaemonProcess, ws: Path, content: str, **params: Any) -> str:
    proposal_id: str = call(d, "propose", ws, title=content.split()[0], content=content, **params)[
        "proposal"
    ]["id"]
    return proposal_id


def approve(d: DaemonProcess, ws: Path, proposal_id: str) -> dict[str, Any]:
    entry: dict[str, Any] = call(d, "approve", ws, ids=[proposal_id])["approved"][0]["entry"]
    return entry


def save_rename(path: Path, text: str) -> None:
    tmp = path.with_name(".MEMORY.md.editor~")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def history(d: DaemonProcess, ws: Path, entry_id: str) -> list[tuple[str, str]]:
    return [(e["action"], e["actor"]) for e in call(d, "memory_history", ws, id=entry_id)["events"]]


def active_contents(d: DaemonProcess, ws: Path) -> list[str]:
    state = call(d, "read_state", ws, includeEntries=True)
    return [e["content"] for e in state["entries"]]


def backups_of(d: DaemonProcess, ws: Path | None = None) -> list[str]:
    """The MEMORY.md backups the daemon kept: of workspace ``ws``, or of all of them."""
    folder = "*" if ws is None else workspace_id(ws.resolve())
    return [
        p.read_text(encoding="utf-8") for p in d.data_dir.glob(f"workspaces/{folder}/backups/*-MEMORY.md")
    ]


def notes_until(client: Client, wanted: str) -> list[dict[str, Any]]:
    """Notifications up to the first memory_changed that carries ``wanted`` (a param)."""
    seen: list[dict[str, Any]] = []
    for note in client.notifications():
        seen.append(dict(note))
        if note.get("method") == "memory_changed" and wanted in note["params"]:
            return seen
    raise AssertionError("no such notification")


# --- (a) the daemon's write never replaces a save it has not seen ---------------------------


@pytest.mark.parametrize("style", ["rename", "in-place"])
def test_a_save_landing_right_before_the_rename_is_put_back_and_merged(
    daemon: DaemonProcess, style: str
) -> None:
    """An editor save lands between the daemon's read and its rename (rename or in place):
    the save is backed up, put back, and the new entry written on top of it; no entry is
    recorded as deleted and the user's text is in the file."""
    ws = fresh(daemon)
    # The module's daemon: its log and backups hold the other style's displaced save too.
    displaced_before = daemon.log_text().count('"save_displaced"')
    text = memory(ws).read_text(encoding="utf-8") + "\n## Mine\nsaved while the daemon wrote\n"
    memory(ws).with_name(f".editor-{style}.MEMORY.md").write_text(text, encoding="utf-8")
    added = call(daemon, "add_entry", ws, title="New", content="added by the daemon")
    final = memory(ws).read_text(encoding="utf-8")
    assert "saved while the daemon wrote" in final and "added by the daemon" in final
    assert "seed entry kept" in final
    assert not memory(ws).with_name(f".editor-{style}.MEMORY.md").exists()  # the save did land
    assert any("saved while the daemon wrote" in b for b in backups_of(daemon, ws))
    assert ("deleted", "user") not in history(daemon, ws, added["entry"]["id"])
    assert daemon.log_text().count('"save_displaced"') > displaced_before
    assert not list((ws / "memory").glob(".MEMORY.md.*.tmp"))


# --- (b) a save whose buffer predates a daemon write ------------------------------------------


def test_a_buffer_read_before_an_approval_sends_the_entry_back_to_pending(
    module_daemon: DaemonProcess,
) -> None:
    """Read, approve, then save the old buffer plus a note: the approved entry cannot be told
    from one the user deleted on seeing it, so it goes back to PENDING.md with the note, the
    notifications say so, the ledger records no deletion by the user, and the user's note
    stays. Approving it again puts it back, with the origin it had."""
    ws = fresh(module_daemon)
    proposal = propose(module_daemon, ws, "approved while the editor was open")
    buffer = memory(ws).read_text(encoding="utf-8")
    with Client(str(module_daemon.socket), timeout=10) as sub:
        sub.call("subscribe", {"workspace": str(ws)})
        entry = approve(module_daemon, ws, proposal)
        save_rename(memory(ws), buffer + "\n## My note\ntyped in the old buffer\n")
        notes = notes_until(sub, "returned")
        queued = next(n for n in sub.notifications() if n.get("method") == "proposals_changed")
    assert notes[-1]["params"]["returned"] == [entry["id"]]
    assert notes[-1]["params"]["cause"] == "external_edit"
    assert queued["params"]["returned"] == [entry["id"]]  # the queueing names it too
    final = memory(ws).read_text(encoding="utf-8")
    assert "typed in the old buffer" in final and "approved while the editor was open" not in final
    pending = call(module_daemon, "list_proposals", ws)["proposals"]
    [back] = [p for p in pending if p["proposal"]["id"] == entry["id"]]
    assert back["note"] == RETURNED_NOTE
    assert back["proposal"]["content"] == "approved while the editor was open"
    actions = history(module_daemon, ws, entry["id"])
    assert ("returned", "daemon") in actions and ("deleted", "user") not in actions
    again = approve(module_daemon, ws, entry["id"])
    assert again["origin"] == "extracted"
    assert "approved while the editor was open" in active_contents(module_daemon, ws)
    assert ("approved", "user") in history(module_daemon, ws, again["id"])


def test_a_returned_entry_approved_again_is_the_same_entry(module_daemon: DaemonProcess) -> None:
    """An approved entry a stale save dropped waits in PENDING.md under its id; `maka watch`
    says it was returned and why; approved again it is the same entry (id, creation date),
    and `maka memory show` finds it by that id with its whole lineage from the agent's
    proposal on. Dropped by a stale save once more and approved again, it is still that
    entry, its second approval recorded too."""
    ws = fresh(module_daemon)
    proposal = propose(module_daemon, ws, "kept through a stale save")
    with subprocess.Popen(
        [*MAKA, "--socket", str(module_daemon.socket), "-w", str(ws), "watch"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as watch:
        assert watch.stderr is not None
        threading.Timer(60, watch.kill).start()
        watch.stderr.readline()
        buffer = memory(ws).read_text(encoding="utf-8")
        entry = approve(module_daemon, ws, proposal)
        save_rename(memory(ws), buffer + "\n## My note\ntyped in the old buffer\n")
        # watch reads the files as each notification arrives: either line may come first.
        seen = [wait_for_line(watch, "returned ")]
        seen.append(wait_for_line(watch, "keep it" if "to PENDING.md" in seen[0] else "to PENDING.md"))
        watch.kill()
    [removed] = [line for line in seen if "to PENDING.md" in line]
    [queued] = [line for line in seen if "keep it" in line]
    short = entry["id"][:12]
    assert removed.split()[:2] == ["returned", "'kept'"] and short in removed
    assert "a save lacked it" in removed
    assert short in queued and "approve it to keep it" in queued
    for note in ("second note", "third note"):
        buffer = memory(ws).read_text(encoding="utf-8")
        again = approve(module_daemon, ws, entry["id"])
        assert (again["id"], again["createdAt"], again["origin"]) == (
            entry["id"],
            entry["createdAt"],
            "extracted",
        )
        if note == "second note":  # dropped once more by a buffer older than that approval
            save_rename(memory(ws), buffer + f"\n## Note\n{note}\n")
            pending = call(module_daemon, "list_proposals", ws)["proposals"]
            assert [p["note"] for p in pending if p["proposal"]["id"] == entry["id"]] == [RETURNED_NOTE]
    assert "kept through a stale save" in active_contents(module_daemon, ws)
    lineage = call(module_daemon, "memory_history", ws, id=entry["id"])["events"]
    steps = [(e["action"], e["actor"], e["proposalId"]) for e in lineage]
    assert steps[0] == ("proposed", "agent", proposal)
    assert ("approved", "user", proposal) in steps
    assert steps.count(("returned", "daemon", entry["id"])) == 2
    assert steps.count(("approved", "user", entry["id"])) == 2 and steps[-1][0] == "approved"
    shown = run_maka(module_daemon, "memory", "show", short, "-w", str(ws), workspace=False)
    assert shown.returncode == 0 and "kept through a stale save" in shown.stdout
    assert "proposed by agent" in shown.stdout and "returned by daemon to PENDING.md" in shown.stdout


def test_a_save_written_before_the_approval_gets_the_entry_back(module_daemon: DaemonProcess) -> None:
    """The editor wrote its temp file before the approval and renamed it after: the save
    provably predates it, so the approved entry is written back into the file next to the
    user's note (notification ``reapplied``), and the ledger says so."""
    ws = fresh(module_daemon)
    proposal = propose(module_daemon, ws, "approved before the rename")
    tmp = memory(ws).with_name(".MEMORY.md.slow~")
    tmp.write_text(memory(ws).read_text(encoding="utf-8") + "\n## Slow\nwritten before\n", encoding="utf-8")
    time.sleep(0.05)
    with Client(str(module_daemon.socket), timeout=10) as sub:
        sub.call("subscribe", {"workspace": str(ws)})
        entry = approve(module_daemon, ws, proposal)
        os.replace(tmp, memory(ws))
        notes = notes_until(sub, "reapplied")
    assert notes[-1]["params"]["reapplied"] == [entry["id"]]
    final = memory(ws).read_text(encoding="utf-8")
    assert "written before" in final and "approved before the rename" in final
    assert final.index("written before") < final.index("approved before the rename")
    actions = history(module_daemon, ws, entry["id"])
    assert ("reapplied", "daemon") in actions and ("deleted", "user") not in actions
    assert all(
        p["proposal"]["id"] != entry["id"] for p in call(module_daemon, "list_proposals", ws)["proposals"]
    )


def test_a_stale_save_does_not_undo_a_supersede(module_daemon: DaemonProcess) -> None:
    """An approval archived the entry it supersedes and added its successor; a save from a
    buffer older than that still shows the old entry active: that proves the buffer old,
    so both the archive and the successor are re-applied."""
    ws = fresh(module_daemon)
    old = approve(module_daemon, ws, propose(module_daemon, ws, "the old fact"))
    buffer = memory(ws).read_text(encoding="utf-8")
    successor = approve(module_daemon, ws, propose(module_daemon, ws, "the new fact", supersedes=old["id"]))
    save_rename(memory(ws), buffer + "\n## Aside\nwritten meanwhile\n")
    state = call(module_daemon, "read_state", ws, includeEntries=True, includeArchived=True)
    by_id = {e["id"]: e for e in state["entries"]}
    assert by_id[old["id"]]["status"] == "archived"
    assert by_id[successor["id"]]["status"] == "active"
    assert "written meanwhile" in memory(ws).read_text(encoding="utf-8")
    assert ("deleted", "user") not in history(module_daemon, ws, successor["id"])


def test_deleting_an_entry_after_saving_a_version_with_it_is_the_users(module_daemon: DaemonProcess) -> None:
    """The user's editor held the entry (they saved a version with it): deleting it is a
    deletion by the user -- not brought back, not queued, and recorded as theirs."""
    ws = fresh(module_daemon)
    entry = approve(module_daemon, ws, propose(module_daemon, ws, "seen and then deleted"))
    save_rename(memory(ws), memory(ws).read_text(encoding="utf-8") + "\n## Seen\nI saw it\n")
    call(module_daemon, "read_state", ws)
    text = memory(ws).read_text(encoding="utf-8")
    start = text.index("## seen")
    end = text.index("## Seen")
    save_rename(memory(ws), text[:start] + text[end:])
    assert "seen and then deleted" not in active_contents(module_daemon, ws)
    assert all(
        p["proposal"]["id"] != entry["id"] for p in call(module_daemon, "list_proposals", ws)["proposals"]
    )
    assert ("deleted", "user") in history(module_daemon, ws, entry["id"])


def test_a_stale_save_of_pending_keeps_the_new_proposal(module_daemon: DaemonProcess) -> None:
    """PENDING.md saved from a buffer older than a proposal: the user's edit of another
    proposal stays and the newer proposal is back in the queue with the note."""
    ws = fresh(module_daemon)
    first = propose(module_daemon, ws, "first proposal text")
    path = ws / "memory" / "PENDING.md"
    buffer = path.read_text(encoding="utf-8")
    second = propose(module_daemon, ws, "second proposal text")
    tmp = path.with_name(".PENDING.md.editor~")
    tmp.write_text(buffer.replace("first proposal text", "first proposal, edited"), encoding="utf-8")
    os.replace(tmp, path)
    pending = {p["proposal"]["id"]: p for p in call(module_daemon, "list_proposals", ws)["proposals"]}
    assert pending[first]["proposal"]["content"] == "first proposal, edited"
    assert pending[second]["proposal"]["content"] == "second proposal text"
    assert pending[second]["note"] == RETURNED_NOTE
    assert ("returned", "daemon") in history(module_daemon, ws, second)


# --- saves seen half-way ------------------------------------------------------------------


def test_a_file_renamed_away_for_a_moment_is_not_a_deletion(short_tmp: Path) -> None:
    """vim's save renames MEMORY.md to MEMORY.md~ before writing the new one: a read in
    that moment waits for the new file instead of taking every entry as deleted."""
    # A wait no stall of this test outlasts: the new file lands once the daemon waits.
    d = DaemonProcess(short_tmp, env={"MAKAD_MISSING_SAVE_WAIT_MS": "60000"})
    d.start()
    try:
        ws = fresh(d)
        seed_id = call(d, "read_state", ws, includeEntries=True)["entries"][0]["id"]
        text = memory(ws).read_text(encoding="utf-8") + "\n## Vim\nwritten by vim\n"
        os.replace(memory(ws), memory(ws).with_name("MEMORY.md~"))
        got: dict[str, Any] = {}
        reader = threading.Thread(target=lambda: got.update(call(d, "read_state", ws, includeEntries=True)))
        reader.start()
        d.wait_for_log("waiting_for_missing_file")
        memory(ws).write_text(text, encoding="utf-8")
        memory(ws).with_name("MEMORY.md~").unlink()
        reader.join(30)
        assert not reader.is_alive()
        assert {e["content"] for e in got["entries"]} == {"seed entry kept", "written by vim"}
        assert ("deleted", "user") not in history(d, ws, seed_id)
    finally:
        d.stop()


def test_a_file_truncated_mid_save_is_read_once_written(short_tmp: Path) -> None:
    """An in-place save truncates the file and writes it a moment later: a read in between
    waits for the text instead of taking the empty file for the user's."""
    # A wait no stall of this test outlasts: the text lands once the daemon waits.
    d = DaemonProcess(short_tmp, env={"MAKAD_EMPTY_SAVE_WAIT_MS": "60000"})
    d.start()
    try:
        ws = fresh(d)
        seed_id = call(d, "read_state", ws, includeEntries=True)["entries"][0]["id"]
        text = memory(ws).read_text(encoding="utf-8") + "\n## Slow disk\nwritten after a pause\n"
        got: dict[str, Any] = {}
        with open(memory(ws), "w", encoding="utf-8") as fh:
            fh.flush()
            reader = threading.Thread(
                target=lambda: got.update(call(d, "read_state", ws, includeEntries=True))
            )
            reader.start()
            d.wait_for_log("waiting_for_emptied_file")
            fh.write(text)
        reader.join(30)
        assert not reader.is_alive()
        assert {e["content"] for e in got["entries"]} == {"seed entry kept", "written after a pause"}
        assert ("deleted", "user") not in history(d, ws, seed_id)
    finally:
        d.stop()


def test_a_stale_save_read_while_incognito_is_merged_once_writes_are_allowed(
    module_daemon: DaemonProcess,
) -> None:
    """While incognito nothing is written, even to take in a stale save (a list_proposals
    reads the files then); once incognito is off, the next read merges it as usual."""
    ws = fresh(module_daemon)
    proposal = propose(module_daemon, ws, "approved before incognito")
    buffer = memory(ws).read_text(encoding="utf-8")
    entry = approve(module_daemon, ws, proposal)
    call(module_daemon, "set_settings", ws, incognito=True)
    saved = buffer + "\n## Private\nsaved while incognito\n"
    save_rename(memory(ws), saved)
    pending_before = (ws / "memory" / "PENDING.md").read_bytes()
    call(module_daemon, "list_proposals", ws)
    call(module_daemon, "memory_history", ws, id=entry["id"])
    assert memory(ws).read_text(encoding="utf-8") == saved
    assert (ws / "memory" / "PENDING.md").read_bytes() == pending_before
    call(module_daemon, "set_settings", ws, incognito=False)
    assert "saved while incognito" in active_contents(module_daemon, ws)
    pending = call(module_daemon, "list_proposals", ws)["proposals"]
    assert [p["note"] for p in pending if p["proposal"]["id"] == entry["id"]] == [RETURNED_NOTE]
    assert ("deleted", "user") not in history(module_daemon, ws, entry["id"])


def test_when_pending_is_full_a_returned_entry_is_kept_in_a_backup(short_tmp: Path) -> None:
    """PENDING.md has no room for an entry a stale save dropped: the read still answers,
    and the version holding the entry is in the backups (never only in a file that is gone)."""
    d = DaemonProcess(short_tmp, env={"LOCAL_MEMORY_MAX_BYTES": "4096"})
    d.start()
    try:
        ws = fresh(d)
        proposal = propose(d, ws, "approved while pending fills up")
        buffer = memory(ws).read_text(encoding="utf-8")
        approve(d, ws, proposal)
        pending = ws / "memory" / "PENDING.md"
        pending.write_text("# Pending\n\n## Mine\n" + "typed by hand " * 280 + "\n", encoding="utf-8")
        save_rename(memory(ws), buffer + "\n## Note\nmine\n")
        state = call(d, "read_state", ws, includeEntries=True)
        assert state["status"] == "ok" and "mine" in [e["content"] for e in state["entries"]]
        assert any("approved while pending fills up" in b for b in backups_of(d))
        assert '"returned_entries_kept_in_backup"' in d.log_text()
    finally:
        d.stop()
