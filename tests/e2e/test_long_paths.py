"""Workspace paths near the system's path length limit: refused up front, clearly."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess, ping_ok


def deep_folder(root: Path, length: int) -> Path:
    """A real folder whose absolute path is ``length`` characters long."""
    folder = root
    while len(str(folder)) + 1 + 200 < length:
        folder = folder / ("d" * 200)
    folder = folder / ("e" * (length - len(str(folder)) - 1))
    os.makedirs(folder)
    assert len(str(folder)) == length
    return folder


def test_a_folder_too_deep_for_its_memory_files_is_refused_as_too_long(shared_daemon: DaemonProcess) -> None:
    """A workspace whose path leaves no room for memory/ files under the system's path limit
    (reads would work, every write fail with a bare ENAMETOOLONG) is invalid_workspace
    (reason too_long) for reads and writes alike, and nothing is created in it."""
    limit = os.pathconf(str(shared_daemon.workspace), "PC_PATH_MAX")
    folder = deep_folder(shared_daemon.workspace, limit - 20)
    for method, extra in (("read_state", {}), ("add_entry", {"title": "t", "content": "c"})):
        with pytest.raises(RemoteError) as info:
            shared_daemon.call(method, {"workspace": str(folder), **extra})
        assert info.value.kind == "invalid_workspace", (method, info.value)
        assert info.value.data.get("reason") == "too_long"
        assert "too long" in info.value.message
    assert list(folder.iterdir()) == []
    assert ping_ok(shared_daemon.socket)


def test_a_deep_folder_with_room_for_its_memory_files_works(shared_daemon: DaemonProcess) -> None:
    """A long path that leaves room for memory/ and its files is an ordinary workspace."""
    limit = os.pathconf(str(shared_daemon.workspace), "PC_PATH_MAX")
    folder = deep_folder(shared_daemon.workspace, limit - 40)
    shared_daemon.call("add_entry", {"workspace": str(folder), "title": "Deep", "content": "still works"})
    state = shared_daemon.call("read_state", {"workspace": str(folder), "includeEntries": True})
    assert [e["title"] for e in state["entries"]] == ["Deep"]


def test_a_workspace_spelled_longer_than_the_system_takes_is_refused_unresolved(
    shared_daemon: DaemonProcess,
) -> None:
    """A spelling past the system's path limit (``/../../…``, which reaches ``/`` and was
    resolved one component at a time, copying the rest of the text at each: hours of a
    worker thread for 6 MB) is invalid_workspace, reason too_long, at once."""
    limit = os.pathconf("/", "PC_PATH_MAX")
    spelled = "/" + "../" * 200_000 + str(shared_daemon.workspace).lstrip("/")
    with pytest.raises(RemoteError) as info:
        shared_daemon.call("read_state", {"workspace": spelled})
    assert (info.value.kind, info.value.data.get("reason")) == ("invalid_workspace", "too_long")
    assert f"at most {limit - 1} bytes" in info.value.message
    assert shared_daemon.call(
        "read_state", {"workspace": "/" + "../" * 100 + str(shared_daemon.workspace).lstrip("/")}
    )
