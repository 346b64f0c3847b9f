"""Robustness tests: scripts/soaklib on the import path, and one daemon shared by a module."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import DaemonProcess, daemon_in_tmp

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[DaemonProcess]:
    """One makad for a whole module (hypothesis examples reuse it)."""
    yield from daemon_in_tmp()
