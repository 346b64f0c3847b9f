"""Wire types of build_context."""

from __future__ import annotations

from typing import Literal

from makad.core.context_types import ContextPack
from makad.errors import InvalidParams, InvalidWorkspace, IOFailure, NotFound, TooLarge
from makad.wire.base import MethodSpec, WorkspaceParams

MAX_BUDGET_TOKENS = 2_000_000

SegmentKindName = Literal["memory", "working_state", "summary", "recall"]


class BuildContextParams(WorkspaceParams):
    """``include`` lists the segment kinds wanted (default all); history is always built."""

    budget_tokens: int
    session_id: str | None = None
    query: str | None = None
    include: list[SegmentKindName] | None = None


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
            "recall only with historyRecallEnabled and a query. The same inputs (revision, last "
            "seq, budget, query, include) give byte-identical output."
        ),
        errors=(InvalidWorkspace, InvalidParams, NotFound, TooLarge, IOFailure),
    ),
]
