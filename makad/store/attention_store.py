"""Behaviors and attention, kept in the workspace ledger (schema step ``_ATTENTION``).

- ``behaviors``: the records derived from each session (``makad.core.behaviors``);
- ``behavior_offsets``: per session, the last seq the records have read and the open
  segment (``Carry``) — written in the same transaction as the records they cover
  (``commit_step``), so a crash at any point repeats nothing and skips nothing — and,
  while no later segment has begun, the last segment recorded (``Last``: its ``Carry``
  as it was cut, whether the session was closed and the working state's revision its
  records were made with). A close or a working state set after the cut, with no new
  event, makes that segment's records again (``remakes``, ``remake_step``): the same
  keys (session, first seq), replaced in one transaction with the new ``Last``, so a
  crash leaves the old records and their ``Last`` (made again by the next run) or the
  new ones — never both, never neither;
- ``attention_state``: the workspace's attention state last derived
  (``makad.core.attention``), read by ``get_attention`` and ``build_context``;
- ``retracted_text``: digests of memory text the user deleted or corrected
  (``makad.core.attention.retracted_digests``), never the text itself.

A session's rows go with ``delete_session`` (``makad.store.ledger.sessions``), and the derived
state with them, in its transaction; ``purge`` drops everything derived (the setting
``attentionEnabled`` off).
"""

from __future__ import annotations

import functools
import sqlite3
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, Literal

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
# How many sessions one round of the keeper extracts, or makes the last records of again.
DUE_PAGE: Final = 100

_carry = msgspec.json.Decoder(Carry)
_behavior = msgspec.json.Decoder(Behavior)
_state = msgspec.json.Decoder(AttentionState)
_encode = msgspec.json.encode


class Last(msgspec.Struct, frozen=True):
    """The last segment recorded of a session, while no later one has begun: its ``Carry``
    as it was cut, and what its records were made with (the session closed or not, the
    working state's revision)."""

    carry: Carry
    closed: bool
    revision: int


# ``commit_step``: the session's ``Last`` stays as it is (the step read no new segment).
KEEP: Final = "keep"


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
    last: Last | Literal["keep"] | None = KEEP,
) -> bool:
    """In one transaction: the records, the new offset, the open segment and the last
    segment recorded (``last``: None once a later one has begun; ``KEEP``: as it is).
    False (and nothing written) when the session is gone or another step moved the
    offset."""
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
            "INSERT INTO behavior_offsets (session_id, to_seq, carry, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (session_id) DO UPDATE SET to_seq = excluded.to_seq, carry = excluded.carry,"
            " updated_at = excluded.updated_at",
            (session_id, to_seq, _encode(carry), now),
        )
        if not isinstance(last, str):  # else KEEP
            _set_last(conn, session_id, last)
    return True


def _set_last(conn: sqlite3.Connection, session_id: str, last: Last | None) -> None:
    conn.execute(
        "UPDATE behavior_offsets SET segment = ?, made_closed = ?, made_revision = ? WHERE session_id = ?",
        (
            None if last is None else _encode(last.carry),
            int(last is not None and last.closed),
            0 if last is None else last.revision,
            session_id,
        ),
    )


def remakes(ledger: Ledger, limit: int = DUE_PAGE) -> list[str]:
    """Sessions whose last segment recorded must be made again: no event came after it,
    and the session was closed or its working state set since its records were made."""
    with ledger.snapshot() as conn:
        rows = conn.execute(
            "SELECT o.session_id FROM behavior_offsets AS o"
            " JOIN sessions AS s ON s.session_id = o.session_id"
            " LEFT JOIN working_state AS w ON w.session_id = o.session_id"
            " WHERE o.segment IS NOT NULL AND o.to_seq = s.last_seq"
            " AND ((s.closed_at IS NOT NULL AND NOT o.made_closed)"
            "  OR coalesce(w.revision, 0) != o.made_revision)"
            " LIMIT ?",
            (limit,),
        ).fetchall()
    return [str(r[0]) for r in rows]


