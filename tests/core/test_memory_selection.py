"""Which memory entries a pack shows: small memory whole, leftover room filled by
confidence, pinned entries first (makad.core.memory_segment, makad.core.memory_select)."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import file_warnings as fw
from makad.core import memory_format as fmt
from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextLimits, ContextPack, FillOrder
from makad.core.levels import user_level_id
from makad.core.memory_segment import FILL_GIVE_UP_AFTER, FILL_SCAN_MAX, shown_prefix
from makad.core.memory_select import (
    PINNED_WARN_BUDGET,
    OtherLevelPins,
    fill_order,
    is_pinned,
    pinned_overflow,
    small_share,
    with_pin,
)
from makad.core.render import entry_hash
from makad.core.semantic import MEMORY_NEAR_K
from makad.core.strategies import curator as cur
from makad.core.strategies import strategy
from makad.core.tokens import HeuristicCounter
from makad.core.types import Entry
from tests.core.test_assembly import DAY, NOW, check_pack, checkpoint, conversation, entry, hit, inputs

COUNTER = HeuristicCounter()


def long_history() -> list:  # type: ignore[type-arg]
    """A live history far larger than any budget used here: it takes whatever it is given."""
    return conversation(turns=60, words=60)


def fill(*entries: Entry, user_level: bool = False, confidence: dict[str, str] | None = None) -> FillOrder:
    return fill_order(entries, NOW, confidence or {}, user_level=user_level)


def rows(pack: ContextPack) -> dict[str, tuple[bool, str | None]]:
    return {c.source_id: (c.included, c.reason) for c in pack.trace.candidates if c.kind == "memory"}


def shown(pack: ContextPack) -> list[str]:
    return next((s.source_ids for s in pack.segments if s.kind == "memory"), [])


def allocation(pack: ContextPack, kind: str) -> tuple[int, int, int]:
    found = next(a for a in pack.trace.allocation if a.kind == kind)
    return found.cap, found.used, found.flowed


def many(count: int, words: int = 30, **kw: object) -> list[Entry]:
    return [entry(f"e{i:03d}", content=f"note {i} " + "lorem " * words, **kw) for i in range(count)]


# ----------------------------------------------------------- small memory ---


def test_small_share_is_half_the_budget_up_to_two_thousand() -> None:
    """min(2,000, 50 %) by default, never negative."""
    limits = ContextLimits()
    assert [small_share(b, limits) for b in (0, 1_500, 4_000, 100_000)] == [0, 750, 2_000, 2_000]


def test_a_small_memory_is_shown_whole_whatever_the_query() -> None:
    """Ten entries matching nothing all fit a 1,500-token pack beside a long history."""
    entries = many(10, words=12)
    for query in (None, "quarterly offsite"):
        pack = assemble(
            inputs(
                budget_tokens=1_500,
                query=query,
                memory_entries=[],
                memory_fill=[fill(*entries)],
                history=long_history(),
            )
        )
        check_pack(pack, 1_500)
        assert sorted(shown(pack)) == [f"memory:{e.id}" for e in entries]
        cap, used, _ = allocation(pack, "memory")
        assert 300 < used <= cap <= small_share(1_500, ContextLimits())
        assert allocation(pack, "history")[1] >= 600  # its 40 % floor


def test_a_memory_over_the_small_share_is_not_forced_whole() -> None:
    """Past the small-memory share, memory keeps its own cap when history wants the room."""
    entries = many(40, words=30)
    pack = assemble(
        inputs(budget_tokens=1_500, query="x", memory_fill=[fill(*entries)], history=long_history())
    )
    cap, used, flowed = allocation(pack, "memory")
    assert cap == 300 and used <= 300 and flowed == 0
    assert 0 < len(shown(pack)) < 40


def test_the_small_share_leaves_what_it_does_not_need() -> None:
    """The cap grows only to what the entries cost: history keeps the rest."""
    entries = many(2, words=5)
    pack = assemble(
        inputs(budget_tokens=4_000, memory_fill=[fill(*entries)], history=long_history(), query="z")
    )
    cap, used, _ = allocation(pack, "memory")
    assert used <= cap <= 800  # its own 20 %: the two entries need far less
    assert allocation(pack, "history")[1] > 4_000 - 800 - 50


# ------------------------------------------------------------- fill order ---


def test_unmatched_entries_fill_leftover_room_by_confidence_then_recency() -> None:
    """Matched entries first; the rest by confidence, then recency; all within memory's cap."""
    matched = entry("hit", content="deploy on tuesdays " * 3)
    imported = [entry(f"imp{i}", content="lorem " * 30, origin="imported") for i in range(30)]
    manual = [entry(f"man{i}", content="lorem " * 30, origin="manual", age_days=i / 100) for i in range(30)]
    everything = [matched, *imported, *manual]
    pack = assemble(
        inputs(
            budget_tokens=2_000,
            query="deploy",
            memory_entries=[matched],
            memory_bm25={"hit": -3.0},
            memory_fill=[fill(*everything)],
            history=long_history(),
        )
    )
    order = shown(pack)
    assert order[0] == "memory:hit"
    assert order[1:] == [f"memory:man{i}" for i in range(len(order) - 1)]  # high confidence, newest first
    assert len(order) > 3
    assert allocation(pack, "memory")[1] <= 400
    assert not any(r == "irrelevant" for _, r in rows(pack).values())


