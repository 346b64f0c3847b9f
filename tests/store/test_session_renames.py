"""The one-time rename of sessions stored under an id holding a secret: every table follows,
the chain verifies as before (tampering included), it runs once, and all or nothing."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from makad.core.types import EventInput
from makad.errors import IOFailure
from makad.store.ledger import Ledger
from makad.store.ledger.schema import EVENTS_APPEND_ONLY, RENAME_PENDING_KEY, episode_summary_key

RAW = "AKIAIOSFODNN7EXAMPLE"
NEW = "redacted-0123456789abcdef"


def stand_in(value: str) -> str:
    return NEW if value == RAW else value


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A ledger holding a session under ``RAW`` (as a makad that did not screen ids stored it)."""
    led = Ledger(tmp_path / "ledger.sqlite3")
    led.open_session(RAW, title="deploy")
    led.append_events(
        RAW, [EventInput(type="user_message", text=f"turn {i} of the deploy") for i in range(5)]
    )
    led.open_session("plain")
    led.append_events("plain", [EventInput(type="user_message", text="an unrelated turn")])
    # What the schema step leaves in a ledger that held sessions when it was upgraded.
    conn = raw_conn(led)
    conn.execute("INSERT INTO meta (key, value) VALUES (?, '1')", (RENAME_PENDING_KEY,))
    conn.close()
    yield led
    led.close()


def raw_conn(led: Ledger) -> sqlite3.Connection:
    return sqlite3.connect(led.path, isolation_level=None)


def test_the_renamed_session_keeps_its_events_hashes_and_verification(ledger: Ledger) -> None:
    """Renamed: the events keep their hashes and verify under the new id; the old id is gone."""
    before = ledger.read_events(RAW)
    assert ledger.rename_secret_session_ids(stand_in) == (1, 0)
    after = ledger.read_events(NEW)
    assert [(e.seq, e.text, e.hash) for e in after] == [(e.seq, e.text, e.hash) for e in before]
    assert {e.session_id for e in after} == {NEW}
    assert ledger.verify_chain(NEW) == (True, None)
    assert ledger.unverified(after) == set()
    [span] = ledger.retrieve([f"event:{NEW}:2-4"])
    assert span.ok and all(e.verified for e in span.events)
    assert [s.session_id for s in ledger.list_sessions()] == sorted(
        [NEW, "plain"], key=lambda s: s != "plain"
    )
    with pytest.raises(Exception, match="no such session"):
        ledger.get_session(RAW)
    ledger.append_events(NEW, [EventInput(type="user_message", text="after the rename")])
    assert ledger.verify_chain(NEW) == (True, None)
    assert ledger.unverified(ledger.read_events(NEW)) == set()


def test_an_event_altered_before_the_rename_is_still_reported(ledger: Ledger) -> None:
    """Text edited in place before the rename breaks the same link after it."""
    conn = raw_conn(ledger)
    conn.execute("DROP TRIGGER events_append_only")
    conn.execute("UPDATE events SET text = 'edited' WHERE session_id = ? AND seq = 3", (RAW,))
    conn.execute(EVENTS_APPEND_ONLY)
    conn.close()
    assert ledger.verify_chain(RAW) == (False, 3)
    ledger.rename_secret_session_ids(stand_in)
    assert ledger.verify_chain(NEW) == (False, 3)
    bad = ledger.unverified(ledger.read_events(NEW))
    assert bad == {(NEW, 2), (NEW, 3)}


def test_it_runs_once(ledger: Ledger) -> None:
    """With the marker gone a later call renames nothing, even a raw id stored since."""
    assert ledger.rename_secret_session_ids(stand_in) == (1, 0)
    assert ledger.rename_secret_session_ids(stand_in) == (0, 0)
    with ledger.snapshot() as conn:
        assert conn.execute("SELECT 1 FROM meta WHERE key = ?", (RENAME_PENDING_KEY,)).fetchone() is None


def test_a_failure_midway_leaves_the_ledger_as_it_was(ledger: Ledger) -> None:
    """A write that fails after the events were renamed rolls everything back: the raw id,
    the append-only trigger and the marker are all still there, and a retry completes."""
    conn = raw_conn(ledger)
    conn.execute(
        "CREATE TRIGGER refuse BEFORE UPDATE ON working_state BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    conn.close()
    ledger.set_working_state(RAW, goals=["ship"])
    with pytest.raises(IOFailure):
        ledger.rename_secret_session_ids(stand_in)
    assert ledger.get_session(RAW).event_count == 5
    assert {e.session_id for e in ledger.read_events(RAW)} == {RAW}
    with ledger.snapshot() as snap:
        names = {n for (n,) in snap.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
        assert "events_append_only" in names
        assert snap.execute("SELECT count(*) FROM session_chain_ids").fetchone() == (0,)
    conn = raw_conn(ledger)
    conn.execute("DROP TRIGGER refuse")
    conn.close()
    assert ledger.rename_secret_session_ids(stand_in) == (1, 0)
    assert ledger.get_working_state(NEW).goals == ["ship"]


def test_a_stand_in_already_taken_is_left_alone(ledger: Ledger) -> None:
    """When a session already has the stand-in, the raw one keeps its id (counted as left)."""
    ledger.open_session(NEW)
    assert ledger.rename_secret_session_ids(stand_in) == (0, 1)
    assert ledger.get_session(RAW).event_count == 5


def test_refs_and_json_records_follow_the_rename(ledger: Ledger) -> None:
    """Source refs in manifests and episodes, episodes' one-remark keys, and JSON records naming
    the session take the new id."""
    conn = raw_conn(ledger)
    conn.execute(
        "INSERT INTO manifest_calls (id, session_id, call_id, created_at) VALUES (1, ?, 'c1', 1)", (RAW,)
    )
    conn.execute(
        "INSERT INTO manifest_items (call_ref, position, source_id, tokens, content_hash)"
        " VALUES (1, 0, ?, 3, '')",
        (f"event:{RAW}:1-2",),
    )
    conn.execute(
        "INSERT INTO requests (request_id, method, result, ts) VALUES ('r1', 'open_session', ?, 1)",
        (f'{{"sessionId":"{RAW}","title":"deploy"}}'.encode(),),
    )
    conn.execute(
        "INSERT INTO episodes (id, episode_id, session_id, kind, summary, summary_key, at, created_at)"
        " VALUES (1, 'e1', ?, 'decision', 'use blue', ?, 1, 1)",
        (RAW, episode_summary_key(RAW, "use blue")),
    )
    conn.execute(
        "INSERT INTO episode_refs (episode_ref, position, ref, session_id) VALUES (1, 0, ?, ?)",
        (f"event:{RAW}:3", RAW),
    )
    conn.close()
    ledger.rename_secret_session_ids(stand_in)
    with ledger.snapshot() as snap:
        assert snap.execute("SELECT session_id, summary_key FROM episodes").fetchone() == (
            NEW,
            episode_summary_key(NEW, "use blue"),
        )
        assert snap.execute("SELECT ref, session_id FROM episode_refs").fetchone() == (f"event:{NEW}:3", NEW)
        assert snap.execute("SELECT session_id FROM manifest_calls").fetchone() == (NEW,)
        assert snap.execute("SELECT source_id FROM manifest_items").fetchone() == (f"event:{NEW}:1-2",)
        (result,) = snap.execute("SELECT result FROM requests").fetchone()
        assert isinstance(result, bytes) and result == f'{{"sessionId":"{NEW}","title":"deploy"}}'.encode()
