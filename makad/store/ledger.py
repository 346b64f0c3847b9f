"""The workspace ledger: sessions, their hash-chained events, and the daemon's own tables.

A synchronous IO shell over one SQLite file per workspace; the async service
calls it from worker threads. The schema, records and hash chain are defined in
``ledger_schema``; CJK-aware search text in ``makad.core.cjk``.

Threads: one writer connection (every write is one ``BEGIN IMMEDIATE``
transaction under a lock) and one reader connection with its own lock. In WAL
mode the reader sees the last committed state, so a slow search never holds up
an append, and a write never blocks a read.

Durability: WAL with ``synchronous=FULL``. ``NORMAL`` already survives
``kill -9`` of the daemon (a committed transaction is in the WAL file and the OS
page cache); ``FULL`` also fsyncs the WAL at every commit, so an acknowledged
append survives power loss too. Measured on the development VM (2 vCPU,
virtio disk, ~200-character events), idle / with a neighbour loading the disk:
100-event batches 26k / 16k events/s with FULL vs 30k / 23k with NORMAL;
one-event transactions 2.9k / 0.3k per second vs 7.5k / 3.6k. An agent appends
a turn at a time, at most a few per second, so FULL's fsync per commit is
affordable; ``synchronous="NORMAL"`` is a constructor option for bulk imports.

Append-only: triggers refuse any UPDATE of an event and any DELETE other than
``delete_session``'s, which marks the session it is forgetting in ``meta``
inside its own transaction. Deleted content is overwritten on disk
(``secure_delete``), merged out of the search index, and the WAL is truncated.

Session ids we mint are time-sortable: 12 hex digits of creation time in
milliseconds then 20 random hex digits (32 in all, like a uuid4 hex, but the
lexicographic order is the creation order). Client-chosen ids must match
``[A-Za-z0-9][A-Za-z0-9._-]{0,127}`` so ``event:<sessionId>:<seq>`` stays
unambiguous.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, TypeVar, cast, get_args

import msgspec

from makad.core.cjk import index_text, match_expression, query_terms
from makad.core.redaction import redact_tree
from makad.core.session_notes import make_room_for_client_notes
from makad.core.tokens import estimate_tokens
from makad.core.types import (
    MAX_NOTE_SECTION_TOKENS,
    MAX_NOTES_TOKENS,
    NOTE_SECTIONS,
    Checkpoint,
    Coverage,
    Entry,
    Event,
    EventType,
    WorkingState,
)
from makad.errors import Conflict, InvalidParams, IOFailure, NotFound, TooLarge
from makad.store import chain, pack_state
from makad.store.ledger_recovery import (
    LedgerCorrupt,
    LedgerIndexDamaged,
    LedgerReset,
    LedgerUndecodable,
    check_header,
    check_schema,
    failure,
    lossy_text,
    move_aside,
    open_failure,
    recovering,
    revision_of,
    schema_statement,
    stored_revision,
)
from makad.store.ledger_schema import (
    MAX_APPEND_EVENTS,
    MEMORY_ACTIONS,
    MEMORY_ACTORS,
    SEARCH_TEXT_VERSION,
    AddedEpisode,
    AppendResult,
    ConsolidationMark,
    ConsolidationState,
    EpisodeRecord,
    Intent,
    Manifest,
    ManifestItem,
    MemoryEvent,
    NewEpisode,
    NewEvent,
    RefResult,
    Rejection,
    RequestRecord,
    SearchHit,
    SessionInfo,
    ShownMemory,
    StoredRequest,
    Tombstone,
    checked_session_id,
    episode_summary_key,
    event_hash,
    first_bad_seq,
    migrate,
    new_session_id,
    parse_event_refs,
    prepare_event,
    verify_span,
)

MAX_SEARCH_LIMIT: Final = 1_000
SEARCH_WINDOW: Final = 10_000
# SQLite's page caches: up to this much per connection (two per workspace), and
# all of SQLite's memory in the process held near the soft limit (SQLite then
# recycles cache pages instead of growing). Without the process-wide limit the
# caches grew with every workspace opened and every MB its ledger gained; reads
# past the cache come from the OS page cache, which build_context barely notices
# (measured at 100,000 events).
CACHE_KIB_PER_CONNECTION: Final = 8192
SQLITE_SOFT_HEAP_LIMIT_BYTES: Final = 8 << 20
# Manifests of a session's earlier calls beyond these are dropped (what was shown is kept).
MANIFEST_CALLS_KEPT: Final = 64
# Query pruning (see Ledger._selective_match): below this size every term is ranked.
SMALL_LEDGER_EVENTS: Final = 20_000
COMMON_TERM_SHARE: Final = 0.05
# In a small ledger a share means a handful of events: no term found in fewer is common.
COMMON_TERM_FLOOR: Final = 50
MAX_RANKED_TERMS: Final = 8
DF_CACHE_SIZE: Final = 50_000
_MAX_ROWID: Final = 2**63 - 1
MAX_GOALS: Final = 8
MAX_OPEN_THREADS: Final = 12
MAX_DECISIONS: Final = 20


_EVENT_COLUMNS: Final = "session_id, seq, ts, type, text, tool_call_id, tool_name, meta, tokens, hash"
_E_EVENT_COLUMNS: Final = ", ".join(f"e.{c.strip()}" for c in _EVENT_COLUMNS.split(","))
_SESSION_COLUMNS: Final = "session_id, title, created_at, closed_at, event_count, last_seq, last_hash"
_CHECKPOINT_COLUMNS: Final = (
    "checkpoint_id, session_id, boundary_seq, from_seq, to_seq, covered_hash, summary,"
    " summary_tokens, preserved_from_seq, mode, reason, created_at"
)
_MEMORY_EVENT_COLUMNS: Final = "id, ts, action, actor, entry_id, proposal_id, data"
_INTENT_COLUMNS: Final = "id, kind, payload, state, ts, finished_at"

Synchronous = Literal["FULL", "NORMAL"]
_T = TypeVar("_T")


def now_ms() -> int:
    """Wall-clock time in Unix milliseconds."""
    return time.time_ns() // 1_000_000


@recovering(skip=frozenset({"close"}))
class Ledger:
    """One workspace's SQLite ledger. Thread-safe; every method is blocking IO.

    A corrupt database is moved aside and replaced by a fresh one, at open or at
    the first call that meets the damage (``makad.store.ledger_recovery``);
    ``resets`` lists those, ``generation`` counts them.
    ``before_first_write`` runs (under the write lock) before the first write
    until it returns True: the workspace binds its identity there.
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "FULL",
        before_first_write: Callable[[], bool] | None = None,
    ) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._df_cache: dict[str, tuple[int, int]] = {}
        self._synchronous = synchronous
        self._before_first_write = before_first_write
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self.generation = 0
        # Bumped when a damaged search index was rebuilt (the memory index is then empty).
        self.index_generation = 0
        self.resets: list[LedgerReset] = []
        try:
            self._open()
        except LedgerCorrupt:
            self._replace("corrupt_at_open", stored_revision(path))
        if self._meta("search_text_version") != SEARCH_TEXT_VERSION:
            self.rebuild_search_index()

    def _open(self) -> None:
        """Open (creating) the database at ``path``; ``LedgerCorrupt`` when it is unusable."""
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        st = os.stat(self.path)
        self._identity = (st.st_dev, st.st_ino)
        opened: list[sqlite3.Connection] = []
        try:
            check_header(self.path)
            opened.append(_connect(self.path, self._synchronous))
            migrate(opened[0])
            check_schema(opened[0])
            opened.append(_connect(self.path, self._synchronous))
        except Exception as exc:
            # Nothing is written yet: whatever fails here that is not the environment
            # (open_failure tells them apart) means the file cannot serve as a ledger —
            # including a damaged record that decodes to the wrong type.
            for conn in opened:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            raise open_failure(exc) from exc
        self._writer, self._reader = opened

    def recover(self, found: IOFailure, generation: int) -> None:
        """Called by a method that met ``found`` (see ``recovering``): reset or decode lossily."""
        with self._write_lock, self._read_lock:
            if generation != self.generation:
                return  # a concurrent call has already reset the ledger
            if isinstance(found, LedgerUndecodable):
                for conn in (self._writer, self._reader):
                    if conn is not None:
                        conn.text_factory = lossy_text
                return
            if isinstance(found, LedgerIndexDamaged) and self._rebuild_indexes():
                return
            self._replace("corrupt", revision_of(self._reader))

    def _rebuild_indexes(self) -> bool:
        """Drop and re-create both full-text indexes from the events (locks held); the
        memory index comes back empty and ``index_generation`` tells the service to fill
        it again. False when that fails too: the file is then damaged beyond the index."""
        conn = _live(self._writer)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for name in ("events_fts", "memory_fts"):
                conn.execute(f"DROP TABLE IF EXISTS {name}")
                conn.execute(schema_statement(name))
            _reindex_events(conn)
            conn.execute("COMMIT")
        except sqlite3.Error:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            return False
        self.index_generation += 1
        return True

    def _replace(self, cause: str, previous_revision: int | None) -> None:
        """Move the damaged files aside (kept) and open a fresh database (locks held or init)."""
        for conn in (self._reader, self._writer):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        self._reader = self._writer = None
        at = now_ms()
        try:
            moved = move_aside(self.path, at)
        except OSError as exc:
            raise IOFailure("the corrupt ledger could not be moved aside") from exc
        self._open()
        self._df_cache.clear()
        self.generation += 1
        self.resets.append(
            LedgerReset(at=at, moved_to=moved.name, cause=cause, previous_revision=previous_revision)
        )

    def close(self) -> None:
        """Close both connections; later calls fail with IOFailure."""
        with self._write_lock, self._read_lock:
            for conn in (self._reader, self._writer):
                if conn is not None:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("PRAGMA optimize")
                    conn.close()
            self._reader = self._writer = None

    # ------------------------------------------------------------------ sessions

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
            return _session_info(_session_row(conn, sid))

    def get_session(self, session_id: str) -> SessionInfo:
        with self._reading() as conn:
            return _session_info(_session_row(conn, session_id))

    def list_sessions(self, *, include_closed: bool = True) -> list[SessionInfo]:
        """Sessions, newest first."""
        where = "" if include_closed else " WHERE closed_at IS NULL"
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions{where} ORDER BY created_at DESC, session_id DESC"
            ).fetchall()
        return [_session_info(row) for row in rows]

    def close_session(self, session_id: str, *, now: int | None = None) -> SessionInfo:
        """Mark a session closed (appends are refused until it is reopened); idempotent."""
        at = now_ms() if now is None else now
        with self._writing() as conn:
            _session_row(conn, session_id)
            conn.execute(
                "UPDATE sessions SET closed_at = coalesce(closed_at, ?) WHERE session_id = ?",
                (at, session_id),
            )
            return _session_info(_session_row(conn, session_id))

    def delete_session(self, session_id: str, *, now: int | None = None) -> Tombstone:
        """The user's explicit forget: drop everything of the session, keep a tombstone."""
        at = now_ms() if now is None else now
        with self._writing() as conn:
            info = _session_info(_session_row(conn, session_id))
            rows = conn.execute(
                f"SELECT id, {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            ).fetchall()
            events = [_event(row) for row in rows]
            # The index is contentless: removing a row means replaying its tokens,
            # which only equal the indexed ones if the row is as it was appended.
            intact = first_bad_seq(events, info.last_seq, info.last_hash) is None
            if intact:
                conn.executemany(
                    "INSERT INTO events_fts (events_fts, rowid, body) VALUES ('delete', ?, ?)",
                    [(row[0], _search_body(e)) for row, e in zip(rows, events, strict=True)],
                )
            conn.execute("INSERT INTO meta (key, value) VALUES ('forgetting', ?)", (session_id,))
            conn.execute("DELETE FROM events WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM meta WHERE key = 'forgetting'")
            if not intact:
                _reindex_events(conn)
            _delete_manifest_calls(conn, "SELECT id FROM manifest_calls WHERE session_id = ?", (session_id,))
            for statement in (
                *pack_state.SESSION_ROWS_DELETE,
                "DELETE FROM working_state WHERE session_id = ?",
                "DELETE FROM manifest_shown WHERE session_id = ?",
                "DELETE FROM checkpoints WHERE session_id = ?",
                "DELETE FROM sessions WHERE session_id = ?",
            ):
                conn.execute(statement, (session_id,))
            _tombstone_episodes(conn, session_id, at)
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

    # ------------------------------------------------------------------ events

    def append_events(
        self,
        session_id: str,
        events: Sequence[NewEvent],
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
        if not events:
            raise InvalidParams("append_events needs at least one event")
        if len(events) > MAX_APPEND_EVENTS:
            raise TooLarge("too many events in one call", limit=MAX_APPEND_EVENTS, count=len(events))
        at = now_ms() if now is None else now
        drafts = [(e := prepare_event(new, at), _search_body(e)) for new in events]
        with self._writing() as conn:
            if request_id is not None:
                replay = _replay(conn, request_id, "append_events", AppendResult)
                if replay is not None:
                    return replay
            head = _session_row(conn, session_id)
            last_seq, last_hash, closed_at = int(head[5]), str(head[6]), head[3]
            if closed_at is not None:
                raise Conflict("the session is closed", sessionId=session_id, reason="closed")
            if expected_seq is not None and expected_seq != last_seq:
                raise Conflict(
                    "the session has moved on",
                    sessionId=session_id,
                    expectedSeq=expected_seq,
                    currentSeq=last_seq,
                )
            (next_id,) = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM events").fetchone()
            rows: list[tuple[Any, ...]] = []
            bodies: list[tuple[int, str]] = []
            chain = last_hash
            for offset, (event, body) in enumerate(drafts):
                event.session_id = session_id
                event.seq = last_seq + 1 + offset
                chain = event.hash = event_hash(chain, event)
                rows.append((next_id + offset, *_event_values(event)))
                bodies.append((next_id + offset, body))
            conn.executemany(
                f"INSERT INTO events (id, {_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.executemany("INSERT INTO events_fts (rowid, body) VALUES (?, ?)", bodies)
            result = AppendResult(
                first_seq=last_seq + 1, last_seq=last_seq + len(drafts), redactions=redactions
            )
            conn.execute(
                "UPDATE sessions SET last_seq = ?, last_hash = ?, event_count = event_count + ?"
                " WHERE session_id = ?",
                (result.last_seq, chain, len(drafts), session_id),
            )
            if request_id is not None:
                _store_request(
                    conn,
                    RequestRecord(
                        request_id=request_id,
                        method="append_events",
                        result=msgspec.json.encode(result),
                    ),
                    at,
                )
        return result

    def read_events(self, session_id: str, *, after_seq: int = 0, limit: int | None = None) -> list[Event]:
        """Events with seq > ``after_seq``, in order, at most ``limit`` of them."""
        with self._reading() as conn:
            _session_row(conn, session_id)
            rows = conn.execute(
                f"SELECT 0, {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq > ?"
                " ORDER BY seq LIMIT ?",
                (session_id, after_seq, -1 if limit is None else max(limit, 0)),
            ).fetchall()
        return [_event(row) for row in rows]

    def read_event_spans(self, spans: Sequence[tuple[str, int, int]]) -> list[Event]:
        """Events of many ``(session_id, first_seq, last_seq)`` ranges in one query.

        The spans travel as one JSON parameter, so the statement text (and the
        connection's cache of prepared statements) is the same for any count.
        """
        if not spans:
            return []
        with self._reading() as conn:
            return _span_events(conn, spans)

    def unverified(
        self, events: Sequence[Event], around: Mapping[tuple[str, int], Event] | None = None
    ) -> set[tuple[str, int]]:
        """``(session_id, seq)`` of the given stored events that do not verify against the
        hash chain (``makad.store.chain``): reads their heads and the rows around them,
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
            edges += _span_events(conn, missing) if missing else []
            sids = sorted({event.session_id for event in events})
            heads = {
                str(sid): (int(last_seq), str(last_hash))
                for sid, last_seq, last_hash in conn.execute(
                    "SELECT session_id, last_seq, last_hash FROM sessions"
                    " WHERE session_id IN (SELECT value FROM json_each(?))",
                    (msgspec.json.encode(sids),),
                )
            }
        return chain.unverified(events, edges, heads)

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
            results = [_retrieve_span(conn, span) for span in spans]
        for result in results:
            _mark_span(result)
        return results

    def verify_chain(self, session_id: str) -> tuple[bool, int | None]:
        """Walk a session's chain: ``(True, None)`` or ``(False, first bad seq)``."""
        with self._reading() as conn:
            info = _session_info(_session_row(conn, session_id))
            cursor = conn.execute(
                f"SELECT 0, {_EVENT_COLUMNS} FROM events WHERE session_id = ? ORDER BY seq",
                (session_id,),
            )
            bad = first_bad_seq((_event(row) for row in cursor), info.last_seq, info.last_hash)
        return bad is None, bad

    # ------------------------------------------------------------------ search

    def search_history(
        self,
        query: str,
        *,
        session_id: str | None = None,
        limit: int = 20,
        before: int | None = None,
        after: int | None = None,
    ) -> list[SearchHit]:
        """BM25-ranked events matching ``query`` (ts strictly between ``after`` and ``before``)."""
        if session_id is not None:
            self.get_session(session_id)
        hits = self.search_events_ranked(
            query, limit=limit, session_id=session_id, before=before, after=after
        )
        self.mark_unverified([hit.event for hit in hits])
        return hits

    def search_events_ranked(
        self,
        query: str,
        *,
        limit: int = 20,
        session_id: str | None = None,
        exclude_sessions: Iterable[str] = (),
        max_seq_by_session: Mapping[str, int] | None = None,
        before: int | None = None,
        after: int | None = None,
        rare_only: bool = False,
    ) -> list[SearchHit]:
        """The recall building block: ranked events, optionally only up to a seq per session.

        ``max_seq_by_session={s: b}`` keeps only events of ``s`` with seq <= b
        (e.g. the compacted-away part of the current session) while other
        sessions are unrestricted; ``exclude_sessions`` drops sessions entirely.
        When more than ``SEARCH_WINDOW`` events pass the filters, only the most
        recent ``SEARCH_WINDOW`` of them are ranked: this bounds a query of
        common words to milliseconds on a million events. ``rare_only`` drops
        the common terms (see ``_selective_match``) whatever the ledger's size,
        and searches nothing when no other term is left.
        """
        if limit <= 0:
            return []
        with self._read_lock:
            match, most = self._selective_match(query, rare_only=rare_only)
        if match is None:
            return []
        clauses: list[str] = []
        params: list[Any] = []
        if session_id is not None:
            clauses.append("e.session_id = ?")
            params.append(session_id)
        excluded = list(exclude_sessions)
        if excluded:
            clauses.append("e.session_id NOT IN (SELECT value FROM json_each(?))")
            params.append(msgspec.json.encode(excluded))
        for sid, max_seq in (max_seq_by_session or {}).items():
            clauses.append("NOT (e.session_id = ? AND e.seq > ?)")
            params.extend((sid, max_seq))
        if before is not None:
            clauses.append("e.ts < ?")
            params.append(before)
        if after is not None:
            clauses.append("e.ts > ?")
            params.append(after)
        where = "".join(f" AND {clause}" for clause in clauses)
        with self._reading() as conn:
            low, high = 0, _MAX_ROWID
            if session_id is not None:
                span = conn.execute(
                    "SELECT min(id), max(id) FROM events WHERE session_id = ?", (session_id,)
                ).fetchone()
                if span[0] is None:
                    return []
                low, high = span
            # The rowid of the window's oldest event: FTS5 walks the doclists
            # newest first and stops there, without scoring anything. Filters
            # apply first (the live session must not eat the window), which needs
            # a join; that is only worth it when the unfiltered matches overflow.
            # Walking costs as much as there are matches: not done when the
            # counts behind the match (``most``) show there cannot be a window's worth.
            overflow = True
            if most is not None:
                grown = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
                overflow = most.matches + max(grown - most.total, 0) >= SEARCH_WINDOW
            floor = _window_floor(conn, match, low, high, "", []) if overflow else None
            if floor is not None and where:
                floor = _window_floor(conn, match, low, high, where, params)
            if floor is not None:
                low = floor
            wanted = min(limit, MAX_SEARCH_LIMIT)
            # Rank in the index alone, then read (and filter) only the best rows:
            # joining every match to its event row cost more than scoring it.
            # Filtered-out rows (the live part of the current session, mostly) can
            # crowd the top, so the fetch grows until enough pass or none are left.
            fetch = max(wanted * 2, 64) if where else wanted
            while True:
                ranked = conn.execute(
                    "SELECT rowid, bm25(events_fts) AS score FROM events_fts"
                    " WHERE events_fts MATCH ? AND rowid BETWEEN ? AND ?"
                    " ORDER BY score, rowid LIMIT ?",
                    (match, low, high, fetch),
                ).fetchall()
                rows = conn.execute(
                    f"SELECT e.id, {_E_EVENT_COLUMNS} FROM events AS e"
                    f" WHERE e.id IN (SELECT value FROM json_each(?)){where}",
                    [msgspec.json.encode([rowid for rowid, _ in ranked]), *params],
                ).fetchall()
                if len(rows) >= wanted or len(ranked) < fetch:
                    break
                fetch *= 4
        # Only the best ``wanted`` of the rows that passed become events.
        passed = {row[0]: row for row in rows}
        hits: list[SearchHit] = []
        for rowid, score in ranked:
            row = passed.get(rowid)
            if row is not None:
                hits.append(SearchHit(event=_event(row), score=-float(score)))
                if len(hits) == wanted:
                    break
        return hits

    def _selective_match(self, query: str, *, rare_only: bool = False) -> tuple[str | None, _Most | None]:
        """The query's terms minus the very common ones, the rarest first (reader lock held),
        and, when counts were at hand, at most how many events the match can find.

        Ranking cost grows with the number of matching rows; a term found in more
        than ``COMMON_TERM_SHARE`` of all events adds rows while barely moving
        BM25 (its IDF is near zero), so it is dropped when rarer terms remain, and
        at most ``MAX_RANKED_TERMS`` of the rarest are kept. Document frequencies
        are counted once and cached until the ledger has doubled in size.
        """
        terms = query_terms(query)
        if len(terms) <= 1 and not rare_only:
            return (terms[0] if terms else None), None
        conn = _live(self._reader)
        total = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
        if total < SMALL_LEDGER_EVENTS and not rare_only:
            return " OR ".join(terms), _Most(total, total)
        counted = {term: self._document_frequency(conn, term, total) for term in terms}
        frequency = {term: count for term, (count, _) in counted.items()}
        common = max(total * COMMON_TERM_SHARE, COMMON_TERM_FLOOR)
        rare = [t for t in terms if frequency[t] <= common]
        if rare_only and not rare:
            return None, None
        kept = sorted(rare or terms, key=lambda t: (frequency[t], t))[:MAX_RANKED_TERMS]
        # Each count holds every match up to the newest event when it was counted;
        # events added since can add at most one match each.
        since = min(counted[t][1] for t in kept)
        return " OR ".join(kept), _Most(sum(frequency[t] for t in kept) + total - since, total)

    def _document_frequency(self, conn: sqlite3.Connection, term: str, total: int) -> tuple[int, int]:
        """Events matching ``term``, and the newest event id when they were counted."""
        cached = self._df_cache.get(term)
        if cached is not None and total < cached[1] * 2:
            return cached
        count = int(
            conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH ?", (term,)).fetchone()[0]
        )
        if len(self._df_cache) > DF_CACHE_SIZE:
            self._df_cache.clear()
        self._df_cache[term] = (count, total)
        return count, total

    def rebuild_search_index(self) -> None:
        """Re-derive the event index from the events; clear the memory index."""
        with self._writing() as conn:
            _reindex_events(conn)
            conn.execute("DELETE FROM memory_fts")
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('search_text_version', ?)",
                (SEARCH_TEXT_VERSION,),
            )

    # ------------------------------------------------------------------ working state

    def get_working_state(self, session_id: str) -> WorkingState:
        with self._reading() as conn:
            return _working_state(conn, session_id)

    def set_working_state(
        self,
        session_id: str,
        *,
        goals: list[str] | None = None,
        open_threads: list[str] | None = None,
        decisions: list[str] | None = None,
        notes: Mapping[str, str] | None = None,
        expected_revision: int | None = None,
        request_id: str | None = None,
        now: int | None = None,
    ) -> WorkingState:
        """Replace the given fields; ``notes`` merges by section ("" removes one).

        Over a cap → ``TooLarge``; ``expected_revision`` not current → ``Conflict``.
        """
        at = now_ms() if now is None else now
        with self._writing() as conn:
            if request_id is not None:
                replay = _replay(conn, request_id, "set_working_state", WorkingState)
                if replay is not None:
                    return replay
            current = _working_state(conn, session_id)
            if expected_revision is not None and expected_revision != current.revision:
                raise Conflict(
                    "the working state has changed",
                    sessionId=session_id,
                    expectedRevision=expected_revision,
                    currentRevision=current.revision,
                )
            state = patch_working_state(
                current, goals=goals, open_threads=open_threads, decisions=decisions, notes=notes
            )
            conn.execute(
                "INSERT OR REPLACE INTO working_state (session_id, state, revision, updated_at)"
                " VALUES (?, ?, ?, ?)",
                (session_id, msgspec.json.encode(state), state.revision, at),
            )
            if request_id is not None:
                record = RequestRecord(
                    request_id=request_id,
                    method="set_working_state",
                    result=msgspec.json.encode(state),
                )
                _store_request(conn, record, at)
            return state

    # ------------------------------------------------------------------ manifests

    def record_manifest(
        self,
        session_id: str,
        call_id: str,
        items: Sequence[ManifestItem | tuple[str, int, str]],
        created_at: int | None = None,
        *,
        memory_bytes: int = 0,
        since: int = 0,
    ) -> Manifest:
        """Record what one build_context call sent; recording a call id again replaces it.

        Items with a content hash (memory entries) also update what the session
        has been shown (``shown_memory``), and ``memory_bytes`` (their size) the
        session's total since ``since``, its latest compaction
        (``pack_state.session_memory_bytes``). Only the latest
        ``MANIFEST_CALLS_KEPT`` calls of a session are kept.
        """
        at = now_ms() if created_at is None else created_at
        listed = [
            item
            if isinstance(item, ManifestItem)
            else ManifestItem(source_id=item[0], tokens=item[1], content_hash=item[2])
            for item in items
        ]
        with self._writing(relaxed=True) as conn:
            _delete_manifest_calls(
                conn,
                "SELECT id FROM manifest_calls WHERE session_id = ? AND call_id = ?",
                (session_id, call_id),
            )
            cursor = conn.execute(
                "INSERT INTO manifest_calls (session_id, call_id, created_at) VALUES (?, ?, ?)",
                (session_id, call_id, at),
            )
            ref = cursor.lastrowid
            conn.executemany(
                "INSERT INTO manifest_items (call_ref, position, source_id, tokens, content_hash)"
                " VALUES (?, ?, ?, ?, ?)",
                [(ref, position, i.source_id, i.tokens, i.content_hash) for position, i in enumerate(listed)],
            )
            conn.executemany(
                "INSERT INTO manifest_shown (session_id, source_id, content_hash, call_ref, shown_at)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (session_id, source_id) DO UPDATE SET"
                " content_hash = excluded.content_hash, call_ref = excluded.call_ref,"
                " shown_at = excluded.shown_at",
                [(session_id, i.source_id, i.content_hash, ref, at) for i in listed if i.content_hash],
            )
            _delete_manifest_calls(
                conn,
                "SELECT id FROM manifest_calls WHERE session_id = ? ORDER BY id DESC LIMIT -1 OFFSET ?",
                (session_id, MANIFEST_CALLS_KEPT),
            )
            pack_state.add_session_memory(conn, session_id, since, call_id, memory_bytes)
        return Manifest(session_id=session_id, call_id=call_id, created_at=at, items=listed)

    def shown_memory(self, session_id: str, since: int, among: Sequence[str]) -> ShownMemory:
        """Which of the sources ``among`` the session was shown at or after ``since`` (ms),
        the latest version of each."""
        with self._reading() as conn:
            head = conn.execute(
                "SELECT id, call_id FROM manifest_calls WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            rows = conn.execute(
                "SELECT source_id, content_hash, call_ref FROM manifest_shown"
                " WHERE session_id = ? AND source_id IN (SELECT value FROM json_each(?))"
                " AND shown_at >= ?",
                (session_id, msgspec.json.encode(list(among)), since),
            ).fetchall()
        return ShownMemory(
            latest_call_id=head[1] if head else None,
            latest_call_ref=head[0] if head else None,
            items={source: (digest, ref) for source, digest, ref in rows},
        )

    def get_manifest(self, session_id: str, call_id: str | None = None) -> Manifest:
        """One call's manifest, or the session's latest one when ``call_id`` is None."""
        with self._reading() as conn:
            if call_id is None:
                head = conn.execute(
                    "SELECT id, call_id, created_at FROM manifest_calls WHERE session_id = ?"
                    " ORDER BY id DESC LIMIT 1",
                    (session_id,),
                ).fetchone()
            else:
                head = conn.execute(
                    "SELECT id, call_id, created_at FROM manifest_calls WHERE session_id = ? AND call_id = ?",
                    (session_id, call_id),
                ).fetchone()
            if head is None:
                raise NotFound("no such manifest", sessionId=session_id, callId=call_id)
            items = conn.execute(
                "SELECT source_id, tokens, content_hash FROM manifest_items WHERE call_ref = ?"
                " ORDER BY position",
                (head[0],),
            ).fetchall()
        return Manifest(
            session_id=session_id,
            call_id=head[1],
            created_at=head[2],
            items=[ManifestItem(source_id=s, tokens=t, content_hash=h) for s, t, h in items],
        )

    # ------------------------------------------------------------------ checkpoints

    def add_checkpoint(self, checkpoint: Checkpoint, *, request: RequestRecord | None = None) -> Checkpoint:
        """Store a compaction checkpoint in one transaction, after checking it fits the chain.

        Its range must lie within the session's events and ``covered_hash`` must be
        the stored hash of the last covered event (see ``core.compaction.covered_hash``).
        """
        cp = checkpoint
        first, last = cp.coverage.from_seq, cp.coverage.to_seq
        with self._writing() as conn:
            _guard_request(conn, request)
            info = _session_info(_session_row(conn, cp.session_id))
            if not 1 <= first <= last <= info.last_seq:
                raise InvalidParams(
                    "the checkpoint range is outside the session",
                    fromSeq=first,
                    toSeq=last,
                    lastSeq=info.last_seq,
                )
            row = conn.execute(
                "SELECT hash FROM events WHERE session_id = ? AND seq = ?", (cp.session_id, last)
            ).fetchone()
            if row is None or row[0] != cp.covered_hash:
                raise Conflict(
                    "the checkpoint does not match the ledger", sessionId=cp.session_id, toSeq=last
                )
            try:
                conn.execute(
                    f"INSERT INTO checkpoints ({_CHECKPOINT_COLUMNS})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        cp.checkpoint_id,
                        cp.session_id,
                        cp.boundary_seq,
                        first,
                        last,
                        cp.covered_hash,
                        cp.summary,
                        cp.summary_tokens,
                        cp.preserved_from_seq,
                        cp.mode,
                        cp.reason,
                        cp.created_at,
                    ),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict("a checkpoint with this id exists", checkpointId=cp.checkpoint_id) from exc
            _store_request(conn, request, cp.created_at)
        return cp

    def latest_checkpoint(self, session_id: str) -> Checkpoint | None:
        with self._reading() as conn:
            row = conn.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = ?"
                " ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
        return None if row is None else _checkpoint(row)

    def list_checkpoints(self, session_id: str) -> list[Checkpoint]:
        """A session's checkpoints, oldest first."""
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE session_id = ? ORDER BY id",
                (session_id,),
            ).fetchall()
        return [_checkpoint(row) for row in rows]

    def get_checkpoint(self, checkpoint_id: str) -> Checkpoint:
        with self._reading() as conn:
            row = conn.execute(
                f"SELECT {_CHECKPOINT_COLUMNS} FROM checkpoints WHERE checkpoint_id = ?",
                (checkpoint_id,),
            ).fetchone()
        if row is None:
            raise NotFound("no such checkpoint", checkpointId=checkpoint_id)
        return _checkpoint(row)

    # ------------------------------------------------------------------ memory lineage

    def append_memory_event(
        self,
        *,
        action: str,
        actor: str,
        entry_id: str | None = None,
        proposal_id: str | None = None,
        data: Mapping[str, Any] | None = None,
        ts: int | None = None,
        request: RequestRecord | None = None,
    ) -> int:
        """Append one step of a memory entry's or proposal's lineage; returns its id."""
        if action not in MEMORY_ACTIONS:
            raise InvalidParams("unknown memory action", action=action)
        if actor not in MEMORY_ACTORS:
            raise InvalidParams("unknown memory actor", actor=actor)
        if entry_id is None and proposal_id is None:
            raise InvalidParams("a memory event needs an entry id or a proposal id")
        at = now_ms() if ts is None else ts
        encoded = None if data is None else msgspec.json.encode(dict(data)).decode()
        with self._writing() as conn:
            _guard_request(conn, request)
            cursor = conn.execute(
                "INSERT INTO memory_events (ts, entry_id, action, actor, proposal_id, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (at, entry_id, action, actor, proposal_id, encoded),
            )
            _store_request(conn, request, at)
        return int(cast(int, cursor.lastrowid))

    def append_memory_events(self, events: Sequence[Mapping[str, Any]]) -> None:
        """Append many lineage steps in one transaction (one fsync): an import's proposals.

        Each mapping holds ``append_memory_event``'s keywords (action, actor, entry_id,
        proposal_id, data).
        """
        at = now_ms()
        rows = []
        for event in events:
            action, actor = event["action"], event["actor"]
            if action not in MEMORY_ACTIONS:
                raise InvalidParams("unknown memory action", action=action)
            if actor not in MEMORY_ACTORS:
                raise InvalidParams("unknown memory actor", actor=actor)
            if event.get("entry_id") is None and event.get("proposal_id") is None:
                raise InvalidParams("a memory event needs an entry id or a proposal id")
            data = event.get("data")
            encoded = None if data is None else msgspec.json.encode(dict(data)).decode()
            rows.append((at, event.get("entry_id"), action, actor, event.get("proposal_id"), encoded))
        if not rows:
            return
        with self._writing() as conn:
            conn.executemany(
                "INSERT INTO memory_events (ts, entry_id, action, actor, proposal_id, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )

    def find_rejections(self, content_hashes: Sequence[str]) -> set[str]:
        """The hashes among ``content_hashes`` that were rejected before (one read)."""
        found: set[str] = set()
        wanted = list(dict.fromkeys(content_hashes))
        with self._reading() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                rows = conn.execute(
                    "SELECT content_hash FROM rejections"
                    " WHERE content_hash IN (SELECT value FROM json_each(?))",
                    (msgspec.json.encode(chunk).decode(),),
                ).fetchall()
                found.update(str(row[0]) for row in rows)
        return found

    def memory_history(self, entry_or_proposal_id: str) -> list[MemoryEvent]:
        """Every lineage step of an entry or proposal, including the proposals behind an entry."""
        key = entry_or_proposal_id
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_MEMORY_EVENT_COLUMNS} FROM memory_events"
                " WHERE entry_id = ? OR proposal_id = ? OR proposal_id IN"
                " (SELECT proposal_id FROM memory_events WHERE entry_id = ?"
                "  AND proposal_id IS NOT NULL)"
                " ORDER BY id",
                (key, key, key),
            ).fetchall()
        return [
            MemoryEvent(
                id=r[0],
                ts=r[1],
                action=r[2],
                actor=r[3],
                entry_id=r[4],
                proposal_id=r[5],
                data=None if r[6] is None else msgspec.json.decode(r[6], type=dict[str, Any]),
            )
            for r in rows
        ]

    def record_rejection(
        self,
        content_hash: str,
        *,
        reason: str,
        proposal_id: str | None = None,
        ts: int | None = None,
        request: RequestRecord | None = None,
    ) -> Rejection:
        """Remember that content with this normalized hash was rejected (latest wins)."""
        at = now_ms() if ts is None else ts
        with self._writing() as conn:
            _guard_request(conn, request)
            conn.execute(
                "INSERT OR REPLACE INTO rejections (content_hash, proposal_id, reason, ts)"
                " VALUES (?, ?, ?, ?)",
                (content_hash, proposal_id, reason, at),
            )
            _store_request(conn, request, at)
        return Rejection(content_hash=content_hash, proposal_id=proposal_id, reason=reason, ts=at)

    def find_rejection(self, content_hash: str) -> Rejection | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT content_hash, proposal_id, reason, ts FROM rejections WHERE content_hash = ?",
                (content_hash,),
            ).fetchone()
        if row is None:
            return None
        return Rejection(content_hash=row[0], proposal_id=row[1], reason=row[2], ts=row[3])

    # ------------------------------------------------------------------ episodes

    def add_episode(
        self, new: NewEpisode, *, request_id: str | None = None, now: int | None = None
    ) -> AddedEpisode:
        """Record an episode of a stored session, in one transaction.

        Every source ref must name stored events that verify against the chain
        (else ``InvalidParams`` naming the ref); the session must exist (``NotFound``).
        The same remark (summary, case and spacing aside) is one episode per session:
        recording it again returns the first one with ``created=False``. A
        ``request_id`` seen before returns the first result.
        """
        at = now_ms() if now is None else now
        spans = parse_event_refs(new.source_refs)
        key = episode_summary_key(new.session_id, new.summary)
        with self._writing() as conn:
            if request_id is not None:
                replay = _replay(conn, request_id, "record_episode", AddedEpisode)
                if replay is not None:
                    return replay
            _session_row(conn, new.session_id)
            for span in spans:
                found = _retrieve_span(conn, span)
                if not found.ok:
                    raise InvalidParams(
                        "a source ref does not name stored, intact events",
                        path="$.sourceRefs",
                        ref=span[0],
                        missingSeqs=found.missing_seqs,
                        mismatchedSeqs=found.mismatched_seqs,
                    )
            row = conn.execute("SELECT id FROM episodes WHERE summary_key = ?", (key,)).fetchone()
            if row is not None:
                result = AddedEpisode(episode=_load_episodes(conn, [int(row[0])])[0], created=False)
            else:
                cursor = conn.execute(
                    "INSERT INTO episodes (episode_id, session_id, kind, summary, summary_key, at,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (new.episode_id, new.session_id, new.kind, new.summary, key, new.at, at),
                )
                ordinal = int(cast(int, cursor.lastrowid))
                conn.executemany(
                    "INSERT OR IGNORE INTO episode_tags (tag, episode_ref, position) VALUES (?, ?, ?)",
                    [(tag, ordinal, i) for i, tag in enumerate(new.tags)],
                )
                conn.executemany(
                    "INSERT INTO episode_refs (episode_ref, position, ref, session_id) VALUES (?, ?, ?, ?)",
                    [(ordinal, i, span[0], span[1]) for i, span in enumerate(spans)],
                )
                result = AddedEpisode(episode=_load_episodes(conn, [ordinal])[0], created=True)
            if request_id is not None:
                _store_request(
                    conn,
                    RequestRecord(
                        request_id=request_id, method="record_episode", result=msgspec.json.encode(result)
                    ),
                    at,
                )
        return result

    def list_episodes(
        self,
        *,
        tag: str | None = None,
        session_id: str | None = None,
        since: int | None = None,
        episode_ids: Sequence[str] | None = None,
        include_deleted: bool = False,
        limit: int = 1_000,
    ) -> list[EpisodeRecord]:
        """Episodes oldest first (by ``at``, then recording order), each with the
        consolidations that cited it. A deleted session's episodes (tombstones) only
        with ``include_deleted``."""
        clauses: list[str] = []
        params: list[Any] = []
        if not include_deleted:
            clauses.append("deleted_at IS NULL")
        if tag is not None:
            clauses.append("id IN (SELECT episode_ref FROM episode_tags WHERE tag = ?)")
            params.append(tag)
        if session_id is not None:
            clauses.append("session_id = ?")
            params.append(session_id)
        if since is not None:
            clauses.append("at >= ?")
            params.append(since)
        if episode_ids is not None:
            clauses.append("episode_id IN (SELECT value FROM json_each(?))")
            params.append(msgspec.json.encode(list(episode_ids)).decode())
        where = " AND ".join(clauses) or "1"
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT id FROM episodes WHERE {where} ORDER BY at, id LIMIT ?", [*params, max(limit, 0)]
            ).fetchall()
            return _load_episodes(conn, [int(r[0]) for r in rows])

    def evidence(self, tag: str | None = None) -> dict[str, list[EpisodeRecord]]:
        """Per tag, the episodes not yet consolidated for it, in recording order.

        An episode counts for a tag while it carries the tag, its session is not
        deleted, it was recorded after the tag's offset and no consolidation of
        that tag has cited it (queued, approved, rejected or deleted alike).
        """
        where = "" if tag is None else " AND t.tag = ?"
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT t.tag, e.id FROM episode_tags AS t JOIN episodes AS e ON e.id = t.episode_ref"
                f" WHERE e.deleted_at IS NULL{where}"
                " AND e.id > coalesce((SELECT after_episode FROM consolidation_offsets AS o"
                "  WHERE o.tag = t.tag), 0)"
                " AND NOT EXISTS (SELECT 1 FROM consolidation_episodes AS ce"
                "  JOIN consolidations AS c ON c.proposal_id = ce.proposal_id"
                "  WHERE ce.episode_ref = e.id AND c.tag = t.tag)"
                " ORDER BY t.tag, e.id",
                () if tag is None else (tag,),
            ).fetchall()
            loaded = {e.ordinal: e for e in _load_episodes(conn, sorted({int(r[1]) for r in rows}))}
        out: dict[str, list[EpisodeRecord]] = {}
        for found_tag, ordinal in rows:
            out.setdefault(str(found_tag), []).append(loaded[int(ordinal)])
        return out

    def source_seqs(self, session_id: str, texts: Sequence[str]) -> list[int]:
        """The session's user messages each text came from, as sorted seqs.

        For each text: the user message sharing the most words with it (BM25 over
        the session's events; ties go to the later message); a text matching none
        falls back to the session's last user message. A session without user
        messages gives ``[]``.
        """
        found: set[int] = set()
        with self._reading() as conn:
            span = conn.execute(
                "SELECT min(id), max(id) FROM events WHERE session_id = ?", (session_id,)
            ).fetchone()
            last = conn.execute(
                "SELECT max(seq) FROM events WHERE session_id = ? AND type = 'user_message'",
                (session_id,),
            ).fetchone()
            if span[0] is None or last[0] is None:
                return []
            for text in texts:
                match = match_expression(text)
                row = None
                if match is not None:
                    row = conn.execute(
                        "SELECT e.seq FROM (SELECT rowid AS id, bm25(events_fts) AS score"
                        "  FROM events_fts WHERE events_fts MATCH ? AND rowid BETWEEN ? AND ?) AS hits"
                        " CROSS JOIN events AS e ON e.id = hits.id"
                        " WHERE e.session_id = ? AND e.type = 'user_message'"
                        " ORDER BY hits.score, e.seq DESC LIMIT 1",
                        (match, span[0], span[1], session_id),
                    ).fetchone()
                found.add(int(last[0] if row is None else row[0]))
        return sorted(found)

    def consolidation_offset(self, tag: str) -> int:
        """The last episode ordinal already consolidated for ``tag`` (0: none yet)."""
        with self._reading() as conn:
            row = conn.execute(
                "SELECT after_episode FROM consolidation_offsets WHERE tag = ?", (tag,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def queue_consolidation(
        self,
        tag: str,
        proposal_id: str,
        episode_ids: Sequence[str],
        *,
        now: int | None = None,
    ) -> int:
        """Link a queued proposal to the episodes it consolidates and advance the tag's
        offset past them — in one transaction, with a ``consolidated`` lineage step.

        Returns the tag's new offset. Queuing the same proposal again changes nothing.
        """
        at = now_ms() if now is None else now
        with self._writing() as conn:
            cited = conn.execute(
                "SELECT id, episode_id FROM episodes WHERE episode_id IN (SELECT value FROM json_each(?))"
                " ORDER BY id",
                (msgspec.json.encode(list(episode_ids)).decode(),),
            ).fetchall()
            if not cited:
                raise NotFound("none of the cited episodes exists", episodeIds=list(episode_ids))
            known = conn.execute(
                "SELECT 1 FROM consolidations WHERE proposal_id = ?", (proposal_id,)
            ).fetchone()
            if known is None:
                conn.execute(
                    "INSERT INTO consolidations (proposal_id, tag, state, created_at, updated_at)"
                    " VALUES (?, ?, 'queued', ?, ?)",
                    (proposal_id, tag, at, at),
                )
                conn.executemany(
                    "INSERT INTO consolidation_episodes (proposal_id, episode_ref) VALUES (?, ?)",
                    [(proposal_id, ordinal) for ordinal, _ in cited],
                )
                conn.execute(
                    "INSERT INTO consolidation_offsets (tag, after_episode, updated_at) VALUES (?, ?, ?)"
                    " ON CONFLICT (tag) DO UPDATE SET"
                    " after_episode = max(after_episode, excluded.after_episode),"
                    " updated_at = excluded.updated_at",
                    (tag, max(ordinal for ordinal, _ in cited), at),
                )
                data = {
                    "tag": tag,
                    "episodeIds": [eid for _, eid in cited],
                    "sourceRefs": [f"episode:{eid}" for _, eid in cited],
                }
                conn.execute(
                    "INSERT INTO memory_events (ts, entry_id, action, actor, proposal_id, data)"
                    " VALUES (?, NULL, 'consolidated', 'daemon', ?, ?)",
                    (at, proposal_id, msgspec.json.encode(data).decode()),
                )
            row = conn.execute(
                "SELECT after_episode FROM consolidation_offsets WHERE tag = ?", (tag,)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def settle_consolidations(
        self,
        outcomes: Mapping[str, tuple[ConsolidationState, str | None]],
        *,
        now: int | None = None,
    ) -> list[str]:
        """Record what became of consolidation proposals (proposal id → state, entry id).

        Only a queued consolidation is settled; others, and proposals that were not
        consolidations, are left alone. Returns the proposal ids that changed.
        """
        at = now_ms() if now is None else now
        changed: list[str] = []
        with self._writing() as conn:
            for proposal_id, (state, entry_id) in outcomes.items():
                cursor = conn.execute(
                    "UPDATE consolidations SET state = ?, entry_id = ?, updated_at = ?"
                    " WHERE proposal_id = ? AND state = 'queued'",
                    (state, entry_id, at, proposal_id),
                )
                if cursor.rowcount:
                    changed.append(proposal_id)
        return changed

    def retract_entry(self, entry_id: str, *, now: int | None = None) -> list[str]:
        """The user deleted an entry: the consolidations that produced it become
        ``deleted``; returns their proposal ids."""
        at = now_ms() if now is None else now
        with self._writing() as conn:
            rows = conn.execute(
                "SELECT proposal_id FROM consolidations WHERE entry_id = ? AND state = 'approved'",
                (entry_id,),
            ).fetchall()
            conn.execute(
                "UPDATE consolidations SET state = 'deleted', updated_at = ?"
                " WHERE entry_id = ? AND state = 'approved'",
                (at, entry_id),
            )
        return [str(r[0]) for r in rows]

    # ------------------------------------------------------------------ idempotency

    def get_request_result(self, request_id: str) -> StoredRequest | None:
        with self._reading() as conn:
            row = conn.execute(
                "SELECT request_id, method, result, ts FROM requests WHERE request_id = ?",
                (request_id,),
            ).fetchone()
        if row is None:
            return None
        return StoredRequest(request_id=row[0], method=row[1], result=bytes(row[2]), ts=row[3])

    def put_request_result(
        self, request_id: str, method: str, result: bytes, *, ts: int | None = None
    ) -> StoredRequest:
        """Store a request's result unless one is stored already; return the stored one."""
        at = now_ms() if ts is None else ts
        with self._writing() as conn:
            conn.execute(
                "INSERT OR IGNORE INTO requests (request_id, method, result, ts) VALUES (?, ?, ?, ?)",
                (request_id, method, result, at),
            )
            row = conn.execute(
                "SELECT request_id, method, result, ts FROM requests WHERE request_id = ?",
                (request_id,),
            ).fetchone()
        return StoredRequest(request_id=row[0], method=row[1], result=bytes(row[2]), ts=row[3])

    def prune_requests(self, older_than: int) -> int:
        """Forget idempotency results stored before ``older_than`` (ms); returns how many."""
        with self._writing() as conn:
            cursor = conn.execute("DELETE FROM requests WHERE ts < ?", (older_than,))
        return cursor.rowcount

    # ------------------------------------------------------------------ intents

    def begin_intent(
        self,
        kind: str,
        payload: Mapping[str, Any],
        *,
        intent_id: str | None = None,
        ts: int | None = None,
    ) -> Intent:
        """Record a multi-step operation before its first step, so a restart can finish it."""
        at = now_ms() if ts is None else ts
        iid = intent_id or secrets.token_hex(16)
        # The payload may quote the user's files: no secret in it reaches the ledger.
        body = msgspec.json.encode(redact_tree(dict(payload))).decode()
        with self._writing() as conn:
            try:
                conn.execute(
                    "INSERT INTO intents (id, kind, payload, state, ts) VALUES (?, ?, ?, 'open', ?)",
                    (iid, kind, body, at),
                )
            except sqlite3.IntegrityError as exc:
                raise Conflict("an intent with this id exists", intentId=iid) from exc
        return Intent(id=iid, kind=kind, payload=dict(payload), state="open", ts=at)

    def get_intent(self, intent_id: str) -> Intent | None:
        with self._reading() as conn:
            row = conn.execute(f"SELECT {_INTENT_COLUMNS} FROM intents WHERE id = ?", (intent_id,)).fetchone()
        if row is None:
            return None
        return Intent(
            id=row[0],
            kind=row[1],
            payload=msgspec.json.decode(row[2]),
            state=row[3],
            ts=row[4],
            finished_at=row[5],
        )

    def finish_intent(self, intent_id: str, *, state: str = "done", ts: int | None = None) -> None:
        """Close an intent (``done``, ``aborted``…); finishing it twice is harmless."""
        if state == "open":
            raise InvalidParams("an intent is finished with a state other than open")
        at = now_ms() if ts is None else ts
        with self._writing() as conn:
            cursor = conn.execute(
                "UPDATE intents SET state = ?, finished_at = ? WHERE id = ? AND state = 'open'",
                (state, at, intent_id),
            )
            if (
                cursor.rowcount == 0
                and not conn.execute("SELECT 1 FROM intents WHERE id = ?", (intent_id,)).fetchone()
            ):
                raise NotFound("no such intent", intentId=intent_id)

    def open_intents(self) -> list[Intent]:
        """Intents begun and never finished, oldest first."""
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT {_INTENT_COLUMNS} FROM intents WHERE state = 'open' ORDER BY ts, id"
            ).fetchall()
        return [
            Intent(
                id=r[0],
                kind=r[1],
                payload=msgspec.json.decode(r[2], type=dict[str, Any]),
                state=r[3],
                ts=r[4],
                finished_at=r[5],
            )
            for r in rows
        ]

    # ------------------------------------------------------------------ memory index

    def replace_memory_index(self, entries: Iterable[Entry]) -> None:
        """Replace the memory search index with these entries (rebuilt from MEMORY.md)."""
        rows = [
            (e.id, index_text(e.title), index_text(e.content), index_text(" ".join(e.tags))) for e in entries
        ]
        with self._writing() as conn:
            conn.execute("DELETE FROM memory_fts")
            conn.executemany(
                "INSERT INTO memory_fts (entry_id, title, content, tags) VALUES (?, ?, ?, ?)",
                rows,
            )
            # Small index: merging now keeps removed entries' tokens off the disk.
            conn.execute("INSERT INTO memory_fts (memory_fts) VALUES ('optimize')")

    def search_memory(self, query: str, limit: int = 20) -> list[tuple[str, float]]:
        """``(entry_id, score)`` best first; score is the negated bm25 (title weighs 2x)."""
        match = match_expression(query)
        if match is None or limit <= 0:
            return []
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT entry_id, bm25(memory_fts, 0.0, 2.0, 1.0, 1.5) AS score FROM memory_fts"
                " WHERE memory_fts MATCH ? ORDER BY score LIMIT ?",
                (match, min(limit, MAX_SEARCH_LIMIT)),
            ).fetchall()
        return [(str(entry_id), -float(score)) for entry_id, score in rows]

    # ------------------------------------------------------------------ settings

    def get_settings_json(self) -> dict[str, Any]:
        """The workspace's persisted settings, key → decoded JSON value."""
        with self._reading() as conn:
            rows = conn.execute("SELECT key, value FROM settings ORDER BY key").fetchall()
        return {key: msgspec.json.decode(value) for key, value in rows}

    def put_settings_json(self, values: Mapping[str, Any], *, replace: bool = False) -> None:
        """Upsert settings (``replace=True`` drops every key not given)."""
        rows = [(key, msgspec.json.encode(value).decode()) for key, value in values.items()]
        with self._writing() as conn:
            if replace:
                conn.execute("DELETE FROM settings")
            conn.executemany("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", rows)

    # ------------------------------------------------------------------ plumbing

    def transaction(self, *, relaxed: bool = False) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A write transaction, for stores that keep their own tables in this ledger."""
        return self._writing(relaxed=relaxed)

    def snapshot(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A read transaction, for stores that keep their own tables in this ledger."""
        return self._reading()

    @contextlib.contextmanager
    def _writing(self, *, relaxed: bool = False) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on the writer, committed on success.

        ``relaxed``: commit without fsyncing the WAL (synchronous=NORMAL) — for records
        that may be lost to a power cut without harm (manifests); the next durable
        commit fsyncs them anyway.
        """
        with self._write_lock:
            conn = _live(self._writer)
            self._check_file()
            if self._before_first_write is not None and self._before_first_write():
                self._before_first_write = None
            if relaxed:
                conn.execute("PRAGMA synchronous = NORMAL")
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    found = failure(exc, "the ledger write failed")
                    if type(found) is IOFailure and _damaged(conn, exc):
                        found = LedgerCorrupt("the ledger database is corrupt", reason="ledger_corrupt")
                    raise found from exc
                raise
            finally:
                if relaxed:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute(f"PRAGMA synchronous = {self._synchronous}")

    def _check_file(self) -> None:
        """Refuse to write when the database file was deleted or replaced under us.

        SQLite would go on writing to the unlinked inode: every acknowledged write
        would then vanish at the next start. Refusing is what a user can act on.
        """
        try:
            st = os.stat(self.path)
        except OSError:
            raise IOFailure("the ledger file is missing", reason="ledger_missing") from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise IOFailure("the ledger file was replaced", reason="ledger_replaced")

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot) on the reader."""
        with self._read_lock:
            conn = _live(self._reader)
            try:
                conn.execute("BEGIN")
                yield conn
            except sqlite3.Error as exc:
                raise failure(exc, "the ledger read failed") from exc
            finally:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")

    def _meta(self, key: str) -> str | None:
        with self._reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _purge_forgotten(self) -> None:
        """Leave no trace of deleted rows: merge the deleted tokens out of the index
        (about 1.3 s on a million events), then empty the WAL, which still holds
        the old pages (``secure_delete`` has zeroed them in the database file).
        Best effort: the forget itself is already committed."""
        with contextlib.suppress(IOFailure), self._writing() as conn:
            conn.execute("INSERT INTO events_fts (events_fts) VALUES ('optimize')")
        with self._write_lock, self._read_lock, contextlib.suppress(sqlite3.Error):
            _live(self._writer).execute("PRAGMA wal_checkpoint(TRUNCATE)")


# ---------------------------------------------------------------------- helpers


def _connect(path: Path, synchronous: Synchronous) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10.0)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB_PER_CONNECTION}")
    conn.execute(f"PRAGMA soft_heap_limit = {SQLITE_SOFT_HEAP_LIMIT_BYTES}")
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _live(conn: sqlite3.Connection | None) -> sqlite3.Connection:
    if conn is None:
        raise IOFailure("the ledger is closed")
    return conn


