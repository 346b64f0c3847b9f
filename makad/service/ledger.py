"""Sessions and their ledger over RPC: open/list/close/delete, append, read, search,
retrieve, working state and manifests.

Where a session lives (SQLite or memory) and what incognito forbids is decided by
``Sessions``; this service validates, redacts and shapes the wire results.
``enabled=false`` does not stop the ledger: that switch is about MEMORY.md, while
the ledger is the session's own history (build_context and compaction need it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import msgspec

from makad.core.cjk import query_head
from makad.core.peer import Peer
from makad.core.redaction import redact, redact_joined
from makad.core.refs import check_ref_count, event_ref
from makad.core.session_titles import check_session_title, stored_title
from makad.core.types import EventInput, Manifest, SessionInfo, WorkingState
from makad.core.working_state import check_item_lengths
from makad.errors import TooLarge
from makad.service.common import WorkspaceAccess, handlers_of, in_thread
from makad.service.reply_fit import (
    MAX_EVENT_BYTES,
    hits_within_read_bytes,
    results_within_read_bytes,
    surely_within_read_bytes,
    within_read_bytes,
)
from makad.service.session_notes import SessionNotesKeeper
from makad.service.sessions import Sessions
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.ledger import (
    AppendEventsParams,
    AppendEventsResult,
    DeleteSessionResult,
    GetManifestParams,
    HistoryHit,
    ListSessionsParams,
    OpenSessionParams,
    ReadEventsParams,
    ReadEventsResult,
    RetrieveParams,
    RetrieveResult,
    SearchHistoryParams,
    SearchHistoryResult,
    SessionParams,
    SessionsResult,
    SessionView,
    SetWorkingStateParams,
    SetWorkingStateResult,
)

# Redacting a few KB takes well under 100 µs: less than the hop to a worker thread.
INLINE_REDACTION_CHARS = 4_096
_event_encoder = msgspec.json.Encoder()


def check_event_sizes(events: Sequence[EventInput], stage: str) -> None:
    """``TooLarge`` naming the first event over ``MAX_EVENT_BYTES`` as JSON."""
    for index, event in enumerate(events):
        size = len(_event_encoder.encode(event))
        if size > MAX_EVENT_BYTES:
            raise TooLarge(
                f"event {index} is over {MAX_EVENT_BYTES} bytes as JSON{stage}",
                index=index,
                limit=MAX_EVENT_BYTES,
                actual=size,
            )


def redact_checked(events: Sequence[EventInput], scrub: Callable[[str], str]) -> tuple[list[EventInput], int]:
    """``redact_events``, then ``check_event_sizes`` on what would be stored."""
    redacted, count = redact_events(events, scrub)
    check_event_sizes(redacted, " once its secrets are redacted")
    return redacted, count


def redact_events(events: Sequence[EventInput], scrub: Callable[[str], str]) -> tuple[list[EventInput], int]:
    """The events with secrets replaced in their text (read as one stream, so a secret
    split across two events is caught), meta and tool name, and how many; tool call ids
    go through ``scrub`` (an identifier's stand-in keeps calls paired with results)."""
    texts, count = redact_joined([event.text for event in events])
    out: list[EventInput] = []
    for event, text in zip(events, texts, strict=True):
        meta = None
        if event.meta is not None:
            meta = {}
            for key, value in event.meta.items():
                clean_key, clean_value = redact(key), redact(value)
                count += clean_key.count + clean_value.count
                meta[clean_key.text] = clean_value.text
        tool = None
        if event.tool_name is not None:
            cleaned = redact(event.tool_name)
            count += cleaned.count
            tool = cleaned.text
        call_id = None if event.tool_call_id is None else scrub(event.tool_call_id)
        count += call_id != event.tool_call_id
        out.append(
            EventInput(
                type=event.type,
                text=text.text,
                ts=event.ts,
                tool_call_id=call_id,
                tool_name=tool,
                meta=meta,
                tokens=event.tokens,
            )
        )
    return out, count


def redact_texts(texts: list[str] | None) -> tuple[list[str] | None, int]:
    if texts is None:
        return None, 0
    cleaned = [redact(text) for text in texts]
    return [c.text for c in cleaned], sum(c.count for c in cleaned)


def redact_notes(notes: dict[str, str] | None) -> tuple[dict[str, str] | None, int]:
    if notes is None:
        return None, 0
    cleaned = {section: redact(text) for section, text in notes.items()}
    return {s: c.text for s, c in cleaned.items()}, sum(c.count for c in cleaned.values())


def session_view(info: SessionInfo, incognito: bool) -> SessionView:
    return SessionView(**msgspec.structs.asdict(info), incognito=incognito)


class LedgerService:
    def __init__(
        self,
        ctx: WorkspaceAccess,
        sessions: Sessions,
        notes: SessionNotesKeeper | None = None,
        *,
        on_close: Callable[[Workspace, str], Awaitable[None]] | None = None,
        on_delete: Callable[[Workspace, str], Awaitable[None]] | None = None,
    ) -> None:
        self._ctx = ctx
        self._sessions = sessions
        self._notes = notes
        # What follows a close (the session's episode: makad.service.episodes).
        self._on_close = on_close
        # What follows a forget (the attention state derived without it: makad.service.attention).
        self._on_delete = on_delete

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(
            self,
            "open_session list_sessions close_session delete_session append_events read_events"
            " search_history retrieve get_working_state set_working_state get_manifest",
        )

    # --- sessions -------------------------------------------------------------------

    async def open_session(self, params: OpenSessionParams, peer: Peer) -> SessionView:
        ws = await self._ctx.session_workspace(params.workspace)
        check_session_title(params.title)
        title = None if params.title is None else stored_title((await in_thread(redact, params.title)).text)
        info, incognito = await self._sessions.open(
            ws, params.session_id, title=title, incognito=params.incognito
        )
        return session_view(info, incognito)

    async def list_sessions(self, params: ListSessionsParams, peer: Peer) -> SessionsResult:
        ws = await self._ctx.session_workspace(params.workspace)
        found = await self._sessions.list_sessions(ws, include_closed=params.include_closed)
        return SessionsResult(sessions=[session_view(info, inc) for info, inc in found])

    async def close_session(self, params: SessionParams, peer: Peer) -> SessionView:
        ws = await self._ctx.session_workspace(params.workspace)
        info = await self._sessions.close(ws, params.session_id)
        if self._on_close is not None:
            await self._on_close(ws, params.session_id)
        return session_view(info, self._sessions.is_incognito(ws, params.session_id))

    async def delete_session(self, params: SessionParams, peer: Peer) -> DeleteSessionResult:
        ws = await self._ctx.session_workspace(params.workspace)
        gone = await self._sessions.delete(ws, params.session_id)
        if self._on_delete is not None:
            await self._on_delete(ws, params.session_id)
        return DeleteSessionResult(
            session_id=gone.session_id,
            deleted_at=gone.deleted_at,
            event_count=gone.event_count,
            incognito=gone.incognito,
        )

    # --- events ---------------------------------------------------------------------

    async def append_events(self, params: AppendEventsParams, peer: Peer) -> AppendEventsResult:
        ws = await self._ctx.session_workspace(params.workspace)
        size = sum(len(e.text) + sum(map(len, (e.meta or {}).values())) for e in params.events)
        scrub = self._ctx.identifiers.scrub
        if size <= INLINE_REDACTION_CHARS:
            events, redactions = redact_checked(params.events, scrub)
        else:
            # As sent first: the redactor never reads through an event that cannot be kept.
            await in_thread(check_event_sizes, params.events, "")
            events, redactions = await in_thread(redact_checked, params.events, scrub)
        result = await self._sessions.append(
            ws,
            params.session_id,
            events,
            expected_seq=params.expected_seq,
            request_id=params.request_id,
            redactions=redactions,
        )
        if self._notes is not None:
            self._notes.appended(ws, params.session_id, events)
        if not self._sessions.is_incognito(ws, params.session_id):  # incognito: never in the ledger
            self._ctx.semantic.appended(ws, params.session_id, result.first_seq, result.last_seq)
        return AppendEventsResult(
            first_seq=result.first_seq, last_seq=result.last_seq, redactions=result.redactions
        )

    async def read_events(self, params: ReadEventsParams, peer: Peer) -> ReadEventsResult:
        ws = await self._ctx.session_workspace(params.workspace)
        events = await self._sessions.read_checked_events(
            ws, params.session_id, after_seq=params.after_seq, limit=params.limit
        )
        if not surely_within_read_bytes(events):
            events = await in_thread(within_read_bytes, events)
        info = await self._sessions.info(ws, params.session_id)
        last_read = events[-1].seq if events else params.after_seq
        return ReadEventsResult(events=events, last_seq=info.last_seq, has_more=last_read < info.last_seq)

    async def search_history(self, params: SearchHistoryParams, peer: Peer) -> SearchHistoryResult:
        ws = await self._ctx.session_workspace(params.workspace)
        hits = await self._sessions.search(
            ws,
            query_head(params.query),
            session_id=params.session_id,
            limit=params.limit,
            before=params.before,
            after=params.after,
        )
        shown = [
            HistoryHit(ref=event_ref(hit.event.session_id, hit.event.seq), score=hit.score, event=hit.event)
            for hit in hits
        ]
        if surely_within_read_bytes([hit.event for hit in hits]):
            return SearchHistoryResult(hits=shown)
        shown, omitted = await in_thread(hits_within_read_bytes, shown)
        return SearchHistoryResult(hits=shown, omitted=omitted)

    async def retrieve(self, params: RetrieveParams, peer: Peer) -> RetrieveResult:
        check_ref_count(params.refs)
        ws = await self._ctx.session_workspace(params.workspace)
        refs = await in_thread(self._ctx.identifiers.scrub_refs, params.refs)
        results = await self._sessions.retrieve(ws, refs, asking=params.session_id)
        if surely_within_read_bytes([event for result in results for event in result.events]):
            return RetrieveResult(results=results)
        results, omitted = await in_thread(results_within_read_bytes, results, params.refs)
        return RetrieveResult(results=results, omitted=omitted)

    # --- working state and manifests ----------------------------------------------------

    async def get_working_state(self, params: SessionParams, peer: Peer) -> WorkingState:
        ws = await self._ctx.session_workspace(params.workspace)
        return await self._sessions.working_state(ws, params.session_id)

    async def set_working_state(self, params: SetWorkingStateParams, peer: Peer) -> SetWorkingStateResult:
        ws = await self._ctx.session_workspace(params.workspace)
        check_item_lengths(
            {"goals": params.goals, "openThreads": params.open_threads, "decisions": params.decisions},
            params.notes,
        )
        # Off the event loop: a note can be megabytes the redactor reads through.
        (goals, n_goals), (threads, n_threads), (decisions, n_decisions), (notes, n_notes) = await in_thread(
            lambda: (
                redact_texts(params.goals),
                redact_texts(params.open_threads),
                redact_texts(params.decisions),
                redact_notes(params.notes),
            )
        )
        state = await self._sessions.set_working_state(
            ws,
            params.session_id,
            goals=goals,
            open_threads=threads,
            decisions=decisions,
            notes=notes,
            expected_revision=params.expected_revision,
            request_id=params.request_id,
        )
        return SetWorkingStateResult(
            goals=state.goals,
            open_threads=state.open_threads,
            decisions=state.decisions,
            notes=state.notes,
            revision=state.revision,
            redactions=n_goals + n_threads + n_decisions + n_notes,
        )

    async def get_manifest(self, params: GetManifestParams, peer: Peer) -> Manifest:
        ws = await self._ctx.session_workspace(params.workspace)
        return await self._sessions.manifest(ws, params.session_id, params.call_id)
