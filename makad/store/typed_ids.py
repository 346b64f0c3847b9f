"""The ids of entries typed by hand into MEMORY.md, kept in the workspace ledger.

``makad.core.typed_ids`` decides which entry a hand-typed section continues;
this keeps its records (table ``typed_entries``, schema step 6 in
``makad.store.ledger.schema``) and holds them for one workspace: loaded on the
first read of MEMORY.md, matched against every version of the file the daemon
reads or writes (``TrackedFile.identify``), written back when they changed. The
caller holds the workspace lock; ``load`` and ``save`` block (worker threads).

Until the records are loaded (a ledger that fails to read), sections keep the
ids their text derives and nothing is recorded: an edited entry then shows a
new id until the ledger reads again, and no record is ever overwritten with
that guess.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import structlog

from makad.core import memory_format as fmt
from makad.core.typed_ids import TypedEntry, differences, identify
from makad.errors import IOFailure

if TYPE_CHECKING:
    from makad.store.ledger import Ledger

log = structlog.get_logger("makad.typed_ids")


def load_records(ledger: Ledger) -> dict[str, TypedEntry]:
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT entry_id, text_id, title, body, position, gone_at FROM typed_entries"
        ).fetchall()
    return {row[0]: TypedEntry(row[1], row[2], row[3], int(row[4]), int(row[5])) for row in rows}


def save_records(ledger: Ledger, changed: Mapping[str, TypedEntry], removed: Iterable[str]) -> None:
    gone = list(removed)
    if not changed and not gone:
        return
    # No fsync of its own: a save taken in bumps the revision next, durably; a record lost
    # to a power cut before that only costs an edited entry its id.
    with ledger.transaction(relaxed=True) as conn:
        conn.executemany(
            "INSERT OR REPLACE INTO typed_entries (entry_id, text_id, title, body, position, gone_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            [(entry_id, *record) for entry_id, record in changed.items()],
        )
        conn.executemany("DELETE FROM typed_entries WHERE entry_id = ?", [(i,) for i in gone])


class TypedIds:
    """One workspace's records of its hand-typed entries."""

    def __init__(self, ledger: Ledger) -> None:
        self._ledger = ledger
        self._known: dict[str, TypedEntry] | None = None
        self._saved: dict[str, TypedEntry] = {}

    def load(self) -> None:
        """Read the records once (blocking); a failing ledger is tried again next time."""
        if self._known is not None:
            return
        try:
            records = load_records(self._ledger)
        except IOFailure as exc:
            log.warning("typed_ids_not_loaded", kind=exc.kind)
            return
        self._known, self._saved = records, dict(records)

    def identify(self, doc: fmt.MemoryDocument) -> fmt.MemoryDocument:
        """``doc`` (just parsed) with its hand-typed entries' ids; the records follow it."""
        if self._known is None:
            return doc
        doc, self._known = identify(doc, self._known, int(time.time() * 1000))
        return doc

    @property
    def unsaved(self) -> bool:
        return self._known is not None and self._known != self._saved

    def save(self) -> None:
        """Write what changed since the last save (blocking); a failure is retried next time."""
        if self._known is None or self._known == self._saved:
            return
        target = dict(self._known)
        changed, removed = differences(self._saved, target)
        try:
            save_records(self._ledger, changed, removed)
        except IOFailure as exc:
            log.warning("typed_ids_not_saved", kind=exc.kind, count=len(changed))
            return
        self._saved = target