def test_user_set_confidence_orders_the_fill() -> None:
    """confidence=low in an entry's comment sends it after the others."""
    entries = many(30)
    values = {"e000": "low", "e029": "1.0"}
    pack = assemble(
        inputs(
            budget_tokens=2_000,
            memory_fill=[fill(*entries, confidence=values)],
            memory_confidence=values,
            history=long_history(),
        )
    )
    order = shown(pack)
    assert order[0] == "memory:e029" and "memory:e000" not in order


def test_matched_entries_past_top_k_come_before_unmatched_ones() -> None:
    """Past memory_top_k a matching entry only fills leftover room, still ahead of the unmatched."""
    matched = [entry(f"m{i}", content="deploy " + "lorem " * 20) for i in range(4)]
    other = many(20, words=20)
    pack = assemble(
        inputs(
            budget_tokens=3_000,
            query="deploy",
            memory_entries=matched,
            memory_bm25={e.id: -1.0 - i for i, e in enumerate(matched)},
            memory_fill=[fill(*matched, *other)],
            history=long_history(),
            limits=ContextLimits(memory_top_k=2),
        )
    )
    order = shown(pack)
    assert order[:4] == ["memory:m3", "memory:m2", "memory:m1", "memory:m0"]
    assert len(order) > 4


def test_entries_nearest_the_query_fill_before_the_fill_order() -> None:
    """With the semantic channel's nearest entries (memory_near), leftover room goes to them,
    nearest first, after the matches and before confidence and recency."""
    matched = entry("hit", content="deploy on tuesdays " * 3)
    manual = [entry(f"man{i}", content="lorem " * 30, origin="manual", age_days=i / 100) for i in range(30)]
    imported = [entry(f"imp{i}", content="lorem " * 30, origin="imported") for i in range(30)]
    everything = [matched, *manual, *imported]
    params = inputs(
        budget_tokens=2_000,
        query="deploy",
        memory_entries=[matched],
        memory_bm25={"hit": -3.0},
        memory_fill=[fill(*everything)],
        history=long_history(),
    )
    plain = shown(assemble(params))
    assert plain[1:3] == ["memory:man0", "memory:man1"]
    near = ["hit", "imp7", "imp3", "man29"]  # a match among them is no filler
    pack = assemble(msgspec.structs.replace(params, memory_near=near))
    order = shown(pack)
    assert order[:4] == ["memory:hit", "memory:imp7", "memory:imp3", "memory:man29"]
    assert order[4:] == [f"memory:man{i}" for i in range(len(order) - 4)]  # then the fill order
    assert len(order) == len(plain)
    check_pack(pack, 2_000)


def test_a_near_candidate_that_matches_nothing_fills_first_too() -> None:
    """A candidate that matched nothing and an entry only the fill order holds are both taken
    in memory_near's order."""
    matched = entry("hit", content="deploy on tuesdays " * 3)
    unmatched = entry("cand", content="lorem " * 30, origin="imported")
    others = [entry(f"man{i}", content="lorem " * 30, origin="manual") for i in range(30)]
    pack = assemble(
        inputs(
            budget_tokens=2_000,
            query="deploy",
            memory_entries=[matched, unmatched],
            memory_bm25={"hit": -3.0},
            memory_fill=[fill(matched, unmatched, *others)],
            memory_near=["man20", "cand"],
            history=long_history(),
        )
    )
    assert shown(pack)[:3] == ["memory:hit", "memory:man20", "memory:cand"]


