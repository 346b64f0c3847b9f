"""What import_memories is pointed at that is no file to read: a FIFO, a device, a socket.
Each is refused as what it is (invalid_params, reason not_regular_file), not reported as
missing; nothing is opened or queued, and the daemon serves on."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from maka.errors import InvalidParams
from tests.support import DaemonProcess, ping_ok


def _plant(kind: str, at: Path) -> str:
    if kind == "fifo":
        os.mkfifo(at, 0o600)
    elif kind == "socket":
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
            listener.bind(str(at))  # the file stays after the socket is closed
    else:
        return "/dev/null"
    return str(at)


@pytest.mark.parametrize("kind", ["fifo", "device", "socket"])
def test_an_import_path_that_is_no_regular_file_says_so(served: DaemonProcess, kind: str) -> None:
    """A FIFO, a character device or a socket file as the import path is invalid_params
    with reason not_regular_file (it exists: not_found would send the user looking for a
    typo); no FIFO is opened, nothing is queued, and the daemon answers pings after."""
    path = _plant(kind, served.workspace / f"planted-{kind}.md")
    with pytest.raises(InvalidParams) as raised:
        served.call("import_memories", {"workspace": str(served.workspace), "path": path})
    assert (raised.value.data["reason"], raised.value.data["path"]) == ("not_regular_file", "$.path")
    assert not (served.workspace / "memory" / "PENDING.md").exists()
    assert ping_ok(served.socket)