def last_segment(ledger: Ledger, session_id: str) -> tuple[int, Last] | None:
    """(the last seq the session's records have read, its last segment recorded), or None
    when a later segment has begun (or none was recorded)."""
    with ledger.snapshot() as conn:
        row = conn.execute(
            "SELECT to_seq, segment, made_closed, made_revision FROM behavior_offsets WHERE session_id = ?",
            (session_id,),
        ).fetchone()
    if row is None or row[1] is None:
        return None
    return int(row[0]), Last(_carry.decode(bytes(row[1])), bool(row[2]), int(row[3]))


def remake_step(
    ledger: Ledger, session_id: str, expected: int, was: Last, records: list[Behavior], made: Last
) -> bool:
    """In one transaction: the records of the session's last segment replaced by
    ``records`` (the same keys: each record's session and first seq), with ``made`` what
    they were made with. A record that changed gets an id past every other, so that a
    state derived before it is seen out of date (``newest_record``). False (and nothing
    written) when the session is gone, an event was read since, or the segment's records
    were made again meanwhile; True when a record changed."""
    with ledger.transaction() as conn:
        row = conn.execute(
            "SELECT o.to_seq, o.made_closed, o.made_revision FROM behavior_offsets AS o"
            " JOIN sessions AS s ON s.session_id = o.session_id"
            " WHERE o.session_id = ? AND o.segment IS NOT NULL AND s.last_seq = o.to_seq",
            (session_id,),
        ).fetchone()
        if row is None or (int(row[0]), bool(row[1]), int(row[2])) != (expected, was.closed, was.revision):
            return False
        first = min((r.from_seq for r in records), default=expected + 1)
        stored = conn.execute(
            "SELECT from_seq, record FROM behaviors WHERE session_id = ? AND from_seq BETWEEN ? AND ?"
            " ORDER BY from_seq",
            (session_id, first, expected),
        ).fetchall()
        encoded = sorted(((r.from_seq, _encode(r)) for r in records), key=lambda fe: fe[0])
        changed = [(int(f), bytes(b)) for f, b in stored] != encoded
        if changed:
            top = int(conn.execute("SELECT coalesce(max(id), 0) FROM behaviors").fetchone()[0])
            conn.execute(
                "DELETE FROM behaviors WHERE session_id = ? AND from_seq BETWEEN ? AND ?",
                (session_id, first, expected),
            )
            conn.executemany(
                "INSERT INTO behaviors (id, session_id, from_seq, to_seq, ended_at, record)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (top + n, session_id, r.from_seq, r.to_seq, r.ended_at, _encode(r))
                    for n, r in enumerate(sorted(records, key=lambda r: r.from_seq), start=1)
                ],
            )
        _set_last(conn, session_id, made)
    return changed


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


def work_left(ledger: Ledger) -> bool:
    """Whether a session has events the records have not read, or a last segment to make
    again (``remakes``): what an earlier run of the daemon may have left to the keeper."""
    with ledger.snapshot() as conn:
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM sessions AS s"
            " LEFT JOIN behavior_offsets AS o ON o.session_id = s.session_id"
            " WHERE s.last_seq > coalesce(o.to_seq, 0))"
        ).fetchone()
    return bool(row and row[0]) or bool(remakes(ledger, limit=1))


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
        _insert_retracted(conn, rows)


def add_retracted_with_next_write(ledger: Ledger, digests: Iterable[str], now: int) -> None:
    """``add_retracted`` as part of the ledger's next write, whichever it is (the disk had no
    room for it now)."""
    rows = [(d, now) for d in digests]
    if rows:
        ledger.with_next_write(f"retracted:{now}:{id(rows)}", functools.partial(_insert_retracted, rows=rows))


def _insert_retracted(conn: sqlite3.Connection, rows: list[tuple[str, int]]) -> None:
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
