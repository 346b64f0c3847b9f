"""The recall inputs of build_context, read from a workspace's ledger.

``recall_hits`` runs the full-text search for a query (the best ``limit``
events), plus one search inside each period the query names (``in May 2023``,
``last week``: ``makad.core.when``), so that events of that time are
candidates even when words common elsewhere outrank them, plus one search for
the words its best hits share (``makad.core.feedback``: the answer often uses
the words of the turns that match, not the question's). Each search ranks a
bounded number of matches however large the ledger (``RECALL_WINDOW`` for the
question's, ``FEEDBACK_WINDOW`` for the expansion's): past it, every match of the
rarest words however old, and the newest of the rest
(``Ledger.search_events_ranked``), so a year of history costs what a month does.
It then reads the ``radius`` events on each side of
every hit, in a few range reads per session rather than one read per hit: the
pure core (``makad.core.recall``) scores a hit's neighbours too.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Final

from makad.core.context_types import RecallHit
from makad.core.feedback import feedback_terms, scaled_bm25
from makad.core.types import Event, SearchHit
from makad.core.when import query_periods
from makad.store.ledger import Ledger

RECALL_LIMIT: Final = 100
# The question's searches rank at most this many matches (see search_events_ranked):
# on a million events a call then costs about what it does on a hundred thousand.
RECALL_WINDOW: Final = 4_000
PERIOD_LIMIT: Final = 50
FEEDBACK_LIMIT: Final = 50
# The expansion ranks at most this many matches (see recall_hits).
FEEDBACK_WINDOW: Final = 1_000
RADIUS: Final = 2
# Neighbourhoods closer than this many events are read in one range.
MERGE_GAP: Final = 4


def _spans(seqs: Iterable[int], radius: int, ceiling: int | None) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for seq in sorted(set(seqs)):
        first, last = max(seq - radius, 1), seq + radius
        if ceiling is not None:
            last = min(last, ceiling)
        if spans and first <= spans[-1][1] + MERGE_GAP:
            spans[-1] = (spans[-1][0], max(spans[-1][1], last))
        else:
            spans.append((first, last))
    return spans


def recall_hits(
    ledger: Ledger,
    query: str,
    *,
    now_ms: int,
    limit: int = RECALL_LIMIT,
    radius: int = RADIUS,
    max_seq_by_session: Mapping[str, int] | None = None,
    exclude_sessions: Iterable[str] = (),
) -> list[RecallHit]:
    """FTS hits for ``query`` with their neighbours, best first (see module doc).

    ``max_seq_by_session`` and ``exclude_sessions`` are passed to the search
    (e.g. ``{current session: its checkpoint's to_seq}`` keeps out the live
    history); neighbours past such a ceiling are not read either.
    """
    excluded = list(exclude_sessions)

    def search(
        count: int,
        after: int | None = None,
        before: int | None = None,
        text: str = query,
        rare_only: bool = False,
        window: int = RECALL_WINDOW,
    ) -> list[SearchHit]:
        return ledger.search_events_ranked(
            text,
            limit=count,
            exclude_sessions=excluded,
            max_seq_by_session=max_seq_by_session,
            after=after,
            before=before,
            rare_only=rare_only,
            window=window,
        )

    found: dict[tuple[str, int], SearchHit] = {}
    first = search(limit)
    for hit in first:
        found.setdefault((hit.event.session_id, hit.event.seq), hit)
    expansion = feedback_terms(query, [(hit.event.text, hit.score) for hit in first])
    if expansion:
        # Only the rarer expansion words: the common ones the best hits share anyway
        # would match (and cost ranking) a large part of the ledger for little.
        # A second signal, scaled below the first: scoring all of its matches (thousands
        # on a large ledger, each by bm25 one by one) cost more than the question's own
        # search, so it ranks at most FEEDBACK_WINDOW of them.
        more = search(FEEDBACK_LIMIT, text=" ".join(expansion), rare_only=True, window=FEEDBACK_WINDOW)
        first_best = max(hit.score for hit in first)
        for hit, bm25 in zip(more, scaled_bm25((-h.score for h in more), first_best), strict=True):
            found.setdefault((hit.event.session_id, hit.event.seq), SearchHit(event=hit.event, score=-bm25))
    for period in query_periods(query, now_ms):
        if period.month is None:
            for hit in search(PERIOD_LIMIT, after=period.start_ms - 1, before=period.end_ms):
                found.setdefault((hit.event.session_id, hit.event.seq), hit)
    by_session: dict[str, list[int]] = defaultdict(list)
    for sid, seq in found:
        by_session[sid].append(seq)
    around: dict[tuple[str, int], Event] = {}
    ceilings = max_seq_by_session or {}
    spans = [
        (sid, first, last)
        for sid, seqs in by_session.items()
        for first, last in _spans(seqs, radius, ceilings.get(sid))
    ]
    for event in ledger.read_event_spans(spans):
        around[(event.session_id, event.seq)] = event
    hits = sorted(found.values(), key=lambda h: (-h.score, h.event.session_id, h.event.seq))
    out: list[RecallHit] = []
    for hit in hits:
        sid, seq = hit.event.session_id, hit.event.seq
        neighbours = [
            around[(sid, s)] for s in range(seq - radius, seq + radius + 1) if s != seq and (sid, s) in around
        ]
        out.append(RecallHit(event=hit.event, bm25=-hit.score, neighbours=neighbours))
    return out


NEWEST_READ: Final = 256


def newest_hits(
    ledger: Ledger, want_tokens: int, *, max_seq_by_session: Mapping[str, int] | None = None
) -> list[RecallHit]:
    """The newest events (``max_seq_by_session`` as in ``recall_hits``), newest first, until
    they cover ``want_tokens``: what the recency strategies choose from, sized by the budget
    so the read stays proportional to it, not to the ledger."""
    out: list[RecallHit] = []
    tokens = 0
    before: int | None = None
    while tokens < want_tokens:
        rows = ledger.newest_events(
            limit=NEWEST_READ, before_id=before, max_seq_by_session=max_seq_by_session
        )
        for _, hit in rows:
            out.append(RecallHit(event=hit.event, bm25=0.0))
            tokens += max(hit.event.tokens, 1)
        if len(rows) < NEWEST_READ:
            break
        before = rows[-1][0]
    return out
