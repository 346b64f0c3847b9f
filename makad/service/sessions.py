"""Where a session's events live: the workspace ledger, or memory only when incognito.

Every service that reads sessions (ledger methods, build_context, compact,
episodes) goes through ``Sessions`` so an incognito session is never looked up
in, or written to, SQLite by mistake.
"""

from __future__ import annotations

from makad.core.types import Checkpoint, Event, WorkingState
from makad.errors import NotFound
from makad.service.common import Context, in_thread
from makad.store.ephemeral import EphemeralSessions
from makad.store.workspaces import Workspace


class Sessions:
    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def ephemeral(self, ws: Workspace) -> EphemeralSessions:
        """This workspace's in-memory sessions (gone on restart, by design)."""
        store = ws.extra.get("ephemeral")
        if not isinstance(store, EphemeralSessions):
            store = EphemeralSessions()
            ws.extra["ephemeral"] = store
        return store

    def is_incognito(self, ws: Workspace, session_id: str) -> bool:
        return session_id in self._ctx.incognito_sessions(ws)

    async def exists(self, ws: Workspace, session_id: str) -> bool:
        if self.is_incognito(ws, session_id):
            return self.ephemeral(ws).has_session(session_id)
        try:
            await in_thread(ws.ledger.get_session, session_id)
        except NotFound:
            return False
        return True

    async def require(self, ws: Workspace, session_id: str) -> None:
        if not await self.exists(ws, session_id):
            raise NotFound("no session with that id", sessionId=session_id)

    async def read_events(self, ws: Workspace, session_id: str, *, after_seq: int = 0,
                          limit: int | None = None) -> list[Event]:
        if self.is_incognito(ws, session_id):
            return self.ephemeral(ws).read_events(session_id, after_seq=after_seq, limit=limit)
        return await in_thread(ws.ledger.read_events, session_id, after_seq=after_seq,
                               limit=limit)

    async def working_state(self, ws: Workspace, session_id: str) -> WorkingState:
        if self.is_incognito(ws, session_id):
            states = ws.extra.setdefault("ephemeral_working_state", {})
            state = states.get(session_id)
            return state if isinstance(state, WorkingState) else WorkingState()
        return await in_thread(ws.ledger.get_working_state, session_id)

    async def latest_checkpoint(self, ws: Workspace, session_id: str) -> Checkpoint | None:
        if self.is_incognito(ws, session_id):
            checkpoints = ws.extra.setdefault("ephemeral_checkpoints", {})
            found = checkpoints.get(session_id)
            return found if isinstance(found, Checkpoint) else None
        return await in_thread(ws.ledger.latest_checkpoint, session_id)
