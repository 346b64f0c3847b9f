"""The event loop's append queue: concurrent appends reach the ledger's worker thread
together, each caller answered with what it would get alone, in arrival order.

A real ledger on a real file; the calls are anyio tasks started in order, so their
arrival order is the order they were started in.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from makad.core.types import AppendResult
from makad.errors import Conflict, InvalidParams, IOFailure, NotFound
from makad.service.append_queue import AppendQueue
from makad.store.ledger import Ledger
from makad.store.ledger.sessions import AppendCall
from tests.store.test_group_commit import one

pytestmark = pytest.mark.anyio

Outcome = AppendResult | Exception


async def concurrently(queue: AppendQueue, ledger: Ledger, calls: list[AppendCall]) -> list[Outcome]:
    """Each call in its own task, started in order; each one's result or error."""
    outcomes: list[Outcome | None] = [None] * len(calls)

    async def run(index: int) -> None:
        try:
            outcomes[index] = await queue.append(ledger, calls[index])
        except Exception as exc:  # compared by the test
            outcomes[index] = exc

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for index in range(len(calls)):
                tg.start_soon(run, index)
    assert all(o is not None for o in outcomes)
    return [o for o in outcomes if o is not None]


async def test_calls_arriving_while_a_group_commits_share_the_next_commit(ledger: Ledger) -> None:
    """Sixteen sessions appended to at once: the first call commits alone, the fifteen that
    queued meanwhile share one commit; each gets seq 1 of its own session."""
    sids = [ledger.open_session().session_id for _ in range(16)]
    commits = ledger.append_commits
    outcomes = await concurrently(AppendQueue(), ledger, [AppendCall(sid, one(sid)) for sid in sids])
    assert outcomes == [AppendResult(first_seq=1, last_seq=1, redactions=0)] * 16
    assert ledger.append_commits == commits + 2
    for sid in sids:
        assert [e.text for e in ledger.read_events(sid)] == [sid]
        assert ledger.verify_chain(sid) == (True, None)


async def test_one_session_appended_to_at_once_keeps_arrival_order(ledger: Ledger) -> None:
    """Twenty concurrent appends to one session get seqs 1..20 in the order they arrived."""
    sid = ledger.open_session().session_id
    outcomes = await concurrently(AppendQueue(), ledger, [AppendCall(sid, one(f"n{i}")) for i in range(20)])
    assert [o.first_seq for o in outcomes if isinstance(o, AppendResult)] == list(range(1, 21))
    assert [e.text for e in ledger.read_events(sid)] == [f"n{i}" for i in range(20)]
    assert ledger.verify_chain(sid) == (True, None)


async def test_each_caller_of_a_shared_group_gets_its_own_answer(ledger: Ledger) -> None:
    """A group holding refusals of every kind and eight calls expecting the same seq: each
    caller gets its own error, exactly one of the eight wins, the rest are stored."""
    sid = ledger.open_session().session_id
    closed = ledger.open_session().session_id
    ledger.close_session(closed)
    calls = [
        AppendCall(sid, one("first")),
        AppendCall(closed, one("never")),
        AppendCall("s-missing", one("never")),
        AppendCall(sid, []),
        *(AppendCall(sid, one(f"race{i}"), expected_seq=1) for i in range(8)),
    ]
    outcomes = await concurrently(AppendQueue(), ledger, calls)
    assert outcomes[0] == AppendResult(first_seq=1, last_seq=1, redactions=0)
    assert isinstance(outcomes[1], Conflict) and outcomes[1].details["reason"] == "closed"
    assert isinstance(outcomes[2], NotFound)
    assert isinstance(outcomes[3], InvalidParams)
    race = outcomes[4:]
    assert [o for o in race if isinstance(o, AppendResult)] == [
        AppendResult(first_seq=2, last_seq=2, redactions=0)
    ]
    assert sum(isinstance(o, Conflict) and o.details["currentSeq"] == 2 for o in race) == 7
    assert len(ledger.read_events(sid)) == 2


async def test_a_cancelled_caller_is_seen_through_and_stalls_nobody(ledger: Ledger) -> None:
    """A caller cancelled while its append waits in the queue: the append is still stored
    and answered (it may share a group already), the cancellation reaches the caller at
    its next checkpoint, and every other caller is answered."""
    sids = [ledger.open_session().session_id for _ in range(6)]
    queue = AppendQueue()
    answered: list[str] = []
    cancelled: list[bool] = []

    async def append(sid: str) -> None:
        await queue.append(ledger, AppendCall(sid, one(sid)))
        answered.append(sid)

    async def cancelled_append(sid: str) -> None:
        with anyio.CancelScope() as scope:
            scope.cancel()  # cancelled before it even waits: the shield holds it to the end
            result = await queue.append(ledger, AppendCall(sid, one(sid)))
            answered.append(sid if result.first_seq == 1 else "wrong seq")
            await anyio.lowlevel.checkpoint()
            answered.append("not reached")
        cancelled.append(scope.cancelled_caught)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(append, sids[0])
            tg.start_soon(cancelled_append, sids[1])
            for sid in sids[2:]:
                tg.start_soon(append, sid)
    assert cancelled == [True]
    assert sorted(answered) == sorted(sids)
    for sid in sids:
        assert [e.text for e in ledger.read_events(sid)] == [sid]


async def test_a_closed_ledger_answers_every_caller_and_the_queue_goes_on(tmp_path: Path) -> None:
    """Appends queued on a ledger that is closed get IOFailure, none hangs, and the same
    queue then serves an open ledger."""
    closed = Ledger(tmp_path / "a.db")
    sid = closed.open_session().session_id
    closed.close()
    queue = AppendQueue()
    outcomes = await concurrently(queue, closed, [AppendCall(sid, one(f"x{i}")) for i in range(5)])
    assert all(isinstance(o, IOFailure) for o in outcomes)
    led = Ledger(tmp_path / "b.db")
    try:
        other = led.open_session().session_id
        assert await concurrently(queue, led, [AppendCall(other, one("after"))]) == [
            AppendResult(first_seq=1, last_seq=1, redactions=0)
        ]
    finally:
        led.close()
