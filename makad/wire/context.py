"""Wire types of build_context."""

from __future__ import annotations

from typing import Literal

from makad.core.context_types import ContextPack
from makad.core.types import ContextStrategy
from makad.errors import InvalidParams, InvalidWorkspace, IOFailure, NotFound, TooLarge
from makad.wire.base import MethodSpec, WorkspaceParams

MAX_BUDGET_TOKENS = 2_000_000

SegmentKindName = Literal["memory", "working_state", "summary", "recall"]


class BuildContextParams(WorkspaceParams):
    """``include`` lists the segment kinds wanted (default all); history is always built.

    ``strategy``: how to choose (default: the workspace's ``contextStrategy`` setting).
    """

    budget_tokens: int
    session_id: str | None = None
    query: str | None = None
    include: list[SegmentKindName] | None = None
    strategy: ContextStrategy | None = None


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
]
