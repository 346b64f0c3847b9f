"""What context assembly takes in and gives back.

The output Structs (``ContextPack`` and its parts) are wire-ready: camelCase
keys, keyword-only. The inputs (``ContextInputs``) are what the service layer
gathers from the stores before calling ``makad.core.assembly.assemble``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

import msgspec
from msgspec import UNSET, UnsetType

from makad.core.attention import AttentionLine
from makad.core.confidence import Confidence
from makad.core.ownership import OwnedLine
from makad.core.types import MAX_NOTES_TOKENS, Checkpoint, CuratorTrace, Entry, Event, Warning, WorkingState

SegmentKind = Literal["memory", "working_state", "summary", "attention", "recall"]
# Priority order: a kind earlier in this tuple is served first from the budget.
SEGMENT_KINDS: tuple[SegmentKind, ...] = ("working_state", "summary", "memory", "attention", "recall")
AllocationKind = Literal["memory", "working_state", "summary", "attention", "recall", "history"]
Role = Literal["user", "assistant", "tool", "system"]
# Why a pack is empty (``makad.core.empty_pack``).
EmptyReason = Literal[
    "reads_off",
    "incognito",
    "memory_unavailable",
    "nothing_yet",
    "nothing_matched",
    "budget_too_small",
    "not_included",
]

# Why a pack carries the attention segment (``no_session``, ``first_pack``, ``asked``) or
# not (the others): ``Trace.attention``.
AttentionReason = Literal[
    "no_session",
    "first_pack",
    "asked",
    "later_pack",
    "not_included",
    "reads_off",
    "incognito",
    "attention_off",
]


class _Wire(msgspec.Struct, kw_only=True, rename="camel"):
    """Base of the output records: camelCase keys, keyword-only."""


# ---------------------------------------------------------------- output ---


class Segment(_Wire):
    """One part of the system prompt; ``tokens`` is ``counter.count(text)``."""

    kind: SegmentKind
    text: str
    tokens: int
    source_ids: list[str]


class ToolCall(_Wire):
    id: str
    name: str
    arguments: str


class Message(_Wire, omit_defaults=True):
    """One provider-neutral history message; ``source_id`` is its event ref."""

    role: Role
    content: str
    source_id: str
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class ScoreParts(_Wire):
    """The normalized parts a candidate's score is made of, each in [0, 1].

    Memory uses ``bm25``, ``recency`` and ``tags``; recall uses the others too
    (see ``makad.core.recall``) and leaves ``tags`` at 0.
    """

    bm25: float
    recency: float
    tags: float
    context: float = 0.0
    session: float = 0.0
    speaker: float = 0.0
    time: float = 0.0
    semantic: float = 0.0


class TraceCandidate(_Wire):
    """One memory entry, attention line or recall candidate considered, and what became of it.

    A recall candidate is one event: a full-text hit or a neighbour of one. An attention
    candidate is one line of the workspace's attention state (``title``: its text,
    ``sourceId``: its first ref).
    """

    kind: Literal["memory", "attention", "recall"]
    source_id: str
    score: float
    parts: ScoreParts
    included: bool
    reason: str | None = None
    tokens: int = 0
    # Memory only: the hash the service records in the session's shown-manifest.
    content_hash: str | None = None
    # Memory only: how far the entry can be trusted, and why (``makad.core.confidence``).
    confidence: Confidence | None = None
    # Memory only: the UTF-8 size of the block shown (counts toward the session cap).
    bytes: int = 0
    # Memory: the entry's title (as redacted for the agent), so a trace reads alone;
    # attention: the line.
    title: str | UnsetType = UNSET
    # Memory only, present when true: the entry is pinned (``makad.core.memory_select``).
    pinned: bool | UnsetType = UNSET
    # Present when a newer ref gives this candidate's subject another value
    # (``makad.core.conflicts``): a memory entry shown as possibly outdated, a recalled
    # line marked superseded (or left out as ``superseded`` when recall is tight).
    superseded_by: str | UnsetType = UNSET


class Allocation(_Wire):
    """What one kind was allowed (``cap``) and what it used.

    ``flowed``: the part of ``cap`` that came from other kinds' unused shares.
    """

    kind: AllocationKind
    cap: int
    used: int
    truncated: bool = False
    flowed: int = 0


class Skipped(_Wire):
    """A source left out of the pack as a whole, and why.

    ``reason``: ``safe_mode`` (MEMORY.md is over its size cap) or ``unreadable``
    (it could not be read); ``message`` is for people.
    """

    source: Literal["memory"]
    reason: Literal["safe_mode", "unreadable"]
    message: str


class Trace(_Wire):
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

    path: Literal["fast", "bounded", "slow", "fallback"]
    candidates: list[TraceCandidate]
    dropped: dict[str, int]
    allocation: list[Allocation]
    minimum_tokens: int
    history_dropped: int
    history_repaired: int
    placeholders: list[str]
    tampered: list[str] = []
    skipped: list[Skipped] = []
    memory_session_bytes: int = 0
    strategy: str = "deterministic"
    curator: CuratorTrace | None = None
    owned_elsewhere: list[OwnedLine] = []
    empty_reason: EmptyReason | None = None
    attention: AttentionReason | None = None


class ContextPack(_Wire):
    """The result of ``build_context``; the service fills ``call_id``, ``revision`` and
    ``warnings`` (``not_recorded``: the data directory's disk is full, the pack was served
    but not recorded, so a later pack may show again what this one showed)."""

    segments: list[Segment]
    messages: list[Message]
    total_tokens: int
    budget_tokens: int
    compact_recommended: bool
    trace: Trace
    call_id: str = ""
    revision: int = 0
    warnings: list[Warning] = []


@dataclass(slots=True)
class Built:
    """One segment kind built within a cap (internal to assembly).

    ``wants_more``: it left candidates out for lack of room, so unused budget
    can flow to it (``makad.core.budget`` step 4); ``wants_fill``: it left out
    candidates that only fill leftover room, which take what is unused at the end
    (step 6).
    """

    segment: Segment | None = None
    truncated: bool = False
    candidates: list[TraceCandidate] = field(default_factory=list)
    # Reasons of the candidates left out, when not all of them are listed.
    dropped: Counter[str] | None = None
    wants_more: bool = False
    wants_fill: bool = False
    # Makes the candidates' rows when they are asked for (instead of ``candidates``).
    rows: Callable[[], list[TraceCandidate]] | None = None
    # Lines left out because another segment shows them (``makad.core.ownership``).
    owned: list[OwnedLine] = field(default_factory=list)

    def listed(self) -> list[TraceCandidate]:
        """The candidates' trace rows."""
        return self.rows() if self.rows is not None else self.candidates


