"""The pack's bookkeeping tables: entry dates, memory shown per session, notes progress."""

from __future__ import annotations

from makad.core.entry_dates import EntryDates
from makad.store import pack_state
from makad.store.ledger import Ledger


def test_entry_dates_round_trip_and_forget(ledger: Ledger) -> None:
    """Saved dates load back; removed ids are gone."""
    pack_state.save_entry_dates(ledger, {"a": EntryDates(1, 2), "b": EntryDates(3, 0)}, [])
    pack_state.save_entry_dates(ledger, {"a": EntryDates(1, 9)}, ["b"])
    assert pack_state.load_entry_dates(ledger) == {"a": EntryDates(1, 9)}


def test_memory_shown_adds_up_and_a_repeated_call_replaces_its_share(ledger: Ledger) -> None:
    """Calls add their bytes; recording a call id again replaces it; a new compaction restarts."""
    ledger.open_session("s")
    ledger.record_manifest("s", "c1", [("memory:a", 5, "h")], memory_bytes=100, since=0)
    ledger.record_manifest("s", "c2", [("memory:b", 5, "h")], memory_bytes=50, since=0)
    assert pack_state.session_memory_bytes(ledger, "s", 0, "c3") == 150
    assert pack_state.session_memory_bytes(ledger, "s", 0, "c2") == 100  # what c2 itself saw
    ledger.record_manifest("s", "c2", [("memory:b", 5, "h")], memory_bytes=70, since=0)
    assert pack_state.session_memory_bytes(ledger, "s", 0, "c3") == 170
    assert pack_state.session_memory_bytes(ledger, "s", 500, "c3") == 0
    ledger.record_manifest("s", "c4", [], memory_bytes=30, since=500)
    assert pack_state.session_memory_bytes(ledger, "s", 500, "c5") == 30


def test_delete_session_erases_the_sessions_rows(ledger: Ledger) -> None:
    """The user's forget leaves no total and no notes progress behind."""
    ledger.open_session("s")
    ledger.record_manifest("s", "c1", [], memory_bytes=10)
    with ledger.transaction() as conn:
        pack_state.save_notes_state(conn, "s", 3, b"{}")
    assert pack_state.load_notes_state(ledger, "s") == (3, b"{}")
    ledger.delete_session("s")
    assert pack_state.load_notes_state(ledger, "s") is None
    assert pack_state.session_memory_bytes(ledger, "s", 0, "x") == 0
