"""Watches each workspace's memory directory and ingests the user's own edits.

The directory is watched, not the files: editors that save by writing a temp
file and renaming it replace the inode, which a file watch would miss. Event
types are not trusted (editors emit unordered add/delete batches and probe
files); after each batch the files are re-read and compared by content hash,
so the daemon's own writes are never taken for user edits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import structlog
import watchfiles
from anyio.abc import TaskGroup

from makad.store.workspaces import MEMORY_FILE, PENDING_FILE, Workspace

log = structlog.get_logger("makad.watcher")
WATCHED = frozenset({MEMORY_FILE, PENDING_FILE})


def _only_memory_files(change: watchfiles.Change, path: str) -> bool:
    return Path(path).name in WATCHED


class Watcher:
    def __init__(self, ingest: Callable[[Workspace], Awaitable[None]], debounce_ms: int) -> None:
        self._ingest = ingest
        self._debounce_ms = debounce_ms
        self._tg: TaskGroup | None = None
        self._stop = anyio.Event()

    def start(self, tg: TaskGroup) -> None:
        self._tg = tg

    def stop(self) -> None:
        self._stop.set()

    def ensure(self, ws: Workspace) -> None:
        """Start watching a workspace's memory directory once it exists."""
        if ws.watching or self._tg is None or not ws.memory_dir.is_dir():
            return
        ws.watching = True
        self._tg.start_soon(self._watch, ws)

    async def _watch(self, ws: Workspace) -> None:
        try:
            async for _changes in watchfiles.awatch(
                ws.memory_dir, watch_filter=_only_memory_files, debounce=self._debounce_ms,
                step=10, recursive=False, stop_event=self._stop, ignore_permission_denied=True,
            ):
                try:
                    await self._ingest(ws)
                except Exception as exc:  # one bad read must not end the watch
                    log.warning("ingest_failed", workspace_id=ws.id, error=type(exc).__name__)
        except Exception as exc:
            log.warning("watch_stopped", workspace_id=ws.id, error=type(exc).__name__)
        finally:
            ws.watching = False
