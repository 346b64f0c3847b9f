"""Ranking earlier events for recall: full-text hits, their neighbours, and what the query says.

The candidates are the FTS hits and their neighbours in the same session: the
turn that answers a question rarely repeats its words, but it sits right after
the turn that does. Each candidate's score is the weighted mean of parts in
[0, 1] (weights in ``WEIGHTS``), rounded to 6 decimals, ties broken by session
and seq, so the same inputs always give the same order:

- ``bm25``: the event's own FTS5 match, negated and divided by the best one
  among the eligible hits, then squared so that weak partial matches (one
  common word of a long query) count for much less than strong ones;
- ``context``: the ``bm25`` of the events around it — the one before and the
  one after weigh 0.5 each, two away 0.2 each — capped at 1; when hits carry a
  similarity, an event passes on the larger of its ``bm25`` and its dense
  strength (its similarity over the best one, squared like ``bm25``, times
  ``DENSE_SPREAD``), so the turn next to a paraphrase of the question is
  lifted as the turn next to a word match is;
- ``session``: how strongly its session matches (the sum of the session's
  three best ``bm25``, divided by the best session's);
- ``speaker``: 1 when the event's text opens with a speaker label
  (``Caroline: …``, as in transcripts and imported chats) naming someone the
  query names with a capital letter;
- ``time``: 1 when the query names a period (``in May 2023``, ``last week``,
  see ``makad.core.when``) and the event happened in it;
- ``recency``: ``0.5 ** (age / 180 days)``, a tie-breaker between old events;
- ``semantic``: a hit's ``similarity``, when the caller passes one (clipped at
  0); its weight counts only when some hit has one.

Weights were chosen on the development half of LoCoMo (lab/recall_lab.py):
a broad plateau, so round values. The semantic weight was chosen with the
lab's all-MiniLM-L6-v2 channel (speaker names masked out of both texts) on
conversations 0-2 and checked on 3-4: 1.4, i.e. a cosine of 1 adds about 0.4
to a score on the lexical parts' [0, 1] scale (0.5 added half as much on both
halves; 2.2 lost single-hop recall). ``DENSE_SPREAD`` was chosen with the same
channel on half ``a`` of LoCoMo dev (``scripts/eval-recall``'s ``halves``: the
1st, 3rd and 5th conversations) and checked on half ``b``: 0.25 gave the best
recall at budget on ``a`` of 0.25, 0.5, 0.75 and 1.0 (it falls as the spread
grows), and kept ``b`` where it was.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from makad.core.context_types import RecallHit, ScoreParts
from makad.core.ranking import RECALL_HALF_LIFE_MS, best_bm25, bm25_part, rounded
from makad.core.render import SPEAKER_LABEL
from makad.core.types import Event
from makad.core.when import Period, in_periods, query_periods

# Part → weight; the order is that of ``RankedEvent.values``.
WEIGHTS: Final = {
    "bm25": 1.0,
    "context": 1.4,
    "session": 0.1,
    "speaker": 0.5,
    "time": 0.5,
    "recency": 0.1,
    "semantic": 1.4,
}
# Neighbour offset → share of its bm25 passed on (context part).
CONTEXT_SPREAD: Final = {-2: 0.2, -1: 0.5, 1: 0.5, 2: 0.2}
SESSION_TOP: Final = 3
# What the best dense match counts as, next to a best bm25 (1), when it passes score on
# to the turns around it (see ``_dense_parts``).
DENSE_SPREAD: Final = 0.25

_CAPITALIZED = re.compile(r"\b[^\W\d_a-z][\w'-]*")

Key = tuple[str, int]


@dataclass(slots=True)  # not frozen: hundreds are made per call, and frozen init is 3x slower
class RankedEvent:
    """One recall candidate: an FTS hit (``is_hit``) or a neighbour of one.

    ``values`` are the raw parts in ``WEIGHTS`` order; ``parts()`` rounds them
    for the trace (only the candidates listed there need it).
    """

    event: Event
    score: float
    values: tuple[float, ...]
    is_hit: bool

    def parts(self) -> ScoreParts:
        bm25, context, session, speaker, time, recency, semantic = (rounded(v) for v in self.values)
        return ScoreParts(
            bm25=bm25,
            recency=recency,
            tags=0.0,
            context=context,
            session=session,
            speaker=speaker,
            time=time,
            semantic=semantic,
        )


def speaker_label(text: str) -> str | None:
    """The speaker a text opens with (``"Ann Lee: hi"`` → ``"Ann Lee"``), if any."""
    match = SPEAKER_LABEL.match(text)
    return match.group(1) if match else None


def named_people(query: str) -> frozenset[str]:
    """Lower-cased capitalized words of the query: the names it may mention."""
    return frozenset(word.lower() for word in _CAPITALIZED.findall(query))


def speaker_part(event: Event, names: frozenset[str]) -> float:
    if not names or ":" not in event.text[:100]:
        return 0.0
    label = speaker_label(event.text)
    if label is None:
        return 0.0
    return 1.0 if all(word.lower() in names for word in label.split()) else 0.0


def _pool(hits: list[RecallHit]) -> tuple[dict[Key, Event], set[Key]]:
    """Every hit and every neighbour of it in its own session, by (session, seq).

    A hit's own event wins over the same event passed as someone's neighbour,
    so the pool does not depend on the order of the hits.
    """
    events: dict[Key, Event] = {}
    for hit in hits:
        events.setdefault((hit.event.session_id, hit.event.seq), hit.event)
    hit_keys = set(events)
    for hit in hits:
        for near in hit.neighbours:
            if near.session_id == hit.event.session_id:
                events.setdefault((near.session_id, near.seq), near)
    return events, hit_keys


def _session_parts(own: Mapping[Key, float]) -> dict[str, float]:
    by_session: dict[str, list[float]] = defaultdict(list)
    for (sid, _), value in own.items():
        by_session[sid].append(value)
    sums = {sid: sum(sorted(values)[-SESSION_TOP:]) for sid, values in by_session.items()}
    best = max(sums.values(), default=0.0)
    return {sid: total / best for sid, total in sums.items()} if best > 0 else {}


def _context_parts(own: Mapping[Key, float]) -> dict[Key, float]:
    """Each event's ``context`` part before the cap: its neighbours' ``bm25`` shares.

    Summed offset by offset in ``CONTEXT_SPREAD`` order, as a walk over each event's
    neighbours would (the same floats); only the events next to a hit get an entry.
    """
    context: dict[Key, float] = {}
    for offset, share in CONTEXT_SPREAD.items():
        for (sid, seq), value in own.items():
            near = (sid, seq - offset)
            context[near] = context.get(near, 0.0) + share * value
    return context


def _dense_parts(similar: Mapping[Key, float]) -> dict[Key, float]:
    """Each dense match's strength as a neighbour source: its cosine over the best one,
    squared like ``bm25``, times ``DENSE_SPREAD``."""
    best = max(similar.values(), default=0.0)
    if best <= 0.0:
        return {}
    return {key: DENSE_SPREAD * (value / best) ** 2 for key, value in similar.items() if value > 0.0}


def rank_events(
    hits: Iterable[RecallHit],
    query: str,
    now_ms: int,
    *,
    eligible: Iterable[RecallHit] | None = None,
    periods: list[Period] | None = None,
) -> list[RankedEvent]:
    """Score every hit and neighbour (see module doc) and order them best first.

    ``eligible`` (default: all hits) are the hits whose match counts: the best
    of them normalizes ``bm25``, and only they pass score on to neighbours and
    sessions, so excluded hits cannot lift their surroundings.
    """
    hits = list(hits)
    counted = hits if eligible is None else list(eligible)
    best = best_bm25(h.bm25 for h in counted)
    own: dict[Key, float] = {}
    similar: dict[Key, float] = {}
    for hit in counted:
        key = (hit.event.session_id, hit.event.seq)
        own[key] = max(own.get(key, 0.0), bm25_part(hit.bm25, best) ** 2)
        if hit.similarity is not None and math.isfinite(hit.similarity):
            similar[key] = max(similar.get(key, 0.0), min(hit.similarity, 1.0))
    sessions = _session_parts(own)
    spread = own
    if similar and DENSE_SPREAD > 0.0:
        spread = dict(own)
        for key, value in _dense_parts(similar).items():
            if value > spread.get(key, 0.0):
                spread[key] = value
    names = named_people(query)
    if periods is None:
        periods = query_periods(query, now_ms)
    events, hit_keys = _pool(hits)
    weights = tuple(WEIGHTS.values())
    w_bm25, w_context, w_session, w_speaker, w_time, w_recency, w_semantic = weights
    total_weight = sum(weights) - (0.0 if similar else WEIGHTS["semantic"])
    context = _context_parts(spread)
    pow_, isfinite, half_life = math.pow, math.isfinite, RECALL_HALF_LIFE_MS
    own_get, context_get, session_get, similar_get = own.get, context.get, sessions.get, similar.get
    # Sorted on (-score, session, seq): unique per candidate, so the event is never compared.
    keyed: list[tuple[float, str, int, RankedEvent]] = []
    append = keyed.append
    for key, event in events.items():
        sid, seq = key
        bm25 = own_get(key, 0.0)
        near = context_get(key, 0.0)
        if near > 1.0:
            near = 1.0
        session = session_get(sid, 0.0)
        speaker = speaker_part(event, names) if names else 0.0
        when = 1.0 if periods and in_periods(event.ts, periods) else 0.0
        # recency_part, inlined: it runs for every candidate of every call.
        age = now_ms - event.ts
        recency = pow_(0.5, (age if age > 0 else 0) / half_life)
        semantic = similar_get(key, 0.0)
        score = (
            w_bm25 * bm25
            + w_context * near
            + w_session * session
            + w_speaker * speaker
            + w_time * when
            + w_recency * recency
            + w_semantic * semantic
        ) / total_weight
        if not isfinite(score):
            score = 0.0
        elif score != 0.0:  # ``rounded``, inlined
            score = round(score, 6) + 0.0
        values = (bm25, near, session, speaker, when, recency, semantic)
        append((-score, sid, seq, RankedEvent(event, score, values, key in hit_keys)))
    keyed.sort()
    ranked = [item[3] for item in keyed]
    return ranked
