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

The episode ``close_session`` records, without any model:

- summary: ``Goals: g1; g2 — Decisions: d1; d2`` from the working state
  (nothing when both lists are empty), clipped to 200 characters;
- tags: the ``#hashtags`` in the decisions and goals; without any, their three
  most frequent words of 4+ letters outside a stop list (ties: first seen,
  decisions before goals);
- refs: for each goal and decision, the session's user message sharing the
  most words with it (BM25 over the session), else its last user message; a
  session without user messages records no episode.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from typing import Any

import msgspec
import structlog

from makad.core.redaction import redact
from makad.core.refs import episode_id_of, episode_ref, event_ref, new_session_id
from makad.core.types import Entry, EpisodeRecord, NewEpisode, WorkingState
from makad.errors import IncognitoBlocked, InsufficientEvidence, InvalidParams, MakadError, TooLarge
from makad.service.common import Context, Hooks, in_thread, now_ms
from makad.service.peer import Peer
from makad.service.proposals import ProposalService
from makad.service.sessions import Sessions
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.episodes import (
    MAX_EPISODE_REFS,
    MAX_EPISODE_TAGS,
    MAX_SUMMARY_CHARS,
    MIN_EPISODES,
    MIN_SESSIONS,
    Candidate,
    CandidatesParams,
    CandidatesResult,
    ConsolidateParams,
    ListEpisodesParams,
    ListEpisodesResult,
    RecordEpisodeParams,
    RecordEpisodeResult,
)
from makad.wire.proposals import Consolidates, ProposeParams, ProposeResult

log = structlog.get_logger("makad.episodes")

MAX_TAG_CHARS = 64
CLOSE_TAGS = 3
DIGEST_LINES = 50
_NOT_SLUG = re.compile(r"[\W_]+")
_HASHTAG = re.compile(r"(?<![\w#])#(\w[\w-]*)")
_WORD = re.compile(r"[^\W\d_][\w-]*")
_STOPWORDS = """
about above after again against also always because been before being below between both
cannot could decision decisions does doing done down during each every from further goal
goals have having here instead into itself just keep like made make makes more most must
need needs never next only other over please rather same session should some still such
than that their theirs them then there these they this those through under until very
want wants what when where which while will with would your yours using used uses work
"""
STOPWORDS = frozenset(_STOPWORDS.split())


# --- pure helpers ----------------------------------------------------------------------


def slug(tag: str) -> str:
    """A tag as a slug: case-folded, runs of anything but letters and digits as ``-``."""
    clean = redact(tag).text  # a secret pasted as a tag must not survive as a slug
    return _NOT_SLUG.sub("-", clean.casefold()).strip("-")[:MAX_TAG_CHARS].strip("-")


def episode_tags(tags: list[str]) -> list[str]:
    """Normalized, de-duplicated tags; one that normalizes to nothing is invalid."""
    out: list[str] = []
    for i, tag in enumerate(tags):
        normal = slug(tag)
        if not normal:
            raise InvalidParams("a tag needs a letter or a digit", path=f"$.tags[{i}]")
        if normal not in out:
            out.append(normal)
    if len(out) > MAX_EPISODE_TAGS:
        raise TooLarge(f"at most {MAX_EPISODE_TAGS} tags", limit=MAX_EPISODE_TAGS, count=len(out))
    return out


def clean_summary(summary: str) -> tuple[str, int]:
    """The summary, trimmed and redacted, with how many secrets that took."""
    text = summary.strip()
    if not text:
        raise InvalidParams("summary must not be empty", path="$.summary")
    if "\n" in text or "\r" in text:
        raise InvalidParams("summary must be one line", path="$.summary")
    if len(text) > MAX_SUMMARY_CHARS:
        raise TooLarge(
            f"summary is over {MAX_SUMMARY_CHARS} characters", limit=MAX_SUMMARY_CHARS, actual=len(text)
        )
    cleaned = redact(text)
    return cleaned.text, cleaned.count


def one_line(text: str) -> str:
    return " ".join(text.split())


