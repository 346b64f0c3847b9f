"""A revision is only ever equal within one workspace: a conditional read never answers
"not modified" for a different folder.

Revisions come from one clock per data directory, so the folder a symlink named before it
was repointed and the one it names now — or the user level before and after its folder
changed — never share one, not even across a restart or with revisions stored before the
clock existed. A changed folder is a change (the full state), and says so where the name
is the user level's (``new_workspace``; its subscribers follow the name).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from maka import Client, StatePoller
from makad.store.ledger import Ledger
from makad.store.workspaces import workspace_id
from tests.support import DaemonProcess

USER = "@user"


def seeded(folder: Path, fact: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "memory").mkdir(mode=0o700, exist_ok=True)
    (folder / "memory" / "MEMORY.md").write_text(f"# Maka Memory\n\n## Fact\n\n{fact}\n")
    return folder


def read(c: Client, workspace: str, **params: Any) -> dict[str, Any]:
    reply: dict[str, Any] = c.call("read_state", {"workspace": workspace, "includeEntries": True, **params})
    return reply


def facts(state: dict[str, Any]) -> list[str]:
    return [e["content"] for e in state["entries"]]


def repoint(link: Path, target: Path) -> None:
    """Swap a symlink's target atomically (as `ln -sfn` does)."""
    tmp = link.with_name(link.name + ".new")
    tmp.symlink_to(target)
    os.replace(tmp, link)


def store_revision(d: DaemonProcess, folder: Path, revision: int) -> None:
    """A ledger that says ``revision``, as one written before the revision clock would."""
    ledger = Ledger(d.data_dir / "workspaces" / workspace_id(folder.resolve()) / "ledger.sqlite3")
    ledger.put_settings_json({"__revision__": revision})
    ledger.close()


def test_a_repointed_symlink_is_a_change_even_after_the_same_number_of_writes(
    module_daemon: DaemonProcess,
) -> None:
    """Two folders written alike, one symlink: after it is repointed, the old revision gets
    the other folder's full state — never notModified."""
    d = module_daemon
    root = Path(tempfile.mkdtemp(prefix="rev", dir=d.root))
    a, b = seeded(root / "a", "alpha lives here"), seeded(root / "b", "beta lives here")
    for folder in (a, b):
        for i in range(3):
            d.call("add_entry", {"workspace": str(folder), "title": f"Same {i}", "content": f"write {i}"})
    link = root / "current"
    link.symlink_to(a)
    with d.client() as c:
        before = read(c, str(link))
        assert "alpha lives here" in facts(before)
        repoint(link, b)
        after = read(c, str(link), ifRevision=before["revision"])
        assert "notModified" not in after
        assert "beta lives here" in facts(after) and "alpha lives here" not in facts(after)
        assert after["path"] == str(b / "memory" / "MEMORY.md")
        assert after["revision"] != before["revision"]
        repoint(link, a)  # and back: a's revision is not b's either
        again = read(c, str(link), ifRevision=after["revision"])
        assert "notModified" not in again and "alpha lives here" in facts(again)
        assert read(c, str(link), ifRevision=again["revision"]) == {
            "notModified": True,
            "revision": again["revision"],
        }


def test_revisions_are_unique_across_workspaces(module_daemon: DaemonProcess) -> None:
    """However many workspaces and writes, no two workspaces ever show the same revision,
    and each one's revisions only increase."""
    d = module_daemon
    root = Path(tempfile.mkdtemp(prefix="uniq", dir=d.root))
    folders = [seeded(root / f"f{i}", f"fact {i}") for i in range(6)]
    seen: dict[int, Path] = {}
    last: dict[Path, int] = {}
    with d.client() as c:
        for step in range(4):
            for i, folder in enumerate(folders):
                if (i + step) % 2:
                    c.call("add_entry", {"workspace": str(folder), "title": f"T{step}", "content": "x"})
                revision = read(c, str(folder))["revision"]
                assert seen.setdefault(revision, folder) == folder, (revision, folder)
                assert revision >= last.get(folder, 0)
                last[folder] = revision


def test_equal_revisions_stored_before_the_clock_are_no_longer_equal(short_tmp: Path) -> None:
    """Two data directories that both stored revision 5 (before revisions were unique): a
    client holding 5 for the folder the link named gets the other folder in full."""
    d = DaemonProcess(short_tmp)
    a, b = seeded(short_tmp / "a", "alpha"), seeded(short_tmp / "b", "beta")
    store_revision(d, a, 5)
    store_revision(d, b, 5)
    link = short_tmp / "link"
    link.symlink_to(b)
    d.start()
    try:
        with d.client() as c:
            for folder in (a, b, link):
                state = read(c, str(folder), ifRevision=5)
                assert "notModified" not in state and state["revision"] > 5
            assert read(c, str(a))["revision"] != read(c, str(b))["revision"]
    finally:
        d.stop()


