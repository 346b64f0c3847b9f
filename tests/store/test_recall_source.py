"""recall_hits: FTS hits for a query, period searches, and neighbours read in ranges."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from makad.core.types import EventInput
from makad.store import recall_source
from makad.store.ledger import Ledger
from makad.store.recall_source import recall_hits

NOW = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1000)


def ms(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp() * 1000)


def fill(ledger: Ledger, sid: str, texts: list[str], ts: int) -> None:
    ledger.open_session(sid, now=ts)
    ledger.append_events(
        sid, [EventInput(type="user_message", text=t, ts=ts + i) for i, t in enumerate(texts)]
    )


def test_hits_come_best_first_with_two_neighbours_each_side(ledger: Ledger) -> None:
    """Each hit carries the events around it in its own session, hits in bm25 order."""
    fill(
        ledger,
        "a",
        [f"filler {i}" for i in range(1, 11)] + ["the berlin move"] + ["more"] * 5,
        ms(2023, 1, 1),
    )
    fill(ledger, "b", ["berlin", "x"], ms(2023, 2, 1))
    hits = recall_hits(ledger, "berlin move", now_ms=NOW)
    assert [(h.event.session_id, h.event.seq) for h in hits] == [("a", 11), ("b", 1)]
    assert [n.seq for n in hits[0].neighbours] == [9, 10, 12, 13]
    assert [n.seq for n in hits[1].neighbours] == [2]
    assert hits[0].bm25 < 0


def test_a_ceiling_keeps_the_live_history_out(ledger: Ledger) -> None:
    """max_seq_by_session hides later events, as hits and as neighbours."""
    fill(ledger, "s", ["berlin one", "two", "three", "berlin four", "five"], ms(2023, 1, 1))
    hits = recall_hits(ledger, "berlin", now_ms=NOW, max_seq_by_session={"s": 2})
    assert [(h.event.seq, [n.seq for n in h.neighbours]) for h in hits] == [(1, [2])]


def test_a_named_period_brings_in_hits_beyond_the_limit(ledger: Ledger) -> None:
    """Events of the period the query names are searched on their own."""
    fill(ledger, "old", ["painting class"] * 5, ms(2022, 1, 1))
    fill(ledger, "may", ["a painting"], ms(2023, 5, 10))
    plain = recall_hits(ledger, "painting", now_ms=NOW, limit=3)
    dated = recall_hits(ledger, "painting in May 2023", now_ms=NOW, limit=3)
    assert "may" not in {h.event.session_id for h in plain}
    assert "may" in {h.event.session_id for h in dated}


def test_no_terms_no_hits(ledger: Ledger) -> None:
    """A query with no searchable term finds nothing."""
    fill(ledger, "s", ["hello"], ms(2023, 1, 1))
    assert recall_hits(ledger, "?!", now_ms=NOW) == []


def test_feedback_brings_in_the_turn_that_shares_no_word_with_the_query(ledger: Ledger) -> None:
    """Paraphrase: "package manager" is never said; both frontend turns say pnpm, and so does the answer."""
    fill(
        ledger,
        "a",
        ["Ann: the frontend build runs on pnpm workspaces", "Bo: ok", "Bo: frontend lint runs on pnpm too"]
        + [f"filler {i}" for i in range(10)],
        ms(2023, 1, 1),
    )
    fill(ledger, "b", [f"other {i}" for i in range(10)] + ["Bo: we prefer pnpm over npm"], ms(2023, 2, 1))
    hits = {
        (h.event.session_id, h.event.seq): h.bm25
        for h in recall_hits(ledger, "which package manager does the frontend use", now_ms=NOW)
    }
    assert ("b", 11) in hits
    assert hits[("b", 11)] > hits[("a", 1)]  # below the direct match (bm25 is negative)


def test_feedback_bridges_a_second_hop(ledger: Ledger) -> None:
    """Multi-hop: the question names the dog, the dog's turns name the vet, the vet's turn is the answer."""
    fill(
        ledger,
        "a",
        ["Ann: my dog Rex saw doctor Okafor today", "Bo: nice", "Bo: nice", "Ann: the dog likes Okafor"],
        ms(2023, 1, 1),
    )
    fill(ledger, "b", ["Bo: Okafor prescribed antibiotics, twice a day"], ms(2023, 3, 1))
    found = {
        (h.event.session_id, h.event.seq)
        for h in recall_hits(ledger, "What did Ann's dog get from the vet?", now_ms=NOW)
    }
    assert ("b", 1) in found


def test_a_question_framing_word_does_not_pick_the_turns(ledger: Ledger) -> None:
    """Entity question: "likely" is rare in the ledger, but the turn about Ann's hiking is the one to find."""
    fill(
        ledger,
        "a",
        [
            "Bo: likely rain later, likely storms",
            "Ann: trails in the mountains again",
            "Ann: I went hiking with Bo",
        ],
        ms(2023, 1, 1),
    )
    hits = recall_hits(ledger, "Would Ann likely enjoy hiking?", now_ms=NOW)
    assert (hits[0].event.session_id, hits[0].event.seq) == ("a", 3)
    assert ("a", 1) not in {(h.event.session_id, h.event.seq) for h in hits}


