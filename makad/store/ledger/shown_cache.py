"""What each session was shown of memory, kept in memory beside ``manifest_shown``.

A build_context call in a session reads which memory entries the session was shown
since its latest compaction (``TurnsArea.shown_since``): in a long session that is
thousands of rows, read and turned into a dict on every call. This cache keeps, per
session, the rows of ``manifest_shown`` for memory sources and, per ``since``, the
``ref → hash`` view a call uses; SQLite stays the truth:

- a session is loaded from SQLite on first use (after a restart, every session);
- each recorded manifest updates the cached rows after its transaction committed,
  and the next view is a new dict (a view handed to a call is never changed);
- a load that raced a write is used once and not kept (``version``);
- deleting a session, replacing a damaged ledger or closing it drops the cache;
- a compaction changes the call's ``since``: that view is built from the rows.

Bounded: at most ``MAX_SESSIONS`` sessions a ledger, and ``MAX_BYTES`` over every
ledger's cache in the process (a ``ByteBudget`` they share: each row counted with its
strings, its tuple and its slots in the rows' and a view's dicts, ``row_bytes``), the
least recently used session dropped first, whichever ledger it is of. ``bytes`` says
what one cache holds; ``makad.heap.cache_bytes`` sums it over every open ledger (the
soak's memory probe reports it).

A view also carries what the service learnt about it (``ShownView.cursor``): how far
the fill order runs through entries the session was shown as they are.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

MAX_SESSIONS: Final = 256
MAX_BYTES: Final = 8 << 20  # ~19,000 rows: two sessions each shown a 10,000-entry memory
# What a row takes besides its two strings: its (hash, call ref, shown at) tuple and the
# two ints, and its slots in the rows' dict and in a view's (tests/store/test_shown_cache.py
# checks the estimate against what tracemalloc sees).
ROW_OVERHEAD_BYTES: Final = 300
# Sessions whose latest write is remembered (older ones: only the latest of them all).
_WRITES_KEPT: Final = 4_096


@dataclass(eq=False)
class ShownView:
    """The memory a session was shown at or after ``since``: ``memory:<id>`` → hash.

    ``hashes`` is shared between calls and never changed. ``cursor`` and ``hashed`` are
    the service's notes about this view (``makad.service.context``); a view made from
    another by a recorded pack that only added entries starts from its notes."""

    since: int
    hashes: dict[str, str]
    cursor: object | None = None
    hashed: object | None = None
    # The sources added or changed since the view the notes were inherited from.
    added: list[str] = field(default_factory=list)


def row_bytes(source: str, digest: str) -> int:
    """What one cached row takes, by estimate (see ``ROW_OVERHEAD_BYTES``)."""
    return sys.getsizeof(source) + sys.getsizeof(digest) + ROW_OVERHEAD_BYTES


class ByteBudget:
    """Bytes shared by caches, with one least-recently-used order over their sessions
    (its lock guards every cache sharing it)."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self.lock = threading.Lock()
        self.max_bytes = max_bytes
        self.bytes = 0
        self.order: OrderedDict[tuple[ShownCache, str], None] = OrderedDict()


_SHARED: Final = ByteBudget()


@dataclass
class _Session:
    rows: dict[str, tuple[str, int, int]]  # source → (hash, call ref, shown at)
    latest: tuple[int, str] | None  # the latest call: (ref, call id)
    view: ShownView | None = None
    bytes: int = 0  # ``row_bytes`` over ``rows``


