"""Workspaces: validated paths, their private data directories and per-workspace state.

A workspace is a directory the client names by absolute path. Its memory files
live in ``<workspace>/memory/``; its ledger, backups and settings live under
``<data>/workspaces/<id>/`` where ``id`` is derived from the resolved path.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from makad.errors import InvalidWorkspace
from makad.store.ledger import Ledger
from makad.store.tracked import TrackedFile

MEMORY_DIR = "memory"
MEMORY_FILE = "MEMORY.md"
PENDING_FILE = "PENDING.md"
MAX_CACHED_SPELLINGS = 10_000


def workspace_id(path: Path) -> str:
    return hashlib.sha256(os.fsencode(path)).hexdigest()[:16]


def resolve_workspace(raw: str) -> Path:
    """The canonical path of a workspace, or InvalidWorkspace saying what is wrong."""
    if not raw or "\0" in raw:
        raise InvalidWorkspace("workspace must be a non-empty path")
    if not os.path.isabs(raw):
        raise InvalidWorkspace("workspace must be an absolute path")
    try:
        resolved = Path(raw).resolve(strict=True)
    except (OSError, RuntimeError):
        raise InvalidWorkspace("workspace directory does not exist") from None
    if not resolved.is_dir():
        raise InvalidWorkspace("workspace is not a directory")
    return resolved


@dataclass(frozen=True)
class Notice:
    """Something the user should hear about a workspace (read_state and status warnings)."""

    kind: str  # "ledger_reset"
    message: str
    at: int


@dataclass
class Workspace:
    """Per-workspace runtime state; all mutation happens under ``lock``."""

    path: Path
    id: str
    data_dir: Path
    ledger: Ledger
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    memory: TrackedFile = field(default_factory=lambda: TrackedFile(MEMORY_FILE))
    pending: TrackedFile = field(default_factory=lambda: TrackedFile(PENDING_FILE))
    revision: int | None = None
    subscribers: set[Any] = field(default_factory=set)
    watching: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    notices: list[Notice] = field(default_factory=list)
    # The last revision of the workspace this one replaced: revisions continue after it.
    revision_floor: int = 0

    @property
    def memory_dir(self) -> Path:
        return self.path / MEMORY_DIR

    @property
    def memory_path(self) -> Path:
        return self.memory_dir / MEMORY_FILE

    @property
    def pending_path(self) -> Path:
        return self.memory_dir / PENDING_FILE

    @property
    def backups_dir(self) -> Path:
        return self.data_dir / "backups"

    def warnings(self) -> list[Notice]:
        """Ledger resets (and other notices) seen since this workspace was opened."""
        resets = [Notice("ledger_reset",
                         "the ledger was corrupt: it was moved aside (kept as "
                         f"{reset.moved_to}) and a fresh one started; sessions, history and "
                         "settings start over, privacy switches at their defaults", reset.at)
                  for reset in self.ledger.resets]
        return [*self.notices, *resets]


class WorkspaceRegistry:
    """Opens each workspace once and hands out the same state to every service."""

    def __init__(self, data_dir: Path, on_open: Callable[[Workspace], None] | None = None) -> None:
        self._data_dir = data_dir
        self._open: dict[Path, Workspace] = {}
        # The spellings clients used for each workspace, so a path is resolved once.
        self._by_raw: dict[str, Workspace] = {}
        self._lock = anyio.Lock()
        self._on_open = on_open

    def set_on_open(self, hook: Callable[[Workspace], None]) -> None:
        self._on_open = hook

    async def get(self, raw_path: str) -> Workspace:
        known = self._by_raw.get(raw_path)
        if known is not None:
            return known
        path = await anyio.to_thread.run_sync(resolve_workspace, raw_path)
        workspace = self._open.get(path)
        if workspace is not None:
            return workspace
        async with self._lock:
            workspace = self._open.get(path)
            if workspace is None:
                workspace = await anyio.to_thread.run_sync(self._open_workspace, path)
                self._open[path] = workspace
                if self._on_open is not None:
                    self._on_open(workspace)
        if len(self._by_raw) < MAX_CACHED_SPELLINGS:
            self._by_raw[raw_path] = workspace
        return workspace

    def _open_workspace(self, path: Path) -> Workspace:
        ws_id = workspace_id(path)
        data_dir = self._data_dir / "workspaces" / ws_id
        data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        marker = data_dir / "workspace-path"
        if not marker.exists():
            marker.write_text(str(path), encoding="utf-8")
        ledger = Ledger(data_dir / "ledger.sqlite3")
        return Workspace(path=path, id=ws_id, data_dir=data_dir, ledger=ledger)

    def all(self) -> list[Workspace]:
        return list(self._open.values())

    def close(self) -> None:
        for workspace in self._open.values():
            workspace.ledger.close()
        self._open.clear()
