"""A user's save merged against the versions the daemon knows (makad.core.save_merge)."""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core import memory_format as fmt
from makad.core.save_merge import (
    RETURNED_NOTE,
    KnownVersion,
    known_version,
    merge_save,
    note_of,
    returned_instead,
    returned_section,
)
from makad.core.types import Entry

MS = 1_000_000  # ns


def entry(entry_id: str, content: str | None = None, **fields: object) -> Entry:
    made = Entry(
        id=entry_id,
        title=f"T {entry_id}",
        content=content or f"body of {entry_id}",
        origin="extracted",
        created_at=1,
        updated_at=1,
    )
    return msgspec.structs.replace(made, **fields)


def doc_of(*entries: Entry) -> fmt.MemoryDocument:
    doc = fmt.new_document()
    for e in entries:
        doc = fmt.upsert(doc, e)
    return doc


def history(
    *docs: fmt.MemoryDocument, start_ms: int = 1000, step_ms: int = 100, users: tuple[int, ...] = ()
) -> list[KnownVersion]:
    """Versions 100 ms apart, the daemon's except the indexes in ``users``."""
    return [
        known_version(d, (start_ms + i * step_ms) * MS, by_daemon=i not in users) for i, d in enumerate(docs)
    ]


def ids(doc: fmt.MemoryDocument) -> list[str]:
    return [s.entry.id for s in doc.sections]


def test_a_save_of_the_latest_version_is_taken_as_it_is() -> None:
    """Saved on the latest version: nothing re-applied, a missing entry is the user's deletion."""
    v1 = doc_of(entry("a"), entry("b"))
    save = fmt.remove(v1, "b")
    merge = merge_save(history(v1), save, 2000 * MS)
    assert merge.document is save and merge.reapplied == () and merge.returned == ()
    assert merge.user_deleted == {"b"} and merge.base == 0


def test_an_entry_added_after_the_buffer_was_read_is_returned_when_it_may_be_a_deletion() -> None:
    """The save is the pre-approval version plus a note: the approved entry could have been
    deleted on purpose (it is exactly what the save lacks), so it is returned, not deleted."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(v1, entry("e"))
    save = fmt.upsert(v1, entry("note"))
    merge = merge_save(history(v1, v2), save, 1200 * MS)  # written after v2 appeared
    assert merge.base == 0
    assert [s.entry.id for s in merge.returned] == ["e"]
    assert merge.reapplied == () and merge.user_deleted == frozenset()
    assert ids(merge.document) == ["a", "note"]


def test_a_save_written_before_the_version_appeared_gets_the_entry_back() -> None:
    """The save's mtime is before the approval's version appeared: its buffer could not
    hold it, so the entry is written back into the save, after the user's note."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(v1, entry("e"))
    save = fmt.upsert(v1, entry("note"))
    merge = merge_save(history(v1, v2), save, 1050 * MS)  # v2 appeared at 1100 ms
    assert merge.reapplied == ("e",) and merge.returned == () and merge.stale
    assert ids(merge.document) == ["a", "note", "e"]
    assert fmt.find(merge.document, "e") == fmt.find(v2, "e")


def test_an_entry_there_before_the_save_was_written_is_no_proof_when_edited_after() -> None:
    """The entry was added before the save was written (the user may have seen it and
    deleted it) and only edited after: the timing proves nothing, it is returned."""
    v1 = doc_of(entry("a"), entry("x"))
    v2 = fmt.upsert(v1, entry("e"))
    v3 = fmt.upsert(v2, entry("e", "edited later"))
    merge = merge_save(history(fmt.remove(v1, "x"), v1, v2, v3), fmt.remove(v1, "x"), 1250 * MS)
    assert "e" not in ids(merge.document)


