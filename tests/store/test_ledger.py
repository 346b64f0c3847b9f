"""The SQLite ledger: sessions, the hash-chained event log, integrity and durability."""

from __future__ import annotations

import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from makad.core.chain import event_hash
from makad.core.cjk import index_text
from makad.core.tokens import estimate_tokens
from makad.core.types import AppendResult, EventInput
from makad.errors import Conflict, InvalidParams, IOFailure, NotFound, TooLarge
from makad.store.ledger import Ledger
from makad.store.ledger import base as ledger_module
from makad.store.ledger.schema import SCHEMA_VERSION, migrate, user_version


def msgs(*texts: str) -> list[EventInput]:
    return [EventInput(type="user_message", text=text) for text in texts]


def tamper(path: Path, sql: str, *params: object) -> None:
    """Change the database behind the ledger's back, as another process could."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TRIGGER IF EXISTS events_append_only")
    conn.execute(sql, params)
    conn.commit()
    conn.close()


# ---------------------------------------------------------------------- sessions


def test_minted_session_ids_sort_by_creation_time(ledger: Ledger) -> None:
    """Ids the ledger mints are 32 hex digits whose order is the creation order."""
    first = ledger.open_session(now=1_000).session_id
    second = ledger.open_session(now=2_000).session_id
    assert len(first) == 32 and int(first, 16) >= 0
    assert first < second


def test_session_lifecycle(ledger: Ledger) -> None:
    """A session opens empty, closes once, and reopening clears closed_at."""
    info = ledger.open_session("s1", title="first", now=10)
    assert (info.last_seq, info.event_count, info.last_hash, info.title) == (0, 0, "", "first")
    assert ledger.close_session("s1", now=20).closed_at == 20
    assert ledger.close_session("s1", now=30).closed_at == 20
    assert [s.session_id for s in ledger.list_sessions(include_closed=False)] == []
    reopened = ledger.open_session("s1")
    assert reopened.closed_at is None and reopened.title == "first"


def test_session_ids_that_would_break_refs_are_refused(ledger: Ledger) -> None:
    """A client-chosen session id with ':' or spaces is invalid."""
    for bad in ("a:b", "", "has space", "x" * 129):
        with pytest.raises(InvalidParams):
            ledger.open_session(bad)


def test_unknown_session_is_not_found(ledger: Ledger) -> None:
    """Appending to or reading a session that was never opened is NotFound."""
    with pytest.raises(NotFound):
        ledger.append_events("nope", msgs("x"))
    with pytest.raises(NotFound):
        ledger.read_events("nope")


def test_closed_session_refuses_appends(ledger: Ledger) -> None:
    """Appending to a closed session is a conflict until it is reopened."""
    ledger.open_session("s")
    ledger.close_session("s")
    with pytest.raises(Conflict) as caught:
        ledger.append_events("s", msgs("x"))
    assert caught.value.data()["reason"] == "closed"
    ledger.open_session("s")
    assert ledger.append_events("s", msgs("x")).last_seq == 1


# ---------------------------------------------------------------------- appends


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=30), min_size=1, max_size=8))
def test_seqs_are_gap_free_across_batches(tmp_path_factory: pytest.TempPathFactory, sizes: list[int]) -> None:
    """Any sequence of batches yields seqs 1..n with no gap and a valid chain."""
    led = Ledger(tmp_path_factory.mktemp("gap") / "l.db")
    try:
        led.open_session("s")
        expected_first = 1
        for size in sizes:
            result = led.append_events("s", msgs(*(f"m{i}" for i in range(size))))
            assert (result.first_seq, result.last_seq) == (expected_first, expected_first + size - 1)
            expected_first += size
        events = led.read_events("s")
        assert [e.seq for e in events] == list(range(1, sum(sizes) + 1))
        assert led.verify_chain("s") == (True, None)
        assert led.get_session("s").event_count == sum(sizes)
    finally:
        led.close()


def test_hashes_chain_from_the_previous_event(ledger: Ledger) -> None:
    """Each hash is sha256(previous hash + canonical event); the first chains from ''."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("one", "two"))
    ledger.append_events(
        "s", [EventInput(type="tool_call", text="ls", tool_name="Bash", tool_call_id="c1", meta={"k": "v"})]
    )
    events = ledger.read_events("s")
    previous = ""
    for event in events:
        assert event.hash == event_hash(previous, event)
        previous = event.hash
    assert ledger.get_session("s").last_hash == events[-1].hash
    assert events[2].meta == {"k": "v"} and events[2].tool_name == "Bash"


