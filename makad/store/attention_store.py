"""Behaviors and attention, kept in the workspace ledger (schema step ``_ATTENTION``).

- ``behaviors``: the records derived from each session (``makad.core.behaviors``);
- ``behavior_offsets``: per session, the last seq the records have read and the open
  segment (``Carry``) — written in the same transaction as the records they cover
  (``commit_step``), so a crash at any point repeats nothing and skips nothing;
- ``attention_state``: the workspace's attention state last derived
  (``makad.core.attention``), read by ``get_attention`` and ``build_context``;
- ``retracted_text``: digests of memory text the user deleted or corrected
  (``makad.core.attention.retracted_digests``), never the text itself.

A session's rows go with ``delete_session`` (``makad.store.ledger.sessions``), and the derived
state with them, in its transaction; ``purge`` drops everything derived (the setting
``attentionEnabled`` off).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import msgspec

from makad.core.attention import AttentionState, Rejected, without_sessions
from makad.core.behaviors import Behavior, Carry

if TYPE_CHECKING:
    from makad.store.ledger import Ledger

STATE_KEY: Final = "state"
MAX_RECORDS: Final = 300
# At most this many of one session's newest records are read: one very long session (an
# agent's day in one connection) leaves room for the others' threads and failures.
MAX_RECORDS_PER_SESSION: Final = 20
# How many of the newest records are looked at to choose them (the bound on the work).
RECORDS_SCANNED: Final = 5_000
MAX_REJECTIONS: Final = 20
MAX_RETRACTED: Final = 50_000

_carry = msgspec.json.Decoder(Carry)
_behavior = msgspec.json.Decoder(Behavior)
_state = msgspec.json.Decoder(AttentionState)
_encode = msgspec.json.encode


def offset(ledger: Ledger, session_id: str) -> tuple[int, Carry]:
    """(the last seq the session's records have read, the open segment)."""
    with ledger.snapshot() as conn:
        row = conn.execute(
            "SELECT to_seq, carry FROM behavior_offsets WHERE session_id = ?", (session_id,)
        ).fetchone()
    if row is None:
        return 0, Carry()
    return int(row[0]), _carry.decode(bytes(row[1]))


def commit_step(
    ledger: Ledger,
    session_id: str,
    expected: int,
    records: Iterable[Behavior],
    to_seq: int,
    carry: Carry,
    now: int,
) -> bool:
    """In one transaction: the records, the new offset and the open segment. False (and
    nothing written) when the session is gone or another step moved the offset."""
    with ledger.transaction() as conn:
        if conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone() is None:
            return False
        row = conn.execute(
            "SELECT to_seq FROM behavior_offsets WHERE session_id = ?", (session_id,)
        ).fetchone()
        if (0 if row is None else int(row[0])) != expected:
            return False
        conn.executemany(
            "INSERT INTO behaviors (session_id, from_seq, to_seq, ended_at, record) VALUES (?, ?, ?, ?, ?)",
            [(session_id, r.from_seq, r.to_seq, r.ended_at, _encode(r)) for r in records],
        )
        conn.execute(
            "INSERT OR REPLACE INTO behavior_offsets (session_id, to_seq, carry, updated_at)"
            " VALUES (?, ?, ?, ?)",
            (session_id, to_seq, _encode(carry), now),
        )
    return True


DUE_PAGE = 100


def due_sessions(ledger: Ledger, idle_before: int, limit: int = DUE_PAGE) -> list[tuple[str, int, bool]]:
    """Sessions with events the records have not read, closed or idle since before
    ``idle_before`` (ms): (session id, last seq, closed)."""
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT s.session_id, s.last_seq, s.closed_at IS NOT NULL FROM sessions AS s"
            " LEFT JOIN behavior_offsets AS o ON o.session_id = s.session_id"
            " WHERE s.last_seq > coalesce(o.to_seq, 0) AND (s.closed_at IS NOT NULL OR"
            "  (SELECT ts FROM events AS e WHERE e.session_id = s.session_id AND e.seq = s.last_seq)"
            "   < ?)"
            " LIMIT ?",
            (idle_before, limit),
        ).fetchall()
    return [(str(r[0]), int(r[1]), bool(r[2])) for r in rows]


def next_idle_ts(ledger: Ledger) -> int | None:
    """The earliest last-event time of an open session with events the records have not
    read (it is due ``idle_ms`` after that), or None when there is none."""
    with ledger.snapshot() as conn:
        row = conn.execute(
            "SELECT min(e.ts) FROM sessions AS s"
            " LEFT JOIN behavior_offsets AS o ON o.session_id = s.session_id"
            " JOIN events AS e ON e.session_id = s.session_id AND e.seq = s.last_seq"
            " WHERE s.last_seq > coalesce(o.to_seq, 0) AND s.closed_at IS NULL"
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def records(ledger: Ledger, limit: int = MAX_RECORDS) -> tuple[list[Behavior], int]:
    """The newest records (by when they ended), at most ``MAX_RECORDS_PER_SESSION`` of a
    session, oldest first, and the newest record's id. The newest ``RECORDS_SCANNED`` are
    looked at, newest first, until ``limit`` are chosen."""
    chosen: list[int] = []
    per_session: Counter[str] = Counter()
    with ledger.snapshot() as conn:
        cursor = conn.execute(
            "SELECT id, session_id FROM behaviors ORDER BY ended_at DESC, id DESC LIMIT ?",
            (RECORDS_SCANNED,),
        )
        for record_id, session_id in cursor:
            per_session[session_id] += 1
            if per_session[session_id] <= MAX_RECORDS_PER_SESSION:
                chosen.append(int(record_id))
                if len(chosen) >= limit:
                    break
        cursor.close()
        marks = ",".join("?" * len(chosen))  # at most ``limit`` (300) of them
        rows = (
            conn.execute(f"SELECT id, record FROM behaviors WHERE id IN ({marks})", chosen) if chosen else []
        )
        found = {int(row[0]): bytes(row[1]) for row in rows}
        upto = conn.execute("SELECT coalesce(max(id), 0) FROM behaviors").fetchone()[0]
    return [_behavior.decode(found[i]) for i in reversed(chosen) if i in found], int(upto)


def newest_record(ledger: Ledger) -> int:
    """The newest record's id (0: none): a state derived before it is out of date."""
    with ledger.snapshot() as conn:
        return int(conn.execute("SELECT coalesce(max(id), 0) FROM behaviors").fetchone()[0])


def session_records(ledger: Ledger, session_id: str) -> list[Behavior]:
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT record FROM behaviors WHERE session_id = ? ORDER BY from_seq", (session_id,)
        ).fetchall()
    return [_behavior.decode(bytes(r[0])) for r in rows]


