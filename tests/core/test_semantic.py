"""The semantic channel's pure rules: what is embedded, which dense matches count, and how a
cosine enters a memory entry's score."""

from __future__ import annotations

import pytest

from makad.core import semantic
from makad.core.ranking import rank_entries
from makad.core.types import Entry

NOW = 1_700_000_000_000


def _entry(entry_id: str, title: str, content: str = "") -> Entry:
    return Entry(id=entry_id, title=title, content=content, created_at=NOW, updated_at=NOW)


def test_texts_embedded() -> None:
    """An entry is its title and content; an event loses its speaker label."""
    assert (
        semantic.entry_text(_entry("a", "Package manager", "Always pnpm.")) == "Package manager. Always pnpm."
    )
    assert semantic.entry_text(_entry("a", "Only a title")) == "Only a title"
    assert semantic.event_text("Caroline: I went to a support group.") == "I went to a support group."
    assert semantic.event_text("The build failed again: see log") == "The build failed again: see log"
    assert semantic.speaker("Mel Lee: hi") == "Mel Lee"


def test_query_loses_speaker_names() -> None:
    """Speaker names (and their possessive) leave the query; a query of names only stays."""
    assert semantic.without_names("What did Caroline's friend Melanie paint?", ["Caroline", "Melanie"]) == (
        "What did friend paint?"
    )
    assert semantic.without_names("Caroline?", ["Caroline"]) == "Caroline?"
    assert semantic.without_names("which tool?", []) == "which tool?"


def test_nearest_and_union() -> None:
    """Dense matches are the best above the floor, ties by key; the union keeps fuzzy ones first."""
    found = semantic.nearest([("b", 0.5), ("a", 0.5), ("c", 0.1), ("d", 0.9)], 3, 0.2)
    assert found == [("d", 0.9), ("a", 0.5), ("b", 0.5)]
    assert semantic.union_similar(["x", "d"], found, 3) == ["x", "d", "a"]


def test_similarity_adds_a_semantic_part_only_where_found() -> None:
    """An entry the channel found outranks an unmatched one; without similarities scores are unchanged."""
    entries = [_entry("a", "Deploys", "On Tuesdays."), _entry("b", "Package manager", "Always pnpm.")]
    plain = rank_entries(entries, {}, "which installer for the web app", NOW)
    assert [r.parts.semantic for r in plain] == [0.0, 0.0]
    ranked = rank_entries(entries, {}, "which installer for the web app", NOW, similarity={"b": 0.55})
    assert ranked[0].entry.id == "b" and ranked[0].parts.semantic == 0.55
    assert ranked[0].score > ranked[1].score and ranked[1].score == plain[1].score


def test_the_semantic_score_is_the_cosine_over_the_best_one() -> None:
    """The nearest entry's semantic part weighs as much as the best word match (its cosine
    over the best candidate's), the others in proportion; the trace's part is the cosine."""
    entries = [
        _entry("a", "Deploys", "On Tuesdays."),
        _entry("b", "Package manager", "Always pnpm."),
        _entry("c", "Editor", "Vim."),
    ]
    ranked = rank_entries(entries, {"c": -2.0}, "which installer", NOW, similarity={"a": 0.2, "b": 0.4})
    parts = {r.entry.id: r for r in ranked}
    assert (parts["a"].parts.semantic, parts["b"].parts.semantic) == (0.2, 0.4)
    recency = 0.2 * parts["c"].parts.recency
    # b is the nearest: 0.7 × 1, as much as c's best word match (0.7 × 1); a is half as near.
    assert parts["b"].score == parts["c"].score == round(0.7 + recency, 6)
    assert parts["a"].score == round(0.35 + recency, 6)
    only = rank_entries(entries[:1], {}, "which installer", NOW, similarity={"a": 0.2})
    assert only[0].score == round(0.7 + recency, 6) and only[0].parts.semantic == 0.2


