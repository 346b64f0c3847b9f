"""Types of the daemon's methods, generated from protocol/openrpc.json: do not edit.

Regenerate with ``.venv/bin/python clients/python/scripts/gen_types.py`` (``scripts/gen-protocol``
runs it); a test fails when this file drifts from the document. The typed functions
live in ``maka.generated_methods`` (re-exported here), which a client loads without
building these TypedDicts.
"""
# ruff: noqa: E501

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from maka.generated_methods import DOMAIN_ERROR_CODES as DOMAIN_ERROR_CODES
from maka.generated_methods import LIMITS as LIMITS
from maka.generated_methods import METHOD_NAMES as METHOD_NAMES
from maka.generated_methods import AsyncCall as AsyncCall
from maka.generated_methods import AsyncMethods as AsyncMethods
from maka.generated_methods import Call as Call
from maka.generated_methods import Methods as Methods

#: Version of the OpenRPC document (the daemon's version) these types come from.
PROTOCOL_VERSION = "0.1.0"


class AddEntryParams(TypedDict):
    workspace: str
    title: str
    content: str
    # default: []
    tags: NotRequired[list[str]]
    # default: "workspace"
    scope: NotRequired[Literal["global", "session", "workspace"]]
    # default: null
    sessionId: NotRequired[str | None]
    # A length of time in milliseconds after createdAt when the entry archives itself; null: the workspace's defaultDecayDays.
    # default: null
    decayTtlMs: NotRequired[int | None]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class Allocation(TypedDict):
    """What one kind was allowed (``cap``) and what it used.

    ``flowed``: the part of ``cap`` that came from other kinds' unused shares.
    """

    kind: Literal["attention", "history", "memory", "recall", "summary", "working_state"]
    cap: int
    used: int
    # default: false
    truncated: NotRequired[bool]
    # default: 0
    flowed: NotRequired[int]


class AppendEventsParams(TypedDict):
    workspace: str
    sessionId: str
    events: list[EventInput]
    # default: null
    expectedSeq: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class AppendEventsResult(TypedDict):
    """``redactions``: secrets replaced in the events' text and meta values."""

    firstSeq: int
    lastSeq: int
    # default: 0
    redactions: NotRequired[int]


class ApproveParams(TypedDict):
    workspace: str
    ids: list[str]
    # default: {}
    edits: NotRequired[dict[str, ProposalEdit]]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class ApproveResult(TypedDict):
    approved: list[Approved]
    revision: int
    # default: 0
    redactions: NotRequired[int]


class Approved(TypedDict):
    """One approved proposal. ``duplicateOf``: its content was already active as that
    entry (the same canonical content), so no second entry was added and ``entry`` is it.
    """

    proposalId: str
    entry: Entry
    # default: null
    superseded: NotRequired[str | None]
    # default: null
    duplicateOf: NotRequired[str | None]


class AttentionLine(TypedDict):
    """One fact: its text, the refs it came from, and when it last changed (ms)."""

    text: str
    refs: list[str]
    # Unix time in milliseconds (UTC).
    # default: 0
    at: NotRequired[int]


class AttentionResult(TypedDict):
    """The workspace's attention state (makad's docs/ATTENTION.md): six sections, each line with the
    refs it came from. ``enabled`` false (``attentionEnabled`` off, or incognito): nothing is
    derived and ``sections`` is empty. ``computedAt``: when it was last derived (ms), 0 when
    ``enabled`` is false. ``warnings``: ``not_recorded`` when the data directory's disk is
    full: the state was derived from what the ledger holds but not stored (it is, once
    space is freed).
    """

    enabled: bool
    # Unix time in milliseconds (UTC) of the derivation; 0 when enabled is false.
    computedAt: int
    sections: list[AttentionSection]
    # default: []
    warnings: NotRequired[list[WarningSchema]]


class AttentionSection(TypedDict):
    name: str
    lines: list[AttentionLine]


class BackupInfo(TypedDict):
    backupId: str
    file: str
    # Unix time in milliseconds (UTC).
    createdAt: int
    size: int
    sha256: str


class BackupsResult(TypedDict):
    backups: list[BackupInfo]


class BuildContextParams(TypedDict):
    """``include`` lists the segment kinds wanted (default all, attention only in a
    session's first pack or a call without a session); history is always built.

    ``strategy``: how to choose (default: the workspace's ``contextStrategy`` setting).
    ``query`` is read up to its first 16,384 characters.
    """

    workspace: str
    budgetTokens: int
    # default: null
    sessionId: NotRequired[str | None]
    # default: null
    query: NotRequired[str | None]
    # default: null
    include: NotRequired[list[Literal["attention", "memory", "recall", "summary", "working_state"]] | None]
    # default: null
    strategy: NotRequired[Literal["curator", "curator_shadow", "deterministic", "full", "recent", "summary"] | None]


class Candidate(TypedDict):
    """A tag's evidence since its last consolidation: its counts, and its newest 20
    episodes (none past the first 200 candidates; ``list_episodes {tag}`` lists them all).
    """

    tag: str
    episodeCount: int
    sessionCount: int
    eligible: bool
    episodes: list[Episode]


class CandidatesParams(TypedDict):
    """Lower thresholds show tags that are getting close; ``eligible`` says whether a
    proposal would pass the daemon's evidence gate.
    """

    workspace: str
    # default: null
    tag: NotRequired[str | None]
    # default: 5
    minEpisodes: NotRequired[int]
    # default: 2
    minSessions: NotRequired[int]


class CandidatesResult(TypedDict):
    candidates: list[Candidate]
    minEpisodes: int
    minSessions: int


class ChangeNotification(TypedDict):
    """Params of memory_changed / proposals_changed / settings_changed notifications.

    After a save that lacked entries the daemon had written (an editor buffer older than
    the write), ``reapplied`` lists the ids written back into the file and ``returned``
    those queued in PENDING.md instead, because the save may have deleted them on
    purpose; the ``proposals_changed`` of the write that queues them names them in
    ``returned`` too (only present when not empty).
    """

    workspace: str
    revision: int
    cause: Literal["daemon", "external_edit", "settings"]
    # default: []
    reapplied: NotRequired[list[str]]
    # default: []
    returned: NotRequired[list[str]]


class Checkpoint(TypedDict):
    """What one compaction covers: never deletes the events it summarizes."""

    checkpointId: str
    sessionId: str
    boundarySeq: int
    coverage: Coverage
    coveredHash: str
    summary: str
    summaryTokens: int
    preservedFromSeq: int
    mode: Literal["checkpoint", "semantic"]
    reason: Literal["budget", "manual", "overflow"]
    # Unix time in milliseconds (UTC).
    createdAt: int


class CheckpointsResult(TypedDict):
    checkpoints: list[Checkpoint]


class CompactParams(TypedDict):
    workspace: str
    sessionId: str
    mode: Literal["checkpoint", "semantic"]
    # default: null
    summary: NotRequired[str | None]
    # default: null
    keepRecentTokens: NotRequired[int | None]
    # default: "manual"
    reason: NotRequired[Literal["budget", "manual", "overflow"]]
    # default: null
    requestId: NotRequired[str | None]


class Confidence(TypedDict):
    """``level`` for people and models, ``score`` in [0, 1], ``reason`` says why."""

    level: Literal["high", "low", "medium"]
    score: float
    reason: str


