"""A memory write handler's error says which memory files the request had already written
and the revision they got, and says nothing when none was written."""

from __future__ import annotations

import anyio
import pytest

from makad.errors import Conflict, IOFailure, MakadError
from makad.service.written_files import note_revision, note_written, reports_memory_written

pytestmark = pytest.mark.anyio


async def _failing(steps: list[str]) -> None:
    for step in steps:
        if step == "settings_bump":
            note_revision(5)
        elif step == "write_memory":
            note_written("MEMORY.md")
        elif step == "write_pending":
            note_written("PENDING.md")
        elif step == "bump":
            note_revision(7)
        await anyio.lowlevel.checkpoint()
    raise IOFailure("the ledger write failed", reason="io_error")


async def _error_of(*steps: str) -> MakadError:
    handler = reports_memory_written(_failing)
    with pytest.raises(MakadError) as caught:
        await handler(list(steps))
    return caught.value


async def test_error_after_a_write_and_its_revision_says_both() -> None:
    """Written, revision issued, then the failure: memoryWritten, the files and the revision."""
    exc = await _error_of("write_memory", "write_pending", "bump")
    assert exc.data() == {
        "kind": "io_error",
        "reason": "io_error",
        "memoryWritten": True,
        "written": ["MEMORY.md", "PENDING.md"],
        "revision": 7,
    }


async def test_error_after_a_write_with_no_revision_issued_leaves_revision_out() -> None:
    """A revision issued before the write (a settings change) is not the file's."""
    exc = await _error_of("settings_bump", "write_memory")
    assert exc.details["written"] == ["MEMORY.md"] and "revision" not in exc.details


async def test_error_before_any_write_says_nothing_of_one() -> None:
    """Nothing written: the error is as it was."""
    exc = await _error_of("settings_bump")
    assert exc.data() == {"kind": "io_error", "reason": "io_error"}


async def test_writes_outside_a_wrapped_handler_are_not_noted() -> None:
    """Noting with no wrapped handler running is a no-op, and a handler sees only its own."""
    note_written("MEMORY.md")
    exc = await _error_of()
    assert "memoryWritten" not in exc.details


async def test_other_errors_after_a_write_say_it_too() -> None:
    """A conflict raised after one of the files was written says the write happened."""

    async def approve_like() -> None:
        note_written("MEMORY.md")
        raise Conflict("PENDING.md changed meanwhile")

    with pytest.raises(Conflict) as caught:
        await reports_memory_written(approve_like)()
    assert caught.value.details["memoryWritten"] is True
