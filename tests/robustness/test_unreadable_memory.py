"""A MEMORY.md the daemon may not read: the error names the file and the system's reason,
never its full path or content; nothing is written over it and the daemon serves on."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from maka.errors import RemoteError
from tests.cli.helpers import run_maka
from tests.robustness.helpers import IS_ROOT
from tests.support import DaemonProcess

SECRET = "the user's private note"
# Root reads any file (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH): the daemon runs without them.
NO_DAC = ["--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]


class UnprivilegedDaemon(DaemonProcess):
    """A daemon that file permissions apply to: as root, started under setpriv without
    the capabilities that bypass them."""

    def command(self) -> list[str]:
        return ["setpriv", *NO_DAC, *super().command()] if IS_ROOT else super().command()


def setpriv_works() -> str | None:
    """Why the daemon cannot be run without the DAC capabilities here, or None."""
    if not IS_ROOT:
        return None
    if shutil.which("setpriv") is None:
        return "running as root and setpriv is not installed: root reads a mode-000 file"
    done = subprocess.run(["setpriv", *NO_DAC, "true"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return f"running as root and setpriv cannot drop the DAC capabilities ({done.stderr.strip()})"
    return None


@pytest.fixture
def unreadable(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A daemon whose workspace's MEMORY.md (mode 000) it cannot read."""
    reason = setpriv_works()
    if reason is not None:
        pytest.skip(reason)
    d = UnprivilegedDaemon(short_tmp)
    memory = d.workspace / "memory"
    memory.mkdir()
    (memory / "MEMORY.md").write_text(f"# Maka Memory\n\n## Note\n{SECRET}\n")
    os.chmod(memory / "MEMORY.md", 0)
    d.start()
    try:
        yield d
    finally:
        d.stop()
        os.chmod(memory / "MEMORY.md", 0o600)


def test_unreadable_memory_names_the_file_and_the_reason(unreadable: DaemonProcess) -> None:
    """read_state says MEMORY.md cannot be read and why; add_entry is io_error with
    data.file, data.osError and data.errno, no path or content; MEMORY.md is untouched."""
    d = unreadable
    w = str(d.workspace)
    state = d.call("read_state", {"workspace": w})
    assert state["status"] == "error"
    assert state["reason"] == "MEMORY.md could not be read: Permission denied"
    with pytest.raises(RemoteError) as raised:
        d.call("add_entry", {"workspace": w, "title": "New", "content": "refused"})
    error = raised.value
    assert (error.kind, error.data["reason"]) == ("io_error", "permission_denied")
    assert error.data["file"] == "MEMORY.md" and error.data["osError"] == "Permission denied"
    assert error.data["errno"] == "EACCES" and "MEMORY.md" in error.message
    text = f"{error.message} {error.data}"
    assert str(d.root) not in text and SECRET not in text
    assert d.call("ping") == "pong"
    os.chmod(d.workspace / "memory" / "MEMORY.md", 0o600)
    assert (d.workspace / "memory" / "MEMORY.md").read_text().endswith(f"{SECRET}\n")


def test_the_cli_says_which_file_and_why(unreadable: DaemonProcess) -> None:
    """`maka memory list` on it exits 1 naming MEMORY.md and the system's reason."""
    result = run_maka(unreadable, "memory", "list")
    assert result.returncode == 1
    assert "MEMORY.md could not be read: Permission denied" in result.stderr
