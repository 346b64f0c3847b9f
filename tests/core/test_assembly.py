"""assemble(): budget, allocation, segments, trace and determinism."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.assembly import RECALL_GIVE_UP_AFTER, assemble
from makad.core.attention import AttentionLine
from makad.core.budget import share
from makad.core.context_types import (
    SEGMENT_KINDS,
    AllocationKind,
    ContextInputs,
    ContextLimits,
    ContextPack,
    RecallHit,
    SegmentKind,
)
from makad.core.history import message_tokens
from makad.core.render import entry_hash
from makad.core.tokens import HeuristicCounter
from makad.core.types import Checkpoint, Coverage, Entry, Event, EventType, WorkingState
from makad.errors import InvalidParams, TooLarge
from tests.core.test_history import assert_closed, event_streams

NOW = 1_700_000_000_000
DAY = 86_400_000
COUNTER = HeuristicCounter()


def ev(seq: int, type_: EventType, text: str, sid: str = "s1", **kw: str) -> Event:
    return Event(session_id=sid, seq=seq, ts=NOW - DAY + seq, type=type_, text=text, **kw)  # type: ignore[arg-type]


def entry(entry_id: str, content: str = "some fact", age_days: float = 0, **kw: object) -> Entry:
    return Entry(
        id=entry_id,
        title=f"title {entry_id}",
        content=content,
        updated_at=NOW - int(age_days * DAY),
        created_at=NOW - int(age_days * DAY) - 1,
        **kw,  # type: ignore[arg-type]
    )


def hit(sid: str, seq: int, bm25: float = -1.0, text: str = "berlin move", around: int = 1) -> RecallHit:
    neighbours = [
        Event(session_id=sid, seq=seq + d, ts=NOW - 30 * DAY, type="assistant_message", text=f"n{d}")
        for d in range(-around, around + 1)
        if d
    ]
    event = Event(session_id=sid, seq=seq, ts=NOW - 30 * DAY, type="user_message", text=text)
    return RecallHit(event=event, bm25=bm25, neighbours=neighbours)


def conversation(turns: int = 3, words: int = 20) -> list[Event]:
    events = []
    for t in range(turns):
        events.append(ev(t * 2 + 1, "user_message", f"question {t} " + "word " * words))
        events.append(ev(t * 2 + 2, "assistant_message", f"answer {t} " + "word " * words))
    events.append(ev(turns * 2 + 1, "user_message", "latest question"))
    return events


def checkpoint(to_seq: int = 10, summary: str = "Set up the repo.") -> Checkpoint:
    return Checkpoint(
        checkpoint_id="cp1",
        session_id="s1",
        boundary_seq=to_seq,
        coverage=Coverage(from_seq=1, to_seq=to_seq),
        covered_hash="h",
        summary=summary,
        summary_tokens=5,
        preserved_from_seq=to_seq + 1,
        mode="checkpoint",
        reason="manual",
        created_at=NOW,
    )


def inputs(**kw: object) -> ContextInputs:
    base: dict[str, object] = {"budget_tokens": 4000, "now_ms": NOW, "session_id": "s1"}
    base.update(kw)
    return ContextInputs(**base)  # type: ignore[arg-type]


def kinds(pack: ContextPack) -> list[str]:
    return [s.kind for s in pack.segments]


def reasons(pack: ContextPack) -> dict[str, str | None]:
    return {c.source_id: c.reason for c in pack.trace.candidates}


def check_pack(pack: ContextPack, budget: int) -> None:
    assert pack.total_tokens <= budget
    assert pack.total_tokens == sum(s.tokens for s in pack.segments) + sum(
        message_tokens(m, COUNTER) for m in pack.messages
    )
    assert all(s.tokens == COUNTER.count(s.text) for s in pack.segments)
    assert_closed(pack.messages)


# ------------------------------------------------------------- properties ---

_WORDS = st.text(alphabet="abc 数 ", min_size=1, max_size=300)


@st.composite
def random_inputs(draw: st.DrawFn) -> ContextInputs:
    history = [msgspec.structs.replace(e, session_id="s1") for e in draw(event_streams())]
    entries = [
        Entry(
            id=f"e{i}",
            title=draw(_WORDS),
            content=draw(_WORDS),
            updated_at=NOW - draw(st.integers(0, 90)) * DAY,
            status=draw(st.sampled_from(["active", "active", "archived"])),
            scope=draw(st.sampled_from(["workspace", "session"])),
            session_id=draw(st.sampled_from(["s1", "s2"])),
        )
        for i in range(draw(st.integers(0, 12)))
    ]
    bm25 = {e.id: -draw(st.floats(0, 20)) for e in entries}
    hits = [
        hit(f"o{i % 3}", i * 3, -draw(st.floats(0, 9)), draw(_WORDS)) for i in range(draw(st.integers(0, 8)))
    ]
    return inputs(
        budget_tokens=draw(st.integers(0, 1500)),
        query=draw(st.sampled_from([None, "", "abc 数", "berlin"])),
        memory_entries=entries,
        memory_bm25=bm25,
        working_state=WorkingState(goals=[draw(_WORDS)], notes={"Current State": draw(_WORDS)}),
        checkpoint=checkpoint(0, draw(_WORDS)),
        history=history,
        recall_hits=hits,
        include=frozenset(draw(st.sets(st.sampled_from(SEGMENT_KINDS)))),
        memory_enabled=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None)
@given(random_inputs())
def test_never_over_budget_closed_and_user_first(params: ContextInputs) -> None:
    """Any inputs: within budget with closed tool pairs, or too_large with figures."""
    try:
        pack = assemble(params)
    except TooLarge as err:
        assert err.details["minimumTokens"] > err.details["budgetTokens"] == params.budget_tokens
        return
    check_pack(pack, params.budget_tokens)


@settings(max_examples=75, deadline=None)
@given(random_inputs(), st.randoms(use_true_random=False))
def test_same_inputs_give_identical_bytes(params: ContextInputs, rnd: random.Random) -> None:
    """Repeated or reordered inputs encode to byte-identical packs."""
    try:
        first = msgspec.json.encode(assemble(params))
    except TooLarge:
        return
    assert msgspec.json.encode(assemble(params)) == first
    assert msgspec.json.encode(assemble(shuffled_inputs(params, rnd))) == first


def shuffled_inputs(params: ContextInputs, rnd: random.Random) -> ContextInputs:
    """The same inputs with history, entries and hits in another order."""
    return msgspec.structs.replace(
        params,
        history=rnd.sample(params.history, len(params.history)),
        memory_entries=rnd.sample(params.memory_entries, len(params.memory_entries)),
        recall_hits=rnd.sample(params.recall_hits, len(params.recall_hits)),
    )


# ------------------------------------------------------------ too_large ---


def test_too_large_when_the_newest_user_message_cannot_fit() -> None:
    """The error carries the budget and the minimum instead of an oversized pack."""
    params = inputs(budget_tokens=50, history=[ev(1, "user_message", "word " * 100)])
    with pytest.raises(TooLarge) as caught:
        assemble(params)
    assert caught.value.details == {"budgetTokens": 50, "minimumTokens": 4 + 125}


def test_the_minimum_alone_fits_exactly() -> None:
    """A budget equal to the newest user message keeps just that message."""
    params = inputs(
        budget_tokens=4 + 125,
        history=[ev(1, "user_message", "word " * 100)],
        working_state=WorkingState(goals=["g"]),
        memory_entries=[entry("a")],
    )
    pack = assemble(params)
    assert pack.segments == [] and [m.source_id for m in pack.messages] == ["event:s1:1"]
    assert pack.total_tokens == 129 and pack.trace.minimum_tokens == 129


def test_a_negative_budget_is_invalid() -> None:
    """A negative budget is a parameter error, not a too_large."""
    with pytest.raises(InvalidParams):
        assemble(inputs(budget_tokens=-1))


def test_an_empty_session_fits_any_budget() -> None:
    """No history and no segments: an empty pack, even at budget zero."""
    pack = assemble(inputs(budget_tokens=0))
    assert pack.total_tokens == 0 and pack.messages == [] and pack.trace.path == "fast"


# --------------------------------------------------------------- memory ---


def test_memory_needs_the_service_flag() -> None:
    """memory_enabled false: no memory segment, every candidate marked disabled."""
    pack = assemble(inputs(memory_entries=[entry("a")], memory_enabled=False))
    assert "memory" not in kinds(pack)
    assert reasons(pack) == {"memory:a": "disabled"}


def test_entries_scoped_to_another_session_never_show() -> None:
    """Session-scoped entries reach only their own session."""
    entries = [
        entry("mine", scope="session", session_id="s1"),
        entry("theirs", scope="session", session_id="s2"),
        entry("shared"),
    ]
    pack = assemble(inputs(memory_entries=entries))
    assert pack.segments[0].source_ids == ["memory:mine", "memory:shared"]
    assert reasons(pack)["memory:theirs"] == "scope"
    assert "theirs" not in pack.segments[0].text


def test_archived_inactive_and_expired_entries_are_left_out() -> None:
    """Only active, unexpired entries are candidates; the trace says why."""
    entries = [
        entry("gone", status="archived"),
        entry("draft", status="draft"),
        entry("old", decay_ttl_ms=DAY, age_days=2),
        entry("ok"),
    ]
    pack = assemble(inputs(memory_entries=entries))
    assert reasons(pack) == {
        "memory:ok": None,
        "memory:gone": "archived",
        "memory:draft": "inactive",
        "memory:old": "expired",
    }
    assert pack.trace.dropped == {"archived": 1, "expired": 1, "inactive": 1}


def test_stale_entries_carry_their_age() -> None:
    """An entry last updated three days ago says so, with a caveat."""
    pack = assemble(inputs(memory_entries=[entry("a", age_days=3.2)]))
    assert "memory:a · confidence high · updated 3 days ago · may be outdated" in pack.segments[0].text


def test_already_shown_entries_are_not_repeated_unless_changed() -> None:
    """An unchanged entry in the shown-manifest is skipped; a changed one returns."""
    same, changed = entry("same"), entry("changed", content="new text")
    shown = {"memory:same": entry_hash(same), "memory:changed": entry_hash(entry("changed"))}
    pack = assemble(inputs(memory_entries=[same, changed], already_shown=shown))
    assert pack.segments[0].source_ids == ["memory:changed"]
    assert reasons(pack)["memory:same"] == "already_shown"
    included = [c for c in pack.trace.candidates if c.included]
    assert included[0].content_hash == entry_hash(changed)


def test_query_ranks_memory_and_top_k_caps_it() -> None:
    """When not all fit: the best bm25 match first; past top-K, matches only fill leftover room
    (``top_k`` when none is left) and entries matching nothing come after them (``budget``)."""
    entries = [entry(f"e{i}", content="fact " * 200) for i in range(5)]
    params = inputs(
        memory_entries=entries,
        memory_bm25={"e3": -9.0, "e1": -3.0, "e0": -1.0},
        query="fact",
        budget_tokens=2000,
        limits=ContextLimits(memory_top_k=2),
        history=conversation(turns=40, words=40),
    )
    pack = assemble(params)
    assert pack.segments[0].source_ids == ["memory:e3", "memory:e1"]
    assert [(c.source_id, c.reason) for c in pack.trace.candidates] == [
        ("memory:e3", None),
        ("memory:e1", None),
        ("memory:e0", "top_k"),
        ("memory:e2", "budget"),
        ("memory:e4", "budget"),
    ]
    assert pack.trace.path == "bounded"


def test_top_k_does_not_cut_when_everything_fits() -> None:
    """With room for every entry nothing is chosen: top-K applies only when choosing is needed."""
    entries = [entry(f"e{i:02d}", content=f"small fact {i}") for i in range(16)]
    for query in (None, "fact"):
        pack = assemble(
            inputs(
                budget_tokens=8000,
                memory_entries=entries,
                query=query,
                memory_bm25={e.id: -1.0 for e in entries},
            )
        )
        assert len(pack.segments[0].source_ids) == 16
        assert all(c.included for c in pack.trace.candidates)


def test_unrelated_entry_does_not_take_a_dropped_matchs_place() -> None:
    """A matching entry left out for room asks for more; an entry matching nothing only takes
    what is left once the matching ones are in."""
    entries = [entry("match", content="deploy " * 120), entry("other")]
    params = inputs(memory_entries=entries, memory_bm25={"match": -5.0}, query="deploy", budget_tokens=300)
    pack = assemble(params)
    assert pack.segments[0].source_ids[0] == "memory:match"
    memory = {a.kind: a for a in pack.trace.allocation}["memory"]
    assert memory.flowed > 0 and memory.used <= memory.cap <= 300


def test_everything_fits_includes_unrelated_entries() -> None:
    """When all entries fit, nothing needs choosing: unrelated ones are included too."""
    entries = [entry("a"), entry("b")]
    pack = assemble(inputs(memory_entries=entries, memory_bm25={"a": -5.0}, query="fact", budget_tokens=8000))
    assert {c.source_id for c in pack.trace.candidates if c.included} == {"memory:a", "memory:b"}


def test_memory_segment_stays_within_its_ceiling() -> None:
    """However much budget is unused, memory never grows past its ceiling."""
    entries = [entry(f"e{i:02d}", content="word " * 200) for i in range(10)]
    big = assemble(
        inputs(budget_tokens=100_000, memory_entries=entries, limits=ContextLimits(memory_max_tokens=400))
    )
    assert big.segments[0].tokens <= 400
    assert "budget" in big.trace.dropped


def test_a_long_conversation_takes_unused_shares_before_recall() -> None:
    """History comes before recall in the flow: with a long live history recall keeps its share."""
    hits = [hit(f"o{i}", 10, bm25=-1.0 - i / 10, text="berlin " + "fact " * 30) for i in range(40)]
    long = assemble(
        inputs(budget_tokens=2000, query="berlin", recall_hits=hits, history=conversation(turns=60))
    )
    alloc = {a.kind: a for a in long.trace.allocation}
    assert alloc["recall"].flowed == 0 and alloc["recall"].used <= share(2000, 15)
    assert alloc["history"].used > 2000 - share(2000, 15) - 50
    short = assemble(
        inputs(budget_tokens=2000, query="berlin", recall_hits=hits, history=conversation(turns=1))
    )
    alloc = {a.kind: a for a in short.trace.allocation}
    assert alloc["recall"].flowed > 0
    assert alloc["history"].used == sum(message_tokens(m, COUNTER) for m in short.messages)
    assert len(short.messages) == 3  # the whole conversation, recall took only what was left
    check_pack(long, 2000)
    check_pack(short, 2000)


def test_kinds_get_their_shares_before_unused_budget_flows() -> None:
    """Memory and recall both want more: each keeps its share, the rest goes to memory first."""
    entries = [entry(f"e{i:02d}", content="berlin " + "word " * 200) for i in range(10)]
    hits = [hit(f"o{i}", 10, bm25=-1.0 - i / 10, text="berlin " + "fact " * 30) for i in range(40)]
    pack = assemble(
        inputs(
            budget_tokens=4000,
            query="berlin",
            memory_entries=entries,
            memory_bm25={e.id: -2.0 for e in entries},
            recall_hits=hits,
            history=conversation(turns=60),
        )
    )
    alloc = {a.kind: a for a in pack.trace.allocation}
    assert alloc["recall"].cap - alloc["recall"].flowed == share(4000, 15)
    assert alloc["recall"].used > share(4000, 15) // 2
    assert alloc["memory"].flowed > alloc["recall"].flowed
    assert alloc["memory"].used > share(4000, 20)
    assert alloc["history"].cap >= share(4000, 40)
    check_pack(pack, 4000)


# --------------------------------------------------------------- include ---


@pytest.mark.parametrize("off", SEGMENT_KINDS)
def test_include_switches_a_kind_off(off: SegmentKind) -> None:
    """A kind missing from include is absent; the others remain."""
    params = inputs(
        query="berlin",
        memory_entries=[entry("a")],
        working_state=WorkingState(goals=["g"]),
        checkpoint=checkpoint(),
        history=[ev(20, "user_message", "hello")],
        recall_hits=[hit("other", 5)],
        attention=[
            ("Active threads", AttentionLine(text="Open: migrate the importer", refs=["event:old:3"]))
        ],
        include=frozenset(k for k in SEGMENT_KINDS if k != off),
    )
    pack = assemble(params)
    assert sorted(kinds(pack)) == sorted(k for k in SEGMENT_KINDS if k != off)
    if off in ("memory", "recall"):
        assert "excluded" in pack.trace.dropped


def test_segments_come_in_a_stable_order() -> None:
    """memory, summary, working_state, recall: the most stable first."""
    pack = assemble(
        inputs(
            query="berlin",
            memory_entries=[entry("a")],
            working_state=WorkingState(goals=["g"]),
            checkpoint=checkpoint(),
            history=[ev(20, "user_message", "hi")],
            recall_hits=[hit("other", 5)],
        )
    )
    assert kinds(pack) == ["memory", "summary", "working_state", "recall"]
    assert pack.segments[1].source_ids == ["checkpoint:cp1", "event:s1:1-10"]


# ------------------------------------------------------------ allocation ---


def test_unused_segment_share_flows_to_history() -> None:
    """History may use far more than its floor when the segments need little."""
    history = conversation(turns=60)
    params = inputs(budget_tokens=2000, history=history, working_state=WorkingState(goals=["g"]))
    pack = assemble(params)
    alloc = {a.kind: a for a in pack.trace.allocation}
    segment_used = sum(a.used for a in pack.trace.allocation if a.kind != "history")
    assert alloc["history"].cap == 2000 - segment_used
    assert alloc["history"].used > share(2000, 85)
    assert pack.trace.history_dropped > 0 and pack.trace.path == "bounded"


def test_history_floor_is_reserved_against_greedy_segments() -> None:
    """Big segments cannot push history below its 40% floor, flow included."""
    params = inputs(
        budget_tokens=2000,
        query="fact",
        history=conversation(turns=60, words=3),
        working_state=WorkingState(notes={"Worklog": "step done\n" * 400}),
        checkpoint=checkpoint(summary="summary line\n" * 400),
        memory_entries=[entry(f"e{i}", content="fact " * 100) for i in range(20)],
        recall_hits=[hit(f"o{i}", 10, text="fact " * 60) for i in range(10)],
    )
    pack = assemble(params)
    alloc = {a.kind: a for a in pack.trace.allocation}
    assert alloc["history"].cap >= share(2000, 40)
    assert alloc["working_state"].truncated and alloc["summary"].truncated
    caps: list[tuple[AllocationKind, int]] = [
        ("working_state", 15),
        ("summary", 20),
        ("memory", 20),
        ("recall", 15),
    ]
    for kind, percent in caps:
        assert alloc[kind].used <= alloc[kind].cap
        assert alloc[kind].cap - alloc[kind].flowed <= max(share(2000, percent), 200)
    check_pack(pack, 2000)


def test_compaction_is_recommended_past_sixty_percent() -> None:
    """compactRecommended follows the live history's share of the budget."""
    small = assemble(inputs(history=conversation(turns=2)))
    assert not small.compact_recommended
    big = assemble(inputs(budget_tokens=1000, history=conversation(turns=40)))
    assert big.compact_recommended
    told = assemble(inputs(history=conversation(turns=2), live_history_tokens=2401))
    assert told.compact_recommended


