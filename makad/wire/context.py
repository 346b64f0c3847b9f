"""Wire types of build_context."""

from __future__ import annotations

from typing import Literal

from makad.core.attention import AttentionSection
from makad.core.context_types import ContextPack
from makad.core.types import ContextStrategy
from makad.errors import InvalidParams, InvalidWorkspace, IOFailure, NotFound, TooLarge
from makad.wire.base import MethodSpec, Result, WorkspaceParams

MAX_BUDGET_TOKENS = 2_000_000

SegmentKindName = Literal["memory", "working_state", "summary", "attention", "recall"]


class BuildContextParams(WorkspaceParams):
    """``include`` lists the segment kinds wanted (default all, attention only in a
    session's first pack); history is always built.

    ``strategy``: how to choose (default: the workspace's ``contextStrategy`` setting).
    """

    budget_tokens: int
    session_id: str | None = None
    query: str | None = None
    include: list[SegmentKindName] | None = None
    strategy: ContextStrategy | None = None


class GetAttentionParams(WorkspaceParams):
    pass


class AttentionResult(Result):
    """The workspace's attention state (docs/ATTENTION.md): six sections, each line with the
    refs it came from. ``enabled`` false (``attentionEnabled`` off, or incognito): nothing is
    derived and ``sections`` is empty. ``computedAt``: when it was last derived (ms)."""

    enabled: bool
    computed_at: int
    sections: list[AttentionSection]


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
            "empty. A thread a later session resolved is not listed (docs/ATTENTION.md)."
        ),
        errors=(InvalidWorkspace, InvalidParams, IOFailure),
    ),
]
