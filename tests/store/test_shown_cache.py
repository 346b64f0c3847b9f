"""The in-memory copy of what each session was shown (``shown_since``): it follows every
recorded pack, a compaction's ``since``, a deleted session and a reopened ledger, and
agrees with SQLite (``shown_memory``) throughout."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from makad import heap
from makad.store.ledger import Ledger
from makad.store.ledger.shown_cache import ByteBudget, ShownCache, row_bytes


def truth(ledger: Ledger, sid: str, since: int) -> dict[str, str]:
    """What SQLite says the session was shown since ``since`` (the memory entries)."""
    rows = ledger.shown_memory(sid, since, None).items
    return {source: digest for source, (digest, _) in rows.items()}


def test_each_recorded_pack_updates_the_cached_view_without_reading_sqlite_again(ledger: Ledger) -> None:
    """After the first read, a recorded pack's entries (new ones and new versions) are in
    the next view, which matches SQLite; a view handed out earlier is not changed."""
    ledger.record_manifest("s", "c1", [("memory:a", 5, "h1"), ("event:s:1", 3, "")], created_at=1)
    first = ledger.shown_since("s", 0, "c2")
    assert first.hashes == {"memory:a": "h1"}
    loads = ledger._shown_cache.loads
    ledger.record_manifest("s", "c2", [("memory:b", 5, "hb")], created_at=2)
    ledger.record_manifest("s", "c3", [("memory:a", 5, "h2")], created_at=3)
    later = ledger.shown_since("s", 0, "c4")
    assert later.hashes == {"memory:a": "h2", "memory:b": "hb"} == truth(ledger, "s", 0)
    assert ledger._shown_cache.loads == loads
    assert first.hashes == {"memory:a": "h1"}


def test_a_repeat_of_the_latest_call_does_not_count_what_it_showed(ledger: Ledger) -> None:
    """The latest call asked again sees the session as that call saw it."""
    ledger.record_manifest("s", "c1", [("memory:a", 5, "ha")], created_at=1)
    ledger.shown_since("s", 0, "c2")
    ledger.record_manifest("s", "c2", [("memory:b", 5, "hb")], created_at=2)
    assert ledger.shown_since("s", 0, "c2").hashes == {"memory:a": "ha"}
    assert ledger.shown_since("s", 0, "c3").hashes == {"memory:a": "ha", "memory:b": "hb"}


def test_a_compaction_counts_only_what_was_shown_since_it(ledger: Ledger) -> None:
    """A later ``since`` (the session's latest compaction) leaves out what was shown before it."""
    ledger.record_manifest("s", "c1", [("memory:a", 5, "ha")], created_at=10)
    assert ledger.shown_since("s", 0, "x").hashes == {"memory:a": "ha"}
    assert ledger.shown_since("s", 20, "x").hashes == {}
    ledger.record_manifest("s", "c2", [("memory:b", 5, "hb")], created_at=30, since=20)
    assert ledger.shown_since("s", 20, "x").hashes == {"memory:b": "hb"} == truth(ledger, "s", 20)
    assert ledger.shown_since("s", 0, "x").hashes == truth(ledger, "s", 0)


def test_a_reopened_ledger_reads_what_was_shown_from_sqlite(tmp_path: Path) -> None:
    """After a restart nothing is cached: the session's view comes from the file."""
    path = tmp_path / "ledger.db"
    ledger = Ledger(path)
    ledger.record_manifest("s", "c1", [("memory:a", 5, "ha")], created_at=1)
    assert ledger.shown_since("s", 0, "c2").hashes == {"memory:a": "ha"}
    ledger.close()
    again = Ledger(path)
    try:
        assert again._shown_cache.loads == 0
        assert again.shown_since("s", 0, "c2").hashes == {"memory:a": "ha"}
        assert again._shown_cache.loads == 1
    finally:
        again.close()


def test_deleting_a_session_forgets_what_it_was_shown(ledger: Ledger) -> None:
    """A deleted session's cached rows go with its rows in SQLite."""
    ledger.open_session("s")
    ledger.record_manifest("s", "c1", [("memory:a", 5, "ha")], created_at=1)
    assert ledger.shown_since("s", 0, "c2").hashes == {"memory:a": "ha"}
    ledger.delete_session("s")
    assert ledger.shown_since("s", 0, "c2").hashes == {}


def test_a_load_that_raced_a_write_is_used_once_and_not_kept() -> None:
    """Rows read before a write to the session committed are not cached."""
    cache = ShownCache()
    version = cache.version()
    cache.recorded("s", 7, "c", [("memory:a", "ha")], 1)
    cache.put("s", version, {}, None)
    assert cache.get("s") is None
    cache.put("s", cache.version(), {"memory:a": ("ha", 7, 1)}, (7, "c"))
    assert cache.get("s") is not None


def test_the_cache_is_bounded_in_sessions_and_bytes() -> None:
    """Past its bounds (sessions, estimated bytes) the least recently used sessions are
    dropped, and what it reports holding follows."""
    row = row_bytes("memory:a", "h")
    cache = ShownCache(max_sessions=2, budget=ByteBudget(3 * row))
    for sid in ("a", "b", "c"):
        cache.put(sid, cache.version(), {"memory:a": ("h", 1, 1)}, (1, "c"))
    assert cache.get("a") is None and cache.get("b") is not None and cache.get("c") is not None
    assert cache.bytes == 2 * row
    cache.put("d", cache.version(), {f"memory:{n}": ("h", 1, 1) for n in "abc"}, (1, "c"))
    assert cache.get("b") is None and cache.get("c") is None and cache.get("d") is not None
    assert cache.bytes == 3 * row
    cache.recorded("d", 2, "c2", [("memory:d", "h")], 2)
    assert cache.get("d") is None and cache.bytes == 0  # grown past the bound: dropped
    cache.put("e", cache.version(), {f"memory:{n}": ("h", 1, 1) for n in "abcd"}, (1, "c"))
    assert cache.get("e") is None and cache.bytes == 0  # alone over the bound: never kept


def test_the_byte_bound_is_shared_by_every_ledgers_cache() -> None:
    """Caches sharing a budget (every ledger's, in the daemon) stay under it together:
    the least recently used session goes first, whichever cache holds it."""
    row = row_bytes("memory:a", "h")
    budget = ByteBudget(2 * row)
    first, second = ShownCache(budget=budget), ShownCache(budget=budget)
    first.put("s", first.version(), {"memory:a": ("h", 1, 1)}, (1, "c"))
    second.put("s", second.version(), {"memory:a": ("h", 1, 1)}, (1, "c"))
    assert first.get("s") is not None  # now the most recently used
    second.put("t", second.version(), {"memory:a": ("h", 1, 1)}, (1, "c"))
    assert second.get("s") is None and first.get("s") is not None and second.get("t") is not None
    assert first.bytes + second.bytes == budget.bytes == 2 * row
    first.clear()
    assert first.bytes == 0 and budget.bytes == row


def test_the_byte_estimate_covers_what_the_rows_and_a_view_take() -> None:
    """``bytes`` is at least what tracemalloc sees a loaded session and its view take (and
    not wildly more), so the byte bound bounds the memory."""
    cache = ShownCache(budget=ByteBudget())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        rows = {
            f"memory:{n:016x}": (f"{n * 7919:016x}", 1_000 + n // 10, 1_764_000_000_000 + n)
            for n in range(5_000)
        }
        found = cache.put("s", cache.version(), rows, (1, "c"))
        view = cache.view(found, "s", 0)
        taken = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(view.hashes) == 5_000
    assert taken <= cache.bytes <= 2 * taken


def test_every_open_ledgers_cache_is_counted_in_the_heap_report(tmp_path: Path) -> None:
    """``makad.heap.cache_bytes`` sums the shown-memory caches of the ledgers alive."""
    first = Ledger(tmp_path / "a.sqlite3")
    second = Ledger(tmp_path / "b.sqlite3")
    try:
        before = heap.cache_bytes().get("shown_memory", 0)
        for ledger in (first, second):
            ledger.open_session("s")
            ledger.record_manifest("s", "c1", [("memory:a", 5, "ha")], created_at=1)
            ledger.shown_since("s", 0, "c2")
        grown = heap.cache_bytes()["shown_memory"] - before
        assert (
            grown == first._shown_cache.bytes + second._shown_cache.bytes == 2 * row_bytes("memory:a", "ha")
        )
    finally:
        first.close()
        second.close()
