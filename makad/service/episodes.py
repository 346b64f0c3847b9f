"""Episodes and the evidence gate: durable memory grows from repeated evidence.

An episode is a one-line, redacted summary of something that happened in a
session, with tags and ``event:`` refs to where it happened. Episodes come from
clients (``record_episode``) or, deterministically, from ``close_session``.

Evidence accounting is per tag: the episodes recorded after the tag's offset
(the last episode a consolidation of the tag cited), from sessions that still
exist. A profile proposal (``propose`` with ``consolidates``) passes the gate only
when every cited episode exists, carries the tag and is unconsolidated, and they
reach the threshold (5 episodes from 2 sessions by default). The offset
advances in one ledger transaction right after PENDING.md is written — never
when that write fails, so evidence is never lost. A rejected or deleted
consolidation keeps its episodes marked, so the same evidence never proposes
it again; deleting a session tombstones its episodes (in the ledger's delete).

The rules (the threshold, the digest, the episode ``close_session`` records
without any model) are pure: ``makad.core.episodes``.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from makad.core.attention import repeats_retracted
from makad.core.episodes import (
    CANDIDATE_EPISODES,
    CANDIDATES_WITH_EPISODES,
    MAX_EPISODE_REFS,
    Threshold,
    below_threshold,
    check_evidence,
    check_ref_count,
    clean_summary,
    close_summary,
    close_tags,
    digest,
    episode_refs,
    episode_tags,
    slug,
)
from makad.core.peer import Peer
from makad.core.redaction import redact
from makad.core.refs import episode_id_of, episode_ref, event_ref, new_session_id
from makad.core.types import ConsolidationState, EpisodeRecord, NewEpisode
from makad.errors import IncognitoBlocked, InvalidParams, MakadError
from makad.faults import Faults
from makad.service.common import WorkspaceAccess, handlers_of, in_thread, now_ms
from makad.service.proposals import ProposalDraft, ProposalService
from makad.service.sessions import Sessions
from makad.service.written_files import reports_memory_written
from makad.store import attention_store
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.episodes import (
    Candidate,
    CandidatesParams,
    CandidatesResult,
    ConsolidateParams,
    ListEpisodesParams,
    ListEpisodesResult,
    RecordEpisodeParams,
    RecordEpisodeResult,
)
from makad.wire.proposals import Consolidates, ProposeResult

log = structlog.get_logger("makad.episodes")


class Evidence:
    """The evidence gate of the approval gate (``service.proposals.EvidenceGate``): a
    consolidation checked against the ledger's episodes, its offset advanced once it is
    queued, settled when the user decides."""

    def __init__(self, faults: Faults, threshold: Threshold) -> None:
        self._faults = faults
        self.threshold = threshold

    async def check(self, ws: Workspace, consolidates: Consolidates) -> None:
        """InsufficientEvidence (nothing written) unless the cited episodes pass the gate."""
        tag = await in_thread(slug, consolidates.tag)  # slug redacts: off the event loop
        ids = list(dict.fromkeys(episode_id_of(i) for i in consolidates.episode_ids))
        found: dict[str, EpisodeRecord] = {}
        unconsolidated: set[str] = set()
        if tag and ids:
            listed = await in_thread(
                ws.ledger.list_episodes, episode_ids=ids, include_deleted=True, limit=len(ids)
            )
            found = {e.episode_id: e for e in listed}
            evidence = await in_thread(ws.ledger.evidence, tag)
            unconsolidated = {e.episode_id for e in evidence.get(tag, [])}
        check_evidence(tag, ids, found, unconsolidated, self.threshold)

    async def queued(self, ws: Workspace, consolidates: Consolidates, proposal_id: str) -> None:
        """Right after PENDING.md holds the proposal: link it and advance the tag's offset
        (one transaction). If that fails the offset stays: the evidence is reconsidered."""
        self._faults.crash("consolidation_before_offset")
        ids = list(dict.fromkeys(episode_id_of(i) for i in consolidates.episode_ids))
        try:
            await in_thread(ws.ledger.queue_consolidation, slug(consolidates.tag), proposal_id, ids)
        except MakadError as exc:
            log.warning("consolidation_not_recorded", workspace_id=ws.id, kind=exc.kind)

    async def settle(
        self, ws: Workspace, outcomes: Mapping[str, tuple[ConsolidationState, str | None]]
    ) -> None:
        """The user approved or rejected proposals: settle the consolidations among them."""
        if outcomes:
            await in_thread(ws.ledger.settle_consolidations, outcomes)


class EpisodeService:
    def __init__(
        self, ctx: WorkspaceAccess, sessions: Sessions, proposals: ProposalService, evidence: Evidence
    ) -> None:
        self._ctx = ctx
        self._sessions = sessions
        self._proposals = proposals
        self._threshold = evidence.threshold

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "record_episode list_episodes consolidation_candidates consolidate")

    # --- episodes ----------------------------------------------------------------------

    async def record_episode(self, params: RecordEpisodeParams, peer: Peer) -> RecordEpisodeResult:
        ws = await self._ctx.session_workspace(params.workspace)
        await self._check_not_incognito(ws, params.session_id)
        # Redacting the summary, the tags and the refs: off the event loop.
        (summary, redactions), tags = await in_thread(
            lambda: (clean_summary(params.summary), episode_tags(params.tags))
        )
        check_ref_count(params.source_refs)
        scrubbed = await in_thread(self._ctx.identifiers.scrub_refs, params.source_refs)
        source_refs = episode_refs(scrubbed, self._ctx.incognito_sessions(ws))
        now = now_ms()
        new = NewEpisode(
            episode_id=new_session_id(now),
            session_id=params.session_id,
            kind="client",
            summary=summary,
            tags=tags,
            source_refs=source_refs,
            at=now if params.at is None else params.at,
        )
        key = None if params.request_id is None else f"record_episode:{params.request_id}"
        added = await in_thread(ws.ledger.add_episode, new, request_id=key)
        return RecordEpisodeResult(
            episode_id=added.episode.episode_id,
            episode=added.episode.view(),
            recorded=added.created,
            redactions=redactions,
        )

    async def list_episodes(self, params: ListEpisodesParams, peer: Peer) -> ListEpisodesResult:
        ws = await self._ctx.session_workspace(params.workspace)
        found = await in_thread(
            ws.ledger.list_episodes,
            tag=None if params.tag is None else await in_thread(slug, params.tag),
            session_id=params.session_id,
            since=params.since,
            episode_ids=None if params.ids is None else [episode_id_of(i) for i in params.ids],
            include_deleted=params.include_deleted,
            limit=params.limit,
        )
        return ListEpisodesResult(episodes=[e.view() for e in found])

    async def record_close_episode(self, ws: Workspace, session_id: str) -> EpisodeRecord | None:
        """The deterministic episode of a closing session (see the module docstring)."""
        if self._sessions.is_incognito(ws, session_id):
            return None
        state = await self._sessions.working_state(ws, session_id)
        summary = close_summary(state)
        if summary is None:
            return None
        await self._proposals.take_in_saves(ws)  # a deletion by hand is known before it is checked
        retracted = await in_thread(attention_store.load_retracted, ws.ledger)
        if repeats_retracted(summary, retracted):  # the user took it back from memory
            return None
        seqs = await in_thread(ws.ledger.source_seqs, session_id, [*state.goals, *state.decisions])
        if not seqs:
            return None
        info = await self._sessions.info(ws, session_id)
        now = now_ms()
        new = NewEpisode(
            episode_id=new_session_id(now),
            session_id=session_id,
            kind="session_close",
            summary=redact(summary).text,
            tags=close_tags(state),
            source_refs=[event_ref(session_id, seq) for seq in seqs[:MAX_EPISODE_REFS]],
            at=info.closed_at or now,
        )
        return (await in_thread(ws.ledger.add_episode, new)).episode

    async def consolidation_candidates(self, params: CandidatesParams, peer: Peer) -> CandidatesResult:
        ws = await self._ctx.session_workspace(params.workspace)
        tag = None if params.tag is None else await in_thread(slug, params.tag)
        evidence = await in_thread(ws.ledger.evidence, tag)
        candidates = await in_thread(self._candidates, evidence, params.min_episodes, params.min_sessions)
        return CandidatesResult(
            candidates=candidates, min_episodes=params.min_episodes, min_sessions=params.min_sessions
        )

    def _candidates(
        self, evidence: dict[str, list[EpisodeRecord]], min_episodes: int, min_sessions: int
    ) -> list[Candidate]:
        """The tags with enough evidence, most first, each with its counts and (the first
        ``CANDIDATES_WITH_EPISODES``) its newest ``CANDIDATE_EPISODES`` episodes: all of
        them, once per tag each carries, are megabytes past the reply cap in a long history.
        Blocking: views and counts every episode."""
        found = []
        for name, episodes in evidence.items():
            sessions = len({e.session_id for e in episodes})
            if len(episodes) >= min_episodes and sessions >= min_sessions:
                found.append((name, episodes, sessions))
        found.sort(key=lambda f: (-len(f[1]), -f[2], f[0]))
        return [
            Candidate(
                tag=name,
                episode_count=len(episodes),
                session_count=sessions,
                eligible=self._threshold.met(len(episodes), sessions),
                episodes=[e.view() for e in episodes[-CANDIDATE_EPISODES:]]
                if rank < CANDIDATES_WITH_EPISODES
                else [],
            )
            for rank, (name, episodes, sessions) in enumerate(found)
        ]

    @reports_memory_written
    async def consolidate(self, params: ConsolidateParams, peer: Peer) -> ProposeResult:
        """The digest of a tag's evidence, queued as a profile proposal (through the gate)."""
        ws = await self._ctx.session_workspace(params.workspace)
        tag = await in_thread(slug, params.tag)
        if not tag:
            raise InvalidParams("a tag needs a letter or a digit", path="$.tag")
        episodes = (await in_thread(ws.ledger.evidence, tag)).get(tag, [])
        await self._proposals.take_in_saves(ws)  # a deletion by hand is known before it is checked
        retracted = await in_thread(attention_store.load_retracted, ws.ledger)
        # An episode saying what the user deleted or corrected from memory is no evidence.
        episodes = [e for e in episodes if not repeats_retracted(e.summary, retracted)]
        if not episodes:
            raise below_threshold(
                tag, 0, 0, self._threshold, "the tag has no evidence since its last consolidation"
            )
        title, content = digest(tag, episodes)
        ids = [e.episode_id for e in episodes]
        draft = ProposalDraft(
            title=title,
            content=content,
            tags=[tag],
            session_id=params.session_id,
            source_refs=[episode_ref(i) for i in ids],
            consolidates=Consolidates(tag=tag, episode_ids=ids),
        )
        request_id = None if params.request_id is None else f"consolidate:{params.request_id}"
        return await self._proposals.queue_proposal(ws, draft, request_id=request_id)

    async def session_closed(self, ws: Workspace, session_id: str) -> None:
        """After ``close_session``: its deterministic episode (a failure is logged; the
        close itself is committed, and closing again retries)."""
        try:
            await self.record_close_episode(ws, session_id)
        except MakadError as exc:
            log.warning("close_episode_failed", workspace_id=ws.id, kind=exc.kind)

    async def _check_not_incognito(self, ws: Workspace, session_id: str) -> None:
        if (await self._ctx.load_settings(ws)).incognito:
            raise IncognitoBlocked("incognito is on: nothing is written")
        if self._sessions.is_incognito(ws, session_id):
            raise IncognitoBlocked("the session is incognito: it records no episodes", sessionId=session_id)
