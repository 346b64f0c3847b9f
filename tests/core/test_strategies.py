"""The strategies of makad.core.strategies: the invariants every one of them keeps."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextPack, RecallHit
from makad.core.memory_segment import memory_exclusion
from makad.core.refs import event_ref, memory_ref
from makad.core.strategies import STRATEGY_NAMES, strategy
from makad.core.strategies import curator as cur
from makad.core.strategies.newest import newest_first
from makad.core.types import ContextStrategy, Event
from makad.errors import TooLarge
from tests.core.test_assembly import (
    DAY,
    NOW,
    check_pack,
    checkpoint,
    conversation,
    entry,
    hit,
    inputs,
    random_inputs,
    shuffled_inputs,
)

DETERMINISTIC: tuple[ContextStrategy, ...] = ("deterministic", "full", "recent", "summary")


@st.composite
def gated_inputs(draw: st.DrawFn) -> ContextInputs:
    """Random inputs plus recall hits in the current session, some in its live part."""
    base = draw(random_inputs())
    horizon = base.checkpoint.coverage.to_seq if base.checkpoint is not None else 0
    own = [hit("s1", seq, -1.0, "abc berlin") for seq in draw(st.lists(st.integers(1, 40), max_size=4))]
    return msgspec.structs.replace(
        base, recall_hits=[*base.recall_hits, *own], checkpoint=checkpoint(max(horizon, 5))
    )


def assert_gates(pack: ContextPack, params: ContextInputs) -> None:
    """Nothing a gate keeps out was shown: memory past its switches or scope, the live history
    as recall, a kind that was not asked for."""
    by_ref = {memory_ref(e.id): e for e in params.memory_entries}
    horizon = params.checkpoint.coverage.to_seq if params.checkpoint is not None else 0
    for candidate in pack.trace.candidates:
        if not candidate.included:
            continue
        if candidate.kind == "memory":
            assert memory_exclusion(by_ref[candidate.source_id], params) is None
        else:
            assert "recall" in params.include
            sid, _, seq = candidate.source_id.removeprefix("event:").rpartition(":")
            assert not (sid == params.session_id and int(seq) > horizon)
    shown = {ref for s in pack.segments if s.kind == "memory" for ref in s.source_ids}
    assert shown == {c.source_id for c in pack.trace.candidates if c.kind == "memory" and c.included}


@settings(max_examples=60, deadline=None)
@given(gated_inputs(), st.sampled_from(STRATEGY_NAMES))
def test_every_strategy_keeps_budget_adjacency_and_gates(
    params: ContextInputs, name: ContextStrategy
) -> None:
    """Any inputs, any strategy: within budget, tool pairs closed, no gate crossed."""
    try:
        pack = strategy(name).build(params)
    except TooLarge as err:
        assert err.details["minimumTokens"] > params.budget_tokens
        return
    check_pack(pack, params.budget_tokens)
    assert_gates(pack, params)
    assert pack.trace.strategy == name


@settings(max_examples=80, deadline=None)
@given(gated_inputs(), st.lists(st.text(alphabet="emo:s1234-", max_size=12), max_size=8), st.integers(1, 4))
def test_any_curator_pick_keeps_budget_gates_and_what_fit(
    params: ContextInputs, junk: list[str], step: int
) -> None:
    """A pick of arbitrary refs (offered, gated, unknown): never over budget or past a gate,
    and everything the deterministic pack showed outside the kinds under pressure stays."""
    try:
        deterministic = assemble(params)
    except TooLarge:
        return
    refs = [memory_ref(e.id) for e in params.memory_entries] + [
        event_ref(h.event.session_id, h.event.seq) for h in params.recall_hits
    ]
    pick = cur.Answer(selected=list(dict.fromkeys(refs[::step] + junk)), ignored=[])
    result = cur.curated(params, deterministic, pick)
    assert result is not None  # an empty pick always keeps what fit
    pack = result.pack
    check_pack(pack, params.budget_tokens)
    assert_gates(pack, params)
    pressure = cur.pressured(deterministic)
    assert cur.keeps(deterministic, pack, pressure)
    kept = set(cur.shown_refs(deterministic, tuple(k for k in cur.KINDS if k not in pressure)))
    chosen = set(pick.selected) | kept
    assert kept <= set(cur.shown_refs(pack))
    assert all(c.source_id in chosen for c in pack.trace.candidates if c.included)
    assert 0 <= result.trimmed <= len(pick.selected)


@settings(max_examples=40, deadline=None)
@given(random_inputs(), st.randoms(use_true_random=False), st.sampled_from(DETERMINISTIC))
def test_deterministic_strategies_give_identical_bytes(
    params: ContextInputs, rnd: random.Random, name: ContextStrategy
) -> None:
    """Repeated or reordered inputs give byte-identical packs, for each deterministic strategy."""
    build = strategy(name).build
    try:
        first = msgspec.json.encode(build(params))
    except TooLarge:
        return
    assert msgspec.json.encode(build(params)) == first
    assert msgspec.json.encode(build(shuffled_inputs(params, rnd))) == first


@settings(max_examples=40, deadline=None)
@given(random_inputs())
def test_deterministic_is_todays_assembler(params: ContextInputs) -> None:
    """The deterministic strategy and both curator fallbacks are assemble's output, unchanged."""
    try:
        expected = assemble(params)
    except TooLarge:
        return
    assert strategy("deterministic").build(params) == expected
    for name in ("curator", "curator_shadow"):
        pack = strategy(name).build(params)
        assert (pack.segments, pack.messages, pack.total_tokens) == (
            expected.segments,
            expected.messages,
            expected.total_tokens,
        )


