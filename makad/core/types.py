"""Plain data shared by the pure core, the stores and the wire.

These Structs carry camelCase names on the wire (``rename="camel"``) so the
service can return them as they are. No IO here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

Origin = Literal["manual", "extracted", "imported", "unknown"]
EntryStatus = Literal["active", "archived", "review_required", "draft"]
Scope = Literal["workspace", "session", "global"]
EventType = Literal["user_message", "assistant_message", "tool_call", "tool_result", "system", "note"]
NOTE_SECTIONS: tuple[str, ...] = (
    "Current State",
    "Task specification",
    "Files and Functions",
    "Workflow",
    "Errors & Corrections",
    "Learnings",
    "Key results",
    "Worklog",
)
# The largest integer SQLite stores and a memory file's metadata reads back: every integer
# a client sends that is stored or looked up stays within it.
MAX_INT64 = 2**63 - 1
# Times and lengths of time, as the OpenRPC document and the generated client types
# describe them: every time on the wire is an integer of Unix milliseconds (UTC), every
# length of time milliseconds (a field named ``…Days``: days).
UnixMs = Annotated[int, Meta(description="Unix time in milliseconds (UTC).")]
MaybeUnixMs = Annotated[int | None, Meta(description="Unix time in milliseconds (UTC), or null.")]
DurationMs = Annotated[int, Meta(description="A length of time in milliseconds.")]
FloatMs = Annotated[float, Meta(description="A length of time in milliseconds, fractional.")]
# What a working state's notes may hold (set_working_state refuses more).
MAX_NOTE_SECTION_TOKENS = 2_000
MAX_NOTES_TOKENS = 12_000


class Record(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=False):
    """Base of every shared record: camelCase on the wire, keyword-only."""


class Entry(Record):
    """One memory entry (active or archived in MEMORY.md, open in PENDING.md)."""

    id: str
    title: str
    content: str
    origin: Origin = "unknown"
    created_at: Annotated[int, Meta(description="Unix time in milliseconds (UTC); 0 when unknown.")] = 0
    updated_at: Annotated[int, Meta(description="Unix time in milliseconds (UTC); 0 when unknown.")] = 0
    status: EntryStatus = "active"
    tags: list[str] = []
    decay_ttl_ms: Annotated[
        int | None,
        Meta(
            description="A length of time in milliseconds after createdAt when the entry archives "
            "itself; null or 0: never."
        ),
    ] = None
    scope: Scope = "workspace"
    session_id: str | None = None
    source_refs: list[str] = []
    supersedes: str | None = None


class Event(Record):
    """One ledger event as stored: immutable once acknowledged."""

    session_id: str
    seq: int
    ts: UnixMs
    type: EventType
    text: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    meta: dict[str, str] | None = None
    tokens: int = 0
    hash: str = ""
    # False when a read found that the event does not chain (it may have been altered
    # on disk): read_events, search_history and retrieve check every event they return.
    # Not part of the hash.
    verified: bool = True


class WorkingState(Record):
    """A session's working state: what the agent is doing right now."""

    goals: list[str] = []
    open_threads: list[str] = []
    decisions: list[str] = []
    notes: dict[str, str] = {}
    revision: int = 0


class Coverage(Record):
    from_seq: int
    to_seq: int


class Checkpoint(Record):
    """What one compaction covers: never deletes the events it summarizes."""

    checkpoint_id: str
    session_id: str
    boundary_seq: int
    coverage: Coverage
    covered_hash: str
    summary: str
    summary_tokens: int
    preserved_from_seq: int
    mode: Literal["semantic", "checkpoint"]
    reason: Literal["manual", "budget", "overflow"]
    created_at: UnixMs


# --------------------------------------------------------------------------- sessions


class EventInput(msgspec.Struct, kw_only=True, rename="camel", forbid_unknown_fields=True):
    """An event as appended: the daemon assigns seq and hash, and ts/tokens when absent."""

    type: EventType
    text: str
    ts: Annotated[
        Annotated[int, Meta(ge=-MAX_INT64 - 1, le=MAX_INT64)] | None,
        Meta(
            description="Unix time in milliseconds (UTC) of the event, as the client saw it; absent "
            "or null: the daemon's clock."
        ),
    ] = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    meta: dict[str, str] | None = None
    tokens: Annotated[int, Meta(ge=0, le=MAX_INT64)] | None = None


class SessionInfo(Record):
    """One session's row: its chain head and counters."""

    session_id: str
    title: str | None
    created_at: UnixMs
    closed_at: MaybeUnixMs
    event_count: int
    last_seq: int
    last_hash: str


class AppendResult(Record):
    """The seqs an append was given; ``redactions`` is what the caller redacted from it."""

    first_seq: int
    last_seq: int
    redactions: int = 0


class SearchHit(Record):
    """An event matching a query; ``score`` is the negated FTS5 bm25, higher is better."""

    event: Event
    score: float


