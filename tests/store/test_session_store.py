"""The session-store contract, run against both stores: the workspace ledger and the
incognito sessions in memory (``makad.store.session_store``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from makad.core.compaction import covered_hash
from makad.core.types import AppendResult, Checkpoint, Coverage, EventInput
from makad.errors import Conflict, InvalidParams, NotFound, TooLarge
from makad.store.ephemeral import EphemeralSessions
from makad.store.ledger import Ledger
from makad.store.session_store import SessionStore


@pytest.fixture(params=["ledger", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SessionStore]:
    """Each store in turn: a fresh ledger on disk, or the in-memory incognito store."""
    if request.param == "memory":
        yield EphemeralSessions()
        return
    ledger = Ledger(tmp_path / "ws" / "ledger.db")
    try:
        yield ledger
    finally:
        ledger.close()


def batch(*texts: str) -> list[EventInput]:
    return [EventInput(type="user_message", text=t, ts=1_000 + i) for i, t in enumerate(texts)]


def test_open_get_and_close(store: SessionStore) -> None:
    """A session opens with its title, reads back, reopens keeping it, and closes."""
    info = store.open_session("s1", title="first")
    assert (info.session_id, info.title, info.last_seq, info.closed_at) == ("s1", "first", 0, None)
    assert store.get_session("s1") == info
    assert store.close_session("s1").closed_at is not None
    assert store.open_session("s1").title == "first"
    assert store.get_session("s1").closed_at is None
    with pytest.raises(NotFound):
        store.get_session("nope")


def test_a_minted_session_id_is_usable(store: SessionStore) -> None:
    """Without an id the store mints one that reads back."""
    sid = store.open_session().session_id
    assert store.get_session(sid).session_id == sid


def test_appends_chain_from_seq_one_and_read_back_in_pages(store: SessionStore) -> None:
    """Seqs are gap-free from 1 across batches; last_seq follows; reads page by seq."""
    store.open_session("s")
    assert store.append_events("s", batch("a", "b")) == AppendResult(first_seq=1, last_seq=2)
    assert store.append_events("s", batch("c")) == AppendResult(first_seq=3, last_seq=3)
    assert store.last_seq("s") == 3
    events = store.read_events("s")
    assert [(e.seq, e.text) for e in events] == [(1, "a"), (2, "b"), (3, "c")]
    assert all(e.hash for e in events) and len({e.hash for e in events}) == 3
    assert [e.seq for e in store.read_events("s", after_seq=1, limit=1)] == [2]
    with pytest.raises(NotFound):
        store.last_seq("nope")


def test_append_refusals_and_replays(store: SessionStore) -> None:
    """expectedSeq mismatch conflicts, a requestId replays, empty batches and closed sessions are refused."""
    store.open_session("s")
    first = store.append_events("s", batch("a"), request_id="r", redactions=2)
    assert store.append_events("s", batch("a"), request_id="r", redactions=2) == first
    assert first.redactions == 2 and store.last_seq("s") == 1
    with pytest.raises(Conflict) as moved:
        store.append_events("s", batch("b"), expected_seq=0)
    assert moved.value.data()["currentSeq"] == 1
    assert store.append_events("s", batch("b"), expected_seq=1).last_seq == 2
    with pytest.raises(InvalidParams):
        store.append_events("s", [])
    store.close_session("s")
    with pytest.raises(Conflict):
        store.append_events("s", batch("c"))


def test_working_state_patches_conflicts_replays_and_caps(store: SessionStore) -> None:
    """Fields replace, notes merge, a stale revision conflicts, a requestId replays, caps hold."""
    store.open_session("s")
    assert store.get_working_state("s").revision == 0
    store.set_working_state("s", goals=["ship"], notes={"Workflow": "a", "Learnings": "b"})
    state = store.set_working_state("s", decisions=["d"], notes={"Workflow": ""}, request_id="r")
    assert store.set_working_state("s", goals=["other"], request_id="r") == state
    assert (state.goals, state.decisions, state.notes, state.revision) == (
        ["ship"],
        ["d"],
        {"Learnings": "b"},
        2,
    )
    with pytest.raises(Conflict):
        store.set_working_state("s", goals=["x"], expected_revision=0)
    with pytest.raises(TooLarge):
        store.set_working_state("s", goals=[str(i) for i in range(9)])
    assert store.get_working_state("s") == state


def test_the_latest_checkpoint_is_the_one_added_last(store: SessionStore) -> None:
    """No checkpoint: None; after adding two, the latest is the second and is listed."""
    store.open_session("s")
    store.append_events("s", batch("a", "b", "c", "d"))
    assert store.latest_checkpoint("s") is None and store.list_checkpoints("s") == []
    events = store.read_events("s")

    def checkpoint(cid: str, to_seq: int) -> Checkpoint:
        return Checkpoint(
            checkpoint_id=cid,
            session_id="s",
            boundary_seq=to_seq,
            coverage=Coverage(from_seq=1, to_seq=to_seq),
            covered_hash=covered_hash(events[:to_seq]),
            summary=f"up to {to_seq}",
            summary_tokens=3,
            preserved_from_seq=to_seq + 1,
            mode="checkpoint",
            reason="manual",
            created_at=5_000 + to_seq,
        )

    store.add_checkpoint(checkpoint("c1", 2))
    store.add_checkpoint(checkpoint("c2", 3))
    latest = store.latest_checkpoint("s")
    assert latest is not None and latest.checkpoint_id == "c2"
    assert store.list_checkpoints("s")[-1] == latest


def test_search_finds_events_by_their_words(store: SessionStore) -> None:
    """A history search finds the event holding the query's word (CJK too), within the session named."""
    store.open_session("s")
    store.open_session("t")
    store.append_events("s", batch("deploy plan", "数据库迁移", "lunch"))
    store.append_events("t", batch("deploy again"))
    assert [h.event.seq for h in store.search_history("数据库", session_id="s")] == [2]
    assert {(h.event.session_id, h.event.seq) for h in store.search_history("deploy")} == {("s", 1), ("t", 1)}
    assert [h.event.session_id for h in store.search_history("deploy", session_id="t", limit=5)] == ["t"]
    assert store.search_history("deploy", limit=0) == []