# ----------------------------------------------------------------- input ---


class RecallHit(msgspec.Struct, kw_only=True):
    """One event found by full-text search, with the events around it.

    ``bm25`` is SQLite FTS5's ``bm25()`` (negative; more negative is better;
    0 for an event found another way). ``neighbours`` are the events near the
    hit in its own session, the two before and two after it
    (``makad.core.recall`` looks that far); other sessions' events are ignored.
    ``similarity`` is an optional semantic match in [-1, 1] (e.g. the cosine of
    sentence embeddings of the query and the event), when a caller has one.
    """

    event: Event
    bm25: float
    neighbours: list[Event] = []
    similarity: float | None = None


# Confidence (negated), update time (negated), place in the file, id: see
# ``makad.core.memory_select.fill_key``.
FillKey = tuple[float, int, int, str]


@dataclass(frozen=True, slots=True)
class FillOrder:
    """Entries in fill order with their keys (``makad.core.memory_select.fill_order``),
    an order that holds until ``valid_until_ms`` (None: always)."""

    keyed: list[tuple[FillKey, Entry]]
    valid_until_ms: int | None
    # The user level's entries (ids ``@user/<id>``), not the workspace's.
    user_level: bool = False
    # entry id → its position in ``keyed`` (empty: not worked out)
    positions: Mapping[str, int] = field(default_factory=dict)

    def valid_at(self, now_ms: int) -> bool:
        return self.valid_until_ms is None or now_ms < self.valid_until_ms