def test_fast_path_when_everything_fits_untouched() -> None:
    """No query and room for all: the trace reports the fast path."""
    pack = assemble(inputs(history=conversation(), memory_entries=[entry("a")]))
    assert pack.trace.path == "fast" and pack.trace.history_dropped == 0
    assert pack.messages[0].role == "user"


# ---------------------------------------------------------------- recall ---


def included(pack: ContextPack) -> list[str]:
    return [c.source_id for c in pack.trace.candidates if c.kind == "recall" and c.included]


def test_recall_needs_a_query() -> None:
    """Without a query no recall segment is built; the hit and its neighbours say why."""
    pack = assemble(inputs(recall_hits=[hit("other", 5)]))
    assert "recall" not in kinds(pack)
    assert reasons(pack) == {f"event:other:{s}": "no_query" for s in (4, 5, 6)}


def test_recall_skips_this_sessions_live_history() -> None:
    """Events of this session after the checkpoint are already in the history."""
    params = inputs(
        query="berlin",
        checkpoint=checkpoint(to_seq=10),
        recall_hits=[hit("s1", 5), hit("s1", 15), hit("other", 7)],
    )
    got = reasons(assemble(params))
    assert {ref: got[ref] for ref in ("event:s1:5", "event:s1:6", "event:other:7")} == {
        "event:s1:5": None,
        "event:s1:6": None,
        "event:other:7": None,
    }
    assert {got[f"event:s1:{s}"] for s in (14, 15, 16)} == {"in_history"}


