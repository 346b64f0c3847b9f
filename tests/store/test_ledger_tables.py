"""The ledger's other tables: working state, manifests, checkpoints, lineage, queues, settings."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import msgspec
import pytest

from makad.core.types import (
    NOTE_SECTIONS,
    Checkpoint,
    Coverage,
    CuratorTrace,
    Entry,
    EventInput,
    ManifestItem,
    NewMemoryEvent,
    WorkingState,
)
from makad.errors import Conflict, InvalidParams, NotFound, TooLarge
from makad.store.ledger import Ledger
from makad.store.ledger import turns as ledger_module
from makad.store.ledger.records import RequestRecord
from makad.store.ledger.schema import MIGRATIONS, migrate

# ---------------------------------------------------------------------- working state


def test_working_state_starts_empty_and_merges_note_sections(ledger: Ledger) -> None:
    """Set replaces given lists, merges notes by section, and bumps the revision."""
    ledger.open_session("s")
    assert ledger.get_working_state("s") == WorkingState()
    first = ledger.set_working_state("s", goals=["ship"], notes={"Workflow": "a", "Learnings": "b"})
    assert first.revision == 1
    second = ledger.set_working_state("s", decisions=["use sqlite"], notes={"Workflow": ""})
    assert second.goals == ["ship"] and second.decisions == ["use sqlite"]
    assert second.notes == {"Learnings": "b"} and second.revision == 2
    assert ledger.get_working_state("s") == second


def test_working_state_unknown_session_is_not_found(ledger: Ledger) -> None:
    """Working state belongs to an existing session."""
    with pytest.raises(NotFound):
        ledger.get_working_state("ghost")
    with pytest.raises(NotFound):
        ledger.set_working_state("ghost", goals=["x"])


@pytest.mark.parametrize(("field", "cap"), [("goals", 8), ("open_threads", 12), ("decisions", 20)])
def test_working_state_list_caps(ledger: Ledger, field: str, cap: int) -> None:
    """A list at its cap is accepted; one more item is TooLarge and nothing changes."""
    ledger.open_session("s")
    ledger.set_working_state("s", **{field: ["x"] * cap})
    with pytest.raises(TooLarge) as caught:
        ledger.set_working_state("s", **{field: ["x"] * (cap + 1)})
    assert caught.value.data()["limit"] == cap
    assert ledger.get_working_state("s").revision == 1


def test_note_caps_per_section_and_in_all(ledger: Ledger) -> None:
    """A section over 2,000 tokens, or notes over 12,000 in all, are TooLarge."""
    ledger.open_session("s")
    at_cap = "abcd" * 2_000  # 2,000 tokens
    ledger.set_working_state("s", notes={NOTE_SECTIONS[0]: at_cap})
    with pytest.raises(TooLarge):
        ledger.set_working_state("s", notes={NOTE_SECTIONS[1]: at_cap + "abcd"})
    with pytest.raises(TooLarge) as caught:
        ledger.set_working_state("s", notes=dict.fromkeys(NOTE_SECTIONS[1:7], at_cap))
    assert caught.value.data()["limit"] == 12_000


def test_unknown_note_section_is_invalid(ledger: Ledger) -> None:
    """Notes are keyed by NOTE_SECTIONS only."""
    ledger.open_session("s")
    with pytest.raises(InvalidParams):
        ledger.set_working_state("s", notes={"Random": "x"})


def test_working_state_compare_and_swap_and_replay(ledger: Ledger) -> None:
    """A stale expectedRevision conflicts; a retried requestId returns the first state."""
    ledger.open_session("s")
    first = ledger.set_working_state("s", goals=["a"], expected_revision=0, request_id="r")
    with pytest.raises(Conflict) as caught:
        ledger.set_working_state("s", goals=["b"], expected_revision=0)
    assert caught.value.data()["currentRevision"] == 1
    assert ledger.set_working_state("s", goals=["c"], request_id="r") == first
    assert ledger.get_working_state("s").goals == ["a"]


# ---------------------------------------------------------------------- manifests


def test_manifest_records_and_returns_the_latest_call(ledger: Ledger) -> None:
    """get_manifest returns a named call, or the latest; re-recording a call replaces it."""
    ledger.record_manifest("s", "c1", [("memory:a", 10, "h1")], created_at=1)
    ledger.record_manifest(
        "s", "c2", [ManifestItem(source_id="event:s:1", tokens=5, content_hash="h2")], created_at=2
    )
    assert ledger.get_manifest("s").call_id == "c2"
    assert ledger.get_manifest("s", "c1").items == [
        ManifestItem(source_id="memory:a", tokens=10, content_hash="h1")
    ]
    ledger.record_manifest("s", "c1", [("x", 1, "y"), ("z", 2, "w")], created_at=3)
    assert [i.source_id for i in ledger.get_manifest("s", "c1").items] == ["x", "z"]
    with pytest.raises(NotFound):
        ledger.get_manifest("s", "nope")


def test_manifest_returns_the_curator_record_kept_with_its_call(ledger: Ledger) -> None:
    """get_manifest carries the call's curator record; none without one; a damaged or older
    record never keeps the manifest from being served."""
    record = CuratorTrace(model="m", shadow=True, status="ok", selected=["memory:b"], packed=["memory:b"])
    ledger.record_manifest(
        "s", "c1", [("memory:a", 10, "h1")], created_at=1, curator=msgspec.json.encode(record)
    )
    assert ledger.get_manifest("s", "c1").curator == record
    ledger.record_manifest("s", "c2", [("memory:a", 10, "h1")], created_at=2)
    assert ledger.get_manifest("s", "c2").curator is None
    older = b'{"model": "m", "shadow": true, "status": "ok", "selected": ["memory:a"]}'
    ledger.record_manifest("s", "c3", [], created_at=3, curator=older)
    read = ledger.get_manifest("s", "c3").curator
    assert read is not None and read.selected == ["memory:a"] and read.packed == [] and read.overlap is None
    for damaged in (b"{not json", b'{"model": 3}', b'{"model": "m", "shadow": true, "status": "psychic"}'):
        ledger.record_manifest("s", "c4", [("event:s:1", 5, "")], created_at=4, curator=damaged)
        manifest = ledger.get_manifest("s", "c4")
        assert manifest.curator is None and manifest.items[0].source_id == "event:s:1"


def test_shown_memory_keeps_the_latest_version_of_each_entry(ledger: Ledger) -> None:
    """Each memory item a call sends updates what the session was shown; others are not kept."""
    ledger.record_manifest("s", "c1", [("memory:a", 10, "h1"), ("event:s:1", 5, "")], created_at=1)
    ledger.record_manifest("s", "c2", [("memory:a", 10, "h2"), ("memory:b", 3, "hb")], created_at=5)
    everything = ["memory:a", "memory:b", "memory:c", "event:s:1"]
    shown = ledger.shown_memory("s", 0, everything)
    assert shown.latest_call_id == "c2"
    ref = shown.latest_call_ref
    assert shown.items == {"memory:a": ("h2", ref), "memory:b": ("hb", ref)}
    assert ledger.shown_memory("s", 0, ["memory:b"]).items == {"memory:b": ("hb", ref)}
    assert ledger.shown_memory("s", 6, everything).items == {}
    assert ledger.shown_memory("other", 0, everything) == type(shown)(None, None, {})


def test_manifest_keeps_only_the_latest_calls(ledger: Ledger) -> None:
    """Old calls' manifests are dropped past MANIFEST_CALLS_KEPT; what they showed stays known."""
    kept = ledger_module.MANIFEST_CALLS_KEPT
    for n in range(kept + 5):
        ledger.record_manifest("s", f"c{n}", [(f"memory:{n}", 1, f"h{n}")], created_at=n)
    with pytest.raises(NotFound):
        ledger.get_manifest("s", "c0")
    assert ledger.get_manifest("s", "c5").items[0].source_id == "memory:5"
    every = [f"memory:{n}" for n in range(kept + 5)]
    assert len(ledger.shown_memory("s", 0, every).items) == kept + 5