def _events(count: int, sid: str = "o1", words: int = 12) -> list[RecallHit]:
    return [
        RecallHit(
            event=Event(
                session_id=sid,
                seq=seq,
                ts=NOW - 10 * DAY + seq * 1000,
                type="user_message",
                text=f"turn {seq} " + "filler " * words,
            ),
            bm25=0.0,
        )
        for seq in range(1, count + 1)
    ]


def test_recent_shows_the_newest_events_first_without_a_query() -> None:
    """recent recalls with no query, the newest events, within recall's usual limits."""
    params = inputs(budget_tokens=2000, history=conversation(1), recall_hits=_events(200))
    pack = strategy("recent").build(params)
    recall = [c for c in pack.trace.candidates if c.kind == "recall" and c.included]
    assert recall and recall[0].source_id == "event:o1:200"
    seqs = [int(c.source_id.rsplit(":", 1)[1]) for c in recall]
    assert seqs == sorted(seqs, reverse=True) and seqs[-1] == 200 - len(seqs) + 1
    assert len(seqs) <= params.limits.recall_top_k
    assert strategy("deterministic").build(params).segments == []  # no query: no recall


def test_full_fills_the_budget_recent_keeps_the_limits() -> None:
    """full lets recall take all that history leaves; recent keeps recall's ceiling and top-k."""
    params = inputs(budget_tokens=30_000, history=conversation(1), recall_hits=_events(2_000))
    full = strategy("full").build(params)
    recent = strategy("recent").build(params)
    assert 30_000 * 0.95 < full.total_tokens <= 30_000
    recent_recall = next(s for s in recent.segments if s.kind == "recall")
    assert recent_recall.tokens <= params.limits.recall_max_tokens
    assert full.total_tokens > recent.total_tokens * 2