def test_at_most_memory_near_k_entries_fill_by_their_cosine() -> None:
    """Past MEMORY_NEAR_K near entries that match nothing, the fill order takes over."""
    entries = [entry(f"e{i:03d}", content="lorem " * 4, origin="imported") for i in range(MEMORY_NEAR_K + 10)]
    best = entry("best", content="lorem " * 4, origin="manual")  # first in fill order
    near = [e.id for e in reversed(entries)]  # the last entry nearest
    pack = assemble(
        inputs(
            budget_tokens=100_000,
            query="deploy",
            memory_fill=[fill(best, *entries)],
            memory_near=near,
            limits=ContextLimits(memory_small_max_tokens=0),
            history=long_history(),
        )
    )
    order = shown(pack)
    assert order[:MEMORY_NEAR_K] == [f"memory:{i}" for i in near[:MEMORY_NEAR_K]]
    assert order[MEMORY_NEAR_K] == "memory:best"  # the fill order, past the hundred
    assert len(order) == len(entries) + 1


def test_memory_near_changes_nothing_a_selection_chose() -> None:
    """A strategy's selection is packed as chosen, whatever memory_near says."""
    entries = many(5, words=5)
    params = inputs(
        budget_tokens=2_000,
        query="x",
        memory_entries=entries,
        selection=["memory:e003", "memory:e001"],
        history=long_history(),
    )
    before = shown(assemble(params))
    after = shown(assemble(msgspec.structs.replace(params, memory_near=["e004", "e002"])))
    assert after == before and "memory:e004" not in after


def test_unmatched_entries_do_not_ask_for_more_room() -> None:
    """Entries left out only for lack of fill room do not take history's room: memory keeps
    its own cap, and gets only the crumbs history could not use."""
    pack = assemble(
        inputs(budget_tokens=2_000, query="x", memory_fill=[fill(*many(60))], history=long_history())
    )
    _, used, _ = allocation(pack, "memory")
    history = allocation(pack, "history")[1]
    assert used <= 400 + (2_000 - used - history)
    assert history >= 2_000 - 400 - 100  # all but less than one more message of it
    assert rows(pack) and {r for inc, r in rows(pack).values() if not inc} == {"budget"}


def test_matches_over_memorys_share_leave_no_budget_unused_while_entries_could_fill() -> None:
    """When the matching entries alone take more than memory's share and the history is short,
    what no kind uses goes to more memory entries instead of staying unused."""
    matched = [entry(f"m{i}", content="deploy " + "lorem " * 50) for i in range(8)]
    others = many(40, words=30)
    budget = 2_000
    pack = assemble(
        inputs(
            budget_tokens=budget,
            query="deploy",
            memory_entries=matched,
            memory_bm25={e.id: -1.0 - i / 10 for i, e in enumerate(matched)},
            memory_fill=[fill(*matched, *others)],
            history=conversation(turns=1, words=10),
        )
    )
    check_pack(pack, budget)
    order = shown(pack)
    assert set(order[:8]) == {f"memory:{e.id}" for e in matched}
    assert len(order) > 8  # the fill got what history and recall left
    assert 0 < len(order) < 48
    smallest = min(COUNTER.count(f"title {e.id}\n{e.content}") for e in others)
    assert budget - pack.total_tokens < smallest + 40  # no room left for one more entry


def test_unmatched_entries_leave_recall_its_share_and_a_cut_summary_its_flow() -> None:
    """Entries that only fill come after recall's own share and after the session's summary
    took the room it asked for."""
    hits = [hit(f"o{i}", 10 + i, bm25=-1.0 - i / 10, text="berlin " + "fact " * 30) for i in range(60)]
    params = inputs(
        budget_tokens=8_000,
        query="berlin",
        memory_fill=[fill(*many(300))],
        recall_hits=hits,
        checkpoint=checkpoint(0, "A long summary line. " * 400),
        history=long_history(),
    )
    pack = assemble(params)
    check_pack(pack, 8_000)
    summary = next(a for a in pack.trace.allocation if a.kind == "summary")
    assert not summary.truncated and summary.flowed > 0
    assert allocation(pack, "recall")[1] >= 1_200 - 50  # its own 15 %
    assert 0 < allocation(pack, "memory")[1] <= 1_600


