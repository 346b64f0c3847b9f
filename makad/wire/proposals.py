"""Wire types of the approval gate: proposals, approval, rejection, lineage, import, export."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, UnsetType

from makad import errors as err
from makad.core.importers import ItemError
from makad.core.types import Entry, MaybeUnixMs, MemoryEvent, UnixMs
from makad.wire.base import DecayTtlMs, MethodSpec, Params, Result, Warning, WorkspaceParams


class Consolidates(Params):
    """A profile proposal's evidence: the tag and the episodes it consolidates."""

    tag: str
    episode_ids: list[str]


class ProposeParams(WorkspaceParams):
    title: str
    content: str
    # The agent's path: the user's own entries go through add_entry, other tools'
    # memories through import_memories.
    origin: Literal["extracted"] = "extracted"
    tags: list[str] = []
    scope: Literal["workspace", "session", "global"] = "workspace"
    session_id: str | None = None
    source_refs: list[str] = []
    supersedes: str | None = None
    decay_ttl_ms: DecayTtlMs = None
    draft: bool = False
    consolidates: Consolidates | None = None
    request_id: str | None = None


class RejectionInfo(Result):
    proposal_id: str
    reason: str | None
    rejected_at: UnixMs


class ProposeResult(Result):
    """``proposal`` is what was queued, or the existing duplicate when nothing was queued."""

    proposal: Entry | None
    queued: bool
    duplicate_of: str | None = None
    similar_to: list[str] = []
    previously_rejected: RejectionInfo | None = None
    redactions: int = 0
    revision: int = 0


class ListProposalsParams(WorkspaceParams):
    pass


class ProposalView(Result):
    """An open proposal; ``note`` says why the daemon queued it itself, if it did:
    ``returned-after-a-save-lacked-it`` -- an entry a save of MEMORY.md (or PENDING.md)
    dropped that may have been deleted on purpose (PROTOCOL.md, "The user's edits").
    ``replaces``: the entry the proposal's ``supersedes`` names, as it is now (approving
    archives it when it is still active; a user-level entry a workspace proposal
    overrides carries its ``@user/<id>`` id); absent when it names none or that entry
    is gone."""

    proposal: Entry
    similar_to: list[str] = []
    note: str | None = None
    replaces: Entry | None = None


class ProposalsResult(Result):
    proposals: list[ProposalView]
    revision: int
    warnings: Annotated[
        list[Warning],
        Meta(
            description="not_utf8 for each line of PENDING.md that is not valid UTF-8, "
            "not_a_proposal for each section waiting for no review, pending_safe_mode when "
            "PENDING.md is over the size cap and none of its proposals is read (see read_state)."
        ),
    ] = []


class ProposalEdit(Params):
    """What the user changed before approving. ``supersedes``: an active entry the approved
    one replaces (archived in the same write), e.g. a near duplicate merged into it."""

    title: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET
    supersedes: str | UnsetType | None = UNSET


class ApproveParams(WorkspaceParams):
    ids: list[str]
    edits: dict[str, ProposalEdit] = {}
    expected_revision: int | None = None
    request_id: str | None = None


class Approved(Result):
    """One approved proposal. ``duplicateOf``: its content was already active as that
    entry (the same canonical content), so no second entry was added and ``entry`` is it."""

    proposal_id: str
    entry: Entry
    superseded: str | None = None
    duplicate_of: str | None = None


class ApproveResult(Result):
    approved: list[Approved]
    revision: int
    redactions: int = 0


class RejectParams(WorkspaceParams):
    ids: list[str]
    reason: str | None = None
    expected_revision: int | None = None
    request_id: str | None = None


class RejectResult(Result):
    rejected: list[str]
    revision: int


class HistoryParams(WorkspaceParams):
    id: str


class HistoryResult(Result):
    """Why the daemon believes an entry: its proposal, sources, approval and later edits.
    ``unresolvedRefs``: those of ``sourceRefs`` (event, memory, checkpoint or episode refs)
    that name nothing the workspace stores now — written into a file by hand or by an
    older makad, or their session deleted since; never checked at the user level (its
    refs name the proposing workspace's events)."""

    id: str
    entry: Entry | None
    proposal_id: str | None
    source_refs: list[str]
    approved_by: str | None
    approved_at: MaybeUnixMs
    events: list[MemoryEvent]
    unresolved_refs: list[str] = []


class ImportParams(WorkspaceParams):
    """Either ``path`` (a file, or a Claude Code memory directory) or ``data`` (the text)."""

    path: str | None = None
    data: str | None = None
    format: str | None = None
    request_id: str | None = None
    # true: import_progress notifications ({workspace, done, total}) come while it runs.
    progress: bool = False


