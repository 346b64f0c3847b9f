"""Group commit: concurrent ``append_events`` calls share one transaction and one fsync.

With ``synchronous=FULL`` every commit fsyncs the WAL, and the fsync, not the SQL, is
what a one-event append costs. So appends queue here (first come, first served), and
the call at the head of the queue leads: once it holds the write lock it takes every
append queued behind it (up to ``MAX_GROUP_CALLS`` calls and ``MAX_APPEND_EVENTS``
events), runs them in one ``BEGIN IMMEDIATE`` transaction, commits once, and only then
wakes the others with their results. While its fsync runs the next
group queues up, so a lone caller waits for nobody and a busy ledger commits as often
as its disk allows. (FTS5 also writes a segment per transaction: measured in-process,
a one-event commit costs ~0.6 ms of CPU even without the fsync, and a group shares it.
So a group indexes its events once, after its appends: FTS5 writes out what it holds
at every savepoint released once it takes part in the transaction, which cost ~55 µs an
append inside a group, a third of it.) ``append_many`` queues several calls at once:
the daemon's event loop gathers concurrent calls (``makad.service.append_queue``) so
one worker thread carries a whole group instead of one thread per call.

A group is written in a handful of statements, not several an append
(``sessions.apply_appends``): its sessions' heads and request records are read in one query
each, every append is checked and hash-chained in Python in queue order, and the rows
of the accepted ones go in with one ``executemany`` per table: no savepoints, one
session lookup and one ``max(id)`` a group. (sqlite3 also releases the GIL around every
statement step, and each release while the event loop wants it is a futex wake-up and
context switches: under ``scripts/bench appends`` the kernel's side is a quarter of the
daemon's CPU.)

What each caller sees is what it would have seen alone, in queue order:

- A refused append (``Conflict``: closed, moved on; ``NotFound``) is refused before
  anything of it is written, so it leaves nothing of itself (nor of its search bodies)
  and gets its error; the others go on. An ``expectedSeq`` is checked against the
  session as the appends before it in the group left it, so two calls expecting the
  same seq still have exactly one winner; a request id sent twice replays the first.
- Any other failure inside a group of two or more (a SQLite error, a damaged record)
  rolls the whole transaction back and every call of the group runs again alone, so
  each gets its own error and recovery (``recovering``) exactly as without grouping.
- A failed COMMIT fails every call of the group with that error (nothing was
  acknowledged; the guard of each call recovers from a corrupt file and retries).
- Nobody is answered before the COMMIT returned: an acknowledged append is durable.

Fault points (tests only, ``MAKAD_FAULT_POINT``): ``append_group_before_commit`` and
``append_group_after_commit`` kill the process inside a group of two calls or more.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from makad.core.chain import MAX_APPEND_EVENTS
from makad.core.types import AppendResult
from makad.store.ledger.base import now_ms
from makad.store.ledger.recovery import damage
from makad.store.ledger.sessions import (
    AppendCall,
    PreparedAppend,
    SessionsArea,
    apply_appends,
    index_bodies,
    prepare_append,
)

MAX_GROUP_CALLS: Final = 64


@dataclass(eq=False)
class _Queued:
    append: PreparedAppend
    result: AppendResult | None = None
    error: BaseException | None = None
    done: bool = False

    def outcome(self) -> AppendResult:
        if self.error is not None:
            raise self.error
        assert self.result is not None
        return self.result


class _RunAlone(Exception):
    """Raised inside a group's transaction to roll it all back (see the module docstring)."""


