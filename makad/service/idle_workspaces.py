"""Lets go of idle workspaces, so a daemon that served many folders does not keep them all.

Every folder a call names gets a ``Workspace``: its parsed memory files and their recent
versions, caches, a watch on its ``memory/`` folder. Past ``--max-open-workspaces`` the
least recently used ledgers are closed (``makad.store.ledger.pool``); a workspace whose
ledger is closed and which no call has used for ``MAKAD_WORKSPACE_RELEASE_MS`` is let go
of here (``WorkspaceRegistry.release``) and its watch stopped. Nothing is lost: the
registry only stops holding it, so whatever still uses it keeps it (and every lookup
finds that same object); once nothing does it is freed, and the next call naming the
folder opens it as the daemon's start would — its files read then, a version saved
meanwhile counted as a change (its revision moves).

Kept, whatever their idleness, are the workspaces holding what exists in memory only or
what a background task has yet to do: a subscriber, an incognito or ephemeral session,
session notes or a tripped compaction breaker of one, a lock held, a notice or ledger
reset not yet read, a scrub to retry, an attention state not stored, work the attention
keeper, the session-notes keeper or the semantic indexer has not done yet (but for a
workspace whose indexing failed last: it is released, and tried again at its next call); and the user
level (every workspace's context reads it). Those told of a release let go of what they
held for the workspace too (its watch, its vectors in memory).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import structlog
from anyio.abc import TaskGroup

from makad.service.common import WorkspaceAccess
from makad.store.workspaces import Workspace

log = structlog.get_logger("makad.idle_workspaces")
MIN_TICK_S = 0.5
MAX_TICK_S = 30.0


class IdleWorkspaces:
    def __init__(
        self,
        ctx: WorkspaceAccess,
        release_ms: int,
        busy: list[Callable[[Workspace], bool]],
        released: list[Callable[[list[Workspace]], None]],
    ) -> None:
        self._ctx = ctx
        self._release_s = max(release_ms, 0) / 1000
        self._tick = min(max(self._release_s / 4, MIN_TICK_S), MAX_TICK_S)
        # Background work a workspace may still be due (it is kept while one says so).
        self._busy = busy
        # Told of each batch released (the watcher stops watching them).
        self._released = released

    def start(self, tg: TaskGroup) -> None:
        tg.start_soon(self._run)

    async def _run(self) -> None:
        while True:
            await anyio.sleep(self._tick)
            try:
                await self.sweep()
            except Exception:  # a bad sweep must not end the sweeps
                log.exception("release_failed")

    async def sweep(self) -> int:
        """Release every idle workspace now; how many were."""
        registry = self._ctx.registry
        now = time.monotonic()

        def idle(ws: Workspace) -> bool:
            return self.releasable(ws, now)

        released = await registry.release([ws for ws in registry.all() if idle(ws)], idle)
        if released:
            for tell in self._released:
                tell(released)
            log.debug("workspaces_released", count=len(released))
        return len(released)

    def releasable(self, ws: Workspace, now: float) -> bool:
        """Whether ``ws`` holds nothing that is not on disk and is not in use (see module doc)."""
        ledger = ws.ledger
        state = ws.state
        return (
            ws.level == "workspace"
            and now - ws.last_used >= self._release_s
            and ledger.resting  # pushed out of the open ledgers, and no thread is in it
            and not ws.lock.locked()
            and not state.sessions_lock.locked()
            and not ws.subscribers
            and not ws.notices
            and not ledger.resets
            and ledger.read_only_since is None
            and state.settled == ledger.generation
            and not state.incognito_sessions
            and state.ephemeral.empty()
            and not state.session_notes
            and all(breaker.consecutive_failures == 0 for breaker in state.breakers.values())
            and not state.secrets_to_scrub
            and not state.attention_unstored
            and not any(busy(ws) for busy in self._busy)
        )
