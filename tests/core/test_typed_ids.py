"""Entries typed by hand keep their ids across the user's edits (the pure matching)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import memory_format as fmt
from makad.core.typed_ids import GONE_KEPT, TypedEntry, identify
from makad.core.types import Entry

NOW = 1_800_000_000_000
HEAD = "# Maka Memory\n\n"


def doc(*sections: tuple[str, str]) -> fmt.MemoryDocument:
    return fmt.parse(HEAD + "\n".join(f"## {title}\n{body}\n" for title, body in sections))


def ids_of(d: fmt.MemoryDocument) -> list[str]:
    return [s.entry.id for s in d.sections]


def read(
    *sections: tuple[str, str], known: dict[str, TypedEntry] | None = None, now: int = NOW
) -> tuple[list[str], dict[str, TypedEntry]]:
    found, records = identify(doc(*sections), known or {}, now)
    return ids_of(found), records


def test_a_first_reading_keeps_the_ids_the_text_derives() -> None:
    """Unknown entries get the ids their text derives (as before records existed)."""
    ids, records = read(("Editor", "helix"), ("Other", "x"))
    assert ids == ids_of(doc(("Editor", "helix"), ("Other", "x")))
    assert set(records) == set(ids) and all(not r.gone_at for r in records.values())


def test_a_typo_fixed_in_the_content_keeps_the_id() -> None:
    """Same title, content edited: the same entry."""
    (first, other), records = read(("Editor", "the user edits in hleix"), ("Other", "x"))
    ids, _ = read(("Editor", "the user edits in helix"), ("Other", "x"), known=records)
    assert ids == [first, other]


def test_a_title_edited_with_the_content_unchanged_keeps_the_id() -> None:
    """Same content, title edited: the same entry."""
    (first,), records = read(("Edtior", "the user edits in helix"))
    ids, _ = read(("Editor", "the user edits in helix"), known=records)
    assert ids == [first]


def test_title_and_content_both_changed_make_a_new_entry() -> None:
    """Nothing of it is left: a new entry, and the old one is gone."""
    (first,), records = read(("Editor", "helix"))
    (second,), after = read(("Shell", "fish"), known=records)
    assert second != first
    assert after[first].gone_at == NOW and not after[second].gone_at


def test_two_entries_with_one_title_keep_their_ids_when_one_is_edited() -> None:
    """The unedited one matches its text; the edited one the record left over."""
    (a, b), records = read(("Notes", "first"), ("Notes", "second"))
    ids, _ = read(("Notes", "first"), ("Notes", "second, edited"), known=records)
    assert ids == [a, b]
    ids, _ = read(("Notes", "first, edited"), ("Notes", "second"), known=records)
    assert ids == [a, b]


def test_two_entries_with_one_title_both_edited_keep_their_places() -> None:
    """Both edited in one save: each keeps the id of the one in its place."""
    (a, b, c), records = read(("Notes", "one"), ("Middle", "m"), ("Notes", "two"))
    ids, _ = read(("Notes", "one!"), ("Middle", "m"), ("Notes", "two!"), known=records)
    assert ids == [a, b, c]


def test_an_entry_moved_and_edited_follows_its_title() -> None:
    """Moved to the top and edited in one save: still the same entry."""
    (a, b), records = read(("First", "1"), ("Second", "2"))
    ids, _ = read(("Second", "2, edited"), ("First", "1"), known=records)
    assert ids == [b, a]


def test_identical_sections_keep_distinct_ids() -> None:
    """Two sections with the same text are two entries; editing the second keeps both ids."""
    (a, b), records = read(("Same", "text"), ("Same", "text"))
    assert a != b and b.startswith(a)
    ids, _ = read(("Same", "text"), ("Same", "text, edited"), known=records)
    assert ids == [a, b]


def test_deleted_then_typed_again_is_the_same_entry() -> None:
    """The same text coming back (an undo, a paste) is the entry it was; an edit of it
    before coming back is not matched to a gone entry."""
    (a, other), records = read(("Kept", "k"), ("Other", "o"))
    _, records = read(("Other", "o"), known=records)
    assert records[a].gone_at == NOW
    ids, records = read(("Kept", "k"), ("Other", "o"), known=records)
    assert ids == [a, other] and not records[a].gone_at
    _, records = read(("Other", "o"), known=records)
    ids, _ = read(("Kept", "k, edited"), ("Other", "o"), known=records)
    assert ids[0] != a


def test_an_emptied_file_changes_nothing() -> None:
    """An editor that writes the file empty first: the records wait for its new text."""
    (a,), records = read(("Editor", "helix"))
    empty, after = identify(fmt.parse(HEAD), records, NOW)
    assert after == records and empty.sections == ()
    ids, _ = read(("Editor", "helix, edited"), known=after)
    assert ids == [a]


def test_gone_entries_are_kept_to_a_bound() -> None:
    """Only the newest GONE_KEPT gone records are kept."""
    records: dict[str, TypedEntry] = {}
    for n in range(GONE_KEPT + 10):
        _, records = read((f"T{n}", f"body {n}"), known=records, now=NOW + n)
    _, records = read(("Last", "last"), known=records, now=NOW + 10_000)
    gone = [r for r in records.values() if r.gone_at]
    assert len(gone) == GONE_KEPT
    assert min(r.gone_at for r in gone) == NOW + 10 + 1  # the oldest went first


def test_an_id_the_file_declares_is_never_given_to_a_typed_section() -> None:
    """A new section whose text derives an id another entry declares gets another id."""
    typed = doc(("Editor", "helix"))
    taken = typed.sections[0].entry.id
    text = (
        HEAD
        + f"## Daemon\n<!-- maka-memory: id={taken} origin=manual status=active -->\nwritten\n\n"
        + "## Editor\nhelix\n"
    )
    found, records = identify(fmt.parse(text), {}, NOW)
    ids = ids_of(found)
    assert ids[0] == taken and ids[1] != taken and ids[1].startswith("h-")
    assert set(records) == {ids[1]}


def test_an_entry_the_daemon_wrote_waits_for_an_older_buffer() -> None:
    """Once its comment names its id the record waits: a save from a buffer older than
    that write, with the entry edited, still continues it."""
    (a,), records = read(("Editor", "helix"))
    written = HEAD + f"## Editor\n<!-- maka-memory: id={a} origin=unknown status=active tags=x -->\nhelix\n"
    found, records = identify(fmt.parse(written), records, NOW)
    assert ids_of(found) == [a] and a in records and not records[a].gone_at
    ids, _ = read(("Editor", "helix, edited in the old buffer"), known=records)
    assert ids == [a]


def test_renamed_sections_survive_document_operations() -> None:
    """An id given to a typed section stays through upserts and removals of others, and
    its first rewrite writes that id into its comment."""
    (a, b), records = read(("Editor", "hleix"), ("Other", "o"))
    edited, _ = identify(doc(("Editor", "helix"), ("Other", "o")), records, NOW)
    added = fmt.upsert(edited, Entry(id="n1", title="New", content="n"))
    removed = fmt.remove(added, b)
    assert ids_of(removed) == [a, "n1"]
    retitled = fmt.upsert(removed, Entry(id=a, title="Editor", content="helix", tags=["x"]))
    assert f"id={a}" in fmt.render(retitled)
    assert ids_of(fmt.parse(fmt.render(retitled))) == [a, "n1"]


def test_put_raw_keeps_the_id_of_typed_bytes() -> None:
    """Typed bytes put in place of an entry (a stale save's merge) stay that entry."""
    (a,), records = read(("Editor", "hleix"))
    edited, _ = identify(doc(("Editor", "helix")), records, NOW)
    raw = edited.sections[0].raw
    put = fmt.put_raw(fmt.parse(HEAD), a, raw)
    assert ids_of(put) == [a]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["A", "B", "C"]), st.sampled_from(["x", "y", "z", "x y"])),
        min_size=1,
        max_size=6,
    ),
    st.lists(
        st.tuples(st.sampled_from(["A", "B", "D"]), st.sampled_from(["x", "y", "w"])), min_size=1, max_size=6
    ),
)
def test_ids_are_unique_and_stable_on_a_second_reading(
    first: list[tuple[str, str]], second: list[tuple[str, str]]
) -> None:
    """Whatever the edit, every section holds a distinct id, and reading the same text again
    gives the same ids and changes no record."""
    _, records = read(*first)
    ids, after = read(*second, known=records)
    assert len(set(ids)) == len(ids)
    again, unchanged = read(*second, known=after)
    assert again == ids and unchanged == after
