"""A spent disk quota is a full disk to clients: ``io_error`` with ``reason: disk_full``,
as ENOSPC is, wherever the daemon turns a system error into a wire error."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

from makad.store.ledger.recovery import open_failure, write_failure
from makad.store.memory_files import generalize
from makad.store.workspaces import _open_failure
from tests.robustness.helpers import fill_disk, tiny_tmpfs


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_memory_file_write_without_room_is_disk_full(code: int) -> None:
    """Writing MEMORY.md with no room (disk or quota) says disk_full and names the errno."""
    failure = generalize(OSError(code, os.strerror(code)), "MEMORY.md", "written")
    assert failure.details["reason"] == "disk_full"
    assert failure.details["errno"] == errno.errorcode[code]


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT])
def test_a_ledger_or_workspace_that_cannot_be_created_for_room_is_disk_full(code: int) -> None:
    """A ledger or a workspace's state that cannot be created for want of room says disk_full."""
    exc = OSError(code, os.strerror(code))
    assert open_failure(exc).details["reason"] == "disk_full"
    assert _open_failure(exc).details["reason"] == "disk_full"


def test_other_write_failures_stay_io_error() -> None:
    """A file too large for the process's limit is not a full disk."""
    failure = generalize(OSError(errno.EFBIG, os.strerror(errno.EFBIG)), "MEMORY.md", "written")
    assert failure.details["reason"] == "io_error"


def _io_error() -> sqlite3.OperationalError:
    """A write SQLite failed with SQLITE_IOERR_WRITE (every errno but ENOSPC, EDQUOT included)."""
    exc = sqlite3.OperationalError("disk I/O error")
    exc.sqlite_errorcode = 10 | (3 << 8)  # type: ignore[attr-defined]
    return exc


def test_a_ledger_io_error_without_room_left_is_disk_full(tmp_path: Path) -> None:
    """A ledger write's I/O error in a folder whose disk has no room left is disk_full
    (naming the errno the disk gave); with room, it stays a plain io_error."""
    with_room = write_failure(_io_error(), tmp_path)
    full = tmp_path / "full"
    with tiny_tmpfs(full, 256):
        fill_disk(full)
        without = write_failure(_io_error(), full)
        left = sorted(p.name for p in full.iterdir())

    assert with_room.details.get("reason") is None and with_room.message == "the ledger write failed"
    assert without.details == {"reason": "disk_full", "errno": "ENOSPC"}
    assert left == ["filler"]