def test_summary_shows_the_checkpoint_summary_and_the_tail_only() -> None:
    """summary leaves memory and recall out and keeps the summary and the live tail."""
    params = inputs(
        query="berlin",
        memory_entries=[entry("a", "berlin move")],
        memory_bm25={"a": -3.0},
        checkpoint=checkpoint(2, "Moved to Berlin."),
        history=conversation(3)[2:],
        recall_hits=[hit("o1", 5)],
    )
    pack = strategy("summary").build(params)
    assert [s.kind for s in pack.segments] == ["summary"]
    assert pack.messages and pack.messages[-1].content == "latest question"
    assert {c.reason for c in pack.trace.candidates} == {"excluded"}


def test_newest_first_orders_memory_then_events() -> None:
    """The recency order: memory by last update, then events by time, newest first."""
    params = inputs(
        memory_entries=[entry("old", age_days=9), entry("new", age_days=1)], recall_hits=_events(3)
    )
    assert newest_first(params) == ["memory:new", "memory:old", "event:o1:3", "event:o1:2", "event:o1:1"]


# ------------------------------------------------------------------ curator ---


def _curator_inputs(**kw: object) -> ContextInputs:
    base: dict[str, object] = {
        "query": "where did Ann move",
        "session_id": "s1",
        "memory_entries": [
            entry("move", "Ann moved to Berlin; token sk-ant-api03-" + "x" * 40),
            entry("other", "scoped elsewhere", scope="session", session_id="s2"),
            entry("gone", "archived", status="archived"),
        ],
        "memory_bm25": {"move": -4.0, "other": -4.0, "gone": -4.0},
        "history": conversation(1),
        "recall_hits": [hit("o1", 5, -3.0, "Ann: we moved to Berlin"), hit("o2", 9, -1.0, "Ann moved house")],
    }
    base.update(kw)
    return inputs(**base)


def _crowded_recall(count: int = 60, words: int = 30) -> list[RecallHit]:
    """More recall events about the move than any small budget holds."""
    return [
        hit(f"o{i % 4}", 10 + i * 5, -5.0 + i / 100, f"Ann moved to Berlin, detail {i} " + "word " * words)
        for i in range(count)
    ]


def test_curator_is_offered_only_what_passed_the_gates_redacted() -> None:
    """Offers carry refs of gate-passing candidates only, and no secret text."""
    params = _curator_inputs()
    offered = cur.offers(params, assemble(params), ["memory", "recall"])
    refs = [o.ref for o in offered]
    assert "memory:move" in refs and "event:o1:5" in refs
    assert "memory:other" not in refs and "memory:gone" not in refs
    assert all("sk-ant" not in o.text for o in offered)
    assert any("[REDACTED" in o.text for o in offered)
    prompt = cur.prompt(params.query, offered)
    assert "memory:move |" in prompt[1]["content"] and "where did Ann move" in prompt[1]["content"]


def test_no_pressure_when_everything_fits_and_nothing_is_offered() -> None:
    """Every gate-passing candidate fits: no kind is under pressure, the default offer is empty."""
    params = _curator_inputs()
    pack = assemble(params)
    assert cur.pressured(pack) == [] and cur.offers(params, pack) == []


def test_pressure_names_the_kind_that_did_not_fit_and_offers_only_it() -> None:
    """Recall crowded, memory small: recall is under pressure, and only recall events are offered."""
    params = _curator_inputs(budget_tokens=1200, recall_hits=_crowded_recall())
    pack = assemble(params)
    assert cur.pressured(pack) == ["recall"]
    offered = cur.offers(params, pack)
    assert offered and all(o.ref.startswith("event:") for o in offered)
    assert len(offered) <= cur.MAX_RECALL_OFFERS
    many = [entry(f"m{i}", f"Ann moved note {i} " + "word " * 60) for i in range(80)]
    crowded = assemble(_curator_inputs(memory_entries=many, memory_bm25={e.id: -2.0 for e in many}))
    assert cur.pressured(crowded) == ["memory"]


