"""Fixtures for the store tests: a real ledger in a temp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from makad.store.ledger import Ledger


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    """A fresh workspace ledger, closed after the test."""
    opened = Ledger(tmp_path / "ws" / "ledger.db")
    try:
        yield opened
    finally:
        opened.close()
