"""The evidence gate's pure rules and the episodes' checks (makad.core.episodes)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.episodes import (
    MAX_EPISODE_REFS,
    Threshold,
    check_evidence,
    check_ref_count,
    digest,
    episode_refs,
)
from makad.core.types import EpisodeRecord
from makad.errors import InsufficientEvidence, InvalidParams, TooLarge


def episode(episode_id: str, session: str, tags: list[str], deleted: bool = False) -> EpisodeRecord:
    return EpisodeRecord(
        episode_id=episode_id,
        session_id=session,
        kind="client",
        summary=f"did {episode_id}",
        tags=tags,
        source_refs=[f"event:{session}:1"],
        at=86_400_000,
        created_at=86_400_000,
        deleted_at=1 if deleted else None,
        ordinal=0,
    )


def reason(tag: str, ids: list[str], found: dict[str, EpisodeRecord], open_: set[str]) -> str | None:
    try:
        check_evidence(tag, ids, found, open_, Threshold(min_episodes=2, min_sessions=2))
    except InsufficientEvidence as exc:
        return str(exc.details["reason"])
    return None


def test_each_way_to_fail_the_gate_has_its_reason() -> None:
    """No episodes, unknown or deleted ones, a foreign tag, spent evidence, too little:
    each is refused with its own reason; enough open evidence with the tag passes."""
    found = {
        "a": episode("a", "s1", ["tea"]),
        "b": episode("b", "s2", ["tea"]),
        "c": episode("c", "s1", ["coffee"]),
        "d": episode("d", "s2", ["tea"], deleted=True),
    }
    everything = set(found)
    assert reason("tea", [], found, everything) == "no_episodes"
    assert reason("", ["a"], found, everything) == "no_episodes"
    assert reason("tea", ["a", "x"], found, everything) == "unknown_episodes"
    assert reason("tea", ["a", "d"], found, everything) == "unknown_episodes"
    assert reason("tea", ["a", "c"], found, everything) == "foreign_tag"
    assert reason("tea", ["a", "b"], found, {"a"}) == "already_consolidated"
    assert reason("tea", ["a"], found, everything) == "below_threshold"
    assert reason("tea", ["a", "b"], found, everything) is None


@settings(max_examples=80, deadline=None)
@given(episodes=st.integers(0, 10), sessions=st.integers(0, 10), lo=st.integers(1, 6), ls=st.integers(1, 4))
def test_the_threshold_is_monotone(episodes: int, sessions: int, lo: int, ls: int) -> None:
    """Evidence that meets the threshold still meets it with one more episode or session."""
    threshold = Threshold(min_episodes=lo, min_sessions=ls)
    if threshold.met(episodes, sessions):
        assert threshold.met(episodes + 1, sessions) and threshold.met(episodes, sessions + 1)
    assert threshold.met(episodes, sessions) == (episodes >= lo and sessions >= ls)


def test_refs_are_counted_and_kept_out_of_incognito_sessions() -> None:
    """At least one ref, at most the cap; a ref into an incognito session is refused at its
    index; the others are kept as given (the ledger keeps a repeated one once)."""
    with pytest.raises(InvalidParams):
        check_ref_count([])
    with pytest.raises(TooLarge):
        check_ref_count(["event:s:1"] * (MAX_EPISODE_REFS + 1))
    with pytest.raises(InvalidParams) as caught:
        episode_refs(["event:s1:1", "event:hidden:2"], {"hidden"})
    assert caught.value.details["ref"] == "event:hidden:2"
    assert caught.value.details["path"] == "$.sourceRefs[1]"
    assert episode_refs(["event:s1:2", "event:s1:1", "event:s1:2"], set()) == [
        "event:s1:2",
        "event:s1:1",
        "event:s1:2",
    ]


def test_a_digest_shows_the_latest_fifty_and_counts_the_rest() -> None:
    """Over 50 episodes: the digest lists the last 50 with their dates and says how many
    earlier ones it leaves out."""
    many = [episode(f"e{i}", f"s{i % 3}", ["tea"]) for i in range(53)]
    title, content = digest("tea", many)
    lines = content.splitlines()
    assert title == "Recurring: tea"
    assert lines[0] == "recurring: tea — 53 episodes across 3 sessions"
    assert lines[1] == "- … and 3 earlier episodes"
    assert lines[2] == "- 1970-01-02 did e3" and len(lines) == 52