def _span_events(conn: sqlite3.Connection, spans: Sequence[tuple[str, int, int]]) -> list[Event]:
    """Events of ``(session_id, first_seq, last_seq)`` ranges, in one statement for any count."""
    rows = conn.execute(
        "WITH s(sid, lo, hi) AS (SELECT json_extract(value, '$[0]'),"
        " json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(?))"
        f" SELECT 0, {_E_EVENT_COLUMNS} FROM s CROSS JOIN events AS e"
        " ON e.session_id = s.sid AND e.seq BETWEEN s.lo AND s.hi",
        (msgspec.json.encode(list(spans)),),
    ).fetchall()
    return [_event(row) for row in rows]


class _Most(NamedTuple):
    """At most ``matches`` events match, as of the newest event id ``total``."""

    matches: int
    total: int


def _window_floor(
    conn: sqlite3.Connection, match: str, low: int, high: int, where: str, params: Sequence[Any]
) -> int | None:
    """The rowid of the ``SEARCH_WINDOW``-th newest match passing ``where``, if there are that many."""
    joined = " CROSS JOIN events AS e ON e.id = f.rowid" if where else ""
    row = conn.execute(
        f"SELECT f.rowid FROM events_fts AS f{joined}"
        f" WHERE events_fts MATCH ? AND f.rowid BETWEEN ? AND ?{where}"
        " ORDER BY f.rowid DESC LIMIT 1 OFFSET ?",
        [match, low, high, *params, SEARCH_WINDOW - 1],
    ).fetchone()
    return None if row is None else int(row[0])