def test_a_repoint_while_the_daemon_was_stopped_is_a_change(short_tmp: Path) -> None:
    """Read through a symlink, stop the daemon, repoint, start: the old revision is not
    the new folder's (the clock starts past every revision it handed out)."""
    d = DaemonProcess(short_tmp)
    a, b = seeded(short_tmp / "a", "alpha"), seeded(short_tmp / "b", "beta")
    link = short_tmp / "link"
    link.symlink_to(b)
    d.start()
    try:
        with d.client() as c:
            b_rev = read(c, str(link))["revision"]
            c.call("add_entry", {"workspace": str(b), "title": "B", "content": "b write"})
        repoint(link, a)
        with d.client() as c:
            a_rev = read(c, str(link))["revision"]
            assert a_rev != b_rev
        d.restart()
        repoint(link, b)
        with d.client() as c:
            state = read(c, str(link), ifRevision=a_rev)
            assert "notModified" not in state and "beta" in facts(state)
            assert state["revision"] != a_rev
    finally:
        d.stop()


def test_the_state_poller_sees_a_repointed_symlink(module_daemon: DaemonProcess) -> None:
    """maka.StatePoller over a symlink: after the repoint, poll() is True with the new folder."""
    d = module_daemon
    root = Path(tempfile.mkdtemp(prefix="poll", dir=d.root))
    a, b = seeded(root / "a", "alpha for the poller"), seeded(root / "b", "beta for the poller")
    link = root / "link"
    link.symlink_to(a)
    with d.client() as c:
        poller = StatePoller(c, workspace=str(link), includeEntries=True, includeContent=False)
        assert poller.poll() and not poller.poll()
        repoint(link, b)
        assert poller.poll()
        assert poller.state is not None and "beta for the poller" in facts(dict(poller.state))


def user_daemon(root: Path, user_dir: Path) -> DaemonProcess:
    return DaemonProcess(root, env={"MAKAD_USER_MEMORY": str(user_dir)})


def test_a_repointed_user_memory_folder_is_a_new_workspace_and_says_so(short_tmp: Path) -> None:
    """--user-memory is a symlink; repointed, "@user" is another folder: the old revision
    gets it in full with a new_workspace warning, and a subscriber of "@user" hears of it
    (settings_changed, then that folder's own changes), all under the name "@user"."""
    first, second = (
        seeded(short_tmp / "u1", "first user folder"),
        seeded(short_tmp / "u2", "second user folder"),
    )
    link = short_tmp / "user"
    link.symlink_to(first)
    d = user_daemon(short_tmp, link)
    d.start()
    try:
        with d.client() as c, d.client() as sub:
            before = read(c, USER)
            assert "first user folder" in facts(before) and before["warnings"] == []
            assert sub.call("subscribe", {"workspace": USER})["workspace"] == USER
            repoint(link, second)
            after = read(c, USER, ifRevision=before["revision"])
            assert "notModified" not in after and "second user folder" in facts(after)
            assert "new_workspace" in [w["kind"] for w in after["warnings"]]
            note = next(sub.notifications())
            assert note["method"] == "settings_changed" and note["params"]["workspace"] == USER
            c.call("add_entry", {"workspace": USER, "title": "Later", "content": "in the second folder"})
            note = next(sub.notifications())
            assert note["method"] == "memory_changed" and note["params"]["workspace"] == USER
            status = c.call("status")
            assert any(w["workspace"] == USER and w["kind"] == "new_workspace" for w in status["warnings"])
        assert "first user folder" in (first / "memory" / "MEMORY.md").read_text()  # left as it was
    finally:
        d.stop()


@pytest.mark.slow
def test_another_user_memory_folder_after_a_restart_says_so(short_tmp: Path) -> None:
    """Started again with another --user-memory: the old revision gets the new folder in
    full with new_workspace; started again with the same folder: no warning."""
    first, second = seeded(short_tmp / "u1", "first"), seeded(short_tmp / "u2", "second")
    d = user_daemon(short_tmp, first)
    d.start()
    try:
        old = d.call("read_state", {"workspace": USER})
        assert old["warnings"] == []
    finally:
        d.stop()
    d.extra_env["MAKAD_USER_MEMORY"] = str(second)
    d.start()
    try:
        new = d.call("read_state", {"workspace": USER, "ifRevision": old["revision"]})
        assert "notModified" not in new and new["revision"] != old["revision"]
        assert [w["kind"] for w in new["warnings"]] == ["new_workspace"]
    finally:
        d.stop()
    d.start()
    try:
        assert d.call("read_state", {"workspace": USER})["warnings"] == []
    finally:
        d.stop()


