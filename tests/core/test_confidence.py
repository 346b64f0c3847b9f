"""Confidence: derived from author, evidence and age; a user's own value wins."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from makad.core import memory_format as fmt
from makad.core.confidence import derive, level_of, user_value, user_values
from makad.core.types import Entry

NOW = 1_800_000_000_000
DAY = 86_400_000


def entry(origin: str = "manual", refs: tuple[str, ...] = (), age_days: float = 0) -> Entry:
    at = NOW - int(age_days * DAY)
    return Entry(
        id="e",
        title="t",
        content="c",
        origin=origin,
        created_at=at,  # type: ignore[arg-type]
        updated_at=at,
        source_refs=list(refs),
    )


def test_typed_by_the_user_beats_an_agent_proposal_beats_an_old_import() -> None:
    """Typed by the user, proposed by an agent, imported long ago: three different levels."""
    typed = derive(entry("manual"), NOW)
    agent = derive(entry("extracted", ("event:s:1", "event:s:2")), NOW)
    old_import = derive(entry("imported", age_days=400), NOW)
    assert (typed.level, agent.level, old_import.level) == ("high", "medium", "low")
    assert typed.score > agent.score > old_import.score
    assert agent.reason == "approved agent proposal; 2 source refs"
    assert "over a year" in old_import.reason


def test_evidence_counts_only_refs_the_daemon_keeps() -> None:
    """An import: ref names where an entry came from; it is not evidence for it."""
    assert derive(entry("imported", ("import:mem0:1",)), NOW).score == derive(entry("imported"), NOW).score
    assert derive(entry("imported", ("episode:a",)), NOW).score > derive(entry("imported"), NOW).score


def test_an_entry_without_a_date_loses_a_little() -> None:
    """Age unknown is said, and costs 0.1."""
    undated = Entry(id="e", title="t", content="c", origin="unknown")
    found = derive(undated, NOW)
    assert found.score == 0.8 and "age unknown" in found.reason


def test_a_user_value_overrides_and_nonsense_is_ignored() -> None:
    """confidence=low|0.55 wins; an unreadable value falls back to the derivation."""
    assert derive(entry(), NOW, "low").level == "low"
    assert derive(entry(), NOW, "0.55").score == 0.55
    assert derive(entry(), NOW, "very").reason == "typed by the user"
    assert derive(entry(), NOW, "7").reason == "typed by the user"


def test_the_field_is_read_from_the_comment_and_kept_there() -> None:
    """confidence= stays an unknown field: parsed here, written back byte for byte."""
    text = (
        "# Maka Memory\n\n## A\n<!-- maka-memory: id=a origin=manual createdAt=1 updatedAt=1 "
        "status=active tags= confidence=high -->\nx\n\n## B\nno comment\n"
    )
    doc = fmt.parse(text)
    assert user_values(doc) == {"a": "high"}
    assert fmt.render(doc) == text
    assert user_value(("confidence=",)) is None


@given(
    st.sampled_from(["manual", "unknown", "extracted", "imported"]),
    st.lists(st.sampled_from(["event:s:1", "episode:e", "import:x:1", "memory:m"]), max_size=5),
    st.integers(min_value=-10, max_value=5_000),
)
def test_scores_stay_in_range_and_match_their_level(origin: str, refs: list[str], days: int) -> None:
    """Any entry: a score in [0.05, 1] whose level follows the thresholds."""
    found = derive(entry(origin, tuple(refs), days), NOW)
    assert 0.05 <= found.score <= 1.0 and found.level == level_of(found.score)
