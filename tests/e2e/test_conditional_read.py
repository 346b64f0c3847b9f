"""read_state {ifRevision}: notModified exactly while nothing changed; includeContent: false.

"Changed" means the workspace revision moved (every change of MEMORY.md, PENDING.md or
the settings moves it) or a memory file on disk is not the one last read: an edit the
watcher has not ingested yet is found by the read itself.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from maka import Client, StatePoller
from makad.store.tracked import TrackedFile, unchanged_in
from tests.support import DaemonProcess

NOT_MODIFIED_KEYS = {"notModified", "revision"}


def seeded(ws: Path, text: str = "# Maka Memory\n\n## First\n\nOne fact.\n") -> Path:
    (ws / "memory").mkdir(mode=0o700)
    path = ws / "memory" / "MEMORY.md"
    path.write_text(text)
    return path


def read(c: Client, ws: Path, **params: Any) -> dict[str, Any]:
    reply: dict[str, Any] = c.call("read_state", {"workspace": str(ws), **params})
    return reply


def test_unchanged_workspace_answers_not_modified_without_the_state(
    module_daemon: DaemonProcess, new_ws: Path
) -> None:
    """Polled again at its revision, an unchanged workspace answers {notModified, revision} only."""
    seeded(new_ws)
    with module_daemon.client() as c:
        full = read(c, new_ws)
        for _ in range(3):
            reply = read(c, new_ws, ifRevision=full["revision"])
            assert reply == {"notModified": True, "revision": full["revision"]}
        assert set(reply) == NOT_MODIFIED_KEYS


def test_another_revision_gets_the_full_state(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """An older or a future revision is not the current one: the whole state comes back."""
    seeded(new_ws)
    with module_daemon.client() as c:
        rev = read(c, new_ws)["revision"]
        for asked in (rev - 1, rev + 1, rev + 1000):
            reply = read(c, new_ws, ifRevision=asked)
            assert "notModified" not in reply
            assert reply["revision"] == rev and reply["entryCount"] == 1


def test_daemon_write_between_two_polls_is_seen(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """An add_entry after a poll: the next conditional poll gets the new entry and revision."""
    seeded(new_ws)
    with module_daemon.client() as c:
        before = read(c, new_ws)
        c.call("add_entry", {"workspace": str(new_ws), "title": "Second", "content": "Two."})
        after = read(c, new_ws, ifRevision=before["revision"], includeEntries=True)
        assert after["revision"] > before["revision"]
        assert [e["title"] for e in after["entries"]] == ["First", "Second"]
        again = read(c, new_ws, ifRevision=after["revision"])
        assert again == {"notModified": True, "revision": after["revision"]}


def test_hand_edits_between_polls_are_never_hidden(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Each hand edit, polled at once (before the watcher's debounce has passed), is in the reply."""
    path = seeded(new_ws)
    with module_daemon.client() as c:
        revision = read(c, new_ws)["revision"]
        for n in range(10):
            titles = ["First", *[f"Edit {i}" for i in range(n + 1)]]
            path.write_text("# Maka Memory\n\n" + "".join(f"## {t}\n\nA fact.\n\n" for t in titles))
            reply = read(c, new_ws, ifRevision=revision, includeEntries=True)
            assert "notModified" not in reply, n
            assert [e["title"] for e in reply["entries"]] == titles
            assert reply["revision"] > revision
            revision = reply["revision"]