def test_what_no_kind_uses_goes_to_unmatched_entries() -> None:
    """With a short history, the unused budget is spent on entries that match nothing."""
    entries = many(200)
    pack = assemble(
        inputs(budget_tokens=6_000, query="x", memory_fill=[fill(*entries)], history=conversation(1))
    )
    check_pack(pack, 6_000)
    _, used, flowed = allocation(pack, "memory")
    assert flowed > 0 and used > 4_000
    assert pack.total_tokens > 6_000 - 80  # less than one more entry left unused


def test_a_matched_entry_that_does_not_fit_still_asks_for_more() -> None:
    """A big matching entry gets room from the flow; small unmatched ones do not take its place."""
    big = entry("match", content="deploy " * 300)
    small = many(10, words=5)
    pack = assemble(
        inputs(
            budget_tokens=1_200,
            query="deploy",
            memory_entries=[big],
            memory_bm25={"match": -5.0},
            memory_fill=[fill(big, *small)],
            history=conversation(2),
        )
    )
    assert shown(pack)[0] == "memory:match"
    assert allocation(pack, "memory")[2] > 0


def test_the_fill_stops_listing_once_the_segment_is_full() -> None:
    """Thousands of entries: the trace lists those tried, not every entry of the file."""
    entries = many(3_000, words=10)
    pack = assemble(
        inputs(budget_tokens=1_500, query="x", memory_fill=[fill(*entries)], history=long_history())
    )
    listed = rows(pack)
    assert 0 < sum(inc for inc, _ in listed.values()) < len(listed) < 200


def test_fill_gates_hold() -> None:
    """Entries of another session, expired ones, overridden user-level ones never fill."""
    theirs = entry("theirs", scope="session", session_id="s2")
    old = entry("old", decay_ttl_ms=DAY, age_days=2)
    mine = entry("mine", scope="session", session_id="s1")
    user = entry(user_level_id("u1"))
    beaten = entry(user_level_id("u2"))
    pack = assemble(
        inputs(
            memory_fill=[fill(theirs, old, mine), fill(user, beaten, user_level=True)],
            memory_overridden={beaten.id: "mine"},
            query="x",
        )
    )
    assert sorted(shown(pack)) == ["memory:@user/u1", "memory:mine"]
    text = pack.segments[0].text
    assert "· user level" in text and "· workspace level" in text


def test_fill_skips_what_the_session_was_shown() -> None:
    """An entry shown unchanged earlier in the session is not repeated by the fill."""
    entries = many(3, words=3)
    shown_before = {f"memory:{entries[0].id}": entry_hash(entries[0])}
    pack = assemble(inputs(memory_fill=[fill(*entries)], already_shown=shown_before, query="x"))
    assert sorted(shown(pack)) == ["memory:e001", "memory:e002"]


def test_fill_passes_over_the_many_entries_a_session_was_shown() -> None:
    """A session shown the first hundreds of fill entries gets the next ones, the shown ones unlisted."""
    entries = [entry(f"f{i:04d}", content=f"note {i} " + "lorem " * 20) for i in range(600)]
    shown_before = {f"memory:{e.id}": entry_hash(e) for e in entries[:500]}
    pack = assemble(
        inputs(
            budget_tokens=3_000,
            query="x",
            memory_fill=[fill(*entries)],
            already_shown=shown_before,
            history=long_history(),
        )
    )
    got = shown(pack)
    assert got and all(ref not in shown_before for ref in got)
    assert got == sorted(got) and got[0] == "memory:f0500"
    assert not set(rows(pack)) & set(shown_before)


def test_a_changed_entry_the_session_saw_fills_again() -> None:
    """Among many entries shown unchanged, one edited since it was shown is shown again."""
    entries = [entry(f"f{i:04d}", content=f"note {i} " + "lorem " * 20) for i in range(300)]
    shown_before = {f"memory:{e.id}": entry_hash(e) for e in entries}
    shown_before["memory:f0150"] = "an older hash"
    pack = assemble(inputs(query="x", memory_fill=[fill(*entries)], already_shown=shown_before))
    assert shown(pack) == ["memory:f0150"]


def test_the_fill_scan_counts_the_shown_entries_it_passes_over() -> None:
    """Past FILL_SCAN_MAX fill entries looked at, shown or not, the fill stops looking."""
    entries = [entry(f"f{i:05d}", content=f"note {i}") for i in range(FILL_SCAN_MAX + 20)]
    shown_before = {f"memory:{e.id}": entry_hash(e) for e in entries[:FILL_SCAN_MAX]}
    pack = assemble(inputs(query="x", memory_fill=[fill(*entries)], already_shown=shown_before))
    assert shown(pack) == []
    fewer = dict(list(shown_before.items())[:-1])
    pack = assemble(inputs(query="x", memory_fill=[fill(*entries)], already_shown=fewer))
    assert shown(pack) == [f"memory:{entries[FILL_SCAN_MAX - 1].id}"]


