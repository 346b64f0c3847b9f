"""``memory/`` swapped for a symlink while makad writes in it (another user who can write
the project folder, racing the check): what makad writes stays in the folder it checked,
and nothing is created or replaced where the symlink leads (real files)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from makad.errors import InvalidWorkspace
from makad.store import identity, memory_files
from makad.store.memory_files import read_memory_file, write_memory_file
from tests.impostor import NOBODY, needs_nobody

CAP = 1 << 20


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def elsewhere_with_memory(root: Path) -> Path:
    """A folder of the user's outside the workspace holding files named like makad's."""
    elsewhere = root / "other-project-memory"
    elsewhere.mkdir()
    (elsewhere / "MEMORY.md").write_bytes(b"the user's other memory\n")
    (elsewhere / identity.ID_FILE).write_bytes(b"0" * 32 + b"\n")
    return elsewhere


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def swap_before(monkeypatch: pytest.MonkeyPatch, name: str, memory: Path, elsewhere: Path) -> None:
    """``memory_files.<name>`` first moves ``memory`` aside and puts a symlink to
    ``elsewhere`` in its place, then does its work."""
    real = getattr(memory_files, name)

    def swapped_first(*args: object, **kwargs: object) -> object:
        memory.rename(memory.parent / "moved")
        memory.symlink_to(elsewhere)
        return real(*args, **kwargs)

    monkeypatch.setattr(memory_files, name, swapped_first)


@pytest.mark.parametrize("existing", [True, False], ids=["replacing MEMORY.md", "creating MEMORY.md"])
def test_a_memory_folder_swapped_for_a_symlink_mid_write_is_never_written_through(
    tmp_path: Path, existing: bool
) -> None:
    """The folder is renamed away and a symlink to another folder put in its place right
    before makad's rename: MEMORY.md lands in the folder makad checked, the other folder
    keeps exactly what it held, and the next read refuses the symlink."""
    workspace = tmp_path / "ws"
    memory = workspace / "memory"
    memory.mkdir(parents=True)
    if existing:
        (memory / "MEMORY.md").write_bytes(b"old\n")
    elsewhere = elsewhere_with_memory(tmp_path)
    before = contents(elsewhere)

    def swap() -> None:
        memory.rename(workspace / "moved")
        memory.symlink_to(elsewhere)

    kept: list[bytes] = []
    write_memory_file(
        memory / "MEMORY.md",
        "new\n",
        expect_sha=sha(b"old\n") if existing else None,
        max_bytes=CAP,
        keep=kept.append,
        before_rename=swap,
    )
    assert contents(elsewhere) == before
    assert (workspace / "moved" / "MEMORY.md").read_bytes() == b"new\n"
    assert kept == []
    with pytest.raises(InvalidWorkspace) as refused:
        read_memory_file(memory / "MEMORY.md", CAP)
    assert refused.value.details.get("reason") == "symlink"


def test_the_id_file_is_never_written_through_a_memory_folder_turned_symlink(tmp_path: Path) -> None:
    """``memory/`` a symlink by the time makad writes its id file (checked a moment before):
    refused (OSError, which leaves the workspace unbound), the other folder untouched."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    elsewhere = elsewhere_with_memory(tmp_path)
    before = contents(elsewhere)
    (workspace / "memory").symlink_to(elsewhere)
    with pytest.raises(OSError):
        identity.write_id(workspace / "memory")
    assert contents(elsewhere) == before


def test_a_memory_folder_swapped_for_a_symlink_after_the_checks_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap lands after makad's checks of ``memory/`` and before it writes there: the
    write is refused (``invalid_workspace``, reason ``symlink``) and the MEMORY.md where
    the symlink leads keeps its bytes, with no file of makad's made beside it."""
    workspace = tmp_path / "ws"
    memory = workspace / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_bytes(b"the user's other memory\n")
    elsewhere = elsewhere_with_memory(tmp_path)
    before = contents(elsewhere)
    swap_before(monkeypatch, "replace_verified", memory, elsewhere)
    with pytest.raises(InvalidWorkspace) as refused:
        write_memory_file(
            memory / "MEMORY.md",
            "new\n",
            expect_sha=sha(b"the user's other memory\n"),
            max_bytes=CAP,
            keep=[].append,
        )
    assert refused.value.details.get("reason") == "symlink"
    assert contents(elsewhere) == before


def test_a_memory_folder_swapped_for_a_symlink_before_the_read_is_not_read_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap lands after makad's look at ``memory/`` and before it reads MEMORY.md: it
    reads the workspace's own file, never the other folder's (which would reach this
    workspace's context, and its next write)."""
    workspace = tmp_path / "ws"
    memory = workspace / "memory"
    memory.mkdir(parents=True)
    (memory / "MEMORY.md").write_bytes(b"this workspace's memory\n")
    elsewhere = elsewhere_with_memory(tmp_path)
    swap_before(monkeypatch, "read_settled", memory, elsewhere)
    read = read_memory_file(memory / "MEMORY.md", CAP, existed=True)
    assert read.text == "this workspace's memory\n"


@needs_nobody
def test_a_memory_folder_that_may_be_searched_but_not_listed_is_still_read() -> None:
    """``memory/`` of mode 0100 (search, no listing): MEMORY.md in it is read as before
    (the folder is opened for lookups only, which needs no right to list it). Run as
    ``nobody`` in a child process: root reads any folder."""
    assert NOBODY is not None
    root = Path(tempfile.mkdtemp(prefix="mkx", dir="/tmp"))
    try:
        memory = root / "memory"
        memory.mkdir()
        (memory / "MEMORY.md").write_bytes(b"searchable\n")
        for path in (root, memory, memory / "MEMORY.md"):
            os.chown(path, NOBODY.pw_uid, NOBODY.pw_gid)
        memory.chmod(0o100)
        root.chmod(0o700)
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: nobody, reading; its answer on the pipe
            code = 1
            try:
                os.close(reader)
                os.setgid(NOBODY.pw_gid)
                os.setuid(NOBODY.pw_uid)
                read = read_memory_file(memory / "MEMORY.md", CAP)
                os.write(writer, (read.text or "").encode())
                code = 0
            finally:
                os._exit(code)
        os.close(writer)
        with os.fdopen(reader, "rb") as answer:
            text = answer.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0 and text == b"searchable\n"
    finally:
        shutil.rmtree(root, ignore_errors=True)
