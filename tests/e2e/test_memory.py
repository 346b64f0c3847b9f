"""MEMORY.md over the socket: read_state, settings, the user's operations, files on disk."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from maka.errors import Conflict, IncognitoBlocked, NotFound, RemoteError
from makad.core import memory_format as fmt
from tests.support import DaemonProcess


def ws_of(d: DaemonProcess) -> str:
    return str(d.workspace)


def add(d: DaemonProcess, title: str, content: str, **kw: Any) -> dict[str, Any]:
    result: dict[str, Any] = d.call(
        "add_entry", {"workspace": ws_of(d), "title": title, "content": content, **kw}
    )
    return result


def memory_file(d: DaemonProcess) -> Path:
    return d.workspace / "memory" / "MEMORY.md"


def test_read_state_of_a_new_workspace(shared_daemon: DaemonProcess) -> None:
    """A workspace without memory reads as ok with no entries, and nothing is created."""
    state = shared_daemon.call("read_state", {"workspace": ws_of(shared_daemon)})
    assert state["status"] == "ok" and state["entryCount"] == 0 and state["content"] == ""
    assert not (shared_daemon.workspace / "memory").exists()


def test_add_entry_writes_file_with_private_modes(shared_daemon: DaemonProcess) -> None:
    """add_entry creates memory/ 0700 and MEMORY.md 0600 holding the entry."""
    result = add(shared_daemon, "Prefers tabs", "Use tabs for indentation.", tags=["Code Style"])
    entry = result["entry"]
    assert entry["origin"] == "manual" and entry["status"] == "active"
    assert entry["tags"] == ["code-style"]
    assert stat.S_IMODE((shared_daemon.workspace / "memory").stat().st_mode) == 0o700
    assert stat.S_IMODE(memory_file(shared_daemon).stat().st_mode) == 0o600
    parsed = fmt.entries(fmt.parse(memory_file(shared_daemon).read_text()))
    assert [e.id for e in parsed] == [entry["id"]]


def test_new_ids_follow_the_contract(shared_daemon: DaemonProcess) -> None:
    """New ids are sha256(content + createdAt)[:16]."""
    entry = add(shared_daemon, "T", "some content")["entry"]
    assert entry["id"] == fmt.new_entry_id("some content", entry["createdAt"])


def test_secrets_are_redacted_on_add_and_update(shared_daemon: DaemonProcess) -> None:
    """A secret in a manual entry never reaches MEMORY.md; the reply counts redactions."""
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    result = add(shared_daemon, "creds", f"token {token}")
    assert result["redactions"] == 1
    updated = shared_daemon.call(
        "update_entry",
        {"workspace": ws_of(shared_daemon), "id": result["entry"]["id"], "content": f"again {token}"},
    )
    assert updated["redactions"] == 1
    assert token not in memory_file(shared_daemon).read_text()


def test_update_archive_restore_delete(shared_daemon: DaemonProcess) -> None:
    """The user's operations change exactly the entry they name."""
    keep = add(shared_daemon, "Keep", "keep me")["entry"]
    target = add(shared_daemon, "Target", "v1")["entry"]
    ws = ws_of(shared_daemon)
    shared_daemon.call("update_entry", {"workspace": ws, "id": target["id"], "content": "v2"})
    shared_daemon.call("archive_entry", {"workspace": ws, "id": target["id"]})
    state = shared_daemon.call(
        "read_state", {"workspace": ws, "includeEntries": True, "includeArchived": True}
    )
    by_id = {e["id"]: e for e in state["entries"]}
    assert by_id[target["id"]]["status"] == "archived" and by_id[target["id"]]["content"] == "v2"
    assert state["entryCount"] == 1
    shared_daemon.call("restore_entry", {"workspace": ws, "id": target["id"]})
    deleted = shared_daemon.call("delete_entry", {"workspace": ws, "id": target["id"]})
    assert deleted["entry"]["id"] == target["id"]
    ids = [e.id for e in fmt.entries(fmt.parse(memory_file(shared_daemon).read_text()))]
    assert ids == [keep["id"]]
    with pytest.raises(NotFound):
        shared_daemon.call("delete_entry", {"workspace": ws, "id": target["id"]})