def test_missing_ts_and_tokens_are_filled_in(ledger: Ledger) -> None:
    """An event without ts gets the call's time; without tokens, the estimate."""
    ledger.open_session("s")
    text = "hello world, 你好世界"
    ledger.append_events(
        "s",
        [EventInput(type="note", text=text), EventInput(type="note", text="x", ts=5, tokens=99)],
        now=1234,
    )
    first, second = ledger.read_events("s")
    assert (first.ts, first.tokens) == (1234, estimate_tokens(text))
    assert (second.ts, second.tokens) == (5, 99)


def test_expected_seq_mismatch_is_a_conflict_with_the_current_seq(ledger: Ledger) -> None:
    """expectedSeq other than the last seq fails with currentSeq and appends nothing."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("a", "b"), expected_seq=0)
    with pytest.raises(Conflict) as caught:
        ledger.append_events("s", msgs("c"), expected_seq=1)
    assert caught.value.data()["currentSeq"] == 2
    assert ledger.append_events("s", msgs("c"), expected_seq=2).last_seq == 3
    assert len(ledger.read_events("s")) == 3


def test_request_id_replays_the_first_result(ledger: Ledger) -> None:
    """A retried requestId returns the first result and appends nothing, even if stale."""
    ledger.open_session("s")
    first = ledger.append_events("s", msgs("a", "b"), expected_seq=0, request_id="r1")
    again = ledger.append_events("s", msgs("a", "b"), expected_seq=0, request_id="r1")
    assert first == again == AppendResult(first_seq=1, last_seq=2)
    assert len(ledger.read_events("s")) == 2
    stored = ledger.get_request_result("r1")
    assert stored is not None and stored.method == "append_events"
    assert msgspec.json.decode(stored.result) == {"firstSeq": 1, "lastSeq": 2, "redactions": 0}


def test_redaction_count_is_replayed_with_the_result(ledger: Ledger) -> None:
    """The caller's redaction count is stored with the result, so a retry reports it too."""
    ledger.open_session("s")
    first = ledger.append_events("s", msgs("a"), request_id="r1", redactions=2)
    again = ledger.append_events("s", msgs("a"), request_id="r1")
    assert first == again and again.redactions == 2


def test_failed_append_stores_no_request_result(ledger: Ledger) -> None:
    """A conflicting append leaves no idempotency record, so a corrected retry can succeed."""
    ledger.open_session("s")
    with pytest.raises(Conflict):
        ledger.append_events("s", msgs("a"), expected_seq=7, request_id="r")
    assert ledger.get_request_result("r") is None
    assert ledger.append_events("s", msgs("a"), expected_seq=0, request_id="r").last_seq == 1


def test_request_id_reused_by_another_method_conflicts(ledger: Ledger) -> None:
    """A requestId first used by another method cannot replay as append_events."""
    ledger.open_session("s")
    ledger.put_request_result("r", "approve", b"{}")
    with pytest.raises(Conflict):
        ledger.append_events("s", msgs("a"), request_id="r")


def test_append_validates_its_batch(ledger: Ledger) -> None:
    """Empty batches, unknown types and batches over 10,000 events are refused."""
    ledger.open_session("s")
    with pytest.raises(InvalidParams):
        ledger.append_events("s", [])
    with pytest.raises(InvalidParams):
        ledger.append_events("s", [EventInput(type="bogus", text="x")])  # type: ignore[arg-type]
    with pytest.raises(TooLarge):
        ledger.append_events("s", msgs(*["x"] * 10_001))
    assert ledger.append_events("s", msgs(*["x"] * 10_000)).last_seq == 10_000


def test_read_events_pages_by_seq(ledger: Ledger) -> None:
    """read_events returns events after a seq, in order, up to a limit."""
    ledger.open_session("s")
    ledger.append_events("s", msgs(*"abcdef"))
    assert [e.text for e in ledger.read_events("s", after_seq=2, limit=3)] == ["c", "d", "e"]
    assert ledger.read_events("s", after_seq=6) == []


# ---------------------------------------------------------------------- integrity


