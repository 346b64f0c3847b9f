"""Eager methods (``MethodSpec.eager``): answered on the connection's reader task unless
they have to wait, and then never in the way of the requests after them.

A real ``Server`` on a real Unix socket, with handlers the test controls: ``wait``
blocks until the test releases it (as a held workspace lock or a thread hop would),
``fast`` answers at once, ``ping`` is inline.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from makad.rpc.dispatch import Dispatcher
from makad.rpc.eager import in_place
from makad.rpc.server import MAX_IN_FLIGHT_PER_CONNECTION, Limits, Server
from makad.wire.base import MethodSpec
from makad.wire.system import NoParams

pytestmark = pytest.mark.anyio


class Handlers:
    """The test's methods, and what they saw."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.lock = anyio.Lock()
        self.tasks: dict[str, list[int]] = {"fast": [], "wait": []}
        self.running = 0
        self.most_running = 0
        self.started = anyio.Event()  # set when ``running`` first reaches ``until``
        self.until = 1
        self.cancelled = 0
        self.closed = anyio.Event()  # set when a connection that called ``watch`` closes

    async def fast(self, params: NoParams, peer: object) -> int:
        task = anyio.get_current_task().id
        self.tasks["fast"].append(task)
        return task

    async def wait(self, params: NoParams, peer: object) -> list[int]:
        before = anyio.get_current_task().id
        self.enter()
        try:
            async with self.lock:  # an anyio lock is bound to the task that took it
                await self.release.wait()
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        finally:
            self.running -= 1
        after = anyio.get_current_task().id
        self.tasks["wait"].append(before)
        return [before, after]

    def enter(self) -> None:
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        if self.running >= self.until:
            self.started.set()

    async def boom(self, params: NoParams, peer: object) -> str:
        await anyio.lowlevel.checkpoint()
        raise RuntimeError("after a wait")

    async def ping(self, params: NoParams, peer: object) -> str:
        return "pong"

    async def watch(self, params: NoParams, peer: Any) -> int:
        peer.on_close(lambda _: self.closed.set())
        return 0


def catalogue() -> dict[str, MethodSpec]:
    return {
        "fast": MethodSpec("fast", NoParams, int, "test", eager=True),
        "wait": MethodSpec("wait", NoParams, list, "test", eager=True),
        "boom": MethodSpec("boom", NoParams, str, "test", eager=True),
        "ping": MethodSpec("ping", NoParams, str, "test", inline=True),
        "watch": MethodSpec("watch", NoParams, int, "test", eager=True),
    }


@asynccontextmanager
async def serving(short_tmp: Path, handlers: Handlers) -> AsyncIterator[tuple[Path, Server]]:
    methods = {name: getattr(handlers, name) for name in catalogue()}
    server = Server(Dispatcher(catalogue(), methods), Limits(max_message_bytes=1 << 20, shutdown_grace_s=0.5))
    path = short_tmp / "e.sock"
    listener = await anyio.create_unix_listener(path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run, listener)
        yield path, server
        server.request_stop()


def request(method: str, id_: int) -> bytes:
    return b'{"jsonrpc":"2.0","method":"%s","id":%d}\n' % (method.encode(), id_)


class Replies:
    """Reads NDJSON replies off one stream."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self.stream = stream
        self.buf = b""

    async def next(self) -> Any:
        with anyio.fail_after(5):
            while b"\n" not in self.buf:
                self.buf += await self.stream.receive()
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)


async def test_eager_requests_that_need_not_wait_run_on_the_reader(short_tmp: Path) -> None:
    """Pipelined eager requests that finish at once are answered in order, all on one
    task (no task spawned per request)."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, _):
        stream = await anyio.connect_unix(path)
        await stream.send(b"".join(request("fast", i) for i in range(50)))
        replies = Replies(stream)
        got = [await replies.next() for _ in range(50)]
        assert [r["id"] for r in got] == list(range(50))
        assert len({r["result"] for r in got}) == 1
        await stream.aclose()