def test_expected_revision_conflict(shared_daemon: DaemonProcess) -> None:
    """A stale expectedRevision gives conflict carrying the current revision; nothing is written."""
    add(shared_daemon, "A", "a")
    state = shared_daemon.call("read_state", {"workspace": ws_of(shared_daemon)})
    before = memory_file(shared_daemon).read_bytes()
    with pytest.raises(Conflict) as info:
        shared_daemon.call(
            "add_entry",
            {
                "workspace": ws_of(shared_daemon),
                "title": "B",
                "content": "b",
                "expectedRevision": state["revision"] - 1,
            },
        )
    assert info.value.data["currentRevision"] == state["revision"]
    assert memory_file(shared_daemon).read_bytes() == before


def test_request_id_retry_returns_first_result(shared_daemon: DaemonProcess) -> None:
    """A retried add_entry with the same requestId returns the first result and adds nothing."""
    params = {
        "workspace": ws_of(shared_daemon),
        "title": "Once",
        "content": "only once",
        "requestId": "req-1",
    }
    first = shared_daemon.call("add_entry", params)
    second = shared_daemon.call("add_entry", params)
    assert first == second
    assert len(fmt.entries(fmt.parse(memory_file(shared_daemon).read_text()))) == 1


def test_settings_patch_and_persist(daemon: DaemonProcess) -> None:
    """set_settings patches; settings survive a restart; extract is effective only with read."""
    ws = ws_of(daemon)
    defaults = daemon.call("get_settings", {"workspace": ws})
    assert defaults["enabled"] is True and defaults["agentReadEnabled"] is False
    assert defaults["incognito"] is False and defaults["historyRecallEnabled"] is False
    s = daemon.call("set_settings", {"workspace": ws, "extractToolEnabled": True})
    assert s["extractToolEnabled"] is True and s["extractToolEffective"] is False
    s = daemon.call("set_settings", {"workspace": ws, "agentReadEnabled": True, "defaultDecayDays": 7})
    assert s["extractToolEffective"] is True and s["defaultDecayDays"] == 7
    daemon.restart()
    assert daemon.call("get_settings", {"workspace": ws}) == s


def test_disabled_reads_nothing_and_refuses_writes(shared_daemon: DaemonProcess) -> None:
    """enabled=false: read_state says disabled without reading; writes are refused."""
    add(shared_daemon, "A", "secret-ish content")
    ws = ws_of(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws, "enabled": False})
    state = shared_daemon.call("read_state", {"workspace": ws, "includeEntries": True})
    assert state["status"] == "disabled" and state["content"] == "" and state["entries"] is None
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("add_entry", {"workspace": ws, "title": "B", "content": "b"})
    assert info.value.kind == "disabled"


def test_incognito_blocks_reads_and_writes(shared_daemon: DaemonProcess) -> None:
    """Invariant 3: incognito ⇒ incognito_blocked even with both switches on; files untouched."""
    add(shared_daemon, "A", "content")
    ws = ws_of(shared_daemon)
    shared_daemon.call(
        "set_settings",
        {"workspace": ws, "incognito": True, "agentReadEnabled": True, "extractToolEnabled": True},
    )
    before = memory_file(shared_daemon).read_bytes()
    state = shared_daemon.call("read_state", {"workspace": ws, "includeEntries": True})
    assert state["status"] == "incognito_blocked"
    assert state["content"] == "" and state["entryCount"] == 0 and state["latestEntry"] is None
    with pytest.raises(IncognitoBlocked):
        shared_daemon.call("add_entry", {"workspace": ws, "title": "B", "content": "b"})
    assert memory_file(shared_daemon).read_bytes() == before