def test_database_refuses_updates_and_stray_deletes(ledger: Ledger) -> None:
    """Triggers make events append-only even for another connection."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("a"))
    conn = sqlite3.connect(ledger.path)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE events SET text = 'b'")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("DELETE FROM events")
    conn.close()
    assert ledger.read_events("s")[0].text == "a"


def test_retrieve_returns_exact_events_for_refs(ledger: Ledger) -> None:
    """Single and range refs return their events, verified, in order."""
    ledger.open_session("s")
    ledger.append_events("s", msgs(*"abcde"))
    one, span = ledger.retrieve(["event:s:2", "event:s:2-4"])
    assert one.ok and [e.text for e in one.events] == ["b"]
    assert span.ok and [e.seq for e in span.events] == [2, 3, 4]
    assert span.events == ledger.read_events("s", after_seq=1, limit=3)


def test_retrieve_reports_missing_seqs_and_rejects_bad_refs(ledger: Ledger) -> None:
    """Seqs past the end are reported missing; malformed refs are invalid."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("a", "b"))
    (result,) = ledger.retrieve(["event:s:2-4"])
    assert not result.ok and result.missing_seqs == [3, 4] and len(result.events) == 1
    (unknown,) = ledger.retrieve(["event:ghost:1"])
    assert unknown.missing_seqs == [1]
    for bad in ("memory:x", "event:s:0", "event:s:3-2", "event:s", "event:s:x"):
        with pytest.raises(InvalidParams):
            ledger.retrieve([bad])
    with pytest.raises(TooLarge):
        ledger.retrieve(["event:s:1-10001"])


def test_retrieve_detects_text_altered_behind_the_stores_back(ledger: Ledger) -> None:
    """A row whose text was changed with plain sqlite3 is reported as mismatched."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("pay 10 dollars", "ok", "done"))
    tamper(ledger.path, "UPDATE events SET text = 'pay 1000 dollars' WHERE seq = 2")
    (result,) = ledger.retrieve(["event:s:1-3"])
    assert not result.ok and result.mismatched_seqs == [2]
    assert result.events[1].text == "pay 1000 dollars"
    (before,) = ledger.retrieve(["event:s:1"])
    assert before.mismatched_seqs == [] and not before.chain_intact and not before.ok
    assert ledger.verify_chain("s") == (False, 2)


def test_retrieve_detects_a_rewritten_hash(ledger: Ledger) -> None:
    """Recomputing a tampered row's own hash still breaks the link to the next event."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("a", "b", "c"))
    first = ledger.read_events("s")[0]
    forged = msgspec.structs.replace(first, text="z")
    forged.hash = event_hash("", forged)
    tamper(ledger.path, "UPDATE events SET text = 'z', hash = ? WHERE seq = 1", forged.hash)
    (single,) = ledger.retrieve(["event:s:1"])
    assert single.mismatched_seqs == [] and not single.chain_intact and not single.ok
    assert ledger.retrieve(["event:s:2-3"])[0].mismatched_seqs == [2]
    assert ledger.verify_chain("s") == (False, 2)


def test_verify_chain_detects_a_rewritten_last_event(ledger: Ledger) -> None:
    """The session head catches a forged last event whose hash was recomputed."""
    ledger.open_session("s")
    ledger.append_events("s", msgs("a", "b"))
    events = ledger.read_events("s")
    forged = msgspec.structs.replace(events[1], text="z")
    forged.hash = event_hash(events[0].hash, forged)
    tamper(ledger.path, "UPDATE events SET text = 'z', hash = ? WHERE seq = 2", forged.hash)
    assert ledger.verify_chain("s") == (False, 2)
    (head,) = ledger.retrieve(["event:s:2"])
    assert head.mismatched_seqs == [] and not head.chain_intact


# ---------------------------------------------------------------------- delete


def test_delete_session_forgets_everything_and_leaves_a_tombstone(ledger: Ledger) -> None:
    """delete_session drops events, index rows, state, manifests, checkpoints; keeps a tombstone."""
    ledger.open_session("gone")
    ledger.open_session("kept")
    ledger.append_events("gone", msgs("secret zebra plan", "more"))
    ledger.append_events("kept", msgs("zebra crossing"))
    ledger.set_working_state("gone", goals=["g"])
    ledger.record_manifest("gone", "call-1", [("event:gone:1", 3, ""), ("memory:m", 2, "h")])
    last = ledger.get_session("gone").last_hash
    tombstone = ledger.delete_session("gone", now=99)
    assert (tombstone.session_id, tombstone.ts, tombstone.event_count) == ("gone", 99, 2)
    assert tombstone.last_hash == last
    assert ledger.list_tombstones() == [tombstone]
    with pytest.raises(Conflict) as refused:
        ledger.open_session("gone")
    assert refused.value.details["reason"] == "deleted"
    with pytest.raises(NotFound):
        ledger.read_events("gone")
    with pytest.raises(NotFound):
        ledger.get_manifest("gone")
    assert [h.event.session_id for h in ledger.search_history("zebra")] == ["kept"]
    conn = sqlite3.connect(ledger.path)
    assert conn.execute("SELECT count(*) FROM events WHERE session_id='gone'").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM working_state").fetchone() == (0,)
    for table in ("manifest_calls", "manifest_items", "manifest_shown"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 0)")
    conn.close()


