"""Wire types of build_context."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import Meta

from makad.core.attention import AttentionSection
from makad.core.context_types import ContextPack
from makad.core.suggestions import Suggestion
from makad.core.types import ContextStrategy, DurationMs, UnixMs
from makad.errors import IncognitoBlocked, InvalidParams, InvalidWorkspace, IOFailure, NotFound, TooLarge
from makad.wire.base import MethodSpec, Result, Warning, WorkspaceParams

MAX_BUDGET_TOKENS = 2_000_000

SegmentKindName = Literal["memory", "working_state", "summary", "attention", "recall"]


class BuildContextParams(WorkspaceParams):
    """``include`` lists the segment kinds wanted (default all, attention only in a
    session's first pack or a call without a session); history is always built.

    ``strategy``: how to choose (default: the workspace's ``contextStrategy`` setting).
    ``query`` is read up to its first 16,384 characters.
    """

    budget_tokens: int
    session_id: str | None = None
    query: str | None = None
    include: list[SegmentKindName] | None = None
    strategy: ContextStrategy | None = None


class GetAttentionParams(WorkspaceParams):
    pass


class AttentionResult(Result):
    """The workspace's attention state (makad's docs/ATTENTION.md): six sections, each line with the
    refs it came from. ``enabled`` false (``attentionEnabled`` off, or incognito): nothing is
    derived and ``sections`` is empty. ``computedAt``: when it was last derived (ms), 0 when
    ``enabled`` is false. ``warnings``: ``not_recorded`` when the data directory's disk is
    full: the state was derived from what the ledger holds but not stored (it is, once
    space is freed)."""

    enabled: bool
    computed_at: Annotated[
        int, Meta(description="Unix time in milliseconds (UTC) of the derivation; 0 when enabled is false.")
    ]
    sections: list[AttentionSection]
    warnings: list[Warning] = []


class SuggestParams(WorkspaceParams):
    """``sessionId``: the session asking (its own threads are not suggested back to it, and
    an incognito one gets nothing). ``explain``: also list every candidate, the skipped
    ones with score 0 and the reason (one over the threshold not offered says why)."""

    session_id: str | None = None
    explain: bool = False


SilencedReason = Literal["attention_off", "incognito", "session_incognito", "agent_reads_off", "not_derived"]


class SuggestResult(Result):
    """What is worth offering the user now (makad's docs/ATTENTION.md, Suggestions), best first.

    ``enabled`` false: nothing is suggested and ``silenced`` says why (``attention_off``,
    ``incognito``: the workspace, ``session_incognito``, ``agent_reads_off``); with
    ``enabled`` true, ``silenced`` is ``not_derived`` while the attention state has not been
    derived yet (it will be, off the request path). ``threshold``: the score a suggestion
    needs; ``cooldownMs``: how long ``dismiss_suggestion`` hides one by default;
    ``computedAt``: when the attention state they come from was derived (ms), 0 when
    there is none (``silenced`` set)."""

    enabled: bool
    suggestions: list[Suggestion]
    threshold: float
    cooldown_ms: DurationMs
    computed_at: Annotated[
        int,
        Meta(
            description="Unix time in milliseconds (UTC) of the attention state used; 0 when there is none."
        ),
    ] = 0
    silenced: SilencedReason | None = None
    candidates: list[Suggestion] | None = None


class DismissSuggestionParams(WorkspaceParams):
    """``id``: a suggestion's id (``sg_`` and 16 hex digits); ``forMs``: how long it stays
    away (default: the daemon's cooldown; 0 brings it back now)."""

    id: str
    for_ms: Annotated[
        int | None,
        Meta(
            description="A length of time in milliseconds, 0 to 31536000000 (a year); null: the "
            "daemon's cooldown."
        ),
    ] = None


class DismissSuggestionResult(Result):
    """``until``: when the suggestion may show again (ms)."""

    id: str
    until: UnixMs


MAX_DISMISS_MS = 365 * 86_400_000


METHODS: list[MethodSpec] = [
    MethodSpec(
        "build_context",
        BuildContextParams,
        ContextPack,
        "What the model should see this turn, within budgetTokens: memory, working state, "
        "summary and recall segments plus the live history, with a trace of every choice.",
        description=(
            "totalTokens never exceeds budgetTokens; when even the newest user message cannot "
            "fit, a too_large error carries budgetTokens and minimumTokens. Each kind gets its "
            "share of the budget, then what the others left unused flows to the kinds that "
            "still have candidates, in priority order (PROTOCOL.md). The memory segment "
            "exists only when enabled && agentReadEnabled && !incognito (workspace and session); "
            "recall only with historyRecallEnabled and a query (the recency strategies need none). "
            "strategy (or the workspace's contextStrategy) picks deterministic (default), full, "
            "recent, summary, curator or curator_shadow; every strategy keeps the budget, tool "
            "adjacency and the gates. The same inputs (revision, last seq, budget, query, "
            "include, strategy) give byte-identical output for every strategy but curator."
        ),
        errors=(InvalidWorkspace, InvalidParams, NotFound, TooLarge, IOFailure),
    ),
    MethodSpec(
        "get_attention",
        GetAttentionParams,
        AttentionResult,
        "What the user is in the middle of in this workspace: active and abandoned threads, "
        "focus, proposals waiting, rejections cooling down, rhythm — each line with its refs.",
        description=(
            "Derived without a model from the behavior records of past sessions (written when a "
            "session is closed or idle), PENDING.md and recent rejections, off the request path; "
            "this reads the stored state. Incognito sessions contribute nothing; with "
            "attentionEnabled off or the workspace incognito the reply is enabled: false and "
            "empty. A thread a later session resolved is not listed (makad's docs/ATTENTION.md)."
        ),
        errors=(InvalidWorkspace, InvalidParams, IOFailure),
    ),
    MethodSpec(
        "suggest",
        SuggestParams,
        SuggestResult,
        "What is worth offering the user unasked — a thread to resume, a failure still standing, "
        "proposals waiting for review — each with a score, the reason and its refs; often nothing.",
        description=(
            "Scored without a model from the stored attention state and behavior records "
            "(makad's docs/ATTENTION.md): only candidates scoring at least threshold, not dismissed, one "
            "per session, at most 3. The asking session's own threads are not suggested back. "
            "Nothing is suggested (enabled: false, silenced says why) with attentionEnabled off, "
            "agentReadEnabled off, or the workspace or the session incognito. Nothing is derived "
            "on the request path. A sessionId the workspace does not hold is not_found (data.sessionId)."
        ),
        errors=(InvalidWorkspace, InvalidParams, NotFound, IOFailure),
    ),
    MethodSpec(
        "dismiss_suggestion",
        DismissSuggestionParams,
        DismissSuggestionResult,
        "Hide a suggestion for forMs (default the daemon's cooldown, MAKAD_SUGGESTION_COOLDOWN_MS, "
        "3 days); 0 brings it back.",
        description=(
            "Kept in the workspace ledger (the id only, a digest: no text), so it survives a "
            "restart. A malformed id or a forMs below 0 or above a year is invalid_params; while "
            "the workspace is incognito nothing is written (incognito_blocked)."
        ),
        errors=(InvalidWorkspace, InvalidParams, IncognitoBlocked, IOFailure),
    ),
]
