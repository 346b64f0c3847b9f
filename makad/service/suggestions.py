"""Proactive suggestions (``suggest``) and their dismissal (``dismiss_suggestion``).

``suggest`` reads what the attention keeper stored — the attention state (cached on
``ws.state``) and the behavior records it was derived from (cached with it, dropped with
it) — and the dismissals, then scores them (``makad.core.suggestions``): the state is
never derived on the request path. With a ``sessionId``, the asking session's latest
``CURRENT_EVENTS`` events and its working state are read and gathered (pure, bounded)
into records of their own, so what the session is already on — its paths, its thread —
is not suggested back to it. While the state has not been derived yet the reply is empty
(``silenced: not_derived``) and the keeper is asked to derive it.

A ``sessionId`` the workspace does not hold is ``not_found``, as ``build_context`` answers.
Nothing is suggested with ``attentionEnabled`` off, agent reads off, or the workspace or
the asking session incognito. A user's save of MEMORY.md or PENDING.md the watcher has not
taken in yet is taken in first (as ``get_attention`` does). A dismissal is kept in the
workspace ledger (``makad.store.suggestion_store``) for ``forMs`` (default
``MAKAD_SUGGESTION_COOLDOWN_MS``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from makad.core import behaviors
from makad.core import suggestions as core
from makad.core.attention import AttentionState
from makad.core.behaviors import Behavior
from makad.core.peer import Peer
from makad.core.switches import agent_reads
from makad.core.types import Settings
from makad.errors import IncognitoBlocked, InvalidParams, NotFound
from makad.service.attention import TakeIn, cached_state
from makad.service.common import WorkspaceAccess, handlers_of, in_thread, now_ms
from makad.service.sessions import Sessions
from makad.settings import DEFAULT_SUGGESTION_COOLDOWN_MS
from makad.store import attention_store, suggestion_store
from makad.store.ledger import Ledger
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.context import (
    MAX_DISMISS_MS,
    DismissSuggestionParams,
    DismissSuggestionResult,
    SilencedReason,
    SuggestParams,
    SuggestResult,
)

# How many of the asking session's latest events say what it is doing.
CURRENT_EVENTS = 200


def silenced_by(settings: Settings, *, incognito_session: bool) -> SilencedReason | None:
    """Why nothing may be suggested, if anything forbids it."""
    if not settings.attention_enabled:
        return "attention_off"
    if settings.incognito:
        return "incognito"
    if incognito_session:
        return "session_incognito"
    if not agent_reads(settings):
        return "agent_reads_off"
    return None


class SuggestionService:
    def __init__(
        self,
        ctx: WorkspaceAccess,
        sessions: Sessions,
        take_in: TakeIn,
        cooldown_ms: int = DEFAULT_SUGGESTION_COOLDOWN_MS,
        caught_up: Callable[[Workspace], Awaitable[None]] | None = None,
    ) -> None:
        self._ctx = ctx
        self._take_in = take_in
        self._caught_up = caught_up
        self._sessions = sessions
        self._cooldown_ms = min(max(cooldown_ms, 0), MAX_DISMISS_MS)

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "suggest dismiss_suggestion")

    async def suggest(self, params: SuggestParams, peer: Peer) -> SuggestResult:
        ws = await self._ctx.session_workspace(params.workspace)
        settings = await self._ctx.load_settings(ws)
        sid = params.session_id
        if sid is not None:
            await self._sessions.require(ws, sid)
        incognito_session = sid is not None and self._sessions.is_incognito(ws, sid)
        silenced = silenced_by(settings, incognito_session=incognito_session)
        if silenced is not None:
            return self._empty(enabled=False, silenced=silenced)
        await self._take_in(ws)  # a save the watcher has not taken in yet: as it stands now
        if self._caught_up is not None:
            await self._caught_up(ws)  # a session closed just before: its records and state
        now = now_ms()
        state, records, dismissed = await in_thread(_inputs, ws, now, sid)
        if state is None:
            self._ctx.changed(ws)  # the keeper derives it, off this path
            return self._empty(enabled=True, silenced="not_derived")
        found = core.candidates(now, state, records, session_id=sid)
        return SuggestResult(
            enabled=True,
            suggestions=core.pick(now, found, dismissed),
            threshold=core.THRESHOLD,
            cooldown_ms=self._cooldown_ms,
            computed_at=state.computed_at,
            candidates=core.explained(now, found, dismissed) if params.explain else None,
        )

    def _empty(self, *, enabled: bool, silenced: SilencedReason) -> SuggestResult:
        return SuggestResult(
            enabled=enabled,
            suggestions=[],
            threshold=core.THRESHOLD,
            cooldown_ms=self._cooldown_ms,
            silenced=silenced,
        )

    async def dismiss_suggestion(
        self, params: DismissSuggestionParams, peer: Peer
    ) -> DismissSuggestionResult:
        if not core.valid_id(params.id):
            raise InvalidParams("id must be a suggestion's id: sg_ and 16 hex digits", path="$.id")
        for_ms = self._cooldown_ms if params.for_ms is None else params.for_ms
        if not 0 <= for_ms <= MAX_DISMISS_MS:
            raise InvalidParams(f"forMs must be between 0 and {MAX_DISMISS_MS}", path="$.forMs")
        ws = await self._ctx.session_workspace(params.workspace)
        settings = await self._ctx.load_settings(ws)
        if settings.incognito:
            raise IncognitoBlocked("incognito is on: nothing is written")
        now = now_ms()
        until = now + for_ms
        await in_thread(suggestion_store.dismiss, ws.ledger, params.id, until, now)
        return DismissSuggestionResult(id=params.id, until=until)


def _inputs(
    ws: Workspace, now: int, session_id: str | None
) -> tuple[AttentionState | None, list[Behavior], dict[str, int]]:
    """(worker thread) The stored attention state, the records it was derived from (cached
    with it) and those of the asking session's latest events, and the dismissals still
    standing."""
    epoch = ws.state.attention_epoch
    state = cached_state(ws)
    dismissed = suggestion_store.dismissed(ws.ledger, now)
    if state is None:
        return None, [], dismissed
    cached = ws.state.suggestion_records
    if cached is not None and cached[0] >= state.records_upto:
        records = cached[1]
    else:
        records, upto = attention_store.records(ws.ledger)
        if ws.state.attention_epoch == epoch:  # else a forget came meanwhile: not kept
            ws.state.suggestion_records = (upto, records)
    if session_id is not None:
        records = [*records, *_latest(ws.ledger, session_id)]
    return state, records, dismissed


def _latest(ledger: Ledger, session_id: str) -> list[Behavior]:
    """(worker thread) Records of the session's latest ``CURRENT_EVENTS`` events and its
    working state: what it is doing now (none for a session the ledger does not hold)."""
    try:
        info = ledger.get_session(session_id)
    except NotFound:
        return []
    events = ledger.read_events(
        session_id, after_seq=max(info.last_seq - CURRENT_EVENTS, 0), limit=CURRENT_EVENTS
    )
    working = ledger.get_working_state(session_id)
    closed, carry = behaviors.gather(session_id, behaviors.Carry(), events)
    out = [r for c in closed for r in behaviors.records(session_id, c, closed=False, working=None)]
    if not carry.empty():
        out.extend(behaviors.records(session_id, carry, closed=False, working=working))
    return out
