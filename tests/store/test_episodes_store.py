"""The ledger's episode tables: recording, evidence per tag, offsets, marks and tombstones."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.types import EventInput, NewEpisode
from makad.errors import InvalidParams, IOFailure, NotFound
from makad.store.ledger import Ledger
from makad.store.ledger.schema import MIGRATIONS, SCHEMA_VERSION, migrate, user_version


def events(ledger: Ledger, sid: str, *texts: str, kind: str = "user_message") -> None:
    ledger.open_session(sid)
    ledger.append_events(sid, [EventInput(type=kind, text=t) for t in texts])  # type: ignore[arg-type]


def episode(
    sid: str,
    summary: str,
    tags: list[str],
    refs: list[str] | None = None,
    episode_id: str | None = None,
    at: int = 0,
) -> NewEpisode:
    return NewEpisode(
        episode_id=episode_id or f"ep-{sid}-{summary}",
        session_id=sid,
        kind="client",
        summary=summary,
        tags=tags,
        source_refs=refs if refs is not None else [f"event:{sid}:1"],
        at=at,
    )


def ids(records: list[object]) -> list[str]:
    return [r.episode_id for r in records]  # type: ignore[attr-defined]


def test_migration_adds_episode_tables_and_keeps_old_rows(tmp_path: Path) -> None:
    """A version-1 ledger with sessions opens at the current version with its rows intact."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:1])
    conn.execute("INSERT INTO sessions (session_id, created_at) VALUES ('s', 1)")
    conn.close()
    ledger = Ledger(path)
    try:
        assert ledger.get_session("s").created_at == 1
        assert ledger.list_episodes() == []
    finally:
        ledger.close()
    conn = sqlite3.connect(path)
    assert user_version(conn) == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()


def test_add_episode_checks_session_and_refs(ledger: Ledger) -> None:
    """Unknown session → NotFound; a ref to a missing event → InvalidParams naming it."""
    events(ledger, "s", "hello")
    with pytest.raises(NotFound):
        ledger.add_episode(episode("ghost", "x", [], refs=["event:s:1"]))
    with pytest.raises(InvalidParams) as caught:
        ledger.add_episode(episode("s", "x", [], refs=["event:s:1", "event:s:2-3"]))
    assert caught.value.data()["ref"] == "event:s:2-3"
    assert ledger.list_episodes() == []


def test_add_episode_refuses_a_tampered_event(ledger: Ledger) -> None:
    """A ref whose event no longer matches its hash is not evidence."""
    events(ledger, "s", "hello", "world")
    conn = sqlite3.connect(ledger.path)
    conn.execute("DROP TRIGGER events_append_only")
    conn.execute("UPDATE events SET text = 'forged' WHERE seq = 1")
    conn.commit()
    conn.close()
    with pytest.raises(InvalidParams):
        ledger.add_episode(episode("s", "x", [], refs=["event:s:1"]))


def test_same_remark_is_recorded_once_and_requests_replay(ledger: Ledger) -> None:
    """One summary (case and spacing aside) is one episode per session; a request id replays."""
    events(ledger, "s", "hello")
    events(ledger, "t", "hello")
    first = ledger.add_episode(episode("s", "Likes  Tea", ["tea"]), request_id="r")
    assert first.created
    again = ledger.add_episode(episode("s", "likes tea", ["tea"], episode_id="other"))
    assert not again.created and again.episode.episode_id == first.episode.episode_id
    assert ledger.add_episode(episode("s", "ignored", []), request_id="r") == first
    assert ledger.add_episode(episode("t", "likes tea", ["tea"])).created
    assert len(ledger.list_episodes()) == 2


def test_list_filters_and_order(ledger: Ledger) -> None:
    """Episodes come oldest first by `at`, filtered by tag, session, since and ids."""
    events(ledger, "s", "a")
    events(ledger, "t", "b")
    ledger.add_episode(episode("s", "late", ["x"], at=30))
    ledger.add_episode(episode("t", "early", ["x", "y"], at=10))
    ledger.add_episode(episode("s", "middle", ["y"], at=20))
    assert ids(ledger.list_episodes()) == ["ep-t-early", "ep-s-middle", "ep-s-late"]
    assert ids(ledger.list_episodes(tag="y")) == ["ep-t-early", "ep-s-middle"]
    assert ids(ledger.list_episodes(session_id="s", since=25)) == ["ep-s-late"]
    assert ids(ledger.list_episodes(episode_ids=["ep-s-late", "nope"])) == ["ep-s-late"]
    assert ids(ledger.list_episodes(limit=1)) == ["ep-t-early"]
    assert ledger.list_episodes(tag="x")[0].tags == ["x", "y"]


def test_queue_advances_the_offset_past_the_cited_episodes(ledger: Ledger) -> None:
    """Queuing links the proposal, moves the offset to the last cited episode and adds a
    `consolidated` lineage step; later episodes still count."""
    events(ledger, "s", "a")
    for i in range(4):
        ledger.add_episode(episode("s", f"e{i}", ["tea"]))
    offset = ledger.queue_consolidation("tea", "p1", ["ep-s-e0", "ep-s-e2"])
    assert offset == ledger.consolidation_offset("tea") == 3
    assert ids(ledger.evidence()["tea"]) == ["ep-s-e3"]
    (step,) = ledger.memory_history("p1")
    assert step.action == "consolidated" and step.data is not None
    assert step.data["sourceRefs"] == ["episode:ep-s-e0", "episode:ep-s-e2"]
    assert ledger.queue_consolidation("tea", "p1", ["ep-s-e3"]) == 3  # already queued
    with pytest.raises(NotFound):
        ledger.queue_consolidation("tea", "p2", ["nope"])


