"""Many workspaces, few open ledgers: past ``--max-open-workspaces`` the least recently
used idle ledger is closed and reopened by its next call, with nothing lost."""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess, daemon_in_tmp

CAP = 4
_names = itertools.count()


@pytest.fixture(scope="module", params=["kept", "released"])
def capped(request: pytest.FixtureRequest) -> Iterator[DaemonProcess]:
    """A daemon that keeps at most ``CAP`` workspace ledgers open; "released": one that also
    lets go of each workspace as soon as its ledger is closed and it is idle."""
    env = {"MAKAD_MAX_OPEN_WORKSPACES": str(CAP)}
    if request.param == "released":
        env["MAKAD_WORKSPACE_RELEASE_MS"] = "1"
    yield from daemon_in_tmp(env=env)


def folder(d: DaemonProcess) -> str:
    path = d.root / f"f{next(_names)}"
    path.mkdir()
    return str(path)


def open_ledgers(d: DaemonProcess) -> set[str]:
    """The ledger files the daemon holds open (its descriptors, read from /proc)."""
    assert d.proc is not None
    fd_dir = Path(f"/proc/{d.proc.pid}/fd")
    found: set[str] = set()
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue  # closed meanwhile
        if target.endswith("/ledger.sqlite3"):
            found.add(target)
    return found


def fd_count(d: DaemonProcess) -> int:
    assert d.proc is not None
    return len(os.listdir(f"/proc/{d.proc.pid}/fd"))


def ledger_of(d: DaemonProcess, ws: str) -> str:
    return str(d.data_dir / "workspaces" / workspace_id(Path(ws).resolve()) / "ledger.sqlite3")


def read_others(d: DaemonProcess, count: int) -> None:
    """Read ``count`` fresh folders: enough to push every earlier ledger out."""
    with d.client() as c:
        for _ in range(count):
            c.call("read_state", {"workspace": folder(d)})


def close_ledger(d: DaemonProcess, ws: str) -> None:
    """Read fresh folders until ``ws``'s ledger is closed (the attention keeper's look at a
    workspace just written, a moment later, may open it again after a first round)."""
    deadline = time.monotonic() + 30
    read_others(d, CAP + 2)
    while ledger_of(d, ws) in open_ledgers(d):
        assert time.monotonic() < deadline, "the ledger stayed open"
        time.sleep(0.2)
        read_others(d, CAP + 2)


def holds_soon(condition: Callable[[], bool]) -> bool:
    """Whether ``condition`` holds now or within 30 s."""
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def seen_open_after_a_call(d: DaemonProcess, ws: str, sid: str) -> bool:
    """Whether ``ws``'s ledger is seen open right after a call reading it. The attention
    keeper's rounds over the workspaces written before (in the background) open their
    ledgers one after another, and may push this one out again at any moment: the call is
    made again until it is seen open, for 30 s at most."""
    deadline = time.monotonic() + 30
    while True:
        d.call("read_events", {"workspace": ws, "sessionId": sid})
        if ledger_of(d, ws) in open_ledgers(d):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def append(c: Client | DaemonProcess, ws: str, sid: str, *texts: str) -> dict[str, Any]:
    events = [{"type": "user_message", "text": t} for t in texts]
    result: dict[str, Any] = c.call("append_events", {"workspace": ws, "sessionId": sid, "events": events})
    return result


def test_reading_50_folders_keeps_the_open_ledgers_at_the_cap(capped: DaemonProcess) -> None:
    """Fifty folders read one after another leave at most the cap's ledgers open. (A ledger
    being opened is one over the cap until the least recently used one is closed: the
    attention keeper's rounds over the workspaces the module's earlier tests wrote open
    theirs in the background, so the counts are looked at until no such open is under way.)"""
    read_others(capped, CAP)
    before = fd_count(capped)
    read_others(capped, 50)
    assert holds_soon(lambda: len(open_ledgers(capped)) <= CAP and fd_count(capped) <= before + 2)


