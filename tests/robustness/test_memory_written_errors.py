"""A memory write whose ledger record fails after MEMORY.md was written says so in its
error (``data.memoryWritten`` and the revision the file got), so a client does not retry
blindly; a write refused before the file changed says nothing of the kind."""

from __future__ import annotations

from tests.robustness.helpers import remote_error
from tests.robustness.test_environment import ledger_locked_by_another_process
from tests.support import DaemonProcess


def test_a_ledger_failure_says_whether_the_memory_file_was_written(
    brief_busy_daemon: DaemonProcess,
) -> None:
    """Ledger writes failing (another process holds its lock): add_entry with a requestId
    records its intent first, so it is refused before MEMORY.md changes and its error has no
    memoryWritten; add_entry and update_entry without one fail after MEMORY.md changed:
    io_error with memoryWritten true, the file written and the revision the change got;
    read_state is at that revision (a read asking if anything changed since the one before
    is answered in full) and the file holds the entry once and the update. (One lock for
    both cases: the first write under it waits out the busy timeout, shortened here.)"""
    daemon = brief_busy_daemon
    w = str(daemon.workspace)
    memory = daemon.workspace / "memory" / "MEMORY.md"
    kept = daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})["entry"]
    before = daemon.call("read_state", {"workspace": w})["revision"]
    unchanged = memory.read_bytes()
    with ledger_locked_by_another_process(daemon):
        refused = remote_error(
            daemon, "add_entry", {"workspace": w, "title": "T", "content": "c", "requestId": "r-1"}
        )
        assert memory.read_bytes() == unchanged
        added = remote_error(daemon, "add_entry", {"workspace": w, "title": "Test", "content": "use pytest"})
        updated = remote_error(
            daemon, "update_entry", {"workspace": w, "id": kept["id"], "content": "use make -j8"}
        )
    assert (refused.kind, refused.data.get("reason")) == ("io_error", "ledger_busy")
    assert "memoryWritten" not in refused.data
    for exc in (added, updated):
        assert (exc.kind, exc.data.get("reason")) == ("io_error", "ledger_busy")
        assert exc.data.get("memoryWritten") is True
        assert exc.data.get("written") == ["MEMORY.md"]
    assert before < added.data["revision"] < updated.data["revision"]
    state = daemon.call("read_state", {"workspace": w, "ifRevision": before})
    assert state["revision"] == updated.data["revision"] and "use make -j8" in state["content"]
    text = memory.read_text()
    assert text.count("use pytest") == 1 and "use make -j8" in text
    assert "\nc\n" not in text and "## T\n" not in text
