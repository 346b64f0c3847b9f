"""What a session's turns leave behind: its working state, the manifests of its
build_context calls, and its compaction checkpoints."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from makad.core.types import Checkpoint, Coverage, CuratorTrace, Manifest, ManifestItem, WorkingState
from makad.core.working_state import check_revision, patch_working_state
from makad.errors import Conflict, InvalidParams, NotFound
from makad.store.ledger.base import LedgerBase, now_ms
from makad.store.ledger.lineage import guard_request, replay_request, store_request
from makad.store.ledger.pack_state import add_session_memory
from makad.store.ledger.records import RequestRecord, ShownMemory
from makad.store.ledger.rows import session_info, session_row
from makad.store.ledger.shown_cache import ShownView

# Manifests of a session's earlier calls beyond these are dropped (what was shown is kept).
MANIFEST_CALLS_KEPT: Final = 64
_CHECKPOINT_COLUMNS: Final = (
    "checkpoint_id, session_id, boundary_seq, from_seq, to_seq, covered_hash, summary,"
    " summary_tokens, preserved_from_seq, mode, reason, created_at"
)


class TurnsArea(LedgerBase):
    """Working state, manifests and checkpoints."""

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
                replay = replay_request(conn, request_id, "set_working_state", WorkingState)
                if replay is not None:
                    return replay
            current = _working_state(conn, session_id)
            check_revision(session_id, expected_revision, current)
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
                store_request(conn, record, at)
            return state

    def record_manifest(
        self,
        session_id: str,
        call_id: str,
        items: Sequence[ManifestItem | tuple[str, int, str]],
        created_at: int | None = None,
        *,
        memory_bytes: int = 0,
        since: int = 0,
        curator: bytes | None = None,
    ) -> Manifest:
        """Record what one build_context call sent; recording a call id again replaces it.

        Items with a content hash (memory entries) also update what the session
        has been shown (``shown_memory``), and ``memory_bytes`` (their size) the
        session's total since ``since``, its latest compaction
        (``session_memory_bytes``). Only the latest
        ``MANIFEST_CALLS_KEPT`` calls of a session are kept. ``curator``: the
        curator's record of the call (JSON), kept with it (``get_manifest`` returns it).
        A session deleted meanwhile (the call read it before ``delete_session``) records
        nothing: its forget stands.
        """
        at = now_ms() if created_at is None else created_at
        listed = [
            item
            if isinstance(item, ManifestItem)
            else ManifestItem(source_id=item[0], tokens=item[1], content_hash=item[2])
            for item in items
        ]
        manifest = Manifest(session_id=session_id, call_id=call_id, created_at=at, items=listed)
        with self._writing(relaxed=True) as conn:
            if conn.execute("SELECT 1 FROM tombstones WHERE session_id = ?", (session_id,)).fetchone():
                return manifest
            delete_manifest_calls(
                conn,
                "SELECT id FROM manifest_calls WHERE session_id = ? AND call_id = ?",
                (session_id, call_id),
            )
            cursor = conn.execute(
                "INSERT INTO manifest_calls (session_id, call_id, created_at) VALUES (?, ?, ?)",
                (session_id, call_id, at),
            )
            ref = cursor.lastrowid
            if curator is not None:
                conn.execute("INSERT INTO manifest_curator (call_ref, record) VALUES (?, ?)", (ref, curator))
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
            delete_manifest_calls(
                conn,
                "SELECT id FROM manifest_calls WHERE session_id = ? ORDER BY id DESC LIMIT -1 OFFSET ?",
                (session_id, MANIFEST_CALLS_KEPT),
            )
            add_session_memory(conn, session_id, since, call_id, memory_bytes)
            shown = [
                (i.source_id, i.content_hash) for i in listed if i.content_hash and _is_memory(i.source_id)
            ]
            self._on_commit.append(
                lambda: self._shown_cache.recorded(session_id, int(ref or 0), call_id, shown, at)
            )
        return manifest

    def shown_memory(self, session_id: str, since: int, among: Sequence[str] | None) -> ShownMemory:
        """Which of the sources ``among`` (None: every memory entry, ``memory:…``) the session
        was shown at or after ``since`` (ms), the latest version of each."""
        with self._reading() as conn:
            head = conn.execute(
                "SELECT id, call_id FROM manifest_calls WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            if among is None:
                # A range of the primary key: ';' is the character after ':'.
                rows = conn.execute(
                    "SELECT source_id, content_hash, call_ref FROM manifest_shown"
                    " WHERE session_id = ? AND source_id >= 'memory:' AND source_id < 'memory;'"
                    " AND shown_at >= ?",
                    (session_id, since),
                ).fetchall()
            else:
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

    def shown_since(self, session_id: str, since: int, call_id: str) -> ShownView:
        """The memory entries (``memory:<id>`` → hash shown) the session was shown at or after
        ``since`` (ms), the latest version of each; a repeat of the session's latest call
        (``call_id``) does not count what that call showed. Served from memory while the
        session's rows are cached (``shown_cache``): in a long session they are thousands."""
        cache = self._shown_cache
        found = cache.get(session_id)
        if found is None:
            version = cache.version()
            with self._reading() as conn:
                head = conn.execute(
                    "SELECT id, call_id FROM manifest_calls WHERE session_id = ? ORDER BY id DESC LIMIT 1",
                    (session_id,),
                ).fetchone()
                rows = conn.execute(
                    "SELECT source_id, content_hash, call_ref, shown_at FROM manifest_shown"
                    " WHERE session_id = ? AND source_id >= 'memory:' AND source_id < 'memory;'",
                    (session_id,),
                ).fetchall()
            found = cache.put(
                session_id,
                version,
                {source: (digest, ref, at) for source, digest, ref, at in rows},
                (head[0], head[1]) if head else None,
            )
        if found.latest is not None and found.latest[1] == call_id:
            skip = found.latest[0]
            return ShownView(
                since,
                {s: d for s, (d, ref, at) in found.rows.items() if at >= since and ref != skip},
            )
        return cache.view(found, session_id, since)

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
            curator = conn.execute(
                "SELECT record FROM manifest_curator WHERE call_ref = ?", (head[0],)
            ).fetchone()
        return Manifest(
            session_id=session_id,
            call_id=head[1],
            created_at=head[2],
            items=[ManifestItem(source_id=s, tokens=t, content_hash=h) for s, t, h in items],
            curator=_curator_trace(curator[0]) if curator is not None else None,
        )

    def add_checkpoint(self, checkpoint: Checkpoint, *, request: RequestRecord | None = None) -> Checkpoint:
        """Store a compaction checkpoint in one transaction, after checking it fits the chain.

        Its range must lie within the session's events and ``covered_hash`` must be
        the stored hash of the last covered event (see ``core.compaction.covered_hash``).
        """
        cp = checkpoint
        first, last = cp.coverage.from_seq, cp.coverage.to_seq
        with self._writing() as conn:
            guard_request(conn, request)
            info = session_info(session_row(conn, cp.session_id))
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
            store_request(conn, request, cp.created_at)
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


def _curator_trace(record: bytes) -> CuratorTrace | None:
    """A stored curator record; None when it cannot be read as one (a damaged row), so
    the manifest is still served."""
    try:
        return msgspec.json.decode(record, type=CuratorTrace)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _is_memory(source: str) -> bool:
    """Whether a manifest source is a memory entry (what ``shown_since`` reads)."""
    return "memory:" <= source < "memory;"


def delete_manifest_calls(conn: sqlite3.Connection, select_ids: str, params: tuple[Any, ...]) -> None:
    """Delete the manifest calls (and their items) whose ids ``select_ids`` returns."""
    conn.execute(f"DELETE FROM manifest_items WHERE call_ref IN ({select_ids})", params)
    conn.execute(f"DELETE FROM manifest_curator WHERE call_ref IN ({select_ids})", params)
    conn.execute(f"DELETE FROM manifest_calls WHERE id IN ({select_ids})", params)


def _working_state(conn: sqlite3.Connection, session_id: str) -> WorkingState:
    row = conn.execute(
        "SELECT state, revision FROM working_state WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        session_row(conn, session_id)
        return WorkingState()
    state = msgspec.json.decode(row[0], type=WorkingState)
    state.revision = row[1]
    return state


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