def clip(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def close_summary(state: WorkingState) -> str | None:
    """``Goals: …; … — Decisions: …; …`` (one line, ≤ 200 characters), or None."""
    parts = []
    goals = [one_line(g) for g in state.goals if one_line(g)]
    decisions = [one_line(d) for d in state.decisions if one_line(d)]
    if goals:
        parts.append("Goals: " + "; ".join(goals))
    if decisions:
        parts.append("Decisions: " + "; ".join(decisions))
    return clip(" — ".join(parts)) if parts else None


def close_tags(state: WorkingState) -> list[str]:
    """The decisions' and goals' #hashtags, else their most frequent content words."""
    text = "\n".join([*state.decisions, *state.goals])
    hashtags = [slug(t) for t in _HASHTAG.findall(text)]
    picked = list(dict.fromkeys(t for t in hashtags if t))
    if picked:
        return picked[:MAX_EPISODE_TAGS]
    words = [
        w
        for w in (slug(m) for m in _WORD.findall(text.casefold()))
        if 4 <= len(w) <= 32 and w not in STOPWORDS
    ]
    counts = Counter(words)
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    return sorted(counts, key=lambda w: (-counts[w], first[w]))[:CLOSE_TAGS]


def digest(tag: str, episodes: list[EpisodeRecord]) -> tuple[str, str]:
    """The deterministic digest proposal of a tag's evidence: (title, content)."""
    sessions = len({e.session_id for e in episodes})
    lines = [f"recurring: {tag} — {len(episodes)} episodes across {sessions} sessions"]
    shown = episodes[-DIGEST_LINES:]
    if len(episodes) > len(shown):
        lines.append(f"- … and {len(episodes) - len(shown)} earlier episodes")
    lines += [f"- {time.strftime('%Y-%m-%d', time.gmtime(e.at / 1000))} {e.summary}" for e in shown]
    return f"Recurring: {tag}", "\n".join(lines)


# --- the service -----------------------------------------------------------------------


class EpisodeService:
    def __init__(
        self,
        ctx: Context,
        sessions: Sessions,
        proposals: ProposalService,
        *,
        min_episodes: int = MIN_EPISODES,
        min_sessions: int = MIN_SESSIONS,
    ) -> None:
        self._ctx = ctx
        self._sessions = sessions
        self._proposals = proposals
        self.min_episodes = min_episodes
        self.min_sessions = min_sessions

    def handlers(self) -> dict[str, Handler]:
        return {
            "record_episode": self.record_episode,
            "list_episodes": self.list_episodes,
            "consolidation_candidates": self.consolidation_candidates,
            "consolidate": self.consolidate,
        }

    def _fault(self, point: str) -> None:
        if self._ctx.settings.fault_point == point:
            log.warning("fault_injected", point=point)
            os.kill(os.getpid(), signal.SIGKILL)

    # --- episodes ----------------------------------------------------------------------

    async def record_episode(self, params: RecordEpisodeParams, peer: Peer) -> RecordEpisodeResult:
        ws = await self._ctx.workspace(params.workspace)
        await self._check_not_incognito(ws, params.session_id)
        summary, redactions = clean_summary(params.summary)
        tags = episode_tags(params.tags)
        if not params.source_refs:
            raise InvalidParams("an episode needs at least one source ref", path="$.sourceRefs")
        if len(params.source_refs) > MAX_EPISODE_REFS:
            raise TooLarge(
                f"at most {MAX_EPISODE_REFS} source refs",
                limit=MAX_EPISODE_REFS,
                count=len(params.source_refs),
            )
        incognito = self._ctx.incognito_sessions(ws)
        source_refs = self._ctx.identifiers.scrub_refs(params.source_refs)
        for ref in source_refs:
            parts = ref.split(":")
            if len(parts) == 3 and parts[1] in incognito:
                raise InvalidParams("a source ref names an incognito session", path="$.sourceRefs", ref=ref)
        now = now_ms()
        new = NewEpisode(
            episode_id=new_session_id(now),
            session_id=params.session_id,
            kind="client",
            summary=summary,
            tags=tags,
            source_refs=list(dict.fromkeys(source_refs)),
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
        ws = await self._ctx.workspace(params.workspace)
        found = await in_thread(
            ws.ledger.list_episodes,
            tag=None if params.tag is None else slug(params.tag),
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

    # --- evidence ------------------------------------------------------------------------

    async def consolidation_candidates(self, params: CandidatesParams, peer: Peer) -> CandidatesResult:
        ws = await self._ctx.workspace(params.workspace)
        tag = None if params.tag is None else slug(params.tag)
        evidence = await in_thread(ws.ledger.evidence, tag)
        candidates = []
        for name, episodes in evidence.items():
            sessions = len({e.session_id for e in episodes})
            if len(episodes) >= params.min_episodes and sessions >= params.min_sessions:
                candidates.append(
                    Candidate(
                        tag=name,
                        episode_count=len(episodes),
                        session_count=sessions,
                        eligible=self._meets_threshold(len(episodes), sessions),
                        episodes=[e.view() for e in episodes],
                    )
                )
        candidates.sort(key=lambda c: (-c.episode_count, -c.session_count, c.tag))
        return CandidatesResult(
            candidates=candidates, min_episodes=params.min_episodes, min_sessions=params.min_sessions
        )

    async def consolidate(self, params: ConsolidateParams, peer: Peer) -> ProposeResult:
        ws = await self._ctx.workspace(params.workspace)
        tag = slug(params.tag)
        if not tag:
            raise InvalidParams("a tag needs a letter or a digit", path="$.tag")
        episodes = (await in_thread(ws.ledger.evidence, tag)).get(tag, [])
        if not episodes:
            raise InsufficientEvidence(
                "the tag has no evidence since its last consolidation",
                reason="below_threshold",
                tag=tag,
                episodes=0,
                sessions=0,
                minEpisodes=self.min_episodes,
                minSessions=self.min_sessions,
            )
        title, content = digest(tag, episodes)
        ids = [e.episode_id for e in episodes]
        return await self._proposals.propose(
            ProposeParams(
                workspace=params.workspace,
                title=title,
                content=content,
                origin="extracted",
                tags=[tag],
                session_id=params.session_id,
                source_refs=[episode_ref(i) for i in ids],
                consolidates=Consolidates(tag=tag, episode_ids=ids),
                request_id=None if params.request_id is None else f"consolidate:{params.request_id}",
            ),
            peer,
        )

    async def check_evidence(self, ws: Workspace, consolidates: Consolidates) -> None:
        """The evidence gate of a profile proposal (InsufficientEvidence, nothing written)."""
        tag = slug(consolidates.tag)
        ids = list(dict.fromkeys(episode_id_of(i) for i in consolidates.episode_ids))
        if not tag or not ids:
            raise InsufficientEvidence("a consolidation cites a tag and its episodes", reason="no_episodes")
        found = {
            e.episode_id: e
            for e in await in_thread(
                ws.ledger.list_episodes, episode_ids=ids, include_deleted=True, limit=len(ids)
            )
        }
        unknown = [i for i in ids if i not in found or found[i].deleted_at is not None]
        if unknown:
            raise InsufficientEvidence(
                "the proposal cites episodes this workspace does not have",
                reason="unknown_episodes",
                episodeIds=unknown[:20],
            )
        foreign = [i for i in ids if tag not in found[i].tags]
        if foreign:
            raise InsufficientEvidence(
                "the proposal cites episodes without its tag",
                reason="foreign_tag",
                tag=tag,
                episodeIds=foreign[:20],
            )
        open_ = {e.episode_id for e in (await in_thread(ws.ledger.evidence, tag)).get(tag, [])}
        spent = [i for i in ids if i not in open_]
        if spent:
            raise InsufficientEvidence(
                "the proposal cites episodes already consolidated",
                reason="already_consolidated",
                tag=tag,
                episodeIds=spent[:20],
            )
        sessions = len({found[i].session_id for i in ids})
        if not self._meets_threshold(len(ids), sessions):
            raise InsufficientEvidence(
                "too few episodes or sessions for a consolidation",
                reason="below_threshold",
                tag=tag,
                episodes=len(ids),
                sessions=sessions,
                minEpisodes=self.min_episodes,
                minSessions=self.min_sessions,
            )

    async def queued(self, ws: Workspace, consolidates: Consolidates, proposal_id: str) -> None:
        """Right after PENDING.md holds the proposal: link it and advance the tag's offset
        (one transaction). If that fails the offset stays: the evidence is reconsidered."""
        self._fault("consolidation_before_offset")
        ids = list(dict.fromkeys(episode_id_of(i) for i in consolidates.episode_ids))
        try:
            await in_thread(ws.ledger.queue_consolidation, slug(consolidates.tag), proposal_id, ids)
        except MakadError as exc:
            log.warning("consolidation_not_recorded", workspace_id=ws.id, kind=exc.kind)

    async def settle(self, ws: Workspace, outcomes: dict[str, tuple[Any, str | None]]) -> None:
        if outcomes:
            await in_thread(ws.ledger.settle_consolidations, outcomes)

    # --- plumbing ----------------------------------------------------------------------

    def _meets_threshold(self, episodes: int, sessions: int) -> bool:
        return episodes >= self.min_episodes and sessions >= self.min_sessions

    async def _check_not_incognito(self, ws: Workspace, session_id: str) -> None:
        if (await self._ctx.load_settings(ws)).incognito:
            raise IncognitoBlocked("incognito is on: nothing is written")
        if self._sessions.is_incognito(ws, session_id):
            raise IncognitoBlocked("the session is incognito: it records no episodes", sessionId=session_id)


class EpisodeHooks(Hooks):
    """The evidence gate and its propagation, plugged into the other services."""

    def __init__(self, episodes: EpisodeService) -> None:
        self._episodes = episodes

    async def check_consolidation(self, ws: Workspace, consolidates: Any, session_id: str | None) -> None:
        await self._episodes.check_evidence(ws, _consolidates(consolidates))

    async def consolidation_queued(self, ws: Workspace, consolidates: Any, proposal_id: str) -> None:
        await self._episodes.queued(ws, _consolidates(consolidates), proposal_id)

    async def approved(self, ws: Workspace, items: list[tuple[str, Any]]) -> None:
        await self._episodes.settle(
            ws,
            {
                proposal_id: ("approved", entry.id if isinstance(entry, Entry) else None)
                for proposal_id, entry in items
            },
        )

    async def rejected(self, ws: Workspace, proposal_ids: list[str]) -> None:
        await self._episodes.settle(ws, {p: ("rejected", None) for p in proposal_ids})

    async def deleted(self, ws: Workspace, entry_id: str) -> None:
        await in_thread(ws.ledger.retract_entry, entry_id)

    async def session_closed(self, ws: Workspace, session_id: str) -> None:
        try:
            await self._episodes.record_close_episode(ws, session_id)
        except MakadError as exc:  # the close itself is committed; closing again retries
            log.warning("close_episode_failed", workspace_id=ws.id, kind=exc.kind)


def _consolidates(value: Any) -> Consolidates:
    if isinstance(value, Consolidates):
        return value
    return msgspec.convert(value, Consolidates, from_attributes=True)
