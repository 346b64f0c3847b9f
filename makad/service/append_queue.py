"""Concurrent ``append_events`` calls of one ledger reach its worker thread together.

The ledger's group commit (``makad.store.ledger.group_commit``) lets appends queued in
worker threads share one transaction and its fsync, but each call still made its own
round trip through a worker thread: the hand-off, the thread's wake-ups in the group's
queue, the hand-back to the event loop. Measured with 16 clients appending one event a
call, that cost about as much CPU as the append's SQL. So calls queue here first, on
the event loop, in arrival order; the call at the head leads: it hands every call
queued (up to ``MAX_GROUP_CALLS``) to one worker thread (``Ledger.append_many``), and
while that group commits the next one queues up behind it. Once the thread returns —
after the COMMIT — each caller gets its own result or error, and the head of the next
group leads in turn. An acknowledged append is durable, and each call sees what it
would have seen alone (``append_many``).

A call that reached the queue is seen through even if its request is cancelled, as
a worker thread's call is (``anyio.to_thread.run_sync``): it may be in a group
already, and the group's leader answers every caller of it.
"""

from __future__ import annotations

import asyncio
from collections import deque

import anyio

from makad.core.types import AppendResult
from makad.errors import IOFailure
from makad.service.common import in_thread
from makad.store.ledger import Ledger
from makad.store.ledger.group_commit import MAX_GROUP_CALLS
from makad.store.ledger.sessions import AppendCall


class _Pending:
    __slots__ = ("call", "outcome", "turn")

    def __init__(self, call: AppendCall) -> None:
        self.call = call
        self.outcome: AppendResult | Exception | None = None
        # Done when answered, or when it is to lead. A bare asyncio future (the daemon
        # runs on asyncio): an anyio.Event looks up the backend at each creation.
        self.turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake(self) -> None:
        if not self.turn.done():
            self.turn.set_result(None)


class AppendQueue:
    """One ledger's appends waiting on the event loop for a worker thread (see above)."""

    def __init__(self) -> None:
        self._queue: deque[_Pending] = deque()
        self._leading = False  # a group is in a worker thread

    async def append(self, ledger: Ledger, call: AppendCall) -> AppendResult:
        pending = _Pending(call)
        self._queue.append(pending)
        with anyio.CancelScope(shield=True):
            if self._leading:
                await pending.turn
            else:
                self._leading = True
            if pending.outcome is None:  # at the head: lead
                await self._lead(ledger)
        outcome = pending.outcome
        if isinstance(outcome, Exception):
            raise outcome
        assert outcome is not None
        return outcome

    async def _lead(self, ledger: Ledger) -> None:
        group = [self._queue.popleft() for _ in range(min(len(self._queue), MAX_GROUP_CALLS))]
        outcomes: list[AppendResult | Exception] = []
        try:
            outcomes = await in_thread(ledger.append_many, [p.call for p in group])
        except Exception as exc:  # the group never reached the ledger: nothing is acknowledged
            outcomes = [exc] * len(group)
        finally:
            if len(outcomes) != len(group):  # interrupted: every caller still gets an answer
                outcomes = [IOFailure("the append was interrupted")] * len(group)
            # The next group's leader first: its group then commits while this one's
            # callers are answered.
            if self._queue:
                self._queue[0].wake()  # unanswered: it leads
            else:
                self._leading = False
            for pending, outcome in zip(group, outcomes, strict=True):
                pending.outcome = outcome
                pending.wake()
