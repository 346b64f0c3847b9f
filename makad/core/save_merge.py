"""A user's save of a memory file, merged against the versions the daemon knows.

An editor saves the buffer it read earlier plus the user's changes. When the
daemon wrote the file in between (an approval, an ``add_entry``), the save
lacks that write: taken as it is, every entry the daemon added would be
deleted "by the user" although the user never saw it. So each save is read
against the last versions of the file the daemon knows -- the ones it wrote
and the ones it read -- each kept as a map of entry id to a fingerprint of the
entry:

1. **The base.** The save was made from one of those versions: the one it
   differs from in the fewest entries. On a tie, a version the user saved
   (their editor held it; the newest of those), else the oldest of the
   daemon's -- the reading that counts fewer of the daemon's entries as deleted
   by the user. A version that only appeared after the save was written cannot
   be its base (the save's mtime says when it was written).
2. **Saved on the latest version.** The user's changes are the save itself:
   nothing to merge, and an entry the save lacks was deleted by the user.
3. **Saved on an older version.** The user's changes are what differs between
   the base and the save; they are kept as they are. What the daemon's own
   versions changed between the base and the latest version, and the save did
   not touch (a change another save of the user's made -- a second editor, a
   save read half-written -- is not re-applied: the newer save stands):

   - an entry changed or removed since the base, which the save holds exactly as
     the base had it: the change is re-applied (the user did not touch it);
   - an entry added since the base, which the save lacks: re-applied when the
     evidence shows the save's buffer predates it -- the save was written before
     the version that added it appeared, or the save holds an entry in the state
     that version (or an earlier one since the base) replaced, which no one
     deleting an entry they had seen would have restored; otherwise it cannot be
     told apart from the user deleting an entry they had just seen, and it is
     *returned*: the caller queues it in PENDING.md with a note.

   An entry both sides changed keeps the user's version.

Deletions by the user are only the entries the base holds and the save lacks:
an entry the save lacks because its buffer predates it is never one.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Final
from urllib.parse import unquote

import msgspec

from makad.core import memory_format as fmt
from makad.core.types import Entry

# File mtimes come from the kernel's coarse clock (up to a few ms behind the true
# time, one tick at most: 10 ms at HZ=100): a save only counts as written before a version when its
# mtime is earlier by more than that.
CLOCK_SLACK_NS: Final = 10_000_000
_ENCODER: Final = msgspec.json.Encoder()
# The comment token on a proposal the daemon queued itself, and its value for an
# entry a save dropped that may have been deleted on purpose.
NOTE_KEY: Final = "note"
RETURNED_NOTE: Final = "returned-after-a-save-lacked-it"


def entry_states(doc: fmt.MemoryDocument) -> dict[str, str]:
    """Entry id -> a fingerprint of what the entry holds (fields and kept tokens)."""
    out: dict[str, str] = {}
    for section in doc.sections:
        digest = hashlib.sha256(_ENCODER.encode(section.entry))
        digest.update("\0".join(section.unknown_fields).encode("utf-8", "surrogatepass"))
        out[section.entry.id] = digest.hexdigest()[:24]
    return out


@dataclasses.dataclass(frozen=True)
class KnownVersion:
    """One version of a file as the daemon knew it."""

    # Kept for the latest versions only (the sections re-applied come from the latest;
    # the one before it may become the latest again): ``without_doc`` drops it.
    doc: fmt.MemoryDocument | None
    states: Mapping[str, str]
    # When it appeared on disk (ns since the epoch): taken just before the daemon's own
    # rename, or the file's mtime for a version the user saved -- never later than true.
    visible_ns: int
    # Written by the daemon (else read: a save of the user's, or the file at start).
    by_daemon: bool = False


@dataclasses.dataclass(frozen=True)
class SaveMerge:
    """What to make of one save."""

    # What the file should hold: the save itself unless something was re-applied.
    document: fmt.MemoryDocument
    # The save's base: an index into the history (None without one).
    base: int | None
    # Ids the user's save changed relative to its base, and among them the deleted ones.
    user_changed: frozenset[str]
    user_deleted: frozenset[str]
    # Changes since the base the save lacked, written again (ids, in file order).
    reapplied: tuple[str, ...] = ()
    # Entries added since the base that the save lacks and that may have been deleted
    # on purpose: the caller queues them in PENDING.md (sections of the latest version).
    returned: tuple[fmt.Section, ...] = ()
    # True when the evidence shows the save's buffer predates a version after its base.
    stale: bool = False
    # Among ``user_changed``, the entries the save added (its base lacked them).
    user_added: frozenset[str] = frozenset()

    @property
    def lacking(self) -> bool:
        """Whether the save lacked something the daemon knew: re-applied or returned."""
        return bool(self.reapplied or self.returned)


def returned_section(entry: Entry, newline: str = "\n") -> str:
    """A dropped entry as a proposal waiting in PENDING.md, with the note saying why."""
    return fmt.render_entry(entry, [f"{NOTE_KEY}={RETURNED_NOTE}"], newline)


def note_of(section: fmt.Section) -> str | None:
    """The note the daemon left on a proposal (a comment token it keeps), if any."""
    for token in section.unknown_fields:
        key, sep, value = token.partition("=")
        if sep and key == NOTE_KEY:
            return unquote(value) or None
    return None


def diff_ids(a: Mapping[str, str], b: Mapping[str, str]) -> set[str]:
    """Ids added, removed or changed between two entry maps."""
    return {i for i in a.keys() | b.keys() if a.get(i) != b.get(i)}


def known_version(doc: fmt.MemoryDocument, visible_ns: int, *, by_daemon: bool = False) -> KnownVersion:
    return KnownVersion(doc, entry_states(doc), visible_ns, by_daemon)


def without_doc(version: KnownVersion) -> KnownVersion:
    """The version with its fingerprints only (older versions need no more)."""
    return dataclasses.replace(version, doc=None) if version.doc is not None else version


def _latest_doc(history: Sequence[KnownVersion]) -> fmt.MemoryDocument:
    doc = history[-1].doc
    assert doc is not None, "the latest known version keeps its document"
    return doc


def merge_save(
    history: Sequence[KnownVersion], save: fmt.MemoryDocument, written_ns: int | None
) -> SaveMerge:
    """Merge ``save`` (written at ``written_ns``, its mtime) with what the daemon knew.

    ``history`` is oldest first; its last version is what the daemon last wrote or
    read. Pure: no IO.
    """
    saved = entry_states(save)
    if not history:
        return SaveMerge(save, None, frozenset(saved), frozenset(), user_added=frozenset(saved))
    if written_ns is not None and written_ns + CLOCK_SLACK_NS < history[0].visible_ns:
        # Older than every version known (a copy that kept its mtime): no evidence.
        written_ns = None
    base_index = _base(history, saved, written_ns)
    base = history[base_index].states
    user_changed = diff_ids(base, saved)
    user_deleted = frozenset(i for i in user_changed if i in base and i not in saved)
    user_added = frozenset(i for i in user_changed if i not in base)
    last_index = len(history) - 1
    if base_index == last_index:
        return SaveMerge(save, base_index, frozenset(user_changed), user_deleted, user_added=user_added)
    last = history[last_index].states
    # What changed since the base and the save did not touch -- as far as the daemon
    # changed it: what another save of the user's changed (an editor, or a save read
    # half-written) is not the daemon's to re-apply; the newer save stands.
    since = {i: _settled_at(history, i) for i in diff_ids(base, last) - user_changed}
    theirs = {i for i, index in since.items() if history[index].by_daemon}
    # The save holds these exactly as the base had them although a later version of the
    # daemon's changed or removed them: its buffer predates the earliest such version.
    reverted = [since[i] for i in theirs if i in base]
    predates_from = min(reverted, default=None)
    latest = _latest_doc(history)
    by_id = {s.entry.id: s for s in latest.sections}
    document = save
    reapplied: list[str] = []
    returned: list[fmt.Section] = []
    for section_id in _in_order(theirs, latest):
        section = by_id.get(section_id)
        if section is None:  # removed since the base: remove it again
            document = fmt.remove(document, section_id)
            reapplied.append(section_id)
        elif section_id in base or _unseen(
            history, _first_present(history, base_index, section_id), predates_from, written_ns
        ):
            # Changed since the base, or added in a version the save's buffer predates:
            # the latest version of it.
            document = fmt.put_raw(document, section_id, section.raw)
            reapplied.append(section_id)
        else:
            returned.append(section)
    stale = predates_from is not None or any(
        section_id not in base and section_id in reapplied for section_id in theirs
    )
    return SaveMerge(
        document,
        base_index,
        frozenset(user_changed),
        user_deleted,
        tuple(reapplied),
        tuple(returned),
        stale,
        user_added,
    )


def _base(history: Sequence[KnownVersion], saved: Mapping[str, str], written_ns: int | None) -> int:
    """The version the save was most likely made from (see the module docstring)."""
    usable = [
        index
        for index, version in enumerate(history)
        if written_ns is None or version.visible_ns <= written_ns + CLOCK_SLACK_NS
    ]

    def rank(index: int) -> tuple[int, int, int]:
        # Fewest differences first. On a tie, a version the user saved (their editor held
        # it: the newest of those), else the oldest of the daemon's: the reading that
        # counts fewer of the daemon's entries as deleted by the user.
        version = history[index]
        tie = (1, index) if version.by_daemon else (0, -index)
        return (len(diff_ids(version.states, saved)), *tie)

    return min(usable, key=rank)


def _first_present(history: Sequence[KnownVersion], base_index: int, entry_id: str) -> int:
    """Index of the first version after the base that holds ``entry_id`` (it was added there)."""
    return next(
        (i for i in range(base_index + 1, len(history)) if entry_id in history[i].states), len(history) - 1
    )


def _settled_at(history: Sequence[KnownVersion], entry_id: str) -> int:
    """Index of the version from which on ``entry_id`` is as the latest version has it."""
    final = history[-1].states.get(entry_id)
    index = len(history) - 1
    while index > 0 and history[index - 1].states.get(entry_id) == final:
        index -= 1
    return index


def _unseen(
    history: Sequence[KnownVersion], added_at: int, predates_from: int | None, written_ns: int | None
) -> bool:
    """Whether the save's buffer provably predates version ``added_at``."""
    if predates_from is not None and added_at >= predates_from:
        return True
    return written_ns is not None and written_ns + CLOCK_SLACK_NS < history[added_at].visible_ns


def _in_order(ids: set[str], latest: fmt.MemoryDocument) -> list[str]:
    """``ids`` in the latest version's file order, removed ones (not in it) first."""
    order = [s.entry.id for s in latest.sections if s.entry.id in ids]
    return sorted(ids - set(order)) + order


def returned_instead(
    merge: SaveMerge, history: Sequence[KnownVersion], save: fmt.MemoryDocument
) -> SaveMerge:
    """``merge`` leaving ``save`` as it is: the entries it would add back are returned
    instead (changes to entries the save holds are left undone)."""
    if merge.base is None:
        return merge
    base = history[merge.base].states
    latest = {s.entry.id: s for s in _latest_doc(history).sections}
    added = tuple(latest[i] for i in merge.reapplied if i not in base and i in latest)
    return dataclasses.replace(merge, document=save, reapplied=(), returned=merge.returned + added)