async def test_a_waiting_request_does_not_hold_up_the_ones_after_it(short_tmp: Path) -> None:
    """An eager request that waits: the inline and eager requests pipelined after it are
    answered first; it finishes on the task it started on, lock and all."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, _):
        stream = await anyio.connect_unix(path)
        await stream.send(request("wait", 1) + request("ping", 2) + request("fast", 3))
        replies = Replies(stream)
        assert (await replies.next())["id"] == 2
        third = await replies.next()
        assert third["id"] == 3
        handlers.release.set()
        first = await replies.next()
        assert first["id"] == 1
        before, after = first["result"]
        assert before == after  # the same task all along
        assert third["result"] != before  # the next requests were read by another task
        # The reader that took over answers in place again.
        await stream.send(request("fast", 4))
        assert (await replies.next())["result"] == third["result"]
        await stream.aclose()


async def test_the_task_a_waiting_request_freed_reads_at_the_next_wait(short_tmp: Path) -> None:
    """Two eager requests that wait, one after the other: the task freed by the first takes
    over reading when the second waits, so the connection's requests run on two tasks."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, _):
        stream = await anyio.connect_unix(path)
        replies = Replies(stream)
        await stream.send(request("wait", 1))
        await handlers.started.wait()
        handlers.release.set()
        first, _ = (await replies.next())["result"]
        await stream.send(request("fast", 2))
        reader = (await replies.next())["result"]
        assert reader != first
        handlers.release = anyio.Event()
        await stream.send(request("wait", 3))
        await stream.send(request("fast", 4))
        assert (await replies.next())["result"] == first  # the freed task reads now
        handlers.release.set()
        assert (await replies.next())["result"] == [reader, reader]
        await stream.send(request("fast", 5))
        assert (await replies.next())["result"] == first
        await stream.aclose()


async def test_a_connection_closed_with_a_freed_task_waiting_ends(short_tmp: Path) -> None:
    """A client that leaves after a request that waited: the connection's tasks end (the
    freed one with the reader), and the server holds no connection."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, server):
        stream = await anyio.connect_unix(path)
        replies = Replies(stream)
        handlers.release.set()
        await stream.send(request("watch", 1) + request("wait", 2))
        assert [(await replies.next())["id"] for _ in range(2)] == [1, 2]
        await stream.aclose()
        with anyio.fail_after(5):
            await handlers.closed.wait()
        assert not server.connections


async def test_a_request_answered_after_its_client_left_ends_its_task(short_tmp: Path) -> None:
    """A client that leaves while its eager request waits: once released, the request's
    task ends with the rest, and the server holds no connection."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, server):
        stream = await anyio.connect_unix(path)
        await stream.send(request("watch", 1) + request("wait", 2))
        await handlers.started.wait()
        await stream.aclose()
        await anyio.sleep(0.05)  # the reader sees the end first
        handlers.release.set()
        with anyio.fail_after(5):
            await handlers.closed.wait()
        assert not server.connections


async def test_a_waiting_request_does_not_hold_up_other_connections(short_tmp: Path) -> None:
    """While one connection's eager request waits, another connection is served."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, _):
        slow = await anyio.connect_unix(path)
        await slow.send(request("wait", 1))
        other = await anyio.connect_unix(path)
        replies = Replies(other)
        for i in range(5):
            await other.send(request("fast", i) + request("ping", 100 + i))
            assert (await replies.next())["id"] == i
            assert (await replies.next())["id"] == 100 + i
        assert handlers.running == 1
        handlers.release.set()
        assert (await Replies(slow).next())["id"] == 1
        await slow.aclose()
        await other.aclose()


async def test_waiting_requests_stay_within_the_connection_bound(short_tmp: Path) -> None:
    """More waiting eager requests than a connection may run at once: the bound holds,
    and each one is answered once they are released."""
    handlers = Handlers()
    handlers.until = MAX_IN_FLIGHT_PER_CONNECTION
    total = MAX_IN_FLIGHT_PER_CONNECTION + 6

    async def wait_unlocked(params: NoParams, peer: object) -> int:
        handlers.enter()
        try:
            await handlers.release.wait()
        finally:
            handlers.running -= 1
        return 0

    handlers.wait = wait_unlocked  # type: ignore[method-assign]
    async with serving(short_tmp, handlers) as (path, _):
        stream = await anyio.connect_unix(path)
        await stream.send(b"".join(request("wait", i) for i in range(total)))
        with anyio.fail_after(5):
            await handlers.started.wait()
        await anyio.sleep(0.05)  # room for a 65th to start, were the bound not held
        assert handlers.running == MAX_IN_FLIGHT_PER_CONNECTION
        handlers.release.set()
        replies = Replies(stream)
        ids = sorted([(await replies.next())["id"] for _ in range(total)])
        assert ids == list(range(total))
        assert handlers.most_running == MAX_IN_FLIGHT_PER_CONNECTION
        await stream.aclose()


async def test_a_crash_after_waiting_is_an_internal_error(short_tmp: Path) -> None:
    """An eager handler that fails after it waited: -32603 with a ref, and the connection
    keeps serving."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, _):
        stream = await anyio.connect_unix(path)
        replies = Replies(stream)
        await stream.send(request("boom", 1))
        reply = await replies.next()
        assert reply["error"]["code"] == -32603 and len(reply["error"]["data"]["ref"]) == 12
        assert b"after a wait" not in json.dumps(reply).encode()
        await stream.send(request("fast", 2))
        assert (await replies.next())["id"] == 2
        await stream.aclose()


