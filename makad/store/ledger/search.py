"""Full-text search: BM25 over the events (recall, search_history) and the memory index.

Both indexes are FTS5 tables whose rows are ``makad.core.cjk.index_text`` of the
text; the event index is contentless (the text lives once, in ``events``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from makad.core.cjk import index_text, match_expression, query_terms
from makad.core.types import Entry, SearchHit
from makad.store.ledger.base import live
from makad.store.ledger.rows import E_EVENT_COLUMNS, event_row, reindex_events
from makad.store.ledger.schema import SEARCH_TEXT_VERSION
from makad.store.ledger.sessions import SessionsArea

MAX_SEARCH_LIMIT: Final = 1_000
SEARCH_WINDOW: Final = 10_000
# Query pruning (see Ledger._selective_match): below this size every term is ranked.
SMALL_LEDGER_EVENTS: Final = 20_000
COMMON_TERM_SHARE: Final = 0.05
# In a small ledger a share means a handful of events: no term found in fewer is common.
COMMON_TERM_FLOOR: Final = 50
MAX_RANKED_TERMS: Final = 8
# Past the window, the share of it given to every match of the rarest terms, however old.
RARE_SHARE: Final = 0.5
DF_CACHE_SIZE: Final = 50_000
_MAX_ROWID: Final = 2**63 - 1


class SearchArea(SessionsArea):
    """Ranked search over the events and the memory entries."""

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
        window: int | None = None,
    ) -> list[SearchHit]:
        """The recall building block: ranked events, optionally only up to a seq per session.

        ``max_seq_by_session={s: b}`` keeps only events of ``s`` with seq <= b
        (e.g. the compacted-away part of the current session) while other
        sessions are unrestricted; ``exclude_sessions`` drops sessions entirely.
        When more than ``window`` (default ``SEARCH_WINDOW``) events pass the
        filters, what is ranked is bounded by it, whatever the ledger's size: every
        match of the query's rarest terms (those whose matches add up to at most
        ``RARE_SHARE`` of the window, however old: scored on those terms alone) and
        the newest matches of the rest, ``window`` in all. ``rare_only`` drops
        the common terms (see ``_selective_match``) whatever the ledger's size,
        and searches nothing when no other term is left.
        """
        if limit <= 0:
            return []
        window = SEARCH_WINDOW if window is None else max(window, 1)
        with self._read_lock_awake():
            found = self._selective_match(query, rare_only=rare_only, window=window)
        if found is None:
            return []
        match, most = found.expression, found.most
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
            # Past ``window`` matches, what is ranked is bounded: every match of the
            # rarest terms (``rare``, at most half the window's worth, however old),
            # and the newest of the rest's matches.
            rare, rare_count = _rare_prefix(found.counted, int(window * RARE_SHARE))
            newest = window - rare_count
            # The rowid of the newest part's oldest event: FTS5 walks the doclists
            # newest first and stops there, without scoring anything. Filters
            # apply first (the live session must not eat the window). Walking
            # costs as much as there are matches: not done when the counts behind
            # the match (``most``) show there cannot be a window's worth.
            overflow = True
            if most is not None:
                grown = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
                overflow = most.matches + max(grown - most.total, 0) >= newest
            floor = _window_floor(conn, match, low, high, "", [], newest) if overflow else None
            if floor is not None and where:
                if session_id is None and before is None and after is None:
                    spans = _excluded_spans(conn, excluded, max_seq_by_session or {})
                    floor = _filtered_floor(conn, match, low, high, where, params, newest, spans, floor)
                else:
                    floor = _window_floor(conn, match, low, high, where, params, newest)
            # Each part as (expression, first rowid, last rowid): the window, and the rare
            # terms' older matches (scored on those terms: the common terms left out
            # weigh little, their IDF being low by definition).
            parts = [(match, low, high)]
            if floor is not None:
                parts = [(match, floor, high)]
                if rare is not None and floor > low:
                    parts.append((rare, low, floor - 1))
            ranking = " UNION ALL ".join(
                "SELECT rowid, bm25(events_fts) AS score FROM events_fts"
                " WHERE events_fts MATCH ? AND rowid BETWEEN ? AND ?"
                for _ in parts
            )
            if len(parts) > 1:
                ranking = f"SELECT rowid, score FROM ({ranking})"
            bounds = [value for part in parts for value in part]
            wanted = min(limit, MAX_SEARCH_LIMIT)
            # Rank in the index alone, then read (and filter) only the best rows:
            # joining every match to its event row cost more than scoring it.
            # Filtered-out rows (the live part of the current session, mostly) can
            # crowd the top, so the fetch grows until enough pass or none are left.
            fetch = max(wanted * 2, 64) if where else wanted
            while True:
                ranked = conn.execute(f"{ranking} ORDER BY score, rowid LIMIT ?", (*bounds, fetch)).fetchall()
                rows = conn.execute(
                    f"SELECT e.id, {E_EVENT_COLUMNS} FROM events AS e"
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
                hits.append(SearchHit(event=event_row(row), score=-float(score)))
                if len(hits) == wanted:
                    break
        return hits

    def newest_events(
        self, *, limit: int, before_id: int | None = None, max_seq_by_session: Mapping[str, int] | None = None
    ) -> list[tuple[int, SearchHit]]:
        """The newest events (by when they were appended), newest first, each with its row id
        (pass the last one as ``before_id`` to read on); ``max_seq_by_session`` as in
        ``search_events_ranked``. What the recency strategies recall from."""
        clauses: list[str] = []
        params: list[Any] = []
        if before_id is not None:
            clauses.append("e.id < ?")
            params.append(before_id)
        for sid, max_seq in (max_seq_by_session or {}).items():
            clauses.append("NOT (e.session_id = ? AND e.seq > ?)")
            params.extend((sid, max_seq))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._reading() as conn:
            rows = conn.execute(
                f"SELECT e.id, {E_EVENT_COLUMNS} FROM events AS e{where} ORDER BY e.id DESC LIMIT ?",
                [*params, max(limit, 0)],
            ).fetchall()
        return [(row[0], SearchHit(event=event_row(row), score=0.0)) for row in rows]

    def _selective_match(
        self, query: str, *, rare_only: bool = False, window: int = SEARCH_WINDOW
    ) -> _Match | None:
        """The query's terms minus the very common ones, the rarest first (reader lock held),
        with their counts and at most how many events the match can find, when counted;
        None when no term is left.

        Ranking cost grows with the number of matching rows; a term found in more
        than ``COMMON_TERM_SHARE`` of all events adds rows while barely moving
        BM25 (its IDF is near zero), so it is dropped when rarer terms remain, and
        at most ``MAX_RANKED_TERMS`` of the rarest are kept. Document frequencies
        are counted once and cached until the ledger has doubled in size. A small
        ledger keeps every term in the query's order, and counts them only when it
        holds a ``window`` of events (the search then needs the counts).
        """
        terms = query_terms(query)
        if len(terms) <= 1 and not rare_only:
            return None if not terms else _Match(terms[0], (), None)
        conn = live(self._reader)
        total = conn.execute("SELECT max(id) FROM events").fetchone()[0] or 0
        if total < SMALL_LEDGER_EVENTS and not rare_only:
            if total < window:
                return _Match(" OR ".join(terms), (), _Most(total, total))
            counts = {term: self._document_frequency(conn, term, total) for term in terms}
            counted = tuple(sorted(((t, counts[t][0]) for t in terms), key=lambda tc: (tc[1], tc[0])))
            since = min(count[1] for count in counts.values())
            return _Match(
                " OR ".join(terms), counted, _Most(sum(c for _, c in counted) + total - since, total)
            )
        counted_all = {term: self._document_frequency(conn, term, total, capped=rare_only) for term in terms}
        frequency = {term: count for term, (count, _) in counted_all.items()}
        common = max(total * COMMON_TERM_SHARE, COMMON_TERM_FLOOR)
        rare = [t for t in terms if frequency[t] <= common]
        if rare_only and not rare:
            return None
        kept = sorted(rare or terms, key=lambda t: (frequency[t], t))[:MAX_RANKED_TERMS]
        # Each count holds every match up to the newest event when it was counted;
        # events added since can add at most one match each.
        since = min(counted_all[t][1] for t in kept)
        return _Match(
            " OR ".join(kept),
            tuple((t, frequency[t]) for t in kept),
            _Most(sum(frequency[t] for t in kept) + total - since, total),
        )

    def _document_frequency(
        self, conn: sqlite3.Connection, term: str, total: int, *, capped: bool = False
    ) -> tuple[int, int]:
        """Events matching ``term``, and the newest event id when they were counted.

        ``capped`` (the expansion's words, ``rare_only``): counting stops past twice the
        common share, so the count says "common" for as long as it is cached (until the
        ledger has doubled) without walking every match of a frequent word (tens of
        thousands at 100k events; a query's expansion words mostly are such words, and
        only rare ones are kept). Such a count is more than the share, not the number.
        """
        cached = self._df_cache.get(term)
        if cached is not None and total < cached[1] * 2 and (cached[2] or capped):
            return cached[0], cached[1]
        if capped:
            cap = int(max(2 * total * COMMON_TERM_SHARE, COMMON_TERM_FLOOR)) + 1
            row = conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM events_fts WHERE events_fts MATCH ? LIMIT ?)",
                (term, cap),
            ).fetchone()
            count = int(row[0])
            whole = count < cap
        else:
            row = conn.execute("SELECT count(*) FROM events_fts WHERE events_fts MATCH ?", (term,)).fetchone()
            count, whole = int(row[0]), True
        if len(self._df_cache) > DF_CACHE_SIZE:
            self._df_cache.clear()
        self._df_cache[term] = (count, total, whole)
        return count, total

    def rebuild_search_index(self) -> None:
        """Re-derive the event index from the events; clear the memory index."""
        with self._writing() as conn:
            reindex_events(conn)
            conn.execute("DELETE FROM memory_fts")
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('search_text_version', ?)",
                (SEARCH_TEXT_VERSION,),
            )

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

    def search_memory(
        self, query: str, limit: int = 20, *, words: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """``(entry_id, score)`` best first; score is the negated bm25 (title weighs 2x).
        ``words``: search these words (any of them), each as it is, instead of the query."""
        match = match_expression(query) if words is None else _any_of(words)
        if match is None or limit <= 0:
            return []
        with self._reading() as conn:
            rows = conn.execute(
                "SELECT entry_id, bm25(memory_fts, 0.0, 2.0, 1.0, 1.5) AS score FROM memory_fts"
                " WHERE memory_fts MATCH ? ORDER BY score LIMIT ?",
                (match, min(limit, MAX_SEARCH_LIMIT)),
            ).fetchall()
        return [(str(entry_id), -float(score)) for entry_id, score in rows]


def _any_of(words: Sequence[str]) -> str | None:
    """An FTS5 expression matching any of ``words``, each quoted (never FTS5 syntax)."""
    quoted = ['"' + word.replace('"', '""') + '"' for word in words if word.strip()]
    return " OR ".join(quoted) if quoted else None


class _Most(NamedTuple):
    """At most ``matches`` events match, as of the newest event id ``total``."""

    matches: int
    total: int


class _Match(NamedTuple):
    """A search's FTS5 expression, its terms with their counts (the rarest first; empty
    when not counted), and at most how many events it matches (None: not known)."""

    expression: str
    counted: tuple[tuple[str, int], ...]
    most: _Most | None


def _rare_prefix(counted: Sequence[tuple[str, int]], cap: int) -> tuple[str | None, int]:
    """The expression of the rarest terms whose matches add up to at most ``cap`` (None
    when not even the rarest fits, or every term does: then there is nothing to split),
    and how many matches they have."""
    total = 0
    taken: list[str] = []
    for term, count in counted:
        if total + count > cap:
            break
        taken.append(term)
        total += count
    if not taken or len(taken) == len(counted):
        return None, 0
    return " OR ".join(taken), total


def _excluded_spans(
    conn: sqlite3.Connection, excluded: Sequence[str], max_seq_by_session: Mapping[str, int]
) -> list[tuple[int, int]]:
    """The id ranges holding every event the session filters drop, merged: each excluded
    session's, and each capped session's events past its seq. Ids grow with seq within a
    session, so each range is two index seeks, whatever its length."""
    parts = [(sid, 0) for sid in excluded] + list(max_seq_by_session.items())
    spans: list[tuple[int, int]] = []
    for sid, above in parts:
        first = conn.execute(
            "SELECT id FROM events WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT 1", (sid, above)
        ).fetchone()
        if first is None:
            continue
        last = conn.execute(
            "SELECT id FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (sid,)
        ).fetchone()
        spans.append((int(first[0]), int(last[0])))
    merged: list[tuple[int, int]] = []
    for lo, hi in sorted(spans):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    return merged


def _filtered_floor(
    conn: sqlite3.Connection,
    match: str,
    low: int,
    high: int,
    where: str,
    params: Sequence[Any],
    window: int,
    spans: Sequence[tuple[int, int]],
    floor: int,
) -> int | None:
    """``_window_floor`` with the session filters, without joining every walked match to its
    event: only the matches inside ``spans`` (where the filtered-out events are) are checked.

    From the unfiltered floor, the walk goes ``dropped`` matches further, ``dropped`` being
    how many matches from the floor up fail the filters, until that count stops growing:
    the floor then has exactly ``window`` passing matches above it, the same ones the
    joined walk finds, so ranking from it (the filters applied to the ranked rows) gives
    the same hits."""
    dropped = 0
    while True:
        failing = 0
        for lo, hi in spans:
            lo, hi = max(lo, floor), min(hi, high)
            if lo > hi:
                continue
            row = conn.execute(
                "SELECT count(*) FROM events_fts AS f CROSS JOIN events AS e ON e.id = f.rowid"
                f" WHERE events_fts MATCH ? AND f.rowid BETWEEN ? AND ? AND NOT (1{where})",
                [match, lo, hi, *params],
            ).fetchone()
            failing += int(row[0])
        if failing == dropped:
            return floor
        dropped = failing
        found = _window_floor(conn, match, low, high, "", [], window + dropped)
        if found is None:
            return None
        floor = found


def _window_floor(
    conn: sqlite3.Connection, match: str, low: int, high: int, where: str, params: Sequence[Any], window: int
) -> int | None:
    """The rowid of the ``window``-th newest match passing ``where``, if there are that many."""
    joined = " CROSS JOIN events AS e ON e.id = f.rowid" if where else ""
    row = conn.execute(
        f"SELECT f.rowid FROM events_fts AS f{joined}"
        f" WHERE events_fts MATCH ? AND f.rowid BETWEEN ? AND ?{where}"
        " ORDER BY f.rowid DESC LIMIT 1 OFFSET ?",
        [match, low, high, *params, window - 1],
    ).fetchone()
    return None if row is None else int(row[0])
