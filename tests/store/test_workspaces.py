"""The workspace registry: one state per directory on disk, re-checked on every call."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from makad.errors import IOFailure
from makad.store import identity
from makad.store.memory_files import ensure_memory_dir
from makad.store.workspaces import WorkspaceRegistry

pytestmark = pytest.mark.anyio


def folder(tmp_path: Path, name: str = "ws") -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


async def test_the_same_directory_is_the_same_state(registry: WorkspaceRegistry, tmp_path: Path) -> None:
    """Repeated calls, other spellings and a touched id file all give the same state."""
    ws = folder(tmp_path)
    first = await registry.get(str(ws))
    first.ledger.put_settings_json({"bound": True})  # the first write binds the folder
    assert first.identity is not None
    assert await registry.get(str(ws)) is first
    assert await registry.get(f"{ws}/.") is first
    os.utime(ws / "memory" / identity.ID_FILE)
    assert await registry.get(str(ws)) is first


async def test_a_replaced_folder_is_new_state_and_the_old_data_is_retired(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """Deleted and made again: a new state with a new id and no settings; the old data
    directory moved under retired/ with its ledger; a new_workspace notice."""
    ws = folder(tmp_path)
    first = await registry.get(str(ws))
    first.ledger.put_settings_json({"agentReadEnabled": True, "__revision__": 9})
    first.revision = 9
    shutil.rmtree(ws)
    ws.mkdir()
    second = await registry.get(str(ws))
    assert second is not first and second.identity is None
    assert second.ledger.get_settings_json() == {}
    assert [n.kind for n in second.warnings()] == ["new_workspace"]
    [retired] = list((tmp_path / "data" / "retired").iterdir())
    assert (retired / "ledger.sqlite3").is_file() and (retired / identity.BINDING_FILE).is_file()


async def test_an_unbound_folder_is_bound_by_its_first_write(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """Opening writes nothing into the folder; the first ledger write creates memory/ and
    its id, and the cached stamp follows, so the next call needs no re-open."""
    ws = folder(tmp_path)
    opened = await registry.get(str(ws))
    assert not (ws / "memory").exists() and opened.identity is None
    opened.ledger.open_session("s")
    assert opened.identity == identity.read_id(ws / "memory")
    assert opened.stamp == identity.stamp(ws)


async def test_an_unreadable_id_is_an_error_not_a_new_workspace(
    registry: WorkspaceRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id file that cannot be read (a permission or disk error: faked, as root cannot be
    refused) never retires the data: the call is io_error, and it works once the id reads."""
    ws = folder(tmp_path)
    opened = await registry.get(str(ws))
    opened.ledger.open_session("s")
    real_open = os.open

    def refusing(path: object, *args: object, **kwargs: object) -> int:
        if str(path).endswith(identity.ID_FILE):
            raise PermissionError(13, "Permission denied")
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    os.utime(ws / "memory" / identity.ID_FILE)  # the stamp changes: the call re-checks
    monkeypatch.setattr(identity.os, "open", refusing)
    with pytest.raises(IOFailure):
        await registry.get(str(ws))
    monkeypatch.undo()
    assert not (tmp_path / "data" / "retired").exists()
    again = await registry.get(str(ws))
    assert again.identity == opened.identity


async def test_a_directory_where_the_id_should_be_is_no_id(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """Something that is not a regular file at memory/.maka-id is not an id: the bound data
    directory is retired (fail closed), never read through it."""
    ws = folder(tmp_path)
    opened = await registry.get(str(ws))
    opened.ledger.open_session("s")
    id_file = ws / "memory" / identity.ID_FILE
    id_file.unlink()
    id_file.mkdir()
    assert (await registry.get(str(ws))).identity is None
    assert (tmp_path / "data" / "retired").is_dir()


async def test_a_call_while_the_first_write_binds_keeps_the_state(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """A call that comes while the first write is binding the folder (the id file written,
    the state not told yet) gets the same state with its ledger open, and the write then
    finishes binding the data directory to that id: a workspace is never opened twice."""
    ws = folder(tmp_path)
    opened = await registry.get(str(ws))
    ensure_memory_dir(ws / "memory")
    written = identity.write_id(ws / "memory")  # the binder's first step
    assert opened.identity is None
    assert await registry.get(str(ws)) is opened
    opened.ledger.open_session("s")  # the ledger still works; the binder finishes
    assert opened.identity == written
    assert identity.read_binding(opened.data_dir) == written
    assert await registry.get(str(ws)) is opened
    assert not (tmp_path / "data" / "retired").exists()