def test_a_subscriber_under_a_repointed_symlink_follows_it(module_daemon: DaemonProcess) -> None:
    """Subscribed through a symlink: once the link names another folder (seen at the next
    call through it), the subscriber hears settings_changed under its name, then that
    folder's changes — and no more of the old folder's."""
    d = module_daemon
    root = Path(tempfile.mkdtemp(prefix="follow", dir=d.root))
    a, b = seeded(root / "a", "alpha"), seeded(root / "b", "beta")
    link = root / "link"
    link.symlink_to(a)
    with d.client() as c, Client(str(d.socket), timeout=10) as sub:
        sub.call("subscribe", {"workspace": str(link)})
        repoint(link, b)
        assert "beta" in facts(read(c, str(link)))
        note = next(sub.notifications())
        assert note["method"] == "settings_changed" and note["params"]["workspace"] == str(link)
        c.call("add_entry", {"workspace": str(a), "title": "Old", "content": "to the old folder"})
        c.call("add_entry", {"workspace": str(b), "title": "New", "content": "to the new folder"})
        note = next(sub.notifications())
        assert note["method"] == "memory_changed" and note["params"]["workspace"] == str(link)
        assert note["params"]["revision"] == read(c, str(b))["revision"]


def test_a_revision_given_in_place_of_an_old_one_survives_a_restart(short_tmp: Path) -> None:
    """A workspace written before the revision clock (revision 7 stored), and one never
    written, keep the revision the daemon gave them when nothing changed: after a restart a
    conditional read with it is notModified and a write expecting it goes through."""
    d = DaemonProcess(short_tmp)
    upgraded, unwritten = seeded(short_tmp / "a", "alpha"), seeded(short_tmp / "b", "beta")
    store_revision(d, upgraded, 7)
    d.start()
    try:
        with d.client() as c:
            given = {folder: read(c, str(folder))["revision"] for folder in (upgraded, unwritten)}
        assert given[upgraded] > 7
        d.restart()
        with d.client() as c:
            for folder, revision in given.items():
                assert read(c, str(folder), ifRevision=revision) == {
                    "notModified": True,
                    "revision": revision,
                }
                c.call(
                    "add_entry",
                    {
                        "workspace": str(folder),
                        "title": "Later",
                        "content": "x",
                        "expectedRevision": revision,
                    },
                )
    finally:
        d.stop()


def test_a_save_made_while_the_daemon_was_stopped_moves_the_revision(short_tmp: Path) -> None:
    """MEMORY.md and PENDING.md saved while no daemon ran: after the restart, a conditional
    read with the revision from before is the new full state, never notModified; a folder
    left alone keeps its revision."""
    d = DaemonProcess(short_tmp)
    edited, untouched, queued = (
        seeded(short_tmp / "e", "epsilon"),
        seeded(short_tmp / "u", "upsilon"),
        seeded(short_tmp / "q", "kappa"),
    )
    d.start()
    try:
        with d.client() as c:
            for folder in (edited, untouched, queued):
                c.call(
                    "add_entry", {"workspace": str(folder), "title": "Written", "content": "by the daemon"}
                )
            c.call(
                "set_settings",
                {"workspace": str(queued), "agentReadEnabled": True, "extractToolEnabled": True},
            )
            c.call("propose", {"workspace": str(queued), "title": "Idea", "content": "a proposal"})
            before = {folder: read(c, str(folder))["revision"] for folder in (edited, untouched, queued)}
        d.stop()
        memory = edited / "memory" / "MEMORY.md"
        memory.write_text(memory.read_text() + "\n## Typed while stopped\n\nby hand\n")
        pending = queued / "memory" / "PENDING.md"
        pending.write_text(pending.read_text().replace("a proposal", "a proposal, reworded"))
        d.start()
        with d.client() as c:
            after = read(c, str(edited), ifRevision=before[edited])
            assert "notModified" not in after and after["revision"] > before[edited]
            assert "by hand" in facts(after)
            proposals = c.call("read_state", {"workspace": str(queued), "ifRevision": before[queued]})
            assert "notModified" not in proposals and proposals["revision"] > before[queued]
            assert read(c, str(untouched), ifRevision=before[untouched]) == {
                "notModified": True,
                "revision": before[untouched],
            }
    finally:
        d.stop()
