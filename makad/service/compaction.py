"""compact: checkpoint a session without deleting anything.

A checkpoint is written in one SQLite transaction, so a crash leaves the old
checkpoint in force or the new one, never half. Validation fails closed: an
invalid summary changes nothing. The circuit breaker stops automatic
(``budget``/``overflow``) retries after 3 consecutive failures of a session.
"""

from __future__ import annotations

import secrets

import structlog

from makad.core import compaction as plan_core
from makad.core.peer import Peer
from makad.core.redaction import redact
from makad.core.tokens import estimate_tokens
from makad.core.types import Checkpoint, Coverage
from makad.errors import InvalidParams, MakadError, NotFound
from makad.service.common import Request, WorkspaceAccess, handlers_of, in_thread, now_ms
from makad.service.sessions import Sessions
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.compaction import (
    CheckpointsResult,
    CompactParams,
    GetCheckpointParams,
    ListCheckpointsParams,
)

log = structlog.get_logger("makad.compaction")
AUTOMATIC = ("budget", "overflow")


class CompactionService:
    def __init__(self, ctx: WorkspaceAccess, sessions: Sessions) -> None:
        self._ctx = ctx
        self._sessions = sessions

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "compact list_checkpoints get_checkpoint")

    def _breaker(self, ws: Workspace, sid: str) -> plan_core.BreakerState:
        state = ws.state.breakers.get(sid)
        return state if state is not None else plan_core.BreakerState()

    def _set_breaker(self, ws: Workspace, sid: str, state: plan_core.BreakerState) -> None:
        ws.state.breakers[sid] = state

    async def compact(self, params: CompactParams, peer: Peer) -> Checkpoint:
        ws = await self._ctx.session_workspace(params.workspace)
        sid = params.session_id
        await self._sessions.require(ws, sid)

        async def run(request: Request) -> Checkpoint:
            if params.reason in AUTOMATIC:
                plan_core.ensure_closed(self._breaker(ws, sid), sid)
            try:
                async with ws.lock:
                    checkpoint = await self._compact(ws, params, request)
            except MakadError:
                self._set_breaker(ws, sid, plan_core.record_failure(self._breaker(ws, sid)))
                raise
            self._set_breaker(ws, sid, plan_core.record_success(self._breaker(ws, sid)))
            return checkpoint

        return await self._ctx.idempotent(ws, params.request_id, "compact", Checkpoint, run)

    async def _compact(self, ws: Workspace, params: CompactParams, request: Request) -> Checkpoint:
        sid = params.session_id
        previous = await self._sessions.latest_checkpoint(ws, sid)
        floor = previous.coverage.to_seq if previous else 0
        events = await self._sessions.read_checked_events(ws, sid, after_seq=floor)
        plan = plan_core.plan_keep_window(
            events, params.keep_recent_tokens, params.reason, previous_boundary_seq=floor
        )
        if plan is None:
            why = plan_core.nothing_to_compact(
                events, params.keep_recent_tokens, params.reason, previous_boundary_seq=floor
            )
            # The session is what falls short unless the caller chose the window.
            given = params.keep_recent_tokens is not None
            raise InvalidParams(
                why.message,
                path="$.keepRecentTokens" if given else "$.sessionId",
                reason="nothing_to_compact",
                liveTokens=why.live_tokens,
                keptTokens=why.kept_tokens,
            )
        covered = [e for e in events if plan.covered_from_seq <= e.seq <= plan.covered_to_seq]
        if params.mode == "semantic":
            if params.summary is None:
                raise InvalidParams("semantic compaction needs a summary", path="$.summary")
            summary = await in_thread(
                plan_core.validate_summary, params.summary, find_secrets=lambda t: redact(t).count
            )
        else:
            if params.summary is not None:
                raise InvalidParams("checkpoint compaction builds its own summary", path="$.summary")
            state = await self._sessions.working_state(ws, sid)
            # An event altered on disk (verified false) must not reach the agent via a summary.
            summary = plan_core.checkpoint_summary(
                [e for e in covered if e.verified], state, previous.summary if previous else None
            )
            summary = (await in_thread(redact, summary)).text
        checkpoint = Checkpoint(
            checkpoint_id=secrets.token_hex(12),
            session_id=sid,
            boundary_seq=plan.boundary_seq,
            coverage=Coverage(from_seq=plan.covered_from_seq, to_seq=plan.covered_to_seq),
            covered_hash=plan_core.covered_hash(covered),
            summary=summary,
            summary_tokens=estimate_tokens(summary),
            preserved_from_seq=plan.preserved_from_seq,
            mode=params.mode,
            reason=params.reason,
            created_at=now_ms(),
        )
        self._ctx.faults.crash("compact_before_commit")
        incognito = self._sessions.is_incognito(ws, sid)
        if incognito:
            request.forgo()  # nothing of an incognito session is recorded
        await self._sessions.add_checkpoint(ws, checkpoint, None if incognito else request.record(checkpoint))
        self._ctx.faults.crash("compact_after_commit")
        log.info(
            "compacted",
            mode=params.mode,
            reason=params.reason,
            covered=plan.covered_to_seq - plan.covered_from_seq + 1,
        )
        return checkpoint

    async def list_checkpoints(self, params: ListCheckpointsParams, peer: Peer) -> CheckpointsResult:
        ws = await self._ctx.session_workspace(params.workspace)
        await self._sessions.require(ws, params.session_id)
        return CheckpointsResult(checkpoints=await self._sessions.list_checkpoints(ws, params.session_id))

    async def get_checkpoint(self, params: GetCheckpointParams, peer: Peer) -> Checkpoint:
        ws = await self._ctx.session_workspace(params.workspace)
        try:
            return await self._sessions.get_checkpoint(ws, params.checkpoint_id)
        except NotFound:
            raise NotFound("no checkpoint with that id", checkpointId=params.checkpoint_id) from None
