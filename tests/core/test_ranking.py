"""Score parts and the deterministic order of memory entries."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.ranking import (
    MEMORY_HALF_LIFE_MS,
    best_bm25,
    bm25_part,
    query_terms,
    rank_entries,
    recency_part,
    rounded,
    tags_part,
)
from makad.core.types import Entry

NOW = 1_700_000_000_000
DAY = 86_400_000


def _entry(entry_id: str, age_days: float = 0, tags: list[str] | None = None) -> Entry:
    return Entry(
        id=entry_id,
        title=entry_id,
        content="x",
        updated_at=NOW - int(age_days * DAY),
        tags=tags or [],
    )


def test_fts5_scores_are_negated_and_normalized_to_the_best() -> None:
    """The most negative bm25 scores 1 and the others scale from it."""
    best = best_bm25([-4.0, -1.0, -2.0])
    assert best == 4.0
    assert bm25_part(-4.0, best) == 1.0
    assert bm25_part(-1.0, best) == 0.25


def test_missing_positive_or_non_finite_bm25_scores_zero() -> None:
    """No hit, a non-negative value or NaN contributes nothing."""
    assert bm25_part(None, 3.0) == 0.0
    assert bm25_part(0.5, 3.0) == 0.0
    assert bm25_part(math.nan, 3.0) == 0.0
    assert best_bm25([math.nan, 1.0]) == 0.0


def test_recency_halves_every_half_life() -> None:
    """Recency is 1 now, 0.5 one half-life ago, and the future counts as now."""
    assert recency_part(0, MEMORY_HALF_LIFE_MS) == 1.0
    assert recency_part(MEMORY_HALF_LIFE_MS, MEMORY_HALF_LIFE_MS) == 0.5
    assert recency_part(-5, MEMORY_HALF_LIFE_MS) == 1.0


def test_a_tag_matches_when_all_its_words_are_in_the_query() -> None:
    """Tags match word-wise and the part saturates at two matches."""
    terms = query_terms("Fix the build-system and deploy scripts")
    assert tags_part(["build-system"], terms) == 0.5
    assert tags_part(["build-system", "deploy", "scripts"], terms) == 1.0
    assert tags_part(["database"], terms) == 0.0
    assert tags_part(["deploy"], frozenset()) == 0.0


def test_without_a_query_the_most_recent_entry_comes_first() -> None:
    """No query: order by recency, bm25 ignored."""
    ranked = rank_entries([_entry("old", 9), _entry("new", 1), _entry("mid", 4)], {"old": -9.0}, None, NOW)
    assert [r.entry.id for r in ranked] == ["new", "mid", "old"]
    assert all(r.parts.bm25 == 0.0 for r in ranked)


def test_with_a_query_relevance_outweighs_recency() -> None:
    """A strong bm25 match ranks above a fresher entry that does not match."""
    ranked = rank_entries([_entry("fresh", 0), _entry("match", 30)], {"match": -5.0}, "deploy", NOW)
    assert [r.entry.id for r in ranked] == ["match", "fresh"]
    assert ranked[0].parts.bm25 == 1.0
    assert ranked[0].score == rounded(0.7 * 1.0 + 0.2 * 0.5)


def test_ties_break_by_id() -> None:
    """Equal scores and ages are ordered by entry id."""
    ranked = rank_entries([_entry("b"), _entry("c"), _entry("a")], {}, "q", NOW)
    assert [r.entry.id for r in ranked] == ["a", "b", "c"]


def test_normalization_can_ignore_some_entries() -> None:
    """normalize_over leaves out entries that must not move the others' scores."""
    entries = [_entry("a"), _entry("archived")]
    ranked = rank_entries(entries, {"a": -1.0, "archived": -10.0}, "q", NOW, normalize_over=entries[:1])
    parts = {r.entry.id: r.parts.bm25 for r in ranked}
    assert parts == {"a": 1.0, "archived": 1.0}


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(min_value=-50, max_value=0, allow_nan=False), min_size=1, max_size=30))
def test_entry_order_does_not_depend_on_input_order(scores: list[float]) -> None:
    """Shuffling the candidates gives the same ranking with the same numbers."""
    entries = [_entry(f"e{i}", i % 5) for i in range(len(scores))]
    bm25 = {e.id: s for e, s in zip(entries, scores, strict=True)}
    first = rank_entries(entries, bm25, "query", NOW)
    shuffled = entries[:]
    random.Random(len(scores)).shuffle(shuffled)
    second = rank_entries(shuffled, bm25, "query", NOW)
    assert [(r.entry.id, r.score, r.parts) for r in first] == [(r.entry.id, r.score, r.parts) for r in second]
    assert all(r.score == round(r.score, 6) for r in first)
