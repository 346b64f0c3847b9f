"""The kernel's own folders are no workspace: /proc (a process's /proc/self among them),
/sys and the device folder /dev. Each is refused with invalid_workspace (reason
reserved) before anything is made in it — as root, the daemon made /dev/memory/ — and
the daemon serves on. Nor is one of them, or the filesystem root, the user level's folder."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from maka.errors import RemoteError
from makad.daemon import EXIT_UNSAFE
from tests.robustness.test_planted_paths import run_makad
from tests.support import DaemonProcess, ping_ok

KERNEL_FOLDERS = ["/proc", "/proc/self", "/proc/self/fd", "/sys", "/sys/kernel", "/dev"]


def _own_filesystem(folder: str) -> bool:
    """Whether ``folder`` is on a filesystem of its own (mounted there), not the root's."""
    return os.path.isdir(folder) and os.stat(folder).st_dev != os.stat("/").st_dev


@pytest.fixture
def no_memory_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Removes a memory/ folder the test's workspace got, when it had none before."""
    memory = Path(os.path.realpath(request.node.callspec.params["folder"])) / "memory"
    existed = os.path.lexists(memory)
    yield
    if not existed and memory.is_dir() and not memory.is_symlink():
        shutil.rmtree(memory)


@pytest.mark.parametrize("folder", KERNEL_FOLDERS)
def test_a_kernel_folder_is_no_workspace(served: DaemonProcess, folder: str, no_memory_left: None) -> None:
    """Reading, opening a session in and writing to a kernel folder are each refused with
    invalid_workspace (reason reserved); no memory/ folder is made there."""
    top = "/" + folder.split("/")[1]
    if not _own_filesystem(top):
        pytest.skip(f"{top} is not a filesystem of its own here")
    memory = Path(os.path.realpath(folder)) / "memory"
    had_memory = os.path.lexists(memory)
    for method, params in [
        ("read_state", {}),
        ("open_session", {}),
        ("add_entry", {"title": "t", "content": "c"}),
    ]:
        with pytest.raises(RemoteError) as raised:
            served.call(method, {"workspace": folder, **params})
        assert raised.value.kind == "invalid_workspace", (folder, method, raised.value)
        assert raised.value.data.get("reason") == "reserved", (folder, method, raised.value.data)
    assert os.path.lexists(memory) == had_memory
    assert ping_ok(served.socket)


@pytest.mark.parametrize("folder", ["/", "/proc", "/sys/kernel", "/dev"])
def test_the_user_level_is_refused_in_a_system_folder(short_tmp: Path, folder: str) -> None:
    """``--user-memory`` naming the filesystem root or a kernel folder: makad refuses to
    start (exit 78), naming the folder and the setting; no memory/ folder is made there
    (as root, ``/memory`` and ``/dev/memory`` were)."""
    if folder != "/" and not _own_filesystem("/" + folder.split("/")[1]):
        pytest.skip(f"{folder} is not on a filesystem of its own here")
    memory = Path(folder) / "memory"
    had_memory = os.path.lexists(memory)
    try:
        done = run_makad(short_tmp / "run" / "s.sock", short_tmp / "data", {"MAKAD_USER_MEMORY": folder})
        assert done.returncode == EXIT_UNSAFE, done.stderr
        assert f"the user-level memory folder {folder}:" in done.stderr and "--user-memory" in done.stderr
        assert os.path.lexists(memory) == had_memory
    finally:
        if not had_memory and memory.is_dir() and not memory.is_symlink():
            shutil.rmtree(memory)
