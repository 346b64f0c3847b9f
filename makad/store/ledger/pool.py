"""How many ledgers keep their SQLite connections open at once.

A workspace keeps its ``Workspace`` (its in-memory sessions, subscribers and caches)
while it is in use (an idle one is let go of: ``makad.service.idle_workspaces``), but an
open ledger costs about five file descriptors
and half a megabyte of SQLite memory. Past ``cap`` open ledgers, the least recently used
one that no thread is using is put to rest: its connections are closed, and its next read
or write opens them again (``LedgerBase``), with the same checks as a first open. A ledger
in use (either lock held) is passed over, so no call ever meets a closed connection.
"""

from __future__ import annotations

import resource
import threading
from collections import OrderedDict
from typing import Final, Protocol

from makad.settings import DEFAULT_MAX_OPEN_WORKSPACES

# The default cap (``--max-open-workspaces``), lowered to a share of the descriptor limit.
DEFAULT_MAX_OPEN_LEDGERS: Final = DEFAULT_MAX_OPEN_WORKSPACES
# Descriptors one open ledger holds (database and WAL per connection, the shared index).
FDS_PER_LEDGER: Final = 5
# Open ledgers may take at most this share of the descriptor limit.
NOFILE_SHARE: Final = 4
MIN_OPEN_LEDGERS: Final = 2


def ledger_cap(configured: int, nofile: int | None = None) -> int:
    """The configured cap, lowered so open ledgers hold at most a quarter of ``nofile``
    (the process's soft descriptor limit when not given)."""
    if nofile is None:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        nofile = configured * FDS_PER_LEDGER * NOFILE_SHARE if soft == resource.RLIM_INFINITY else soft
    return max(MIN_OPEN_LEDGERS, min(configured, nofile // NOFILE_SHARE // FDS_PER_LEDGER))


class Restable(Protocol):
    def rest(self) -> bool:
        """Close the connections unless in use (never waits); whether it did."""
        ...


class LedgerPool:
    """The open ledgers, least recently used first (thread-safe)."""

    def __init__(self, cap: int) -> None:
        self.cap = max(MIN_OPEN_LEDGERS, cap)
        self._lock = threading.Lock()
        self._open: OrderedDict[int, Restable] = OrderedDict()

    def open_count(self) -> int:
        with self._lock:
            return len(self._open)

    def used(self, ledger: Restable) -> None:
        """``ledger`` is open and in use now (called with one of its locks held); rest the
        least recently used others while more than ``cap`` are open."""
        with self._lock:
            self._open[id(ledger)] = ledger
            self._open.move_to_end(id(ledger))
            if len(self._open) <= self.cap:
                return
            excess = len(self._open) - self.cap
            oldest = [other for other in self._open.values() if other is not ledger]
        for other in oldest:
            if excess <= 0:
                break
            if other.rest():  # it calls ``forget`` under its own locks
                excess -= 1

    def forget(self, ledger: Restable) -> None:
        """``ledger`` is closed (called with its locks held)."""
        with self._lock:
            self._open.pop(id(ledger), None)

    def closed(self, ledger: Restable) -> None:
        """``ledger`` is closed for good."""
        with self._lock:
            self._open.pop(id(ledger), None)
