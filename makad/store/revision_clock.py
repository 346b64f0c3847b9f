"""Revisions unique across every workspace of one data directory.

A client compares revisions to know whether what it showed is still current
(``read_state {ifRevision}``, ``expectedRevision``). Per-workspace counters would let
two workspaces — the folder a symlink named before it was repointed and the one it names
now, the user level before and after ``--user-memory`` changed — hold the same number,
and a client would take one for the other. So every revision the daemon hands out comes
from this one clock: a workspace's revisions still only increase, and no two workspaces
(no two identities of one path) ever share one.

The clock starts each run past everything it handed out before (a bound it persists
ahead of use, in blocks) and past the wall clock in milliseconds (so a lost or restored
file still starts past every revision issued). A clean stop persists the bound it reached,
so the next run need not start a block ahead of the wall clock. Revisions a workspace
stored before the clock existed (below ``since``, the clock's first value) are not its
own: such a workspace gets a new one when it is opened.

When the bound cannot be persisted (a full disk), a revision a read needs (a workspace
opened with none of its own) is still handed out once the wall clock has reached it:
every later run starts past the wall clock, so none hands it out again, persisted or not
(as long as the system clock is not set back before the bound is next written: the next
reservation, or the clean stop, covers it). That is a wait of about a millisecond, unless
the last run was killed within a minute of reserving a block (then the bound on file is up
to a block ahead of the wall clock): a wait longer than ``COVER_WAIT_MS`` is not made, and
the read fails as a write would.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Final

from makad.errors import DISK_FULL_ERRNOS, IOFailure
from makad.private_files import make_dirs, read_if_regular, write_private

CLOCK_FILE: Final = "revision-clock"
# Revisions reserved per write of the file.
BLOCK: Final = 1 << 16
# The longest a read waits for the wall clock to reach a revision it could not reserve.
COVER_WAIT_MS: Final = 2_000


class RevisionClock:
    """``next_after`` on the event loop; ``reserve`` (blocking) before a value is used."""

    def __init__(self, data_dir: Path) -> None:
        self._path = data_dir / CLOCK_FILE
        self._lock = threading.Lock()
        since, bound = _read(self._path)
        start = max(bound, time.time_ns() // 1_000_000)
        # The first value of this clock, ever: a stored revision below it is not its own.
        self.since = since if since is not None else start + 1
        self._last = start
        self._bound = bound if since is not None else 0

    def issued(self, revision: object) -> bool:
        """Whether a stored revision came from this clock (else it is from before it)."""
        return isinstance(revision, int) and not isinstance(revision, bool) and revision >= self.since

    def observe(self, revision: int) -> None:
        """A revision of this clock found stored: later ones go past it."""
        self._last = max(self._last, revision)

    def next_after(self, current: int | None) -> int:
        """A revision above ``current`` and above every one handed out (no await: the event
        loop hands out each value once). ``reserve`` it before anyone sees it."""
        value = max(self._last, current or 0) + 1
        self._last = value
        return value

    def reserved(self, value: int) -> bool:
        return value < self._bound

    def reserve(self, value: int) -> None:
        """Persist that the clock is past ``value`` (a no-op while the block holds it).
        Blocking, thread-safe; IOFailure when the data directory cannot be written (then
        ``value`` must not be used)."""
        with self._lock:
            if value < self._bound:
                return
            bound = max(value, self._last) + BLOCK
            try:
                make_dirs(self._path.parent)
                write_private(self._path, f"{self.since} {bound}\n".encode("ascii"))
            except OSError as exc:
                reason = "disk_full" if exc.errno in DISK_FULL_ERRNOS else "io_error"
                raise IOFailure("the data directory could not be written", reason=reason) from None
            self._bound = bound

    def reserve_or_cover(self, value: int) -> None:
        """``reserve``, or, when the data directory cannot be written, wait until the wall
        clock has passed ``value`` (no run after this one can hand it out again): for a
        revision a read hands out. Raises ``reserve``'s IOFailure when that is more than
        ``COVER_WAIT_MS`` away. Blocking."""
        try:
            self.reserve(value)
        except IOFailure:
            ahead_ms = value - time.time_ns() // 1_000_000
            if ahead_ms > COVER_WAIT_MS:
                raise
            while ahead_ms >= 0:
                time.sleep((ahead_ms + 1) / 1000)
                ahead_ms = value - time.time_ns() // 1_000_000

    def close(self) -> None:
        """At a clean stop: persist the bound the clock reached (past every value handed
        out, not a block ahead), so the next run starts at the wall clock. Left as it was
        when the file cannot be written. Blocking; a value handed out later is reserved."""
        with self._lock:
            bound = self._last + 1
            if bound >= self._bound:
                return  # (nothing reserved ahead to give back)
            try:
                write_private(self._path, f"{self.since} {bound}\n".encode("ascii"))
            except OSError:
                return
            self._bound = bound


def _read(path: Path) -> tuple[int | None, int]:
    """(since, bound) from the file; (None, 0) when it is missing or unreadable (no
    regular file there, a symlink, not two numbers)."""
    try:
        data = read_if_regular(path, 128)
    except OSError:
        data = None
    if data is None:
        return None, 0
    parts = data.decode("ascii", "replace").split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None, 0
    since, bound = int(parts[0]), int(parts[1])
    return (since, bound) if since <= bound else (None, 0)