def test_neighbours_join_their_hits_in_one_block_with_range_refs() -> None:
    """A session's chosen events form one block; each run of seqs is one range ref."""
    params = inputs(query="berlin", recall_hits=[hit("o", 5), hit("o", 8), hit("o", 30)])
    recall = assemble(params).segments[0]
    assert recall.source_ids == ["event:o:4-9", "event:o:29-31"]
    assert recall.text.count("event:o ·") == 1
    body = recall.text.split("\n\n", 1)[1]
    numbered = [line.split(" ", 1)[0] for line in body.splitlines()[1:-1]]
    assert numbered == ["4", "5", "6", "7", "8", "9", "…", "29", "30", "31"]


def test_a_neighbour_of_a_strong_hit_outranks_a_weak_hit() -> None:
    """The turn after a strong match comes before an unrelated weak match."""
    strong, weak = hit("a", 10, bm25=-10.0), hit("b", 50, bm25=-2.0)
    pack = assemble(inputs(query="berlin", recall_hits=[weak, strong]))
    order = [c.source_id for c in pack.trace.candidates]
    assert order[0] == "event:a:10"
    assert order.index("event:a:11") < order.index("event:b:50")


def test_recall_respects_top_k_events() -> None:
    """Only the best recall_top_k events are shown; the others are dropped for top_k."""
    hits = [hit(f"o{i}", 10, bm25=-float(i + 1)) for i in range(4)]
    pack = assemble(inputs(query="berlin", recall_hits=hits, limits=ContextLimits(recall_top_k=2)))
    assert included(pack) == ["event:o3:10", "event:o3:9"]
    assert pack.segments[0].source_ids == ["event:o3:9-10"]
    assert pack.trace.dropped == {"top_k": 10}


