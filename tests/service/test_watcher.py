"""The watcher on real folders with real watches: a memory folder deleted before any watch
covered it (while the watch waits for more additions to join its restart, or before the
folder was first looked for) is still read once, so the daemon takes the deletion in. The
workspace is a stand-in holding what the watcher reads of one; reading is recorded."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import anyio
import pytest

from makad.store.tracked import TrackedFile
from makad.store.workspaces import MEMORY_FILE, PENDING_FILE, Workspace
from makad.watcher import Watcher
from tests.support import inotify_watched_inodes

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass(eq=False)
class _Workspace:
    """What the watcher reads of a workspace: its memory folder, its files as last read
    (present here), whether it is watched or let go of."""

    memory_dir: Path
    memory: TrackedFile = field(default_factory=lambda: TrackedFile(MEMORY_FILE, missing=False))
    pending: TrackedFile = field(default_factory=lambda: TrackedFile(PENDING_FILE))
    watching: bool = False
    released: bool = False
    subscribers: dict[object, set[str]] = field(default_factory=dict)


def _workspace(root: Path, name: str) -> Workspace:
    folder = root / name / "memory"
    folder.mkdir(parents=True)
    (folder / MEMORY_FILE).write_text("# Memory\n")
    return cast(Workspace, _Workspace(folder))


class _Reads:
    """Records each workspace read; every folder counts as changed since its last read."""

    def __init__(self) -> None:
        self.read: list[Workspace] = []
        self.event = anyio.Event()

    async def ingest(self, ws: Workspace) -> None:
        self.read.append(ws)
        self.event.set()

    async def to_ingest(self, wss: list[Workspace]) -> list[Workspace]:
        return list(wss)

    async def wait_for(self, ws: Workspace) -> None:
        with anyio.fail_after(20):
            while ws not in self.read:
                await self.event.wait()
                self.event = anyio.Event()


async def test_a_folder_deleted_while_its_watch_waits_to_restart_is_read(tmp_path: Path) -> None:
    """A folder added while the watch holds back its restart for more additions, and
    deleted before the restart, is read once as the restart finds it gone."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    first, second = _workspace(tmp_path, "first"), _workspace(tmp_path, "second")
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        watcher.ensure(first)
        await reads.wait_for(first)  # the first watch's catch-up read
        watcher._last_restart_s = 1.0  # the next restart waits its longest for more additions
        watcher.ensure(second)
        with anyio.fail_after(10):
            while not second.watching:  # noqa: ASYNC110 - the watcher sets a flag, no event
                await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(shutil.rmtree, second.memory_dir)
        await reads.wait_for(second)
        assert not second.watching
        watcher.stop()


async def test_a_folder_deleted_before_it_was_looked_for_is_read(tmp_path: Path) -> None:
    """A workspace whose files were read, and whose folder is gone when the watcher first
    looks for it, is read once (its files are gone), not left unwatched as it was."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    ws = _workspace(tmp_path, "only")
    shutil.rmtree(ws.memory_dir)
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        watcher.ensure(ws)
        await reads.wait_for(ws)
        assert not ws.watching
        watcher.stop()


async def test_a_folder_never_read_is_not_read_when_absent(tmp_path: Path) -> None:
    """A workspace that never had memory files is not read on each look for its folder."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    ws = cast(Workspace, _Workspace(tmp_path / "none" / "memory", memory=TrackedFile(MEMORY_FILE)))
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        for _ in range(3):
            watcher.ensure(ws)
            await anyio.sleep(0.05)
        assert reads.read == [] and not ws.watching
        watcher.stop()


def _watched_inodes() -> set[int]:
    """The inodes of the folders this process's inotify watches are on."""
    return inotify_watched_inodes(os.getpid())


async def _until_watched(folder: Path) -> None:
    with anyio.fail_after(20):
        while os.stat(folder).st_ino not in await anyio.to_thread.run_sync(_watched_inodes):  # noqa: ASYNC110
            await anyio.sleep(0.01)