class GroupCommitArea(SessionsArea):
    """``append_events`` through a queue whose head commits for everyone queued (see above)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._append_queue: deque[_Queued] = deque()
        self._append_turn = threading.Condition(threading.Lock())
        # Commits that stored appends, and how many appends they stored (more than one a
        # commit: appends were grouped).
        self.append_commits = 0
        self.appends_committed = 0
        super().__init__(*args, **kwargs)

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult | Exception]:
        """Several ``append_events`` calls at once, each answered with the result or the
        error it would get alone: they queue together, in order, as if each came from its
        own thread (for a caller that gathers concurrent calls itself: one worker thread
        then carries a whole group). Durable once this returns, like ``append_events``.

        Damage met on the way (a corrupt file, a damaged index) is recovered from as the
        guard of a lone call does (``recovery.recovering``): such a call runs again alone.
        """
        at = now_ms()
        generation = self.generation
        outcomes: list[AppendResult | Exception | None] = [None] * len(calls)
        mine: list[tuple[int, _Queued]] = []
        for index, call in enumerate(calls):
            try:
                mine.append((index, _Queued(prepare_append(call, at))))
            except Exception as exc:  # this call's own refusal (empty, too many events)
                outcomes[index] = exc
        with self._append_turn:
            self._append_queue.extend(queued for _, queued in mine)
        for _, queued in mine:
            self._settle(queued)
        for index, queued in mine:
            error = queued.error
            if error is not None and not isinstance(error, Exception):
                raise error  # an interrupt, not any one call's error
            outcomes[index] = queued.result if error is None else error
        answered: list[AppendResult | Exception] = []
        for call, outcome in zip(calls, outcomes, strict=True):
            assert outcome is not None
            found = damage(outcome) if isinstance(outcome, Exception) else None
            if found is not None:
                self.recover(found, generation)  # once: a later call sees the new generation
                outcome = _outcome(call, self.append_events)
            answered.append(outcome)
        return answered

    def _commit_append(self, append: PreparedAppend) -> AppendResult:
        mine = _Queued(append)
        with self._append_turn:
            self._append_queue.append(mine)
        self._settle(mine)
        return mine.outcome()

    def _settle(self, mine: _Queued) -> None:
        """Wait until ``mine`` is answered, leading its group if it reaches the head first."""
        with self._append_turn:
            while not mine.done and self._append_queue[0] is not mine:
                self._append_turn.wait()
            if mine.done:
                return
        group = [mine]
        try:
            group = self._lead(mine)
        finally:
            with self._append_turn:
                for queued in group:  # the group is the head of the queue
                    queued.done = True
                    self._append_queue.popleft()
                self._append_turn.notify_all()

    def _lead(self, mine: _Queued) -> list[_Queued]:
        """Commit ``mine`` (the head of the queue) with the appends queued behind it, and
        give each its result or error; the group. The group is taken once the write lock
        is held, so the appends that queued while another write ran join it."""
        group = [mine]
        outcomes: list[tuple[AppendResult | None, BaseException | None]] = []
        try:
            with self._writing() as conn:
                with self._append_turn:
                    group = self._next_group()
                bodies: list[tuple[int, str]] = []
                try:
                    outcomes = apply_appends(conn, [queued.append for queued in group], bodies)
                    index_bodies(conn, bodies)
                except Exception as exc:
                    if len(group) == 1:
                        raise  # its own error, as without grouping
                    raise _RunAlone from exc
                if len(group) > 1:
                    self._faults.crash("append_group_before_commit")
        except _RunAlone:
            for queued in group:
                self._run_alone(queued)
            return group
        except BaseException as exc:  # the commit failed: no append of the group is answered
            for queued in group:
                queued.result, queued.error = None, exc
            return group
        for queued, (result, error) in zip(group, outcomes, strict=True):
            queued.result, queued.error = result, error
        committed = sum(result is not None for result, _ in outcomes)
        if committed:
            self._count_commit(committed)
        if len(group) > 1:
            self._faults.crash("append_group_after_commit")
        return group

    def _next_group(self) -> list[_Queued]:
        """The head of the queue and the appends behind it that fit (``_append_turn`` held)."""
        group = [self._append_queue[0]]
        events = len(group[0].append.drafts)
        for queued in list(self._append_queue)[1:MAX_GROUP_CALLS]:
            events += len(queued.append.drafts)
            if events > MAX_APPEND_EVENTS:
                break
            group.append(queued)
        return group

    def _run_alone(self, queued: _Queued) -> None:
        queued.result = queued.error = None
        try:
            queued.result = super()._commit_append(queued.append)
            self._count_commit(1)
        except BaseException as exc:  # this caller's own error, raised in its thread
            queued.error = exc

    def _count_commit(self, appends: int) -> None:
        self.append_commits += 1
        self.appends_committed += appends


def _outcome(call: AppendCall, append: Callable[..., AppendResult]) -> AppendResult | Exception:
    try:
        return append(
            call.session_id,
            call.events,
            expected_seq=call.expected_seq,
            request_id=call.request_id,
            redactions=call.redactions,
        )
    except Exception as exc:  # this call's own error, answered to it
        return exc