def test_an_event_too_big_for_the_budget_leaves_room_for_smaller_ones() -> None:
    """A neighbour that cannot fit is dropped for budget while the hit line is kept."""
    big = hit("o", 10, text="berlin", around=3)
    big.neighbours = [msgspec.structs.replace(n, text="word " * 80) for n in big.neighbours]
    limits = ContextLimits(recall_max_tokens=150, segment_floor_tokens=0)
    pack = assemble(inputs(budget_tokens=1000, query="berlin", recall_hits=[big], limits=limits))
    recall = pack.segments[0]
    assert included(pack) == ["event:o:10"]
    assert recall.source_ids == ["event:o:10"]
    assert recall.tokens <= 150
    assert pack.trace.dropped == {"budget": 6}


def test_recall_alone_may_use_the_whole_budget() -> None:
    """With include = {recall} the 15 % share does not apply; the budget still does."""
    hits = [hit(f"o{i}", 10, bm25=-1.0 - i / 10, text="berlin " + "fact " * 30) for i in range(40)]
    alone = assemble(
        inputs(
            session_id=None,
            budget_tokens=2000,
            query="berlin",
            recall_hits=hits,
            include=frozenset({"recall"}),
        )
    )
    assert share(2000, 15) < alone.segments[0].tokens <= 2000
    check_pack(alone, 2000)