class ConsolidateParams(TypedDict):
    """Queue the deterministic digest of a tag's evidence as a proposal."""

    workspace: str
    tag: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: null
    requestId: NotRequired[str | None]


class Consolidates(TypedDict):
    """A profile proposal's evidence: the tag and the episodes it consolidates."""

    tag: str
    episodeIds: list[str]


class ConsolidationMark(TypedDict):
    """A consolidation that cited an episode: the proposal, its tag and what became of it."""

    proposalId: str
    tag: str
    state: Literal["approved", "deleted", "queued", "rejected"]
    # default: null
    entryId: NotRequired[str | None]


class ContextPack(TypedDict):
    """The result of ``build_context``; the service fills ``call_id``, ``revision`` and
    ``warnings`` (``not_recorded``: the data directory's disk is full, the pack was served
    but not recorded, so a later pack may show again what this one showed).
    """

    segments: list[Segment]
    messages: list[Message]
    totalTokens: int
    budgetTokens: int
    compactRecommended: bool
    trace: Trace
    # default: ""
    callId: NotRequired[str]
    # default: 0
    revision: NotRequired[int]
    # default: []
    warnings: NotRequired[list[WarningSchema]]


class ContextPaths(TypedDict):
    """How many build_context calls of one workspace took each ``trace.path`` since start."""

    workspace: str
    # default: 0
    fast: NotRequired[int]
    # default: 0
    bounded: NotRequired[int]
    # default: 0
    slow: NotRequired[int]
    # default: 0
    fallback: NotRequired[int]


class Coverage(TypedDict):
    fromSeq: int
    toSeq: int


class CuratorTrace(TypedDict):
    """What the LLM curator was offered, what it answered, and what became of it.

    ``status``: ``ok`` (its pick was used, or recorded in shadow mode), ``skipped``
    (it was not asked: every candidate that passed the gates fit, ``reason`` ``fits``),
    ``failed`` (``reason`` says why: ``timeout``, ``http_<code>``, ``unreachable``,
    ``too_large`` (an answer over 1 MiB), ``unparseable``, ``empty``, ``no_known_refs``, ``no_candidates``,
    ``would_drop_fitting``), ``gated`` (nothing was sent: agent reads off, workspace
    or session incognito) or ``unconfigured`` (no
    ``MAKAD_CURATOR_URL``/``MAKAD_CURATOR_MODEL``).

    ``pressure``: the kinds whose candidates did not all fit in the deterministic
    pack, the ones the curator chose among (empty: nothing to choose). ``selected``:
    the offered refs it chose, in its order; ``ignored``: refs it named that it was not
    offered (at most 20, each cut to 200 characters). ``packed``: the memory entries and
    recall events the pack of its pick shows (in shadow mode: would show), ``trimmed`` how
    many of its picks were left out so that nothing the deterministic pack showed outside
    ``pressure`` is dropped, and ``overlap`` the Jaccard overlap of ``packed`` with the
    deterministic pack's memory entries and recall events (None: no pick).
    """

    model: str
    shadow: bool
    status: Literal["failed", "gated", "ok", "skipped", "unconfigured"]
    # default: null
    reason: NotRequired[str | None]
    # default: []
    pressure: NotRequired[list[Literal["memory", "recall"]]]
    # default: 0
    offered: NotRequired[int]
    # default: []
    selected: NotRequired[list[str]]
    # default: []
    ignored: NotRequired[list[str]]
    # default: []
    packed: NotRequired[list[str]]
    # default: 0
    trimmed: NotRequired[int]
    # default: null
    overlap: NotRequired[float | None]
    # default: 0
    promptTokens: NotRequired[int]
    # default: 0
    completionTokens: NotRequired[int]
    # A length of time in milliseconds, fractional.
    # default: 0.0
    latencyMs: NotRequired[float]


class DaemonLimits(TypedDict):
    """The caps this daemon enforces (x-limits in the OpenRPC document lists the defaults):
    a client splits what it sends to stay within them.
    """

    # The largest request message, in bytes (--max-message-bytes).
    maxMessageBytes: int
    # The most JSON values one message may hold.
    maxMessageValues: int
    # The most events one append_events may carry.
    maxAppendEvents: int
    # The largest event, in bytes as JSON.
    maxEventBytes: int
    # The largest reply, in bytes (--max-reply-bytes).
    maxReplyBytes: int


class DaemonStopping(TypedDict):
    """Params of ``daemon_stopping``."""

    reason: Literal["data_dir_lost", "shutdown", "signal", "socket_lost", "start_failed"]


class DeleteSessionResult(TypedDict):
    sessionId: str
    # Unix time in milliseconds (UTC).
    deletedAt: int
    eventCount: int
    incognito: bool


class DismissSuggestionParams(TypedDict):
    """``id``: a suggestion's id (``sg_`` and 16 hex digits); ``forMs``: how long it stays
    away (default: the daemon's cooldown; 0 brings it back now).
    """

    workspace: str
    id: str
    # A length of time in milliseconds, 0 to 31536000000 (a year); null: the daemon's cooldown.
    # default: null
    forMs: NotRequired[int | None]


class DismissSuggestionResult(TypedDict):
    """``until``: when the suggestion may show again (ms)."""

    id: str
    # Unix time in milliseconds (UTC).
    until: int


class Entry(TypedDict):
    """One memory entry (active or archived in MEMORY.md, open in PENDING.md)."""

    id: str
    title: str
    content: str
    # default: "unknown"
    origin: NotRequired[Literal["extracted", "imported", "manual", "unknown"]]
    # Unix time in milliseconds (UTC); 0 when unknown.
    # default: 0
    createdAt: NotRequired[int]
    # Unix time in milliseconds (UTC); 0 when unknown.
    # default: 0
    updatedAt: NotRequired[int]
    # default: "active"
    status: NotRequired[Literal["active", "archived", "draft", "review_required"]]
    # default: []
    tags: NotRequired[list[str]]
    # A length of time in milliseconds after createdAt when the entry archives itself; null or 0: never.
    # default: null
    decayTtlMs: NotRequired[int | None]
    # default: "workspace"
    scope: NotRequired[Literal["global", "session", "workspace"]]
    # default: null
    sessionId: NotRequired[str | None]
    # default: []
    sourceRefs: NotRequired[list[str]]
    # default: null
    supersedes: NotRequired[str | None]


class EntryIdParams(TypedDict):
    workspace: str
    id: str
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class EntryResult(TypedDict):
    entry: Entry
    revision: int
    # default: 0
    redactions: NotRequired[int]


class Episode(TypedDict):
    """One episode. ``kind``: ``client`` (record_episode) or ``session_close`` (derived
    by close_session). ``consolidations``: the proposals that cited it and their fate.
    A deleted session's episodes come back (with ``includeDeleted``) with ``deletedAt``
    set and their summary, tags and refs erased.
    """

    episodeId: str
    sessionId: str
    kind: Literal["client", "session_close"]
    summary: str
    tags: list[str]
    sourceRefs: list[str]
    # Unix time in milliseconds (UTC).
    at: int
    # Unix time in milliseconds (UTC).
    createdAt: int
    # Unix time in milliseconds (UTC), or null.
    # default: null
    deletedAt: NotRequired[int | None]
    # default: []
    consolidations: NotRequired[list[ConsolidationMark]]