class ContextLimits(msgspec.Struct, kw_only=True, frozen=True):
    """Every knob of context assembly, with its default.

    Shares are whole percents of the budget; ``*_max_tokens`` are the ceilings
    and ``segment_floor_tokens`` the floor of each segment kind's cap. See
    ``makad.core.budget`` for how they combine. The working-state ceiling holds
    everything ``set_working_state`` accepts (12,000 tokens of notes plus the
    lists), the summary ceiling a 12,000-token semantic summary.
    ``memory_small_share`` / ``memory_small_max_tokens`` make the small-memory
    share (``makad.core.memory_select``): memory shown whole when it fits.
    ``memory_top_k`` counts the entries matching a query that may ask for more
    room than memory's own cap (the others only fill what is left);
    ``recall_top_k`` counts events (lines of the recall segment);
    ``recall_trace_max`` bounds how many recall candidates the trace lists.
    ``memory_session_cap_bytes`` bounds the memory shown to one session between
    compactions (see ``makad.core.memory_segment``).
    """

    working_state_share: int = 15
    working_state_max_tokens: int = MAX_NOTES_TOKENS + 2_000  # the notes and the lists
    summary_share: int = 20
    summary_max_tokens: int = 12_500
    memory_share: int = 20
    memory_max_tokens: int = 16_000
    memory_small_share: int = 50
    memory_small_max_tokens: int = 2_000
    memory_top_k: int = 10
    memory_entry_max_bytes: int = 4_096
    memory_session_cap_bytes: int = 61_440
    attention_share: int = 5
    attention_max_tokens: int = 1_500
    recall_share: int = 15
    recall_max_tokens: int = 8_000
    recall_top_k: int = 100
    recall_line_max_chars: int = 400
    recall_trace_max: int = 100
    segment_floor_tokens: int = 200
    history_floor_share: int = 40
    compact_share: int = 60
    stale_after_ms: int = 86_400_000
    keep_tool_results_turns: int = 3
    large_tool_result_tokens: int = 400


