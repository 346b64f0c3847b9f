"""Episodes and their consolidations: the evidence behind profile proposals.

``episodes.id`` is the recording order (an episode's ``ordinal``); a tag's offset
is the last ordinal already consolidated for it (schema step 2 in
``makad.store.ledger.schema``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, cast

import msgspec

from makad.core.cjk import match_expression
from makad.core.refs import EventSpan, episode_ref, parse_event_refs
from makad.core.types import ConsolidationMark, ConsolidationState, EpisodeRecord, NewEpisode, RefResult
from makad.errors import InvalidParams, NotFound
from makad.store.ledger.base import LedgerBase, now_ms
from makad.store.ledger.lineage import replay_request, store_request
from makad.store.ledger.records import AddedEpisode, RequestRecord
from makad.store.ledger.rows import retrieve_span, session_row
from makad.store.ledger.schema import episode_summary_key


class EpisodesArea(LedgerBase):
    """Episodes, the evidence per tag and the consolidations that cite them."""

    def add_episode(
        self, new: NewEpisode, *, request_id: str | None = None, now: int | None = None
    ) -> AddedEpisode:
        """Record an episode of a stored session, in one transaction.

        Every source ref must name stored events that verify against the chain
        (else ``InvalidParams`` at ``$.sourceRefs[i]`` naming the ref, with ``data.reason``
        ``unknown_session``, ``past_last_seq`` or ``not_intact``); the session must exist
        (``NotFound``). A ref given twice is kept once.
        The same remark (summary, case and spacing aside) is one episode per session:
        recording it again returns the first one with ``created=False``. A
        ``request_id`` seen before returns the first result.
        """
        at = now_ms() if now is None else now
        spans = parse_event_refs(new.source_refs, "$.sourceRefs")
        key = episode_summary_key(new.session_id, new.summary)
        with self._writing() as conn:
            if request_id is not None:
                replay = replay_request(conn, request_id, "record_episode", AddedEpisode)
                if replay is not None:
                    return replay
            session_row(conn, new.session_id)
            for position, span in enumerate(spans):
                found = retrieve_span(conn, span)
                if not found.ok:
                    raise unintact_ref(conn, position, span, found)
            spans = list({span[0]: span for span in spans}.values())  # each ref once, in order
            row = conn.execute("SELECT id FROM episodes WHERE summary_key = ?", (key,)).fetchone()
            if row is not None:
                result = AddedEpisode(episode=load_episodes(conn, [int(row[0])])[0], created=False)
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
                result = AddedEpisode(episode=load_episodes(conn, [ordinal])[0], created=True)
            if request_id is not None:
                store_request(
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
            return load_episodes(conn, [int(r[0]) for r in rows])

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
            loaded = {e.ordinal: e for e in load_episodes(conn, sorted({int(r[1]) for r in rows}))}
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
                    "sourceRefs": [episode_ref(eid) for _, eid in cited],
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


def load_episodes(conn: sqlite3.Connection, ordinals: Sequence[int]) -> list[EpisodeRecord]:
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


def tombstone_episodes(conn: sqlite3.Connection, session_id: str, at: int) -> None:
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


def unintact_ref(conn: sqlite3.Connection, position: int, span: EventSpan, found: RefResult) -> InvalidParams:
    """The refusal of an episode's source ref whose events are not all stored and intact."""
    row = conn.execute("SELECT last_seq FROM sessions WHERE session_id = ?", (span[1],)).fetchone()
    last_seq = None if row is None else int(row[0])
    reason = (
        "unknown_session" if last_seq is None else "past_last_seq" if span[3] > last_seq else "not_intact"
    )
    return InvalidParams(
        "a source ref does not name stored, intact events",
        path=f"$.sourceRefs[{position}]",
        reason=reason,
        ref=span[0],
        missingSeqs=found.missing_seqs,
        mismatchedSeqs=found.mismatched_seqs,
        **({} if last_seq is None else {"lastSeq": last_seq}),
    )