def test_a_same_size_edit_is_seen(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A rewrite of the same length (only the mtime and bytes differ) is still a change."""
    path = seeded(new_ws, "# Maka Memory\n\n## First\n\nfact A\n")
    with module_daemon.client() as c:
        before = read(c, new_ws)
        path.write_text("# Maka Memory\n\n## First\n\nfact B\n")
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
        reply = read(c, new_ws, ifRevision=before["revision"])
        assert "fact B" in reply["content"] and reply["revision"] > before["revision"]


def test_a_same_second_nanosecond_edit_is_seen(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Same size, same mtime second, only mtime_ns differs: the poll right after is full."""
    path = seeded(new_ws, "# Maka Memory\n\n## First\n\nfact A\n")
    second = (time.time_ns() // 1_000_000_000 - 10) * 1_000_000_000
    os.utime(path, ns=(second + 100, second + 100))
    with module_daemon.client() as c:
        before = read(c, new_ws)
        assert read(c, new_ws, ifRevision=before["revision"])["notModified"] is True
        path.write_text("# Maka Memory\n\n## First\n\nfact B\n")
        os.utime(path, ns=(second + 200, second + 200))
        reply = read(c, new_ws, ifRevision=before["revision"])
        assert "fact B" in reply["content"] and reply["revision"] > before["revision"]


def test_an_atomic_rename_save_is_seen(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A save by rename (same size, same mtime_ns: only the inode differs) is a change."""
    path = seeded(new_ws, "# Maka Memory\n\n## First\n\nfact A\n")
    with module_daemon.client() as c:
        before = read(c, new_ws)
        st = path.stat()
        temp = path.with_name("MEMORY.md.tmp")
        temp.write_text("# Maka Memory\n\n## First\n\nfact C\n")
        os.utime(temp, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(temp, path)
        reply = read(c, new_ws, ifRevision=before["revision"])
        assert "fact C" in reply["content"] and reply["revision"] > before["revision"]


def test_a_pending_file_appearing_between_polls_is_seen(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """No PENDING.md at the first poll, one written by hand before the next: that poll is full."""
    seeded(new_ws)
    pending = new_ws / "memory" / "PENDING.md"
    assert not pending.exists()
    with module_daemon.client() as c:
        before = read(c, new_ws)
        assert read(c, new_ws, ifRevision=before["revision"])["notModified"] is True
        pending.write_text("# Pending\n\nA note written by hand.\n")
        after = read(c, new_ws, ifRevision=before["revision"])
        assert "notModified" not in after and after["revision"] > before["revision"]


def test_a_touched_file_is_not_a_change(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Only the mtime moved: the file is re-read, its bytes are the same, so notModified."""
    path = seeded(new_ws)
    with module_daemon.client() as c:
        rev = read(c, new_ws)["revision"]
        st = path.stat()
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000))
        assert read(c, new_ws, ifRevision=rev) == {"notModified": True, "revision": rev}


def test_settings_and_proposals_are_changes(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A settings change and a new proposal each move the revision: the next poll is full."""
    seeded(new_ws)
    ws = str(new_ws)
    with module_daemon.client() as c:
        first = read(c, new_ws)
        c.call("set_settings", {"workspace": ws, "agentReadEnabled": True})
        second = read(c, new_ws, ifRevision=first["revision"])
        assert second["agentReadEnabled"] is True and second["revision"] > first["revision"]
        c.call("set_settings", {"workspace": ws, "extractToolEnabled": True})
        second = read(c, new_ws, ifRevision=second["revision"])
        c.call("propose", {"workspace": ws, "title": "Idea", "content": "A proposal."})
        third = read(c, new_ws, ifRevision=second["revision"])
        assert third["pendingCount"] == first["pendingCount"] + 1
        assert third["revision"] > second["revision"]


def test_a_hand_edit_of_pending_is_a_change(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """A proposal's text edited by hand in PENDING.md: the next poll is full, at a new revision."""
    seeded(new_ws)
    ws = str(new_ws)
    with module_daemon.client() as c:
        c.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "extractToolEnabled": True})
        c.call("propose", {"workspace": ws, "title": "Idea", "content": "A proposal."})
        before = read(c, new_ws)
        assert before["pendingCount"] == 1
        pending = new_ws / "memory" / "PENDING.md"
        pending.write_text(pending.read_text().replace("A proposal.", "A proposal, edited by hand."))
        after = read(c, new_ws, ifRevision=before["revision"])
        assert "notModified" not in after
        assert after["pendingCount"] == 1 and after["revision"] > before["revision"]
        proposals = c.call("list_proposals", {"workspace": ws})
        assert "edited by hand" in str(proposals)


