"""Dismissed suggestions in the ledger: the schema step, expiry, the row cap."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from makad.store import suggestion_store
from makad.store.ledger import Ledger
from makad.store.ledger.schema import MIGRATIONS, SCHEMA_VERSION, migrate, user_version

NOW = 1_800_000_000_000


def test_a_ledger_at_the_attention_step_migrates_in_place_keeping_its_rows(tmp_path: Path) -> None:
    """A ledger written before the dismissals table (schema 8) opens at the current version,
    its sessions and attention rows intact, and takes dismissals."""
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, MIGRATIONS[:8])
    assert user_version(conn) == 8
    conn.execute("INSERT INTO sessions (session_id, created_at) VALUES ('s', 1)")
    conn.execute("INSERT INTO attention_state (key, state, computed_at) VALUES ('state', x'7b7d', 5)")
    conn.close()
    ledger = Ledger(path)
    try:
        assert ledger.get_session("s").created_at == 1
        with ledger.snapshot() as snap:
            assert snap.execute("SELECT computed_at FROM attention_state").fetchone()[0] == 5
        suggestion_store.dismiss(ledger, "sg_0123456789abcdef", NOW + 10, NOW)
        assert suggestion_store.dismissed(ledger, NOW) == {"sg_0123456789abcdef": NOW + 10}
    finally:
        ledger.close()
    conn = sqlite3.connect(path)
    assert user_version(conn) == SCHEMA_VERSION == len(MIGRATIONS)
    conn.close()


def test_a_dismissal_lasts_until_its_time_and_is_then_pruned(ledger: Ledger) -> None:
    """Dismissed until T: listed before T, not at T; the next write removes the expired row."""
    suggestion_store.dismiss(ledger, "sg_a", NOW + 100, NOW)
    assert suggestion_store.dismissed(ledger, NOW + 99) == {"sg_a": NOW + 100}
    assert suggestion_store.dismissed(ledger, NOW + 100) == {}
    suggestion_store.dismiss(ledger, "sg_b", NOW + 500, NOW + 200)
    with ledger.snapshot() as conn:
        assert [r[0] for r in conn.execute("SELECT id FROM dismissed_suggestions")] == ["sg_b"]


def test_dismissing_for_no_time_restores_the_suggestion(ledger: Ledger) -> None:
    """A dismissal until now (or before) removes the row: the suggestion may show again."""
    suggestion_store.dismiss(ledger, "sg_a", NOW + 100, NOW)
    suggestion_store.dismiss(ledger, "sg_a", NOW, NOW)
    assert suggestion_store.dismissed(ledger, NOW) == {}


def test_the_rows_are_capped_keeping_the_newest(ledger: Ledger) -> None:
    """Past MAX_DISMISSED rows the oldest dismissals go first."""
    cap = suggestion_store.MAX_DISMISSED
    for i in range(cap + 5):
        suggestion_store.dismiss(ledger, f"sg_{i:04d}", NOW + 10**9, NOW + i)
    kept = suggestion_store.dismissed(ledger, NOW + cap + 5)
    assert len(kept) == cap
    assert "sg_0000" not in kept and f"sg_{cap + 4:04d}" in kept
