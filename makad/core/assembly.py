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
    ContextPack,
    Segment,
    SegmentKind,
    Trace,
    TraceCandidate,
)
from makad.core.history import PreparedHistory, event_ref
from makad.core.ranking import RankedHit, query_terms, rank_entries, rank_hits
from makad.core.render import (
    entry_hash,
    fit_body,
    memory_block,
    memory_text,
    recall_line,
    recall_text,
    summary_span,
    summary_text,
    working_state_body,
    working_state_text,
)
from makad.core.tokens import HeuristicCounter, TokenCounter
from makad.core.types import Entry, Event
from makad.errors import InvalidParams, TooLarge

OUTPUT_ORDER: tuple[SegmentKind, ...] = ("memory", "summary", "working_state", "recall")
# History older than this many budgets' worth of text is never looked at: the
# lower bound it is measured with (a quarter token a character) holds for the
# default estimator, and the factor leaves room for a tokenizer that packs
# characters tighter.
HORIZON_FACTOR = 2
# What joining two blocks of a segment costs at most ("\n\n").
BLOCK_SEPARATOR_TOKENS = 1


@dataclass(slots=True)
class _Built:
    segment: Segment | None = None
    truncated: bool = False
    candidates: list[TraceCandidate] = field(default_factory=list)


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
    for kind in SEGMENT_KINDS:
        cap = min(segment_cap(kind, budget, limits), available)
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
    dropped = Counter(c.reason for c in candidates if not c.included and c.reason)
    compact_limit = share(budget, limits.compact_share)
    live = inputs.live_history_tokens
    live = history.tokens_up_to(compact_limit) if live is None else live
    ranked = bool(query_terms(inputs.query)) and any(
        c.reason in (None, "top_k", "budget", "already_shown") for c in candidates
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
    used = frame_tokens
    chosen: list[tuple[str, int]] = []  # (block, index in candidates)
    candidates: list[TraceCandidate] = []
    for item in ranked:
        entry = item.entry
        source_id = f"memory:{entry.id}"
        digest = entry_hash(entry)
        reason = exclusions.get(item.index)
        tokens = 0
        if reason is None and inputs.already_shown.get(source_id) == digest:
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


@dataclass(slots=True)
class _Window:
    """Hits of one session merged with the events around them."""

    session_id: str
    first: int
    last: int
    events: dict[int, Event]
    hits: list[RankedHit]
    score: float


def _hit_exclusion(event: Event, inputs: ContextInputs) -> str | None:
    if "recall" not in inputs.include:
        return "excluded"
    if not query_terms(inputs.query):
        return "no_query"
    if event.session_id == inputs.session_id and (
        inputs.checkpoint is None or event.seq > inputs.checkpoint.coverage.to_seq
    ):
        return "in_history"
    return None


def _windows(hits: list[RankedHit]) -> list[_Window]:
    """Merge hits whose neighbourhoods overlap or touch; best window first."""
    single: list[_Window] = []
    for ranked in hits:
        hit = ranked.hit
        sid = hit.event.session_id
        events = {hit.event.seq: hit.event}
        for event in hit.neighbours:
            if event.session_id == sid:
                events.setdefault(event.seq, event)
        single.append(_Window(sid, min(events), max(events), events, [ranked], ranked.score))
    single.sort(key=lambda w: (w.session_id, w.first, w.last))
    merged: list[_Window] = []
    for window in single:
        last = merged[-1] if merged else None
        if last and last.session_id == window.session_id and window.first <= last.last + 1:
            for seq, event in window.events.items():
                last.events.setdefault(seq, event)
            last.last = max(last.last, window.last)
            last.hits.extend(window.hits)
            last.score = max(last.score, window.score)
        else:
            merged.append(window)
    merged.sort(key=lambda w: (-w.score, w.session_id, w.first))
    return merged


def _recall(inputs: ContextInputs, cap: int, counter: TokenCounter) -> _Built:
    if not inputs.recall_hits:
        return _Built()
    exclusions: dict[int, str] = {}  # input position → reason
    seen: set[tuple[str, int]] = set()
    for index, hit in enumerate(inputs.recall_hits):
        key = (hit.event.session_id, hit.event.seq)
        reason = _hit_exclusion(hit.event, inputs)
        if reason is None and key in seen:
            reason = "duplicate"
        if reason is None:
            seen.add(key)
        else:
            exclusions[index] = reason
    eligible = [h for i, h in enumerate(inputs.recall_hits) if i not in exclusions]
    ranked = rank_hits(inputs.recall_hits, inputs.now_ms, normalize_over=eligible)
    # input position → (reason, tokens)
    outcome: dict[int, tuple[str | None, int]] = {i: (r, 0) for i, r in exclusions.items()}
    limits = inputs.limits
    used = counter.count(recall_text([]))
    chosen: list[tuple[str, _Window]] = []
    truncated = False
    for window in _windows([r for r in ranked if r.index not in exclusions]):
        if len(chosen) >= limits.recall_top_k:
            _settle(outcome, window, "top_k", 0)
            continue
        block = "\n".join(recall_line(window.events[s], limits) for s in sorted(window.events))
        tokens = counter.count(block)
        if used + tokens + BLOCK_SEPARATOR_TOKENS > cap:
            hit_seqs = sorted({r.hit.event.seq for r in window.hits})
            block = "\n".join(recall_line(window.events[s], limits) for s in hit_seqs)
            tokens = counter.count(block)
            truncated = True
        if used + tokens + BLOCK_SEPARATOR_TOKENS > cap:
            _settle(outcome, window, "budget", tokens)
            continue
        used += tokens + BLOCK_SEPARATOR_TOKENS
        chosen.append((block, window))
        _settle(outcome, window, None, tokens)
    text = recall_text(block for block, _ in chosen)
    while chosen and counter.count(text) > cap:  # a tokenizer need not be additive
        _, window = chosen.pop()
        _settle(outcome, window, "budget", outcome[window.hits[0].index][1])
        text = recall_text(block for block, _ in chosen)
    candidates = []
    for r in ranked:
        reason, tokens = outcome[r.index]
        candidates.append(
            TraceCandidate(
                kind="recall",
                source_id=event_ref(r.hit.event.session_id, r.hit.event.seq),
                score=r.score,
                parts=r.parts,
                included=reason is None,
                reason=reason,
                tokens=tokens,
            )
        )
    truncated = truncated or any(c.reason in ("top_k", "budget") for c in candidates)
    if not chosen:
        return _Built(None, truncated, candidates)
    source_ids = [event_ref(w.session_id, w.first, w.last) for _, w in chosen]
    segment = Segment(kind="recall", text=text, tokens=counter.count(text), source_ids=source_ids)
    return _Built(segment, truncated, candidates)


def _settle(
    outcome: dict[int, tuple[str | None, int]], window: _Window, reason: str | None, tokens: int
) -> None:
    for ranked in window.hits:
        outcome[ranked.index] = (reason, tokens)
