"""The conflict pass: a newer value for the same subject supersedes the older line, on a
hand-made test set in many phrasings (tests/data/conflicts.json), and in assembled packs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from msgspec import UNSET

from makad.core.assembly import assemble
from makad.core.conflicts import Item, claims, supersessions
from makad.core.context_types import ContextInputs, RecallHit
from makad.core.types import Entry, Event

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent.parent / "data" / "conflicts.json").read_text(encoding="utf-8")
)["pairs"]
NOW = 1_700_000_000_000
DAY = 86_400_000


def pair_items(case: dict[str, Any]) -> tuple[Item, Item]:
    adjacent = bool(case.get("adjacent"))
    old = Item(ref="old", ts=1_000, text=case["old"], speaker="user", session="s1", seq=1)
    new = Item(
        ref="new",
        ts=2_000,
        text=case["new"],
        speaker="user",
        session="s1" if adjacent else "s2",
        seq=2 if adjacent else 1,
    )
    return old, new


def test_the_test_set_is_large_and_varied() -> None:
    """At least 30 conflicting pairs and 15 different-subject negatives are kept."""
    assert sum(c["conflict"] for c in CASES) >= 30
    assert sum(not c["conflict"] for c in CASES) >= 15
    assert len({c["new"].split()[0].lower() for c in CASES if c["conflict"]}) >= 10  # phrasings vary


@pytest.mark.parametrize("case", CASES, ids=[f"{c['old'][:30]} -> {c['new'][:30]}" for c in CASES])
def test_pair(case: dict[str, Any]) -> None:
    """A newer line supersedes an older one exactly when it gives the same subject another value."""
    old, new = pair_items(case)
    expected = {"old": "new"} if case["conflict"] else {}
    assert supersessions([new, old]) == expected


@pytest.mark.parametrize("case", [c for c in CASES if c["conflict"]][:12], ids=str)
def test_the_older_never_supersedes_the_newer(case: dict[str, Any]) -> None:
    """Time decides: the same two lines with their times swapped supersede the other way or
    not at all, never both ways."""
    old, new = pair_items(case)
    swapped = [Item(ref=old.ref, ts=3_000, text=old.text, speaker="user", session="s9", seq=1), new]
    result = supersessions(swapped)
    assert "old" not in result


def test_a_chain_names_the_newest() -> None:
    """4411 → 5500 → 7720: both older lines name the newest."""
    items = [
        Item(ref="a", ts=1, text="The locker code is 4411."),
        Item(ref="b", ts=2, text="I changed the locker code to 5500."),
        Item(ref="c", ts=3, text="The locker code is now 7720."),
    ]
    assert supersessions(items) == {"a": "c", "b": "c"}


def test_a_short_entry_reads_as_its_titles_value() -> None:
    """A memory entry titled ``Wifi password`` whose content is ``hunter2`` is superseded by a
    newer ``changed the wifi password to …``; a long content is not glued to its title."""
    entry = Item(ref="memory:1", ts=1, text="hunter2", title="Wifi password", speaker="user")
    newer = Item(ref="e", ts=2, text="We changed the wifi password to Bluebird9.")
    assert supersessions([entry, newer]) == {"memory:1": "e"}
    long = Item(ref="memory:2", ts=1, text="Ask the office manager.", title="Wifi password")
    assert supersessions([long, newer]) == {}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "x" * 50_000,
        "is is is : : = = now now no longer",
        "Caroline: Thanks!",
        "The 🔒 code is ４４１１.",
        "changed it to",
        ":" * 500,
        "Das Schließfach hat den Code 4411.",
    ],
)
def test_odd_text_is_read_without_error(text: str) -> None:
    """Empty, huge, punctuation-only, non-ASCII and half-sentences give claims or none, never an error."""
    assert isinstance(claims(text), tuple)
    assert isinstance(supersessions([Item(ref="a", ts=1, text=text), Item(ref="b", ts=2, text=text)]), dict)


def ev(sid: str, seq: int, text: str, ts: int) -> Event:
    return Event(session_id=sid, seq=seq, ts=ts, type="user_message", text=text)


def test_a_pack_marks_the_older_recalled_line_and_flags_memory() -> None:
    """Recall shows the older line marked ``[superseded by <ref>]``; a memory entry the newer
    line contradicts says ``possibly outdated`` with the ref; the trace names the ref."""
    old = ev("sa", 3, "The locker code is 4411.", NOW - 20 * DAY)
    new = ev("sb", 7, "I changed the locker code to 7720.", NOW - 2 * DAY)
    memory = Entry(
        id="m1",
        title="Locker",
        content="The locker code is 4411.",
        created_at=NOW - 30 * DAY,
        updated_at=NOW - 30 * DAY,
    )
    pack = assemble(
        ContextInputs(
            budget_tokens=4_000,
            now_ms=NOW,
            query="what is the locker code",
            memory_entries=[memory],
            memory_bm25={"m1": -2.0},
            recall_hits=[RecallHit(event=old, bm25=-3.0), RecallHit(event=new, bm25=-3.0)],
        )
    )
    texts = {s.kind: s.text for s in pack.segments}
    assert "The locker code is 4411. [superseded by event:sb:7]" in texts["recall"]
    assert "7720" in texts["recall"] and "7720. [superseded" not in texts["recall"]
    assert "possibly outdated: superseded by event:sb:7" in texts["memory"]
    by_ref = {c.source_id: c for c in pack.trace.candidates}
    assert by_ref["event:sa:3"].superseded_by == "event:sb:7" and by_ref["event:sa:3"].included
    assert by_ref["memory:m1"].superseded_by == "event:sb:7"
    assert by_ref["event:sb:7"].superseded_by is UNSET


def test_a_tight_recall_drops_the_superseded_line() -> None:
    """When recall cannot take every candidate, a superseded line whose newer line is shown is
    left out (``superseded``) and its room goes to another candidate."""
    old = ev("sa", 3, "The locker code is 4411.", NOW - 20 * DAY)
    new = ev("sb", 7, "I changed the locker code to 7720.", NOW - 2 * DAY)
    filler = [
        RecallHit(event=ev(f"f{n}", 1, f"locker room note {n} " + "words " * 40, NOW - 10 * DAY), bm25=-1.0)
        for n in range(40)
    ]
    hits = [RecallHit(event=old, bm25=-5.0), RecallHit(event=new, bm25=-4.0), *filler]
    pack = assemble(ContextInputs(budget_tokens=1_200, now_ms=NOW, query="locker code", recall_hits=hits))
    by_ref = {c.source_id: c for c in pack.trace.candidates}
    assert by_ref["event:sa:3"].reason == "superseded" and not by_ref["event:sa:3"].included
    assert by_ref["event:sb:7"].included
    assert pack.trace.dropped["superseded"] == 1
    assert pack.total_tokens <= 1_200


def test_different_subjects_in_a_pack_are_left_alone() -> None:
    """Lines about other subjects (another person's phone, another room) carry no mark."""
    hits = [
        RecallHit(event=ev("sa", 1, "Alice's phone number is 555-0101.", NOW - 9 * DAY), bm25=-2.0),
        RecallHit(event=ev("sb", 1, "Bob's phone number is 555-0199.", NOW - DAY), bm25=-2.0),
        RecallHit(event=ev("sc", 1, "The standup is at 9:30.", NOW - 9 * DAY), bm25=-2.0),
        RecallHit(event=ev("sd", 1, "The retro is at 16:00.", NOW - DAY), bm25=-2.0),
    ]
    pack = assemble(
        ContextInputs(budget_tokens=4_000, now_ms=NOW, query="phone standup retro", recall_hits=hits)
    )
    assert "superseded" not in pack.segments[0].text
    assert all(c.superseded_by is UNSET for c in pack.trace.candidates)
