"""Connections over the cap: the refusal line is read, and refused connections that
stay open to deliver it are bounded in number."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from anyio.abc import SocketStream

from makad.rpc import refusal
from makad.rpc.dispatch import Dispatcher
from makad.rpc.server import MAX_LINGERING_REFUSALS, Limits, Server
from makad.wire.base import MethodSpec
from makad.wire.system import NoParams

pytestmark = pytest.mark.anyio

PING = b'{"jsonrpc":"2.0","method":"ping","id":1}\n'


async def ping(params: NoParams, peer: object) -> str:
    return "pong"


def capped_server(max_connections: int) -> Server:
    catalogue = {"ping": MethodSpec("ping", NoParams, str, "test")}
    return Server(
        Dispatcher(catalogue, {"ping": ping}),
        Limits(max_message_bytes=1 << 20, max_connections=max_connections, shutdown_grace_s=1.0),
    )


async def read_to_eof(stream: SocketStream) -> bytes:
    received = b""
    while True:
        try:
            received += await stream.receive()
        except anyio.EndOfStream:
            return received


async def refused_and_read(path: Path, write_first: bool = True) -> SocketStream:
    """A connection past the cap that read the refusal and EOF (having written a request
    the moment it connected, unless ``write_first`` is False)."""
    stream = await anyio.connect_unix(path)
    if write_first:
        await stream.send(PING)
    line = json.loads(await read_to_eof(stream))
    assert line["id"] is None and line["error"]["data"] == {"kind": "too_many_connections", "limit": 1}
    return stream


async def still_open(stream: SocketStream) -> bool:
    """Whether the daemon still holds its end (a write then does not break the pipe)."""
    try:
        await stream.send(PING)
    except anyio.BrokenResourceError:
        return False
    return True


async def test_refused_connections_linger_up_to_a_bound_and_free_it_when_clients_leave(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With refused connections lingering a minute, the first MAX_LINGERING_REFUSALS stay
    open after their refusal, the next is closed at once (it reads the refusal as long as
    it has not written: closing on an unread request resets the connection),
    and once those clients leave a new refused connection lingers again; stopping the
    server ends the lingering ones."""
    monkeypatch.setattr(refusal, "LINGER_S", 60.0)
    server = capped_server(1)
    path = short_tmp / "r.sock"
    listener = await anyio.create_unix_listener(path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run, listener)
        held = await anyio.connect_unix(path)
        await held.send(PING)
        assert json.loads(await held.receive())["result"] == "pong"
        lingering = [await refused_and_read(path) for _ in range(MAX_LINGERING_REFUSALS)]
        one_more = await refused_and_read(path, write_first=False)
        assert [await still_open(s) for s in lingering] == [True] * MAX_LINGERING_REFUSALS
        assert not await still_open(one_more)
        for stream in [*lingering, one_more]:
            await stream.aclose()
        freed = False
        for _ in range(500):
            late = await refused_and_read(path)
            freed = await still_open(late)
            await late.aclose()
            if freed:
                break
            await anyio.sleep(0.01)
        assert freed, "the lingering slots were never given back"
        await held.aclose()
        server.request_stop()


async def test_a_refused_client_that_sends_past_the_bound_is_closed(
    short_tmp: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With refused connections lingering a minute, one whose client keeps sending is
    closed once it has sent about DRAIN_MAX_BYTES, long before the minute is out."""
    monkeypatch.setattr(refusal, "LINGER_S", 60.0)
    server = capped_server(1)
    path = short_tmp / "r.sock"
    listener = await anyio.create_unix_listener(path)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run, listener)
        held = await anyio.connect_unix(path)
        await held.send(PING)
        assert json.loads(await held.receive())["result"] == "pong"
        flooding = await refused_and_read(path)
        chunk = PING * 1000
        with anyio.fail_after(30), pytest.raises(anyio.BrokenResourceError):
            for _ in range(100 * refusal.DRAIN_MAX_BYTES // len(chunk)):
                await flooding.send(chunk)
        await flooding.aclose()
        await held.aclose()
        server.request_stop()
