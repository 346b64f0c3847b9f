"""What a ledger keeps for its next write (``with_next_write``): written inside the next
write transaction that commits, whichever it is, once; kept when that one fails; dropped
when it can never be written; written at a clean close."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from makad.core.types import NewMemoryEvent
from makad.store.ledger import Ledger


def _setting(ledger: Ledger, key: str) -> object:
    return ledger.get_settings_json().get(key)


def test_kept_settings_ride_the_next_write_once(tmp_path: Path) -> None:
    """A kept setting is not a write of its own; the next write (of another setting) stores
    it with its own, and a later write does not store it again over a newer value."""
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.put_setting_if_with_next_write("__revision__", None, 5)
    assert _setting(ledger, "__revision__") is None
    ledger.put_settings_json({"agentReadEnabled": True})
    assert _setting(ledger, "__revision__") == 5
    ledger.put_settings_json({"__revision__": 9})
    ledger.put_settings_json({"agentReadEnabled": False})
    assert _setting(ledger, "__revision__") == 9
    ledger.close()


def test_a_failed_write_keeps_them_for_the_one_after(tmp_path: Path) -> None:
    """A write that is rolled back leaves what was kept for the next one."""
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.put_settings_with_next_write({"__revision__": 7})
    with pytest.raises(RuntimeError), ledger.transaction():
        raise RuntimeError("the write fails")
    assert _setting(ledger, "__revision__") is None
    ledger.put_settings_json({"agentReadEnabled": True})
    assert _setting(ledger, "__revision__") == 7
    ledger.close()


def test_one_that_can_never_be_written_is_dropped_and_the_write_goes_on(tmp_path: Path) -> None:
    """A kept statement the schema refuses is dropped; the write that carried it commits."""
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    tried: list[int] = []

    def refused(conn: sqlite3.Connection) -> None:
        tried.append(1)
        conn.execute("INSERT INTO settings (key, value) VALUES ('k', NULL)")

    ledger.with_next_write("refused", refused)
    ledger.put_settings_json({"agentReadEnabled": True})
    assert _setting(ledger, "agentReadEnabled") is True
    ledger.put_settings_json({"agentReadEnabled": False})
    assert _setting(ledger, "agentReadEnabled") is False and len(tried) == 1
    ledger.close()


def test_a_clean_close_writes_what_was_kept(tmp_path: Path) -> None:
    """Closed with lineage steps kept and no write since, the ledger writes them first."""
    path = tmp_path / "ledger.sqlite3"
    ledger = Ledger(path)
    step = NewMemoryEvent(action="edited", actor="user", entry_id="e1", data={"via": "external_edit"})
    ledger.record_lineage_with_next_write([step])
    ledger.close()
    again = Ledger(path)
    assert [(e.action, e.actor) for e in again.memory_history("e1")] == [("edited", "user")]
    again.close()