def test_within_the_clock_slack_there_is_no_evidence() -> None:
    """An mtime only a few ms before the version is no proof (coarse file clocks)."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(v1, entry("e"))
    merge = merge_save(history(v1, v2), fmt.upsert(v1, entry("note")), 1095 * MS)
    assert [s.entry.id for s in merge.returned] == ["e"]


def test_a_save_holding_what_a_write_replaced_predates_that_write() -> None:
    """The approval archived a superseded entry and added its successor in one write; the
    save still holds the old entry as active: its buffer predates the write, so both the
    archive and the new entry are re-applied (no timing needed)."""
    old = entry("old")
    v1 = doc_of(entry("a"), old)
    v2 = fmt.upsert(fmt.upsert(v1, msgspec.structs.replace(old, status="archived")), entry("new"))
    save = fmt.upsert(v1, entry("note"))
    merge = merge_save(history(v1, v2), save, None)
    assert set(merge.reapplied) == {"old", "new"} and merge.returned == ()
    found = fmt.find(merge.document, "old")
    assert found is not None and found.entry.status == "archived"
    assert ids(merge.document) == ["a", "old", "note", "new"]


def test_an_entry_the_daemon_removed_is_removed_again() -> None:
    """Deleted through the daemon after the buffer was read: the stale save does not bring it back."""
    v1 = doc_of(entry("a"), entry("gone"))
    v2 = fmt.remove(v1, "gone")
    save = fmt.upsert(v1, entry("note"))
    merge = merge_save(history(v1, v2), save, None)
    assert merge.reapplied == ("gone",)
    assert ids(merge.document) == ["a", "note"]


def test_the_users_own_change_wins_over_the_daemons() -> None:
    """Both changed one entry: the user's version stays and nothing of it is re-applied."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(fmt.upsert(v1, entry("a", "daemon text")), entry("e"))
    save = fmt.upsert(v1, entry("a", "user text"))
    merge = merge_save(history(v1, v2), save, None)
    found = fmt.find(merge.document, "a")
    assert found is not None and found.entry.content == "user text"
    assert "a" in merge.user_changed and "a" not in merge.reapplied


def test_on_a_tie_a_version_the_user_saved_is_the_base() -> None:
    """The user saved a version holding the entry, then deleted it: the deletion is theirs
    (their editor held it), although the save is as close to the version before it."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(v1, entry("e"))
    s1 = fmt.upsert(v2, entry("note"))
    s2 = fmt.remove(s1, "e")
    merge = merge_save(history(v1, v2, s1, users=(2,)), s2, 1300 * MS)
    assert merge.base == 2 and merge.user_deleted == {"e"} and not merge.lacking


def test_on_a_tie_between_daemon_versions_the_older_is_the_base() -> None:
    """One write removed an entry and added another; a save lacking both fits either: read
    as the older, the new entry is returned instead of counted as deleted by the user."""
    v1 = doc_of(entry("a"), entry("x"))
    v2 = fmt.upsert(fmt.remove(v1, "x"), entry("e"))
    merge = merge_save(history(v1, v2), fmt.remove(v1, "x"), 1300 * MS)
    assert merge.base == 0 and [s.entry.id for s in merge.returned] == ["e"]
    assert "e" not in merge.user_deleted


def test_versions_newer_than_the_save_are_not_its_base() -> None:
    """A save written before v2 appeared cannot be based on v2, however alike they are."""
    v1 = doc_of(entry("a"), entry("b"))
    v2 = fmt.upsert(v1, entry("e"))
    save = fmt.upsert(fmt.remove(v1, "b"), entry("e2"))
    merge = merge_save(history(v1, v2), save, 1010 * MS)
    assert merge.base == 0 and merge.reapplied == ("e",)


def test_an_mtime_older_than_everything_known_is_no_evidence() -> None:
    """A copy that kept an old mtime (cp -p) says nothing about when its buffer was read."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(v1, entry("e"))
    merge = merge_save(history(v1, v2), v1, 10 * MS)
    assert [s.entry.id for s in merge.returned] == ["e"] and merge.reapplied == ()


def test_what_another_save_of_the_users_removed_is_not_removed_again() -> None:
    """A save read half-written (empty) sits in the history as the user's; the daemon then
    wrote on top of it. The complete save, based on the version before, keeps every entry
    it holds: only the daemon's own change (the new entry) can come back."""
    v1 = doc_of(entry("a"), entry("b"))
    torn = fmt.MemoryDocument()
    v3 = fmt.upsert(torn, entry("e"))
    save = fmt.upsert(v1, entry("note"))
    hist = history(v1, torn, v3, users=(1,))
    merge = merge_save(hist, save, 1250 * MS)  # written after v3 appeared: no proof for e
    assert merge.base == 0
    assert ids(merge.document) == ["a", "b", "note"]
    assert [s.entry.id for s in merge.returned] == ["e"] and merge.reapplied == ()
    assert merge.user_deleted == frozenset()


def test_without_history_the_save_is_all_the_users() -> None:
    """Nothing known yet: the save is taken as it is."""
    save = doc_of(entry("a"))
    merge = merge_save([], save, None)
    assert merge.document is save and merge.base is None and not merge.lacking


def test_returned_instead_leaves_the_save_and_returns_the_additions() -> None:
    """When re-applying would pass the file's cap the save stays as it is and what it
    lacked goes to PENDING.md."""
    v1 = doc_of(entry("a"))
    v2 = fmt.upsert(v1, entry("e"))
    save = fmt.upsert(v1, entry("note"))
    hist = history(v1, v2)
    merge = returned_instead(merge_save(hist, save, 1050 * MS), hist, save)
    assert merge.document is save and merge.reapplied == ()
    assert [s.entry.id for s in merge.returned] == ["e"]


