"""The daemon's surroundings changed under it while it runs: its memory folder swapped for
a file, MEMORY.md swapped for a FIFO or a device. Each gives a stable error kind, the
daemon keeps serving, and nothing there is read, written or waited on."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.robustness.helpers import IS_ROOT, generalized, remote_error, serves_other_workspace
from tests.support import DaemonProcess, ping_ok


def test_the_memory_folder_replaced_by_a_file(daemon: DaemonProcess) -> None:
    """memory/ swapped for a regular file: read_state says error, writes are
    invalid_workspace (not_a_directory), the file is left as it was, other workspaces are
    served, and once the folder is back the workspace works again."""
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    memory = daemon.workspace / "memory"
    for child in memory.iterdir():
        child.unlink()
    memory.rmdir()
    memory.write_bytes(b"the user's own file")
    state = daemon.call("read_state", {"workspace": w})
    assert state["status"] == "error" and "not a directory" in state["reason"]
    for method, params in [
        ("add_entry", {"workspace": w, "title": "T", "content": "c"}),
        ("list_proposals", {"workspace": w}),
    ]:
        exc = remote_error(daemon, method, params)
        assert (method, exc.kind, exc.data.get("reason")) == (method, "invalid_workspace", "not_a_directory")
        assert generalized(exc, str(daemon.root))
    assert memory.read_bytes() == b"the user's own file"
    serves_other_workspace(daemon, daemon.root / "other")
    memory.unlink()
    daemon.call("add_entry", {"workspace": w, "title": "Back", "content": "a folder again"})
    assert daemon.call("read_state", {"workspace": w})["status"] == "ok"


def _fifo(path: Path) -> None:
    os.mkfifo(path, 0o600)


def _dev_zero_link(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _null_device(path: Path) -> None:
    if not IS_ROOT:
        pytest.skip("making a device node needs root")
    os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers


@pytest.mark.parametrize(
    "plant", [_fifo, _dev_zero_link, _null_device], ids=["fifo", "dev-zero-symlink", "char-device"]
)
def test_memory_md_replaced_by_something_that_is_not_a_file(
    daemon: DaemonProcess, plant: Callable[[Path], None]
) -> None:
    """MEMORY.md swapped for a FIFO (no writer: an open for reading would wait forever), a
    symlink to /dev/zero (endless) or a device: read_state says error at once, writes
    are refused with a stable kind, what was planted stays, and the daemon keeps serving."""
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    path = daemon.workspace / "memory" / "MEMORY.md"
    path.unlink()
    plant(path)
    planted = os.lstat(path)
    state = daemon.call("read_state", {"workspace": w, "includeEntries": True}, timeout=15)
    assert state["status"] == "error" and state["entryCount"] == 0
    exc = remote_error(daemon, "add_entry", {"workspace": w, "title": "T", "content": "c"})
    assert (exc.kind, exc.data.get("reason")) in (
        ("io_error", "not_a_file"),
        ("invalid_workspace", "symlink"),
    )
    assert ping_ok(daemon.socket)
    after = os.lstat(path)
    assert (after.st_ino, after.st_mode) == (planted.st_ino, planted.st_mode)
    serves_other_workspace(daemon, daemon.root / "other")