def test_mangled_file_is_read_fail_open(shared_daemon: DaemonProcess) -> None:
    """Invariant 1 over the socket: junk and a malformed comment never drop a known entry."""
    mem = shared_daemon.workspace / "memory"
    mem.mkdir(mode=0o700)
    (mem / "MEMORY.md").write_text(
        "# Maka Memory\n\nstray prose\n\n"
        "## Good\n<!-- maka-memory: id=aaaa origin=manual createdAt=1 updatedAt=1 status=active "
        "tags= futureField=x -->\nfine\n\n"
        "## Broken comment\n<!-- maka-memory: id=bbbb createdAt=notanumber\nstill content\n\n"
        "## No comment\nplain text\n\n```\n## not a heading\n```\n"
    )
    state = shared_daemon.call("read_state", {"workspace": ws_of(shared_daemon), "includeEntries": True})
    assert state["status"] == "ok"
    titles = [e["title"] for e in state["entries"]]
    assert titles == ["Good", "Broken comment", "No comment"]
    assert "not a heading" in state["entries"][2]["content"]


def test_safe_mode_over_cap(shared_daemon: DaemonProcess) -> None:
    """A MEMORY.md over 128 KiB puts the state in safe_mode: no entries, a reason."""
    mem = shared_daemon.workspace / "memory"
    mem.mkdir(mode=0o700)
    (mem / "MEMORY.md").write_text("# Maka Memory\n\n## Big\n" + "x" * (130 * 1024))
    state = shared_daemon.call("read_state", {"workspace": ws_of(shared_daemon), "includeEntries": True})
    assert state["status"] == "safe_mode" and state["entryCount"] == 0
    assert "cap" in state["reason"]
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("add_entry", {"workspace": ws_of(shared_daemon), "title": "B", "content": "b"})
    assert info.value.kind == "safe_mode"


def test_symlinked_memory_dir_is_refused(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """A symlinked memory directory is refused; nothing is written through it."""
    elsewhere = short_tmp / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, shared_daemon.workspace / "memory")
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("add_entry", {"workspace": ws_of(shared_daemon), "title": "T", "content": "c"})
    assert info.value.kind == "invalid_workspace"
    assert list(elsewhere.iterdir()) == []
    state = shared_daemon.call("read_state", {"workspace": ws_of(shared_daemon)})
    assert state["status"] == "error"


def test_memory_file_replaced_by_directory_is_error_state(shared_daemon: DaemonProcess) -> None:
    """MEMORY.md being a directory gives status error with a generalized reason."""
    (shared_daemon.workspace / "memory" / "MEMORY.md").mkdir(parents=True)
    state = shared_daemon.call("read_state", {"workspace": ws_of(shared_daemon)})
    assert state["status"] == "error" and "MEMORY.md" not in (state["reason"] or "")


def test_relative_or_missing_workspace_is_invalid(shared_daemon: DaemonProcess) -> None:
    """A relative or missing workspace path gives invalid_workspace."""
    for bad in ("relative/path", "/does/not/exist", ""):
        with pytest.raises(RemoteError) as info:
            shared_daemon.call("read_state", {"workspace": bad})
        assert info.value.kind == "invalid_workspace"


def test_decay_archives_in_place(shared_daemon: DaemonProcess) -> None:
    """An entry past createdAt + decayTtlMs is archived in the file on the next read."""
    entry = add(shared_daemon, "Short-lived", "soon gone", decayTtlMs=1)["entry"]
    state = shared_daemon.call(
        "read_state", {"workspace": ws_of(shared_daemon), "includeEntries": True, "includeArchived": True}
    )
    assert [e["status"] for e in state["entries"] if e["id"] == entry["id"]] == ["archived"]
    assert "status=archived" in memory_file(shared_daemon).read_text()


def test_default_decay_days_applies_to_new_entries(shared_daemon: DaemonProcess) -> None:
    """defaultDecayDays gives new entries without their own decay a decayTtlMs."""
    shared_daemon.call("set_settings", {"workspace": ws_of(shared_daemon), "defaultDecayDays": 2})
    assert add(shared_daemon, "T", "c")["entry"]["decayTtlMs"] == 2 * 86_400_000