async def test_shutdown_cancels_a_request_left_waiting(short_tmp: Path) -> None:
    """A client that leaves while its eager request waits: shutdown still ends within the
    grace period, the request cancelled where it waits (its lock released)."""
    handlers = Handlers()
    with anyio.fail_after(5):
        async with serving(short_tmp, handlers) as (path, server):
            stream = await anyio.connect_unix(path)
            await stream.send(request("wait", 1))
            await handlers.started.wait()
            await stream.aclose()
            server.request_stop()
    assert handlers.cancelled == 1 and not handlers.lock.locked()


async def test_a_batch_of_eager_requests_is_answered(short_tmp: Path) -> None:
    """A batch of eager methods runs as a batch: one array, every element answered."""
    handlers = Handlers()
    async with serving(short_tmp, handlers) as (path, _):
        stream = await anyio.connect_unix(path)
        body = [{"jsonrpc": "2.0", "method": "fast", "id": i} for i in range(3)]
        await stream.send(json.dumps(body).encode() + b"\n")
        reply = await Replies(stream).next()
        assert sorted(r["id"] for r in reply) == [0, 1, 2]
        await stream.aclose()


# --- in_place itself ----------------------------------------------------------------------


async def test_in_place_without_a_wait_never_calls_on_wait() -> None:
    """A coroutine that finishes at once: its value, and ``on_wait`` not called."""
    calls: list[int] = []

    async def at_once() -> str:
        return "done"

    assert await in_place(at_once(), lambda: calls.append(1)) == "done"
    assert calls == []


async def test_in_place_calls_on_wait_once_before_the_first_wait() -> None:
    """A coroutine that waits twice: ``on_wait`` once, before the first wait; its value."""
    events: list[str] = []

    async def waits() -> int:
        events.append("start")
        await anyio.lowlevel.checkpoint()
        events.append("middle")
        await anyio.lowlevel.checkpoint()
        return 7

    assert await in_place(waits(), lambda: events.append("on_wait")) == 7
    assert events == ["start", "on_wait", "middle"]


async def test_in_place_passes_exceptions_through() -> None:
    """Raised before or after a wait, the coroutine's exception reaches the awaiter."""

    async def early() -> None:
        raise KeyError("early")

    async def late() -> None:
        await anyio.lowlevel.checkpoint()
        raise KeyError("late")

    for make in (early, late):
        with pytest.raises(KeyError):
            await in_place(make(), lambda: None)


async def test_in_place_is_cancelled_where_it_waits() -> None:
    """A cancel scope around it reaches the coroutine at its wait (its cleanup runs)."""
    cleaned: list[bool] = []

    async def forever() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(True)

    with anyio.move_on_after(0.05) as scope:
        await in_place(forever(), lambda: None)
    assert scope.cancelled_caught and cleaned == [True]


async def test_in_place_closes_the_coroutine_when_on_wait_fails() -> None:
    """``on_wait`` raising: the coroutine is closed (its cleanup runs), the error raised."""
    cleaned: list[bool] = []

    async def waits() -> None:
        try:
            await anyio.lowlevel.checkpoint()
        finally:
            cleaned.append(True)

    def fail() -> None:
        raise RuntimeError("no task group")

    with pytest.raises(RuntimeError):
        await in_place(waits(), fail)
    assert cleaned == [True]