class Event(TypedDict):
    """One ledger event as stored: immutable once acknowledged."""

    sessionId: str
    seq: int
    # Unix time in milliseconds (UTC).
    ts: int
    type: Literal["assistant_message", "note", "system", "tool_call", "tool_result", "user_message"]
    text: str
    # default: null
    toolCallId: NotRequired[str | None]
    # default: null
    toolName: NotRequired[str | None]
    # default: null
    meta: NotRequired[dict[str, str] | None]
    # default: 0
    tokens: NotRequired[int]
    # default: ""
    hash: NotRequired[str]
    # default: true
    verified: NotRequired[bool]


class EventInput(TypedDict):
    """An event as appended: the daemon assigns seq and hash, and ts/tokens when absent."""

    type: Literal["assistant_message", "note", "system", "tool_call", "tool_result", "user_message"]
    text: str
    # Unix time in milliseconds (UTC) of the event, as the client saw it; absent or null: the daemon's clock.
    # default: null
    ts: NotRequired[int | None]
    # default: null
    toolCallId: NotRequired[str | None]
    # default: null
    toolName: NotRequired[str | None]
    # default: null
    meta: NotRequired[dict[str, str] | None]
    # default: null
    tokens: NotRequired[int | None]


class ExportParams(TypedDict):
    workspace: str
    # default: "json"
    format: NotRequired[Literal["json", "markdown"]]
    # default: false
    includeArchived: NotRequired[bool]


class ExportResult(TypedDict):
    format: str
    data: str
    count: int
    # default: "workspace"
    level: NotRequired[Literal["user", "workspace"]]


class GetAttentionParams(TypedDict):
    workspace: str


class GetCheckpointParams(TypedDict):
    workspace: str
    checkpointId: str


class GetManifestParams(TypedDict):
    workspace: str
    sessionId: str
    # default: null
    callId: NotRequired[str | None]


class GetSettingsParams(TypedDict):
    workspace: str


class HistoryHit(TypedDict):
    """``score``: higher is better (negated BM25; a term count in incognito sessions)."""

    ref: str
    score: float
    event: Event
    # true: the hit alone was over 8 MiB as JSON, so event.text holds only its start; retrieve with ref (or read_events) returns the whole event.
    # default: false
    textCut: NotRequired[bool]
    # With textCut: how many characters the whole text has.
    # default: null
    textChars: NotRequired[int | None]


class HistoryParams(TypedDict):
    workspace: str
    id: str


class HistoryResult(TypedDict):
    """Why the daemon believes an entry: its proposal, sources, approval and later edits.
    ``unresolvedRefs``: those of ``sourceRefs`` (event, memory, checkpoint or episode refs)
    that name nothing the workspace stores now — written into a file by hand or by an
    older makad, or their session deleted since; never checked at the user level (its
    refs name the proposing workspace's events).
    """

    id: str
    entry: Entry | None
    proposalId: str | None
    sourceRefs: list[str]
    approvedBy: str | None
    # Unix time in milliseconds (UTC), or null.
    approvedAt: int | None
    events: list[MemoryEvent]
    # default: []
    unresolvedRefs: NotRequired[list[str]]


class ImportParams(TypedDict):
    """Either ``path`` (a file, or a Claude Code memory directory) or ``data`` (the text)."""

    workspace: str
    # default: null
    path: NotRequired[str | None]
    # default: null
    data: NotRequired[str | None]
    # default: null
    format: NotRequired[str | None]
    # default: null
    requestId: NotRequired[str | None]
    # default: false
    progress: NotRequired[bool]


class ImportProgressParams(TypedDict):
    """Params of ``import_progress``: how many of an import's items were checked (at the
    start, every 100, and at the end, before the reply), the workspace as the importer
    spelled it.
    """

    workspace: str
    done: int
    total: int


class ImportResultWire(TypedDict):
    format: str
    imported: list[str]
    duplicates: int
    errors: list[ItemError]
    skipped: list[ItemError]
    revision: int
    # default: 0
    deferred: NotRequired[int]


class IndexFailure(TypedDict):
    """A workspace whose semantic indexing keeps failing: the latest error, how many turns
    in a row failed, and the wait before the next try (doubling, at most five minutes).
    """

    workspace: str
    error: str
    attempts: int
    # A length of time in milliseconds.
    retryAfterMs: int


class ItemError(TypedDict):
    """Why one item (or the whole input, locator ``file``) was not imported; never its content."""

    locator: str
    reason: str


class ListBackupsParams(TypedDict):
    workspace: str


class ListCheckpointsParams(TypedDict):
    workspace: str
    sessionId: str


class ListEpisodesParams(TypedDict):
    """Filters combine; ``ids`` takes episode ids or ``episode:<id>`` refs."""

    workspace: str
    # default: null
    tag: NotRequired[str | None]
    # default: null
    sessionId: NotRequired[str | None]
    # Unix time in milliseconds (UTC): only episodes whose at is at or after it; null: all.
    # default: null
    since: NotRequired[int | None]
    # default: null
    ids: NotRequired[list[str] | None]
    # default: false
    includeDeleted: NotRequired[bool]
    # default: 1000
    limit: NotRequired[int]


class ListEpisodesResult(TypedDict):
    episodes: list[Episode]


class ListProposalsParams(TypedDict):
    workspace: str


class ListSessionsParams(TypedDict):
    workspace: str
    # default: true
    includeClosed: NotRequired[bool]


class LocalMemoryState(TypedDict):
    """The contract's LocalMemoryState plus revision, sha256, pendingCount, entries, warnings.

    ``warnings`` tells what the read found without failing: ``not_utf8`` names each line of
    MEMORY.md that is not valid UTF-8 (status stays ``ok``; those bytes are shown as cp1252
    and kept on disk), and PENDING.md's in one warning without a line; ``new_workspace``:
    the folder at this path is not the one the daemon knew (settings start at their
    defaults); ``ledger_reset``: the ledger was corrupt (or written by a newer makad: the
    message says so), moved aside and started over (privacy switches at their defaults);
    ``ledger_read_only``: the data directory's disk is full, the ledger is read as it was
    and every write fails with ``disk_full`` until space is freed; ``pinned_over_share``: a
    pinned entry (on its line) that a 1,500-token context pack has no room for, counting in
    a workspace the user level's pinned entries its packs show too (one of those: by title,
    without a line);
    ``text_outside_entries``, ``misplaced_file``, ``not_a_proposal``: text the daemon does
    not read as a memory; ``not_a_heading``: a ``##Title`` line (no space) or a ``# Title``
    line (one ``#``) inside an entry, read as part of it; ``pending_safe_mode``: PENDING.md
    is over the size cap, so none of its proposals is read (``pendingCount`` 0) until it is
    shrunk. About metadata comments
    typed by hand, on the comment's line, the token kept as written and the entry read as
    without it: ``unknown_value`` (a known key with a value this version does not
    understand: ``status=actve``, ``createdAt=2024-01-01``, ``confidence=1.5``),
    ``unknown_key`` (a key close to a known one: ``stauts=``, ``tag=``), ``bad_metadata``
    (no closing ``-->``, text after it, a token without ``=``, or ``maka-memory:`` misspelt
    or left out, so the comment is the entry's first line of content), ``duplicate_key`` (a key
    twice in one comment), ``duplicate_id`` (an id an earlier entry has), ``unlikely_date``
    (a ``createdAt``/``updatedAt`` read, but in seconds or microseconds:
    ``createdAt=1733500000`` reads as 1970-01-21); each message names the entry, the
    token, what it reads as and the likely spelling (a date in milliseconds).
    ``confidence`` (asked with ``includeConfidence``): entry id → how far it can be trusted
    and why, derived from who wrote it, its source refs and its age (or set by the user).
    """

    path: str
    enabled: bool
    agentReadEnabled: bool
    status: Literal["disabled", "error", "incognito_blocked", "ok", "safe_mode"]
    content: NotRequired[str]
    entryCount: int
    latestEntry: Entry | None
    reason: str | None
    revision: int
    sha256: str | None
    pendingCount: int
    # default: null
    entries: NotRequired[list[Entry] | None]
    # default: []
    warnings: NotRequired[list[WarningSchema]]
    # default: null
    confidence: NotRequired[dict[str, Confidence] | None]