class ShownCache:
    """Per session: the memory rows of ``manifest_shown`` and the latest call (see module doc)."""

    def __init__(self, max_sessions: int = MAX_SESSIONS, budget: ByteBudget = _SHARED) -> None:
        self._budget = budget
        self._lock = budget.lock
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        self._bytes = 0
        self._clock = 0  # writes so far
        self._writes: OrderedDict[str, int] = OrderedDict()  # session → the clock at its latest write
        self._floor = 0  # the latest write of a session no longer in ``_writes``, or a clear
        self._max_sessions = max_sessions
        self.loads = 0  # sessions read from SQLite (for tests)

    @property
    def bytes(self) -> int:
        """What the cached rows take, by estimate (``row_bytes``)."""
        with self._lock:
            return self._bytes

    def version(self) -> int:
        """The write clock: a load started at one value is kept only if no write to its
        session came since."""
        with self._lock:
            return self._clock

    def _written(self, session_id: str) -> None:
        self._clock += 1
        self._writes[session_id] = self._clock
        self._writes.move_to_end(session_id)
        if len(self._writes) > _WRITES_KEPT:
            _, at = self._writes.popitem(last=False)
            self._floor = max(self._floor, at)

    def _current(self, session_id: str, version: int) -> bool:
        return max(self._writes.get(session_id, 0), self._floor) <= version

    def get(self, session_id: str) -> _Session | None:
        with self._lock:
            found = self._sessions.get(session_id)
            if found is not None:
                self._used(session_id)
            return found

    def _used(self, session_id: str) -> None:
        self._sessions.move_to_end(session_id)
        self._budget.order[(self, session_id)] = None
        self._budget.order.move_to_end((self, session_id))

    def _fit(self) -> None:
        """Drop the least recently used sessions until this cache and the budget fit."""
        budget = self._budget
        while len(self._sessions) > self._max_sessions:
            self._drop(next(iter(self._sessions)))
        while budget.bytes > budget.max_bytes and budget.order:
            cache, session_id = next(iter(budget.order))
            cache._drop(session_id)

    def put(
        self,
        session_id: str,
        version: int,
        rows: dict[str, tuple[str, int, int]],
        latest: tuple[int, str] | None,
    ) -> _Session:
        """The session as read from SQLite at ``version``; kept when no write came since."""
        size = sum(row_bytes(source, row[0]) for source, row in rows.items())
        loaded = _Session(rows, latest, bytes=size)
        with self._lock:
            self.loads += 1
            if not self._current(session_id, version) or size > self._budget.max_bytes:
                return loaded
            self._drop(session_id)
            self._sessions[session_id] = loaded
            self._add(size)
            self._used(session_id)
            self._fit()
        return loaded

    def recorded(
        self, session_id: str, ref: int, call_id: str, shown: Iterable[tuple[str, str]], at: int
    ) -> None:
        """A manifest was committed: ``shown`` (memory source, hash) were shown at ``at``."""
        with self._lock:
            self._written(session_id)
            found = self._sessions.get(session_id)
            if found is None:
                return
            rows = dict(found.rows)
            changed: list[str] = []
            size = found.bytes
            for source, digest in shown:
                before = rows.get(source)
                rows[source] = (digest, ref, at)
                if before is None or before[0] != digest:
                    changed.append(source)
                    size += row_bytes(source, digest)
                    if before is not None:
                        size -= row_bytes(source, before[0])
            self._add(size - found.bytes)
            view = found.view
            updated = _Session(rows, (ref, call_id), bytes=size)
            if view is not None and at >= view.since and all(source not in view.hashes for source in changed):
                # Only new entries: the next view starts from this one's notes.
                hashes = dict(view.hashes)
                for source in changed:
                    hashes[source] = rows[source][0]
                updated.view = ShownView(view.since, hashes, view.cursor, view.hashed, changed)
                # Entries shown again keep their hash; their ``shown at`` moved (still in view).
            self._sessions[session_id] = updated
            self._used(session_id)
            self._fit()

    def forget(self, session_id: str) -> None:
        """The session's rows were deleted."""
        with self._lock:
            self._written(session_id)
            self._drop(session_id)

    def clear(self) -> None:
        """The ledger file was replaced or closed: nothing cached holds."""
        with self._lock:
            self._clock += 1
            self._floor = self._clock  # no load under way is kept
            for session_id in list(self._sessions):
                self._drop(session_id)

    def view(self, found: _Session, session_id: str, since: int) -> ShownView:
        """The session's view at ``since`` (made once per recorded pack and ``since``)."""
        view = found.view
        if view is not None and view.since == since:
            return view
        hashes = {source: digest for source, (digest, _, at) in found.rows.items() if at >= since}
        view = ShownView(since, hashes)
        with self._lock:
            if self._sessions.get(session_id) is found:
                found.view = view
        return view

    def _add(self, size: int) -> None:
        self._bytes += size
        self._budget.bytes += size

    def _drop(self, session_id: str) -> None:
        gone = self._sessions.pop(session_id, None)
        if gone is not None:
            self._add(-gone.bytes)
            self._budget.order.pop((self, session_id), None)
