"""Disk faults while the daemon runs: each gives an `error` state or an `io_error` reply with
a generalized reason, the daemon keeps serving other workspaces, and nothing on disk is
damaged further."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from maka.errors import RemoteError
from makad.store.workspaces import workspace_id
from tests.robustness.helpers import (
    fill_disk,
    generalized,
    immutable_file,
    read_only_dir,
    remote_error,
    serves_other_workspace,
    snapshot,
    tiny_tmpfs,
)
from tests.support import DaemonProcess, ping_ok


def ws(d: DaemonProcess) -> str:
    return str(d.workspace)


def memory_dir(d: DaemonProcess) -> Path:
    return d.workspace / "memory"


def ledger_dir(d: DaemonProcess) -> Path:
    return d.data_dir / "workspaces" / workspace_id(d.workspace.resolve())


def seed(d: DaemonProcess) -> dict[str, Any]:
    """Two entries, two open proposals (the extract gate open) and a session with events."""
    d.call("set_settings", {"workspace": ws(d), "agentReadEnabled": True, "extractToolEnabled": True})
    entry = d.call("add_entry", {"workspace": ws(d), "title": "Build", "content": "use make"})
    d.call("add_entry", {"workspace": ws(d), "title": "Style", "content": "4 spaces"})
    proposals = [
        d.call("propose", {"workspace": ws(d), "title": f"P{i}", "content": f"proposal number {i}"})[
            "proposal"
        ]["id"]
        for i in range(2)
    ]
    sid = d.call("open_session", {"workspace": ws(d)})["sessionId"]
    d.call(
        "append_events",
        {"workspace": ws(d), "sessionId": sid, "events": [{"type": "user_message", "text": "first"}]},
    )
    return {"entry": entry["entry"]["id"], "proposals": proposals, "session": sid}


def no_temp_files(d: DaemonProcess) -> bool:
    return not [p for p in memory_dir(d).iterdir() if p.name.endswith(".tmp")]


def test_disk_full_switch_refuses_every_memory_write(daemon: DaemonProcess) -> None:
    """MAKAD_FAULT_DISK_FULL: every memory write is io_error disk_full, the files and the
    proposal queue stay byte for byte, reads and the ledger keep working, and after the
    disk recovers an approval goes through exactly once."""
    seeded = seed(daemon)
    daemon.restart({"MAKAD_FAULT_DISK_FULL": "1"})
    before = snapshot(memory_dir(daemon))
    w = ws(daemon)
    writes: list[tuple[str, dict[str, Any]]] = [
        ("add_entry", {"workspace": w, "title": "New", "content": "not written"}),
        ("update_entry", {"workspace": w, "id": seeded["entry"], "content": "changed"}),
        ("archive_entry", {"workspace": w, "id": seeded["entry"]}),
        ("delete_entry", {"workspace": w, "id": seeded["entry"]}),
        ("propose", {"workspace": w, "title": "Q", "content": "a new proposal"}),
        ("approve", {"workspace": w, "ids": [seeded["proposals"][0]]}),
        ("reject", {"workspace": w, "ids": [seeded["proposals"][1]], "reason": "no"}),
        (
            "import_memories",
            {"workspace": w, "format": "markdown", "data": "# Notes\n\n## Tools\n- imported fact\n"},
        ),
    ]
    for method, params in writes:
        exc = remote_error(daemon, method, params)
        assert (method, exc.kind, exc.data.get("reason")) == (method, "io_error", "disk_full")
        # The file by its name only: no directory, no content.
        assert generalized(exc, str(daemon.root)) and exc.data["file"] in ("MEMORY.md", "PENDING.md")
    assert snapshot(memory_dir(daemon)) == before
    state = daemon.call("read_state", {"workspace": w, "includeEntries": True})
    assert state["status"] == "ok" and state["entryCount"] == 2
    assert len(daemon.call("list_proposals", {"workspace": w})["proposals"]) == 2
    got = daemon.call(
        "append_events",
        {
            "workspace": w,
            "sessionId": seeded["session"],
            "events": [{"type": "user_message", "text": "second"}],
        },
    )
    assert got["lastSeq"] == 2
    other = daemon.root / "other"
    other.mkdir()
    assert daemon.call("read_state", {"workspace": str(other)})["status"] == "ok"

    daemon.restart({"MAKAD_FAULT_DISK_FULL": ""})
    approved = daemon.call("approve", {"workspace": w, "ids": [seeded["proposals"][0]]})
    text = (memory_dir(daemon) / "MEMORY.md").read_text()
    assert text.count("proposal number 0") == 1
    assert approved["approved"][0]["entry"]["id"] in text
    assert ping_ok(daemon.socket)


def test_real_full_disk_under_the_memory_dir(daemon: DaemonProcess) -> None:
    """A workspace on a really full filesystem: io_error disk_full, MEMORY.md intact, no
    temp file left behind; once space is freed the write goes through."""
    tiny = daemon.root / "tiny"
    with tiny_tmpfs(tiny, 256):
        workspace = tiny / "ws"
        workspace.mkdir()
        w = str(workspace)
        daemon.call("add_entry", {"workspace": w, "title": "Kept", "content": "kept safe"})
        before = snapshot(workspace / "memory")
        filler = fill_disk(tiny)
        exc = remote_error(daemon, "add_entry", {"workspace": w, "title": "Big", "content": "x" * 20_000})
        assert (exc.kind, exc.data.get("reason")) == ("io_error", "disk_full")
        assert generalized(exc, str(tiny)) and exc.data["file"] == "MEMORY.md"
        assert snapshot(workspace / "memory") == before
        serves_other_workspace(daemon, daemon.root / "other")
        filler.unlink()
        daemon.call("add_entry", {"workspace": w, "title": "Later", "content": "fits now"})
        text = (workspace / "memory" / "MEMORY.md").read_text()
        assert "kept safe" in text and "fits now" in text
        daemon.stop()


def test_real_full_disk_under_the_ledger(short_tmp: Path) -> None:
    """The data directory fills up: ledger writes are io_error disk_full (not acknowledged), reads
    still answer, and after space is freed nothing acknowledged is missing."""
    data = short_tmp / "data"
    with tiny_tmpfs(data, 2048):
        d = DaemonProcess(short_tmp)
        d.start()
        try:
            w = ws(d)
            sid = d.call("open_session", {"workspace": w})["sessionId"]
            d.call(
                "append_events",
                {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "before"}]},
            )
            filler = fill_disk(data)
            exc = remote_error(
                d,
                "append_events",
                {
                    "workspace": w,
                    "sessionId": sid,
                    "events": [{"type": "user_message", "text": "y" * 100_000}],
                },
            )
            assert exc.kind == "io_error" and generalized(exc, str(short_tmp), ".sqlite3")
            assert exc.data.get("reason") == "disk_full"
            assert (
                remote_error(d, "set_settings", {"workspace": w, "agentReadEnabled": True}).kind == "io_error"
            )
            events = d.call("read_events", {"workspace": w, "sessionId": sid})["events"]
            assert [e["text"] for e in events] == ["before"]
            assert d.call("read_state", {"workspace": w})["status"] == "ok"
            filler.unlink()
            d.call(
                "append_events",
                {"workspace": w, "sessionId": sid, "events": [{"type": "user_message", "text": "after"}]},
            )
            d.restart()
            events = d.call("read_events", {"workspace": w, "sessionId": sid})["events"]
            assert [e["text"] for e in events] == ["before", "after"]
        finally:
            d.stop()


def test_real_full_disk_under_the_backups(short_tmp: Path) -> None:
    """A memory write whose backup cannot be written (data disk full) is io_error, not an
    internal error, and leaves no truncated backup behind."""
    data = short_tmp / "data"
    with tiny_tmpfs(data, 2048):
        d = DaemonProcess(short_tmp)
        d.start()
        try:
            w = ws(d)
            d.call("add_entry", {"workspace": w, "title": "Seed", "content": "seed " * 500})
            before = snapshot(memory_dir(d))
            filler = fill_disk(data)
            exc = remote_error(d, "add_entry", {"workspace": w, "title": "Two", "content": "two"})
            filler.unlink()
            backups = d.call("list_backups", {"workspace": w})["backups"]
            assert snapshot(memory_dir(d)) == before
            assert all(b["size"] > 0 for b in backups)
            assert exc.kind == "io_error"
        finally:
            d.stop()


def test_read_only_memory_dir(served: DaemonProcess) -> None:
    """A memory directory that refuses writes: io_error permission_denied, entries still
    readable, other workspaces served, and writes resume once it is writable again."""
    seed(served)
    w = ws(served)
    before = snapshot(memory_dir(served))
    with read_only_dir(memory_dir(served)):
        for method, params in [
            ("add_entry", {"workspace": w, "title": "New", "content": "refused"}),
            ("propose", {"workspace": w, "title": "Q", "content": "refused too"}),
        ]:
            exc = remote_error(served, method, params)
            assert (exc.kind, exc.data.get("reason")) == ("io_error", "permission_denied")
            assert generalized(exc, str(served.root)) and exc.data["file"] in ("MEMORY.md", "PENDING.md")
            assert exc.data["osError"] in ("Permission denied", "Operation not permitted")
        state = served.call("read_state", {"workspace": w})
        assert state["status"] == "ok" and state["entryCount"] == 2
        serves_other_workspace(served, served.root / "other")
        assert snapshot(memory_dir(served)) == before
    served.call("add_entry", {"workspace": w, "title": "New", "content": "accepted"})
    assert "accepted" in (memory_dir(served) / "MEMORY.md").read_text()
    assert no_temp_files(served)


def test_memory_file_replaced_by_a_directory(served: DaemonProcess) -> None:
    """MEMORY.md swapped for a directory while running: status error (generalized), writes
    are io_error, the directory and PENDING.md are left alone, other workspaces served."""
    seed(served)
    w = ws(served)
    path = memory_dir(served) / "MEMORY.md"
    path.unlink()
    path.mkdir()
    (path / "inside.txt").write_text("the user's own file")
    before = snapshot(memory_dir(served))
    state = served.call("read_state", {"workspace": w})
    assert state["status"] == "error"
    assert str(served.root) not in state["reason"] and "MEMORY.md" not in state["reason"]
    exc = remote_error(served, "add_entry", {"workspace": w, "title": "T", "content": "c"})
    assert exc.kind == "io_error" and generalized(exc, str(served.root))
    serves_other_workspace(served, served.root / "other")
    assert snapshot(memory_dir(served)) == before
    shutil.rmtree(path)
    served.call("add_entry", {"workspace": w, "title": "Back", "content": "a file again"})
    assert served.call("read_state", {"workspace": w})["status"] == "ok"


def test_memory_file_replaced_by_a_symlink(served: DaemonProcess) -> None:
    """MEMORY.md swapped for a symlink to a file elsewhere: status error, writes refused
    (invalid_workspace, reason symlink), and the link's target is never written."""
    seed(served)
    w = ws(served)
    target = served.root / "elsewhere.md"
    target.write_text("# not memory\n\n## Private\nleave me alone\n")
    path = memory_dir(served) / "MEMORY.md"
    path.unlink()
    path.symlink_to(target)
    before = snapshot(served.root / "elsewhere.md"), snapshot(memory_dir(served))
    assert served.call("read_state", {"workspace": w})["status"] == "error"
    for method, params in [
        ("add_entry", {"workspace": w, "title": "T", "content": "c"}),
        ("propose", {"workspace": w, "title": "P", "content": "p"}),
    ]:
        exc = remote_error(served, method, params)
        assert (exc.kind, exc.data.get("reason")) == ("invalid_workspace", "symlink")
    serves_other_workspace(served, served.root / "other")
    assert target.read_text() == "# not memory\n\n## Private\nleave me alone\n"
    assert (snapshot(served.root / "elsewhere.md"), snapshot(memory_dir(served))) == before


