"""Wire types of episodes and the evidence behind profile proposals."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from makad import errors as err
from makad.core.episodes import (
    MIN_EPISODES,
    MIN_SESSIONS,
)
from makad.core.types import Episode
from makad.wire.base import Int64, MethodSpec, Ms, Result, WorkspaceParams
from makad.wire.proposals import ProposeResult

# The evidence a consolidation needs by default: this many episodes from this many sessions.
MAX_LIST_LIMIT = 10_000

Threshold = Annotated[int, Meta(ge=1, le=10_000)]
ListLimit = Annotated[int, Meta(ge=1, le=MAX_LIST_LIMIT)]


class RecordEpisodeParams(WorkspaceParams):
    """``summary``: one line, at most 200 characters; ``sourceRefs``: ``event:`` refs
    to stored events; ``at``: when it happened (Unix ms, default now)."""

    session_id: str
    summary: str
    source_refs: list[str]
    tags: list[str] = []
    at: Annotated[Ms | None, Meta(description="Unix time in milliseconds (UTC); null: now.")] = None
    request_id: str | None = None


class RecordEpisodeResult(Result):
    """``recorded`` is false when the session already had this remark (that episode is
    returned); ``redactions``: secrets replaced in the summary."""

    episode_id: str
    episode: Episode
    recorded: bool
    redactions: int = 0


class ListEpisodesParams(WorkspaceParams):
    """Filters combine; ``ids`` takes episode ids or ``episode:<id>`` refs."""

    tag: str | None = None
    session_id: str | None = None
    since: Annotated[
        Int64 | None,
        Meta(
            description="Unix time in milliseconds (UTC): only episodes whose at is at or after it; "
            "null: all."
        ),
    ] = None
    ids: list[str] | None = None
    include_deleted: bool = False
    limit: ListLimit = 1_000


class ListEpisodesResult(Result):
    episodes: list[Episode]


class CandidatesParams(WorkspaceParams):
    """Lower thresholds show tags that are getting close; ``eligible`` says whether a
    proposal would pass the daemon's evidence gate."""

    tag: str | None = None
    min_episodes: Threshold = MIN_EPISODES
    min_sessions: Threshold = MIN_SESSIONS


class Candidate(Result):
    """A tag's evidence since its last consolidation: its counts, and its newest 20
    episodes (none past the first 200 candidates; ``list_episodes {tag}`` lists them all)."""

    tag: str
    episode_count: int
    session_count: int
    eligible: bool
    episodes: list[Episode]


class CandidatesResult(Result):
    candidates: list[Candidate]
    min_episodes: int
    min_sessions: int


class ConsolidateParams(WorkspaceParams):
    """Queue the deterministic digest of a tag's evidence as a proposal."""

    tag: str
    session_id: str | None = None
    request_id: str | None = None


_WS = (err.InvalidWorkspace,)

METHODS: list[MethodSpec] = [
    MethodSpec(
        "record_episode",
        RecordEpisodeParams,
        RecordEpisodeResult,
        "Record an episode: a one-line, redacted summary of something that happened in "
        "a session, with tags and the events it came from.",
        errors=(*_WS, err.InvalidParams, err.NotFound, err.IncognitoBlocked, err.TooLarge, err.IOFailure),
        description="sourceRefs must name stored events of non-incognito sessions "
        "(invalid_params at $.sourceRefs[i] with data.ref and data.reason otherwise: "
        "not_an_event_ref, unknown_session, past_last_seq with data.lastSeq, "
        "incognito_session, not_intact). Refused while the workspace or the session is incognito.",
    ),
    MethodSpec(
        "list_episodes",
        ListEpisodesParams,
        ListEpisodesResult,
        "Episodes, oldest first, filtered by tag, session, time or id.",
        errors=(*_WS, err.InvalidParams, err.IOFailure),
        large_reply=True,
    ),
    MethodSpec(
        "consolidation_candidates",
        CandidatesParams,
        CandidatesResult,
        "Tags whose episodes since their last consolidation reach the threshold "
        "(default 5 episodes from 2 sessions), with those episodes.",
        errors=(*_WS, err.InvalidParams, err.IOFailure),
    ),
    MethodSpec(
        "consolidate",
        ConsolidateParams,
        ProposeResult,
        "Propose the digest of a tag's evidence (origin extracted, consolidating the "
        "episodes); the user approves or rejects it like any proposal.",
        errors=(
            *_WS,
            err.Disabled,
            err.IncognitoBlocked,
            err.GateClosed,
            err.InsufficientEvidence,
            err.InvalidParams,
            err.TooLarge,
            err.SafeMode,
            err.IOFailure,
        ),
    ),
]
