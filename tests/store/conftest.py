"""Fixtures of the store tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from makad.store.workspaces import WorkspaceRegistry


@pytest.fixture
async def registry(tmp_path: Path) -> AsyncIterator[WorkspaceRegistry]:
    """A workspace registry over a fresh data directory, closed after the test."""
    reg = WorkspaceRegistry(tmp_path / "data")
    try:
        yield reg
    finally:
        reg.close()
