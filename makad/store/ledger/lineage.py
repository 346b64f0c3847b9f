"""The daemon's record of what happened to memory: lineage steps, rejections, intents
(multi-step operations a restart finishes) and idempotency records (request results)."""

from __future__ import annotations

import functools
import secrets
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final, TypeVar, cast

import msgspec

from makad.core.redaction import redact_tree
from makad.core.refs import SourceRef
from makad.core.types import MemoryEvent, NewMemoryEvent
from makad.errors import Conflict, InvalidParams, NotFound
from makad.store.ledger.base import LedgerBase, now_ms
from makad.store.ledger.records import (
    MEMORY_ACTIONS,
    MEMORY_ACTORS,
    Intent,
    Rejection,
    RequestRecord,
    StoredRequest,
)

_MEMORY_EVENT_COLUMNS: Final = "id, ts, action, actor, entry_id, proposal_id, data"
_INTENT_COLUMNS: Final = "id, kind, payload, state, ts, finished_at"

_T = TypeVar("_T")

# One read answers for every source ref of a call: each row of the JSON array is
# [kind, target, to_seq] (its key the index); a row comes back for each ref that names nothing stored,
# with the session's last seq when the session exists but the ref runs past it.
_UNRESOLVED_REFS: Final = """
SELECT r.key, r.kind, s.last_seq FROM (
    SELECT key, json_extract(value, '$[0]') AS kind, json_extract(value, '$[1]') AS target,
        json_extract(value, '$[2]') AS last FROM json_each(?)
) AS r
LEFT JOIN sessions AS s ON r.kind = 'event' AND s.session_id = r.target
WHERE CASE r.kind
    WHEN 'event' THEN s.session_id IS NULL OR r.last > s.last_seq
    WHEN 'checkpoint' THEN NOT EXISTS (SELECT 1 FROM checkpoints WHERE checkpoint_id = r.target)
    WHEN 'episode' THEN NOT EXISTS (
        SELECT 1 FROM episodes WHERE episode_id = r.target AND deleted_at IS NULL)
    WHEN 'memory' THEN NOT EXISTS (SELECT 1 FROM memory_events WHERE entry_id = r.target)
    ELSE 1 END
ORDER BY r.key
"""


class LineageArea(LedgerBase):
    """Memory lineage, rejections, intents and request records."""

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
        _check_event(action, actor, entry_id, proposal_id)
        at = now_ms() if ts is None else ts
        encoded = None if data is None else msgspec.json.encode(dict(data)).decode()
        with self._writing() as conn:
            guard_request(conn, request)
            cursor = conn.execute(
                "INSERT INTO memory_events (ts, entry_id, action, actor, proposal_id, data)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (at, entry_id, action, actor, proposal_id, encoded),
            )
            store_request(conn, request, at)
        return int(cast(int, cursor.lastrowid))

    def record_lineage(
        self,
        events: Sequence[NewMemoryEvent],
        *,
        rejected: Mapping[str, str] | None = None,
        reason: str = "",
        finish_intent: str | None = None,
        request: RequestRecord | None = None,
        relaxed: bool = False,
    ) -> None:
        """The ledger's part of a memory operation, in one transaction (one fsync): its
        lineage steps; ``rejected`` contents (hash -> proposal id; a content rejected
        before keeps its first reason); the intent it completes; its idempotency record.
        A crash leaves all of it or none. ``relaxed``: no fsync of its own (a durable
        commit the caller makes next fsyncs it too; a power cut in between may lose it)."""
        at = now_ms()
        rows = _lineage_rows(events, at)
        if not rows and not rejected and finish_intent is None and request is None:
            return
        with self._writing(relaxed=relaxed) as conn:
            guard_request(conn, request)
            _insert_lineage(conn, rows)
            conn.executemany(
                "INSERT OR IGNORE INTO rejections (content_hash, proposal_id, reason, ts)"
                " VALUES (?, ?, ?, ?)",
                [(digest, proposal_id, reason, at) for digest, proposal_id in (rejected or {}).items()],
            )
            if finish_intent is not None:
                _finish_intent(conn, finish_intent, "done", at)
            store_request(conn, request, at)

    def record_lineage_with_next_write(self, events: Sequence[NewMemoryEvent]) -> None:
        """Lineage steps kept for the ledger's next write, whichever it is (the disk had no
        room for them now), stamped with the time they happened."""
        at = now_ms()
        rows = _lineage_rows(events, at)
        if rows:
            self.with_next_write(f"lineage:{at}:{id(rows)}", functools.partial(_insert_lineage, rows=rows))

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

    def unresolved_refs(self, refs: Sequence[SourceRef]) -> list[tuple[SourceRef, int | None]]:
        """The refs among ``refs`` that name nothing in this ledger, in order, each with the
        last seq of the session an ``event:`` ref names when that session exists (None
        otherwise): an ``event:`` ref needs its session and every seq up to the last
        recorded one; ``checkpoint:`` a checkpoint; ``episode:`` an episode whose session
        was not deleted; ``memory:`` an entry the lineage knows. One read for them all."""
        if not refs:
            return []
        rows = [[ref.kind, ref.target, ref.last] for ref in refs]
        with self._reading() as conn:
            found = conn.execute(_UNRESOLVED_REFS, (msgspec.json.encode(rows).decode(),)).fetchall()
        return [(refs[int(key)], None if last is None else int(last)) for key, _, last in found]

    def lineage_ids_starting(self, prefixes: Sequence[str], limit: int = 20) -> list[str]:
        """The entry and proposal ids in the lineage that start with one of ``prefixes``
        (at most ``limit``, in id order)."""
        found: set[str] = set()
        with self._reading() as conn:
            for prefix in dict.fromkeys(p for p in prefixes if p):
                for column in ("entry_id", "proposal_id"):
                    rows = conn.execute(
                        f"SELECT DISTINCT {column} FROM memory_events"
                        f" WHERE substr({column}, 1, ?) = ? ORDER BY {column} LIMIT ?",
                        (len(prefix), prefix, limit),
                    ).fetchall()
                    found.update(str(r[0]) for r in rows)
        return sorted(found)[:limit]

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
            guard_request(conn, request)
            conn.execute(
                "INSERT OR REPLACE INTO rejections (content_hash, proposal_id, reason, ts)"
                " VALUES (?, ?, ?, ?)",
                (content_hash, proposal_id, reason, at),
            )
            store_request(conn, request, at)
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
            _finish_intent(conn, intent_id, state, at)

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


