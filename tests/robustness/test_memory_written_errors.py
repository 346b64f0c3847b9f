"""A memory write whose ledger record fails after MEMORY.md was written says so in its
error (``data.memoryWritten`` and the revision the file got), so a client does not retry
blindly; a write refused before the file changed says nothing of the kind."""

from __future__ import annotations

from tests.robustness.helpers import remote_error
from tests.robustness.test_environment import ledger_locked_by_another_process
from tests.support import DaemonProcess


def test_a_ledger_failure_after_the_memory_file_was_written_says_it_was_written(
    daemon: DaemonProcess,
) -> None:
    """add_entry and update_entry without a requestId, their ledger writes failing after
    MEMORY.md changed: io_error with memoryWritten true, the file written and the revision
    the change got; read_state is at that revision (a read asking if anything changed since
    the one before is answered in full) and the file holds the entry once and the update."""
    w = str(daemon.workspace)
    memory = daemon.workspace / "memory" / "MEMORY.md"
    kept = daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})["entry"]
    before = daemon.call("read_state", {"workspace": w})["revision"]
    with ledger_locked_by_another_process(daemon):
        added = remote_error(daemon, "add_entry", {"workspace": w, "title": "Test", "content": "use pytest"})
        updated = remote_error(
            daemon, "update_entry", {"workspace": w, "id": kept["id"], "content": "use make -j8"}
        )
    for exc in (added, updated):
        assert (exc.kind, exc.data.get("reason")) == ("io_error", "ledger_busy")
        assert exc.data.get("memoryWritten") is True
        assert exc.data.get("written") == ["MEMORY.md"]
    assert before < added.data["revision"] < updated.data["revision"]
    state = daemon.call("read_state", {"workspace": w, "ifRevision": before})
    assert state["revision"] == updated.data["revision"] and "use make -j8" in state["content"]
    text = memory.read_text()
    assert text.count("use pytest") == 1 and "use make -j8" in text


def test_a_write_refused_before_the_file_changed_does_not_say_it_was_written(
    daemon: DaemonProcess,
) -> None:
    """add_entry with a requestId records its intent first: a ledger failing then refuses
    the call before MEMORY.md changes, and the error has no memoryWritten."""
    w = str(daemon.workspace)
    daemon.call("read_state", {"workspace": w})
    memory = daemon.workspace / "memory" / "MEMORY.md"
    before = memory.read_bytes() if memory.exists() else None
    with ledger_locked_by_another_process(daemon):
        exc = remote_error(
            daemon, "add_entry", {"workspace": w, "title": "T", "content": "c", "requestId": "r-1"}
        )
    assert (exc.kind, exc.data.get("reason")) == ("io_error", "ledger_busy")
    assert "memoryWritten" not in exc.data
    assert (memory.read_bytes() if memory.exists() else None) == before