def test_disabled_workspace_polls_until_enabled(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Disabled, nothing is read, and polls say notModified; enabling it is a change."""
    seeded(new_ws)
    ws = str(new_ws)
    with module_daemon.client() as c:
        c.call("set_settings", {"workspace": ws, "enabled": False})
        off = read(c, new_ws)
        assert off["status"] == "disabled"
        assert read(c, new_ws, ifRevision=off["revision"]) == {
            "notModified": True,
            "revision": off["revision"],
        }
        c.call("set_settings", {"workspace": ws, "enabled": True})
        on = read(c, new_ws, ifRevision=off["revision"])
        assert on["status"] == "ok" and on["entryCount"] == 1


def test_include_content_false_leaves_the_text_out(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """includeContent: false drops ``content``; entries, counts and the revision stay."""
    seeded(new_ws)
    with module_daemon.client() as c:
        full = read(c, new_ws, includeEntries=True)
        lean = read(c, new_ws, includeEntries=True, includeContent=False)
        assert "content" not in lean and "One fact." in full["content"]
        assert lean == {k: v for k, v in full.items() if k != "content"}
        c.call("set_settings", {"workspace": str(new_ws), "enabled": False})
        assert "content" not in read(c, new_ws, includeContent=False)


def test_state_poller_polls_with_if_revision(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """maka.StatePoller: first poll full, unchanged polls False, a change True with the new state."""
    path = seeded(new_ws)
    with module_daemon.client() as c:
        poller = StatePoller(c, workspace=str(new_ws), includeEntries=True)
        assert poller.poll() is True and poller.state is not None
        first = poller.state
        assert poller.poll() is False and poller.state is first
        path.write_text(path.read_text() + "\n## Second\n\nTwo.\n")
        assert poller.poll() is True
        assert [e["title"] for e in poller.state.get("entries") or []] == ["First", "Second"]


def test_edits_concurrent_with_polls_are_never_missed(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """Daemon writes and hand edits racing a poll loop: states only move forward, and the
    first poll after the last edit returns has every entry (no stale notModified)."""
    path = seeded(new_ws)
    ws = str(new_ws)
    titles = ["First"]
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with module_daemon.client() as w:
                for i in range(12):
                    if i % 3 == 2:  # a hand edit, not yet seen by the watcher
                        with path.open("a") as f:
                            f.write(f"\n## Hand {i}\n\nBy hand.\n")
                        titles.append(f"Hand {i}")
                    else:
                        w.call("add_entry", {"workspace": ws, "title": f"Daemon {i}", "content": "Two."})
                        titles.append(f"Daemon {i}")
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    with module_daemon.client() as c:
        poller = StatePoller(c, workspace=ws, includeEntries=True, includeContent=False)
        assert poller.poll()
        seen = [poller.state]
        thread = threading.Thread(target=writer)
        thread.start()
        while not done.is_set():
            if poller.poll():
                seen.append(poller.state)
        thread.join()
        assert not errors, errors
        poller.poll()
        final = poller.state
        assert final is not None
        assert [e["title"] for e in final.get("entries") or []] == titles
        assert read(c, new_ws, ifRevision=final["revision"]) == {
            "notModified": True,
            "revision": final["revision"],
        }
    revisions = [s["revision"] for s in seen if s is not None]
    assert revisions == sorted(set(revisions))  # strictly increasing: never an older state
    for state in seen:
        assert state is not None
        shown = [e["title"] for e in state.get("entries") or []]
        assert shown == titles[: len(shown)]  # each a state that existed, in order


def test_a_decay_falling_due_between_polls_is_a_change(module_daemon: DaemonProcess, new_ws: Path) -> None:
    """An entry whose decay passes between two polls: the conditional poll and the
    text-free one both archive it (nothing else changed on disk, nobody holds the lock)."""
    seeded(new_ws)
    ws = str(new_ws)
    ttl_ms = 400
    with module_daemon.client() as c:
        added = c.call(
            "add_entry", {"workspace": ws, "title": "Brief", "content": "Soon.", "decayTtlMs": ttl_ms}
        )
        first = read(c, new_ws, includeContent=False)
        if first["entryCount"] == 1:  # the machine was too slow to poll before the decay
            return
        time.sleep(max(0.0, (added["entry"]["createdAt"] + ttl_ms) / 1000 - time.time()) + 0.05)
        polled = read(c, new_ws, ifRevision=first["revision"], includeContent=False, includeEntries=True)
        assert "notModified" not in polled and polled["revision"] > first["revision"]
        assert polled["entryCount"] == 1 and [e["title"] for e in polled["entries"]] == ["First"]
        assert "status=archived" in (new_ws / "memory" / "MEMORY.md").read_text()


def test_tracked_file_unchanged_by_stat(short_tmp: Path) -> None:
    """TrackedFile.unchanged: True only while the file (and its folder) is what refresh saw."""
    folder = short_tmp / "memory"
    folder.mkdir()
    path = folder / "MEMORY.md"
    tracked = TrackedFile("memory")
    assert not tracked.unchanged(path)  # never read
    tracked.refresh(path, 1 << 20)
    assert tracked.unchanged(path)  # missing, still missing
    path.write_text("## A\n\nx\n")
    assert not tracked.unchanged(path)
    tracked.refresh(path, 1 << 20)
    assert tracked.unchanged(path)
    path.write_text("## A\n\ny\n")  # same size
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    assert not tracked.unchanged(path)
    tracked.refresh(path, 1 << 20)
    moved = short_tmp / "elsewhere"
    shutil.move(folder, moved)
    folder.symlink_to(moved)  # the same file, reached through a symlinked folder
    assert not tracked.unchanged(path)
    folder.unlink()
    shutil.move(moved, folder)
    path.unlink()
    assert not tracked.unchanged(path)


def test_a_missing_file_appearing_is_a_change(short_tmp: Path) -> None:
    """unchanged_in: a file known missing beside a present one is unchanged until a file, or
    a dangling symlink, of that name appears."""
    folder = short_tmp / "memory"
    folder.mkdir()
    present, absent = folder / "MEMORY.md", folder / "PENDING.md"
    present.write_text("## A\n\nx\n")
    memory, pending = TrackedFile("memory"), TrackedFile("pending")
    memory.refresh(present, 1 << 20)
    pending.refresh(absent, 1 << 20)
    files = ((memory, str(present)), (pending, str(absent)))
    assert unchanged_in(str(folder), files)
    absent.symlink_to(short_tmp / "nowhere")
    assert not unchanged_in(str(folder), files)
    absent.unlink()
    assert unchanged_in(str(folder), files)
    absent.write_text("")
    assert not unchanged_in(str(folder), files)