def test_a_closed_workspace_reopens_with_its_entries_events_and_settings(capped: DaemonProcess) -> None:
    """Entries, ledger events and settings are all there when a closed ledger reopens."""
    ws = folder(capped)
    capped.call("add_entry", {"workspace": ws, "title": "Kept", "content": "survives closing"})
    sid = capped.call("open_session", {"workspace": ws})["sessionId"]
    append(capped, ws, sid, "first note", "second note")
    settings = capped.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "defaultDecayDays": 9})
    close_ledger(capped, ws)
    state = capped.call("read_state", {"workspace": ws, "includeEntries": True})
    assert [e["title"] for e in state["entries"]] == ["Kept"]
    events = capped.call("read_events", {"workspace": ws, "sessionId": sid})["events"]
    assert [e["text"] for e in events] == ["first note", "second note"]
    assert capped.call("get_settings", {"workspace": ws}) == settings
    assert append(capped, ws, sid, "after reopening")["lastSeq"] == 3
    assert seen_open_after_a_call(capped, ws, sid)


def test_an_edit_made_while_closed_is_seen_after_reopening(capped: DaemonProcess) -> None:
    """A hand edit to MEMORY.md while the workspace's ledger is closed shows at the next read."""
    ws = folder(capped)
    capped.call("add_entry", {"workspace": ws, "title": "Before", "content": "typed by the agent"})
    close_ledger(capped, ws)
    memory = Path(ws) / "memory" / "MEMORY.md"
    tmp = memory.with_name(".MEMORY.md.swp")
    tmp.write_text(memory.read_text() + "\n## Typed by hand\nwhile the ledger was closed\n")
    os.replace(tmp, memory)
    state = capped.call("read_state", {"workspace": ws, "includeEntries": True})
    assert [e["title"] for e in state["entries"]] == ["Before", "Typed by hand"]


def test_a_subscriber_still_hears_edits_after_the_cap_is_passed(capped: DaemonProcess) -> None:
    """A subscribed workspace's notifications keep coming however many folders are read after."""
    ws = folder(capped)
    capped.call("add_entry", {"workspace": ws, "title": "Watched", "content": "subscribed"})
    with capped.client() as sub:
        base = sub.call("subscribe", {"workspace": ws})["revision"]
        read_others(capped, CAP + 2)
        memory = Path(ws) / "memory" / "MEMORY.md"
        tmp = memory.with_name(".MEMORY.md.swp")
        tmp.write_text(memory.read_text() + "\n## Edited\nunder a subscription\n")
        os.replace(tmp, memory)
        note = next(sub.notifications())
        assert note["method"] == "memory_changed"
        assert note["params"]["cause"] == "external_edit" and note["params"]["revision"] > base


def test_an_incognito_session_survives_its_ledger_closing(capped: DaemonProcess) -> None:
    """An incognito session (memory only) keeps its events while its workspace's ledger is closed."""
    ws = folder(capped)
    sid = capped.call("open_session", {"workspace": ws, "incognito": True})["sessionId"]
    append(capped, ws, sid, "kept in memory only")
    read_others(capped, CAP + 2)
    events = capped.call("read_events", {"workspace": ws, "sessionId": sid})["events"]
    assert [e["text"] for e in events] == ["kept in memory only"]


def test_concurrent_calls_on_workspaces_being_closed_are_all_served(capped: DaemonProcess) -> None:
    """Calls racing the closing and reopening of their ledgers all succeed."""
    spaces = [folder(capped) for _ in range(3 * CAP)]
    sessions = {ws: capped.call("open_session", {"workspace": ws})["sessionId"] for ws in spaces}
    failures: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            with capped.client() as c:
                for n in range(30):
                    ws = spaces[(offset + n) % len(spaces)]
                    append(c, ws, sessions[ws], f"note {offset} {n}")
                    c.call("read_state", {"workspace": ws})
                    c.call("search_history", {"workspace": ws, "query": f"note {offset}"})
        except BaseException as exc:  # reported below, with the thread's own error
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    counted = 0
    for ws, sid in sessions.items():
        counted += len(
            capped.call("read_events", {"workspace": ws, "sessionId": sid, "limit": 1000})["events"]
        )
    assert counted == 6 * 30
    assert len(open_ledgers(capped)) <= CAP


