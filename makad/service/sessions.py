"""Where a session's events live: the workspace ledger, or memory only when incognito.

Every service that reads or writes sessions (ledger methods, build_context,
compact, episodes) goes through ``Sessions`` so an incognito session is never
looked up in, or written to, SQLite by mistake.

The rules it enforces for every caller:

- An incognito session (``WorkspaceAccess.incognito_sessions``) lives in
  ``EphemeralSessions``: events, working state, checkpoint, request ids — memory
  only. ``store`` hands out the session's store; both keep one contract
  (``makad.store.session_store.SessionStore``), so the methods below call it
  without asking which it is.
- While the workspace setting ``incognito`` is on, new sessions are incognito
  and persistent sessions are not written (``IncognitoBlocked``); they can
  still be read, and deleted.
- Session ids are unique across both stores: a session keeps the kind it was
  created with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, Unpack
from weakref import WeakKeyDictionary

import anyio
import structlog

from makad.core.chain import verify_span
from makad.core.refs import parse_event_refs
from makad.core.types import (
    AppendResult,
    Checkpoint,
    Event,
    EventInput,
    Manifest,
    RefResult,
    SearchHit,
    SessionInfo,
    WorkingState,
)
from makad.core.working_state import WorkingStateChange
from makad.errors import Conflict, IncognitoBlocked, NotFound
from makad.service.append_queue import AppendQueue
from makad.service.common import WorkspaceAccess, in_thread, now_ms
from makad.store.ephemeral import EphemeralSessions
from makad.store.ledger import Ledger
from makad.store.ledger.records import RequestRecord
from makad.store.ledger.sessions import AppendCall
from makad.store.session_store import SessionStore
from makad.store.workspaces import Workspace

T = TypeVar("T")
log = structlog.get_logger("makad.sessions")


@dataclass(frozen=True)
class Forgotten:
    """What ``delete`` removed."""

    session_id: str
    deleted_at: int
    event_count: int
    incognito: bool


class Sessions:
    def __init__(self, ctx: WorkspaceAccess) -> None:
        self._ctx = ctx
        # Each ledger's appends gather here before its worker thread (makad.service.append_queue).
        self._append_queues: WeakKeyDictionary[Ledger, AppendQueue] = WeakKeyDictionary()

    async def rename_secret_ids(self, ws: Workspace) -> None:
        """Run once per workspace before its first use: sessions stored (by a makad that did
        not screen session ids) under an id holding a secret take the id's stand-in, the one
        every call naming them now uses (``makad.store.ledger.renames``). Once done, a read."""
        renamed, left = await in_thread(ws.ledger.rename_secret_session_ids, self._ctx.identifiers.scrub)
        if renamed or left:
            log.info("secret_session_ids_renamed", workspace_id=ws.id, renamed=renamed, left=left)

    def ephemeral(self, ws: Workspace) -> EphemeralSessions:
        """This workspace's in-memory sessions (gone on restart, by design)."""
        return ws.state.ephemeral

    def is_incognito(self, ws: Workspace, session_id: str) -> bool:
        return session_id in self._ctx.incognito_sessions(ws)

    def store(self, ws: Workspace, session_id: str) -> SessionStore:
        """The store that holds the session: memory for an incognito one, else the ledger."""
        return self.ephemeral(ws) if self.is_incognito(ws, session_id) else ws.ledger

    @staticmethod
    async def _call(store: SessionStore, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn`` of ``store``: in a worker thread when it blocks (the ledger), else here."""
        if store.in_memory:
            return fn(*args, **kwargs)
        return await in_thread(fn, *args, **kwargs)

    async def exists(self, ws: Workspace, session_id: str) -> bool:
        try:
            await self.info(ws, session_id)
        except NotFound:
            return False
        return True

    async def require(self, ws: Workspace, session_id: str) -> None:
        if not await self.exists(ws, session_id):
            raise NotFound("no session with that id", sessionId=session_id)

    async def read_events(
        self, ws: Workspace, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        store = self.store(ws, session_id)
        return await self._call(store, store.read_events, session_id, after_seq=after_seq, limit=limit)

    async def read_checked_events(
        self, ws: Workspace, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[Event]:
        """``read_events`` with each stored event checked against the hash chain
        (``verified: false`` when it does not chain); memory-only events cannot be altered."""
        if self.is_incognito(ws, session_id):
            return await self.read_events(ws, session_id, after_seq=after_seq, limit=limit)

        def read() -> list[Event]:
            events = ws.ledger.read_events(session_id, after_seq=after_seq, limit=limit)
            ws.ledger.mark_unverified(events)
            return events

        return await in_thread(read)

    async def working_state(self, ws: Workspace, session_id: str) -> WorkingState:
        store = self.store(ws, session_id)
        return await self._call(store, store.get_working_state, session_id)

    async def latest_checkpoint(self, ws: Workspace, session_id: str) -> Checkpoint | None:
        store = self.store(ws, session_id)
        return await self._call(store, store.latest_checkpoint, session_id)

    async def list_checkpoints(self, ws: Workspace, session_id: str) -> list[Checkpoint]:
        store = self.store(ws, session_id)
        return await self._call(store, store.list_checkpoints, session_id)

    async def add_checkpoint(
        self, ws: Workspace, checkpoint: Checkpoint, request: RequestRecord | None
    ) -> Checkpoint:
        store = self.store(ws, checkpoint.session_id)
        return await self._call(store, store.add_checkpoint, checkpoint, request=request)

    async def get_checkpoint(self, ws: Workspace, checkpoint_id: str) -> Checkpoint:
        """A checkpoint by id: an incognito session's, else the ledger's."""
        found = self.ephemeral(ws).find_checkpoint(checkpoint_id)
        if found is not None:
            return found
        return await in_thread(ws.ledger.get_checkpoint, checkpoint_id)

    # --- sessions -------------------------------------------------------------------

    async def info(self, ws: Workspace, session_id: str) -> SessionInfo:
        store = self.store(ws, session_id)
        return await self._call(store, store.get_session, session_id)

    async def open(
        self, ws: Workspace, session_id: str | None, *, title: str | None, incognito: bool | None
    ) -> tuple[SessionInfo, bool]:
        """Create or reopen a session; ``incognito=None`` follows the workspace setting
        for a new session and the session's own kind for an existing one."""
        workspace_incognito = (await self._ctx.load_settings(ws)).incognito
        async with self._open_lock(ws):
            existing_incognito = session_id is not None and self.is_incognito(ws, session_id)
            existing = existing_incognito or (session_id is not None and await self.exists(ws, session_id))
            if existing:
                if incognito is not None and incognito != existing_incognito:
                    raise Conflict(
                        "the session exists with the other kind",
                        sessionId=session_id,
                        incognito=existing_incognito,
                    )
                make_incognito = existing_incognito
            else:
                make_incognito = workspace_incognito if incognito is None else incognito
            if make_incognito:
                info = self.ephemeral(ws).open_session(session_id, title=title)
                self._ctx.incognito_sessions(ws).add(info.session_id)
                return info, True
            if workspace_incognito:
                raise IncognitoBlocked("incognito is on: persistent sessions are not written")
            return await in_thread(ws.ledger.open_session, session_id, title=title), False

    async def list_sessions(
        self, ws: Workspace, *, include_closed: bool = True
    ) -> list[tuple[SessionInfo, bool]]:
        """Every session with whether it is incognito, newest first."""
        stored = await in_thread(ws.ledger.list_sessions, include_closed=include_closed)
        kept = self.ephemeral(ws).list_sessions(include_closed=include_closed)
        both = [(i, False) for i in stored] + [(i, True) for i in kept]
        return sorted(both, key=lambda pair: (pair[0].created_at, pair[0].session_id), reverse=True)

    async def close(self, ws: Workspace, session_id: str) -> SessionInfo:
        store = await self._writable(ws, session_id)
        return await self._call(store, store.close_session, session_id)

    async def delete(self, ws: Workspace, session_id: str) -> Forgotten:
        """The user's explicit forget, allowed in every mode (it only removes)."""
        if self.is_incognito(ws, session_id):
            count = self.ephemeral(ws).delete_session(session_id)
            self._ctx.incognito_sessions(ws).discard(session_id)
            return Forgotten(session_id, now_ms(), count, True)
        tombstone = await in_thread(ws.ledger.delete_session, session_id)
        return Forgotten(session_id, tombstone.ts, tombstone.event_count, False)

    # --- events ---------------------------------------------------------------------

    async def append(
        self,
        ws: Workspace,
        session_id: str,
        events: Sequence[EventInput],
        *,
        expected_seq: int | None = None,
        request_id: str | None = None,
        redactions: int = 0,
    ) -> AppendResult:
        """Append events that are already redacted; ``redactions`` says how many secrets
        that took (kept with the result for retries)."""
        key = None if request_id is None else f"append_events:{request_id}"
        store = await self._writable(ws, session_id)
        if store.in_memory:
            return await in_thread(
                store.append_events,
                session_id,
                events,
                expected_seq=expected_seq,
                request_id=key,
                redactions=redactions,
            )
        # The ledger's appends share group commits (makad.service.append_queue).
        ledger = ws.ledger
        queue = self._append_queues.get(ledger)
        if queue is None:
            queue = self._append_queues[ledger] = AppendQueue()
        return await queue.append(ledger, AppendCall(session_id, events, expected_seq, key, redactions))

    async def search(
        self,
        ws: Workspace,
        query: str,
        *,
        session_id: str | None,
        limit: int,
        before: int | None,
        after: int | None,
    ) -> list[SearchHit]:
        """Incognito events are searched only when their own session is named (incognito
        sessions never reach SQLite, so the ledger alone is the rest)."""
        store = ws.ledger if session_id is None else self.store(ws, session_id)
        # A worker thread even for an incognito session: its search reads every event's
        # text afresh (no index is kept for it), seconds for a few megabytes of events.
        return await in_thread(
            store.search_history, query, session_id=session_id, limit=limit, before=before, after=after
        )

    async def retrieve(
        self, ws: Workspace, refs: Sequence[str], *, asking: str | None = None
    ) -> list[RefResult]:
        """Verified events for ``event:`` refs, in the order given. A ref into an
        incognito session resolves only when ``asking`` is that session."""
        spans = parse_event_refs(refs)
        incognito = self._ctx.incognito_sessions(ws)
        results: list[RefResult | None] = [None] * len(spans)
        stored = [i for i, span in enumerate(spans) if span[1] not in incognito]
        own = [i for i, span in enumerate(spans) if span[1] in incognito and span[1] == asking]
        for i, span in enumerate(spans):
            if span[1] in incognito and span[1] != asking:
                results[i] = verify_span(span, {}, None)  # reported missing, like no session
        if stored:
            found = await in_thread(ws.ledger.retrieve, [spans[i][0] for i in stored])
            for i, result in zip(stored, found, strict=True):
                results[i] = result
        if own:
            found = self.ephemeral(ws).retrieve([spans[i][0] for i in own])
            for i, result in zip(own, found, strict=True):
                results[i] = result
        return [r for r in results if r is not None]

    # --- working state and manifests ----------------------------------------------------

    async def set_working_state(
        self, ws: Workspace, session_id: str, **change: Unpack[WorkingStateChange]
    ) -> WorkingState:
        request_id = change.get("request_id")
        change["request_id"] = None if request_id is None else f"set_working_state:{request_id}"
        store = await self._writable(ws, session_id)
        return await self._call(store, store.set_working_state, session_id, **change)

    async def manifest(self, ws: Workspace, session_id: str, call_id: str | None) -> Manifest:
        """A recorded build_context manifest; incognito sessions record none."""
        store = self.store(ws, session_id)
        return await self._call(store, store.get_manifest, session_id, call_id)

    # --- plumbing ---------------------------------------------------------------------

    async def _writable(self, ws: Workspace, session_id: str) -> SessionStore:
        """The session's store, for a write: while the workspace is incognito a persistent
        session is not written."""
        store = self.store(ws, session_id)
        if not store.in_memory and (await self._ctx.load_settings(ws)).incognito:
            raise IncognitoBlocked(
                "incognito is on: persistent sessions are not written", sessionId=session_id
            )
        return store

    @staticmethod
    def _open_lock(ws: Workspace) -> anyio.Lock:
        return ws.state.sessions_lock
