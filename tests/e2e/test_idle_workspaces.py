"""Idle workspaces are let go of (their watch stopped, their state freed) and opened again
from disk by their next call; subscribed ones and ones with work pending are kept."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import DaemonProcess, daemon_in_tmp, inotify_watched_inodes

CAP = 2
_names = itertools.count()


@pytest.fixture(scope="module")
def releasing() -> Iterator[DaemonProcess]:
    """A daemon keeping ``CAP`` ledgers open that releases a workspace as soon as it is idle."""
    yield from daemon_in_tmp(env={"MAKAD_MAX_OPEN_WORKSPACES": str(CAP), "MAKAD_WORKSPACE_RELEASE_MS": "1"})


def folder(d: DaemonProcess) -> str:
    path = d.root / f"f{next(_names)}"
    path.mkdir()
    return str(path)


def watched_inodes(d: DaemonProcess) -> set[int]:
    """The inodes of the directories the daemon's inotify watches are on (from /proc)."""
    assert d.proc is not None
    return inotify_watched_inodes(d.proc.pid)


def watched(d: DaemonProcess, ws: str) -> bool:
    return os.stat(Path(ws) / "memory").st_ino in watched_inodes(d)


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what} after {seconds} s")
        time.sleep(0.05)


def push_out(d: DaemonProcess) -> None:
    """Use enough other folders that every earlier workspace's ledger is closed."""
    with d.client() as c:
        for _ in range(CAP + 1):
            c.call("read_state", {"workspace": folder(d)})


def wait_released(d: DaemonProcess, ws: str, what: str = "released") -> None:
    """Push other folders' ledgers in until ``ws`` is no longer watched (the attention
    keeper's last look at a workspace may open its ledger again after a first push)."""
    deadline = time.monotonic() + 30.0
    while True:
        # Unwatched twice, 0.3 s apart: while the watch restarts (for another folder), no
        # folder is watched for a moment.
        if not watched(d, ws):
            time.sleep(0.3)
            if not watched(d, ws):
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what} after 30 s")
        push_out(d)
        time.sleep(0.3)


def save_by_hand(ws: str, extra: str) -> None:
    memory = Path(ws) / "memory" / "MEMORY.md"
    tmp = memory.with_name(".MEMORY.md.swp")
    tmp.write_text(memory.read_text() + extra)
    os.replace(tmp, memory)


def test_an_edit_made_while_released_is_read_and_moves_the_revision(releasing: DaemonProcess) -> None:
    """A released folder is no longer watched; a hand edit made then is in its next read,
    and a conditional read with the revision from before gets the new state, not notModified."""
    ws = folder(releasing)
    releasing.call("add_entry", {"workspace": ws, "title": "Before", "content": "typed by the agent"})
    before = releasing.call("read_state", {"workspace": ws})["revision"]
    wait_released(releasing, ws)
    save_by_hand(ws, "\n## Typed by hand\nwhile released\n")
    state = releasing.call("read_state", {"workspace": ws, "ifRevision": before, "includeEntries": True})
    assert state.get("notModified") is not True
    assert [e["title"] for e in state["entries"]] == ["Before", "Typed by hand"]
    assert state["revision"] != before
    wait_for(lambda: watched(releasing, ws), "watched again")


def test_an_untouched_released_folder_keeps_its_revision(releasing: DaemonProcess) -> None:
    """A folder nobody edited while released answers a conditional read notModified, as before."""
    ws = folder(releasing)
    releasing.call("add_entry", {"workspace": ws, "title": "Kept", "content": "unchanged"})
    before = releasing.call("read_state", {"workspace": ws})["revision"]
    wait_released(releasing, ws)
    assert releasing.call("read_state", {"workspace": ws, "ifRevision": before}) == {
        "notModified": True,
        "revision": before,
    }


def test_a_subscribed_workspace_is_kept_and_its_subscriber_hears_edits(releasing: DaemonProcess) -> None:
    """A subscription keeps its workspace (watched) however many folders are released
    around it, and the subscriber hears a hand edit; once it unsubscribes, the workspace
    is released like any other."""
    ws = folder(releasing)
    releasing.call("add_entry", {"workspace": ws, "title": "Watched", "content": "subscribed"})
    with releasing.client() as sub:
        base = sub.call("subscribe", {"workspace": ws})["revision"]
        other = folder(releasing)
        releasing.call("add_entry", {"workspace": other, "title": "Other", "content": "not subscribed"})
        wait_released(releasing, other, "released (the folder beside it)")
        wait_for(lambda: watched(releasing, ws), "watched (the watch restarting)", seconds=5)
        save_by_hand(ws, "\n## Edited\nunder a subscription\n")
        note = next(sub.notifications())
        assert note["method"] == "memory_changed"
        assert note["params"]["cause"] == "external_edit" and note["params"]["revision"] > base
        sub.call("unsubscribe", {"workspace": ws})
    wait_released(releasing, ws, "released after unsubscribing")


def test_a_session_waiting_to_go_idle_keeps_its_workspace(releasing: DaemonProcess) -> None:
    """An open session with events whose behavior records are not written yet keeps its
    workspace (the attention keeper has work there), while a folder beside it is released."""
    ws = folder(releasing)
    releasing.call("add_entry", {"workspace": ws, "title": "Busy", "content": "a session is open"})
    sid = releasing.call("open_session", {"workspace": ws})["sessionId"]
    events = [{"type": "user_message", "text": "wire the deploy script"}]
    releasing.call("append_events", {"workspace": ws, "sessionId": sid, "events": events})
    other = folder(releasing)
    releasing.call("add_entry", {"workspace": other, "title": "Other", "content": "idle"})
    wait_released(releasing, other, "released (the folder beside it)")
    assert watched(releasing, ws)
    releasing.call("close_session", {"workspace": ws, "sessionId": sid})
    wait_released(releasing, ws, "released once the session closed")
    events_read = releasing.call("read_events", {"workspace": ws, "sessionId": sid})["events"]
    assert [e["text"] for e in events_read] == ["wire the deploy script"]


def test_proposals_and_settings_survive_a_release(releasing: DaemonProcess) -> None:
    """A proposal queued and the settings set before a release are there after it, and the
    proposal can be approved into MEMORY.md."""
    ws = folder(releasing)
    settings = releasing.call(
        "set_settings",
        {"workspace": ws, "extractToolEnabled": True, "agentReadEnabled": True, "defaultDecayDays": 9},
    )
    queued = releasing.call("propose", {"workspace": ws, "title": "Proposed", "content": "waits for review"})
    pid = queued["proposal"]["id"]
    wait_released(releasing, ws)
    assert releasing.call("get_settings", {"workspace": ws}) == settings
    proposals = releasing.call("list_proposals", {"workspace": ws})["proposals"]
    assert [p["proposal"]["id"] for p in proposals] == [pid]
    approved = releasing.call("approve", {"workspace": ws, "ids": [pid]})
    assert [a["proposalId"] for a in approved["approved"]] == [pid]
    state = releasing.call("read_state", {"workspace": ws, "includeEntries": True})
    assert [e["title"] for e in state["entries"]] == ["Proposed"]
