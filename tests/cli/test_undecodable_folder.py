"""A workspace folder whose name is not UTF-8 cannot be named over JSON: `maka` says so."""

from __future__ import annotations

import os
from pathlib import Path

from tests.cli.helpers import run_maka
from tests.support import DaemonProcess


def latin1_folder(d: DaemonProcess) -> Path:
    """A real folder named with a Latin-1 byte (0xE9), as a Linux file system allows."""
    raw = os.path.join(os.fsencode(d.root), b"caf\xe9")
    os.makedirs(raw, exist_ok=True)
    return Path(os.fsdecode(raw))


def test_a_folder_named_in_latin1_is_refused_with_a_clear_message(shared_daemon: DaemonProcess) -> None:
    """`maka memory add/list` (found from the current folder or given with -w), `maka mcp` and
    `maka watch` in a
    folder whose name is not UTF-8 exit 2 saying so and naming the folder, with no traceback
    and nothing written."""
    folder = latin1_folder(shared_daemon)
    runs = [
        run_maka(shared_daemon, "memory", "add", "T", "c", workspace=False, cwd=folder),
        run_maka(shared_daemon, "memory", "list", "-w", str(folder), workspace=False),
        run_maka(shared_daemon, "mcp", workspace=False, cwd=folder),
        run_maka(shared_daemon, "watch", workspace=False, cwd=folder),
    ]
    for result in runs:
        assert result.returncode == 2, result.stderr
        assert "not UTF-8" in result.stderr and "caf\\xe9" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    assert os.listdir(folder) == []