def test_migration_to_v3_carries_what_the_latest_manifest_showed(tmp_path: Path) -> None:
    """A version-2 ledger's latest manifest per session becomes its shown memory."""
    path = tmp_path / "v2.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:2])
    conn.execute(
        "INSERT INTO manifest_calls (id, session_id, call_id, created_at)"
        " VALUES (1, 's', 'old', 1), (2, 's', 'new', 2)"
    )
    conn.execute(
        "INSERT INTO manifest_items VALUES (1, 0, 'memory:x', 4, 'hx'),"
        " (2, 0, 'memory:x', 0, 'hx'), (2, 1, 'memory:y', 3, 'hy'),"
        " (2, 2, 'event:s:1', 2, '')"
    )
    conn.close()
    ledger = Ledger(path)
    try:
        assert ledger.shown_memory("s", 0, ["memory:x", "memory:y"]).items == {
            "memory:x": ("hx", 2),
            "memory:y": ("hy", 2),
        }
        assert [i.source_id for i in ledger.get_manifest("s").items] == ["memory:y", "event:s:1"]
    finally:
        ledger.close()


# ---------------------------------------------------------------------- checkpoints


def _checkpoint(ledger: Ledger, cid: str, to_seq: int, created_at: int = 1) -> Checkpoint:
    covered = ledger.read_events("s")[to_seq - 1]
    return Checkpoint(
        checkpoint_id=cid,
        session_id="s",
        boundary_seq=to_seq,
        coverage=Coverage(from_seq=1, to_seq=to_seq),
        covered_hash=covered.hash,
        summary="summary",
        summary_tokens=2,
        preserved_from_seq=to_seq + 1,
        mode="checkpoint",
        reason="manual",
        created_at=created_at,
    )