def _check_event(action: str, actor: str, entry_id: str | None, proposal_id: str | None) -> None:
    if action not in MEMORY_ACTIONS:
        raise InvalidParams("unknown memory action", action=action)
    if actor not in MEMORY_ACTORS:
        raise InvalidParams("unknown memory actor", actor=actor)
    if entry_id is None and proposal_id is None:
        raise InvalidParams("a memory event needs an entry id or a proposal id")


def _finish_intent(conn: sqlite3.Connection, intent_id: str, state: str, at: int) -> None:
    cursor = conn.execute(
        "UPDATE intents SET state = ?, finished_at = ? WHERE id = ? AND state = 'open'",
        (state, at, intent_id),
    )
    if (
        cursor.rowcount == 0
        and not conn.execute("SELECT 1 FROM intents WHERE id = ?", (intent_id,)).fetchone()
    ):
        raise NotFound("no such intent", intentId=intent_id)


def replay_request(conn: sqlite3.Connection, request_id: str, method: str, kind: type[_T]) -> _T | None:
    row = conn.execute("SELECT method, result FROM requests WHERE request_id = ?", (request_id,)).fetchone()
    return None if row is None else replayed(row[0], row[1], request_id, method, kind)


def replayed(stored_method: Any, result: Any, request_id: str, method: str, kind: type[_T]) -> _T:
    """The stored result of a request seen before (``requests``' method and result)."""
    if stored_method != method:
        raise Conflict("the requestId was used by another method", requestId=request_id)
    return msgspec.json.decode(bytes(result), type=kind)


def guard_request(conn: sqlite3.Connection, request: RequestRecord | None) -> None:
    """Refuse a write whose request was already applied (the caller replays the stored result)."""
    if request is None:
        return
    seen = conn.execute("SELECT 1 FROM requests WHERE request_id = ?", (request.request_id,)).fetchone()
    if seen is not None:
        raise Conflict("this request was already applied", requestId=request.request_id, reason="duplicate")


def store_request(conn: sqlite3.Connection, request: RequestRecord | None, at: int) -> None:
    if request is not None:
        conn.execute(
            "INSERT INTO requests (request_id, method, result, ts) VALUES (?, ?, ?, ?)",
            (request.request_id, request.method, request.result, at),
        )


def _lineage_rows(events: Sequence[NewMemoryEvent], at: int) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for event in events:
        _check_event(event.action, event.actor, event.entry_id, event.proposal_id)
        encoded = None if event.data is None else msgspec.json.encode(event.data).decode()
        rows.append((at, event.entry_id, event.action, event.actor, event.proposal_id, encoded))
    return rows


def _insert_lineage(conn: sqlite3.Connection, rows: list[tuple[object, ...]]) -> None:
    conn.executemany(
        "INSERT INTO memory_events (ts, entry_id, action, actor, proposal_id, data)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        rows,
    )