def test_a_folder_made_again_while_its_ledger_was_closed_is_a_new_workspace(capped: DaemonProcess) -> None:
    """The identity check holds across a closed ledger: the folder deleted and made again
    meanwhile is a new workspace, its switches at their defaults and its history gone."""
    ws = folder(capped)
    capped.call("add_entry", {"workspace": ws, "title": "Old", "content": "the old folder's"})
    capped.call("set_settings", {"workspace": ws, "agentReadEnabled": True})
    capped.call("open_session", {"workspace": ws})
    close_ledger(capped, ws)
    shutil.rmtree(ws)
    os.mkdir(ws)
    state = capped.call("read_state", {"workspace": ws})
    assert state["entryCount"] == 0 and state["agentReadEnabled"] is False
    assert "new_workspace" in [w["kind"] for w in state["warnings"]]
    assert capped.call("list_sessions", {"workspace": ws})["sessions"] == []


def test_the_attention_keeper_leaves_closed_ledgers_closed() -> None:
    """With more workspaces than the cap, each with a session its behavior records were
    read from, the keeper's later rounds open none of them again: the same ledgers stay
    open round after round instead of every workspace's being reopened in turn."""
    rounds_s = 0.2  # the keeper's round with an idle time of 800 ms
    for d in daemon_in_tmp(env={"MAKAD_MAX_OPEN_WORKSPACES": "2", "MAKAD_BEHAVIOR_IDLE_MS": "800"}):
        folders = [folder(d) for _ in range(6)]
        with d.client() as c:
            for ws in folders:
                sid = c.call("open_session", {"workspace": ws})["sessionId"]
                append(c, ws, sid, "wire the deploy script to staging")
                c.call("close_session", {"workspace": ws, "sessionId": sid})
        # Once the sessions' records are read and the state derived (a few rounds, more
        # on a loaded machine), a window of ten rounds sees only the ledgers left open.
        windows = []
        for _ in range(20):
            seen: set[str] = set()
            deadline = time.monotonic() + 10 * rounds_s
            while time.monotonic() < deadline:
                seen |= open_ledgers(d)
                time.sleep(0.01)
            windows.append(len(seen))
            if len(seen) <= 2:
                break
        assert windows[-1] <= 2, windows


def watch_ledgers(d: DaemonProcess, seen: set[str], stop: threading.Event) -> None:
    """Add each ledger seen open to ``seen`` until ``stop`` is set."""
    while not stop.is_set():
        seen.update(open_ledgers(d))
        time.sleep(0.001)


def test_a_write_after_reading_50_folders_opens_no_other_ledger() -> None:
    """After 50 folders are only read, sessions written and closed in another workspace wake
    the attention keeper, which opens none of the ledgers the reads left closed (watched in
    /proc the whole time), and get_attention there still answers."""
    for d in daemon_in_tmp(env={"MAKAD_MAX_OPEN_WORKSPACES": str(CAP)}):
        read = [folder(d) for _ in range(50)]
        with d.client() as c:
            for ws in read:
                c.call("read_state", {"workspace": ws})
        before = open_ledgers(d)
        seen: set[str] = set()
        stop = threading.Event()
        watcher = threading.Thread(target=watch_ledgers, args=(d, seen, stop))
        watcher.start()
        try:
            written = folder(d)
            with d.client() as c:
                # Two sessions closed, each waited for by get_attention: the keeper's round
                # that took in the first write is over once the second close is taken in.
                for text in ("wire the deploy script to staging", "the staging deploy works"):
                    sid = c.call("open_session", {"workspace": written})["sessionId"]
                    append(c, written, sid, text)
                    c.call("close_session", {"workspace": written, "sessionId": sid})
                    assert c.call("get_attention", {"workspace": written})["enabled"]
        finally:
            stop.set()
            watcher.join()
        assert seen - before <= {ledger_of(d, written)}, f"{len(seen - before)} other ledgers opened"