def test_decays_the_file_cannot_hold_are_refused(shared_daemon: DaemonProcess) -> None:
    """A negative or past-64-bit decayTtlMs and a defaultDecayDays under 1 ms or past
    64-bit ms are invalid_params naming the field, and nothing is written (before, such
    entries were written with a decay that read back as none)."""
    ws = ws_of(shared_daemon)
    for ttl in (-5, 2**63):
        with pytest.raises(RemoteError) as refused:
            add(shared_daemon, "Odd decay", "c", decayTtlMs=ttl)
        assert (refused.value.kind, refused.value.data["path"]) == ("invalid_params", "$.decayTtlMs")
    for days in (1e-9, 1e300):
        with pytest.raises(RemoteError) as refused:
            shared_daemon.call("set_settings", {"workspace": ws, "defaultDecayDays": days})
        assert (refused.value.kind, refused.value.data["path"]) == ("invalid_params", "$.defaultDecayDays")
    assert shared_daemon.call("read_state", {"workspace": ws})["entryCount"] == 0
    assert shared_daemon.call("get_settings", {"workspace": ws})["defaultDecayDays"] is None


def test_a_decay_of_zero_never_decays_anywhere(shared_daemon: DaemonProcess) -> None:
    """decayTtlMs 0 (as the file reads it: never decays): the entry stays active and the
    agent is shown it, not left out as expired."""
    ws = ws_of(shared_daemon)
    shared_daemon.call("set_settings", {"workspace": ws, "agentReadEnabled": True})
    entry = add(shared_daemon, "Kept for good", "zero means never", decayTtlMs=0)["entry"]
    state = shared_daemon.call("read_state", {"workspace": ws, "includeEntries": True})
    assert [e["status"] for e in state["entries"] if e["id"] == entry["id"]] == ["active"]
    pack = shared_daemon.call("build_context", {"workspace": ws, "budgetTokens": 2000})
    (candidate,) = [c for c in pack["trace"]["candidates"] if c["sourceId"] == "memory:" + entry["id"]]
    assert candidate["included"] and candidate["reason"] is None


def test_backups_and_restore(shared_daemon: DaemonProcess) -> None:
    """Each daemon write keeps a backup; restoring one is itself undoable."""
    add(shared_daemon, "One", "1")
    add(shared_daemon, "Two", "2")
    ws = ws_of(shared_daemon)
    backups = shared_daemon.call("list_backups", {"workspace": ws})["backups"]
    assert backups and backups[0]["file"] == "MEMORY"
    only_one = memory_file(shared_daemon).read_text()
    restored = shared_daemon.call("restore_backup", {"workspace": ws, "backupId": backups[0]["backupId"]})
    text = memory_file(shared_daemon).read_text()
    assert "## One" in text and "## Two" not in text
    shared_daemon.call("restore_backup", {"workspace": ws, "backupId": restored["undoBackupId"]})
    assert "## Two" in memory_file(shared_daemon).read_text() and only_one != text


def test_external_edit_is_ingested_and_notified(shared_daemon: DaemonProcess) -> None:
    """An editor-style save (temp file + rename) yields memory_changed with cause external_edit."""
    add(shared_daemon, "Seed", "seed")
    ws = ws_of(shared_daemon)
    with Client(str(shared_daemon.socket), timeout=10) as sub:
        base = sub.call("subscribe", {"workspace": ws})["revision"]
        text = memory_file(shared_daemon).read_text() + "\n## Added by hand\nwritten in an editor\n"
        tmp = memory_file(shared_daemon).with_name(".MEMORY.md.swp")
        tmp.write_text(text)
        os.replace(tmp, memory_file(shared_daemon))
        note = next(sub.notifications())
        assert note["method"] == "memory_changed"
        assert note["params"]["cause"] == "external_edit"
        assert note["params"]["revision"] > base
    state = shared_daemon.call("read_state", {"workspace": ws, "includeEntries": True})
    assert "Added by hand" in [e["title"] for e in state["entries"]]


def test_daemon_write_is_not_an_external_edit(shared_daemon: DaemonProcess) -> None:
    """The daemon's own write notifies cause daemon, never external_edit."""
    ws = ws_of(shared_daemon)
    add(shared_daemon, "Seed", "seed")
    with Client(str(shared_daemon.socket), timeout=10) as sub:
        sub.call("subscribe", {"workspace": ws})
        add(shared_daemon, "Second", "by the daemon")
        note = next(sub.notifications())
        assert note["params"]["cause"] == "daemon"
        # A marker change after it proves no external_edit was queued in between.
        shared_daemon.call("set_settings", {"workspace": ws, "agentReadEnabled": True})
        follow = next(sub.notifications())
        assert follow["method"] == "settings_changed"