def _delete_manifest_calls(conn: sqlite3.Connection, select_ids: str, params: tuple[Any, ...]) -> None:
    """Delete the manifest calls (and their items) whose ids ``select_ids`` returns."""
    conn.execute(f"DELETE FROM manifest_items WHERE call_ref IN ({select_ids})", params)
    conn.execute(f"DELETE FROM manifest_calls WHERE id IN ({select_ids})", params)


def _session_row(conn: sqlite3.Connection, session_id: str) -> tuple[Any, ...]:
    row = conn.execute(
        f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise NotFound("no such session", sessionId=session_id)
    return cast(tuple[Any, ...], row)


def _session_info(row: tuple[Any, ...]) -> SessionInfo:
    return SessionInfo(
        session_id=row[0],
        title=row[1],
        created_at=row[2],
        closed_at=row[3],
        event_count=row[4],
        last_seq=row[5],
        last_hash=row[6],
    )


def _search_body(event: Event) -> str:
    text = event.text if event.tool_name is None else f"{event.text}\n{event.tool_name}"
    return index_text(text)


def _event_values(event: Event) -> tuple[Any, ...]:
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


def _event(row: Sequence[Any]) -> Event:
    """An Event from ``(anything, *_EVENT_COLUMNS)``.

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
# Expected Python type of each of _EVENT_COLUMNS (index 1..10 of an event row).
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


def _damaged(conn: sqlite3.Connection, exc: sqlite3.Error) -> bool:
    """Whether a write error that names no corruption comes from a damaged file anyway.

    A damaged b-tree can surface as a constraint violation (an autoincrement id that
    collides) and a damaged header as "readonly"; only those errors pay for a check.
    """
    if not isinstance(exc, sqlite3.IntegrityError | sqlite3.OperationalError):
        return False
    if isinstance(exc, sqlite3.OperationalError) and "readonly" not in str(exc):
        return False
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error:
        return True
    return rows != [("ok",)]


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


def _retrieve_span(conn: sqlite3.Connection, span: tuple[str, str, int, int]) -> RefResult:
    _, session_id, first, last = span
    head = conn.execute(
        "SELECT last_seq, last_hash FROM sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    rows = conn.execute(
        f"SELECT 0, {_EVENT_COLUMNS} FROM events WHERE session_id = ? AND seq BETWEEN ? AND ? ORDER BY seq",
        (session_id, first - 1, last + 1),
    ).fetchall()
    by_seq = {event.seq: event for event in map(_event, rows)}
    return verify_span(span, by_seq, None if head is None else (int(head[0]), str(head[1])))


def _mark_span(result: RefResult) -> None:
    """Per-event ``verified`` for a retrieved range, as ``makad.store.chain`` judges it: an
    event fails when it or its successor does not chain (the tail: ``chain_intact``)."""
    broken = set(result.mismatched_seqs) | set(result.missing_seqs)
    tail = result.events[-1].seq if result.events else None
    for event in result.events:
        if event.seq == tail:
            event.verified = event.seq not in broken and result.chain_intact
        else:
            event.verified = event.seq not in broken and event.seq + 1 not in broken


def _load_episodes(conn: sqlite3.Connection, ordinals: Sequence[int]) -> list[EpisodeRecord]:
    """Episodes by ordinal, in the order given, with their tags, refs and consolidations."""
    if not ordinals:
        return []
    wanted = msgspec.json.encode(list(ordinals)).decode()
    inside = "IN (SELECT value FROM json_each(?))"
    rows = conn.execute(
        "SELECT id, episode_id, session_id, kind, summary, at, created_at, deleted_at"
        f" FROM episodes WHERE id {inside}",
        (wanted,),
    ).fetchall()
    tags: dict[int, list[str]] = {}
    for ordinal, tag in conn.execute(
        f"SELECT episode_ref, tag FROM episode_tags WHERE episode_ref {inside} ORDER BY position", (wanted,)
    ):
        tags.setdefault(int(ordinal), []).append(str(tag))
    refs: dict[int, list[str]] = {}
    for ordinal, ref in conn.execute(
        f"SELECT episode_ref, ref FROM episode_refs WHERE episode_ref {inside} ORDER BY position",
        (wanted,),
    ):
        refs.setdefault(int(ordinal), []).append(str(ref))
    marks: dict[int, list[ConsolidationMark]] = {}
    for ordinal, proposal_id, tag, state, entry_id in conn.execute(
        "SELECT ce.episode_ref, c.proposal_id, c.tag, c.state, c.entry_id FROM consolidation_episodes AS ce"
        f" JOIN consolidations AS c ON c.proposal_id = ce.proposal_id WHERE ce.episode_ref {inside}"
        " ORDER BY c.created_at, c.proposal_id",
        (wanted,),
    ):
        marks.setdefault(int(ordinal), []).append(
            ConsolidationMark(proposal_id=proposal_id, tag=tag, state=state, entry_id=entry_id)
        )
    by_ordinal = {
        int(r[0]): EpisodeRecord(
            episode_id=r[1],
            session_id=r[2],
            kind=r[3],
            summary=r[4],
            tags=tags.get(int(r[0]), []),
            source_refs=refs.get(int(r[0]), []),
            at=r[5],
            created_at=r[6],
            ordinal=int(r[0]),
            deleted_at=r[7],
            consolidations=marks.get(int(r[0]), []),
        )
        for r in rows
    }
    return [by_ordinal[o] for o in ordinals if o in by_ordinal]


def _tombstone_episodes(conn: sqlite3.Connection, session_id: str, at: int) -> None:
    """A deleted session's episodes — and any episode citing its events — keep only
    their id, session and times: summary, tags and refs are erased."""
    doomed = [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM episodes WHERE deleted_at IS NULL AND (session_id = ?"
            " OR id IN (SELECT episode_ref FROM episode_refs WHERE session_id = ?))",
            (session_id, session_id),
        )
    ]
    if not doomed:
        return
    wanted = msgspec.json.encode(doomed).decode()
    inside = "IN (SELECT value FROM json_each(?))"
    conn.execute(f"DELETE FROM episode_tags WHERE episode_ref {inside}", (wanted,))
    conn.execute(f"DELETE FROM episode_refs WHERE episode_ref {inside}", (wanted,))
    conn.execute(
        f"UPDATE episodes SET summary = '', summary_key = NULL, deleted_at = ? WHERE id {inside}",
        (at, wanted),
    )


def _reindex_events(conn: sqlite3.Connection) -> None:
    """Drop and re-derive every row of the contentless event index."""
    conn.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
    cursor = conn.execute(f"SELECT id, {_EVENT_COLUMNS} FROM events ORDER BY id")
    while batch := cursor.fetchmany(5_000):
        conn.executemany(
            "INSERT INTO events_fts (rowid, body) VALUES (?, ?)",
            [(row[0], _search_body(_event(row))) for row in batch],
        )


def _working_state(conn: sqlite3.Connection, session_id: str) -> WorkingState:
    row = conn.execute(
        "SELECT state, revision FROM working_state WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        _session_row(conn, session_id)
        return WorkingState()
    state = msgspec.json.decode(row[0], type=WorkingState)
    state.revision = row[1]
    return state


def patch_working_state(
    current: WorkingState,
    *,
    goals: list[str] | None = None,
    open_threads: list[str] | None = None,
    decisions: list[str] | None = None,
    notes: Mapping[str, str] | None = None,
) -> WorkingState:
    """The next revision: given lists replace, ``notes`` merge by section ("" removes one).

    Over a cap → ``TooLarge`` (see ``check_working_state``).
    """
    merged = dict(current.notes)
    for section, text in (notes or {}).items():
        if text:
            merged[section] = text
        else:
            merged.pop(section, None)
    make_room_for_client_notes(merged, set(notes or ()))
    state = WorkingState(
        goals=list(current.goals if goals is None else goals),
        open_threads=list(current.open_threads if open_threads is None else open_threads),
        decisions=list(current.decisions if decisions is None else decisions),
        notes=merged,
        revision=current.revision + 1,
    )
    check_working_state(state)
    return state


def check_working_state(state: WorkingState) -> None:
    """Enforce the working-state caps: ``TooLarge`` or ``InvalidParams`` when over."""
    for field, items, cap in (
        ("goals", state.goals, MAX_GOALS),
        ("openThreads", state.open_threads, MAX_OPEN_THREADS),
        ("decisions", state.decisions, MAX_DECISIONS),
    ):
        if len(items) > cap:
            raise TooLarge(f"at most {cap} {field}", field=field, limit=cap, count=len(items))
    unknown = sorted(set(state.notes) - set(NOTE_SECTIONS))
    if unknown:
        raise InvalidParams("unknown note section", sections=unknown, allowed=list(NOTE_SECTIONS))
    total = 0
    for section, text in state.notes.items():
        tokens = estimate_tokens(text)
        if tokens > MAX_NOTE_SECTION_TOKENS:
            raise TooLarge(
                "a note section is over its token cap",
                field="notes",
                section=section,
                limit=MAX_NOTE_SECTION_TOKENS,
                tokens=tokens,
            )
        total += tokens
    if total > MAX_NOTES_TOKENS:
        raise TooLarge(
            "the notes are over their token cap",
            field="notes",
            limit=MAX_NOTES_TOKENS,
            tokens=total,
        )


def _checkpoint(row: Sequence[Any]) -> Checkpoint:
    return Checkpoint(
        checkpoint_id=row[0],
        session_id=row[1],
        boundary_seq=row[2],
        coverage=Coverage(from_seq=row[3], to_seq=row[4]),
        covered_hash=row[5],
        summary=row[6],
        summary_tokens=row[7],
        preserved_from_seq=row[8],
        mode=row[9],
        reason=row[10],
        created_at=row[11],
    )


def _replay(conn: sqlite3.Connection, request_id: str, method: str, kind: type[_T]) -> _T | None:
    row = conn.execute("SELECT method, result FROM requests WHERE request_id = ?", (request_id,)).fetchone()
    if row is None:
        return None
    if row[0] != method:
        raise Conflict("the requestId was used by another method", requestId=request_id)
    return msgspec.json.decode(bytes(row[1]), type=kind)


def _guard_request(conn: sqlite3.Connection, request: RequestRecord | None) -> None:
    """Refuse a write whose request was already applied (the caller replays the stored result)."""
    if request is None:
        return
    seen = conn.execute("SELECT 1 FROM requests WHERE request_id = ?", (request.request_id,)).fetchone()
    if seen is not None:
        raise Conflict("this request was already applied", requestId=request.request_id, reason="duplicate")


def _store_request(conn: sqlite3.Connection, request: RequestRecord | None, at: int) -> None:
    if request is not None:
        conn.execute(
            "INSERT INTO requests (request_id, method, result, ts) VALUES (?, ?, ?, ?)",
            (request.request_id, request.method, request.result, at),
        )