def test_unused_shares_flow_to_recall_in_a_fresh_session() -> None:
    """Nothing else to show: the default pack spends at least 70 % of the budget on recall."""
    hits = [hit(f"o{i}", 10, bm25=-1.0 - i / 10, text="berlin " + "fact " * 30) for i in range(40)]
    pack = assemble(
        inputs(
            budget_tokens=2000,
            query="berlin",
            recall_hits=hits,
            memory_entries=[],
            working_state=WorkingState(),
        )
    )
    recall = {a.kind: a for a in pack.trace.allocation}["recall"]
    assert pack.total_tokens >= 0.7 * 2000 and recall.used == pack.segments[0].tokens
    assert recall.flowed > 0 and recall.cap - recall.flowed == share(2000, 15)
    check_pack(pack, 2000)


def test_the_trace_lists_the_best_candidates_and_counts_them_all() -> None:
    """Past recall_trace_max only included candidates are listed; dropped counts every one."""
    hits = [hit(f"o{i}", 10, bm25=-1.0 - i) for i in range(6)]
    pack = assemble(
        inputs(query="berlin", recall_hits=hits, limits=ContextLimits(recall_trace_max=2, recall_top_k=3))
    )
    listed = [c for c in pack.trace.candidates if c.kind == "recall"]
    assert [c.included for c in listed] == [True, True, True]
    assert sum(pack.trace.dropped.values()) == 18 - 3