def test_memory_off_reads_no_fill() -> None:
    """Agent reads off or memory not asked for: no entry, however many the fill holds."""
    for params in (
        inputs(memory_fill=[fill(*many(5))], memory_enabled=False),
        inputs(memory_fill=[fill(*many(5))], include=frozenset({"summary"})),
    ):
        pack = assemble(params)
        assert shown(pack) == [] and rows(pack) == {}


def test_fill_order_knows_when_it_changes() -> None:
    """The order holds until an entry crosses an age threshold of its confidence."""
    young = entry("young", age_days=10)
    order = fill(young, entry("ancient", age_days=800))
    assert order.valid_until_ms == young.updated_at + 91 * DAY
    assert order.valid_at(NOW) and not order.valid_at(young.updated_at + 91 * DAY)
    assert fill(entry("ancient", age_days=800)).valid_until_ms is None


# ----------------------------------------------------------------- pinned ---


def pinned(entry_id: str, words: int = 10, **kw: object) -> Entry:
    tags = kw.pop("tags", ["pinned"])
    return entry(entry_id, content=f"pinned fact {entry_id} " + "ipsum " * words, tags=tags, **kw)


@pytest.mark.parametrize("tags", [["pinned"], ["Pinned"], [" PINNED "], ["ops", "pinned"]])
def test_the_pinned_tag_is_read_in_any_spelling(tags: list[str]) -> None:
    """pinned, Pinned, PINNED with spaces, among other tags."""
    assert is_pinned(entry("a", tags=tags))


def test_pin_and_unpin_edit_only_that_tag() -> None:
    """with_pin adds the tag once at the end; removing drops every spelling of it."""
    assert with_pin(["ops"], True) == ["ops", "pinned"]
    assert with_pin(["Pinned", "ops"], True) == ["ops", "pinned"]
    assert with_pin(["ops", "PINNED", "pinned"], False) == ["ops"]
    assert not is_pinned(entry("a", tags=["pinnedish", "unpinned"]))


def test_pinned_entries_are_shown_first_whatever_the_query() -> None:
    """Pinned entries that match nothing come before a matching entry and survive a full memory."""
    pins = [pinned("p1"), pinned("p2")]
    matched = entry("hit", content="deploy " * 10)
    rest = many(80)
    pack = assemble(
        inputs(
            budget_tokens=1_500,
            query="deploy",
            memory_entries=[matched, *pins],
            memory_bm25={"hit": -2.0},
            memory_fill=[fill(matched, *pins, *rest)],
            history=long_history(),
        )
    )
    assert shown(pack)[:3] == ["memory:p1", "memory:p2", "memory:hit"]
    flags = {c.source_id: c.pinned for c in pack.trace.candidates}
    assert flags["memory:p1"] is True and flags["memory:hit"] is msgspec.UNSET


def test_a_matching_pinned_entry_comes_first_among_pinned() -> None:
    """Among pinned entries, those matching the query lead."""
    pins = [pinned("p1"), pinned("p2")]
    pack = assemble(inputs(query="x", memory_entries=pins, memory_bm25={"p2": -1.0}))
    assert shown(pack) == ["memory:p2", "memory:p1"]


def test_pinned_entries_count_against_the_share_and_are_never_cut_silently() -> None:
    """Too many pinned entries: those that fit in the share, the others left out as budget,
    marked pinned in the trace, and memory asks for more room."""
    pins = [pinned(f"p{i:02d}", words=40) for i in range(30)]
    pack = assemble(inputs(budget_tokens=1_500, memory_entries=pins, history=long_history()))
    check_pack(pack, 1_500)
    listed = [c for c in pack.trace.candidates if c.kind == "memory"]
    assert all(c.pinned is True for c in listed) and len(listed) == 30
    left_out = [c for c in listed if not c.included]
    assert left_out and all(c.reason == "budget" for c in left_out)
    assert all(c.title for c in listed)
    cap, used, _ = allocation(pack, "memory")
    assert used <= cap and cap >= small_share(1_500, ContextLimits())


