"""Watches every workspace's memory directory and ingests the user's own edits.

One ``watchfiles`` watcher covers all memory directories: each watcher holds a
worker thread for as long as it runs, so a watcher per workspace would starve
anyio's thread pool (40 threads) that every SQLite and file call goes through.
When a directory is added the watch restarts over the new set, and every watched
workspace whose files changed since they were last read is re-read, so nothing saved
during the restart is missed (the stat signatures of all of them are compared in one
worker-thread hop: a restart costs a stat per file, not a read). Additions that arrive
while a restart is under way, or within four times as long as the last restart took,
make one restart together: a client subscribing to thousands of folders one by one costs a few
restarts over the whole set, not one per folder.

Directories are watched, not files: editors that save by writing a temp file and
renaming it replace the inode, which a file watch would miss. A watched folder that is
itself moved away or deleted (a restore copying it back, ``mv memory.new memory``) takes
its watch with it: that event restarts the watch over the folder at the path now. A
folder missing when the watch restarts (deleted, its workspace folder renamed away) is not
watched; a subscribed workspace's is looked for every ``MISSING_LOOK_S`` and watched again
once it is back (the others are looked for at their next call). Event types are not
trusted (editors emit unordered add/delete batches and probe files); after each batch the
files are re-read and compared by content hash, so the daemon's own writes are never taken
for user edits.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio
import structlog
from anyio.abc import TaskGroup

from makad.store.workspaces import MEMORY_FILE, PENDING_FILE, Workspace

if TYPE_CHECKING:
    import watchfiles

log = structlog.get_logger("makad.watcher")
WATCHED = frozenset({MEMORY_FILE, PENDING_FILE})


# A restart of the watch waits, for more additions to join it, this many times as long as
# the last one took (so restarts take at most a fifth of the time), up to MAX_RESTART_WAIT_S.
RESTART_WAIT_FACTOR = 4
MAX_RESTART_WAIT_S = 2.0
# How often the memory folders of subscribed workspaces that are not there (deleted, or
# their workspace folder moved away) are looked for: a watch cannot cover a missing folder.
MISSING_LOOK_S = 1.0


class Watcher:
    def __init__(
        self,
        ingest: Callable[[Workspace], Awaitable[None]],
        to_ingest: Callable[[list[Workspace]], Awaitable[list[Workspace]]],
        debounce_ms: int,
    ) -> None:
        self._ingest = ingest
        self._to_ingest = to_ingest
        self._debounce_ms = debounce_ms
        self._last_restart_s = 0.0
        self._dirs: dict[Path, Workspace] = {}
        # The workspaces (their ids) whose memory directory is being looked for (``ensure``),
        # each looked for once at a time. Workspaces, not folders: a workspace let go of
        # and opened again (a new one for the same folder) is looked for afresh.
        self._looking: set[int] = set()
        # Workspaces whose memory directory was missing when last looked for: looked for
        # again every MISSING_LOOK_S while one has subscribers (nothing else would name them).
        self._missing: dict[int, Workspace] = {}
        self._missing_added = anyio.Event()
        self._changed = anyio.Event()
        self._stop = anyio.Event()
        self._tg: TaskGroup | None = None

    def start(self, tg: TaskGroup) -> None:
        self._tg = tg
        tg.start_soon(self._run)
        tg.start_soon(self._look_for_missing)

    def stop(self) -> None:
        self._stop.set()
        self._changed.set()
        self._missing_added.set()

    def ensure(self, ws: Workspace) -> None:
        """Start watching a workspace's memory directory once it exists (looked for on a
        worker thread: a request never waits on the workspace's disk for it)."""
        if ws.watching or id(ws) in self._looking:
            return
        if self._tg is None:  # not started: nothing is served yet, nothing waits
            if _folder_kind(ws.memory_dir) == "folder":
                self._add(ws)
            return
        self._looking.add(id(ws))
        self._tg.start_soon(self._add_if_present, ws)

    async def _add_if_present(self, ws: Workspace) -> None:
        try:
            kind = await anyio.to_thread.run_sync(_folder_kind, ws.memory_dir)
        finally:
            self._looking.discard(id(ws))
        if ws.watching or ws.released:
            return
        if kind == "folder":
            self._add(ws)
            return
        self._note_missing(ws)
        if kind == "absent" and not (ws.memory.missing and ws.pending.missing):
            # Its files were read, and the folder is gone before any watch covered it:
            # take the deletion in as a watched folder's would be.
            await self._ingest_stale([ws])

    async def _look_for_missing(self) -> None:
        """Watch the memory folders of subscribed workspaces once they are back (a
        workspace folder renamed away and back, a memory folder made again): a subscriber
        makes no call that would look for them. The others wait for their next call."""
        while not self._stop.is_set():
            if not self._missing:  # nothing to look for: no wake-up each second while idle
                await self._missing_added.wait()
                self._missing_added = anyio.Event()
            with anyio.move_on_after(MISSING_LOOK_S):
                await self._stop.wait()
            for key, ws in list(self._missing.items()):
                # Watched again, let go of, no subscriber, or another workspace watched
                # at its folder now (one opened in its place): no longer looked for here.
                if ws.watching or ws.released or not ws.subscribers or ws.memory_dir in self._dirs:
                    del self._missing[key]
            if not self._missing:
                continue
            wss = list(self._missing.values())
            kinds = await anyio.to_thread.run_sync(_folder_kinds, [ws.memory_dir for ws in wss])
            for ws, kind in zip(wss, kinds, strict=True):
                if kind == "folder" and not (ws.watching or ws.released or ws.memory_dir in self._dirs):
                    self._missing.pop(id(ws), None)
                    self._add(ws)

    def _note_missing(self, ws: Workspace) -> None:
        self._missing[id(ws)] = ws
        self._missing_added.set()

    def forget(self, released: list[Workspace]) -> None:
        """Stop watching workspaces the registry let go of (one restart of the watch for
        them all): the next call naming one watches it again, and the watch's restart
        reads its files then, so nothing saved meanwhile is missed."""
        gone = False
        for ws in released:
            if ws.watching and self._dirs.get(ws.memory_dir) is ws:
                del self._dirs[ws.memory_dir]
                gone = True
            ws.watching = False
        if gone:
            self._changed.set()

    def _add(self, ws: Workspace) -> None:
        ws.watching = True
        self._dirs[ws.memory_dir] = ws
        self._changed.set()

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self._changed.wait()
            if self._stop.is_set():
                return
            self._changed = anyio.Event()
            await self._forget_missing()
            if not self._dirs:
                continue
            await self._watch_until_changed()

    async def _forget_missing(self) -> None:
        """Stop watching folders that are gone, reading each once more first when its
        files changed since it was last read: a folder added, and deleted before the
        restarted watch covered it, sent no event, and its deletion is taken in here."""
        missing = await anyio.to_thread.run_sync(_missing, list(self._dirs))
        gone = [ws for path in missing if (ws := self._dirs.pop(path, None)) is not None]
        for ws in gone:
            ws.watching = False
            self._note_missing(ws)
        if gone:
            await self._ingest_stale(gone)

    async def _ingest_stale(self, wss: list[Workspace]) -> None:
        """Read those of ``wss`` whose files changed since they were last read."""
        try:
            stale = await self._to_ingest(wss)
        except Exception as exc:  # cannot tell: read them all
            log.warning("catch_up_check_failed", error=type(exc).__name__)
            stale = wss
        for ws in stale:
            await self._ingest_quietly(ws)

    async def _watch_until_changed(self) -> None:
        import watchfiles  # with the first watched workspace, not at the daemon's start-up

        restart = anyio.Event()
        changed = self._changed
        started = anyio.current_time()

        async def relay() -> None:
            try:
                await changed.wait()
                if not self._stop.is_set():
                    # More additions may join this restart; the watch goes on serving meanwhile.
                    wait_s = min(self._last_restart_s * RESTART_WAIT_FACTOR, MAX_RESTART_WAIT_S)
                    with anyio.move_on_after(wait_s):
                        await self._stop.wait()
            finally:
                # Also when cancelled (the daemon stopping): the watch's thread ends only when
                # this is set, and nothing can cancel the thread itself.
                restart.set()

        async def catch_up() -> None:
            # Whatever was saved while the watch was (re)starting is read here. This task
            # first runs when the watch below suspends for the first time, and watchfiles
            # registers its watches before that: a save made before then is read here,
            # one made after arrives as a batch. (Reading before starting the watch left
            # a window in which a save was seen by neither.)
            await self._ingest_stale(list(self._dirs.values()))
            self._last_restart_s = anyio.current_time() - started

        folders = {str(folder) for folder in self._dirs}

        def memory_files_and_folders(change: watchfiles.Change, path: str) -> bool:
            return path in folders or Path(path).name in WATCHED

        async with anyio.create_task_group() as tg:
            tg.start_soon(relay)
            tg.start_soon(catch_up)
            try:
                async for batch in watchfiles.awatch(
                    *folders,
                    watch_filter=memory_files_and_folders,
                    debounce=self._debounce_ms,
                    step=10,
                    recursive=False,
                    stop_event=restart,
                    ignore_permission_denied=True,
                ):
                    touched = {Path(path).parent for _, path in batch if path not in folders}
                    gone = {
                        Path(path)
                        for change, path in batch
                        if path in folders and change == watchfiles.Change.deleted
                    }
                    if gone:
                        # A watched folder itself moved away or deleted: its watch is on
                        # the folder that went, so the restart watches the one at its path
                        # now, if any, and reads it (or forgets it: _forget_missing).
                        touched |= gone
                        self._changed.set()
                    for directory in touched:
                        ws = self._dirs.get(directory)
                        if ws is not None:
                            await self._ingest_quietly(ws)
            except Exception as exc:  # a vanished directory ends the watch: restart it
                log.warning("watch_restarting", error=type(exc).__name__)
                self._changed.set()
            tg.cancel_scope.cancel()

    async def _ingest_quietly(self, ws: Workspace) -> None:
        try:
            await self._ingest(ws)
        except Exception as exc:  # one bad read must not end the watch
            log.warning("ingest_failed", workspace_id=ws.id, error=type(exc).__name__)


def _folder_kind(path: Path) -> Literal["folder", "absent", "other"]:
    """Whether ``path`` is a directory, nothing, or something else: a file, or a symlink
    even to a directory (the daemon follows none, and a watch through one would be on the
    folder it points to, and stay there once the link is gone; calls report it). Blocking:
    an ``lstat``."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "absent"
    except OSError:
        return "other"
    return "folder" if stat.S_ISDIR(mode) else "other"


def _folder_kinds(paths: list[Path]) -> list[Literal["folder", "absent", "other"]]:
    """``_folder_kind`` of each path (blocking: an ``lstat`` each)."""
    return [_folder_kind(path) for path in paths]


def _missing(folders: list[Path]) -> list[Path]:
    """The folders that are no directory (any more), or a symlink now: blocking, an
    ``lstat`` each."""
    return [folder for folder in folders if _folder_kind(folder) != "folder"]
