"""Query expansion from the best hits' shared words (makad.core.feedback)."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from makad.core.cjk import query_tokens
from makad.core.feedback import FEEDBACK_SHARE, feedback_terms, scaled_bm25, stem


def test_the_word_the_best_hits_share_comes_first() -> None:
    """Paraphrase: "package manager" finds nothing by itself, but the frontend turns all say pnpm."""
    hits = [
        ("Ann: the frontend build runs on pnpm workspaces", 9.0),
        ("Bo: frontend tests run with pnpm too", 7.0),
        ("Ann: frontend deploys on friday", 2.0),
    ]
    assert feedback_terms("which package manager for the frontend", hits)[0] == "pnpm"


def test_query_stems_labels_stop_words_and_numbers_are_never_expansions() -> None:
    """ "activity" is "activities" again, "Melanie:" is a label, "there"/"2023" carry no topic."""
    hits = [
        ("Melanie: there was pottery activity in 2023", 1.0),
        ("Melanie: pottery there, activity 2023", 1.0),
    ]
    assert feedback_terms("What activities does Caroline do?", hits) == ["pottery"]


def test_a_weak_hit_counts_for_less_and_a_word_of_one_hit_not_at_all() -> None:
    """Weights add each hit's strength over the best one's; only words two hits agree on expand."""
    hits = [("camping trip", 10.0), ("camping lake", 9.0), ("museum visit", 1.0), ("museum visit", 1.0)]
    assert feedback_terms("weekend", hits) == ["camping", "museum", "visit"]


def test_only_the_first_docs_are_read_and_terms_are_capped() -> None:
    """Hits past ``docs`` are ignored; at most ``terms`` words come back."""
    hits = [("alpha beta", 1.0), ("alpha beta gamma", 1.0), ("gamma delta", 1.0), ("gamma delta", 1.0)]
    assert feedback_terms("x", hits, docs=2) == ["alpha", "beta"]
    assert feedback_terms("x", hits, docs=2, terms=1) == ["alpha"]
    assert feedback_terms("x", []) == []
    assert feedback_terms("x", [("alpha", 0.0), ("alpha", 0.0)]) == []


def test_feedback_scores_are_scaled_below_the_first_query() -> None:
    """The best feedback hit gets FEEDBACK_SHARE of the first query's best; junk scores become 0."""
    out = scaled_bm25([-4.0, -2.0, math.nan, 0.0], first_best=10.0)
    assert out[0] == -FEEDBACK_SHARE * 10.0
    assert out[1] == -FEEDBACK_SHARE * 5.0
    assert out[2:] == [0.0, 0.0]
    assert scaled_bm25([-1.0], first_best=0.0) == [0.0]


words = st.text(alphabet="abcdefghij ", min_size=0, max_size=40)


@given(st.lists(st.tuples(words, st.floats(0, 100)), max_size=12), words)
def test_expansions_are_new_distinct_stems_in_a_fixed_order(
    hits: list[tuple[str, float]], query: str
) -> None:
    """Never a query word's stem, never two words of one stem, never more than asked, same every time."""
    terms = feedback_terms(query, hits, terms=5)
    assert len(terms) <= 5
    stems = [stem(t) for t in terms]
    assert len(set(stems)) == len(stems)
    assert not set(stems) & {stem(token) for token, _ in query_tokens(query)}
    assert feedback_terms(query, list(hits), terms=5) == terms
