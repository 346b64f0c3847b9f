"""Sessions stored under an id that holds a secret, renamed once to the id's stand-in.

Today a client's session id holding a secret is replaced by its stand-in
(``makad.service.identifiers``) before any lookup or write. A ledger written before
that holds such sessions under the raw id, which every call would now miss. The
schema step that adds ``session_chain_ids`` marks the ledger (``RENAME_PENDING_KEY``);
at the workspace's first use the daemon, which holds the identifier key, calls
``rename_secret_session_ids``, and the marker goes in the same transaction as the
renames: one pass over the session ids, once, and a crash leaves the ledger as it was.

A renamed session takes the stand-in everywhere the ledger keeps its id: its row,
its events, tombstone, working state, manifests and what they showed, checkpoints,
episodes, the pack's bookkeeping, what attention derived from it, and the JSON
records that name it (``"<id>"`` or ``event:<id>:``: request results, memory-event
data, intents, the curator's records). Its events keep the hashes they were given,
so the chain still verifies them and tampering before the rename still shows:
``session_chain_ids`` holds the id they were hashed with and the last seq hashed so
(``makad.core.chain``), read by verification only, and dropped with the session by
``delete_session``. The events are updated under their append-only trigger's absence,
made again in the same transaction. An id whose stand-in some other session already
has is left as it is.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Final

from makad.core.chain import ChainedAs
from makad.core.refs import EVENT_PREFIX
from makad.store.ledger.base import LedgerBase
from makad.store.ledger.schema import (
    EVENTS_APPEND_ONLY,
    MEMORY_EVENTS_APPEND_ONLY,
    RENAME_PENDING_KEY,
    episode_summary_key,
)

# Tables whose ``session_id`` column names a session (``sessions`` and ``events`` apart).
_SESSION_COLUMNS: Final = (
    "tombstones",
    "working_state",
    "manifest_calls",
    "manifest_shown",
    "checkpoints",
    "episodes",
    "episode_refs",
    "memory_session_totals",
    "session_notes",
    "behaviors",
    "behavior_offsets",
)
# Text columns holding source refs (``event:<session>:<seqs>``): (table, column).
_REF_COLUMNS: Final = (
    ("manifest_items", "source_id"),
    ("manifest_shown", "source_id"),
    ("episode_refs", "ref"),
)
# JSON records that may name a session: (table, its key column, the record's column).
_JSON_COLUMNS: Final = (
    ("working_state", "session_id", "state"),
    ("session_notes", "session_id", "state"),
    ("behaviors", "id", "record"),
    ("behavior_offsets", "session_id", "carry"),
    ("behavior_offsets", "session_id", "segment"),
    ("attention_state", "key", "state"),
    ("manifest_curator", "call_ref", "record"),
    ("requests", "request_id", "result"),
    ("memory_events", "id", "data"),
    ("intents", "id", "payload"),
)


class RenamesArea(LedgerBase):
    """The one-time rename of sessions stored under an id that holds a secret."""

    def rename_secret_session_ids(self, stand_in: Callable[[str], str]) -> tuple[int, int]:
        """Rename every session (and tombstone) whose id ``stand_in`` changes, once:
        ``(renamed, left)``, ``left`` counting the ids whose stand-in was taken already.
        Nothing to do (one read) once the ledger's marker is gone."""
        if self._meta(RENAME_PENDING_KEY) is None:
            return 0, 0
        with self._writing() as conn:
            if conn.execute("SELECT 1 FROM meta WHERE key = ?", (RENAME_PENDING_KEY,)).fetchone() is None:
                return 0, 0
            stored = [
                str(sid)
                for (sid,) in conn.execute(
                    "SELECT session_id FROM sessions UNION SELECT session_id FROM tombstones"
                )
            ]
            renames = [(old, new) for old in stored if (new := stand_in(old)) != old]
            taken = set(stored)
            free = [(old, new) for old, new in renames if new not in taken]
            if free:
                conn.execute("DROP TRIGGER IF EXISTS events_append_only")
                conn.execute("DROP TRIGGER IF EXISTS memory_events_append_only")
                for old, new in free:
                    _rename(conn, old, new)
                conn.execute(EVENTS_APPEND_ONLY)
                conn.execute(MEMORY_EVENTS_APPEND_ONLY)
                self._on_commit.append(self._shown_cache.clear)
            conn.execute("DELETE FROM meta WHERE key = ?", (RENAME_PENDING_KEY,))
        return len(free), len(renames) - len(free)


def session_chained_as(conn: sqlite3.Connection, session_id: str) -> ChainedAs | None:
    """The ``session_chain_ids`` row of a session (most have none)."""
    row = conn.execute(
        "SELECT hashed_id, through_seq FROM session_chain_ids WHERE session_id = ?", (session_id,)
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def _rename(conn: sqlite3.Connection, old: str, new: str) -> None:
    """Give session ``old`` the id ``new`` in every table of the ledger (see the module docstring)."""
    (through,) = conn.execute(
        "SELECT max(coalesce((SELECT max(seq) FROM events WHERE session_id = ?), 0),"
        " coalesce((SELECT last_seq FROM sessions WHERE session_id = ?), 0))",
        (old, old),
    ).fetchone()
    if through:
        conn.execute(
            "INSERT INTO session_chain_ids (session_id, hashed_id, through_seq) VALUES (?, ?, ?)",
            (new, old, through),
        )
    conn.execute("UPDATE sessions SET session_id = ? WHERE session_id = ?", (new, old))
    conn.execute("UPDATE events SET session_id = ? WHERE session_id = ?", (new, old))
    for table in _SESSION_COLUMNS:
        conn.execute(f"UPDATE {table} SET session_id = ? WHERE session_id = ?", (new, old))
    old_ref, new_ref = f"{EVENT_PREFIX}{old}:", f"{EVENT_PREFIX}{new}:"
    for table, column in _REF_COLUMNS:
        conn.execute(
            f"UPDATE {table} SET {column} = ? || substr({column}, ?) WHERE substr({column}, 1, ?) = ?",
            (new_ref, len(old_ref) + 1, len(old_ref), old_ref),
        )
    for episode, summary in conn.execute(
        "SELECT id, summary FROM episodes WHERE session_id = ? AND summary_key IS NOT NULL", (new,)
    ).fetchall():
        conn.execute(
            "UPDATE episodes SET summary_key = ? WHERE id = ?", (episode_summary_key(new, summary), episode)
        )
    pairs = ((f'"{old}"', f'"{new}"'), (old_ref, new_ref))
    for table, key, column in _JSON_COLUMNS:
        _replace_in(conn, table, key, column, pairs)


def _replace_in(
    conn: sqlite3.Connection, table: str, key: str, column: str, pairs: Sequence[tuple[str, str]]
) -> None:
    """Replace each ``pairs`` text in ``table.column`` where it occurs, keeping the value's
    storage class (a BLOB stays a BLOB)."""
    for find, _ in pairs:
        rows = conn.execute(
            f"SELECT {key}, {column} FROM {table}"
            f" WHERE {column} IS NOT NULL AND instr(CAST({column} AS BLOB), CAST(? AS BLOB)) > 0",
            (find,),
        ).fetchall()
        for row_key, value in rows:
            text = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)
            for old, new in pairs:
                text = text.replace(old, new)
            updated: str | bytes = text
            if isinstance(value, bytes):
                updated = text.encode("utf-8", "surrogateescape")
            conn.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (updated, row_key))
