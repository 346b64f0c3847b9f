"""The warm-up of the request-only libraries: nothing else imports them while it runs."""

from __future__ import annotations

import threading

import anyio
import pytest

from makad.warmup import Warmup

pytestmark = pytest.mark.anyio


async def test_every_caller_waits_until_the_one_load_is_done() -> None:
    """Concurrent ensure() calls run the load once and none returns before it finished
    (two threads importing one package at once can see it half-initialized)."""
    release = threading.Event()
    started = threading.Event()
    loads: list[str] = []

    def load() -> None:
        loads.append("started")
        started.set()
        release.wait(10)
        loads.append("done")

    warmup = Warmup(load)
    returned: list[list[str]] = []

    async def caller() -> None:
        await warmup.ensure()
        returned.append(list(loads))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(caller)
        assert await anyio.to_thread.run_sync(started.wait, 10)
        await anyio.sleep(0.05)  # the other callers reach ensure() too
        assert returned == [] and loads == ["started"]
        release.set()
    assert returned == [["started", "done"]] * 3
    await warmup.ensure()
    assert loads == ["started", "done"]


async def test_a_load_that_fails_does_not_block_requests() -> None:
    """A library that fails to load is logged; ensure() still returns (its first use raises)."""

    def load() -> None:
        raise ImportError("no such library")

    warmup = Warmup(load)
    with anyio.fail_after(5):
        await warmup.ensure()
        await warmup.ensure()
