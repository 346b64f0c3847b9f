"""Keeping the daemon's heap small and its pauses short: allocator and garbage-collector policy.

- glibc arenas are capped, its mmap threshold pinned, and freed memory handed back
  to the OS now and then: each worker thread would otherwise get an arena of its
  own, large buffers would end up in the heap, and under sustained load the
  resident size kept growing from that fragmentation alone.
- Long-lived objects (parsed memory files, their snapshots, imported modules) are
  moved out of the cyclic collector's reach with ``gc.freeze()``: a full
  collection walks every tracked object, and with a 10,000-entry MEMORY.md that
  took ~25 ms, landing on every few build_context calls. Objects frozen and later
  dropped are still freed by reference counting; only reference cycles among them
  would wait, so every ``FULL_COLLECT_EVERY`` the heap is unfrozen, collected once
  and frozen again (every other tick collects only what is not frozen yet, so no
  garbage is frozen) — one such pause every few minutes instead of every few calls.
- The youngest generation is collected every ``YOUNG_COLLECT_EVERY`` allocations
  of tracked objects rather than every 700: a build_context call makes thousands
  (events, candidates, trace entries) that reference counting frees anyway, and
  each collection walked the ones still alive — 1.5% of the call's instructions.

The daemon's own bounded caches register here (``track_cache``) so what they hold can
be read in one place (``cache_bytes``): the soak's memory probe reports it.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import weakref
from typing import Final, Protocol

import anyio

# mallopt parameter numbers in glibc's malloc.h
M_TRIM_THRESHOLD: Final = -1
M_MMAP_THRESHOLD: Final = -3
M_ARENA_MAX: Final = -8
MMAP_THRESHOLD_BYTES: Final = 128 * 1024
# Free memory at the heap's top kept for reuse (glibc's default, 128 KiB, is fixed once the
# mmap threshold is): the housekeeping tick's malloc_trim hands it back.
TRIM_THRESHOLD_BYTES: Final = 1024 * 1024
TICK_S: Final = 10.0
FULL_COLLECT_EVERY: Final = 30  # ticks: five minutes
YOUNG_COLLECT_EVERY: Final = 10_000  # CPython's default is 700


class SizedCache(Protocol):
    """A cache that says how many bytes it holds (an estimate kept as it changes)."""

    @property
    def bytes(self) -> int: ...


_caches: dict[str, weakref.WeakSet[SizedCache]] = {}
_caches_lock = threading.Lock()


def track_cache(name: str, cache: SizedCache) -> None:
    """Count ``cache`` under ``name`` in ``cache_bytes`` for as long as it is alive."""
    with _caches_lock:
        _caches.setdefault(name, weakref.WeakSet()).add(cache)


def cache_bytes() -> dict[str, int]:
    """Bytes held per kind of tracked cache, over every live one (e.g. one per ledger)."""
    with _caches_lock:
        found = {name: list(caches) for name, caches in _caches.items()}
    return {name: sum(cache.bytes for cache in caches) for name, caches in found.items()}


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


_LIBC: Final = _libc()


def configure_malloc(arenas: int = 2) -> None:
    """Cap glibc's malloc arenas (as MALLOC_ARENA_MAX would), pin the mmap threshold and
    raise the trim threshold.

    glibc raises its mmap threshold each time a large mmapped block is freed, after
    which large buffers (replies, query results) come from the heap and leave holes
    there; a fixed threshold keeps them in mmapped blocks that go back on free.
    With the trim threshold at its 128 KiB default, replies of ~100 KiB (a read_state
    of a full MEMORY.md) overlapping on a few connections grew the heap and gave it
    back on nearly every reply: a brk, an mmap and a munmap and ~30 fresh pages each.
    """
    if _LIBC is not None and hasattr(_LIBC, "mallopt"):
        _LIBC.mallopt(M_ARENA_MAX, arenas)
        _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
        _LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)


def configure_collector() -> None:
    """Collect the youngest generation less often (see the module doc); the older
    generations keep their default ratios."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECT_EVERY, middle, oldest)


def _malloc_trim() -> None:
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)


def settle(full: bool) -> None:
    """Collect what is not frozen, then freeze what is left; with ``full``, collect
    everything, frozen or not.

    ``gc.freeze`` freezes garbage too: reference cycles the young collections have
    not reached yet (with ``YOUNG_COLLECT_EVERY`` that is up to ten seconds of them:
    every error raised through a worker thread leaves one — exception, traceback,
    frames and what their locals hold) would wait for the next full collection, and
    in the load soak (32 clients) the frozen generation gained ~10,000 objects and
    pymalloc ~1 MiB a minute from them alone. Collecting the
    unfrozen generations first walks only what was made since the last tick.
    """
    if full:
        gc.unfreeze()
    gc.collect()
    gc.freeze()
    _malloc_trim()


async def housekeeping_forever(tick_s: float = TICK_S) -> None:
    """``settle`` every tick, a full collection every ``FULL_COLLECT_EVERY`` ticks.

    Start-up's objects are frozen at once; the full collection that clears start-up's
    garbage waits for the first tick, so it does not delay the first requests.
    """
    gc.freeze()
    ticks = 0
    while True:
        await anyio.sleep(tick_s)
        ticks += 1
        settle(full=ticks == 1 or ticks % FULL_COLLECT_EVERY == 0)
