"""Sessions and their hash-chained events: open, close, forget, append, read, retrieve, verify.

Append-only: triggers refuse any UPDATE of an event and any DELETE other than
``delete_session``'s, which marks the session it is forgetting in ``meta``
inside its own transaction. Deleted content is overwritten on disk
(``secure_delete``), merged out of the search index, and the WAL is truncated.
Session ids and refs: ``makad.core.refs``; the chain: ``makad.core.chain``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import msgspec

from makad.core import chain
from makad.core.chain import MAX_APPEND_EVENTS, event_hash, first_bad_seq, prepare_event
from makad.core.refs import checked_session_id, new_session_id, parse_event_refs
from makad.core.types import AppendResult, Event, EventInput, RefResult, SessionInfo
from makad.errors import Conflict, InvalidParams, NotFound, TooLarge
from makad.store.ledger.base import LedgerBase, now_ms
from makad.store.ledger.episodes import tombstone_episodes
from makad.store.ledger.lineage import replayed, store_request
from makad.store.ledger.pack_state import SESSION_ROWS_DELETE
from makad.store.ledger.records import RequestRecord, Tombstone
from makad.store.ledger.renames import session_chained_as
from makad.store.ledger.rows import (
    EVENT_COLUMNS,
    SESSION_COLUMNS,
    bounded_from,
    event_row,
    event_values,
    found_session,
    reindex_events,
    retrieve_span,
    search_body,
    session_info,
    session_row,
    span_events,
)
from makad.store.ledger.turns import delete_manifest_calls

# What attention derived from a session (``makad.store.attention_store``) goes with it.
_DERIVED_ROWS_DELETE: Final = (
    "DELETE FROM behaviors WHERE session_id = ?",
    "DELETE FROM behavior_offsets WHERE session_id = ?",
    # What was derived from the session goes with it; it is derived again without it.
    "DELETE FROM attention_state WHERE ? IS NOT NULL",
)


class SessionsArea(LedgerBase):
    """Sessions and events (see the module docstring)."""

    def open_session(
        self, session_id: str | None = None, *, title: str | None = None, now: int | None = None
    ) -> SessionInfo:
        """Create a session, or reopen an existing one (a new title replaces the old).

        A deleted session's id is refused (``Conflict``, reason ``deleted``): its old
        ``event:`` refs must never name new events.
        """
        at = now_ms() if now is None else now
        sid = new_session_id(at) if session_id is None else checked_session_id(session_id)
        with self._writing() as conn:
            if conn.execute("SELECT 1 FROM tombstones WHERE session_id = ?", (sid,)).fetchone():
                raise Conflict("that session was deleted; open a new one", sessionId=sid, reason="deleted")
            conn.execute(
                "INSERT INTO sessions (session_id, title, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET closed_at = NULL,"
                " title = coalesce(excluded.title, title)",
                (sid, title, at),
            )
            return session_info(session_row(conn, sid))

    def get_session(self, session_id: str) -> SessionInfo:
        with self._reading() as conn:
            return session_info(session_row(conn, session_id))

    def last_seq(self, session_id: str) -> int:
        return self.get_session(session_id).last_seq

    def list_sessions(self, *, include_closed: bool = True) -> list[SessionInfo]:
        """Sessions, newest first."""
        where = "" if include_closed else " WHERE closed_at IS NULL"
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions{where} ORDER BY created_at DESC, session_id DESC"
            ).fetchall()
        return [session_info(row) for row in rows]

    def close_session(self, session_id: str, *, now: int | None = None) -> SessionInfo:
        """Mark a session closed (appends are refused until it is reopened); idempotent."""
        at = now_ms() if now is None else now
        with self._writing() as conn:
            session_row(conn, session_id)
            conn.execute(
                "UPDATE sessions SET closed_at = coalesce(closed_at, ?) WHERE session_id = ?",
                (at, session_id),
            )
            return session_info(session_row(conn, session_id))

    def delete_session(self, session_id: str, *, now: int | None = None) -> Tombstone:
        """The user's explicit forget: drop everything of the session, keep a tombstone."""
        at = now_ms() if now is None else now
        with self._writing() as conn:
            info = session_info(session_row(conn, session_id))
            rows = conn.execute(
                f"SELECT id, {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            events = [event_row(row) for row in rows]
            # The index is contentless: removing a row means replaying its tokens,
            # which only equal the indexed ones if the row is as it was appended.
            renamed = session_chained_as(conn, session_id)
            intact = first_bad_seq(events, info.last_seq, info.last_hash, renamed) is None
            if intact:
                since = bounded_from(conn)
                conn.executemany(
                    "INSERT INTO events_fts (events_fts, rowid, body) VALUES ('delete', ?, ?)",
                    [
                        (row[0], search_body(e, bounded=row[0] >= since))
                        for row, e in zip(rows, events, strict=True)
                    ],
                )
            conn.execute("INSERT INTO meta (key, value) VALUES ('forgetting', ?)", (session_id,))
            conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM meta WHERE key = 'forgetting'")
            if not intact:
                reindex_events(conn)
            delete_manifest_calls(conn, "SELECT id FROM manifest_calls WHERE session_id = ?", (session_id,))
            self._on_commit.append(lambda: self._shown_cache.forget(session_id))
            for statement in (
                *SESSION_ROWS_DELETE,
                *_DERIVED_ROWS_DELETE,
                "DELETE FROM working_state WHERE session_id = ?",
                "DELETE FROM manifest_shown WHERE session_id = ?",
                "DELETE FROM checkpoints WHERE session_id = ?",
                "DELETE FROM session_chain_ids WHERE session_id = ?",
                "DELETE FROM sessions WHERE session_id = ?",
            ):
                conn.execute(statement, (session_id,))
            tombstone_episodes(conn, session_id, at)
            tombstone = Tombstone(
                session_id=session_id,
                ts=at,
                event_count=info.event_count,
                last_hash=info.last_hash,
            )
            conn.execute(
                "INSERT INTO tombstones (session_id, ts, event_count, last_hash) VALUES (?, ?, ?, ?)",
                (session_id, at, info.event_count, info.last_hash),
            )
        self._purge_forgotten()
        return tombstone

    def list_tombstones(self) -> list[Tombstone]:
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT session_id, ts, event_count, last_hash FROM tombstones ORDER BY id"
            ).fetchall()
        return [Tombstone(session_id=r[0], ts=r[1], event_count=r[2], last_hash=r[3]) for r in rows]

    def append_events(
        self,
        session_id: str,
        events: Sequence[EventInput],
        *,
        expected_seq: int | None = None,
        request_id: str | None = None,
        redactions: int = 0,
        now: int | None = None,
    ) -> AppendResult:
        """Append events atomically; durable once this returns.

        ``expected_seq`` must equal the session's last seq (else ``Conflict`` with
        ``currentSeq``). A ``request_id`` seen before returns the first result
        and appends nothing; it is stored in the same transaction as the events.
        ``redactions`` (how many secrets the caller took out) is kept in the result.
        """
        call = AppendCall(session_id, events, expected_seq, request_id, redactions)
        return self._commit_append(prepare_append(call, now_ms() if now is None else now))

    def _commit_append(self, append: PreparedAppend) -> AppendResult:
        """One transaction for this append (``group_commit`` shares one among concurrent appends)."""
        with self._writing() as conn:
            bodies: list[tuple[int, str]] = []
            result = apply_append(conn, append, bodies)
            index_bodies(conn, bodies)
            return result

    def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """Events with seq > ``after_seq``, in order, at most ``limit`` of them."""
        with self._reading() as conn:
            session_row(conn, session_id)
            rows = conn.execute(
                f"SELECT 0, {EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (session_id, after_seq, -1 if limit is None else max(limit, 0)),
            ).fetchall()
        return [event_row(row) for row in rows]

    def read_event_spans(self, spans: Sequence[tuple[str, int, int]]) -> list[Event]:
        """Events of many ``(session_id, first_seq, last_seq)`` ranges in one query.

        The spans travel as one JSON parameter, so the statement text (and the
        connection's cache of prepared statements) is the same for any count.
        """
        if not spans:
            return []
        with self._reading() as conn:
            return span_events(conn, spans)

    def unverified(
        self, events: Sequence[Event], around: Mapping[tuple[str, int], Event] | None = None
    ) -> set[tuple[str, int]]:
        """``(session_id, seq)`` of the given stored events that do not verify against the
        hash chain (``makad.core.chain``): reads their heads and the rows around them,
        except those the caller already read (``around``, e.g. recall's neighbours)."""
        if not events:
            return set()
        known = around or {}
        edges: list[Event] = []
        missing: list[tuple[str, int, int]] = []
        for span in chain.edge_spans(events):
            found = known.get(span[:2])
            if found is None:
                missing.append(span)
            else:
                edges.append(found)
        with self._reading() as conn:
            edges += span_events(conn, missing) if missing else []
            sids = sorted({event.session_id for event in events})
            heads: dict[str, chain.Head] = {}
            renamed: dict[str, chain.ChainedAs] = {}
            for sid, last_seq, last_hash, hashed_id, through_seq in conn.execute(
                "SELECT s.session_id, s.last_seq, s.last_hash, c.hashed_id, c.through_seq"
                " FROM sessions AS s LEFT JOIN session_chain_ids AS c USING (session_id)"
                " WHERE s.session_id IN (SELECT value FROM json_each(?))",
                (msgspec.json.encode(sids),),
            ):
                heads[str(sid)] = (int(last_seq), str(last_hash))
                if hashed_id is not None:
                    renamed[str(sid)] = (str(hashed_id), int(through_seq))
        return chain.unverified(events, edges, heads, renamed)

    def mark_unverified(self, events: Sequence[Event]) -> int:
        """Set ``verified = False`` on the events that do not verify; how many."""
        bad = self.unverified(events)
        for event in events:
            if (event.session_id, event.seq) in bad:
                event.verified = False
        return len(bad)

    def retrieve(self, refs: Sequence[str]) -> list[RefResult]:
        """The exact events each ``event:`` ref names, verified against the chain (see
        ``RefResult``): a row changed behind the store's back is reported, never hidden."""
        spans = parse_event_refs(refs)
        with self._reading() as conn:
            results = [retrieve_span(conn, span) for span in spans]
        for result in results:
            chain.mark_span(result)
        return results

    def verify_chain(self, session_id: str) -> tuple[bool, int | None]:
        """Walk a session's chain: ``(True, None)`` or ``(False, first bad seq)``."""
        with self._reading() as conn:
            info = session_info(session_row(conn, session_id))
            renamed = session_chained_as(conn, session_id)
            cursor = conn.execute(
                f"SELECT 0, {EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
            bad = first_bad_seq((event_row(row) for row in cursor), info.last_seq, info.last_hash, renamed)
        return bad is None, bad


@dataclass(frozen=True)
class AppendCall:
    """One ``append_events`` call as it arrives (the events already redacted)."""

    session_id: str
    events: Sequence[EventInput]
    expected_seq: int | None = None
    request_id: str | None = None
    redactions: int = 0


def prepare_append(call: AppendCall, at: int) -> PreparedAppend:
    """Check a call's size and build its events and search bodies (no IO)."""
    if not call.events:
        raise InvalidParams("append_events needs at least one event")
    if len(call.events) > MAX_APPEND_EVENTS:
        raise TooLarge("too many events in one call", limit=MAX_APPEND_EVENTS, count=len(call.events))
    drafts = [(e := prepare_event(new, at), search_body(e)) for new in call.events]
    return PreparedAppend(call.session_id, drafts, call.expected_seq, call.request_id, call.redactions, at)


@dataclass(frozen=True)
class PreparedAppend:
    """An ``append_events`` call checked and its events hashed-to-be, ready for a transaction."""

    session_id: str
    drafts: list[tuple[Event, str]]  # each event and its search body
    expected_seq: int | None
    request_id: str | None
    redactions: int
    at: int


def index_bodies(conn: sqlite3.Connection, bodies: Sequence[tuple[int, str]]) -> None:
    """Add events' search bodies (rowid = event id) to the full-text index."""
    conn.executemany("INSERT INTO events_fts (rowid, body) VALUES (?, ?)", bodies)


INSERT_EVENTS: Final = f"INSERT INTO events (id, {EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
UPDATE_HEAD: Final = (
    "UPDATE sessions SET last_seq = ?, last_hash = ?, event_count = event_count + ? WHERE session_id = ?"
)


# The refusals an append makes before writing anything of its own.
REFUSALS: Final = (Conflict, NotFound)


def apply_append(
    conn: sqlite3.Connection, append: PreparedAppend, bodies: list[tuple[int, str]]
) -> AppendResult:
    """Run one append inside the caller's write transaction (nothing is committed here).

    Refusals (``Conflict``: closed, moved on; ``NotFound``) are raised before anything
    of this append is written. Its events' search bodies are added to ``bodies``: the
    caller indexes them (``index_bodies``) before it commits — a group indexes all of
    its appends at once (``group_commit``)."""
    ((result, error),) = apply_appends(conn, [append], bodies)
    if error is not None:
        raise error
    assert result is not None
    return result


_HEADS: Final = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE session_id IN (SELECT value FROM json_each(?))"
_STORED_REQUESTS: Final = (
    "SELECT request_id, method, result FROM requests WHERE request_id IN (SELECT value FROM json_each(?))"
)


def apply_appends(
    conn: sqlite3.Connection, appends: Sequence[PreparedAppend], bodies: list[tuple[int, str]]
) -> list[tuple[AppendResult | None, BaseException | None]]:
    """Appends in one go, each judged after the ones before it: the heads of their
    sessions (and their request records) are read once, each append is checked and
    chained in Python against the heads as the appends before it left them, and the rows
    of the accepted ones are written together — a handful of statements a group instead
    of several an append. A refused append writes nothing, so it needs no savepoint. Any
    other error leaves the transaction to be rolled back."""
    sids = list(dict.fromkeys(append.session_id for append in appends))
    heads = {row[0]: row for row in conn.execute(_HEADS, (msgspec.json.encode(sids),))}
    request_ids = [append.request_id for append in appends if append.request_id is not None]
    stored: dict[str, tuple[Any, Any]] = {}
    if request_ids:
        for request_id, method, blob in conn.execute(_STORED_REQUESTS, (msgspec.json.encode(request_ids),)):
            stored[request_id] = (method, blob)
    (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM events").fetchone()
    moved: dict[str, tuple[int, str, int]] = {}  # session → its new last_seq, last_hash, events added
    rows: list[tuple[Any, ...]] = []
    requests: list[RequestRecord] = []
    outcomes: list[tuple[AppendResult | None, BaseException | None]] = []
    for append in appends:
        session_id, request_id = append.session_id, append.request_id
        try:
            if request_id is not None and request_id in stored:
                method, blob = stored[request_id]
                outcomes.append((replayed(method, blob, request_id, "append_events", AppendResult), None))
                continue
            last_seq, last_hash, closed_at = session_head(found_session(heads.get(session_id), session_id))
            added = 0
            if session_id in moved:
                last_seq, last_hash, added = moved[session_id]
            admit(append, last_seq, closed_at)
        except REFUSALS as exc:
            outcomes.append((None, exc))
            continue
        link = chain_events(append, next_id, last_seq, last_hash, rows, bodies)
        next_id += len(append.drafts)
        result = appended(append, last_seq)
        moved[session_id] = (result.last_seq, link, added + len(append.drafts))
        if request_id is not None:
            record = request_record(request_id, result)
            stored[request_id] = (record.method, record.result)
            requests.append(record)
        outcomes.append((result, None))
    if rows:
        conn.executemany(INSERT_EVENTS, rows)
        conn.executemany(UPDATE_HEAD, [(seq, link, n, sid) for sid, (seq, link, n) in moved.items()])
    at = appends[0].at
    for record in requests:
        store_request(conn, record, at)
    return outcomes


def session_head(row: tuple[Any, ...]) -> tuple[int, str, Any]:
    """A ``sessions`` row's ``(last_seq, last_hash, closed_at)``."""
    return int(row[5]), str(row[6]), row[3]


def admit(append: PreparedAppend, last_seq: int, closed_at: Any) -> None:
    """Refuse an append to a closed session, or one whose ``expectedSeq`` is not ``last_seq``."""
    if closed_at is not None:
        raise Conflict("the session is closed", sessionId=append.session_id, reason="closed")
    if append.expected_seq is not None and append.expected_seq != last_seq:
        raise Conflict(
            "the session has moved on",
            sessionId=append.session_id,
            expectedSeq=append.expected_seq,
            currentSeq=last_seq,
        )


def chain_events(
    append: PreparedAppend,
    next_id: int,
    last_seq: int,
    last_hash: str,
    rows: list[tuple[Any, ...]],
    bodies: list[tuple[int, str]],
) -> str:
    """Give the append's events their ids (from ``next_id``), seqs and hashes after the
    session's head; add their rows and search bodies; the new head's hash."""
    session_id, link = append.session_id, last_hash
    for offset, (event, body) in enumerate(append.drafts):
        event.session_id = session_id
        event.seq = last_seq + 1 + offset
        link = event.hash = event_hash(link, event)
        rows.append((next_id + offset, *event_values(event)))
        bodies.append((next_id + offset, body))
    return link


def appended(append: PreparedAppend, last_seq: int) -> AppendResult:
    """The result of an append stored after ``last_seq``."""
    return AppendResult(
        first_seq=last_seq + 1, last_seq=last_seq + len(append.drafts), redactions=append.redactions
    )


def request_record(request_id: str, result: AppendResult) -> RequestRecord:
    return RequestRecord(request_id=request_id, method="append_events", result=msgspec.json.encode(result))
