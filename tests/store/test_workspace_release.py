"""Releasing workspaces: the registry stops holding one, never makes a second state for a
folder while the first is in use, and opens it again from disk once it is freed."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest

from makad.store.workspaces import Workspace, WorkspaceRegistry, short_hash

pytestmark = pytest.mark.anyio


def folder(tmp_path: Path, name: str = "ws") -> str:
    path = tmp_path / name
    path.mkdir()
    return str(path)


def always(ws: Workspace) -> bool:
    return True


async def test_a_released_workspace_nothing_holds_is_freed_and_opened_again(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """Once released and unused, the workspace object is gone (its unbound ledger's binder
    does not keep it), and the next call gets a new one, held again."""
    raw = folder(tmp_path)
    ws = await registry.get(raw)
    assert ws.identity is None  # unbound: its ledger's binder refers back to it
    ws.ledger.rest()
    assert await registry.release([ws], always) == [ws]
    assert registry.all() == []
    gone = weakref.ref(ws)
    del ws
    assert gone() is None
    again = await registry.get(raw)
    assert not again.released and registry.all() == [again]


async def test_a_released_workspace_still_in_use_is_the_one_found_again(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """A call holding a released workspace keeps it: lookups by spelling and by path find
    that same object (never a second state for the folder), and hold it again."""
    raw = folder(tmp_path)
    ws = await registry.get(raw)
    ws.ledger.put_settings_json({"bound": True})
    await registry.release([ws], always)
    gc.collect()
    assert ws.released
    assert await registry.known(raw) is ws
    assert await registry.get(raw) is ws
    assert registry.all() == [ws] and not ws.released
    await registry.release([ws], always)
    assert await registry.get(str(Path(raw) / ".." / Path(raw).name)) is ws  # a new spelling: by path


async def test_release_skips_what_is_no_longer_idle(registry: WorkspaceRegistry, tmp_path: Path) -> None:
    """A candidate the check finds busy under the registry's lock stays held."""
    ws = await registry.get(folder(tmp_path))
    assert await registry.release([ws], lambda w: False) == []
    assert registry.all() == [ws] and not ws.released


async def test_the_files_hashes_unwatched_go_to_the_next_state(
    registry: WorkspaceRegistry, tmp_path: Path
) -> None:
    """The memory files' hashes known at release are handed to the folder's next state (so a
    version saved meanwhile counts as a change); files never read hand nothing."""
    raw = folder(tmp_path)
    ws = await registry.get(raw)
    memory = Path(raw) / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "MEMORY.md").write_text("## One\nfirst\n")
    ws.memory.refresh(ws.memory_path, 1 << 20)
    ws.pending.refresh(ws.pending_path, 1 << 20)
    known = {"memory": short_hash(ws.memory.sha256), "pending": None}
    ws.ledger.rest()
    await registry.release([ws], always)
    del ws
    gc.collect()
    again = await registry.get(raw)
    assert again.hashes_unwatched == known
    other = await registry.get(folder(tmp_path, "other"))
    await registry.release([other], always)
    del other
    gc.collect()
    assert (await registry.get(str(tmp_path / "other"))).hashes_unwatched is None