def test_pinned_entries_pass_every_gate() -> None:
    """A pinned entry of another session, expired, archived or overridden is still left out."""
    gated = [
        pinned("theirs", scope="session", session_id="s2"),
        pinned("old", decay_ttl_ms=DAY, age_days=2),
        pinned("gone", status="archived"),
    ]
    beaten = pinned(user_level_id("u"))
    params = inputs(
        memory_entries=[*gated, beaten], memory_user_from=3, memory_overridden={beaten.id: "x"}, query="x"
    )
    assert rows(assemble(params)) == {
        "memory:theirs": (False, "scope"),
        "memory:old": (False, "expired"),
        "memory:gone": (False, "archived"),
        "memory:@user/u": (False, "overridden"),
    }
    off = assemble(msgspec.structs.replace(params, memory_enabled=False))
    assert shown(off) == []


def test_a_pinned_entry_is_not_repeated_in_a_session_that_has_it() -> None:
    """Pinned entries follow already_shown like any other: once per session between compactions."""
    pin = pinned("p")
    pack = assemble(inputs(memory_entries=[pin], already_shown={"memory:p": entry_hash(pin)}))
    assert rows(pack) == {"memory:p": (False, "already_shown")}


@pytest.mark.parametrize("name", ["recent", "full"])
def test_pinned_entries_lead_in_the_recency_strategies(name: str) -> None:
    """recent and full also put pinned entries first."""
    old_pin = pinned("pin", age_days=300)
    entries = [old_pin, *many(5)]
    pack = strategy(name).build(inputs(memory_entries=entries))  # type: ignore[arg-type]
    assert shown(pack)[0] == "memory:pin"


def test_a_curators_pick_never_drops_a_pinned_entry() -> None:
    """The curator picked other entries: the pinned one is still shown, first."""
    pin = pinned("pin")
    entries = [pin, *many(200)]  # more than fits: memory is under pressure, the model is asked
    params = inputs(memory_entries=entries, query="x")
    deterministic = assemble(params)
    assert cur.pressured(deterministic) == ["memory"]
    picked = cur.curated(params, deterministic, cur.Answer(["memory:e003"], []))
    assert picked is not None
    pack = picked.pack
    assert shown(pack)[0] == "memory:pin" and "memory:e003" in shown(pack)


def test_pinned_overflow_names_the_entries_past_the_share() -> None:
    """read_state's measure: pinned entries past a 1,500-token pack's share, in fill order."""
    limits = ContextLimits()
    few = pinned_overflow([pinned("a"), entry("b")], NOW, limits, COUNTER)
    assert (few.pinned, few.past) == (1, []) and 0 < few.tokens <= few.limit
    pins = [pinned(f"p{i:02d}", words=40, age_days=i) for i in range(20)]
    lots = pinned_overflow(pins, NOW, limits, COUNTER)
    assert lots.limit == small_share(PINNED_WARN_BUDGET, limits) and lots.tokens > lots.limit
    assert lots.past and lots.past == pins[len(pins) - len(lots.past) :]  # the oldest


def test_pinned_overflow_counts_the_user_levels_pins_beside_the_workspaces() -> None:
    """Each level's pins fit alone, not together: the older ones of both are past the share,
    and the warning names a user-level entry by title, without an entry id of MEMORY.md."""
    limits = ContextLimits()
    mine = [pinned(f"w{i:02d}", words=20, age_days=2 * i) for i in range(8)]
    theirs = [pinned(user_level_id(f"u{i:02d}"), words=20, age_days=2 * i + 1) for i in range(8)]
    assert pinned_overflow(mine, NOW, limits, COUNTER, "workspace").past == []
    assert pinned_overflow(theirs, NOW, limits, COUNTER, "user").past == []
    both = pinned_overflow(mine, NOW, limits, COUNTER, "workspace", other=OtherLevelPins("user", theirs, {}))
    assert (both.pinned, both.others) == (16, 8) and both.tokens > both.limit
    oldest = sorted(mine + theirs, key=lambda e: e.updated_at)
    assert both.past and sorted(both.past, key=lambda e: e.updated_at) == oldest[: len(both.past)]
    assert any(e in theirs for e in both.past) and any(e in mine for e in both.past)
    text = "# Maka Memory\n\n" + "\n\n".join(f"## {e.title}\n{e.content}" for e in mine) + "\n"
    doc = fmt.parse(text)
    warned = fw.pinned_over_share(doc, mine, NOW, {}, "workspace", other=OtherLevelPins("user", theirs, {}))
    about_theirs = [w for w in warned if w.entry_id is None]
    assert {w.entry_id for w in warned if w.entry_id is not None} == {e.id for e in both.past if e in mine}
    assert len(about_theirs) == sum(e in theirs for e in both.past)
    unpin = {f"maka --user memory unpin {e.id.removeprefix('@user/')}" for e in both.past if e in theirs}
    assert {next(u for u in unpin if u in w.message) for w in about_theirs} == unpin