def test_curator_answer_is_validated_against_the_offer() -> None:
    """Only offered refs count; garbage, empty and all-unknown answers are refused with a reason."""
    offered = [cur.Offer("memory:a", "x"), cur.Offer("event:o1:5", "y")]
    good = cur.read_answer('{"selected": ["event:o1:5", "memory:zzz", "memory:a", "event:o1:5"]}', offered)
    assert good.selected == ["event:o1:5", "memory:a"] and good.ignored == ["memory:zzz"]
    fenced = cur.read_answer('Sure:\n```json\n{"selected": ["memory:a"]}\n```', offered)
    assert fenced.selected == ["memory:a"]
    for text, reason in [
        ("not json at all", "unparseable"),
        ('{"picked": []}', "unparseable"),
        ('["memory:a"]', "unparseable"),
        ('{"selected": []}', "empty"),
        ('{"selected": ["memory:nope", 3]}', "no_known_refs"),
    ]:
        with pytest.raises(cur.BadAnswer) as caught:
            cur.read_answer(text, offered)
        assert caught.value.reason == reason


def test_a_narrow_pick_keeps_the_memory_that_fit() -> None:
    """Recall under pressure, a one-event pick: every memory entry and message shown stays."""
    params = _curator_inputs(budget_tokens=1200, recall_hits=_crowded_recall())
    deterministic = assemble(params)
    result = cur.curated(params, deterministic, cur.Answer(selected=["event:o3:305"], ignored=[]))
    assert result is not None and result.trimmed == 0
    shown = cur.shown_refs(result.pack)
    assert shown == ["memory:move", "event:o3:305"]
    assert cur.shown_refs(deterministic, ("memory",)) == ["memory:move"]
    assert [m.source_id for m in result.pack.messages] == [m.source_id for m in deterministic.messages]
    reasons = {c.source_id: c.reason for c in result.pack.trace.candidates}
    assert reasons["event:o0:10"] == "not_selected"
    check_pack(result.pack, params.budget_tokens)


def test_a_greedy_pick_is_trimmed_until_nothing_that_fit_is_dropped() -> None:
    """Memory cut by top-k, a pick of every entry: its last picks go, so recall and history stay."""
    many = [entry(f"m{i}", f"Ann moved note {i} " + "word " * 20) for i in range(30)]
    params = _curator_inputs(
        budget_tokens=2400,
        memory_entries=many,
        memory_bm25={e.id: -2.0 for e in many},
        history=conversation(16, words=40),  # more than its reserve: it takes unused shares
    )
    deterministic = assemble(params)
    assert cur.pressured(deterministic) == ["memory"]
    pick = cur.Answer(selected=[memory_ref(e.id) for e in reversed(many)], ignored=[])
    result = cur.curated(params, deterministic, pick)
    assert result is not None and result.trimmed > 0
    assert cur.keeps(deterministic, result.pack, ["memory"])
    recall_before = cur.shown_refs(deterministic, ("recall",))
    assert recall_before and cur.shown_refs(result.pack, ("recall",)) == recall_before
    memory = cur.shown_refs(result.pack, ("memory",))
    assert memory and memory == pick.selected[: len(memory)]  # the pick's order, its head kept
    check_pack(result.pack, params.budget_tokens)


def test_overlap_is_jaccard_of_the_refs() -> None:
    """overlap: shared refs over all refs; two empty lists agree fully."""
    assert cur.overlap(["a", "b"], ["b", "c"]) == round(1 / 3, 4)
    assert cur.overlap([], []) == 1.0 and cur.overlap(["a"], []) == 0.0


def test_a_pick_is_refused_when_not_even_an_empty_one_keeps_what_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should no prefix of the pick keep what fit (a non-additive tokenizer), curated gives None."""
    params = _curator_inputs(budget_tokens=1200, recall_hits=_crowded_recall())
    deterministic = assemble(params)
    monkeypatch.setattr(cur, "keeps", lambda *_: False)
    assert cur.curated(params, deterministic, cur.Answer(selected=["event:o3:305"], ignored=[])) is None
