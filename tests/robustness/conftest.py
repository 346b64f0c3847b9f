"""Robustness tests: scripts/soaklib on the import path, one daemon shared by a module (as
is, or seen through a workspace of the test's own), and a daemon that waits briefly for a
ledger another process holds."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.robustness.helpers import BRIEF_BUSY_ENV
from tests.support import DaemonProcess, SharedDaemon, daemon_in_tmp

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[DaemonProcess]:
    """One makad for a whole module (hypothesis examples reuse it)."""
    yield from daemon_in_tmp()


@pytest.fixture
def served(module_daemon: DaemonProcess, new_ws: Path) -> DaemonProcess:
    """The module's daemon with a fresh workspace of this test's own, for the tests that
    neither stop it nor arm a fault at its start (one start-up for them all; the
    ``shared_daemon`` above is one workspace for the whole module)."""
    return SharedDaemon(module_daemon, new_ws)


@pytest.fixture
def brief_busy_daemon(short_tmp: Path) -> Iterator[DaemonProcess]:
    """A started makad whose ledger writes wait BRIEF_BUSY_TIMEOUT_S, not 10 s, for a lock
    another process holds before they fail with ledger_busy."""
    proc = DaemonProcess(short_tmp, env=BRIEF_BUSY_ENV)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