class ContextInputs(msgspec.Struct, kw_only=True):
    """Everything ``assemble`` needs, fetched by the service.

    - ``memory_enabled``: enabled && agentReadEnabled && !incognito; when false
      no memory segment is built whatever ``memory_entries`` holds.
    - ``memory_entries``: candidate entries (e.g. the top ~100 by bm25 and every
      pinned one, each level's pinned entries in file order); scope and status are
      checked again here.
    - ``memory_fill``: every active entry of each level in fill order
      (``makad.core.memory_select.fill_order``; a user level's under ``@user/`` ids):
      where the entries that match nothing come from, read only as far as there is
      room. Empty: the candidates are all there is.
    - ``memory_fill_shown``: the first this many entries of ``memory_fill[0]`` were
      shown to the session as they are (``already_shown`` holds each with its hash)
      and pass every gate of this call: the fill walk starts after them, as if it had
      passed over each (``makad.core.memory_segment.shown_prefix`` works it out).
    - ``memory_bm25``: entry id → FTS5 ``bm25()`` for the query (negative).
    - ``memory_similarity``: entry id → the optional semantic channel's cosine for the
      query (only the entries it found; empty without the channel).
    - ``memory_near``: entry ids (either level's) nearest the query by that cosine, nearest
      first, whatever it is (empty without the channel): after the entries that match, the
      first ``makad.core.semantic.MEMORY_NEAR_K`` of them that match nothing fill memory's
      leftover room before the fill order (``makad.core.memory_segment``). At least that
      many past the matches, so that the rule can take them all.
    - ``already_shown``: ``memory:<id>`` → content hash shown in this session
      since its last compaction (see ``makad.core.render.entry_hash``).
    - ``memory_hashes``: entry id → ``entry_hash`` of it, when the caller keeps them
      (computed here otherwise).
    - ``memory_confidence``: entry id → the ``confidence=`` value the user wrote
      in its metadata comment (only entries that have one).
    - ``memory_session_bytes``: the memory this session was shown since its last
      compaction, before this call (see ``ContextLimits.memory_session_cap_bytes``).
    - ``memory_skipped``: why memory was left out whole, when it was.
    - ``memory_user_from``: ``memory_entries[memory_user_from:]`` are the user level's
      (their ids ``@user/<id>``); a workspace entry whose id a hand edit made the same
      comes first, and the user-level one is then a ``duplicate``.
    - ``memory_overridden``: user-level entries among the candidates (ids
      ``@user/<id>``) that a workspace entry on the same topic overrides: each is
      left out as ``overridden`` (``makad.core.levels``).
    - ``history``: the session's events after its latest checkpoint, at least
      the newest ones covering about twice the budget and starting at a user
      message if possible; order does not matter (sorted by seq here).
    - ``live_history_tokens``: the estimated size of the whole live history
      (e.g. ``SUM(tokens)`` after the checkpoint) when only a tail is passed;
      ``None`` means ``history`` is the whole live history.
    - ``selection``: the candidates a strategy chose, in order (see the field);
    - ``recall_hits``: FTS hits from other (non-incognito) sessions and from the
      compacted part of this one: the best ~200 for the query, plus those
      within the periods it names (``makad.core.when.query_periods``).
    """

    budget_tokens: int
    now_ms: int
    session_id: str | None = None
    query: str | None = None
    include: frozenset[SegmentKind] = frozenset(SEGMENT_KINDS)
    memory_enabled: bool = True
    memory_entries: list[Entry] = []
    memory_bm25: dict[str, float] = {}
    memory_similarity: dict[str, float] = {}
    memory_near: list[str] = []
    memory_fill: list[FillOrder] = []
    already_shown: dict[str, str] = {}
    memory_fill_shown: int = 0
    memory_hashes: dict[str, str] = {}
    memory_confidence: dict[str, str] = {}
    # Candidate id → its place in its level's file (``memory_select.fill_key``).
    memory_places: dict[str, int] = {}
    memory_session_bytes: int = 0
    memory_skipped: Skipped | None = None
    # Where the user level's candidates start in ``memory_entries`` (None: there are none).
    memory_user_from: int | None = None
    # User-level entries (ids ``@user/<id>``, ``makad.core.levels``) a workspace entry on
    # the same topic overrides: id → that workspace entry's id.
    memory_overridden: dict[str, str] = {}
    working_state: WorkingState | None = None
    checkpoint: Checkpoint | None = None
    history: list[Event] = []
    live_history_tokens: int | None = None
    recall_hits: list[RecallHit] = []
    limits: ContextLimits = ContextLimits()
    # The attention lines this call may show (section, line): empty unless it is the
    # session's first pack, a call without a session, or ``include`` names attention
    # (``makad.core.attention``).
    attention: list[tuple[str, AttentionLine]] = []
    # Why the attention lines are offered or not (``Trace.attention``).
    attention_reason: AttentionReason | None = None
    # The refs (``memory:<id>``, ``event:<session>:<seq>``) a strategy chose, in the order
    # to pack them; None: the deterministic ranking chooses (``makad.core.strategies``).
    selection: list[str] | None = None


@dataclass
class MemorySnapshot:
    """Active entries of one MEMORY.md version, newest first, and the index it was built into.

    ``user_confidence``: entry id → the ``confidence=`` its comment carries (only those);
    ``skipped``: why no entry can be read (safe mode, unreadable file), when so.
    """

    sha: str | None
    by_id: dict[str, Entry]
    recent: list[Entry]
    user_confidence: dict[str, str] = field(default_factory=dict)
    skipped: Skipped | None = None
    # entry id → entry_hash, filled as entries become candidates (same for every call).
    hashes: dict[str, str] = field(default_factory=dict)
    # The ledger's index_generation the entries were indexed under (a rebuilt index is empty).
    index_generation: int = 0
    # The pinned entries, in the order of the file (``makad.core.memory_select``).
    pinned: list[Entry] = field(default_factory=list)
    # entry id → its place among the active entries of the file (0: the top one).
    places: dict[str, int] = field(default_factory=dict)
    # The entries in fill order, worked out at the first call that needs it and kept while
    # valid (``makad.core.memory_select.fill_order``).
    fill: FillOrder | None = None
