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


@settings(max_examples=60, deadline=None)
@given(gated_inputs(), st.lists(st.text(alphabet="emo:s1234-", max_size=12), max_size=8))
def test_any_curator_pick_keeps_budget_and_gates(params: ContextInputs, junk: list[str]) -> None:
    """A pick of arbitrary refs (offered, gated, unknown) never crosses a gate or the budget."""
    refs = [memory_ref(e.id) for e in params.memory_entries] + [
        event_ref(h.event.session_id, h.event.seq) for h in params.recall_hits
    ]
    pick = cur.Answer(selected=list(dict.fromkeys(refs[::2] + junk)), ignored=[])
    try:
        pack = cur.curated(params, pick)
    except TooLarge:
        return
    check_pack(pack, params.budget_tokens)
    assert_gates(pack, params)
    chosen = set(pick.selected)
    assert all(c.source_id in chosen for c in pack.trace.candidates if c.included)


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


def _curator_inputs() -> ContextInputs:
    return inputs(
        query="where did Ann move",
        session_id="s1",
        memory_entries=[
            entry("move", "Ann moved to Berlin; token sk-ant-api03-" + "x" * 40),
            entry("other", "scoped elsewhere", scope="session", session_id="s2"),
            entry("gone", "archived", status="archived"),
        ],
        memory_bm25={"move": -4.0, "other": -4.0, "gone": -4.0},
        history=conversation(1),
        recall_hits=[hit("o1", 5, -3.0, "Ann: we moved to Berlin"), hit("o2", 9, -1.0, "Ann moved house")],
    )


def test_curator_is_offered_only_what_passed_the_gates_redacted() -> None:
    """Offers carry refs of gate-passing candidates only, and no secret text."""
    params = _curator_inputs()
    offered = cur.offers(params, assemble(params))
    refs = [o.ref for o in offered]
    assert "memory:move" in refs and "event:o1:5" in refs
    assert "memory:other" not in refs and "memory:gone" not in refs
    assert all("sk-ant" not in o.text for o in offered)
    assert any("[REDACTED" in o.text for o in offered)
    prompt = cur.prompt(params.query, offered)
    assert "memory:move |" in prompt[1]["content"] and "where did Ann move" in prompt[1]["content"]


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


def test_curated_pack_shows_the_pick_in_its_order() -> None:
    """The model's pick is what is shown (and nothing else of memory and recall)."""
    params = _curator_inputs()
    pack = cur.curated(params, cur.Answer(selected=["event:o2:9", "memory:other"], ignored=[]))
    included = [c.source_id for c in pack.trace.candidates if c.included]
    assert included == ["event:o2:9"]  # memory:other stays gated by its scope
    assert next(c for c in pack.trace.candidates if c.source_id == "memory:move").reason == "not_selected"
    check_pack(pack, params.budget_tokens)
