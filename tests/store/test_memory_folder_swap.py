"""``memory/`` swapped for a symlink while makad writes in it (another user who can write
the project folder, racing the check): what makad writes stays in the folder it checked,
and nothing is created or replaced where the symlink leads (real files)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from makad.errors import InvalidWorkspace
from makad.store import identity, memory_files
from makad.store.memory_files import read_memory_file, write_memory_file

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
    real = memory_files.replace_verified

    def swapped_first(*args: object, **kwargs: object) -> object:
        memory.rename(workspace / "moved")
        memory.symlink_to(elsewhere)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(memory_files, "replace_verified", swapped_first)
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
