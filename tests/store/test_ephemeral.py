"""Incognito sessions in memory: the ledger's rules, no disk."""

from __future__ import annotations

import pytest

from makad.core.types import AppendResult, EventInput
from makad.errors import Conflict, NotFound
from makad.store.ephemeral import EphemeralSessions
from makad.store.ledger import Ledger


def batch(*texts: str) -> list[EventInput]:
    return [EventInput(type="assistant_message", text=t, ts=7) for t in texts]


def test_hash_chain_matches_the_sqlite_ledger(ledger: Ledger) -> None:
    """The same events get the same seqs and hashes in memory as on disk."""
    memory = EphemeralSessions()
    memory.open_session("s")
    ledger.open_session("s")
    for texts in (("a", "b"), ("東京",)):
        assert memory.append_events("s", batch(*texts)) == ledger.append_events("s", batch(*texts))
    assert memory.read_events("s") == ledger.read_events("s")
    assert memory.verify_chain("s") == (True, None)


def test_conflict_replay_and_close_follow_the_ledger_rules() -> None:
    """expectedSeq conflicts, requestId replays, closed sessions refuse appends."""
    memory = EphemeralSessions()
    sid = memory.open_session().session_id
    first = memory.append_events(sid, batch("a"), request_id="r")
    assert (
        memory.append_events(sid, batch("a"), request_id="r")
        == first
        == AppendResult(first_seq=1, last_seq=1)
    )
    with pytest.raises(Conflict) as caught:
        memory.append_events(sid, batch("b"), expected_seq=0)
    assert caught.value.data()["currentSeq"] == 1
    memory.close_session(sid)
    with pytest.raises(Conflict):
        memory.append_events(sid, batch("c"))


def test_read_retrieve_search_and_delete() -> None:
    """Reads page by seq, refs verify, search finds CJK, delete forgets the session."""
    memory = EphemeralSessions()
    memory.open_session("s")
    memory.append_events("s", batch("deploy plan", "数据库迁移", "lunch"))
    assert [e.seq for e in memory.read_events("s", after_seq=1, limit=1)] == [2]
    (ref,) = memory.retrieve(["event:s:2-3"])
    assert ref.ok and [e.text for e in ref.events] == ["数据库迁移", "lunch"]
    assert [h.event.seq for h in memory.search_history("数据库")] == [2]
    assert [h.event.seq for h in memory.search_history("Deploy")] == [1]
    assert memory.delete_session("s") == 3
    assert not memory.has_session("s")
    with pytest.raises(NotFound):
        memory.read_events("s")


def test_returned_events_cannot_corrupt_the_store() -> None:
    """Mutating an event a read returned does not change the stored chain."""
    memory = EphemeralSessions()
    memory.open_session("s")
    memory.append_events("s", batch("a"))
    memory.read_events("s")[0].text = "changed"
    assert memory.read_events("s")[0].text == "a"
    assert memory.verify_chain("s") == (True, None)


def test_working_state_follows_the_ledger_rules(ledger: Ledger) -> None:
    """In memory, working state merges, caps, conflicts and replays exactly as on disk."""
    from makad.errors import TooLarge

    memory = EphemeralSessions()
    memory.open_session("s")
    ledger.open_session("s")
    for store in (memory, ledger):
        store.set_working_state("s", goals=["ship"], notes={"Workflow": "a", "Learnings": "b"})
        store.set_working_state("s", decisions=["d"], notes={"Workflow": ""}, request_id="r")
        assert store.set_working_state("s", goals=["other"], request_id="r").goals == ["ship"]
        with pytest.raises(Conflict):
            store.set_working_state("s", goals=["x"], expected_revision=0)
        with pytest.raises(TooLarge):
            store.set_working_state("s", goals=[str(i) for i in range(9)])
    assert memory.get_working_state("s") == ledger.get_working_state("s")
    assert memory.get_working_state("s").notes == {"Learnings": "b"}
    memory.get_working_state("s").goals.append("mutated")
    assert memory.get_working_state("s").goals == ["ship"]


def test_retries_are_recognised_among_the_latest_requests_only() -> None:
    """Request ids are kept for a session's latest appends and working-state changes, not
    without end: the most recent still replay, the oldest are let go."""
    from makad.store.ephemeral import MAX_KEPT_REQUESTS, MAX_KEPT_STATE_REQUESTS

    memory = EphemeralSessions()
    sid = memory.open_session().session_id
    for i in range(MAX_KEPT_REQUESTS + 10):
        memory.append_events(sid, batch("x"), request_id=f"a{i}")
    for i in range(MAX_KEPT_STATE_REQUESTS + 10):
        memory.set_working_state(sid, goals=[f"g{i}"], request_id=f"s{i}")
    last = MAX_KEPT_REQUESTS + 9
    assert memory.append_events(sid, batch("x"), request_id=f"a{last}") == AppendResult(
        first_seq=last + 1, last_seq=last + 1
    )
    assert memory.append_events(sid, batch("x"), request_id="a0").first_seq == last + 2  # applied again
    assert memory.set_working_state(
        sid, goals=["new"], request_id=f"s{MAX_KEPT_STATE_REQUESTS + 9}"
    ).goals == [f"g{MAX_KEPT_STATE_REQUESTS + 9}"]
    assert memory.set_working_state(sid, goals=["new"], request_id="s0").goals == ["new"]
    held = memory._sessions[sid]  # the bound itself
    assert len(held.requests) <= MAX_KEPT_REQUESTS and len(held.state_requests) <= MAX_KEPT_STATE_REQUESTS
