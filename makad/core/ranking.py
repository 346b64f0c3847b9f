"""Scores for memory entries, their deterministic order, and the parts recall shares.

Every part of a score is normalized to [0, 1] and rounded to 6 decimals, so the
same inputs always give the same numbers and the same order (ties break by id):

- ``bm25``: SQLite FTS5's ``bm25()`` is negative, more negative is better. It is
  negated and divided by the best (most negative) value among the candidates,
  so the best match scores 1 and a candidate without a hit scores 0.
- ``recency``: ``0.5 ** (age / half-life)`` from the entry's ``updated_at``
  (or the event's ``ts``): 1 now, 0.5 one half-life ago.
- ``tags`` (memory only): the share of an entry's matching tags, saturating at
  two: a tag matches when all its words occur in the query.

With a query, memory scores ``0.7 bm25 + 0.2 recency + 0.1 tags``, plus
``0.7 × semantic / best semantic`` when the optional semantic channel found the entry
among the query's nearest (``makad.core.semantic``): the entry's cosine divided by the
best cosine among the candidates, as the bm25 part is divided by the best match, so the
nearest entry weighs as much as the best word match whatever the model's cosines for the
query. The trace's ``semantic`` part is the cosine itself (0 where the channel found
nothing, so without the channel every score is what the lexical parts make it). Without
a query memory is ordered most recent first (the score is the recency alone).
Recall events are ranked by ``makad.core.recall`` from the same parts and more.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from makad.core.context_types import ScoreParts
from makad.core.types import Entry

MEMORY_HALF_LIFE_MS = 30 * 86_400_000
RECALL_HALF_LIFE_MS = 180 * 86_400_000
MEMORY_WEIGHTS = (0.7, 0.2, 0.1)
MEMORY_SEMANTIC_WEIGHT = 0.7
TAG_SATURATION = 2

_WORD = re.compile(r"\w+")


def rounded(value: float) -> float:
    """Round to 6 decimals; -0.0 becomes 0.0 so encodings stay identical."""
    if value == 0.0:  # most parts of most candidates: skip round()'s dtoa, printf and strtod
        return 0.0
    return round(value, 6) + 0.0


def query_terms(query: str | None) -> frozenset[str]:
    """The lower-cased words of a query."""
    return frozenset(_WORD.findall(query.lower())) if query else frozenset()


def best_bm25(raw_scores: Iterable[float]) -> float:
    """The strength of the best FTS5 match: the largest negated finite score."""
    return max((-s for s in raw_scores if math.isfinite(s) and s < 0), default=0.0)


def bm25_part(raw: float | None, best: float) -> float:
    """Normalize one FTS5 ``bm25()`` value against the best one (see module doc)."""
    if raw is None or not math.isfinite(raw) or raw >= 0 or best <= 0:
        return 0.0
    return min(1.0, -raw / best)


def recency_part(age_ms: int, half_life_ms: int) -> float:
    """1 for now, halving every ``half_life_ms``; the future counts as now."""
    return math.pow(0.5, max(age_ms, 0) / half_life_ms)


def tags_part(tags: Iterable[str], terms: frozenset[str]) -> float:
    """Matching tags over ``TAG_SATURATION``, capped at 1 (see module doc)."""
    if not terms:
        return 0.0
    matched = 0
    for tag in tags:
        words = _tag_words(tag)
        if words and all(word in terms for word in words):
            matched += 1
    return min(matched, TAG_SATURATION) / TAG_SATURATION


@functools.lru_cache(maxsize=4096)
def _tag_words(tag: str) -> tuple[str, ...]:
    # A workspace has few distinct tags, and every candidate of every call asks.
    return tuple(_WORD.findall(tag.lower()))


@dataclass(slots=True)  # not frozen: made for every candidate of every call
class RankedEntry:
    index: int  # position in the input
    entry: Entry
    score: float
    parts: ScoreParts


def best_similarity(similarities: Iterable[float | None]) -> float:
    """The best cosine the semantic channel gave a candidate (0 when it found none)."""
    return max((s for s in similarities if s is not None and math.isfinite(s) and s > 0), default=0.0)


def similarity_part(cosine: float, best: float) -> float:
    """A found entry's cosine normalized against the best one's (as ``bm25_part`` is):
    the nearest entry 1."""
    if cosine <= 0 or best <= 0:
        return 0.0
    return min(1.0, cosine / best)


def matches(parts: ScoreParts) -> bool:
    """Whether a memory candidate matched the query through any channel: a word (bm25),
    a tag, or a semantic score (zero unless a channel sets it). An entry that matches
    nothing can still fill leftover room (``makad.core.memory_segment``)."""
    return parts.bm25 > 0 or parts.tags > 0 or parts.semantic > 0


def score_entry(
    index: int,
    entry: Entry,
    raw_bm25: float | None,
    terms: frozenset[str],
    best: float,
    now_ms: int,
    similarity: float | None = None,
    best_similar: float = 0.0,
) -> RankedEntry:
    """One entry's score and its parts (see module doc); ``best``: ``best_bm25`` of the lot;
    ``similarity``: the semantic channel's cosine, when it found the entry; ``best_similar``:
    ``best_similarity`` of the lot (0: the entry's own cosine is the best)."""
    updated = entry.updated_at or entry.created_at
    recency = rounded(recency_part(now_ms - updated, MEMORY_HALF_LIFE_MS))
    if not terms:
        return RankedEntry(index, entry, recency, ScoreParts(bm25=0.0, recency=recency, tags=0.0))
    parts = ScoreParts(
        bm25=rounded(bm25_part(raw_bm25, best)),
        recency=recency,
        tags=rounded(tags_part(entry.tags, terms)),
        semantic=rounded(min(max(similarity, 0.0), 1.0)) if similarity and math.isfinite(similarity) else 0.0,
    )
    w_bm25, w_recency, w_tags = MEMORY_WEIGHTS
    score = w_bm25 * parts.bm25 + w_recency * parts.recency + w_tags * parts.tags
    if parts.semantic:
        best_cosine = best_similar if best_similar > 0 else parts.semantic
        score += MEMORY_SEMANTIC_WEIGHT * rounded(similarity_part(parts.semantic, best_cosine))
    return RankedEntry(index, entry, rounded(score), parts)


def rank_entries(
    entries: Iterable[Entry],
    bm25: Mapping[str, float],
    query: str | None,
    now_ms: int,
    *,
    normalize_over: Iterable[Entry] | None = None,
    similarity: Mapping[str, float] | None = None,
) -> list[RankedEntry]:
    """Score entries and order them best first (most recent first without a query).

    bm25 and the semantic part are normalized over ``normalize_over`` (default:
    ``entries``), so entries that cannot be shown can still be scored without moving the
    others' scores. ``similarity``: entry id → the semantic channel's cosine (only the
    entries it found).
    """
    similar = similarity or {}
    terms = query_terms(query)
    entries = list(entries)
    basis = entries if normalize_over is None else normalize_over
    best = best_bm25(bm25.get(e.id, 0.0) for e in basis) if terms else 0.0
    best_similar = best_similarity(similar.get(e.id) for e in basis) if similar else 0.0
    ranked = [
        score_entry(i, e, bm25.get(e.id), terms, best, now_ms, similar.get(e.id), best_similar)
        for i, e in enumerate(entries)
    ]
    ranked.sort(key=lambda r: (-r.score, -(r.entry.updated_at or r.entry.created_at), r.entry.id, r.index))
    return ranked
