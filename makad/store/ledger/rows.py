"""Rows of the ``sessions`` and ``events`` tables and the records they become.

SQLite keeps whatever storage class a record's header names, so a damaged page can
hand back an int where text was written: ``event_row`` coerces rather than trusts,
and the hash chain (``makad.core.chain``) then marks the event unverified.
"""

from __future__ import annotations

import contextlib
import math
import sqlite3
from collections.abc import Sequence
from typing import Any, Final, cast, get_args

import msgspec

from makad.core.chain import verify_span
from makad.core.cjk import index_text
from makad.core.types import Event, EventType, RefResult, SessionInfo
from makad.errors import NotFound

EVENT_COLUMNS: Final = "session_id, seq, ts, type, text, tool_call_id, tool_name, meta, tokens, hash"
E_EVENT_COLUMNS: Final = ", ".join(f"e.{c.strip()}" for c in EVENT_COLUMNS.split(","))
SESSION_COLUMNS: Final = "session_id, title, created_at, closed_at, event_count, last_seq, last_hash"


def session_row(conn: sqlite3.Connection, session_id: str) -> tuple[Any, ...]:
    row = conn.execute(
        f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return found_session(row, session_id)


def found_session(row: tuple[Any, ...] | None, session_id: str) -> tuple[Any, ...]:
    """A ``sessions`` row (``SESSION_COLUMNS``) that was looked up; ``NotFound`` for none."""
    if row is None:
        raise NotFound("no such session", sessionId=session_id)
    return row


def session_info(row: tuple[Any, ...]) -> SessionInfo:
    return SessionInfo(
        session_id=row[0],
        title=row[1],
        created_at=row[2],
        closed_at=row[3],
        event_count=row[4],
        last_seq=row[5],
        last_hash=row[6],
    )


# The first event id whose index text was made bounded (``index_text(bounded=True)``):
# rows of a ledger written before that were indexed whole, and removing one from the
# contentless index replays the tokens it was indexed with.
BOUNDED_FROM_KEY = "index_bounded_from"


def search_body(event: Event, *, bounded: bool = True) -> str:
    text = event.text if event.tool_name is None else f"{event.text}\n{event.tool_name}"
    return index_text(text, bounded=bounded)


def bounded_from(conn: sqlite3.Connection) -> int | float:
    """The first event id indexed bounded (none, on a ledger not opened since it was kept)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (BOUNDED_FROM_KEY,)).fetchone()
    return math.inf if row is None else int(row[0])


def event_values(event: Event) -> tuple[Any, ...]:
    meta = None if event.meta is None else msgspec.json.encode(event.meta).decode()
    return (
        event.session_id,
        event.seq,
        event.ts,
        event.type,
        event.text,
        event.tool_call_id,
        event.tool_name,
        meta,
        event.tokens,
        event.hash,
    )


def event_row(row: Sequence[Any]) -> Event:
    """An Event from ``(anything, *EVENT_COLUMNS)``.

    SQLite keeps whatever storage class a record's header names, so a damaged page can
    hand back an int where text was written (or bytes, or NULL). Such values are coerced
    here rather than trusted; the hash check then marks the event unverified.
    """
    row = row if _well_typed(row) else _coerced(row)
    meta: dict[str, str] | None = None
    if row[8] is not None:
        with contextlib.suppress(msgspec.DecodeError, msgspec.ValidationError):
            meta = msgspec.json.decode(row[8], type=dict[str, str])
    return Event(
        session_id=row[1],
        seq=row[2],
        ts=row[3],
        type=cast(EventType, row[4]),
        text=row[5],
        tool_call_id=row[6],
        tool_name=row[7],
        meta=meta,
        tokens=row[9],
        hash=row[10],
    )


_EVENT_TYPES: Final = frozenset(get_args(EventType))
# Expected Python type of each of EVENT_COLUMNS (index 1..10 of an event row).
_OPTIONAL_TEXT: Final = (str, type(None))
_EVENT_ROW_TYPES: Final[tuple[type | tuple[type, ...], ...]] = (
    str,
    int,
    int,
    str,
    str,
    _OPTIONAL_TEXT,
    _OPTIONAL_TEXT,
    _OPTIONAL_TEXT,
    int,
    str,
)


def _well_typed(row: Sequence[Any]) -> bool:
    # Exact types, spelled out: this runs for every event read (a thousand per
    # build_context), and the generic isinstance loop cost more than the row itself.
    # sqlite3 hands back exactly str, int, float, bytes or None, so ``type() is`` is
    # isinstance here.
    _, sid, seq, ts, kind, text, call_id, tool, meta, tokens, digest = row
    return (
        type(sid) is str
        and type(seq) is int
        and type(ts) is int
        and type(kind) is str
        and kind in _EVENT_TYPES
        and type(text) is str
        and (call_id is None or type(call_id) is str)
        and (tool is None or type(tool) is str)
        and (meta is None or type(meta) is str)
        and type(tokens) is int
        and type(digest) is str
    )


def _as_text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return "" if value is None else str(value)


def _as_int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return 0


def _coerced(row: Sequence[Any]) -> tuple[Any, ...]:
    """The row with every value of the wrong storage class turned into the right type."""
    out: list[Any] = [row[0]]
    for value, kind in zip(row[1:11], _EVENT_ROW_TYPES, strict=True):
        if isinstance(value, kind):
            out.append(value)
        elif kind is int:
            out.append(_as_int(value))
        elif isinstance(kind, tuple):  # optional text: keep NULL, coerce the rest
            out.append(None if value is None else _as_text(value))
        else:
            out.append(_as_text(value))
    if out[4] not in _EVENT_TYPES:
        out[4] = "system"
    return tuple(out)


def span_events(conn: sqlite3.Connection, spans: Sequence[tuple[str, int, int]]) -> list[Event]:
    """Events of ``(session_id, first_seq, last_seq)`` ranges, in one statement for any count."""
    rows = conn.execute(
        "WITH s(sid, lo, hi) AS (SELECT json_extract(value, '$[0]'),"
        " json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?))"
        f" SELECT 0, {E_EVENT_COLUMNS} FROM s CROSS JOIN events AS e"
        " ON e.session_id = s.sid AND e.seq BETWEEN s.lo AND s.hi",
        (msgspec.json.encode(list(spans)),),
    ).fetchall()
    return [event_row(row) for row in rows]


def retrieve_span(conn: sqlite3.Connection, span: tuple[str, str, int, int]) -> RefResult:
    _, session_id, first, last = span
    # The head, and the id a renamed session's early events were hashed with (most have none).
    head = conn.execute(
        "SELECT s.last_seq, s.last_hash, c.hashed_id, c.through_seq FROM sessions AS s"
        " LEFT JOIN session_chain_ids AS c USING (session_id) WHERE s.session_id = ?",
        (session_id,),
    ).fetchone()
    rows = conn.execute(
        f"SELECT 0, {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
        (session_id, first - 1, last + 1),
    ).fetchall()
    by_seq = {event.seq: event for event in map(event_row, rows)}
    return verify_span(
        span,
        by_seq,
        None if head is None else (int(head[0]), str(head[1])),
        None if head is None or head[2] is None else (str(head[2]), int(head[3])),
    )


def reindex_events(conn: sqlite3.Connection) -> None:
    """Drop and re-derive every row of the contentless event index."""
    conn.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
    cursor = conn.execute(f"SELECT id, {EVENT_COLUMNS} FROM events ORDER BY id")
    while batch := cursor.fetchmany(5_000):
        conn.executemany(
            "INSERT INTO events_fts (rowid, body) VALUES (?, ?)",
            [(row[0], search_body(event_row(row))) for row in batch],
        )
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '0')", (BOUNDED_FROM_KEY,))
