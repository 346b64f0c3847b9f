"""A ledger that a full disk keeps from opening for writing: opened read-only when the file
alone is the whole ledger (reads served, writes refused with disk_full, writable again once
there is room), never when committed data still waits in the WAL."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from makad.errors import IOFailure
from makad.store.ledger import Ledger
from tests.robustness.helpers import fill_disk, tiny_tmpfs


def _reason(exc: pytest.ExceptionInfo[IOFailure]) -> object:
    return exc.value.details.get("reason")


def test_a_cleanly_closed_ledger_opens_read_only_on_a_full_disk(short_tmp: Path) -> None:
    """Reads see what was committed, a write is disk_full, and the first write after space
    is freed opens it for writing again and is stored."""
    disk = short_tmp / "disk"
    with tiny_tmpfs(disk, 1024):
        path = disk / "ledger.sqlite3"
        first = Ledger(path)
        first.put_settings_json({"agentReadEnabled": True})
        first.close()
        filler = fill_disk(disk)
        ledger = Ledger(path)
        try:
            assert ledger.read_only_since is not None
            assert ledger.get_settings_json()["agentReadEnabled"] is True
            with pytest.raises(IOFailure) as refused:
                ledger.put_settings_json({"agentReadEnabled": False})
            assert _reason(refused) == "disk_full"
            assert ledger.read_only_since is not None
            filler.unlink()
            ledger.put_settings_json({"agentReadEnabled": False})
            assert ledger.read_only_since is None
            assert ledger.get_settings_json()["agentReadEnabled"] is False
        finally:
            ledger.close()


def test_a_ledger_with_commits_left_in_its_wal_stays_unopened_on_a_full_disk(short_tmp: Path) -> None:
    """A WAL still holding commits (the daemon was killed) is not skipped by reading the file
    alone: opening is disk_full, as before, rather than a read of older data."""
    disk = short_tmp / "disk"
    kept = short_tmp / "kept"
    kept.mkdir()
    with tiny_tmpfs(disk, 1024):
        path = disk / "ledger.sqlite3"
        Ledger(path).close()  # the schema is in the file itself
        second = Ledger(path)
        second.put_settings_json({"agentReadEnabled": True})
        for suffix in ("", "-wal"):  # the files as a kill -9 would leave them
            shutil.copyfile(f"{path}{suffix}", kept / f"ledger{suffix}")
        second.close()
        for suffix in ("", "-wal"):
            shutil.copyfile(kept / f"ledger{suffix}", f"{path}{suffix}")
        Path(f"{path}-shm").unlink(missing_ok=True)
        assert Path(f"{path}-wal").stat().st_size > 32
        fill_disk(disk)
        with pytest.raises(IOFailure) as refused:
            Ledger(path)
        assert _reason(refused) == "disk_full"
