"""Recall ranking: hits, their neighbours, sessions, speakers and time, in a fixed order."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.context_types import RecallHit
from makad.core.recall import (
    CONTEXT_SPREAD,
    DENSE_SPREAD,
    _context_parts,
    named_people,
    rank_events,
    speaker_label,
    speaker_part,
)
from makad.core.types import Event

NOW = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)
DAY = 86_400_000


def event(sid: str, seq: int, text: str = "t", ts: int = NOW - 30 * DAY) -> Event:
    return Event(session_id=sid, seq=seq, ts=ts, type="user_message", text=text)


def hit(
    sid: str, seq: int, bm25: float, text: str = "t", ts: int = NOW - 30 * DAY, around: int = 2
) -> RecallHit:
    near = [event(sid, seq + d, f"n{d}", ts) for d in range(-around, around + 1) if d and seq + d > 0]
    return RecallHit(event=event(sid, seq, text, ts), bm25=bm25, neighbours=near)


def order(hits: list[RecallHit], query: str = "q") -> list[str]:
    return [f"{r.event.session_id}:{r.event.seq}" for r in rank_events(hits, query, NOW)]


def test_the_best_match_scores_bm25_one_and_others_squared() -> None:
    """bm25 is normalized to the best eligible hit, then squared."""
    ranked = {
        f"{r.event.session_id}:{r.event.seq}": r
        for r in rank_events([hit("a", 10, -4.0), hit("b", 10, -2.0)], "q", NOW)
    }
    assert ranked["a:10"].parts().bm25 == 1.0
    assert ranked["b:10"].parts().bm25 == 0.25
    assert ranked["a:11"].parts().context == 0.5 and ranked["a:12"].parts().context == 0.2


def test_neighbours_are_candidates_ranked_by_the_hits_around_them() -> None:
    """The turns right after and before a strong hit come before two away and weak hits."""
    got = order([hit("a", 10, -10.0), hit("b", 10, -1.0, around=0)])
    assert got[:3] == ["a:10", "a:9", "a:11"]
    assert got.index("a:12") < got.index("b:10")


def test_excluded_hits_neither_count_nor_lift_their_neighbours() -> None:
    """Only eligible hits normalize bm25 and pass score to neighbours."""
    strong, other = hit("live", 10, -50.0), hit("old", 3, -1.0)
    ranked = {
        f"{r.event.session_id}:{r.event.seq}": r
        for r in rank_events([strong, other], "q", NOW, eligible=[other])
    }
    assert ranked["old:3"].parts().bm25 == 1.0
    assert ranked["live:10"].parts().bm25 == 0.0 and ranked["live:11"].parts().context == 0.0


def test_a_session_with_more_matches_lifts_its_events() -> None:
    """Of two equal hits, the one whose session matches more ranks first."""
    hits = [hit("a", 10, -2.0, around=0), hit("b", 10, -2.0, around=0), hit("b", 40, -1.0, around=0)]
    assert order(hits)[:2] == ["b:10", "a:10"]


def test_speaker_labels_and_named_people() -> None:
    """A text opening with a short name and a colon has a speaker; the query names people."""
    assert speaker_label("Ann Lee: hi") == "Ann Lee"
    assert speaker_label("  Jon: yes") == "Jon"
    assert speaker_label("https://x.y: no") is None
    assert speaker_label("no label here") is None
    assert named_people("What did Ann tell jon?") == frozenset({"what", "ann"})


def test_the_speaker_named_by_the_query_is_preferred() -> None:
    """Of two equal matches, the one said by the person the query names wins."""
    said_by_ann = hit("a", 10, -2.0, "Ann: I adopted a dog", around=0)
    said_by_bob = hit("b", 10, -2.0, "Bob: Ann adopted a dog", around=0)
    assert order([said_by_bob, said_by_ann], "What did Ann adopt?") == ["a:10", "b:10"]
    assert speaker_part(said_by_ann.event, named_people("what did ann adopt")) == 0.0


def test_events_in_the_period_the_query_names_are_preferred() -> None:
    """'in May 2023' lifts an event of May 2023 over an equal one of June 2024."""
    may = int(datetime(2023, 5, 10, tzinfo=UTC).timestamp() * 1000)
    june = int(datetime(2024, 6, 10, tzinfo=UTC).timestamp() * 1000)
    hits = [hit("late", 5, -2.0, ts=june, around=0), hit("early", 5, -2.0, ts=may, around=0)]
    ranked = rank_events(hits, "What did she paint in May 2023?", NOW)
    assert [r.event.session_id for r in ranked] == ["early", "late"]
    assert ranked[0].parts().time == 1.0 and ranked[1].parts().time == 0.0


def test_neighbours_from_other_sessions_are_ignored() -> None:
    """A neighbour must belong to its hit's session."""
    stray = RecallHit(event=event("a", 5), bm25=-1.0, neighbours=[event("b", 6)])
    assert order([stray]) == ["a:5"]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 30), st.floats(-20, 0)), max_size=20),
    st.randoms(use_true_random=False),
)
def test_order_and_scores_do_not_depend_on_input_order(
    spec: list[tuple[str, int, float]], rnd: random.Random
) -> None:
    """Shuffled hits give the same candidates, scores and order; scores stay in [0, 1]."""
    hits = [hit(sid, seq, bm25, text=f"Ann: {seq}") for sid, seq, bm25 in spec]
    first = rank_events(hits, "Ann q", NOW)
    second = rank_events(rnd.sample(hits, len(hits)), "Ann q", NOW)
    key = [(r.event.session_id, r.event.seq, r.score, r.parts()) for r in first]
    assert key == [(r.event.session_id, r.event.seq, r.score, r.parts()) for r in second]
    assert all(0.0 <= r.score <= 1.0 for r in first)