class Manifest(TypedDict):
    """What one build_context call put in front of the model: each memory entry it
    sent (with the hash of the text shown) and the sources of its other segments.
    ``curator``: the curator's part of the call, when a curator strategy built it
    (in shadow mode, what the curator would have shown beside what was shown).
    """

    sessionId: str
    callId: str
    # Unix time in milliseconds (UTC).
    createdAt: int
    items: list[ManifestItem]
    # default: null
    curator: NotRequired[CuratorTrace | None]


class ManifestItem(TypedDict):
    sourceId: str
    tokens: int
    contentHash: str


class MemoryEvent(TypedDict):
    """One step in the lineage of a memory entry or proposal."""

    id: int
    # Unix time in milliseconds (UTC).
    ts: int
    action: str
    actor: str
    # default: null
    entryId: NotRequired[str | None]
    # default: null
    proposalId: NotRequired[str | None]
    # default: null
    data: NotRequired[dict[str, Any] | None]


class Message(TypedDict):
    """One provider-neutral history message; ``source_id`` is its event ref."""

    role: Literal["assistant", "system", "tool", "user"]
    content: str
    sourceId: str
    # default: null
    toolCalls: NotRequired[list[ToolCall] | None]
    # default: null
    toolCallId: NotRequired[str | None]


# A method that takes no params (an empty object, or none at all).
NoParams: TypeAlias = "dict[str, Any]"


class OpenSessionParams(TypedDict):
    """``incognito`` unset: a new session is incognito while the workspace is."""

    workspace: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: null
    title: NotRequired[str | None]
    # default: null
    incognito: NotRequired[bool | None]


class OutsideLine(TypedDict):
    """One stray line; ``where`` says where its memory is now (``memory``, ``pending``,
    ``rejected``), with the entry's or proposal's ``id``, or why it stays (``not_imported``).
    """

    line: int
    text: str
    where: str
    # default: null
    id: NotRequired[str | None]


class OwnedLine(TypedDict):
    """A line left out of one segment because another shows it.

    ``segment``: where it was left out; ``owner``: the segment that shows it;
    ``section``: the heading it stood under (``""`` before any); ``text``: the line.
    """

    segment: str
    owner: str
    section: str
    text: str
    # default: "owned_elsewhere"
    reason: NotRequired[str]


class PinEntryParams(TypedDict):
    """``pinned: true`` adds the ``pinned`` tag (the entry is then always a candidate of
    build_context, first in its memory segment); ``false`` removes it in any spelling. The
    other tags and the entry's dates stay as they are; an entry already so is not written.
    """

    workspace: str
    id: str
    # default: true
    pinned: NotRequired[bool]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class ProposalEdit(TypedDict):
    """What the user changed before approving. ``supersedes``: an active entry the approved
    one replaces (archived in the same write), e.g. a near duplicate merged into it.
    """

    title: NotRequired[str]
    content: NotRequired[str]
    tags: NotRequired[list[str]]
    supersedes: NotRequired[str | None]


class ProposalView(TypedDict):
    """An open proposal; ``note`` says why the daemon queued it itself, if it did:
    ``returned-after-a-save-lacked-it`` -- an entry a save of MEMORY.md (or PENDING.md)
    dropped that may have been deleted on purpose (PROTOCOL.md, "The user's edits").
    ``replaces``: the entry the proposal's ``supersedes`` names, as it is now (approving
    archives it when it is still active; a user-level entry a workspace proposal
    overrides carries its ``@user/<id>`` id); absent when it names none or that entry
    is gone.
    """

    proposal: Entry
    # default: []
    similarTo: NotRequired[list[str]]
    # default: null
    note: NotRequired[str | None]
    # default: null
    replaces: NotRequired[Entry | None]


class ProposalsResult(TypedDict):
    proposals: list[ProposalView]
    revision: int
    # not_utf8 for each line of PENDING.md that is not valid UTF-8, not_a_proposal for each section waiting for no review, pending_safe_mode when PENDING.md is over the size cap and none of its proposals is read (see read_state).
    # default: []
    warnings: NotRequired[list[WarningSchema]]


class ProposeParams(TypedDict):
    workspace: str
    title: str
    content: str
    # default: "extracted"
    origin: NotRequired[Literal["extracted"]]
    # default: []
    tags: NotRequired[list[str]]
    # default: "workspace"
    scope: NotRequired[Literal["global", "session", "workspace"]]
    # default: null
    sessionId: NotRequired[str | None]
    # default: []
    sourceRefs: NotRequired[list[str]]
    # default: null
    supersedes: NotRequired[str | None]
    # A length of time in milliseconds after createdAt when the entry archives itself; null: the workspace's defaultDecayDays.
    # default: null
    decayTtlMs: NotRequired[int | None]
    # default: false
    draft: NotRequired[bool]
    # default: null
    consolidates: NotRequired[Consolidates | None]
    # default: null
    requestId: NotRequired[str | None]


class ProposeResult(TypedDict):
    """``proposal`` is what was queued, or the existing duplicate when nothing was queued."""

    proposal: Entry | None
    queued: bool
    # default: null
    duplicateOf: NotRequired[str | None]
    # default: []
    similarTo: NotRequired[list[str]]
    # default: null
    previouslyRejected: NotRequired[RejectionInfo | None]
    # default: 0
    redactions: NotRequired[int]
    # default: 0
    revision: NotRequired[int]


class ReadEventsParams(TypedDict):
    workspace: str
    sessionId: str
    # default: 0
    afterSeq: NotRequired[int]
    # default: 1000
    limit: NotRequired[int]


class ReadEventsResult(TypedDict):
    events: list[Event]
    # The session's last seq (0 when it has no event), not the last one returned: page on with afterSeq set to the last returned event's seq.
    lastSeq: int
    # true: the session has events after the last one returned (limit reached, or the reply's 8 MiB bound: fewer than limit then); ask again with afterSeq set to that event's seq.
    hasMore: bool


