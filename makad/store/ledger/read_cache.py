"""Results of ledger reads kept across calls, for as long as the rows behind them are unchanged.

build_context repeated on a workspace that has not changed (an agent's tool loop
asking again for the same turn, a retry, a client polling) reads the same history
tail, runs the same full-text searches and reads the same neighbours each time.
Those reads are kept here, each under the ledger's *epoch* when it started:

- ``generation`` and ``index_generation``: the file was replaced, an index rebuilt;
- ``writes``: every write transaction of this process that may change what a read
  returns bumps it after its commit (appends, deletions, the memory index: every
  write but the few that touch only tables no cached read looks at, such as the
  build_context manifests and session notes);
- the writer connection's ``PRAGMA data_version``, which changes when *another*
  connection commits (a ``sqlite3`` shell, another process): an externally edited
  or tampered row is read again, so the hash-chain check of build_context
  (``makad.service.context_check``) sees it. That is as fresh as SQLite's own page
  cache, which trusts the same signal.

The epoch is read under the write lock, taken without waiting: while a write is
running no epoch is known and the read is made (and not kept). A read that raced
with a write is kept under the epoch read before it, which the write has already
left behind, so it is never returned.

Values are shared between calls: callers must not mutate them (they get them as
read). Each kind of read is bounded by the rows it holds (``BUDGETS``), least
recently used first out.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Final, TypeVar, cast

T = TypeVar("T")

Epoch = tuple[int, int, int, int]

# Rows kept per ledger and kind of read: events (about 600 bytes each) for the history
# tails and recall searches, tenths of rows for memory searches (an id and a score each).
# Apart so that a few large recall reads do not push every small search out.
BUDGETS: Final = {"tail": 4_096, "recall": 4_096, "memory": 1_024}


class _Lru:
    """``key -> (epoch, value, cost)``, least recently used first out past ``budget``."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.items: OrderedDict[Hashable, tuple[Epoch, object, int]] = OrderedDict()
        self.cost = 0


class ReadCache:
    """Kept reads by kind (``BUDGETS``); thread-safe."""

    def __init__(self, budgets: Mapping[str, int] = BUDGETS) -> None:
        self._kinds = {kind: _Lru(budget) for kind, budget in budgets.items()}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, kind: str, key: Hashable, epoch: Epoch) -> object | None:
        lru = self._kinds[kind]
        with self._lock:
            found = lru.items.get(key)
            if found is None or found[0] != epoch:
                self.misses += 1
                return None
            lru.items.move_to_end(key)
            self.hits += 1
            return found[1]

    def put(self, kind: str, key: Hashable, epoch: Epoch, value: object, cost: int) -> None:
        lru = self._kinds[kind]
        cost = max(cost, 1)
        if cost > lru.budget:
            return
        with self._lock:
            old = lru.items.pop(key, None)
            if old is not None:
                lru.cost -= old[2]
            lru.items[key] = (epoch, value, cost)
            lru.cost += cost
            while lru.cost > lru.budget:
                _, (_, _, dropped) = lru.items.popitem(last=False)
                lru.cost -= dropped

    def clear(self) -> None:
        with self._lock:
            for lru in self._kinds.values():
                lru.items.clear()
                lru.cost = 0


def remembered(
    cache: ReadCache,
    epoch: Epoch | None,
    kind: str,
    key: Hashable,
    read: Callable[[], T],
    cost: Callable[[T], int],
) -> T:
    """``read()``, or what it returned under this same epoch (None: no epoch, read)."""
    if epoch is None:
        return read()
    found = cache.get(kind, key, epoch)
    if found is not None:
        return cast(T, found)  # stored by this function under this key
    value = read()
    cache.put(kind, key, epoch, value, cost(value))
    return value
