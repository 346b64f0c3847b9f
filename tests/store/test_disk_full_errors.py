"""A spent disk quota is a full disk to clients: ``io_error`` with ``reason: disk_full``,
as ENOSPC is, wherever the daemon turns a system error into a wire error."""

from __future__ import annotations

import errno
import os

import pytest

from makad.store.ledger.recovery import open_failure
from makad.store.memory_files import generalize
from makad.store.workspaces import _open_failure


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