def test_ledger_file_deleted_while_running(daemon: DaemonProcess) -> None:
    """The SQLite files deleted under a running daemon: an append is refused (io_error) or
    else survives a restart — it is never acknowledged and then lost."""
    seeded = seed(daemon)
    w = ws(daemon)
    for name in ("ledger.sqlite3", "ledger.sqlite3-wal", "ledger.sqlite3-shm"):
        (ledger_dir(daemon) / name).unlink(missing_ok=True)
    try:
        daemon.call(
            "append_events",
            {
                "workspace": w,
                "sessionId": seeded["session"],
                "events": [{"type": "user_message", "text": "acked?"}],
            },
        )
        acknowledged = True
    except RemoteError as exc:
        assert exc.kind == "io_error" and generalized(exc, str(daemon.root))
        acknowledged = False
    serves_other_workspace(daemon, daemon.root / "other")
    daemon.restart()
    if acknowledged:
        with daemon.client() as client:
            try:
                events = client.call("read_events", {"workspace": w, "sessionId": seeded["session"]})[
                    "events"
                ]
            except RemoteError as exc:
                pytest.fail(f"an acknowledged append was lost ({exc.kind})")
        assert "acked?" in [e["text"] for e in events]


def test_ledger_file_truncated_while_running(daemon: DaemonProcess) -> None:
    """The SQLite file cut in half under a running daemon: the first call that meets the
    damage moves the file aside and every ledger call is then answered on a fresh ledger
    (the session is gone: not_found; searches find nothing) — never an io_error; memory
    files are untouched, other workspaces are served."""
    seeded = seed(daemon)
    w = ws(daemon)
    daemon.call(
        "append_events",
        {
            "workspace": w,
            "sessionId": seeded["session"],
            "events": [{"type": "user_message", "text": f"event {i}"} for i in range(2000)],
        },
    )
    daemon.restart()  # a clean stop checkpoints the WAL into the database file
    daemon.call("read_events", {"workspace": w, "sessionId": seeded["session"], "limit": 1})
    database = ledger_dir(daemon) / "ledger.sqlite3"
    os.truncate(database, database.stat().st_size // 2)
    memory_before = snapshot(memory_dir(daemon))
    outcomes = []
    for method, params in [
        ("read_events", {"workspace": w, "sessionId": seeded["session"], "afterSeq": 1990}),
        (
            "append_events",
            {
                "workspace": w,
                "sessionId": seeded["session"],
                "events": [{"type": "user_message", "text": "after the cut"}],
            },
        ),
        ("search_history", {"workspace": w, "query": "event"}),
        ("retrieve", {"workspace": w, "refs": [f"event:{seeded['session']}:1-2001"]}),
    ]:
        with daemon.client() as client:
            try:
                result = client.call(method, params)
                outcomes.append((method, "ok", result))
            except RemoteError as exc:
                outcomes.append((method, exc.kind, None))
    assert [kind for _, kind, _ in outcomes] == ["not_found", "not_found", "ok", "ok"]
    assert outcomes[2][2]["hits"] == [] and outcomes[3][2]["results"][0]["ok"] is False
    assert [p for p in ledger_dir(daemon).iterdir() if ".corrupt-" in p.name]
    assert snapshot(memory_dir(daemon)) == memory_before
    serves_other_workspace(daemon, daemon.root / "other")
    assert daemon.proc is not None and daemon.proc.poll() is None


def test_failed_write_retried_with_its_request_id_lands_once(served: DaemonProcess) -> None:
    """A write that fails after MEMORY.md was written (the ledger refuses the bookkeeping)
    and is retried with the same requestId ends with the entry there exactly once."""
    w = ws(served)
    served.call("add_entry", {"workspace": w, "title": "Seed", "content": "seed"})
    params = {"workspace": w, "title": "Once", "content": "only once please", "requestId": "r-1"}
    with immutable_file(ledger_dir(served) / "ledger.sqlite3-wal"):
        assert remote_error(served, "add_entry", params).kind == "io_error"
    served.call("add_entry", params)
    assert (memory_dir(served) / "MEMORY.md").read_text().count("only once please") == 1


def test_backup_vanishing_between_listing_and_reading(served: DaemonProcess) -> None:
    """A backup that disappears between the directory listing and the read (concurrent
    pruning; here a dangling link stands in for it) never makes list_backups or
    restore_backup an internal error."""
    w = ws(served)
    served.call("add_entry", {"workspace": w, "title": "One", "content": "1"})
    served.call("add_entry", {"workspace": w, "title": "Two", "content": "2"})
    backups = ledger_dir(served) / "backups"
    (backups / "1700000000000-999999-MEMORY.md").symlink_to(backups / "gone.md")
    kinds = []
    for method, params in [
        ("list_backups", {"workspace": w}),
        ("restore_backup", {"workspace": w, "backupId": "1700000000000-999999-MEMORY"}),
    ]:
        with served.client() as client:
            try:
                client.call(method, params)
                kinds.append("ok")
            except RemoteError as exc:
                kinds.append(exc.kind)
    assert "internal" not in kinds


@pytest.mark.parametrize("method", ["delete_entry", "reject"])
def test_failed_change_retried_with_its_request_id_gets_its_result(
    served: DaemonProcess, method: str
) -> None:
    """A delete_entry or reject that failed after its file was written (the ledger refused
    the bookkeeping), retried with the same requestId, is answered with its result — not
    not_found for the entry or proposal it removed itself."""
    w = ws(served)
    if method == "delete_entry":
        target = served.call("add_entry", {"workspace": w, "title": "Gone", "content": "remove me"})["entry"][
            "id"
        ]
        params = {"workspace": w, "id": target, "requestId": "r-1"}
    else:
        served.call("set_settings", {"workspace": w, "agentReadEnabled": True, "extractToolEnabled": True})
        target = served.call("propose", {"workspace": w, "title": "Gone", "content": "remove me"})[
            "proposal"
        ]["id"]
        params = {"workspace": w, "ids": [target], "reason": "no", "requestId": "r-1"}
    with immutable_file(ledger_dir(served) / "ledger.sqlite3-wal"):
        assert remote_error(served, method, params).kind == "io_error"
    retried = served.call(method, params)
    assert target in json.dumps(retried)
    assert not any("remove me" in p.read_text() for p in memory_dir(served).glob("*.md"))