def test_a_similarity_lifts_a_hit_and_only_counts_when_given() -> None:
    """A semantic match adds its own part; without any, scores are as before."""
    lexical = [hit("a", 5, -2.0, around=0), hit("b", 5, -2.0, around=0)]
    plain = rank_events(lexical, "q", NOW)
    assert [r.parts().semantic for r in plain] == [0.0, 0.0]
    semantic = [
        lexical[0],
        RecallHit(event=lexical[1].event, bm25=-2.0, similarity=0.8),
        RecallHit(event=event("c", 9), bm25=0.0, similarity=-0.4),
    ]
    ranked = {r.event.session_id: r for r in rank_events(semantic, "q", NOW)}
    assert ranked["b"].score > ranked["a"].score
    assert ranked["b"].parts().semantic == 0.8 and ranked["c"].parts().semantic == 0.0
    assert ranked["a"].score < plain[0].score


def test_a_paraphrase_outranks_a_weak_one_word_match() -> None:
    """A line that matches no word but means the question (cosine 0.5) beats a weak partial FTS match.

    The weight the lab chose on LoCoMo dev: at the old 0.5 the one-word match
    (bm25 0.6 of the best, squared 0.36) stayed ahead of the paraphrase.
    """
    best = hit("a", 5, -5.0, around=0)
    weak = hit("b", 5, -3.0, around=0)  # shares one common word with the query
    paraphrase = RecallHit(event=event("c", 5, "I'm doing kickboxing"), bm25=0.0, similarity=0.5)
    ranked = order([best, weak, paraphrase], "What exercises has John done?")
    assert ranked.index("c:5") < ranked.index("b:5")


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(1, 12)),
        st.floats(0.0, 1.0, allow_nan=False),
        max_size=12,
    )
)
def test_context_parts_equal_the_walk_over_each_events_neighbours(own: dict[tuple[str, int], float]) -> None:
    """Summed once per hit, the context part is the same float as summing each event's
    neighbours in CONTEXT_SPREAD order (what the packs and eval figures were pinned with)."""
    context = _context_parts(own)
    for sid in ("a", "b"):
        for seq in range(-1, 15):
            walked = 0.0
            for offset, share in CONTEXT_SPREAD.items():
                walked += share * own.get((sid, seq + offset), 0.0)
            assert context.get((sid, seq), 0.0) == walked


def test_a_dense_match_lifts_the_turns_around_it_and_lexical_ranking_is_unchanged() -> None:
    """The turn after a dense-only match gets a context part from it; without similarities
    the neighbours' context comes from bm25 alone, as before."""
    lexical = hit("a", 5, -2.0, around=1)
    dense = RecallHit(
        event=event("b", 5), bm25=0.0, neighbours=[event("b", 4), event("b", 6)], similarity=0.6
    )
    ranked = {(r.event.session_id, r.event.seq): r for r in rank_events([lexical, dense], "q", NOW)}
    # The best cosine counts as DENSE_SPREAD of a best bm25; the next turn gets half of it.
    assert ranked[("b", 6)].parts().context == round(0.5 * DENSE_SPREAD, 6) > 0.0
    plain = {(r.event.session_id, r.event.seq): r for r in rank_events([lexical], "q", NOW)}
    assert plain[("a", 6)].parts().context == 0.5
    assert ranked[("a", 6)].parts().context == 0.5