def test_a_returned_section_carries_the_note_and_reads_back() -> None:
    """The note is a comment token that survives parsing and is read back by note_of."""
    text = fmt.render(fmt.put_raw(fmt.new_document(), "e", returned_section(entry("e"))))
    section = fmt.find(fmt.parse(text), "e")
    assert section is not None and note_of(section) == RETURNED_NOTE
    assert f"note={RETURNED_NOTE}" in text and section.entry.content == "body of e"


# --- the property: nothing the user did is undone, nothing approved disappears -------------

_OPS = st.lists(st.sampled_from(["add", "edit", "archive", "remove"]), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    daemon_ops=st.lists(_OPS, min_size=1, max_size=4),
    base_at=st.integers(min_value=0, max_value=4),
    user_ops=st.lists(st.sampled_from(["add", "edit", "delete"]), max_size=4),
    written=st.sampled_from(["before", "after", "unknown"]),
    data=st.data(),
)
def test_user_changes_are_kept_and_daemon_entries_are_kept_or_returned(
    daemon_ops: list[list[str]],
    base_at: int,
    user_ops: list[str],
    written: str,
    data: st.DataObject,
) -> None:
    """For any run of daemon writes and a save made from any of those versions plus the
    user's own adds, edits and deletions: every user change is in the result, and every
    entry of the latest version the user did not delete from their base is in the result
    or returned."""
    docs = [doc_of(entry("u0", origin="manual"), entry("d0"))]
    counter = 0
    for ops in daemon_ops:
        doc = docs[-1]
        for op in ops:
            present = [s.entry for s in doc.sections if s.entry.id.startswith("d")]
            counter += 1
            if op == "add" or not present:
                doc = fmt.upsert(doc, entry(f"d{counter}"))
                continue
            target = data.draw(st.sampled_from(present))
            if op == "edit":
                doc = fmt.upsert(doc, msgspec.structs.replace(target, content=f"daemon {counter}"))
            elif op == "archive":
                doc = fmt.upsert(doc, msgspec.structs.replace(target, status="archived"))
            else:
                doc = fmt.remove(doc, target.id)
        docs.append(doc)
    hist = history(*docs)
    base_index = min(base_at, len(docs) - 1)
    save = docs[base_index]
    user_added: set[str] = set()
    user_edited: dict[str, str] = {}
    user_deleted: set[str] = set()
    for n, op in enumerate(user_ops):
        present = [s.entry for s in save.sections if s.entry.id not in user_added]
        if op == "add" or not present:
            save = fmt.upsert(save, entry(f"user{n}", origin="manual"))
            user_added.add(f"user{n}")
            continue
        target = data.draw(st.sampled_from(present))
        if op == "edit":
            save = fmt.upsert(save, msgspec.structs.replace(target, content=f"user edit {n}"))
            user_edited[target.id] = f"user edit {n}"
            user_deleted.discard(target.id)
        else:
            save = fmt.remove(save, target.id)
            user_deleted.add(target.id)
            user_edited.pop(target.id, None)
    base_ns = hist[base_index].visible_ns
    written_ns = {"before": base_ns + MS, "after": hist[-1].visible_ns + 50 * MS, "unknown": None}[written]
    if written == "before" and base_index + 1 < len(hist):
        written_ns = min(base_ns + MS, hist[base_index + 1].visible_ns - 20 * MS)

    merge = merge_save(hist, save, written_ns)
    result = {s.entry.id: s.entry for s in merge.document.sections}
    returned = {s.entry.id for s in merge.returned}
    for entry_id in user_added:
        assert entry_id in result
    for entry_id, content in user_edited.items():
        assert entry_id in result and result[entry_id].content == content
    for entry_id in user_deleted:
        assert entry_id not in result
    latest = {s.entry.id for s in docs[-1].sections}
    in_base = {s.entry.id for s in docs[base_index].sections}
    # Never silently: each entry of the latest version is kept, returned, or recorded as
    # deleted by the user -- and only from the base the merge chose.
    assert merge.base is not None
    chosen = {s.entry.id for s in docs[merge.base].sections}
    for entry_id in latest:
        assert entry_id in result or entry_id in returned or entry_id in merge.user_deleted, entry_id
    assert merge.user_deleted <= chosen
    assert not returned & set(result)
    if written == "before":
        # Written before any later version appeared: nothing added since is dropped.
        for entry_id in latest - in_base:
            assert entry_id in result, entry_id