def test_checkpoints_store_and_list_in_order(ledger: Ledger) -> None:
    """Added checkpoints come back by id, latest, and in order."""
    ledger.open_session("s")
    ledger.append_events("s", [EventInput(type="note", text=str(i)) for i in range(6)])
    assert ledger.latest_checkpoint("s") is None
    one = ledger.add_checkpoint(_checkpoint(ledger, "cp1", 3))
    two = ledger.add_checkpoint(_checkpoint(ledger, "cp2", 5, created_at=2))
    assert ledger.latest_checkpoint("s") == two
    assert ledger.list_checkpoints("s") == [one, two]
    assert ledger.get_checkpoint("cp1") == one
    with pytest.raises(NotFound):
        ledger.get_checkpoint("cp9")


def test_checkpoint_must_match_the_ledger(ledger: Ledger) -> None:
    """A wrong covered hash, a range past the end or a reused id is refused."""
    ledger.open_session("s")
    ledger.append_events("s", [EventInput(type="note", text=str(i)) for i in range(4)])
    good = _checkpoint(ledger, "cp", 2)
    with pytest.raises(Conflict):
        ledger.add_checkpoint(msgspec.structs.replace(good, covered_hash="0" * 64))
    with pytest.raises(InvalidParams):
        ledger.add_checkpoint(msgspec.structs.replace(good, coverage=Coverage(from_seq=1, to_seq=9)))
    ledger.add_checkpoint(good)
    with pytest.raises(Conflict):
        ledger.add_checkpoint(good)
    assert len(ledger.list_checkpoints("s")) == 1


def test_checkpoint_stores_its_request_in_the_same_transaction(ledger: Ledger) -> None:
    """A request record given with a write is stored with it; a replay is refused."""
    ledger.open_session("s")
    ledger.append_events("s", [EventInput(type="note", text="a")])
    record = RequestRecord(request_id="rq", method="compact", result=b'{"ok":true}')
    ledger.add_checkpoint(_checkpoint(ledger, "cp", 1), request=record)
    stored = ledger.get_request_result("rq")
    assert stored is not None and stored.result == b'{"ok":true}'
    with pytest.raises(Conflict) as caught:
        ledger.add_checkpoint(_checkpoint(ledger, "cp-retry", 1), request=record)
    assert caught.value.data()["reason"] == "duplicate"
    assert len(ledger.list_checkpoints("s")) == 1


