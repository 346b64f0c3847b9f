"""The ledger pool: at most ``cap`` ledgers keep their connections open; one in use is
never closed, and a closed one reopens as a first open would."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from makad.store.ledger import Ledger
from makad.store.ledger.pool import MIN_OPEN_LEDGERS, LedgerPool, ledger_cap


@pytest.fixture
def pool() -> LedgerPool:
    return LedgerPool(MIN_OPEN_LEDGERS)


@pytest.fixture
def ledgers(tmp_path: Path, pool: LedgerPool) -> Iterator[list[Ledger]]:
    opened: list[Ledger] = []
    try:
        for n in range(MIN_OPEN_LEDGERS):
            opened.append(Ledger(tmp_path / f"w{n}" / "ledger.sqlite3", pool=pool))
        yield opened
    finally:
        for ledger in opened:
            ledger.close()


def test_opening_past_the_cap_closes_the_least_recently_used(
    tmp_path: Path, pool: LedgerPool, ledgers: list[Ledger]
) -> None:
    """One more ledger than the cap rests the one used longest ago, and only it."""
    ledgers[0].get_settings_json()  # ledgers[1] is now the least recently used
    extra = Ledger(tmp_path / "extra" / "ledger.sqlite3", pool=pool)
    try:
        assert [ledger.resting for ledger in ledgers] == [False, True]
        assert not extra.resting and pool.open_count() == MIN_OPEN_LEDGERS
    finally:
        extra.close()


def test_a_ledger_in_use_is_never_closed(tmp_path: Path, pool: LedgerPool, ledgers: list[Ledger]) -> None:
    """A ledger whose lock a call holds is passed over, even as the least recently used."""
    with ledgers[0].snapshot():
        extra = Ledger(tmp_path / "extra" / "ledger.sqlite3", pool=pool)
        try:
            assert [ledger.resting for ledger in ledgers] == [False, True]
        finally:
            extra.close()


def test_a_closed_ledger_reopens_with_its_data(
    tmp_path: Path, pool: LedgerPool, ledgers: list[Ledger]
) -> None:
    """Reads and writes on a rested ledger reopen it with everything it held."""
    ledgers[0].put_settings_json({"kept": 1})
    assert ledgers[0].rest()
    assert ledgers[0].get_settings_json() == {"kept": 1}
    assert not ledgers[0].resting
    assert ledgers[0].rest()
    ledgers[0].put_settings_json({"more": 2})
    assert ledgers[0].get_settings_json() == {"kept": 1, "more": 2}


def test_a_ledger_deleted_while_closed_starts_a_new_generation(ledgers: list[Ledger]) -> None:
    """A file gone while the ledger rested is opened as a first open would (created empty),
    and ``generation`` moves on so nothing cached from the old file is trusted."""
    ledger = ledgers[0]
    ledger.put_settings_json({"kept": 1})
    generation = ledger.generation
    assert ledger.rest()
    for suffix in ("", "-wal", "-shm"):
        with_suffix = Path(f"{ledger.path}{suffix}")
        if with_suffix.exists():
            os.unlink(with_suffix)
    assert ledger.get_settings_json() == {}
    assert ledger.generation == generation + 1


def test_a_ledger_damaged_while_closed_is_moved_aside_at_reopening(ledgers: list[Ledger]) -> None:
    """A file damaged while the ledger rested is kept aside and a fresh one opened, as at start."""
    ledger = ledgers[0]
    ledger.put_settings_json({"kept": 1})
    assert ledger.rest()
    ledger.path.write_bytes(b"not a database at all" * 100)
    assert ledger.get_settings_json() == {}
    assert [reset.cause for reset in ledger.resets] == ["corrupt_at_open"]


def test_the_cap_is_lowered_to_a_quarter_of_the_descriptor_limit() -> None:
    """Open ledgers hold at most a quarter of the descriptor limit (and two stay open)."""
    assert ledger_cap(64, 400) == 20
    assert ledger_cap(64, 1_000_000) == 64
    assert ledger_cap(64, 10) == MIN_OPEN_LEDGERS