@pytest.mark.parametrize("how", ["moved away", "deleted"])
async def test_a_watched_folder_made_anew_is_watched_anew(tmp_path: Path, how: str) -> None:
    """A watched memory folder moved away or deleted, and made again at its path (a git
    checkout, a restore from elsewhere), is read, and the new folder is watched: a later
    save in it is read too."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    ws = _workspace(tmp_path, "only")
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        watcher.ensure(ws)
        await reads.wait_for(ws)  # the first watch's catch-up read
        await _until_watched(ws.memory_dir)
        reads.read.clear()
        if how == "moved away":
            ws.memory_dir.rename(tmp_path / "only" / "memory.old")
        else:
            shutil.rmtree(ws.memory_dir)
        ws.memory_dir.mkdir()
        (ws.memory_dir / MEMORY_FILE).write_text("# Memory\n\n## Anew\n")
        await reads.wait_for(ws)
        await _until_watched(ws.memory_dir)
        reads.read.clear()
        (ws.memory_dir / MEMORY_FILE).write_text("# Memory\n\n## Saved later\n")
        await reads.wait_for(ws)
        assert ws.watching
        watcher.stop()


async def test_a_workspace_opened_again_while_its_folder_is_looked_for_is_watched(tmp_path: Path) -> None:
    """A workspace let go of while its folder is still being looked for, and opened again
    at once (a new workspace for the same folder), is watched: the look for the one let
    go of does not stand for the new one's."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    ws = _workspace(tmp_path, "again")
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        watcher.ensure(ws)  # looked for on a worker thread, not yet found
        ws.released = True
        watcher.forget([ws])
        again = cast(Workspace, _Workspace(ws.memory_dir))
        watcher.ensure(again)
        await reads.wait_for(again)  # the new workspace's watch's catch-up read
        assert again.watching and not ws.watching
        await _until_watched(again.memory_dir)
        reads.read.clear()
        (again.memory_dir / MEMORY_FILE).write_text("# Memory\n\n## Saved\n")
        await reads.wait_for(again)
        assert ws not in reads.read
        watcher.stop()


async def test_a_memory_folder_replaced_by_a_symlink_is_not_watched_through_it(tmp_path: Path) -> None:
    """A watched memory folder replaced by a symlink (which the daemon refuses to follow)
    stops being watched instead of being watched through the link; once the folder is
    back and the workspace named again, the folder is watched and a save in it is read."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    ws = _workspace(tmp_path, "linked")
    aside, elsewhere = tmp_path / "linked" / "memory.old", tmp_path / "elsewhere"
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        watcher.ensure(ws)
        await reads.wait_for(ws)
        await _until_watched(ws.memory_dir)
        shutil.copytree(ws.memory_dir, elsewhere)
        ws.memory_dir.rename(aside)
        ws.memory_dir.symlink_to(elsewhere)
        with anyio.fail_after(20):
            while ws.watching:  # noqa: ASYNC110 - the watcher sets a flag, no event
                await anyio.sleep(0.01)
        ws.memory_dir.unlink()
        aside.rename(ws.memory_dir)
        watcher.ensure(ws)  # the next call naming the workspace
        await _until_watched(ws.memory_dir)
        reads.read.clear()
        (ws.memory_dir / MEMORY_FILE).write_text("# Memory\n\n## Saved\n")
        await reads.wait_for(ws)
        watcher.stop()


async def test_a_subscribed_workspace_moved_away_during_a_restart_is_watched_once_back(
    tmp_path: Path,
) -> None:
    """A subscribed workspace's folder renamed away while the watch restarts (its memory
    folder missing then, so no longer watched) and renamed back is watched again without
    any call naming it: a save in it is read."""
    reads = _Reads()
    watcher = Watcher(reads.ingest, reads.to_ingest, debounce_ms=50)
    ws, other = _workspace(tmp_path, "moved"), _workspace(tmp_path, "other")
    ws.subscribers[object()] = {"moved"}
    async with anyio.create_task_group() as tg:
        watcher.start(tg)
        watcher.ensure(ws)
        await reads.wait_for(ws)
        ws.memory_dir.parent.rename(tmp_path / "away")
        watcher.ensure(other)  # an addition: the watch restarts without the folder
        with anyio.fail_after(20):
            while ws.watching:  # noqa: ASYNC110 - the watcher sets a flag, no event
                await anyio.sleep(0.01)
        (tmp_path / "away").rename(ws.memory_dir.parent)
        await _until_watched(ws.memory_dir)
        reads.read.clear()
        (ws.memory_dir / MEMORY_FILE).write_text("# Memory\n\n## Saved\n")
        await reads.wait_for(ws)
        watcher.stop()
