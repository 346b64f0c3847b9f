"""Log lines a client can repeat at will, at most one a second for each kind.

A failed request, a broken frame or an oversized reply is the client's doing, and a
client can do it in a loop. A line each would grow the log without bound (an autostarted
daemon's log is rotated only when a daemon starts), so each kind is logged at most once an
``interval``, with ``times``: how many there were since its last line, this one included.
"""

from __future__ import annotations

import time
from collections.abc import Hashable
from typing import Any

import structlog

INTERVAL_S = 1.0
# Past this many keys the table starts again (the keys are few: this only bounds it).
MAX_KEYS = 1024


class ThrottledLog:
    """One event name; a line for a key (a method and an error kind, say) at most once
    an ``interval``."""

    def __init__(self, logger: Any, event: str, level: str = "info", interval: float = INTERVAL_S) -> None:
        # The level's method is looked up at each line, not here: a logger made at import
        # binds its processors (redaction, the output) when it first logs, after configure.
        self._logger = logger
        self._level = level
        self._event = event
        self._interval = interval
        # key -> (monotonic time of its last line, occurrences since then)
        self._seen: dict[Hashable, tuple[float, int]] = {}

    def __call__(self, key: Hashable, **fields: Any) -> None:
        now = time.monotonic()
        logged_at, times = self._seen.get(key, (-self._interval, 0))
        times += 1
        if now - logged_at < self._interval:
            self._seen[key] = (logged_at, times)
            return
        if len(self._seen) >= MAX_KEYS and key not in self._seen:
            self._seen.clear()
        self._seen[key] = (now, 0)
        getattr(self._logger, self._level)(self._event, times=times, **fields)


def throttled(name: str, event: str, level: str = "info") -> ThrottledLog:
    """A ``ThrottledLog`` of ``event`` on the structlog logger ``name``."""
    return ThrottledLog(structlog.get_logger(name), event, level)
