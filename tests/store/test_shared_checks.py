"""Shared checks: calls asking for the same blocking check at once share one run on a worker
thread, never a run that started before they asked; its failure reaches each of them, and a
caller that gives up leaves the run to the others."""

from __future__ import annotations

import threading
from collections.abc import Callable

import anyio
import pytest

from makad.store.shared_checks import CheckThreads, SharedChecks

pytestmark = pytest.mark.anyio

WAIT_S = 10


class Counted:
    """A check that counts its runs, answers with the run's number, and (when held) waits
    for its release on the worker thread."""

    def __init__(self, held: bool = False) -> None:
        self.runs = 0
        self.threads: set[int] = set()
        self.started = threading.Event()
        self.release = threading.Event()
        if not held:
            self.release.set()

    def __call__(self) -> int:
        self.runs += 1
        self.threads.add(threading.get_ident())
        self.started.set()
        assert self.release.wait(WAIT_S)
        return self.runs


async def _gather(calls: list[Callable[[], object]]) -> list[object]:
    found: list[object] = [None] * len(calls)

    async def one(i: int) -> None:
        found[i] = await calls[i]()  # type: ignore[misc]

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(one, i)
    return found


async def test_calls_asking_at_once_share_one_run_off_the_loop() -> None:
    """Four calls for one key started together get one run's answer, run on another thread."""
    checks, check = SharedChecks(), Counted()
    found = await _gather([lambda: checks.run("ws", check)] * 4)
    assert found == [1, 1, 1, 1]
    assert check.runs == 1
    assert threading.get_ident() not in check.threads


async def test_other_keys_run_on_their_own() -> None:
    """Two keys asked at once get a run each."""
    checks, a, b = SharedChecks(), Counted(), Counted()
    found = await _gather([lambda: checks.run("a", a), lambda: checks.run("b", b)])
    assert found == [1, 1]
    assert (a.runs, b.runs) == (1, 1)


async def test_a_call_never_takes_a_run_started_before_it() -> None:
    """A call made while a run is under way waits for a run of its own (started after it)."""
    checks, check = SharedChecks(), Counted(held=True)
    found: dict[str, object] = {}

    async def first() -> None:
        found["first"] = await checks.run("ws", check)

    async def later() -> None:
        found["later"] = await checks.run("ws", check)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.to_thread.run_sync(check.started.wait, WAIT_S)
        tg.start_soon(later)
        await anyio.sleep(0.05)
        assert check.runs == 1  # the later call waits for the run under way to end
        check.release.set()
    assert found == {"first": 1, "later": 2}


async def test_a_failed_run_fails_every_call_sharing_it() -> None:
    """The check's error is raised in each call that shared its run, and the next call runs it again."""
    checks = SharedChecks()
    runs = 0

    def failing() -> int:
        nonlocal runs
        runs += 1
        raise PermissionError("the disk refused")

    errors: list[BaseException] = []

    async def one() -> None:
        try:
            await checks.run("ws", failing)
        except PermissionError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert len(errors) == 3 and runs == 1
    with pytest.raises(PermissionError):
        await checks.run("ws", failing)
    assert runs == 2


async def test_a_cancelled_call_leaves_the_run_to_the_others() -> None:
    """One of three calls sharing a run is cancelled while it runs: it stops waiting at
    once, and the other two get the run's answer."""
    checks, check = SharedChecks(), Counted(held=True)
    found: list[object] = []
    cancelled = False

    async def stays() -> None:
        found.append(await checks.run("ws", check))

    async def gives_up(scope: anyio.CancelScope) -> None:
        nonlocal cancelled
        with scope:
            await checks.run("ws", check)
        cancelled = scope.cancelled_caught

    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()
        tg.start_soon(stays)
        tg.start_soon(gives_up, scope)
        tg.start_soon(stays)
        await anyio.to_thread.run_sync(check.started.wait, WAIT_S)
        scope.cancel()
        await anyio.sleep(0.05)
        assert cancelled and found == []  # gave up while the run still waits
        check.release.set()
    assert found == [1, 1]
    assert check.runs == 1


async def test_a_held_up_check_holds_up_only_its_own_key() -> None:
    """A check stuck on its thread (a hung disk) keeps its callers waiting, while another
    key's check runs on another thread and answers."""
    checks, stuck, other = SharedChecks(CheckThreads(limit=4)), Counted(held=True), Counted()
    with anyio.move_on_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(checks.run, "slow", stuck)
            await anyio.to_thread.run_sync(stuck.started.wait, WAIT_S)
            assert await checks.run("fast", other) == 1
            stuck.release.set()
    assert stuck.runs == 1


async def test_threads_stop_growing_at_the_limit() -> None:
    """With every thread held up, a further check waits for a thread instead of starting one."""
    threads = CheckThreads(limit=1)
    checks, stuck, queued = SharedChecks(threads), Counted(held=True), Counted()
    found: list[object] = []

    async def wait_queued() -> None:
        found.append(await checks.run("b", queued))

    async with anyio.create_task_group() as tg:
        tg.start_soon(checks.run, "a", stuck)
        await anyio.to_thread.run_sync(stuck.started.wait, WAIT_S)
        tg.start_soon(wait_queued)
        await anyio.sleep(0.05)
        assert queued.runs == 0 and found == []
        stuck.release.set()
    assert found == [1]
    assert queued.threads == stuck.threads  # the one thread ran both
