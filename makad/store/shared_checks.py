"""Blocking checks run on worker threads, one run shared by the calls that ask at once.

Every call that names a workspace re-checks on a worker thread that its spelling still
names the same folder, and a cheap read stats its memory files in that hop
(``makad.store.workspaces``). The hop costs the daemon far more CPU than the few stats it
carries, so:

- it is a plain hand-off to a pool of threads, answered with ``call_soon_threadsafe``
  (no capacity limiter, cancel scope or context copy: about half of what
  ``anyio.to_thread.run_sync`` costs);
- the calls that ask for the same check at the same time share one run. A call joins
  only a run that has not started, so each run starts after every call sharing it
  arrived, and its answer is as fresh as a run of the call's own. While a run is under
  way, the calls that ask meanwhile gather for the next, started when it ends: a hung
  disk holds one thread per check, not one per call.

A check must only read: a caller that is cancelled stops waiting, and the run goes on
for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Hashable
from queue import SimpleQueue
from typing import Any, TypeVar

T = TypeVar("T")

# Threads beyond this many busy ones are not started: further checks wait for one.
MAX_THREADS = 32

Done = Callable[[Any, BaseException | None], None]


class CheckThreads:
    """Threads that run blocking calls handed over by an event loop and hand each result
    back to it. A call starts a thread when every thread is busy (a check held up by a
    slow disk then holds up only the calls waiting for it), up to ``limit``."""

    def __init__(self, limit: int = MAX_THREADS) -> None:
        self._limit = limit
        self._jobs: SimpleQueue[tuple[asyncio.AbstractEventLoop, Callable[[], Any], Done]] = SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._busy = 0

    def submit(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], Any], done: Done) -> None:
        """Run ``fn()`` on a thread, then ``done(result, error)`` on ``loop``."""
        with self._lock:
            self._busy += 1
            start = self._busy > self._threads and self._threads < self._limit
            if start:
                self._threads += 1
        if start:
            threading.Thread(target=self._work, name="makad-check", daemon=True).start()
        self._jobs.put((loop, fn, done))

    def _work(self) -> None:
        take = self._jobs.get
        while True:
            loop, fn, done = take()
            result: Any = None
            error: BaseException | None = None
            try:
                result = fn()
            except BaseException as exc:  # handed to the waiting calls
                error = exc
            with self._lock:
                self._busy -= 1
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
                loop.call_soon_threadsafe(done, result, error)
            del result, error, fn, done, loop


_THREADS = CheckThreads()


class _Run:
    """One run of a check and the futures of the calls waiting for it."""

    __slots__ = ("check", "waiters")

    def __init__(self, check: Callable[[], Any], waiter: asyncio.Future[Any]) -> None:
        self.check = check
        self.waiters = [waiter]


class SharedChecks:
    """Runs each key's check on a worker thread, shared by the calls asking for it at once
    (see the module's docstring). Used on one event loop's thread only."""

    def __init__(self, threads: CheckThreads = _THREADS) -> None:
        self._threads = threads
        # Per key: the run that the calls asking now join (not started yet).
        self._gathering: dict[Hashable, _Run] = {}
        # The keys whose run is under way.
        self._running: set[Hashable] = set()

    async def run(self, key: Hashable, check: Callable[[], T]) -> T:
        """``check()``'s answer from a run that starts after this call: the calls for
        ``key`` gathered meanwhile share it (``check`` is the same for them: the first
        one's runs). Cancelling this call leaves the run to the others."""
        loop = asyncio.get_running_loop()
        # A future per call: a cancelled call cancels its own, never the others'.
        waiter: asyncio.Future[T] = loop.create_future()
        gathering = self._gathering.get(key)
        if gathering is not None:
            gathering.waiters.append(waiter)
        else:
            self._gathering[key] = _Run(check, waiter)
            if key not in self._running:
                # At the loop's next turn: the calls read in this one join it.
                loop.call_soon(self._start, loop, key)
        return await waiter

    def _start(self, loop: asyncio.AbstractEventLoop, key: Hashable) -> None:
        run = self._gathering.pop(key)
        self._running.add(key)

        def done(result: Any, error: BaseException | None) -> None:
            self._running.discard(key)
            for waiter in run.waiters:
                if waiter.done():  # cancelled: that call gave up
                    continue
                if error is None:
                    waiter.set_result(result)
                else:
                    waiter.set_exception(error)
            if key in self._gathering:
                self._start(loop, key)

        self._threads.submit(loop, run.check, done)