class ReadStateParams(TypedDict):
    """``includeConfidence`` (with ``includeEntries``): also each entry's confidence.

    ``ifRevision``: a conditional read. When the workspace's revision is still this one
    (nothing in MEMORY.md, PENDING.md or the settings changed, the files re-checked on
    disk first), the reply is ``{notModified: true, revision}`` without the state.
    Revisions are unique across the workspaces of a data directory: one held for another
    folder (a symlink since repointed) never matches.
    ``includeContent: false`` leaves MEMORY.md's text (``content``) out of the state.
    """

    workspace: str
    # default: false
    includeEntries: NotRequired[bool]
    # default: false
    includeArchived: NotRequired[bool]
    # default: false
    includeConfidence: NotRequired[bool]
    # default: true
    includeContent: NotRequired[bool]
    # default: null
    ifRevision: NotRequired[int | None]


class RecordEpisodeParams(TypedDict):
    """``summary``: one line, at most 200 characters; ``sourceRefs``: ``event:`` refs
    to stored events; ``at``: when it happened (Unix ms, default now).
    """

    workspace: str
    sessionId: str
    summary: str
    sourceRefs: list[str]
    # default: []
    tags: NotRequired[list[str]]
    # Unix time in milliseconds (UTC); null: now.
    # default: null
    at: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class RecordEpisodeResult(TypedDict):
    """``recorded`` is false when the session already had this remark (that episode is
    returned); ``redactions``: secrets replaced in the summary.
    """

    episodeId: str
    episode: Episode
    recorded: bool
    # default: 0
    redactions: NotRequired[int]


class RefResult(TypedDict):
    """The events one ``event:`` ref names, and whether they verify against the chain.

    ``mismatched_seqs``: rows whose stored hash does not match their content.
    ``chain_intact``: the range's last event links to its successor (or is the
    session head); false when a row's hash was rewritten to match new content,
    or when the next event was altered — the two look the same from here.
    """

    ref: str
    sessionId: str
    fromSeq: int
    toSeq: int
    events: list[Event]
    ok: bool
    # default: true
    chainIntact: NotRequired[bool]
    # default: []
    mismatchedSeqs: NotRequired[list[int]]
    # default: []
    missingSeqs: NotRequired[list[int]]


class RejectParams(TypedDict):
    workspace: str
    ids: list[str]
    # default: null
    reason: NotRequired[str | None]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class RejectResult(TypedDict):
    rejected: list[str]
    revision: int


class RejectionInfo(TypedDict):
    proposalId: str
    reason: str | None
    # Unix time in milliseconds (UTC).
    rejectedAt: int


class RemoveOutsideTextParams(TypedDict):
    """``dryRun``: only say what would go. ``lines``: only these of the removable lines
    (file line numbers, as ``text_outside_entries`` names them). ``expectedRevision``:
    refuse with ``conflict`` when the workspace moved on since it was read.
    """

    workspace: str
    # default: false
    dryRun: NotRequired[bool]
    # default: null
    lines: NotRequired[list[int] | None]
    # default: null
    expectedRevision: NotRequired[int | None]


class RemoveOutsideTextResult(TypedDict):
    """``removed``: the lines taken out (with ``dryRun``: the ones that would be), each
    with ``where`` its memory is now (``memory``, ``pending`` or ``rejected``) and that
    entry's or proposal's ``id``; ``kept``: the other lines outside any entry
    (``where: not_imported``), which stay until they are imported or given a heading.
    """

    removed: list[OutsideLine]
    kept: list[OutsideLine]
    dryRun: bool
    revision: int


class RestoreBackupParams(TypedDict):
    workspace: str
    backupId: str
    # default: null
    expectedRevision: NotRequired[int | None]


class RestoreBackupResult(TypedDict):
    revision: int
    restored: str
    undoBackupId: str | None


class RetrieveParams(TypedDict):
    """``sessionId``: the asking session; refs into an incognito session resolve only
    from that session itself (elsewhere they come back missing).
    """

    workspace: str
    refs: list[str]
    # default: null
    sessionId: NotRequired[str | None]


class RetrieveResult(TypedDict):
    results: list[RefResult]
    # Refs left out, the last asked for, because the reply carries at most 8 MiB of events as JSON (one event at least): ask again for these. When a range ref was cut, its result holds the first events and the rest of its range leads.
    # default: []
    omitted: NotRequired[list[str]]


class ScoreParts(TypedDict):
    """The normalized parts a candidate's score is made of, each in [0, 1].

    Memory uses ``bm25``, ``recency`` and ``tags``; recall uses the others too
    (see ``makad.core.recall``) and leaves ``tags`` at 0.
    """

    bm25: float
    recency: float
    tags: float
    # default: 0.0
    context: NotRequired[float]
    # default: 0.0
    session: NotRequired[float]
    # default: 0.0
    speaker: NotRequired[float]
    # default: 0.0
    time: NotRequired[float]
    # default: 0.0
    semantic: NotRequired[float]


class SearchHistoryParams(TypedDict):
    """Without ``sessionId`` incognito sessions are never searched; with an incognito
    session's id, only that session is. ``query`` is read up to its first 16,384
    characters.
    """

    workspace: str
    query: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: 20
    limit: NotRequired[int]
    # Unix time in milliseconds (UTC): only events whose ts is before it; null: no bound.
    # default: null
    before: NotRequired[int | None]
    # Unix time in milliseconds (UTC): only events whose ts is after it; null: no bound.
    # default: null
    after: NotRequired[int | None]


class SearchHistoryResult(TypedDict):
    hits: list[HistoryHit]
    # Hits found but left out, the lowest ranked, because the reply carries at most 8 MiB of hits as JSON (one at least); narrow the query, sessionId or before/after to reach them.
    # default: 0
    omitted: NotRequired[int]


class Segment(TypedDict):
    """One part of the system prompt; ``tokens`` is ``counter.count(text)``."""

    kind: Literal["attention", "memory", "recall", "summary", "working_state"]
    text: str
    tokens: int
    sourceIds: list[str]


class SemanticStatus(TypedDict):
    """The semantic channel (makad's docs/SEMANTIC.md): its model and how far indexing has got.

    ``state``: ``loading`` (requests go on lexically meanwhile), ``ready``, or ``failed``
    (``message`` says why; the daemon goes on without the channel). While ``ready``,
    ``message`` is set when a workspace's indexing keeps failing (``indexFailures`` lists
    each: its vectors stay as they are and it is tried again later). ``caughtUp``: every
    event appended and every entry written so far has its vector (never while ``loading``
    or ``failed``). ``eventsPerSecond``: the indexer's throughput since start (its
    embedding time only).
    """

    # What --embedding-model named while state is loading (or failed), then the name its vectors are stored under: the model folder's or file's name and a digest of its weights (model-1ddd09b6d051).
    model: str
    state: Literal["failed", "loading", "ready"]
    # default: null
    message: NotRequired[str | None]
    # A length of time in milliseconds, fractional, or null.
    # default: null
    loadMs: NotRequired[float | None]
    # default: 0
    eventsIndexed: NotRequired[int]
    # default: 0
    eventsPending: NotRequired[int]
    # default: 0
    entriesIndexed: NotRequired[int]
    # default: 0
    entriesPending: NotRequired[int]
    # default: false
    caughtUp: NotRequired[bool]
    # default: null
    eventsPerSecond: NotRequired[float | None]
    # default: []
    indexFailures: NotRequired[list[IndexFailure]]