# ---------------------------------------------------------------------- memory lineage


def test_memory_history_follows_a_proposal_into_its_entry(ledger: Ledger) -> None:
    """An entry's history includes the events of the proposal it came from, in order."""
    ledger.append_memory_event(action="proposed", actor="agent", proposal_id="p1", data={"title": "t"}, ts=1)
    ledger.append_memory_event(action="approved", actor="user", proposal_id="p1", entry_id="e1", ts=2)
    ledger.append_memory_event(action="edited", actor="user", entry_id="e1", ts=3)
    ledger.append_memory_event(action="added", actor="user", entry_id="other", ts=4)
    history = ledger.memory_history("e1")
    assert [h.action for h in history] == ["proposed", "approved", "edited"]
    assert history[0].data == {"title": "t"}
    assert [h.action for h in ledger.memory_history("p1")] == ["proposed", "approved"]


def test_memory_events_validate_and_stay_append_only(ledger: Ledger) -> None:
    """Unknown actions or actors are invalid; the table refuses updates."""
    with pytest.raises(InvalidParams):
        ledger.append_memory_event(action="frobbed", actor="user", entry_id="e")
    with pytest.raises(InvalidParams):
        ledger.append_memory_event(action="added", actor="robot", entry_id="e")
    ledger.append_memory_event(action="added", actor="user", entry_id="e")
    conn = sqlite3.connect(ledger.path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE memory_events SET action = 'deleted'")
    conn.close()


# ---------------------------------------------------------------------- rejections, requests, intents


def test_rejections_are_found_by_content_hash(ledger: Ledger) -> None:
    """A recorded rejection is found by its hash; an unknown hash is None."""
    ledger.record_rejection("h1", reason="duplicate", proposal_id="p", ts=5)
    found = ledger.find_rejection("h1")
    assert found is not None and (found.proposal_id, found.reason, found.ts) == ("p", "duplicate", 5)
    assert ledger.find_rejection("h2") is None


def test_request_results_first_write_wins_and_prune(ledger: Ledger) -> None:
    """put_request_result keeps the first result; prune drops old ones."""
    assert ledger.put_request_result("r", "m", b"1", ts=10).result == b"1"
    assert ledger.put_request_result("r", "m", b"2", ts=20).result == b"1"
    ledger.put_request_result("new", "m", b"3", ts=30)
    assert ledger.prune_requests(older_than=25) == 1
    assert ledger.get_request_result("r") is None
    assert ledger.get_request_result("new") is not None


def test_intents_stay_open_until_finished(ledger: Ledger) -> None:
    """Begun intents are listed until finished; finishing an unknown one is NotFound."""
    a = ledger.begin_intent("approve", {"proposalId": "p1"}, ts=1)
    b = ledger.begin_intent("archive", {"entryId": "e"}, intent_id="fixed", ts=2)
    assert [i.id for i in ledger.open_intents()] == [a.id, "fixed"]
    assert ledger.open_intents()[0].payload == {"proposalId": "p1"}
    ledger.finish_intent(a.id)
    ledger.finish_intent(a.id)
    assert [i.id for i in ledger.open_intents()] == [b.id]
    with pytest.raises(NotFound):
        ledger.finish_intent("ghost")
    with pytest.raises(Conflict):
        ledger.begin_intent("x", {}, intent_id="fixed")


def test_an_operations_ledger_part_commits_whole_or_not_at_all(ledger: Ledger) -> None:
    """record_lineage writes the steps, the rejections, the intent's close and the request
    record together; a second call with the same request is refused and adds nothing."""
    intent = ledger.begin_intent("request", {"rejected": []}, intent_id="reject:r1")
    record = RequestRecord(request_id="reject:r1", method="reject", result=b'{"rejected":["p1"]}')
    steps = [NewMemoryEvent(action="rejected", actor="user", proposal_id="p1", data={"reason": None})]
    ledger.record_lineage(steps, rejected={"h1": "p1"}, reason="no", finish_intent=intent.id, request=record)
    ledger.record_lineage([], rejected={"h1": "p9"}, reason="later")
    assert [e.action for e in ledger.memory_history("p1")] == ["rejected"]
    assert ledger.find_rejection("h1").proposal_id == "p1"  # type: ignore[union-attr]
    assert ledger.find_rejection("h1").reason == "no"  # type: ignore[union-attr]
    assert ledger.open_intents() == []
    assert ledger.get_request_result("reject:r1").result == record.result  # type: ignore[union-attr]
    with pytest.raises(Conflict):
        ledger.record_lineage(steps, request=record)
    assert len(ledger.memory_history("p1")) == 1


def test_a_failed_intent_close_rolls_the_steps_back(ledger: Ledger) -> None:
    """Closing an intent that does not exist fails the whole transaction: no step is kept."""
    steps = [NewMemoryEvent(action="added", actor="user", entry_id="e1")]
    with pytest.raises(NotFound):
        ledger.record_lineage(steps, finish_intent="ghost")
    assert ledger.memory_history("e1") == []


# ---------------------------------------------------------------------- memory index, settings


def test_memory_index_is_replaced_and_searched(ledger: Ledger) -> None:
    """search_memory ranks entries by title, content and tags; replacing drops old entries."""
    ledger.replace_memory_index(
        [
            Entry(id="e1", title="Deploy process", content="We deploy with blue-green."),
            Entry(id="e2", title="偏好", content="用户喜欢使用数据库迁移工具", tags=["数据库"]),
            Entry(id="e3", title="Coffee", content="The user likes coffee.", tags=["deploy"]),
        ]
    )
    ranked = ledger.search_memory("how do we deploy")
    assert [entry_id for entry_id, _ in ranked][:1] == ["e1"] and len(ranked) == 2
    assert all(score > 0 for _, score in ranked)
    assert [e for e, _ in ledger.search_memory("数据库迁移")] == ["e2"]
    ledger.replace_memory_index([Entry(id="e9", title="Other", content="nothing")])
    assert ledger.search_memory("deploy") == []


def test_settings_round_trip_as_json(ledger: Ledger) -> None:
    """Settings are upserted by key, or replaced wholesale."""
    ledger.put_settings_json({"agentReadEnabled": True, "budget": {"tokens": 4000}})
    ledger.put_settings_json({"agentReadEnabled": False})
    assert ledger.get_settings_json() == {"agentReadEnabled": False, "budget": {"tokens": 4000}}
    ledger.put_settings_json({"x": [1, "二"]}, replace=True)
    assert ledger.get_settings_json() == {"x": [1, "二"]}


def test_a_conditional_setting_changes_only_what_it_expected(ledger: Ledger) -> None:
    """put_setting_if writes an absent key, or a key still holding the expected value, and
    leaves a value another write put there meanwhile."""
    assert ledger.put_setting_if("__revision__", None, 10) is True
    assert ledger.put_setting_if("__revision__", None, 11) is False
    assert ledger.put_setting_if("__revision__", 10, 12) is True
    assert ledger.put_setting_if("__revision__", 10, 13) is False
    assert ledger.get_settings_json() == {"__revision__": 12}


def test_a_deleted_session_is_looked_up_by_index(tmp_path: Path) -> None:
    """Whether a session was deleted is an index lookup, not a scan of every tombstone."""
    path = tmp_path / "ledger.db"
    Ledger(path).close()
    conn = sqlite3.connect(path)
    try:
        plan = conn.execute(
            "EXPLAIN QUERY PLAN SELECT 1 FROM tombstones WHERE session_id = ?", ("s",)
        ).fetchall()
    finally:
        conn.close()
    assert any("USING" in str(row[-1]) and "INDEX" in str(row[-1]) for row in plan), plan
