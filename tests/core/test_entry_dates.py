"""Dates the daemon keeps for hand-written entries: first sightings, hand edits, applying them."""

from __future__ import annotations

from makad.core import memory_format as fmt
from makad.core.entry_dates import EntryDates, changes, effective
from makad.core.typed_ids import identify
from makad.core.types import Entry

NOW = 1_800_000_000_000


def doc(*sections: str) -> fmt.MemoryDocument:
    return fmt.parse("# Maka Memory\n\n" + "\n".join(sections))


DATED = "## Dated\n<!-- maka-memory: id=d origin=manual createdAt=5 updatedAt=7 status=active tags= -->\nold text\n"


def test_a_new_undated_entry_is_first_seen_now_and_a_dated_one_needs_nothing() -> None:
    """Only entries without createdAt get a first sighting."""
    changed, removed = changes(fmt.MemoryDocument(), doc("## Typed\nby hand\n", DATED), {}, NOW)
    (typed_id,) = changed
    assert typed_id.startswith("h-") and changed[typed_id] == EntryDates(NOW, 0)
    assert removed == []


def test_a_hand_edit_is_dated_and_keeps_the_first_sighting() -> None:
    """Changing an entry's text records edited_at; an undated entry keeps its first date."""
    before = doc(DATED)
    after = doc(DATED.replace("old text", "new text"))
    changed, _ = changes(before, after, {}, NOW)
    assert changed == {"d": EntryDates(5, NOW)}
    # A hand-typed entry keeps its id across the edit (makad.core.typed_ids), so its dates.
    typed_before, records = identify(doc("## Typed\nv1\n"), {}, NOW)
    typed_after, _ = identify(doc("## Typed\nv2\n"), records, NOW)
    kept_id = typed_before.sections[0].entry.id
    assert typed_after.sections[0].entry.id == kept_id
    changed, removed = changes(typed_before, typed_after, {kept_id: EntryDates(100, 0)}, NOW)
    assert changed == {kept_id: EntryDates(100, NOW)} and removed == []


def test_a_comment_only_edit_is_not_a_content_edit() -> None:
    """Setting confidence= by hand does not make the entry look newly updated."""
    after = doc(DATED.replace("tags= -->", "tags= confidence=high -->"))
    assert changes(doc(DATED), after, {}, NOW) == ({}, [])


def test_an_emptied_file_forgets_nothing() -> None:
    """An editor writing the file empty before its new text does not lose the dates."""
    before = doc("## Typed\nby hand\n")
    known = {before.sections[0].entry.id: EntryDates(1, 0)}
    assert changes(before, fmt.MemoryDocument(), known, NOW) == ({}, [])


def test_effective_fills_missing_dates_and_takes_the_later_edit() -> None:
    """Missing createdAt comes from the first sighting; updatedAt is the later of file and edit."""
    undated = Entry(id="x", title="t", content="c")
    assert (
        effective(undated, {"x": EntryDates(10, 0)}).created_at,
        effective(undated, {"x": EntryDates(10, 0)}).updated_at,
    ) == (10, 10)
    dated = Entry(id="x", title="t", content="c", created_at=5, updated_at=7)
    bumped = effective(dated, {"x": EntryDates(5, 99)})
    assert (bumped.created_at, bumped.updated_at) == (5, 99)
    assert effective(dated, {}) is dated


def test_a_created_at_the_parser_cannot_read_is_never_replaced() -> None:
    """createdAt=<garbage> is the user's value: no first sighting, only an edit date."""
    odd = "## Odd\n<!-- maka-memory: id=o createdAt=2024-01-01 status=active -->\nv1\n"
    assert changes(fmt.MemoryDocument(), doc(odd), {}, NOW) == ({}, [])
    edited, _ = changes(doc(odd), doc(odd.replace("v1", "v2")), {"o": EntryDates(5, 0)}, NOW)
    assert edited == {"o": EntryDates(0, NOW)}
    assert effective(doc(odd).sections[0].entry, edited).created_at == 0