def test_a_pack_cuts_only_pinned_entries_read_state_names() -> None:
    """A 1,500-token pack leaves out only pinned entries read_state warned about (it may fit
    some of them when other kinds leave room)."""
    pins = [pinned(f"p{i:02d}", words=35, age_days=i) for i in range(16)]
    warned = {f"memory:{e.id}" for e in pinned_overflow(pins, NOW, ContextLimits(), COUNTER).past}
    for history in (long_history(), conversation(1)):
        pack = assemble(inputs(budget_tokens=PINNED_WARN_BUDGET, memory_entries=pins, history=history))
        cut = {ref for ref, (inc, _) in rows(pack).items() if not inc}
        assert warned and cut <= warned
    assert len(cut) < len(warned)  # a short history leaves room for more of them


# -------------------------------------------------------------- properties ---


@st.composite
def memory_inputs(draw: st.DrawFn) -> ContextInputs:
    count = draw(st.integers(0, 60))
    entries = [
        Entry(
            id=f"e{i:02d}",
            title=f"t{i}",
            content="w " * draw(st.integers(1, 120)),
            updated_at=NOW - draw(st.integers(0, 400)) * DAY,
            origin=draw(st.sampled_from(["manual", "extracted", "imported", "unknown"])),
            tags=["pinned"] if draw(st.integers(0, 9)) == 0 else [],
            scope=draw(st.sampled_from(["workspace", "workspace", "session"])),
            session_id=draw(st.sampled_from(["s1", "s2"])),
        )
        for i in range(count)
    ]
    candidates = [e for e in entries if is_pinned(e) or draw(st.booleans())]
    near = draw(st.permutations([e.id for e in entries])) if draw(st.booleans()) else []
    return inputs(
        budget_tokens=draw(st.integers(200, 6_000)),
        query=draw(st.sampled_from([None, "w", "zz"])),
        memory_entries=candidates,
        memory_bm25={e.id: -1.0 for e in candidates if draw(st.booleans())},
        memory_similarity={e.id: 0.5 for e in candidates if draw(st.integers(0, 4)) == 0},
        memory_near=near,
        memory_fill=[fill_order(entries, NOW, {})],
        history=conversation(draw(st.integers(0, 40)), 30),
    )


@settings(max_examples=60, deadline=None)
@given(memory_inputs(), st.randoms(use_true_random=False))
def test_any_memory_stays_in_budget_and_is_deterministic(params: ContextInputs, rnd: random.Random) -> None:
    """Within budget; the same bytes for the same inputs in another order; pinned ones first."""
    pack = assemble(params)
    check_pack(pack, params.budget_tokens)
    again = msgspec.structs.replace(
        params, memory_entries=rnd.sample(params.memory_entries, len(params.memory_entries))
    )
    assert msgspec.json.encode(assemble(again)) == msgspec.json.encode(pack)
    flags = [c.pinned is True for c in pack.trace.candidates if c.included]
    assert flags == sorted(flags, reverse=True)


def _with_and_without_prefix(params: ContextInputs) -> tuple[bytes, bytes, int]:
    """The pack with the shown prefix ``shown_prefix`` finds, and without any."""
    order = params.memory_fill[0]
    length, _ = shown_prefix(params, order, 0, entry_hash)
    with_prefix = msgspec.json.encode(assemble(msgspec.structs.replace(params, memory_fill_shown=length)))
    without = msgspec.json.encode(assemble(msgspec.structs.replace(params, memory_fill_shown=0)))
    return with_prefix, without, length


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(min_value=1, max_value=80),
    shown_upto=st.integers(min_value=0, max_value=80),
    gaps=st.sets(st.integers(min_value=0, max_value=80), max_size=4),
    candidates=st.sets(st.integers(min_value=0, max_value=80), max_size=8),
    budget=st.sampled_from([300, 800, 1_500, 4_000]),
    query=st.sampled_from([None, "note", "lorem"]),
    near=st.lists(st.integers(min_value=0, max_value=80), max_size=12, unique=True),
)
def test_starting_the_fill_after_its_shown_prefix_changes_no_pack(
    count: int,
    shown_upto: int,
    gaps: set[int],
    candidates: set[int],
    budget: int,
    query: str | None,
    near: list[int],
) -> None:
    """Passing over the fill's shown prefix as one step gives the pack a step by step walk
    gives: with candidates inside the prefix, gaps after it, entries nearest the query
    anywhere, any budget or query."""
    entries = [entry(f"f{i:03d}", content=f"note {i} " + "lorem " * (i % 7 * 5)) for i in range(count)]
    shown_before = {f"memory:{e.id}": entry_hash(e) for i, e in enumerate(entries) if i < shown_upto}
    for gap in gaps:
        shown_before.pop(f"memory:f{gap:03d}", None)
    picked = [entries[i] for i in sorted(candidates) if i < count]
    params = inputs(
        budget_tokens=budget,
        query=query,
        memory_entries=picked,
        memory_bm25={e.id: -1.0 for e in picked} if query else {},
        memory_fill=[fill(*entries)],
        memory_near=[f"f{i:03d}" for i in near],
        already_shown=shown_before,
        history=long_history(),
    )
    with_prefix, without, _ = _with_and_without_prefix(params)
    assert with_prefix == without