class SessionParams(TypedDict):
    workspace: str
    sessionId: str


class SessionView(TypedDict):
    """A session's head. ``incognito``: kept in memory only, gone when the daemon stops."""

    sessionId: str
    title: str | None
    # Unix time in milliseconds (UTC).
    createdAt: int
    # Unix time in milliseconds (UTC), or null.
    closedAt: int | None
    eventCount: int
    lastSeq: int
    lastHash: str
    incognito: bool


class SessionsResult(TypedDict):
    sessions: list[SessionView]


class SetSettingsParams(TypedDict):
    """Patch semantics: only the fields given change."""

    workspace: str
    enabled: NotRequired[bool]
    agentReadEnabled: NotRequired[bool]
    # A length of time in days, fractional, from 1 ms (1.2e-8) to 106751991167; null: no default decay.
    defaultDecayDays: NotRequired[float | None]
    extractToolEnabled: NotRequired[bool]
    incognito: NotRequired[bool]
    historyRecallEnabled: NotRequired[bool]
    contextStrategy: NotRequired[Literal["curator", "curator_shadow", "deterministic", "full", "recent", "summary"]]
    attentionEnabled: NotRequired[bool]


class SetWorkingStateParams(TypedDict):
    """Lists given replace the stored ones; ``notes`` merge by section ("" removes one)."""

    workspace: str
    sessionId: str
    # default: null
    goals: NotRequired[list[str] | None]
    # default: null
    openThreads: NotRequired[list[str] | None]
    # default: null
    decisions: NotRequired[list[str] | None]
    # default: null
    notes: NotRequired[dict[str, str] | None]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class SetWorkingStateResult(TypedDict):
    goals: list[str]
    openThreads: list[str]
    decisions: list[str]
    notes: dict[str, str]
    revision: int
    # default: 0
    redactions: NotRequired[int]


class Settings(TypedDict):
    """A workspace's privacy and memory switches (persisted across restarts).

    ``context_strategy``: build_context's strategy when a call names none.
    """

    # default: true
    enabled: NotRequired[bool]
    # default: false
    agentReadEnabled: NotRequired[bool]
    # A length of time in days, fractional; null: no default decay.
    # default: null
    defaultDecayDays: NotRequired[float | None]
    # default: false
    extractToolEnabled: NotRequired[bool]
    # default: false
    incognito: NotRequired[bool]
    # default: false
    historyRecallEnabled: NotRequired[bool]
    # default: "deterministic"
    contextStrategy: NotRequired[Literal["curator", "curator_shadow", "deterministic", "full", "recent", "summary"]]
    # default: true
    attentionEnabled: NotRequired[bool]
    # default: false
    extractToolEffective: NotRequired[bool]


class ShutdownResult(TypedDict):
    stopping: bool


class Skipped(TypedDict):
    """A source left out of the pack as a whole, and why.

    ``reason``: ``safe_mode`` (MEMORY.md is over its size cap) or ``unreadable``
    (it could not be read); ``message`` is for people.
    """

    source: Literal["memory"]
    reason: Literal["safe_mode", "unreadable"]
    message: str


class StateNotModified(TypedDict):
    """The answer to ``read_state {ifRevision}`` when nothing changed since that revision."""

    notModified: Literal[True]
    revision: int


class StatusResult(TypedDict):
    version: str
    pid: int
    # A length of time in milliseconds.
    uptimeMs: int
    socket: str
    dataDir: str
    connections: int
    # default: []
    warnings: NotRequired[list[WorkspaceWarning]]
    # default: false
    socketActivated: NotRequired[bool]
    # default: []
    contextPaths: NotRequired[list[ContextPaths]]
    semantic: NotRequired[SemanticStatus]
    limits: NotRequired[DaemonLimits]


class SubscribeParams(TypedDict):
    workspace: str


class SubscribeResult(TypedDict):
    workspace: str
    revision: int


class SuggestParams(TypedDict):
    """``sessionId``: the session asking (its own threads are not suggested back to it, and
    an incognito one gets nothing). ``explain``: also list every candidate, the skipped
    ones with score 0 and the reason (one over the threshold not offered says why).
    """

    workspace: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: false
    explain: NotRequired[bool]


class SuggestResult(TypedDict):
    """What is worth offering the user now (makad's docs/ATTENTION.md, Suggestions), best first.

    ``enabled`` false: nothing is suggested and ``silenced`` says why (``attention_off``,
    ``incognito``: the workspace, ``session_incognito``, ``agent_reads_off``); with
    ``enabled`` true, ``silenced`` is ``not_derived`` while the attention state has not been
    derived yet (it will be, off the request path). ``threshold``: the score a suggestion
    needs; ``cooldownMs``: how long ``dismiss_suggestion`` hides one by default;
    ``computedAt``: when the attention state they come from was derived (ms), 0 when
    there is none (``silenced`` set).
    """

    enabled: bool
    suggestions: list[Suggestion]
    threshold: float
    # A length of time in milliseconds.
    cooldownMs: int
    # Unix time in milliseconds (UTC) of the attention state used; 0 when there is none.
    # default: 0
    computedAt: NotRequired[int]
    # default: null
    silenced: NotRequired[Literal["agent_reads_off", "attention_off", "incognito", "not_derived", "session_incognito"] | None]
    # default: null
    candidates: NotRequired[list[Suggestion] | None]


class Suggestion(TypedDict):
    """One thing worth offering the user, with its score and why."""

    id: str
    kind: str
    text: str
    score: float
    reason: str
    refs: list[str]


class ToolCall(TypedDict):
    id: str
    name: str
    arguments: str