def shown_refs(pack: ContextPack) -> set[str]:
    """The event refs the recall text shows: block header session + line number."""
    shown: set[str] = set()
    for segment in pack.segments:
        session = ""
        for line in segment.text.splitlines():
            head = line.split(" ", 1)[0]
            if head.startswith("event:"):
                session = head[len("event:") :]
            elif session and head.isdigit():
                shown.add(f"event:{session}:{head}")
    return shown


def expanded(refs: list[str]) -> set[str]:
    out: set[str] = set()
    for ref in refs:
        _, sid, span = ref.split(":")
        first, _, last = span.partition("-")
        out.update(f"event:{sid}:{seq}" for seq in range(int(first), int(last or first) + 1))
    return out


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(3, 60), st.floats(0.1, 20), st.integers(0, 120)), max_size=25
    ),
    st.integers(0, 3000),
)
def test_recall_segment_refs_match_its_lines(spec: list[tuple[int, int, float, int]], budget: int) -> None:
    """Every ref of the recall segment names exactly the numbered lines shown, all included."""
    hits = [hit(f"s{sid}", seq, -score, text="berlin " + "x" * size) for sid, seq, score, size in spec]
    pack = assemble(
        inputs(
            session_id=None,
            budget_tokens=budget,
            query="berlin",
            recall_hits=hits,
            include=frozenset({"recall"}),
        )
    )
    check_pack(pack, budget)
    refs = expanded([r for s in pack.segments for r in s.source_ids])
    assert refs == shown_refs(pack) == set(included(pack))