class RefResult(Record):
    """The events one ``event:`` ref names, and whether they verify against the chain.

    ``mismatched_seqs``: rows whose stored hash does not match their content.
    ``chain_intact``: the range's last event links to its successor (or is the
    session head); false when a row's hash was rewritten to match new content,
    or when the next event was altered — the two look the same from here.
    """

    ref: str
    session_id: str
    from_seq: int
    to_seq: int
    events: list[Event]
    ok: bool
    chain_intact: bool = True
    mismatched_seqs: list[int] = msgspec.field(default_factory=list)
    missing_seqs: list[int] = msgspec.field(default_factory=list)


class ManifestItem(Record):
    source_id: str
    tokens: int
    content_hash: str


CuratorStatus = Literal["ok", "skipped", "failed", "gated", "unconfigured"]
CuratedKind = Literal["memory", "recall"]


class CuratorTrace(Record):
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
    status: CuratorStatus
    reason: str | None = None
    pressure: list[CuratedKind] = []
    offered: int = 0
    selected: list[str] = []
    ignored: list[str] = []
    packed: list[str] = []
    trimmed: int = 0
    overlap: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: FloatMs = 0.0


class Manifest(Record):
    """What one build_context call put in front of the model: each memory entry it
    sent (with the hash of the text shown) and the sources of its other segments.
    ``curator``: the curator's part of the call, when a curator strategy built it
    (in shadow mode, what the curator would have shown beside what was shown)."""

    session_id: str
    call_id: str
    created_at: UnixMs
    items: list[ManifestItem]
    curator: CuratorTrace | None = None


# --------------------------------------------------------------------------- memory lineage


class MemoryEvent(Record):
    """One step in the lineage of a memory entry or proposal."""

    id: int
    ts: UnixMs
    action: str
    actor: str
    entry_id: str | None = None
    proposal_id: str | None = None
    data: dict[str, Any] | None = None


class NewMemoryEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A lineage step to append (the ledger gives it its id and time)."""

    action: str
    actor: str
    entry_id: str | None = None
    proposal_id: str | None = None
    data: dict[str, Any] | None = None


# --------------------------------------------------------------------------- episodes

EpisodeKind = Literal["client", "session_close"]
ConsolidationState = Literal["queued", "approved", "rejected", "deleted"]


class NewEpisode(Record):
    """An episode to record; its text is already redacted and its tags normalized."""

    episode_id: str
    session_id: str
    kind: EpisodeKind
    summary: str
    tags: list[str]
    source_refs: list[str]
    at: int


class ConsolidationMark(Record):
    """A consolidation that cited an episode: the proposal, its tag and what became of it."""

    proposal_id: str
    tag: str
    state: ConsolidationState
    entry_id: str | None = None


class Episode(Record):
    """One episode. ``kind``: ``client`` (record_episode) or ``session_close`` (derived
    by close_session). ``consolidations``: the proposals that cited it and their fate.
    A deleted session's episodes come back (with ``includeDeleted``) with ``deletedAt``
    set and their summary, tags and refs erased."""

    episode_id: str
    session_id: str
    kind: EpisodeKind
    summary: str
    tags: list[str]
    source_refs: list[str]
    at: UnixMs
    created_at: UnixMs
    deleted_at: MaybeUnixMs = None
    consolidations: list[ConsolidationMark] = []


class EpisodeRecord(Episode, kw_only=True):
    """One stored episode: ``ordinal`` is the recording order the tag offsets count on
    (the store's own; the wire shows the ``Episode`` without it)."""

    ordinal: int

    def view(self) -> Episode:
        """The episode as the wire shows it."""
        return Episode(**{name: getattr(self, name) for name in Episode.__struct_fields__})


# --------------------------------------------------------------------------- workspaces


# How build_context chooses what to show (``makad.core.strategies``).
ContextStrategy = Literal["deterministic", "full", "recent", "summary", "curator", "curator_shadow"]


class Settings(msgspec.Struct, kw_only=True, rename="camel"):
    """A workspace's privacy and memory switches (persisted across restarts).

    ``context_strategy``: build_context's strategy when a call names none.
    """

    enabled: bool = True
    agent_read_enabled: bool = False
    default_decay_days: Annotated[
        float | None, Meta(description="A length of time in days, fractional; null: no default decay.")
    ] = None
    extract_tool_enabled: bool = False
    incognito: bool = False
    history_recall_enabled: bool = False
    context_strategy: ContextStrategy = "deterministic"
    # Behavior records and the attention state are derived and kept (docs/ATTENTION.md).
    attention_enabled: bool = True
    # Derived: extractToolEnabled only counts while agentReadEnabled is on.
    extract_tool_effective: bool = False


class Warning(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=True):
    """Something a read found worth telling the user; the read still succeeded.

    ``kind`` is stable (``not_utf8``, ...), ``line`` is 1-based when the warning is
    about one line of a file, ``message`` is for people, ``entry_id`` the entry it is about
    (a metadata comment's, a pinned entry's).
    """

    kind: str
    line: int | None = None
    message: str
    entry_id: str | None = None


class BackupInfo(msgspec.Struct, kw_only=True, rename="camel"):
    backup_id: str
    file: str  # "MEMORY" | "PENDING"
    created_at: UnixMs
    size: int
    sha256: str
