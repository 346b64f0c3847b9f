"""The pure core of ``build_context``: inputs in, a ``ContextPack`` out.

``assemble`` shares the budget as ``makad.core.budget`` describes, builds each
segment inside its allotment, then fits the history into what is left, so
``total_tokens <= budget_tokens`` always holds; when not even the newest user
message fits it raises ``TooLarge`` instead.

Segments appear in the order memory, summary, working_state, recall: the most
stable first (helping a provider's prompt cache), the most query-specific last.

The trace lists every memory and recall candidate with its score parts and
what became of it. Reasons a candidate is left out: ``disabled`` (memory reads
are off for this call), ``excluded`` (its kind is not in ``include``),
``scope`` (scoped to another session), ``archived``, ``inactive`` (draft or
under review), ``expired`` (past its decay TTL), ``duplicate``,
``already_shown`` (shown in this session since its last compaction and
unchanged), ``top_k``, ``budget``, ``no_query`` (recall needs a query) and
``in_history`` (the event is still in this session's live history).

The path is ``fast`` when nothing was ranked against a query and everything fit
untouched (no candidate or history message dropped, nothing cut or replaced by a
placeholder), and ``bounded`` otherwise.

``compact_recommended`` is true when the live history costs more than
``compact_share`` % (60 % by default) of the budget.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from makad.core.budget import history_reserve, segment_cap, share
from makad.core.context_types import (
    SEGMENT_KINDS,
    Allocation,
    ContextInputs,
    ContextLimits,
    ContextPack,
    RecallHit,
    Segment,
    SegmentKind,
    Trace,
    TraceCandidate,
)
from makad.core.history import PreparedHistory, event_ref
from makad.core.ranking import query_terms, rank_entries
from makad.core.recall import rank_events
from makad.core.render import (
    RECALL_GAP,
    entry_hash,
    fit_body,
    memory_block,
    memory_ref,
    memory_text,
    recall_block,
    recall_header,
    recall_line,
    recall_text,
    summary_span,
    summary_text,
    working_state_body,
    working_state_text,
)
from makad.core.tokens import HeuristicCounter, TokenCounter
from makad.core.types import Entry, Event
from makad.core.when import DAY_MS
from makad.errors import InvalidParams, TooLarge

OUTPUT_ORDER: tuple[SegmentKind, ...] = ("memory", "summary", "working_state", "recall")
# History older than this many budgets' worth of text is never looked at: the
# lower bound it is measured with (a quarter token a character) holds for the
# default estimator, and the factor leaves room for a tokenizer that packs
# characters tighter.
HORIZON_FACTOR = 2
# What joining two blocks of a segment costs at most ("\n\n").
BLOCK_SEPARATOR_TOKENS = 1
# Once this many recall candidates in a row did not fit, the segment is full: the
# rest are dropped for budget without measuring each line (hundreds of them, for
# the few tokens a lower-ranked short line might still fill).
RECALL_GIVE_UP_AFTER = 32


@dataclass(slots=True)
class _Built:
    segment: Segment | None = None
    truncated: bool = False
    candidates: list[TraceCandidate] = field(default_factory=list)
    # Reasons of the candidates left out, when not all of them are listed.
    dropped: Counter[str] | None = None


def assemble(inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
    """Build the context for one call (see module doc)."""
    counter = counter or HeuristicCounter()
    budget = inputs.budget_tokens
    limits = inputs.limits
    if budget < 0:
        raise InvalidParams("budgetTokens must not be negative.", budgetTokens=budget)
    history = PreparedHistory(
        inputs.history, inputs.session_id, counter, limits, horizon_tokens=HORIZON_FACTOR * budget
    )
    minimum = history.minimum_tokens()
    if minimum > budget:
        raise TooLarge(
            "The newest user message alone does not fit in the token budget.",
            budgetTokens=budget,
            minimumTokens=minimum,
        )
    floor = share(budget, limits.history_floor_share)
    available = budget - history_reserve(budget, minimum, history.tokens_up_to(floor), limits)

    builders: dict[SegmentKind, Callable[[ContextInputs, int, TokenCounter], _Built]] = {
        "working_state": _working_state,
        "summary": _summary,
        "memory": _memory,
        "recall": _recall,
    }
    built: dict[SegmentKind, _Built] = {}
    allocation: list[Allocation] = []
    alone = len(inputs.include & set(SEGMENT_KINDS)) == 1
    for kind in SEGMENT_KINDS:
        cap = min(segment_cap(kind, budget, limits, alone=alone), available)
        result = builders[kind](inputs, cap, counter)
        used = result.segment.tokens if result.segment else 0
        available -= used
        built[kind] = result
        allocation.append(Allocation(kind=kind, cap=cap, used=used, truncated=result.truncated))

    segments = [s for s in (built[k].segment for k in OUTPUT_ORDER) if s is not None]
    segment_tokens = sum(s.tokens for s in segments)
    fitted = history.fit(budget - segment_tokens)
    history_cut = bool(fitted.dropped or fitted.placeholders or fitted.shrunk)
    allocation.append(
        Allocation(
            kind="history", cap=budget - segment_tokens, used=fitted.tokens, truncated=history_cut
        )
    )
    total = segment_tokens + fitted.tokens
    if total > budget:  # unreachable by construction; never hand out an oversized pack
        raise TooLarge("The context does not fit.", budgetTokens=budget, minimumTokens=total)

    candidates = built["memory"].candidates + built["recall"].candidates
    dropped: Counter[str] = Counter()
    for kind in ("memory", "recall"):
        part = built[kind]
        dropped += part.dropped if part.dropped is not None else Counter(
            c.reason for c in part.candidates if not c.included and c.reason
        )
    compact_limit = share(budget, limits.compact_share)
    live = inputs.live_history_tokens
    live = history.tokens_up_to(compact_limit) if live is None else live
    ranked = bool(query_terms(inputs.query)) and any(
        c.reason in (None, "top_k", "budget", "already_shown", "irrelevant") for c in candidates
    )
    bounded = ranked or history_cut or any(a.truncated for a in allocation)
    return ContextPack(
        segments=segments,
        messages=fitted.messages,
        total_tokens=total,
        budget_tokens=budget,
        compact_recommended=live > compact_limit,
        trace=Trace(
            path="bounded" if bounded else "fast",
            candidates=candidates,
            dropped={reason: dropped[reason] for reason in sorted(dropped)},
            allocation=allocation,
            minimum_tokens=minimum,
            history_dropped=fitted.dropped,
            history_repaired=history.repaired,
            placeholders=fitted.placeholders,
        ),
    )


# ------------------------------------------------------- working state ---


def _working_state(inputs: ContextInputs, cap: int, counter: TokenCounter) -> _Built:
    state = inputs.working_state
    if state is None or "working_state" not in inputs.include:
        return _Built()
    body = working_state_body(state)
    if not body:
        return _Built()
    note = "[… working state cut to fit the budget]"
    fitted = fit_body(working_state_text, body, note, cap, counter)
    if fitted is None:
        return _Built(truncated=True)
    text, cut = fitted
    segment = Segment(kind="working_state", text=text, tokens=counter.count(text), source_ids=[])
    return _Built(segment, cut)


# ------------------------------------------------------------- summary ---


def _summary(inputs: ContextInputs, cap: int, counter: TokenCounter) -> _Built:
    checkpoint = inputs.checkpoint
    if (
        checkpoint is None
        or "summary" not in inputs.include
        or checkpoint.session_id != inputs.session_id
        or not checkpoint.summary.strip()
    ):
        return _Built()
    span = summary_span(checkpoint)
    note = f"[… summary cut to fit the budget; the events stay retrievable: {span}]"
    fitted = fit_body(
        lambda body: summary_text(checkpoint, body), checkpoint.summary.strip(), note, cap, counter
    )
    if fitted is None:
        return _Built(truncated=True)
    text, cut = fitted
    segment = Segment(
        kind="summary",
        text=text,
        tokens=counter.count(text),
        source_ids=[f"checkpoint:{checkpoint.checkpoint_id}", span],
    )
    return _Built(segment, cut)


# -------------------------------------------------------------- memory ---


def _memory_exclusion(entry: Entry, inputs: ContextInputs) -> str | None:
    if not inputs.memory_enabled:
        return "disabled"
    if "memory" not in inputs.include:
        return "excluded"
    if entry.scope == "session" and (
        inputs.session_id is None or entry.session_id != inputs.session_id
    ):
        return "scope"
    if entry.status == "archived":
        return "archived"
    if entry.status != "active":
        return "inactive"
    if entry.decay_ttl_ms is not None and inputs.now_ms > entry.created_at + entry.decay_ttl_ms:
        return "expired"
    return None


def _memory(inputs: ContextInputs, cap: int, counter: TokenCounter) -> _Built:
    if not inputs.memory_entries:
        return _Built()
    exclusions: dict[int, str] = {}  # input position → reason
    seen: set[str] = set()
    for index, entry in enumerate(inputs.memory_entries):
        reason = _memory_exclusion(entry, inputs)
        if reason is None and entry.id in seen:
            reason = "duplicate"
        if reason is None:
            seen.add(entry.id)
        else:
            exclusions[index] = reason
    eligible = [e for i, e in enumerate(inputs.memory_entries) if i not in exclusions]
    ranked = rank_entries(
        inputs.memory_entries,
        inputs.memory_bm25,
        inputs.query,
        inputs.now_ms,
        normalize_over=eligible,
    )
    frame_tokens = counter.count(memory_text([]))
    # When everything fits there is nothing to choose; otherwise, with a query, an entry
    # that shares no word or tag with it is not relevant to this turn and takes no slot.
    everything_fits = len(eligible) <= inputs.limits.memory_top_k and frame_tokens + sum(
        counter.count(memory_block(e, inputs.now_ms, inputs.limits)) + BLOCK_SEPARATOR_TOKENS
        for e in eligible) <= cap
    relevance_gate = bool(query_terms(inputs.query)) and not everything_fits
    used = frame_tokens
    chosen: list[tuple[str, int]] = []  # (block, index in candidates)
    candidates: list[TraceCandidate] = []
    for item in ranked:
        entry = item.entry
        source_id = memory_ref(entry.id)
        digest = entry_hash(entry)
        reason = exclusions.get(item.index)
        tokens = 0
        if reason is None and relevance_gate and item.parts.bm25 <= 0 and item.parts.tags <= 0:
            reason = "irrelevant"
        elif reason is None and inputs.already_shown.get(source_id) == digest:
            reason = "already_shown"
        elif reason is None and len(chosen) >= inputs.limits.memory_top_k:
            reason = "top_k"
        elif reason is None:
            block = memory_block(entry, inputs.now_ms, inputs.limits)
            tokens = counter.count(block)
            if used + tokens + BLOCK_SEPARATOR_TOKENS <= cap:
                used += tokens + BLOCK_SEPARATOR_TOKENS
                chosen.append((block, len(candidates)))
            else:
                reason = "budget"
        candidates.append(
            TraceCandidate(
                kind="memory",
                source_id=source_id,
                score=item.score,
                parts=item.parts,
                included=reason is None,
                reason=reason,
                tokens=tokens,
                content_hash=digest,
            )
        )
    text = memory_text(block for block, _ in chosen)
    while chosen and counter.count(text) > cap:  # a tokenizer need not be additive
        _, index = chosen.pop()
        candidates[index].included = False
        candidates[index].reason = "budget"
        text = memory_text(block for block, _ in chosen)
    truncated = any(c.reason in ("top_k", "budget") for c in candidates)
    if not chosen:
        return _Built(None, truncated, candidates)
    segment = Segment(
        kind="memory",
        text=text,
        tokens=counter.count(text),
        source_ids=[candidates[index].source_id for _, index in chosen],
    )
    return _Built(segment, truncated, candidates)


# -------------------------------------------------------------- recall ---


def _event_exclusion(inputs: ContextInputs) -> Callable[[Event], str | None]:
    """Why an event cannot be recalled in this call, if it cannot."""
    reason = None
    if "recall" not in inputs.include:
        reason = "excluded"
    elif not query_terms(inputs.query):
        reason = "no_query"
    session_id = inputs.session_id
    horizon = inputs.checkpoint.coverage.to_seq if inputs.checkpoint is not None else 0

    def exclusion(event: Event) -> str | None:
        if reason is None and event.session_id == session_id and event.seq > horizon:
            return "in_history"
        return reason

    return exclusion


@dataclass(slots=True)
class _Group:
    """The chosen events of one session on one day: one block of the segment."""

    events: dict[int, Event] = field(default_factory=dict)

    def runs(self) -> list[tuple[int, int]]:
        seqs = sorted(self.events)
        out: list[tuple[int, int]] = []
        for seq in seqs:
            if out and seq == out[-1][1] + 1:
                out[-1] = (out[-1][0], seq)
            else:
                out.append((seq, seq))
        return out


class _RecallPacker:
    """Chooses recall events best first while their blocks fit in ``cap``.

    A block's cost is estimated as the sum of its pieces (header, lines, ``…``
    gap lines, separators), which the heuristic counter never undercounts;
    ``text`` then re-counts exactly and gives back the worst choices if needed.
    """

    def __init__(self, cap: int, counter: TokenCounter, limits: ContextLimits) -> None:
        self.cap = cap
        self.counter = counter
        self.limits = limits
        self.used = counter.count(recall_text([]))
        self.groups: dict[tuple[str, int], _Group] = {}  # (session, UTC day); rank order
        self.chosen: list[tuple[tuple[str, int], int]] = []
        self.header_tokens: dict[tuple[str, int], int] = {}
        self.gap_tokens = counter.count(f"{RECALL_GAP}\n")

    def could_fit(self, event: Event) -> bool:
        """False when the event's line surely cannot fit, judged without rendering it.

        The bound assumes at least a token per six characters: true of the
        heuristic counter and of real tokenizers, whatever the language.
        """
        return self.used + min(len(event.text), self.limits.recall_line_max_chars) // 6 <= self.cap

    def line_tokens(self, event: Event) -> int:
        return self.counter.count(recall_line(event, self.limits) + "\n")

    def _header_tokens(self, key: tuple[str, int], event: Event) -> int:
        tokens = self.header_tokens.get(key)
        if tokens is None:
            tokens = self.counter.count(recall_header(event.session_id, event.ts) + "\n")
            self.header_tokens[key] = tokens
        return tokens

    def offer(self, event: Event, line_tokens: int) -> bool:
        if self.used + line_tokens > self.cap:
            return False
        key = (event.session_id, event.ts // DAY_MS)
        group = self.groups.get(key)
        cost = line_tokens
        if group is None:
            cost += self._header_tokens(key, event) + BLOCK_SEPARATOR_TOKENS
        else:
            # Runs of consecutive seqs are separated by one gap line each.
            touching = ((event.seq - 1) in group.events) + ((event.seq + 1) in group.events)
            cost += self.gap_tokens * (1 - touching)
        if self.used + cost > self.cap:
            return False
        self.used += cost
        self.groups.setdefault(key, _Group()).events[event.seq] = event
        self.chosen.append((key, event.seq))
        return True

    def _render(self) -> tuple[str, list[str]]:
        blocks: list[str] = []
        refs: list[str] = []
        for (sid, _), group in self.groups.items():
            if group.events:
                blocks.append(recall_block(list(group.events.values()), self.limits))
                refs.extend(event_ref(sid, first, last) for first, last in group.runs())
        return recall_text(blocks), refs

    def text(self) -> tuple[str, list[str], list[tuple[str, int]]]:
        """The segment text, its refs, and the (session, seq) of events given back."""
        text, refs = self._render()
        returned: list[tuple[str, int]] = []
        while self.chosen and self.counter.count(text) > self.cap:  # a tokenizer need not be additive
            key, seq = self.chosen.pop()
            returned.append((key[0], seq))
            del self.groups[key].events[seq]
            text, refs = self._render()
        return text, refs, returned


def _recall(inputs: ContextInputs, cap: int, counter: TokenCounter) -> _Built:
    if not inputs.recall_hits:
        return _Built()
    exclusion = _event_exclusion(inputs)
    eligible: list[RecallHit] = []
    seen: set[tuple[str, int]] = set()
    for hit in inputs.recall_hits:
        key = (hit.event.session_id, hit.event.seq)
        if key not in seen and exclusion(hit.event) is None:
            eligible.append(hit)
        seen.add(key)
    ranked = rank_events(inputs.recall_hits, inputs.query or "", inputs.now_ms, eligible=eligible)
    limits = inputs.limits
    packer = _RecallPacker(cap, counter, limits)
    outcome: list[tuple[str | None, int]] = []
    misses = 0  # consecutive candidates the remaining room could not take
    for item in ranked:
        reason = exclusion(item.event)
        tokens = 0
        if reason is None and len(packer.chosen) >= limits.recall_top_k:
            reason = "top_k"
        elif reason is None and (misses >= RECALL_GIVE_UP_AFTER
                                 or not packer.could_fit(item.event)):
            reason = "budget"
        elif reason is None:
            tokens = packer.line_tokens(item.event)
            if packer.offer(item.event, tokens):
                misses = 0
            else:
                reason = "budget"
                misses += 1
        outcome.append((reason, tokens))
    text, source_ids, returned = packer.text()
    if returned:
        back = set(returned)
        for index, item in enumerate(ranked):
            if (item.event.session_id, item.event.seq) in back:
                outcome[index] = ("budget", outcome[index][1])
    trace_max = max(limits.recall_trace_max, 0)
    candidates = [
        TraceCandidate(
            kind="recall",
            source_id=event_ref(item.event.session_id, item.event.seq),
            score=item.score,
            parts=item.parts(),
            included=reason is None,
            reason=reason,
            tokens=tokens,
        )
        for index, (item, (reason, tokens)) in enumerate(zip(ranked, outcome, strict=True))
        if index < trace_max or reason is None
    ]
    dropped = Counter(reason for reason, _ in outcome if reason is not None)
    truncated = bool(dropped["top_k"] or dropped["budget"])
    built = _Built(None, truncated, candidates, dropped)
    if not packer.chosen:
        return built
    built.segment = Segment(kind="recall", text=text, tokens=counter.count(text), source_ids=source_ids)
    return built