def test_queue_is_one_transaction(ledger: Ledger) -> None:
    """When the offset cannot be written, no link or lineage step is left behind."""
    events(ledger, "s", "a")
    ledger.add_episode(episode("s", "e", ["tea"]))
    conn = sqlite3.connect(ledger.path)
    conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON consolidation_offsets BEGIN SELECT RAISE(ABORT, 'boom'); END"
    )
    conn.commit()
    conn.close()
    with pytest.raises(IOFailure):
        ledger.queue_consolidation("tea", "p1", ["ep-s-e"])
    assert ledger.consolidation_offset("tea") == 0
    assert ids(ledger.evidence()["tea"]) == ["ep-s-e"]
    assert ledger.memory_history("p1") == []
    assert ledger.list_episodes()[0].consolidations == []


def test_settle_and_retract_mark_the_episodes(ledger: Ledger) -> None:
    """Approve, reject and delete outcomes show on the cited episodes; only queued ones settle."""
    events(ledger, "s", "a")
    ledger.add_episode(episode("s", "a", ["tea"]))
    ledger.add_episode(episode("s", "b", ["go"]))
    ledger.queue_consolidation("tea", "p1", ["ep-s-a"])
    ledger.queue_consolidation("go", "p2", ["ep-s-b"])
    assert ledger.settle_consolidations(
        {"p1": ("approved", "entry1"), "p2": ("rejected", None), "other": ("rejected", None)}
    ) == ["p1", "p2"]
    assert ledger.settle_consolidations({"p2": ("approved", "x")}) == []
    assert ledger.retract_entry("entry1") == ["p1"]
    marks = {e.episode_id: e.consolidations[0] for e in ledger.list_episodes()}
    assert (marks["ep-s-a"].state, marks["ep-s-a"].entry_id) == ("deleted", "entry1")
    assert marks["ep-s-b"].state == "rejected"


def test_delete_session_tombstones_its_episodes_and_citing_ones(ledger: Ledger) -> None:
    """A deleted session's episodes, and episodes citing its events, keep id and times only."""
    events(ledger, "s", "a")
    events(ledger, "t", "b")
    ledger.add_episode(episode("s", "own", ["tea"]))
    ledger.add_episode(episode("t", "zebracorn quartz", ["tea"], refs=["event:s:1"], episode_id="cites"))
    ledger.add_episode(episode("t", "kept", ["tea"]))
    ledger.delete_session("s")
    assert ids(ledger.list_episodes()) == ["ep-t-kept"]
    gone = {e.episode_id: e for e in ledger.list_episodes(include_deleted=True)}
    for episode_id in ("ep-s-own", "cites"):
        assert gone[episode_id].deleted_at is not None
        assert (gone[episode_id].summary, gone[episode_id].tags, gone[episode_id].source_refs) == ("", [], [])
    assert ids(ledger.evidence()["tea"]) == ["ep-t-kept"]
    wal = ledger.path.with_name(ledger.path.name + "-wal")
    raw = ledger.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert b"zebracorn" not in raw


def test_source_seqs_pick_matching_user_messages(ledger: Ledger) -> None:
    """Each text maps to the user message sharing most words; no match → last user message."""
    ledger.open_session("s")
    ledger.append_events(
        "s",
        [
            EventInput(type="user_message", text="make the parser faster"),
            EventInput(type="assistant_message", text="parser parser parser faster"),
            EventInput(type="user_message", text="store data in sqlite"),
            EventInput(type="user_message", text="thanks"),
        ],
    )
    assert ledger.source_seqs("s", ["parser faster"]) == [1]
    assert ledger.source_seqs("s", ["sqlite", "parser"]) == [1, 3]
    assert ledger.source_seqs("s", ["nothing shared"]) == [4]
    events(ledger, "quiet", "only the agent talks", kind="assistant_message")
    assert ledger.source_seqs("quiet", ["agent"]) == []


@settings(max_examples=25, deadline=None)
@given(sessions=st.lists(st.integers(0, 3), min_size=1, max_size=12), data=st.data())
def test_evidence_counts_what_follows_the_offset(sessions: list[int], data: st.DataObject) -> None:
    """Evidence for a tag is exactly the episodes after the last cited one, with their sessions."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(Path(tmp) / "l.db", synchronous="NORMAL")
        try:
            for s in range(4):
                events(ledger, f"s{s}", "x")
            recorded = [
                ledger.add_episode(episode(f"s{s}", f"e{i}", ["tea"])).episode for i, s in enumerate(sessions)
            ]
            cited = data.draw(st.lists(st.sampled_from(recorded), max_size=3, unique_by=id))
            if cited:
                ledger.queue_consolidation("tea", "p", [e.episode_id for e in cited])
            last = max((e.ordinal for e in cited), default=0)
            expected = [e for e in recorded if e.ordinal > last]
            found = ledger.evidence("tea").get("tea", [])
            assert ids(found) == ids(expected)
            assert {e.session_id for e in found} == {e.session_id for e in expected}
        finally:
            ledger.close()
