"""The ledger's kept reads: what leaves them behind, what keeps them, and their bounds."""

from __future__ import annotations

import sqlite3
import threading

from makad.core.types import EventInput
from makad.store.ledger import Ledger
from makad.store.ledger.read_cache import ReadCache


def times_read(ledger: Ledger, calls: int = 1) -> int:
    runs = 0
    for _ in range(calls):

        def read() -> str:
            nonlocal runs
            runs += 1
            return "v"

        ledger.remember("tail", ("k",), read, lambda _: 1)
    return runs


def test_an_unchanged_ledger_reads_once(ledger: Ledger) -> None:
    """Three calls with nothing written between them run the read once."""
    assert times_read(ledger, 3) == 1


def test_an_append_leaves_the_kept_read_behind(ledger: Ledger) -> None:
    """After an append the same read runs again."""
    ledger.open_session(session_id="s")
    times_read(ledger)
    ledger.append_events("s", [EventInput(type="user_message", text="hi")])
    assert times_read(ledger) == 1


def test_a_manifest_keeps_the_read(ledger: Ledger) -> None:
    """Writing a build_context manifest (a table no kept read looks at) keeps it."""
    ledger.open_session(session_id="s")
    times_read(ledger)
    ledger.record_manifest("s", "call1", [("memory:a", 3, "h")], memory_bytes=10, since=0)
    assert times_read(ledger) == 0


def test_another_connections_commit_leaves_it_behind(ledger: Ledger) -> None:
    """A commit from another connection (a sqlite3 shell, another process) is seen."""
    ledger.open_session(session_id="s")
    times_read(ledger)
    other = sqlite3.connect(ledger.path)
    other.execute("UPDATE sessions SET title = 'x'")
    other.commit()
    other.close()
    assert times_read(ledger) == 1


def test_while_a_write_runs_nothing_is_kept(ledger: Ledger) -> None:
    """With the write lock held elsewhere the read runs each time and is not kept."""
    ledger.open_session(session_id="s")
    holding, release = threading.Event(), threading.Event()

    def write() -> None:
        with ledger.transaction():
            holding.set()
            release.wait(10)

    writer = threading.Thread(target=write)
    writer.start()
    holding.wait(10)
    try:
        assert times_read(ledger, 2) == 2
    finally:
        release.set()
        writer.join()
    assert times_read(ledger, 2) == 1


def test_each_kind_is_bounded_by_its_rows() -> None:
    """Past its budget a kind drops its least recently used reads; other kinds keep theirs."""
    cache = ReadCache({"tail": 10, "memory": 10})
    epoch = (0, 0, 0, 0)
    cache.put("memory", "m", epoch, "small", 1)
    for key in range(5):
        cache.put("tail", key, epoch, key, 4)
    assert cache.get("tail", 0, epoch) is None and cache.get("tail", 4, epoch) == 4
    assert cache.get("memory", "m", epoch) == "small"
    cache.put("tail", "huge", epoch, "x", 11)
    assert cache.get("tail", "huge", epoch) is None
    assert cache.get("tail", 4, (0, 0, 1, 0)) is None  # another epoch: not returned