def test_user_edit_to_same_entry_wins_with_conflict(shared_daemon: DaemonProcess) -> None:
    """If the user changed an entry since the client last read it, theirs stays: conflict —
    whether the daemon's watcher has taken the edit in yet (the revision moved on) or not
    (the file differs from the daemon's last version)."""
    added = add(shared_daemon, "Shared", "original")
    entry = added["entry"]
    path = memory_file(shared_daemon)
    path.write_text(path.read_text().replace("original", "edited by the user"))
    with pytest.raises(Conflict):
        shared_daemon.call(
            "update_entry",
            {
                "workspace": ws_of(shared_daemon),
                "id": entry["id"],
                "content": "daemon version",
                "expectedRevision": added["revision"],
            },
        )
    assert "edited by the user" in path.read_text()


def test_concurrent_user_edit_is_kept(shared_daemon: DaemonProcess) -> None:
    """A user's edit made while the daemon writes other entries is never lost."""
    add(shared_daemon, "Mine", "user owns this")
    path = memory_file(shared_daemon)
    stop = threading.Event()
    errors: list[Exception] = []

    def writer() -> None:
        with shared_daemon.client() as c:
            i = 0
            while not stop.is_set():
                try:
                    c.call(
                        "add_entry",
                        {"workspace": ws_of(shared_daemon), "title": f"auto {i}", "content": f"n{i}"},
                    )
                except Conflict:
                    pass
                except Exception as exc:  # pragma: no cover - reported below
                    errors.append(exc)
                i += 1

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for n in range(5):
            text = path.read_text()
            tmp = path.with_name(f".edit{n}")
            tmp.write_text(text + f"\n## User note {n}\nhand written {n}\n")
            os.replace(tmp, path)
    finally:
        stop.set()
        thread.join()
    assert not errors
    final = path.read_text()
    # The last hand edit must survive; earlier ones may only be lost if the user's own next
    # save (made from an older read) dropped them -- never by a daemon write.
    assert "hand written 4" in final


def test_kill9_during_add_stream_keeps_every_acknowledged_entry(daemon: DaemonProcess) -> None:
    """kill -9 while add_entry calls stream in leaves a parseable file with each acknowledged entry."""
    acknowledged: list[str] = []
    done = threading.Event()

    def stream() -> None:
        with daemon.client(timeout=60) as c:  # only the kill ends the stream, not a slow machine
            for i in range(10_000):
                try:
                    result = c.call(
                        "add_entry", {"workspace": ws_of(daemon), "title": f"e{i}", "content": f"c{i}"}
                    )
                except Exception:
                    break
                acknowledged.append(result["entry"]["id"])
                if len(acknowledged) == 40:
                    done.set()
        done.set()

    thread = threading.Thread(target=stream)
    thread.start()
    assert done.wait(60)
    daemon.kill9()
    thread.join()
    assert len(acknowledged) >= 40  # the kill came mid-stream, after forty writes
    daemon.start()
    ids = {e.id for e in fmt.entries(fmt.parse(memory_file(daemon).read_text()))}
    assert set(acknowledged) <= ids
    state = daemon.call("read_state", {"workspace": ws_of(daemon)})
    assert state["status"] == "ok" and state["entryCount"] >= len(acknowledged)


def test_temp_files_left_by_a_killed_write_are_removed(daemon: DaemonProcess) -> None:
    """A half-written temp file from a killed daemon is removed when the workspace is next used."""
    add(daemon, "Seed", "seed")
    stray = daemon.workspace / "memory" / ".MEMORY.md.abc123.tmp"
    stray.write_text("half a file")
    daemon.restart()
    daemon.call("read_state", {"workspace": ws_of(daemon)})
    assert not stray.exists()
    assert memory_file(daemon).exists()
