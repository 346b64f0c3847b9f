"""The pack's bookkeeping tables: entry dates, memory shown per session, notes progress."""

from __future__ import annotations

from makad.core.entry_dates import EntryDates
from makad.store.ledger import Ledger


def test_entry_dates_round_trip_and_forget(ledger: Ledger) -> None:
    """Saved dates load back; removed ids are gone."""
    ledger.save_entry_dates({"a": EntryDates(1, 2), "b": EntryDates(3, 0)}, [])
    ledger.save_entry_dates({"a": EntryDates(1, 9)}, ["b"])
    assert ledger.load_entry_dates() == {"a": EntryDates(1, 9)}


def test_memory_shown_adds_up_and_a_repeated_call_replaces_its_share(ledger: Ledger) -> None:
    """Calls add their bytes; recording a call id again replaces it; a new compaction restarts."""
    ledger.open_session("s")
    ledger.record_manifest("s", "c1", [("memory:a", 5, "h")], memory_bytes=100, since=0)
    ledger.record_manifest("s", "c2", [("memory:b", 5, "h")], memory_bytes=50, since=0)
    assert ledger.session_memory_bytes("s", 0, "c3") == 150
    assert ledger.session_memory_bytes("s", 0, "c2") == 100  # what c2 itself saw
    ledger.record_manifest("s", "c2", [("memory:b", 5, "h")], memory_bytes=70, since=0)
    assert ledger.session_memory_bytes("s", 0, "c3") == 170
    assert ledger.session_memory_bytes("s", 500, "c3") == 0
    ledger.record_manifest("s", "c4", [], memory_bytes=30, since=500)
    assert ledger.session_memory_bytes("s", 500, "c5") == 30


def test_delete_session_erases_the_sessions_rows(ledger: Ledger) -> None:
    """The user's forget leaves no total and no notes progress behind."""
    ledger.open_session("s")
    ledger.record_manifest("s", "c1", [], memory_bytes=10)
    ledger.save_notes_state("s", 3, b"{}")
    assert ledger.load_notes_state("s") == (3, b"{}")
    ledger.delete_session("s")
    assert ledger.load_notes_state("s") is None
    assert ledger.session_memory_bytes("s", 0, "x") == 0
