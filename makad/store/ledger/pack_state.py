"""The daemon's own bookkeeping behind the pack: one more area of the workspace ledger.

Three small tables (schema step 4 in ``makad.store.ledger.schema``):

- ``entry_dates``: when the daemon first saw a MEMORY.md entry that carries no
  ``createdAt`` (typed by hand), and when it last saw an entry edited by hand.
  The user's text is not rewritten for this; the dates are applied when entries
  are read (``makad.core.entry_dates``) and written into the entry's comment
  the next time the daemon writes that entry.
- ``memory_session_totals``: the bytes of memory shown to each session since
  its latest compaction (the cumulative cap's measure). A call recorded again
  under the same id replaces its own contribution instead of adding to it.
- ``session_notes``: how far the daemon's derived session notes have read each
  session, and what they gathered (``makad.core.session_notes``).

Session rows go with ``delete_session`` (``SESSION_ROWS_DELETE``); a manifest's
transaction counts its memory with ``add_session_memory``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from typing import Final

from makad.core.entry_dates import EntryDates
from makad.store.ledger.base import LedgerBase

SESSION_ROWS_DELETE: Final = (
    "DELETE FROM memory_session_totals WHERE session_id = ?",
    "DELETE FROM session_notes WHERE session_id = ?",
)


class PackStateArea(LedgerBase):
    """Entry dates, memory shown per session, and the derived notes' progress."""

    # -------------------------------------------------------------- entry dates

    def load_entry_dates(self) -> dict[str, EntryDates]:
        with self._reading() as conn:
            rows = conn.execute("SELECT entry_id, first_seen, edited_at FROM entry_dates").fetchall()
        return {entry_id: EntryDates(first, edited) for entry_id, first, edited in rows}

    def save_entry_dates(self, changed: Mapping[str, EntryDates], removed: Iterable[str]) -> None:
        gone = list(removed)
        if not changed and not gone:
            return
        with self._writing() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO entry_dates (entry_id, first_seen, edited_at) VALUES (?, ?, ?)",
                [(entry_id, d.first_seen, d.edited_at) for entry_id, d in changed.items()],
            )
            conn.executemany("DELETE FROM entry_dates WHERE entry_id = ?", [(i,) for i in gone])

    # --------------------------------------------------- memory shown per session

    def session_memory_bytes(self, session_id: str, since: int, call_id: str) -> int:
        """Bytes of memory shown to the session since ``since``, not counting call ``call_id``
        (a repeat of the latest call must see what that call saw)."""
        with self._reading() as conn:
            row = conn.execute(
                "SELECT since, bytes, last_call_id, last_call_bytes FROM memory_session_totals"
                " WHERE session_id = ?",
                (session_id,),
            ).fetchone()
        if row is None or row[0] != since:
            return 0
        return int(row[1]) - (int(row[3]) if row[2] == call_id else 0)

    # ------------------------------------------------------------ session notes

    def load_notes_state(self, session_id: str) -> tuple[int, bytes] | None:
        """(the last seq the derived notes have read, their gathered state), if any."""
        with self._reading() as conn:
            row = conn.execute(
                "SELECT derived_to_seq, state FROM session_notes WHERE session_id = ?", (session_id,)
            ).fetchone()
        return None if row is None else (int(row[0]), bytes(row[1]))

    def save_notes_state(self, session_id: str, to_seq: int, state: bytes) -> None:
        """What the derived notes gathered, read up to ``to_seq``; nothing kept for a
        session deleted meanwhile."""
        with self._writing(relaxed=True) as conn:
            if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone():
                conn.execute(
                    "INSERT OR REPLACE INTO session_notes (session_id, derived_to_seq, state)"
                    " VALUES (?, ?, ?)",
                    (session_id, to_seq, state),
                )


def add_session_memory(
    conn: sqlite3.Connection, session_id: str, since: int, call_id: str, size: int
) -> None:
    """Inside the manifest's transaction: count one call's memory toward the session."""
    row = conn.execute(
        "SELECT since, bytes, last_call_id, last_call_bytes FROM memory_session_totals WHERE session_id = ?",
        (session_id,),
    ).fetchone()
    total = size
    if row is not None and row[0] == since:
        total += int(row[1]) - (int(row[3]) if row[2] == call_id else 0)
    conn.execute(
        "INSERT OR REPLACE INTO memory_session_totals"
        " (session_id, since, bytes, last_call_id, last_call_bytes) VALUES (?, ?, ?, ?, ?)",
        (session_id, since, total, call_id, size),
    )
