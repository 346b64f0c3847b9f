"""Folders that are never a workspace: the data directory, the user level's folders.

Each is refused with ``invalid_workspace`` (``data.reason: "reserved"``) under every
spelling — the plain path, a symlink, a path inside — and the daemon keeps serving.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from maka.errors import RemoteError
from tests.support import DaemonProcess, ping_ok

USER = "@user"


@pytest.fixture(scope="module")
def d() -> Iterator[DaemonProcess]:
    """A daemon whose user level lives outside its data directory (``--user-memory``)."""
    root = Path(tempfile.mkdtemp(prefix="mk", dir="/tmp"))
    proc = DaemonProcess(root, env={"MAKAD_USER_MEMORY": str(root / "me")})
    proc.start()
    try:
        proc.call("read_state", {"workspace": USER})  # makes the user folder
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(root, ignore_errors=True)


def refusal(d: DaemonProcess, workspace: str, method: str = "read_state") -> RemoteError:
    params = {"workspace": workspace}
    if method == "add_entry":
        params |= {"title": "t", "content": "c"}
    with pytest.raises(RemoteError) as info:
        d.call(method, params)
    return info.value


def assert_reserved(d: DaemonProcess, workspace: str) -> str:
    """The refusal's message, after checking that a read and a write are both refused."""
    for method in ("read_state", "add_entry"):
        error = refusal(d, workspace, method)
        assert error.kind == "invalid_workspace", (workspace, method, error)
        assert error.data.get("reason") == "reserved", (workspace, error.data)
    assert ping_ok(d.socket)
    return error.message


def test_data_directory_and_anything_inside_it_are_refused(d: DaemonProcess) -> None:
    """The data directory, its workspaces/ folder and a workspace's data folder are refused."""
    d.call("read_state", {"workspace": str(d.workspace)})
    data_folders = [d.data_dir, d.data_dir / "workspaces", *sorted((d.data_dir / "workspaces").iterdir())]
    for folder in data_folders:
        message = assert_reserved(d, str(folder))
        assert "data directory" in message
    assert not any(p.name == "memory" for p in d.data_dir.iterdir())


def test_user_folder_and_its_memory_folder_are_refused_under_any_spelling(d: DaemonProcess) -> None:
    """The user folder, its memory/ folder, symlinks to either and a trailing "/." all fail."""
    me = d.root / "me"
    links = d.root / "links"
    links.mkdir(exist_ok=True)
    (links / "to-me").symlink_to(me)
    (links / "to-memory").symlink_to(me / "memory")
    spellings = [
        str(me),
        f"{me}/.",
        str(links / "to-me"),
        str(me / "memory"),
        f"{me}/memory/",
        str(links / "to-memory"),
        str(links / "to-me" / "memory"),
    ]
    for spelling in spellings:
        assert USER in assert_reserved(d, spelling), spelling
    assert not (me / "memory" / "memory").exists()


def test_a_folder_inside_the_user_memory_folder_is_refused(d: DaemonProcess) -> None:
    """A folder made inside the user level's memory/ folder is refused too."""
    inner = d.root / "me" / "memory" / "inner"
    inner.mkdir(exist_ok=True)
    assert "inside" in assert_reserved(d, str(inner))
    assert not (inner / "memory").exists()


def test_the_filesystem_root_is_refused_under_any_spelling(d: DaemonProcess) -> None:
    """ "/" (and "/.", a symlink to it) is never a workspace: no /memory folder is made."""
    links = d.root / "links"
    links.mkdir(exist_ok=True)
    if not (links / "to-root").is_symlink():
        (links / "to-root").symlink_to("/")
    existed = Path("/memory").exists()
    for spelling in ("/", "/.", str(links / "to-root")):
        assert "filesystem root" in assert_reserved(d, spelling), spelling
    assert Path("/memory").exists() == existed


def test_an_ordinary_folder_next_to_the_reserved_ones_still_works(d: DaemonProcess) -> None:
    """A sibling of the user folder and a folder inside the user folder (not memory/) are
    ordinary workspaces: the rule names folders, not prefixes of their paths."""
    sibling = d.root / "me-too"
    nested = d.root / "me" / "project"
    for folder in (sibling, nested):
        folder.mkdir(exist_ok=True)
        added = d.call(
            "add_entry", {"workspace": str(folder), "title": "Fine", "content": "an ordinary workspace"}
        )
        assert added["entry"]["title"] == "Fine"
        assert (folder / "memory" / "MEMORY.md").is_file()


def test_a_folder_whose_memory_folder_is_the_data_directory_is_refused(short_tmp: Path) -> None:
    """With the data directory named memory/, its parent folder cannot be a workspace: its
    MEMORY.md would land among the daemon's own files."""
    proc = DaemonProcess(short_tmp)
    project = short_tmp / "proj"
    project.mkdir()
    proc.data_dir = project / "memory"
    proc.start()
    try:
        assert "memory/" in assert_reserved(proc, str(project))
        assert not (project / "memory" / "MEMORY.md").exists()
        assert sorted(os.listdir(project)) == ["memory"]
    finally:
        proc.stop()


def test_a_workspace_memory_folder_and_folders_inside_it_are_refused(d: DaemonProcess) -> None:
    """A workspace's own memory/ folder (say, an agent started in it), a spelling of it and
    a folder inside it are refused, naming the workspace: no memory/memory/ is made."""
    project = d.root / "project-with-memory"
    project.mkdir(exist_ok=True)
    d.call("add_entry", {"workspace": str(project), "title": "Kept", "content": "in the workspace"})
    memory = project / "memory"
    inner = memory / "drafts"
    inner.mkdir(exist_ok=True)
    for spelling in (str(memory), f"{memory}/", f"{project}/./memory", str(inner)):
        assert str(project) in assert_reserved(d, spelling), spelling
    assert not (memory / "memory").exists() and not (inner / "memory").exists()
    titles = [
        e["title"]
        for e in d.call("read_state", {"workspace": str(project), "includeEntries": True})["entries"]
    ]
    assert titles == ["Kept"]