class Trace(TypedDict):
    """Why the pack looks the way it does.

    - ``candidates``: every memory entry and the best ``recall_trace_max``
      recall candidates, best first per kind;
    - ``dropped``: how many candidates each reason left out (listed or not);
    - ``allocation``: per kind, in priority order, history last;
    - ``minimum_tokens``: the newest user message, the least a pack can be;
    - ``history_dropped``: live-history messages left out (events beyond the
      look-back horizon count one each);
    - ``history_repaired``: messages and calls removed to close tool pairs;
    - ``placeholders``: refs of tool results replaced by a placeholder;
    - ``tampered``: refs of events left out because they fail their hash
      check (``dropped["tampered"]`` counts them);
    - ``skipped``: sources left out whole (memory in safe mode, unreadable);
    - ``memory_session_bytes``: memory shown in this session since its last
      compaction, this call included (the cumulative cap's measure);
    - ``path``: ``fast`` (nothing ranked or cut; with ``curator``: the model was
      not asked, as no kind was under pressure), ``bounded`` (ranked or cut to the
      budget), ``slow`` (the LLM curator's pick was used) or ``fallback`` (the
      curator was needed and failed or was gated: the deterministic pack,
      ``curator.reason`` says why);
    - ``strategy``: the strategy that built the pack (``makad.core.strategies``);
    - ``curator``: the curator's part, when a curator strategy ran;
    - ``owned_elsewhere``: lines of the summary left out because the working state
      shows them, and attention lines the working state, the summary, memory or the
      session's own history already carry (one segment per fact,
      ``makad.core.ownership``); ``dropped`` counts them under ``owned_elsewhere``;
    - ``empty_reason``: set when the pack has no segment and no message, why
      (``makad.core.empty_pack``): ``reads_off``, ``incognito``, ``memory_unavailable``,
      ``nothing_yet``, ``nothing_matched``, ``budget_too_small`` or ``not_included``;
    - ``attention``: why the attention segment may be in the pack — ``no_session`` (a
      call without a session), ``first_pack`` (the session's first), ``asked``
      (``include`` names it) — or is not: ``later_pack`` (the session was shown it in its
      first pack), ``not_included`` (``include`` leaves it out), ``reads_off`` (memory or
      agent reads off), ``incognito`` (the workspace or the session), ``attention_off``
      (``attentionEnabled`` off). A pack that may carry it shows none when the state has
      no line the pack does not already carry.
    """

    path: Literal["bounded", "fallback", "fast", "slow"]
    candidates: list[TraceCandidate]
    dropped: dict[str, int]
    allocation: list[Allocation]
    minimumTokens: int
    historyDropped: int
    historyRepaired: int
    placeholders: list[str]
    # default: []
    tampered: NotRequired[list[str]]
    # default: []
    skipped: NotRequired[list[Skipped]]
    # default: 0
    memorySessionBytes: NotRequired[int]
    # default: "deterministic"
    strategy: NotRequired[str]
    # default: null
    curator: NotRequired[CuratorTrace | None]
    # default: []
    ownedElsewhere: NotRequired[list[OwnedLine]]
    # default: null
    emptyReason: NotRequired[Literal["budget_too_small", "incognito", "memory_unavailable", "not_included", "nothing_matched", "nothing_yet", "reads_off"] | None]
    # default: null
    attention: NotRequired[Literal["asked", "attention_off", "first_pack", "incognito", "later_pack", "no_session", "not_included", "reads_off"] | None]


class TraceCandidate(TypedDict):
    """One memory entry, attention line or recall candidate considered, and what became of it.

    A recall candidate is one event: a full-text hit or a neighbour of one. An attention
    candidate is one line of the workspace's attention state (``title``: its text,
    ``sourceId``: its first ref).
    """

    kind: Literal["attention", "memory", "recall"]
    sourceId: str
    score: float
    parts: ScoreParts
    included: bool
    # default: null
    reason: NotRequired[str | None]
    # default: 0
    tokens: NotRequired[int]
    # default: null
    contentHash: NotRequired[str | None]
    # default: null
    confidence: NotRequired[Confidence | None]
    # default: 0
    bytes: NotRequired[int]
    title: NotRequired[str]
    pinned: NotRequired[bool]
    supersededBy: NotRequired[str]


class UpdateEntryParams(TypedDict):
    workspace: str
    id: str
    title: NotRequired[str]
    content: NotRequired[str]
    tags: NotRequired[list[str]]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class WarningSchema(TypedDict):
    """Something a read found worth telling the user; the read still succeeded.

    ``kind`` is stable (``not_utf8``, ...), ``line`` is 1-based when the warning is
    about one line of a file, ``message`` is for people, ``entry_id`` the entry it is about
    (a metadata comment's, a pinned entry's).
    """

    kind: str
    # default: null
    line: NotRequired[int | None]
    message: str
    # default: null
    entryId: NotRequired[str | None]


class WorkingState(TypedDict):
    """A session's working state: what the agent is doing right now."""

    # default: []
    goals: NotRequired[list[str]]
    # default: []
    openThreads: NotRequired[list[str]]
    # default: []
    decisions: NotRequired[list[str]]
    # default: {}
    notes: NotRequired[dict[str, str]]
    # default: 0
    revision: NotRequired[int]


class WorkspaceWarning(TypedDict):
    """A workspace warning (as in read_state) the daemon has seen since it started."""

    workspace: str
    kind: str
    message: str
    # Unix time in milliseconds (UTC).
    at: int


class GetSettingsArgs(TypedDict):
    """Params of ``get_settings``."""

    workspace: str


class SetSettingsArgs(TypedDict):
    """Params of ``set_settings``."""

    workspace: str
    enabled: NotRequired[bool]
    agentReadEnabled: NotRequired[bool]
    # A length of time in days, fractional, from 1 ms (1.2e-8) to 106751991167; null: no default decay.
    defaultDecayDays: NotRequired[float | None]
    extractToolEnabled: NotRequired[bool]
    incognito: NotRequired[bool]
    historyRecallEnabled: NotRequired[bool]
    contextStrategy: NotRequired[Literal["curator", "curator_shadow", "deterministic", "full", "recent", "summary"]]
    attentionEnabled: NotRequired[bool]


class ReadStateArgs(TypedDict):
    """Params of ``read_state``."""

    workspace: str
    # default: false
    includeEntries: NotRequired[bool]
    # default: false
    includeArchived: NotRequired[bool]
    # default: false
    includeConfidence: NotRequired[bool]
    # default: true
    includeContent: NotRequired[bool]
    # default: null
    ifRevision: NotRequired[int | None]


class AddEntryArgs(TypedDict):
    """Params of ``add_entry``."""

    workspace: str
    title: str
    content: str
    # default: []
    tags: NotRequired[list[str]]
    # default: "workspace"
    scope: NotRequired[Literal["global", "session", "workspace"]]
    # default: null
    sessionId: NotRequired[str | None]
    # A length of time in milliseconds after createdAt when the entry archives itself; null: the workspace's defaultDecayDays.
    # default: null
    decayTtlMs: NotRequired[int | None]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class UpdateEntryArgs(TypedDict):
    """Params of ``update_entry``."""

    workspace: str
    id: str
    title: NotRequired[str]
    content: NotRequired[str]
    tags: NotRequired[list[str]]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class PinEntryArgs(TypedDict):
    """Params of ``pin_entry``."""

    workspace: str
    id: str
    # default: true
    pinned: NotRequired[bool]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class ArchiveEntryArgs(TypedDict):
    """Params of ``archive_entry``."""

    workspace: str
    id: str
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class RestoreEntryArgs(TypedDict):
    """Params of ``restore_entry``."""

    workspace: str
    id: str
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class DeleteEntryArgs(TypedDict):
    """Params of ``delete_entry``."""

    workspace: str
    id: str
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class RemoveOutsideTextArgs(TypedDict):
    """Params of ``remove_outside_text``."""

    workspace: str
    # default: false
    dryRun: NotRequired[bool]
    # default: null
    lines: NotRequired[list[int] | None]
    # default: null
    expectedRevision: NotRequired[int | None]


class ListBackupsArgs(TypedDict):
    """Params of ``list_backups``."""

    workspace: str


class RestoreBackupArgs(TypedDict):
    """Params of ``restore_backup``."""

    workspace: str
    backupId: str
    # default: null
    expectedRevision: NotRequired[int | None]


class SubscribeArgs(TypedDict):
    """Params of ``subscribe``."""

    workspace: str


class UnsubscribeArgs(TypedDict):
    """Params of ``unsubscribe``."""

    workspace: str