def test_recall_packing_gives_up_once_the_segment_is_full() -> None:
    """After RECALL_GIVE_UP_AFTER lines in a row did not fit, the rest are dropped unmeasured."""
    dense = "berlin " + "12 " * 100  # ~130 tokens, while the cheap lower bound says ~50
    hits = [hit(f"o{i:03}", 10, bm25=-1.0 - i / 100, text=dense, around=0) for i in range(100)]
    pack = assemble(
        inputs(
            session_id=None,
            budget_tokens=500,
            query="berlin",
            recall_hits=hits,
            include=frozenset({"recall"}),
            limits=ContextLimits(recall_trace_max=200),
        )
    )
    listed = [c for c in pack.trace.candidates if c.kind == "recall"]
    assert len(listed) == 100 and any(c.included for c in listed)
    last_in = max(i for i, c in enumerate(listed) if c.included)
    after = listed[last_in + 1 :]
    measured = [c for c in after if c.tokens > 0]
    assert len(measured) == RECALL_GIVE_UP_AFTER
    assert all(c.reason == "budget" for c in after)
    assert all(c.tokens == 0 for c in after[RECALL_GIVE_UP_AFTER:])
    check_pack(pack, 500)


def test_protocols_worked_example_of_a_fresh_session() -> None:
    """PROTOCOL.md's first worked example: every figure it names, as assemble computes it."""
    history = [ev(1, "user_message", "how do we deploy the service on fridays?")]
    entries = [
        entry(f"m{i}", f"deploy fact {i}: " + "the pipeline waits for the canary " * 2) for i in range(3)
    ]
    hits = [
        hit(f"o{i}", 10, bm25=-1.0 - i / 10, text="deploy " + "step of the pipeline " * 8) for i in range(40)
    ]
    pack = assemble(
        inputs(
            budget_tokens=2000,
            query="deploy",
            history=history,
            memory_entries=entries,
            recall_hits=hits,
            working_state=WorkingState(),
        )
    )
    allocation = {a.kind: a for a in pack.trace.allocation}
    minimum = pack.trace.minimum_tokens
    memory = next(s for s in pack.segments if s.kind == "memory")
    assert 15 <= minimum <= 25 and allocation["history"].used == minimum
    assert (allocation["working_state"].cap, allocation["working_state"].used) == (300, 0)
    assert (allocation["summary"].cap, allocation["summary"].used) == (400, 0)
    assert allocation["memory"].cap == 400 and len(memory.source_ids) == 3 and 120 <= memory.tokens <= 180
    recall = allocation["recall"]
    assert recall.cap == 2000 - minimum - memory.tokens and recall.flowed == recall.cap - 300
    assert recall.used > recall.cap - 100 and pack.total_tokens > 1850
    check_pack(pack, 2000)