class ImportProgressParams(Result):
    """Params of ``import_progress``: how many of an import's items were checked (at the
    start, every 100, and at the end, before the reply), the workspace as the importer
    spelled it."""

    workspace: str
    done: int
    total: int


class ImportResultWire(Result):
    format: str
    imported: list[str]
    duplicates: int
    errors: list[ItemError]
    skipped: list[ItemError]
    revision: int
    # New memories that did not fit under PENDING.md's size cap, in file order after the
    # imported ones: review the queue, then import the same file again to bring them in.
    deferred: int = 0


class ExportParams(WorkspaceParams):
    format: Literal["json", "markdown"] = "json"
    include_archived: bool = False


class ExportResult(Result):
    format: str
    data: str
    count: int
    # "user": exported from the user-level memory (workspace "@user").
    level: Literal["workspace", "user"] = "workspace"


_WS = (err.InvalidWorkspace,)
_WRITE = (*_WS, err.Disabled, err.IncognitoBlocked, err.Conflict, err.TooLarge, err.SafeMode, err.IOFailure)

METHODS: list[MethodSpec] = [
    MethodSpec(
        "propose",
        ProposeParams,
        ProposeResult,
        "The agent's path: queue a memory for the user's approval in PENDING.md (never "
        "writes MEMORY.md). An origin other than extracted is invalid_params as the params "
        "are read, before any gate; then the gates in order: disabled, incognito_blocked, "
        'gate_closed (extractToolEnabled && agentReadEnabled), too_large. scope "global" '
        "queues in the user level's "
        'PENDING.md (workspace "@user", which must be enabled) with this workspace '
        "recorded in its lineage; the gates and the session are this workspace's. "
        "supersedes: the entry the proposal corrects or replaces (its id or memory:<id>), "
        "archived when the user approves; it must be active and visible to the proposing "
        "session (else invalid_params at $.supersedes), at most one open proposal replaces "
        "an entry, and at most 20 replacements wait at once (too_large).",
        errors=(*_WRITE, err.GateClosed, err.InvalidParams, err.InsufficientEvidence),
        description="Each sourceRefs item must name what the workspace (the proposing one for "
        "scope global) stores: event:<sessionId>:<seq> or <from>-<to> a recorded session and "
        "seqs up to its last, memory:<id> an entry, checkpoint:<id> a checkpoint, "
        "episode:<id> an episode; else invalid_params at $.sourceRefs[i] with data.ref and "
        "data.reason (not_a_source_ref, unknown_session, past_last_seq with data.lastSeq, "
        "unknown_entry, unknown_checkpoint, unknown_episode), nothing queued. More than "
        "10,000 refs is too_large.",
    ),
    MethodSpec(
        "list_proposals",
        ListProposalsParams,
        ProposalsResult,
        "Open proposals with the ids of similar entries and, for a replacement, the entry "
        "it replaces as it is now (replaces).",
        errors=(*_WS, err.IOFailure),
    ),
    MethodSpec(
        "approve",
        ApproveParams,
        ApproveResult,
        "Activate proposals (optionally edited) in MEMORY.md and remove them from "
        "PENDING.md; a supersedes target is archived in the same write.",
        errors=(*_WRITE, err.NotFound, err.InvalidParams),
    ),
    MethodSpec(
        "reject",
        RejectParams,
        RejectResult,
        "Reject proposals: removed from PENDING.md, recorded so the same one is not queued again.",
        errors=(*_WRITE, err.NotFound, err.InvalidParams),
        description="A reason is at most 2,000 characters (too_large, data.field reason).",
    ),
    MethodSpec(
        "memory_history",
        HistoryParams,
        HistoryResult,
        "Why do you believe this? The lineage of an entry or proposal.",
        errors=(*_WS, err.NotFound, err.InvalidParams),
        description="id is whole or a unique prefix of an entry's or proposal's id (the short "
        "ids lists print; an entry typed by hand, h-…, by its hex part too); the result's id "
        "is the whole one. A prefix of several ids is invalid_params with data.reason "
        "ambiguous_id and data.candidates (up to 10 ids); one of none is not_found.",
        large_reply=True,
    ),
    MethodSpec(
        "import_memories",
        ImportParams,
        ImportResultWire,
        "Import memories from another tool into PENDING.md (origin imported); re-importing adds "
        "nothing. A binary or empty file is invalid_params (data.reason) and nothing is queued; "
        "a file in which nothing is found is invalid_params naming what the format "
        "expects; every such error lists data.formats; memories past PENDING.md's cap are "
        "deferred (or too_large when none fits).",
        errors=(*_WRITE, err.InvalidParams),
    ),
    MethodSpec(
        "export_memories",
        ExportParams,
        ExportResult,
        "Export active (and optionally archived) entries as JSON or Markdown.",
        errors=(*_WS, err.IncognitoBlocked, err.IOFailure),
        large_reply=True,
    ),
]