class ProposeArgs(TypedDict):
    """Params of ``propose``."""

    workspace: str
    title: str
    content: str
    # default: "extracted"
    origin: NotRequired[Literal["extracted"]]
    # default: []
    tags: NotRequired[list[str]]
    # default: "workspace"
    scope: NotRequired[Literal["global", "session", "workspace"]]
    # default: null
    sessionId: NotRequired[str | None]
    # default: []
    sourceRefs: NotRequired[list[str]]
    # default: null
    supersedes: NotRequired[str | None]
    # A length of time in milliseconds after createdAt when the entry archives itself; null: the workspace's defaultDecayDays.
    # default: null
    decayTtlMs: NotRequired[int | None]
    # default: false
    draft: NotRequired[bool]
    # default: null
    consolidates: NotRequired[Consolidates | None]
    # default: null
    requestId: NotRequired[str | None]


class ListProposalsArgs(TypedDict):
    """Params of ``list_proposals``."""

    workspace: str


class ApproveArgs(TypedDict):
    """Params of ``approve``."""

    workspace: str
    ids: list[str]
    # default: {}
    edits: NotRequired[dict[str, ProposalEdit]]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class RejectArgs(TypedDict):
    """Params of ``reject``."""

    workspace: str
    ids: list[str]
    # default: null
    reason: NotRequired[str | None]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class MemoryHistoryArgs(TypedDict):
    """Params of ``memory_history``."""

    workspace: str
    id: str


class ImportMemoriesArgs(TypedDict):
    """Params of ``import_memories``."""

    workspace: str
    # default: null
    path: NotRequired[str | None]
    # default: null
    data: NotRequired[str | None]
    # default: null
    format: NotRequired[str | None]
    # default: null
    requestId: NotRequired[str | None]
    # default: false
    progress: NotRequired[bool]


class ExportMemoriesArgs(TypedDict):
    """Params of ``export_memories``."""

    workspace: str
    # default: "json"
    format: NotRequired[Literal["json", "markdown"]]
    # default: false
    includeArchived: NotRequired[bool]


class BuildContextArgs(TypedDict):
    """Params of ``build_context``."""

    workspace: str
    budgetTokens: int
    # default: null
    sessionId: NotRequired[str | None]
    # default: null
    query: NotRequired[str | None]
    # default: null
    include: NotRequired[list[Literal["attention", "memory", "recall", "summary", "working_state"]] | None]
    # default: null
    strategy: NotRequired[Literal["curator", "curator_shadow", "deterministic", "full", "recent", "summary"] | None]


class GetAttentionArgs(TypedDict):
    """Params of ``get_attention``."""

    workspace: str


class SuggestArgs(TypedDict):
    """Params of ``suggest``."""

    workspace: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: false
    explain: NotRequired[bool]


class DismissSuggestionArgs(TypedDict):
    """Params of ``dismiss_suggestion``."""

    workspace: str
    id: str
    # A length of time in milliseconds, 0 to 31536000000 (a year); null: the daemon's cooldown.
    # default: null
    forMs: NotRequired[int | None]


class CompactArgs(TypedDict):
    """Params of ``compact``."""

    workspace: str
    sessionId: str
    mode: Literal["checkpoint", "semantic"]
    # default: null
    summary: NotRequired[str | None]
    # default: null
    keepRecentTokens: NotRequired[int | None]
    # default: "manual"
    reason: NotRequired[Literal["budget", "manual", "overflow"]]
    # default: null
    requestId: NotRequired[str | None]


class ListCheckpointsArgs(TypedDict):
    """Params of ``list_checkpoints``."""

    workspace: str
    sessionId: str


class GetCheckpointArgs(TypedDict):
    """Params of ``get_checkpoint``."""

    workspace: str
    checkpointId: str


class OpenSessionArgs(TypedDict):
    """Params of ``open_session``."""

    workspace: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: null
    title: NotRequired[str | None]
    # default: null
    incognito: NotRequired[bool | None]


class ListSessionsArgs(TypedDict):
    """Params of ``list_sessions``."""

    workspace: str
    # default: true
    includeClosed: NotRequired[bool]


class CloseSessionArgs(TypedDict):
    """Params of ``close_session``."""

    workspace: str
    sessionId: str


class DeleteSessionArgs(TypedDict):
    """Params of ``delete_session``."""

    workspace: str
    sessionId: str


class AppendEventsArgs(TypedDict):
    """Params of ``append_events``."""

    workspace: str
    sessionId: str
    events: list[EventInput]
    # default: null
    expectedSeq: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class ReadEventsArgs(TypedDict):
    """Params of ``read_events``."""

    workspace: str
    sessionId: str
    # default: 0
    afterSeq: NotRequired[int]
    # default: 1000
    limit: NotRequired[int]


class SearchHistoryArgs(TypedDict):
    """Params of ``search_history``."""

    workspace: str
    query: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: 20
    limit: NotRequired[int]
    # Unix time in milliseconds (UTC): only events whose ts is before it; null: no bound.
    # default: null
    before: NotRequired[int | None]
    # Unix time in milliseconds (UTC): only events whose ts is after it; null: no bound.
    # default: null
    after: NotRequired[int | None]


class RetrieveArgs(TypedDict):
    """Params of ``retrieve``."""

    workspace: str
    refs: list[str]
    # default: null
    sessionId: NotRequired[str | None]


class GetWorkingStateArgs(TypedDict):
    """Params of ``get_working_state``."""

    workspace: str
    sessionId: str


class SetWorkingStateArgs(TypedDict):
    """Params of ``set_working_state``."""

    workspace: str
    sessionId: str
    # default: null
    goals: NotRequired[list[str] | None]
    # default: null
    openThreads: NotRequired[list[str] | None]
    # default: null
    decisions: NotRequired[list[str] | None]
    # default: null
    notes: NotRequired[dict[str, str] | None]
    # default: null
    expectedRevision: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class GetManifestArgs(TypedDict):
    """Params of ``get_manifest``."""

    workspace: str
    sessionId: str
    # default: null
    callId: NotRequired[str | None]


class RecordEpisodeArgs(TypedDict):
    """Params of ``record_episode``."""

    workspace: str
    sessionId: str
    summary: str
    sourceRefs: list[str]
    # default: []
    tags: NotRequired[list[str]]
    # Unix time in milliseconds (UTC); null: now.
    # default: null
    at: NotRequired[int | None]
    # default: null
    requestId: NotRequired[str | None]


class ListEpisodesArgs(TypedDict):
    """Params of ``list_episodes``."""

    workspace: str
    # default: null
    tag: NotRequired[str | None]
    # default: null
    sessionId: NotRequired[str | None]
    # Unix time in milliseconds (UTC): only episodes whose at is at or after it; null: all.
    # default: null
    since: NotRequired[int | None]
    # default: null
    ids: NotRequired[list[str] | None]
    # default: false
    includeDeleted: NotRequired[bool]
    # default: 1000
    limit: NotRequired[int]


class ConsolidationCandidatesArgs(TypedDict):
    """Params of ``consolidation_candidates``."""

    workspace: str
    # default: null
    tag: NotRequired[str | None]
    # default: 5
    minEpisodes: NotRequired[int]
    # default: 2
    minSessions: NotRequired[int]


class ConsolidateArgs(TypedDict):
    """Params of ``consolidate``."""

    workspace: str
    tag: str
    # default: null
    sessionId: NotRequired[str | None]
    # default: null
    requestId: NotRequired[str | None]