def test_a_shown_prefix_longer_than_the_scan_limit_changes_no_pack() -> None:
    """A prefix past FILL_SCAN_MAX stops the walk where a step by step walk stops."""
    entries = [entry(f"f{i:05d}", content=f"note {i}") for i in range(FILL_SCAN_MAX + 20)]
    for upto in (FILL_SCAN_MAX - 1, FILL_SCAN_MAX, FILL_SCAN_MAX + 5):
        shown_before = {f"memory:{e.id}": entry_hash(e) for e in entries[:upto]}
        params = inputs(query="x", memory_fill=[fill(*entries)], already_shown=shown_before)
        with_prefix, without, length = _with_and_without_prefix(params)
        assert length == upto and with_prefix == without


def test_the_shown_prefix_stops_at_an_entry_that_cannot_be_shown_or_changed() -> None:
    """The prefix ends before an entry that changed since it was shown, or that this call's
    gates leave out (another session's entry); it says when an entry in it expires."""
    decaying = entry("f001", decay_ttl_ms=10 * DAY)
    entries = [entry("f000"), decaying, entry("f002"), entry("f003", scope="session", session_id="other")]
    order = fill(*entries)
    ids = [e.id for _, e in order.keyed]
    shown_before = {f"memory:{e.id}": entry_hash(e) for e in entries}
    length, until = shown_prefix(inputs(already_shown=shown_before), order, 0, entry_hash)
    assert ids[:length] == [i for i in ids if i != "f003"][:length] and "f003" not in ids[:length]
    assert until == decaying.created_at + 10 * DAY
    shown_before[f"memory:{ids[0]}"] = "an older hash"
    assert shown_prefix(inputs(already_shown=shown_before), order, 0, entry_hash)[0] == 0


def test_a_shown_prefix_holding_candidates_changes_no_pack() -> None:
    """Candidates inside the prefix are not counted as passed over (the scan limit), and the
    walk ends on the prefix or on a candidate as a step by step walk does (how full the
    segment looks when the walk runs out)."""
    entries = [entry(f"f{i:05d}", content=f"note {i}") for i in range(FILL_SCAN_MAX + 20)]
    shown_before = {f"memory:{e.id}": entry_hash(e) for e in entries[: FILL_SCAN_MAX + 5]}
    picked = entries[100:110]
    params = inputs(
        query="x", memory_entries=picked, memory_fill=[fill(*entries)], already_shown=shown_before
    )
    with_prefix, without, _ = _with_and_without_prefix(params)
    assert with_prefix == without
    for last_is_candidate in (False, True):
        big = [entry(f"b{i:02d}", content="lorem " * 400) for i in range(FILL_GIVE_UP_AFTER)]
        small = [entry(f"s{i:02d}", content=f"note {i}", age_days=30) for i in range(3)]
        everything = [*big, *small]
        order = fill(*everything)
        last = order.keyed[-1][1]
        picked = [*big, last] if last_is_candidate else big
        shown_before = {f"memory:{e.id}": entry_hash(e) for e in everything}
        params = inputs(
            budget_tokens=1_500,
            memory_entries=picked,
            memory_fill=[order],
            already_shown=shown_before,
            history=long_history(),
        )
        with_prefix, without, length = _with_and_without_prefix(params)
        assert length == len(everything) and with_prefix == without
