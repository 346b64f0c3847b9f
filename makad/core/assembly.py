"""The pure core of ``build_context``: inputs in, a ``ContextPack`` out.

``assemble`` shares the budget as ``makad.core.budget`` describes: it builds
each segment inside its own cap, lets what the segments left unused flow to
those that still have candidates (rebuilding them with the larger cap; the
ranking is done once), fits the history into what is left, and gives what is
still unused to memory entries left out for room, so ``total_tokens <=
budget_tokens`` always holds; when not even the newest user message fits it
raises ``TooLarge`` instead.

Segments appear in the order memory, summary, working_state, attention, recall: the
most stable first (helping a provider's prompt cache), the most query-specific last.

The trace lists the memory candidates (``makad.core.memory_segment`` says which)
and the best recall candidates with their score parts and what became of them.
Reasons a candidate is left out: ``disabled`` (memory reads are off for this
call), ``excluded`` (its kind is not in ``include``), ``scope`` (scoped to
another session), ``archived``, ``inactive`` (draft or under review),
``expired`` (past its decay TTL), ``duplicate``, ``overridden`` (a user-level
entry a workspace entry overrides), ``not_selected`` (a strategy's selection
left it out: see ``makad.core.strategies``), ``already_shown`` (shown in this
session since its last compaction and unchanged), ``top_k``, ``session_cap``
(see ``makad.core.memory_segment``), ``budget``, ``no_query`` (recall needs a
query) and ``in_history`` (the event is still in this session's live history).
A recalled line a newer candidate supersedes says so, or is left out as
``superseded`` when recall is tight; a memory entry says it is possibly outdated
(``makad.core.conflicts``). Lines of the summary the working state shows are left
out of the summary (``owned_elsewhere``, listed in ``trace.owned_elsewhere``:
``makad.core.ownership``); so are attention lines the working state, the summary or
memory show, or that cite only this session's own events (owner ``history``).
``trace.skipped`` says when memory was left out whole (safe mode, unreadable).

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
from typing import Any, Protocol

import msgspec

from makad.core.attention import AttentionLine, render_lines
from makad.core.budget import ceiling, history_reserve, segment_cap, share
from makad.core.conflicts import MAX_MEMORY_ITEMS, pack_items, supersessions
from makad.core.context_types import (
    SEGMENT_KINDS,
    Allocation,
    Built,
    ContextInputs,
    ContextLimits,
    ContextPack,
    RecallHit,
    ScoreParts,
    Segment,
    SegmentKind,
    Trace,
    TraceCandidate,
)
from makad.core.history import PreparedHistory
from makad.core.memory_segment import MemoryBuilder
from makad.core.memory_select import small_share
from makad.core.ownership import MIN_OWNED_CHARS, OWNED_ELSEWHERE, OwnedLine, drop_owned, fact_key, owner_keys
from makad.core.ranking import query_terms
from makad.core.recall import RankedEvent, rank_events
from makad.core.refs import event_ref
from makad.core.render import (
    BLOCK_SEPARATOR_TOKENS,
    RECALL_GAP,
    fit_body,
    recall_block,
    recall_header,
    recall_line,
    recall_text,
    summary_span,
    summary_text,
    superseded_mark,
    working_state_body,
    working_state_text,
)
from makad.core.tokens import HeuristicCounter, TokenCounter
from makad.core.types import Event
from makad.core.when import DAY_MS
from makad.errors import InvalidParams, TooLarge

OUTPUT_ORDER: tuple[SegmentKind, ...] = ("memory", "summary", "working_state", "attention", "recall")
# History older than this many budgets' worth of text is never looked at: the
# lower bound it is measured with (a quarter token a character) holds for the
# default estimator, so one budget is enough with it; the factor leaves room for
# another tokenizer that packs characters tighter.
HORIZON_FACTOR = 2
# Once this many recall candidates in a row did not fit, the segment is full: the
# rest are dropped for budget without measuring each line (hundreds of them, for
# the few tokens a lower-ranked short line might still fill).
RECALL_GIVE_UP_AFTER = 32


class _Builder(Protocol):
    """Builds one segment kind within a cap; may be asked again with a larger one.

    ``fill_cap``: how much of ``cap`` the candidates that only fill leftover room may
    use (memory's, ``makad.core.memory_segment``); the other kinds have none.
    """

    def build(self, cap: int, fill_cap: int | None = None) -> Built: ...


def assemble(inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
    """Build the context for one call (see module doc)."""
    counter = counter or HeuristicCounter()
    budget = inputs.budget_tokens
    limits = inputs.limits
    if budget < 0:
        raise InvalidParams("budgetTokens must not be negative.", budgetTokens=budget)
    factor = 1 if type(counter) is HeuristicCounter else HORIZON_FACTOR
    history = PreparedHistory(
        inputs.history, inputs.session_id, counter, limits, horizon_tokens=factor * budget
    )
    minimum = history.minimum_tokens()
    if minimum > budget:
        raise TooLarge(
            "The newest user message alone does not fit in the token budget.",
            budgetTokens=budget,
            minimumTokens=minimum,
        )
    floor = share(budget, limits.history_floor_share)
    reserve = history_reserve(budget, minimum, history.tokens_up_to(floor), limits)
    available = budget - reserve
    alone = len(inputs.include & set(SEGMENT_KINDS)) == 1
    # In the flow, history comes before recall: what it would use beyond its reserve.
    history_wants = 0 if alone else max(min(history.tokens_up_to(budget), budget) - reserve, 0)

    working_state = _working_state(inputs, counter)
    recall = _RecallBuilder(inputs, counter)
    memory = MemoryBuilder(inputs, counter)
    # The conflict pass reads what the pack may show: the best-ranked candidates of each kind.
    entries = memory.candidate_entries(MAX_MEMORY_ITEMS)
    superseded = supersessions(pack_items(entries, inputs.history, recall.candidate_events()))
    memory.mark(superseded)
    live_refs = {event_ref(e.session_id, e.seq) for e in inputs.history}
    recall.mark(superseded, lambda: memory.shown_refs | live_refs)
    summary = _summary(inputs, counter, working_state)
    shown_memory = _Recorded(memory)
    builders: dict[SegmentKind, _Builder] = {
        "working_state": working_state,
        "summary": summary,
        "memory": shown_memory,
        "attention": AttentionBuilder(
            inputs,
            counter,
            lambda: [
                ("working_state", working_state.shown),
                ("summary", summary.shown),
                ("memory", shown_memory.text),
            ],
        ),
        "recall": recall,
    }
    own = {kind: segment_cap(kind, budget, limits, alone=alone) for kind in SEGMENT_KINDS}
    if not alone:
        grown_to = memory.own_cap(own["memory"], small_share(budget, limits))
        own["memory"] = min(grown_to, ceiling("memory", budget, limits), budget)
    fill_share = 0 if alone else small_share(budget, limits)
    built, allocation = _share(builders, own, budget, limits, available, history_wants, alone, fill_share)

    segments = [s for s in (built[k].segment for k in OUTPUT_ORDER) if s is not None]
    segment_tokens = sum(s.tokens for s in segments)
    fitted = history.fit(budget - segment_tokens)
    unused = budget - segment_tokens - fitted.tokens
    if unused > 0 and (built["memory"].wants_more or built["memory"].wants_fill):
        # Step 6: what no kind used goes to the memory entries left out for room.
        grown = _grow_memory(memory, built["memory"], allocation["memory"], unused, budget, limits, alone)
        if grown is not None:
            built["memory"], allocation["memory"] = grown
            segments = [s for s in (built[k].segment for k in OUTPUT_ORDER) if s is not None]
            segment_tokens = sum(s.tokens for s in segments)
    history_cut = bool(fitted.dropped or fitted.placeholders or fitted.shrunk)
    allocations = [allocation[kind] for kind in SEGMENT_KINDS]
    allocations.append(
        Allocation(kind="history", cap=budget - segment_tokens, used=fitted.tokens, truncated=history_cut)
    )
    total = segment_tokens + fitted.tokens
    if total > budget:  # unreachable by construction; never hand out an oversized pack
        raise TooLarge("The context does not fit.", budgetTokens=budget, minimumTokens=total)

    rows = {kind: built[kind].listed() for kind in ("memory", "attention", "recall")}
    candidates = rows["memory"] + rows["attention"] + rows["recall"]
    dropped: Counter[str] = Counter()
    for kind in ("memory", "attention", "recall"):
        part = built[kind]
        dropped += (
            part.dropped
            if part.dropped is not None
            else Counter(c.reason for c in rows[kind] if not c.included and c.reason)
        )
    owned = built["summary"].owned
    if owned:
        dropped[OWNED_ELSEWHERE] += len(owned)
    owned = owned + built["attention"].owned  # (counted with the attention candidates)
    compact_limit = share(budget, limits.compact_share)
    live = inputs.live_history_tokens
    live = history.tokens_up_to(compact_limit) if live is None else live
    ranked = bool(query_terms(inputs.query)) and any(
        c.reason in (None, "top_k", "budget", "already_shown", "session_cap") for c in candidates
    )
    bounded = ranked or history_cut or any(a.truncated for a in allocations)
    shown_bytes = sum(c.bytes for c in rows["memory"] if c.included)
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
            allocation=allocations,
            minimum_tokens=minimum,
            history_dropped=fitted.dropped,
            history_repaired=history.repaired,
            placeholders=fitted.placeholders,
            skipped=[inputs.memory_skipped] if inputs.memory_skipped is not None else [],
            memory_session_bytes=inputs.memory_session_bytes + shown_bytes,
            owned_elsewhere=owned,
            attention=inputs.attention_reason,
        ),
    )


def _grow_memory(
    memory: MemoryBuilder,
    before: Built,
    allocation: Allocation,
    unused: int,
    budget: int,
    limits: ContextLimits,
    alone: bool,
) -> tuple[Built, Allocation] | None:
    """Memory rebuilt with what no kind used (budget step 6), or None when that adds nothing."""
    used = before.segment.tokens if before.segment else 0
    cap = min(ceiling("memory", budget, limits, alone=alone), used + unused)
    if cap - used < memory.least_left_out:  # not even the smallest entry left out would fit
        return None
    result = memory.build(cap, cap)
    now_used = result.segment.tokens if result.segment else 0
    if now_used <= used:
        return None
    grown = max(cap - allocation.cap, 0)
    return result, Allocation(
        kind="memory",
        cap=max(cap, allocation.cap),
        used=now_used,
        truncated=result.truncated,
        flowed=allocation.flowed + grown,
    )


def _share(
    builders: dict[SegmentKind, _Builder],
    own: dict[SegmentKind, int],
    budget: int,
    limits: ContextLimits,
    available: int,
    history_wants: int,
    alone: bool,
    fill_share: int = 0,
) -> tuple[dict[SegmentKind, Built], dict[SegmentKind, Allocation]]:
    """Build each segment kind within its cap, then let unused shares flow (see budget doc).

    ``available``: what history's reserve leaves; ``history_wants``: what history would
    take beyond it, which it gets before recall; ``fill_share``: how far memory's entries
    that only fill may grow memory before recall gets more than its own cap (the
    small-memory share).
    """
    built: dict[SegmentKind, Built] = {}
    allocation: dict[SegmentKind, Allocation] = {}
    for kind in SEGMENT_KINDS:  # step 3: each kind's own cap (memory's fill waits for step 4)
        cap = min(own[kind], available)
        if kind == SEGMENT_KINDS[-1] and not any(b.wants_more or b.wants_fill for b in built.values()):
            # What step 4 would give the last kind anyway: build it once, not twice.
            top = ceiling(kind, budget, limits, alone=alone)
            cap = max(cap, min(top, available - history_wants))
        result = builders[kind].build(cap, 0)
        used = result.segment.tokens if result.segment else 0
        available -= used
        built[kind] = result
        allocation[kind] = Allocation(kind=kind, cap=cap, used=used, truncated=result.truncated)
    for kind in SEGMENT_KINDS:  # step 4: unused shares flow, in the same order
        if kind == "recall" and built["memory"].wants_fill:
            # The memory the user keeps fills up to the small-memory share before excerpts
            # of other sessions grow past their own cap.
            top = min(fill_share, ceiling("memory", budget, limits, alone=alone))
            available = _fill_memory(builders, built, allocation, available - history_wants, top)
            available += history_wants
        before = allocation[kind]
        mine = min(own[kind], before.cap)
        if before.cap > mine:  # the last kind, built at once with what would flow to it
            allocation[kind] = msgspec.structs.replace(before, flowed=before.cap - mine)
            continue
        room = available - history_wants if kind == "recall" else available
        top = min(ceiling(kind, budget, limits, alone=alone), before.used + room)
        if available > 0 and built[kind].wants_more and top > before.cap:
            result = builders[kind].build(top, 0)
            used = result.segment.tokens if result.segment else 0
            available -= used - before.used
            built[kind] = result
            allocation[kind] = Allocation(
                kind=kind, cap=top, used=used, truncated=result.truncated, flowed=top - before.cap
            )
        if kind == "memory" and available > 0 and built[kind].wants_fill:
            # The rest of memory's own share goes to the entries that only fill (before
            # history and recall get more than their own).
            before = allocation[kind]
            fill = min(own[kind], before.used + available)
            if fill > before.used:
                cap = max(before.cap, fill)
                result = builders[kind].build(cap, fill)
                used = result.segment.tokens if result.segment else 0
                available -= used - before.used
                built[kind] = result
                allocation[kind] = Allocation(
                    kind=kind,
                    cap=cap,
                    used=used,
                    truncated=result.truncated,
                    flowed=before.flowed + cap - before.cap,
                )
    return built, allocation


def _fill_memory(
    builders: dict[SegmentKind, _Builder],
    built: dict[SegmentKind, Built],
    allocation: dict[SegmentKind, Allocation],
    room: int,
    fill_share: int,
) -> int:
    """Memory rebuilt with its entries that only fill, up to ``fill_share`` in all and
    within ``room``; returns what is left of ``room``."""
    before = allocation["memory"]
    fill = min(fill_share, before.used + room)
    if room <= 0 or fill <= before.used:
        return room
    cap = max(before.cap, fill)
    result = builders["memory"].build(cap, fill)
    used = result.segment.tokens if result.segment else 0
    if used <= before.used:
        return room
    built["memory"] = result
    allocation["memory"] = Allocation(
        kind="memory", cap=cap, used=used, truncated=result.truncated, flowed=before.flowed + cap - before.cap
    )
    return room - (used - before.used)


# ------------------------------------------------------- working state ---


class _BodyBuilder:
    """A segment that is one body of text, cut at a line when it does not fit."""

    def __init__(
        self,
        kind: SegmentKind,
        counter: TokenCounter,
        frame: Callable[[str], str],
        body: str,
        note: str,
        source_ids: list[str],
    ) -> None:
        self._kind: SegmentKind = kind
        self._counter = counter
        self._frame = frame
        self._body = body
        self._note = note
        self._source_ids = source_ids
        self.shown = ""

    def build(self, cap: int, fill_cap: int | None = None) -> Built:
        return self._fit(self._body, cap)

    def _fit(self, body: str, cap: int) -> Built:
        self.shown = ""
        if not body:
            return Built()
        fitted = fit_body(self._frame, body, self._note, cap, self._counter)
        if fitted is None:
            return Built(truncated=True, wants_more=True)
        text, cut, tokens = fitted
        self.shown = text
        segment = Segment(kind=self._kind, text=text, tokens=tokens, source_ids=list(self._source_ids))
        return Built(segment, cut, wants_more=cut)


class _SummaryBuilder(_BodyBuilder):
    """The summary without the lines the working state shows (``makad.core.ownership``).

    The working state is built before the summary at each step of the budget's
    sharing (``SEGMENT_KINDS``), so ``owner.shown`` is what the pack will show of it.
    """

    def __init__(self, owner: _BodyBuilder, *args: Any) -> None:
        super().__init__(*args)
        self._owner = owner

    def build(self, cap: int, fill_cap: int | None = None) -> Built:
        body, owned = drop_owned(self._body, self._owner.shown, segment="summary", owner="working_state")
        built = self._fit(body, cap)
        built.owned = owned if built.segment is not None else []
        return built


def _working_state(inputs: ContextInputs, counter: TokenCounter) -> _BodyBuilder:
    state = inputs.working_state
    body = "" if state is None or "working_state" not in inputs.include else working_state_body(state)
    return _BodyBuilder(
        "working_state", counter, working_state_text, body, "[… working state cut to fit the budget]", []
    )


class _Recorded:
    """A builder whose latest segment text is kept (what the pack shows of it so far)."""

    def __init__(self, inner: _Builder) -> None:
        self._inner = inner
        self.text = ""

    def build(self, cap: int, fill_cap: int | None = None) -> Built:
        built = self._inner.build(cap, fill_cap)
        self.text = built.segment.text if built.segment is not None else ""
        return built


# ----------------------------------------------------------- attention ---


ATTENTION_HEADING = "## Attention (what this workspace is in the middle of; from past sessions)"
_NO_PARTS = ScoreParts(bm25=0.0, recency=0.0, tags=0.0)


class AttentionBuilder:
    """The workspace's attention lines (``makad.core.attention``) that fit a cap, one owner
    per fact: a line the working state, the summary or memory already shows, or that cites
    only this session's own events, is left out (``owned_elsewhere``). ``owners`` gives the
    text each of those segments shows at the time of the build (they are built first)."""

    def __init__(
        self,
        inputs: ContextInputs,
        counter: TokenCounter,
        owners: Callable[[], list[tuple[str, str]]],
    ) -> None:
        self._lines = inputs.attention if "attention" in inputs.include else []
        self._session = inputs.session_id
        self._counter = counter
        self._owners = owners

    def _owner_of(self, text: str, shown: list[tuple[str, set[str], str]]) -> str | None:
        key = fact_key(text)
        rest = fact_key(text.split(": ", 1)[1]) if ": " in text else key
        for owner, keys, whole in shown:
            if len(key) >= MIN_OWNED_CHARS and key in keys:
                return owner
            if len(rest) >= MIN_OWNED_CHARS and rest in whole:
                return owner
        return None

    def build(self, cap: int, fill_cap: int | None = None) -> Built:
        if not self._lines:
            return Built()
        shown = [
            (owner, owner_keys(text), fact_key(" ".join(text.split())))
            for owner, text in self._owners()
            if text
        ]
        own_prefix = f"event:{self._session}:" if self._session else None
        rows: list[TraceCandidate] = []
        owned: list[OwnedLine] = []
        chosen: list[tuple[str, AttentionLine, int]] = []
        used = self._counter.count(ATTENTION_HEADING) + 1
        sections_used: set[str] = set()
        for section, line in self._lines:
            owner = None
            if own_prefix and line.refs and all(ref.startswith(own_prefix) for ref in line.refs):
                owner = "history"
            else:
                owner = self._owner_of(line.text, shown)
            source = line.refs[0] if line.refs else f"attention:{section}"
            rendered = render_lines(section, [line]).split("\n", 1)[1]
            tokens = self._counter.count(rendered) + 1
            reason: str | None = None
            if owner is not None:
                reason = OWNED_ELSEWHERE
                owned.append(OwnedLine(segment="attention", owner=owner, section=section, text=line.text))
            else:
                cost = tokens + (0 if section in sections_used else self._counter.count(f"### {section}") + 2)
                if used + cost > cap:
                    reason = "budget"
                else:
                    used += cost
                    sections_used.add(section)
                    chosen.append((section, line, len(rows)))
            rows.append(
                TraceCandidate(
                    kind="attention",
                    source_id=source,
                    score=0.0,
                    parts=_NO_PARTS,
                    included=reason is None,
                    reason=reason,
                    tokens=tokens if reason is None else 0,
                    title=line.text,
                )
            )
        text, tokens = self._render(chosen)
        while chosen and tokens > cap:  # a tokenizer need not be additive
            _, _, at = chosen.pop()
            rows[at].included, rows[at].reason, rows[at].tokens = False, "budget", 0
            text, tokens = self._render(chosen)
        left_out = any(row.reason == "budget" for row in rows)
        built = Built(None, left_out, rows, wants_more=left_out, owned=owned)
        if chosen:
            refs = list(dict.fromkeys(ref for _, line, _ in chosen for ref in line.refs))
            built.segment = Segment(kind="attention", text=text, tokens=tokens, source_ids=refs)
        return built

    def _render(self, chosen: list[tuple[str, AttentionLine, int]]) -> tuple[str, int]:
        if not chosen:
            return "", 0
        parts = [ATTENTION_HEADING]
        by_section: dict[str, list[AttentionLine]] = {}
        for section, line, _ in chosen:
            by_section.setdefault(section, []).append(line)
        parts.extend(render_lines(section, lines) for section, lines in by_section.items())
        text = "\n\n".join(parts)
        return text, self._counter.count(text)


# ------------------------------------------------------------- summary ---


def _summary(inputs: ContextInputs, counter: TokenCounter, owner: _BodyBuilder) -> _BodyBuilder:
    checkpoint = inputs.checkpoint
    if (
        checkpoint is None
        or "summary" not in inputs.include
        or checkpoint.session_id != inputs.session_id
        or not checkpoint.summary.strip()
    ):
        return _BodyBuilder("summary", counter, str, "", "", [])
    span = summary_span(checkpoint)
    return _SummaryBuilder(
        owner,
        "summary",
        counter,
        lambda body: summary_text(checkpoint, body),
        checkpoint.summary.strip(),
        f"[… summary cut to fit the budget; the events stay retrievable: {span}]",
        [f"checkpoint:{checkpoint.checkpoint_id}", span],
    )


# -------------------------------------------------------------- recall ---


def _event_exclusion(inputs: ContextInputs) -> Callable[[Event], str | None]:
    """Why an event cannot be recalled in this call, if it cannot.

    With a selection, recall needs no query (the selection chose) and an event
    it does not name is ``not_selected``.
    """
    reason = None
    selected = frozenset(inputs.selection) if inputs.selection is not None else None
    if "recall" not in inputs.include:
        reason = "excluded"
    elif selected is None and not query_terms(inputs.query):
        reason = "no_query"
    session_id = inputs.session_id
    horizon = inputs.checkpoint.coverage.to_seq if inputs.checkpoint is not None else 0

    def exclusion(event: Event) -> str | None:
        if reason is None and event.session_id == session_id and event.seq > horizon:
            return "in_history"
        if reason is None and selected is not None and event_ref(event.session_id, event.seq) not in selected:
            return "not_selected"
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

    def __init__(
        self,
        cap: int,
        counter: TokenCounter,
        limits: ContextLimits,
        line_cache: dict[tuple[str, int], tuple[str, int]],
    ) -> None:
        self.cap = cap
        self.counter = counter
        self.limits = limits
        self.line_cache = line_cache
        self.used = counter.count(recall_text([]))
        self.groups: dict[tuple[str, int], _Group] = {}  # (session, UTC day); rank order
        self.chosen: list[tuple[tuple[str, int], int]] = []
        self.header_tokens: dict[tuple[str, int], int] = {}
        self.gap_tokens = counter.count(f"{RECALL_GAP}\n")
        self.marks: dict[str, str] = {}  # event ref → the newer ref that supersedes it

    def could_fit(self, event: Event) -> bool:
        """False when the event's line surely cannot fit, judged without rendering it.

        The bound assumes at least a token per six characters: true of the
        heuristic counter and of real tokenizers, whatever the language.
        """
        return self.used + min(len(event.text), self.limits.recall_line_max_chars) // 6 <= self.cap

    def _line(self, event: Event) -> tuple[str, int]:
        """An event's line and what it costs (with its newline), rendered once per call."""
        key = (event.session_id, event.seq)
        found = self.line_cache.get(key)
        if found is None:
            line = recall_line(event, self.limits)
            newer = self.marks.get(event_ref(event.session_id, event.seq))
            if newer is not None:
                line = f"{line} {superseded_mark(newer)}"
            found = self.line_cache[key] = (line, self.counter.count(line + "\n"))
        return found

    def line_tokens(self, event: Event) -> int:
        return self._line(event)[1]

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
                blocks.append(
                    recall_block(list(group.events.values()), self.limits, lambda event: self._line(event)[0])
                )
                refs.extend(event_ref(sid, first, last) for first, last in group.runs())
        return recall_text(blocks), refs

    def text(self) -> tuple[str, int, list[str], list[tuple[str, int]]]:
        """The segment text, its tokens, its refs, and the (session, seq) of events given back."""
        text, refs = self._render()
        tokens = self.counter.count(text)
        returned: list[tuple[str, int]] = []
        while self.chosen and tokens > self.cap:  # a tokenizer need not be additive
            key, seq = self.chosen.pop()
            returned.append((key[0], seq))
            del self.groups[key].events[seq]
            text, refs = self._render()
            tokens = self.counter.count(text)
        return text, tokens, refs, returned


class _RecallBuilder:
    """Ranks the recall candidates once; ``build`` packs them into a cap."""

    def __init__(self, inputs: ContextInputs, counter: TokenCounter) -> None:
        self._inputs = inputs
        self._counter = counter
        self._exclusion = _event_exclusion(inputs)
        self._ranked: list[RankedEvent] = []
        self._lines: dict[tuple[str, int], tuple[str, int]] = {}
        self._marks: dict[str, str] = {}
        self._shown_elsewhere: Callable[[], set[str]] = set
        if not inputs.recall_hits:
            return
        eligible: list[RecallHit] = []
        seen: set[tuple[str, int]] = set()
        for hit in inputs.recall_hits:
            key = (hit.event.session_id, hit.event.seq)
            if key not in seen and self._exclusion(hit.event) is None:
                eligible.append(hit)
            seen.add(key)
        self._ranked = rank_events(inputs.recall_hits, inputs.query or "", inputs.now_ms, eligible=eligible)
        if inputs.selection is not None:
            order = {ref: at for at, ref in enumerate(inputs.selection)}
            last = len(order)
            self._ranked.sort(key=lambda r: order.get(event_ref(r.event.session_id, r.event.seq), last))

    def candidate_events(self) -> list[Event]:
        """The events this segment could show: the best ``recall_top_k`` it may recall."""
        limit = self._inputs.limits.recall_top_k
        out: list[Event] = []
        for ranked in self._ranked:
            if len(out) >= limit:
                break
            if self._exclusion(ranked.event) is None:
                out.append(ranked.event)
        return out

    def mark(self, superseded: dict[str, str], shown_elsewhere: Callable[[], set[str]]) -> None:
        """Lines of superseded events say which ref supersedes them (``makad.core.conflicts``);
        ``shown_elsewhere``: the refs the other parts of the pack show, read at each build."""
        self._marks = {ref: newer for ref, newer in superseded.items() if ref.startswith("event:")}
        self._shown_elsewhere = shown_elsewhere

    def build(self, cap: int, fill_cap: int | None = None) -> Built:
        """Pack within ``cap``. When the segment is tight (a candidate left out for budget), a
        superseded line whose newer ref the pack shows is dropped (``superseded``) and the
        room goes to others."""
        built, chosen = self._pack(cap, frozenset())
        if not self._marks or not built.dropped or not built.dropped["budget"]:
            return built
        shown = self._shown_elsewhere() | chosen
        stale = frozenset(ref for ref in chosen if self._marks.get(ref) in shown)
        return self._pack(cap, stale)[0] if stale else built

    def _pack(self, cap: int, stale: frozenset[str]) -> tuple[Built, set[str]]:
        if not self._ranked:
            return Built(), set()
        ranked, exclusion = self._ranked, self._exclusion
        limits = self._inputs.limits
        packer = _RecallPacker(cap, self._counter, limits, self._lines)
        packer.marks = self._marks
        outcome: list[tuple[str | None, int]] = []
        misses = 0  # consecutive candidates the remaining room could not take
        for item in ranked:
            reason = exclusion(item.event)
            tokens = 0
            if reason is None and stale and event_ref(item.event.session_id, item.event.seq) in stale:
                reason = "superseded"
            elif reason is None and len(packer.chosen) >= limits.recall_top_k:
                reason = "top_k"
            elif reason is None and (misses >= RECALL_GIVE_UP_AFTER or not packer.could_fit(item.event)):
                reason = "budget"
            elif reason is None:
                tokens = packer.line_tokens(item.event)
                if packer.offer(item.event, tokens):
                    misses = 0
                else:
                    reason = "budget"
                    misses += 1
            outcome.append((reason, tokens))
        text, text_tokens, source_ids, returned = packer.text()
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
        for candidate in candidates:
            newer = self._marks.get(candidate.source_id)
            if newer is not None:
                candidate.superseded_by = newer
        dropped = Counter(reason for reason, _ in outcome if reason is not None)
        truncated = bool(dropped["top_k"] or dropped["budget"])
        built = Built(None, truncated, candidates, dropped, wants_more=bool(dropped["budget"]))
        chosen = {event_ref(sid, seq) for (sid, _), seq in packer.chosen}
        if not packer.chosen:
            return built, chosen
        built.segment = Segment(kind="recall", text=text, tokens=text_tokens, source_ids=source_ids)
        return built, chosen