def test_the_expansion_ranks_only_its_newest_matches(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past FEEDBACK_WINDOW matches, the expansion's older matches are not ranked; the question's are."""
    monkeypatch.setattr(recall_source, "FEEDBACK_WINDOW", 2)
    fill(
        ledger,
        "old",
        ["Ann: the ferry to the harbour", "Ann: ferry tickets from the harbour"],
        ms(2022, 1, 1),
    )
    fill(ledger, "mid", ["Bo: harbour lights"] * 3, ms(2023, 1, 1))
    hits = {(h.event.session_id, h.event.seq) for h in recall_hits(ledger, "the ferry", now_ms=NOW)}
    assert {("old", 1), ("old", 2)} <= hits
    assert {("mid", 2), ("mid", 3)} <= hits and ("mid", 1) not in hits


@pytest.mark.parametrize("seed", [1, 2])
def test_neighbours_are_each_hits_own_sessions_however_appends_interleave(ledger: Ledger, seed: int) -> None:
    """Sessions appending in turns, in runs of any length: every hit's neighbours are the
    events of its own session within two seqs, none past its session's ceiling."""
    import random

    rng = random.Random(seed)
    sessions = ["a", "b", "c"]
    for sid in sessions:
        ledger.open_session(sid, now=ms(2023, 1, 1))
    for _ in range(40):
        sid = rng.choice(sessions)
        ledger.append_events(
            sid,
            [
                EventInput(type="user_message", text=rng.choice(["kiwi talk", "other words", "kiwi"]))
                for _ in range(rng.randint(1, 4))
            ],
        )
    ceilings = {"b": 9}
    hits = recall_hits(ledger, "kiwi", now_ms=NOW, max_seq_by_session=ceilings)
    assert hits
    seqs = {sid: {e.seq: e for e in ledger.read_events(sid)} for sid in sessions}
    for hit in hits:
        sid, seq = hit.event.session_id, hit.event.seq
        top = min(max(seqs[sid]), ceilings.get(sid, 10**9))
        expected = [seqs[sid][s] for s in range(max(seq - 2, 1), min(seq + 2, top) + 1) if s != seq]
        assert hit.neighbours == expected


def test_past_the_recall_window_an_old_rare_word_still_recalls(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With more matches than RECALL_WINDOW, the question's rare word is found in an old
    session, while its common word's old matches are left unranked."""
    from makad.store.ledger import search

    monkeypatch.setattr(recall_source, "RECALL_WINDOW", 6)
    monkeypatch.setattr(search, "SMALL_LEDGER_EVENTS", 0)
    fill(ledger, "old", ["Ann: the kayak trip", "Ann: a deploy note", "Ann: deploy again"], ms(2022, 1, 1))
    fill(ledger, "new", [f"Bo: deploy step {i}" for i in range(30)], ms(2023, 1, 1))
    found = {(h.event.session_id, h.event.seq) for h in recall_hits(ledger, "deploy kayak", now_ms=NOW)}
    assert ("old", 1) in found
    assert ("old", 2) not in found and ("old", 3) not in found
