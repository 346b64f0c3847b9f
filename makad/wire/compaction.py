"""Wire types of compaction: compact, list_checkpoints, get_checkpoint."""

from __future__ import annotations

from typing import Literal

from makad.core.types import Checkpoint
from makad.errors import (
    CircuitOpen,
    Conflict,
    IncognitoBlocked,
    InvalidParams,
    InvalidSummary,
    InvalidWorkspace,
    IOFailure,
    NotFound,
)
from makad.wire.base import MethodSpec, Result, WorkspaceParams


class CompactParams(WorkspaceParams):
    session_id: str
    mode: Literal["semantic", "checkpoint"]
    summary: str | None = None
    keep_recent_tokens: int | None = None
    reason: Literal["manual", "budget", "overflow"] = "manual"
    request_id: str | None = None


class ListCheckpointsParams(WorkspaceParams):
    session_id: str


class CheckpointsResult(Result):
    checkpoints: list[Checkpoint]


class GetCheckpointParams(WorkspaceParams):
    checkpoint_id: str


METHODS: list[MethodSpec] = [
    MethodSpec(
        "compact",
        CompactParams,
        Checkpoint,
        "Checkpoint a session: a summary (semantic: written by the client's model; checkpoint: "
        "built without a model) replaces the covered events in build_context. Nothing is "
        "deleted: every event stays reachable through retrieve and search_history.",
        description=(
            "A semantic summary must hold the sections '# Current Goal', '# Current State' and "
            "'# Next Step' (any heading level), be at most 12,000 tokens and contain no secret, "
            "else invalid_summary with data.problems. The preserved suffix keeps at least "
            "keepRecentTokens (default 10,000, held between 1,000 and 40,000; halved for reason "
            "overflow) and 5 text messages (2 for overflow), never splitting a tool call from its "
            "result; a history that fits it has nothing to compact yet (invalid_params, data.reason "
            "nothing_to_compact, data.liveTokens and data.keptTokens; data.path $.keepRecentTokens "
            "when the caller gave it, else $.sessionId). After 3 consecutive "
            "failed automatic compactions (reason budget or overflow) of a session, circuit_open "
            "until a manual compaction succeeds."
        ),
        errors=(
            InvalidWorkspace,
            NotFound,
            InvalidParams,
            InvalidSummary,
            CircuitOpen,
            Conflict,
            IncognitoBlocked,
            IOFailure,
        ),
    ),
    MethodSpec(
        "list_checkpoints",
        ListCheckpointsParams,
        CheckpointsResult,
        "A session's checkpoints, oldest first.",
        errors=(InvalidWorkspace, InvalidParams, NotFound),
    ),
    MethodSpec(
        "get_checkpoint",
        GetCheckpointParams,
        Checkpoint,
        "One checkpoint by id.",
        errors=(InvalidWorkspace, InvalidParams, NotFound),
        large_reply=True,
    ),
]