def rejections(ledger: Ledger, since: int) -> list[Rejected]:
    """Proposals rejected since ``since`` (ms), newest first, with their titles when known."""
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT r.proposal_id, r.reason, r.ts, (SELECT m.data FROM memory_events AS m"
            "  WHERE m.proposal_id = r.proposal_id AND m.action = 'rejected' ORDER BY m.id DESC LIMIT 1)"
            " FROM rejections AS r WHERE r.ts >= ? AND r.proposal_id IS NOT NULL"
            " ORDER BY r.ts DESC LIMIT ?",
            (since, MAX_REJECTIONS),
        ).fetchall()
    out = []
    for proposal_id, reason, ts, data in rows:
        decoded: dict[str, Any] = msgspec.json.decode(data) if data else {}
        title = decoded.get("title") if isinstance(decoded, dict) else None
        out.append(
            Rejected(
                proposal_id=str(proposal_id),
                title=title if isinstance(title, str) else "",
                reason=str(reason or ""),
                at=int(ts),
            )
        )
    return out


def save_state(ledger: Ledger, state: AttentionState) -> AttentionState:
    """Store the state, without lines citing a session deleted meanwhile (checked in the
    same transaction); returns what was stored."""
    with ledger.transaction(relaxed=True) as conn:
        kept = _kept(conn, state)
        conn.execute(
            "INSERT OR REPLACE INTO attention_state (key, state, computed_at) VALUES (?, ?, ?)",
            (STATE_KEY, _encode(kept), kept.computed_at),
        )
    return kept


def unstored_state(ledger: Ledger, state: AttentionState) -> AttentionState:
    """The state as ``save_state`` would store it, when it cannot be stored (a full disk):
    without lines citing a deleted session or retracted text."""
    with ledger.snapshot() as conn:
        return _kept(conn, state)


def _kept(conn: sqlite3.Connection, state: AttentionState) -> AttentionState:
    cited = {ref.split(":")[1] for _, line in state.lines() for ref in line.refs if ref.startswith("event:")}
    gone = {sid for sid in cited if not _session_exists(conn, sid)}
    retracted = frozenset(str(r[0]) for r in conn.execute("SELECT digest FROM retracted_text"))
    return without_sessions(state, gone, retracted)


def _session_exists(conn: sqlite3.Connection, session_id: str) -> bool:
    return conn.execute("SELECT 1 FROM sessions WHERE session_id = ?", (session_id,)).fetchone() is not None


def load_state(ledger: Ledger) -> AttentionState | None:
    with ledger.snapshot() as conn:
        row = conn.execute("SELECT state FROM attention_state WHERE key = ?", (STATE_KEY,)).fetchone()
    return None if row is None else _state.decode(bytes(row[0]))


def purge(ledger: Ledger) -> None:
    """Drop everything derived: records, offsets, the state."""
    with ledger.transaction() as conn:
        conn.execute("DELETE FROM behaviors")
        conn.execute("DELETE FROM behavior_offsets")
        conn.execute("DELETE FROM attention_state")


def add_retracted(ledger: Ledger, digests: Iterable[str], now: int) -> None:
    rows = [(d, now) for d in digests]
    if not rows:
        return
    with ledger.transaction() as conn:
        conn.executemany("INSERT OR IGNORE INTO retracted_text (digest, ts) VALUES (?, ?)", rows)
        conn.execute(
            "DELETE FROM retracted_text WHERE digest IN (SELECT digest FROM retracted_text"
            " ORDER BY ts DESC LIMIT -1 OFFSET ?)",
            (MAX_RETRACTED,),
        )
        # What was derived before the retraction may say it: derived again without it.
        conn.execute("DELETE FROM attention_state")


def load_retracted(ledger: Ledger) -> frozenset[str]:
    with ledger.snapshot() as conn:
        rows = conn.execute("SELECT digest FROM retracted_text").fetchall()
    return frozenset(str(r[0]) for r in rows)


def first_call(ledger: Ledger, session_id: str) -> str | None:
    """The id of the session's first recorded build_context call, if any."""
    with ledger.snapshot() as conn:
        row = conn.execute(
            "SELECT call_id FROM manifest_calls WHERE session_id = ? ORDER BY id LIMIT 1", (session_id,)
        ).fetchone()
    return None if row is None else str(row[0])
