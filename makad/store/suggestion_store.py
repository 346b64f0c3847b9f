"""Dismissed suggestions, kept in the workspace ledger (schema step ``_SUGGESTIONS``).

One row per dismissed suggestion: its stable id (``makad.core.suggestions``: a digest,
no text of the user's), until when it stays dismissed (ms) and when it was dismissed.
Bounded: every write prunes the rows whose time has passed and keeps only the newest
``MAX_DISMISSED``. Blocking: call from a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from makad.store.ledger import Ledger

MAX_DISMISSED: Final = 500


def dismiss(ledger: Ledger, suggestion_id: str, until: int, now: int) -> None:
    """The suggestion stays dismissed until ``until`` (ms; not after ``now``: no longer)."""
    with ledger.transaction() as conn:
        if until > now:
            conn.execute(
                "INSERT OR REPLACE INTO dismissed_suggestions (id, until, at) VALUES (?, ?, ?)",
                (suggestion_id, until, now),
            )
        else:
            conn.execute("DELETE FROM dismissed_suggestions WHERE id = ?", (suggestion_id,))
        conn.execute("DELETE FROM dismissed_suggestions WHERE until <= ?", (now,))
        conn.execute(
            "DELETE FROM dismissed_suggestions WHERE id IN (SELECT id FROM dismissed_suggestions"
            " ORDER BY at DESC, id LIMIT -1 OFFSET ?)",
            (MAX_DISMISSED,),
        )


def dismissed(ledger: Ledger, now: int) -> dict[str, int]:
    """The suggestions dismissed still at ``now``: id → until (ms)."""
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT id, until FROM dismissed_suggestions WHERE until > ? ORDER BY at DESC LIMIT ?",
            (now, MAX_DISMISSED),
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}