def test_a_manifest_recorded_after_its_session_was_deleted_is_not_kept(ledger: Ledger) -> None:
    """A build_context that read the session before delete_session and records after it:
    its manifest, what it showed and its memory total are not stored (the forget stands)."""
    ledger.open_session("gone")
    ledger.append_events("gone", msgs("hello"))
    ledger.delete_session("gone")
    manifest = ledger.record_manifest(
        "gone", "call-1", [("event:gone:1", 3, ""), ("memory:m", 2, "h")], memory_bytes=2
    )
    assert manifest.call_id == "call-1"
    conn = sqlite3.connect(ledger.path)
    for table in ("manifest_calls", "manifest_items", "manifest_shown", "memory_session_totals"):
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,), table
    conn.close()
    with pytest.raises(NotFound):
        ledger.get_manifest("gone")


def test_delete_of_a_tampered_session_keeps_the_index_consistent(ledger: Ledger) -> None:
    """Forgetting a session whose rows were altered rebuilds the index instead of corrupting it."""
    ledger.open_session("gone")
    ledger.open_session("kept")
    ledger.append_events("gone", msgs("alpha beta"))
    ledger.append_events("kept", msgs("alpha gamma"))
    tamper(ledger.path, "UPDATE events SET text = 'delta' WHERE session_id = 'gone'")
    ledger.delete_session("gone")
    assert [h.event.text for h in ledger.search_history("alpha")] == ["alpha gamma"]
    conn = sqlite3.connect(ledger.path)
    conn.execute("INSERT INTO events_fts (events_fts, rank) VALUES ('integrity-check', 0)")
    conn.close()


# ---------------------------------------------------------------------- schema


def test_new_database_is_at_the_current_schema_version_with_private_mode(ledger: Ledger) -> None:
    """A fresh ledger is migrated to SCHEMA_VERSION, in WAL mode, readable by its owner only."""
    conn = sqlite3.connect(ledger.path)
    assert user_version(conn) == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()
    assert stat.S_IMODE(os.stat(ledger.path).st_mode) == 0o600


def test_migrate_applies_only_pending_steps_and_keeps_data(tmp_path: Path) -> None:
    """An older user_version gets just the missing steps, in order; rows survive."""
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    steps = [("CREATE TABLE t (x)",), ("INSERT INTO t VALUES (1)",), ("ALTER TABLE t ADD y",)]
    assert migrate(conn, steps[:1]) == 0
    conn.execute("INSERT INTO t VALUES (7)")
    assert migrate(conn, steps) == 1
    assert user_version(conn) == 3
    assert conn.execute("SELECT x, y FROM t ORDER BY x").fetchall() == [(1, None), (7, None)]
    assert migrate(conn, steps) == 3


def test_failed_migration_leaves_the_old_version(tmp_path: Path) -> None:
    """A step that fails rolls the whole migration back."""
    conn = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    with pytest.raises(sqlite3.OperationalError):
        migrate(conn, [("CREATE TABLE t (x)",), ("INSERT INTO missing VALUES (1)",)])
    assert user_version(conn) == 0
    assert conn.execute("SELECT name FROM sqlite_master").fetchall() == []


def test_database_from_a_newer_makad_is_moved_aside_not_used(tmp_path: Path) -> None:
    """A user_version above what this code knows is never guessed at: the file is kept
    aside under a name that says a newer makad wrote it (a downgrade must not block the
    workspace), its versions are reported, and a fresh ledger starts."""
    path = tmp_path / "new.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    led = Ledger(path)
    try:
        [reset] = led.resets
        assert (reset.cause, reset.versions) == ("newer_at_open", (SCHEMA_VERSION + 1, SCHEMA_VERSION))
        assert reset.moved_to.startswith("new.db.newer-")
        kept = sqlite3.connect(tmp_path / reset.moved_to)
        assert kept.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
        kept.close()
        assert user_version(sqlite3.connect(path)) == SCHEMA_VERSION
    finally:
        led.close()


def test_stale_search_index_is_rebuilt_on_open(tmp_path: Path) -> None:
    """A database indexed by another search-text version is re-indexed when opened."""
    path = tmp_path / "l.db"
    led = Ledger(path)
    led.open_session("s")
    led.append_events("s", msgs("東京の天気"))
    led.close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
    conn.execute("UPDATE meta SET value = 'old' WHERE key = 'search_text_version'")
    conn.commit()
    conn.close()
    led = Ledger(path)
    try:
        assert [h.event.seq for h in led.search_history("天気")] == [1]
    finally:
        led.close()