def test_retrieve_returns_the_events_a_ref_names(store: SessionStore) -> None:
    """An event ref comes back verified with its events; an unknown session's is missing."""
    store.open_session("s")
    store.append_events("s", batch("a", "b", "c"))
    found, missing = store.retrieve(["event:s:2-3", "event:nope:1"])
    assert found.ok and [e.text for e in found.events] == ["b", "c"]
    assert not missing.ok


def test_a_session_without_a_recorded_call_has_no_manifest(store: SessionStore) -> None:
    """Asking for a manifest nothing recorded (or of an unknown session) is NotFound."""
    store.open_session("s")
    with pytest.raises(NotFound):
        store.get_manifest("s")
    with pytest.raises(NotFound):
        store.get_manifest("nope", "c1")


def test_incognito_sessions_hold_a_bounded_amount_of_text_and_deleting_one_frees_it() -> None:
    """Incognito events live in memory only: past the cap an append is ``too_large`` and
    adds nothing (the sessions keep what they had); deleting a session frees its share."""
    store = EphemeralSessions(max_held_chars=1_000)
    store.open_session("a")
    store.open_session("b")
    store.append_events("a", batch("x" * 600))
    with pytest.raises(TooLarge) as refused:
        store.append_events("b", batch("y" * 300, "z" * 200))
    data = refused.value.data()
    assert (data["kind"], data["limit"], data["actual"]) == ("too_large", 1_000, 1_100)
    assert store.last_seq("b") == 0
    assert [e.text for e in store.read_events("a")] == ["x" * 600]
    store.append_events("b", [EventInput(type="user_message", text="y" * 300, ts=1, meta={"k": "v" * 99})])
    store.delete_session("a")
    assert store.append_events("b", batch("z" * 600)).last_seq == 2
