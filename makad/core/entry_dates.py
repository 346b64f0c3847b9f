"""Dates for entries typed by hand: when the daemon first saw them, when it saw them edited.

An entry typed into MEMORY.md by hand carries no ``createdAt`` (or 0), and a
hand edit leaves the comment's ``updatedAt`` as it was. Left alone, such an
entry would look ancient to the agent ("age unknown · may be outdated") and
rank last on recency. So the daemon keeps its own dates, never rewriting the
user's text for them:

- ``first_seen``: the first time the daemon read an entry without a
  ``createdAt`` (one it could not read is the user's, and stays as written);
  an entry typed by hand keeps its id across the user's edits
  (``makad.core.typed_ids``), and with it this date;
- ``edited_at``: when the daemon saw a hand edit change an entry's title,
  content or tags.

``changes`` works out what to record when the file changed; ``effective``
applies the dates on reading. When the daemon next writes the entry, the dates
go into its comment.
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec

from makad.core import memory_format as fmt
from makad.core.entry_comment import held_keys
from makad.core.types import Entry


class EntryDates(NamedTuple):
    first_seen: int
    edited_at: int


def _text(entry: Entry) -> tuple[str, str, list[str]]:
    return entry.title, entry.content, entry.tags


def changes(
    before: fmt.MemoryDocument, after: fmt.MemoryDocument, known: dict[str, EntryDates], now: int
) -> tuple[dict[str, EntryDates], list[str]]:
    """The rows to write and the ids to forget after the file went from ``before`` to ``after``."""
    old = {s.entry.id: s.entry for s in before.sections}
    new = {s.entry.id: s.entry for s in after.sections}
    # A createdAt the parser could not read is the user's: it is never replaced by a date.
    held = {s.entry.id for s in after.sections if "createdAt" in held_keys(s.unknown_fields)}
    changed: dict[str, EntryDates] = {}
    for entry_id, entry in new.items():
        dates = known.get(entry_id)
        previous = old.get(entry_id)
        if entry_id in held:
            edited = now if previous is not None and _text(previous) != _text(entry) else 0
            if edited or (dates is not None and dates.first_seen):
                changed[entry_id] = EntryDates(0, edited or (dates.edited_at if dates else 0))
            continue
        if previous is not None:
            if _text(previous) != _text(entry):
                first = dates.first_seen if dates is not None else entry.created_at or now
                changed[entry_id] = EntryDates(first, now)
            continue
        if dates is None and not entry.created_at:
            changed[entry_id] = EntryDates(now, 0)
    # An editor may write a file empty before its new text: forget only what a
    # non-empty new version no longer has.
    removed = [i for i in old if i not in new and i in known] if new else []
    return changed, removed


def effective(entry: Entry, dates: dict[str, EntryDates]) -> Entry:
    """The entry with the daemon's dates where its own are missing or older."""
    found = dates.get(entry.id)
    if found is None:
        return entry
    created = entry.created_at or found.first_seen
    updated = max(entry.updated_at or created, found.edited_at)
    if created == entry.created_at and updated == entry.updated_at:
        return entry
    return msgspec.structs.replace(entry, created_at=created, updated_at=updated)


def effective_all(entries: list[Entry], dates: dict[str, EntryDates]) -> list[Entry]:
    return [effective(e, dates) for e in entries] if dates else entries