def test_rows_indexed_whole_by_an_earlier_release_are_removed_with_their_own_tokens(tmp_path: Path) -> None:
    """A ledger whose events were indexed whole (NFKC text of any length, before index text
    was bounded) opens without a rebuild; a session deleted then, old rows or new, leaves no
    token in the contentless index, and new rows are indexed bounded."""
    expanding = "\ufdfa" * 2_000 + " tailword"  # past four times its length: "tailword" is cut
    path = tmp_path / "l.db"
    led = Ledger(path)
    led.open_session("old")
    led.append_events("old", msgs(expanding))
    led.close()
    conn = sqlite3.connect(path)  # as the earlier release left it
    conn.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
    for rowid, text in conn.execute("SELECT id, text FROM events").fetchall():
        conn.execute("INSERT INTO events_fts (rowid, body) VALUES (?, ?)", (rowid, index_text(text)))
    conn.execute("DELETE FROM meta WHERE key = 'index_bounded_from'")
    conn.commit()
    conn.close()
    led = Ledger(path)
    try:
        led.open_session("new")
        led.append_events("new", msgs(expanding))

        def tail_rows() -> list[int]:
            raw = sqlite3.connect(path)
            try:
                return [
                    r[0]
                    for r in raw.execute("SELECT rowid FROM events_fts WHERE events_fts MATCH 'tailword'")
                ]
            finally:
                raw.close()

        assert len(tail_rows()) == 1  # the old row, indexed whole; the new one is bounded
        led.delete_session("old")
        led.delete_session("new")
        assert tail_rows() == []
        assert led.search_history("الله") == []
    finally:
        led.close()


def test_everything_persists_across_reopen(tmp_path: Path) -> None:
    """Closing and reopening the ledger keeps sessions, events and chain."""
    path = tmp_path / "l.db"
    led = Ledger(path)
    led.open_session("s")
    led.append_events("s", msgs("a", "b"))
    led.close()
    with pytest.raises(IOFailure):
        led.read_events("s")
    led = Ledger(path)
    try:
        assert [e.text for e in led.read_events("s")] == ["a", "b"]
        assert led.verify_chain("s") == (True, None)
    finally:
        led.close()


# ---------------------------------------------------------------------- concurrency, durability


def test_threads_appending_concurrently_keep_the_chain(ledger: Ledger) -> None:
    """Several threads appending to shared and own sessions lose nothing and break nothing."""
    ledger.open_session("shared")
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            ledger.open_session(f"own{n}")
            for i in range(20):
                ledger.append_events("shared", msgs(f"t{n} m{i}", "x"))
                ledger.append_events(f"own{n}", msgs(f"m{i}"))
                ledger.read_events("shared", after_seq=i)
                ledger.search_history("m1")
        except BaseException as exc:  # surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(5)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert [e.seq for e in ledger.read_events("shared")] == list(range(1, 201))
    assert ledger.verify_chain("shared") == (True, None)
    assert all(ledger.verify_chain(f"own{n}") == (True, None) for n in range(5))


_WRITER = """
import sys
from pathlib import Path
from makad.store.ledger import Ledger
from makad.core.types import EventInput
led = Ledger(Path(sys.argv[1]))
led.open_session("s")
while True:
    r = led.append_events("s", [EventInput(type="note", text="x" * 50)] * 10)
    print(r.last_seq, flush=True)
"""


def test_acknowledged_appends_survive_kill_9(tmp_path: Path) -> None:
    """Every append acknowledged before SIGKILL is there, chained, after reopening."""
    path = tmp_path / "l.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acked = [int(proc.stdout.readline()) for _ in range(20)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    led = Ledger(path)
    try:
        assert led.get_session("s").last_seq >= acked[-1] == 200
        assert led.verify_chain("s") == (True, None)
    finally:
        led.close()


def test_sqlite_memory_is_held_to_the_process_wide_soft_limit(ledger: Ledger) -> None:
    """Opening a ledger caps SQLite's memory for the whole process (page caches recycle)."""
    probe = sqlite3.connect(":memory:")
    try:
        limit = probe.execute("PRAGMA soft_heap_limit").fetchone()[0]
    finally:
        probe.close()
    assert limit == ledger_module.SQLITE_SOFT_HEAP_LIMIT_BYTES > 0