def test_the_best_cosine_is_taken_over_the_entries_that_can_be_shown() -> None:
    """An entry outside ``normalize_over`` does not set the scale of the others."""
    entries = [_entry("a", "Deploys"), _entry("gone", "Archived")]
    ranked = rank_entries(
        entries, {}, "when", NOW, normalize_over=entries[:1], similarity={"a": 0.3, "gone": 0.6}
    )
    scores = {r.entry.id: r.score for r in ranked}
    assert scores["a"] == scores["gone"]  # both at the top of the scale: 0.3 is the best shown


def test_memory_nearest_keeps_the_matches_and_orders_the_rest() -> None:
    """Matches are the MEMORY_DENSE_K best above the floor; the nearest run past them, whatever
    their cosine, as far as the lexical candidates and MEMORY_NEAR_K need."""
    scored = [(f"e{i:03d}", 0.9 - i * 0.006) for i in range(300)]
    found, near = semantic.memory_nearest(list(reversed(scored)), 7)
    assert found == scored[: semantic.MEMORY_DENSE_K]
    assert near == scored[: semantic.MEMORY_DENSE_K + 7 + semantic.MEMORY_NEAR_K]
    assert near[-1][1] < semantic.MEMORY_MIN_COSINE  # no floor past the matches
    low = [("a", 0.1), ("b", 0.25), ("c", -0.2)]
    assert semantic.memory_nearest(low, 0) == ([("b", 0.25)], [("b", 0.25), ("a", 0.1), ("c", -0.2)])


def test_calibrated_maps_a_baseline_onto_the_reference() -> None:
    """A model's baseline cosine becomes the reference one, 1 stays 1, the reference model's
    cosines stay as they are, and a baseline of 1 changes nothing."""
    ref = semantic.REFERENCE_BASELINE
    assert abs(semantic.calibrated(0.75, 0.75) - ref) < 1e-12
    assert abs(semantic.calibrated(1.0, 0.75) - 1.0) < 1e-12
    assert abs(semantic.calibrated(0.875, 0.75) - (ref + 1.0) / 2) < 1e-12
    assert abs(semantic.calibrated(0.4, ref) - 0.4) < 1e-12
    assert semantic.calibrated(0.3, 1.0) == 0.3


def test_feedback_query_moves_the_query_toward_its_nearest() -> None:
    """The moved query is the unit vector along query + beta * mean of the nearest rows; no rows,
    no beta or a zero sum leave the query as it was."""
    np = pytest.importorskip("numpy", reason="the semantic channel needs numpy")
    query = np.array([1.0, 0.0, 0.0])
    rows = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    moved = semantic.feedback_query(query, rows, 2.0)
    assert np.allclose(moved, np.array([1.0, 1.0, 1.0]) / 3**0.5)
    assert np.allclose(semantic.feedback_query(query, rows[:1], 0.5), np.array([1.0, 0.5, 0.0]) / 1.25**0.5)
    assert semantic.feedback_query(query, rows[:0], 1.0) is query
    assert semantic.feedback_query(query, rows, 0.0) is query
    assert semantic.feedback_query(query, np.array([[-1.0, 0.0, 0.0]]), 1.0) is query


def test_feedback_rows_are_the_nearest_allowed_above_the_floor() -> None:
    """The rows that move the query: the first k allowed ones in order, none below the floor."""
    floor = semantic.RECALL_MIN_COSINE
    cosines = {0: 0.9, 1: 0.8, 2: 0.7, 3: floor, 4: floor - 0.01, 5: floor - 0.02}
    order = [0, 1, 2, 3, 4, 5]
    assert semantic.feedback_rows(order, cosines, lambda row: True, 2) == [0, 1]
    assert semantic.feedback_rows(order, cosines, lambda row: row != 1, 3) == [0, 2, 3]
    assert semantic.feedback_rows(order, cosines, lambda row: True, 10) == [0, 1, 2, 3]
    assert semantic.feedback_rows(order, cosines, lambda row: True, 0) == []
