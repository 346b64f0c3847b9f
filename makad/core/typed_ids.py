"""Stable ids for entries typed by hand into MEMORY.md, without touching the file.

An entry whose section names no id (no metadata comment, or one without ``id=``)
gets one from its text (``memory_format.derived_entry_id``): a typo fixed in the
editor would make it another entry -- its history, its dates, the ``memory:<id>``
refs of the packs that showed it all lost. The file stays as the user typed it
(the daemon writes a comment only when it changes the entry for them), so the
identity lives with the daemon: a record per hand-typed entry -- the id it
keeps, the id its text derives now, digests of its title and content, its
place in the file -- kept in the ledger (``makad.store.typed_ids``).

Each version of the file the daemon reads or writes is matched against the
records (``identify``). A hand-typed section is, in this order:

1. the entry whose record has the id its text derives now (unchanged, or back
   to a text it had: an undo, the same text typed again after deleting it);
2. else, of the records no section of this version continues, the one with its
   title (the content was edited) -- the nearest in file order when several
   share the title;
3. else the one with its content (the title was edited);
4. else a new entry: its id is the one its text derives (another, derived from
   that, while that one is taken).

A title and a content both changed in one save make a new entry, as a deletion
and an addition would. A record no section continues is kept as gone (only its
exact text brings it back), the newest ``GONE_KEPT`` of them; a record whose id
the file now declares (the daemon wrote the entry's comment) waits, so a save
from a buffer older than that write still finds its entry. A version without
any entry changes nothing: an editor may write a file empty before its new text.
Titles and contents are kept as digests only: no text of the user's reaches the
ledger this way.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Mapping
from typing import Final, NamedTuple

from makad.core import memory_format as fmt

GONE_KEPT: Final = 64


class TypedEntry(NamedTuple):
    """What the daemon keeps of one hand-typed entry (its id is the key it is kept under)."""

    text_id: str  # the id its text derived when last read (``~n`` included)
    title: str  # digest of its title
    body: str  # digest of its content
    position: int  # its index among the file's sections
    gone_at: int = 0  # when no version continued it any more (ms), else 0


Known = Mapping[str, TypedEntry]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def identify(
    doc: fmt.MemoryDocument, known: Known, now: int
) -> tuple[fmt.MemoryDocument, dict[str, TypedEntry]]:
    """``doc`` (just parsed) with each hand-typed section holding the id of the entry it
    continues, and the records after it (see the module docstring). Pure."""
    if not doc.sections:
        return doc, dict(known)
    sections = doc.sections
    typed = [index for index, section in enumerate(sections) if section.derived]
    declared = {section.entry.id for section in sections if not section.derived}
    ids: dict[int, str] = {}
    by_text: dict[str, str] = {}
    for kept_id, record in known.items():
        holder = by_text.get(record.text_id)
        if kept_id not in declared and (holder is None or (known[holder].gone_at and not record.gone_at)):
            by_text[record.text_id] = kept_id
    for index in typed:
        found = by_text.get(sections[index].entry.id)
        if found is not None:
            ids[index] = found
    claimed = set(ids.values())
    waiting = sorted(
        (i for i, r in known.items() if not r.gone_at and i not in claimed and i not in declared),
        key=lambda i: known[i].position,
    )
    digests = {i: (digest(sections[i].entry.title), digest(sections[i].entry.content)) for i in typed}
    # The content edited (same title), then the title edited (same content).
    _pair(typed, ids, waiting, known, lambda i: digests[i][0], lambda r: r.title)
    _pair(typed, ids, waiting, known, lambda i: digests[i][1], lambda r: r.body)
    taken = declared | set(ids.values())
    for index in typed:
        if index not in ids:
            ids[index] = _fresh(sections[index].entry.id, taken)
    after: dict[str, TypedEntry] = {}
    for index, kept_id in ids.items():
        after[kept_id] = TypedEntry(sections[index].entry.id, *digests[index], index)
    gone: list[tuple[str, TypedEntry]] = []
    for kept_id, record in known.items():
        if kept_id in after:
            continue
        if kept_id in declared:  # written with its comment now: waits for an older buffer's save
            after[kept_id] = record._replace(gone_at=0)
        else:
            gone.append((kept_id, record if record.gone_at else record._replace(gone_at=now)))
    gone.sort(key=lambda item: item[1].gone_at, reverse=True)
    after.update(gone[:GONE_KEPT])
    renames = {index: kept_id for index, kept_id in ids.items() if sections[index].entry.id != kept_id}
    return fmt.renamed(doc, renames), after


def _pair(
    typed: list[int],
    ids: dict[int, str],
    waiting: list[str],
    known: Known,
    section_key: Callable[[int], str],
    record_key: Callable[[TypedEntry], str],
) -> None:
    """Give each waiting record, in file order, the unclaimed section whose key is its
    own (the nearest one to its place; the earlier on a tie); ``ids`` and ``waiting``
    are updated. Sections sharing a key are kept sorted: each pick is a bisection."""
    by_key: dict[str, list[int]] = {}
    for index in typed:
        if index not in ids:
            by_key.setdefault(section_key(index), []).append(index)
    if not by_key:
        return
    left: list[str] = []
    for kept_id in waiting:
        record = known[kept_id]
        candidates = by_key.get(record_key(record))
        if not candidates:
            left.append(kept_id)
            continue
        at = bisect.bisect_left(candidates, record.position)
        if at == len(candidates) or (
            at > 0 and record.position - candidates[at - 1] <= candidates[at] - record.position
        ):
            at -= 1
        ids[candidates.pop(at)] = kept_id
    waiting[:] = left


def _fresh(text_id: str, taken: set[str]) -> str:
    """``text_id``, or while it is taken an id derived from it."""
    candidate, attempt = text_id, 0
    while candidate in taken:
        attempt += 1
        candidate = "h-" + digest(f"{text_id}\n{attempt}")
    taken.add(candidate)
    return candidate


def differences(before: Known, after: Known) -> tuple[dict[str, TypedEntry], list[str]]:
    """(records to write, ids to forget) to go from ``before`` to ``after``."""
    changed = {kept_id: record for kept_id, record in after.items() if before.get(kept_id) != record}
    return changed, [kept_id for kept_id in before if kept_id not in after]
