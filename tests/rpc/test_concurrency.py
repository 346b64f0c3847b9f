"""Requests on one connection run concurrently: a slow call does not block a ping."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from makad.rpc.dispatch import Dispatcher
from makad.rpc.server import Limits, Server
from makad.wire.base import MethodSpec
from makad.wire.system import NoParams

pytestmark = pytest.mark.anyio


async def test_slow_call_does_not_block_ping(short_tmp: Path) -> None:
    """A ping sent after a blocked call is answered first; the blocked call then completes."""
    release = anyio.Event()

    async def slow(params: NoParams, peer: object) -> str:
        await release.wait()
        return "slow-done"

    async def ping(params: NoParams, peer: object) -> str:
        return "pong"

    catalogue = {
        "slow": MethodSpec("slow", NoParams, str, "test"),
        "ping": MethodSpec("ping", NoParams, str, "test"),
    }
    server = Server(
        Dispatcher(catalogue, {"slow": slow, "ping": ping}),
        Limits(max_message_bytes=1 << 20, shutdown_grace_s=1.0),
    )
    listener = await anyio.create_unix_listener(short_tmp / "c.sock")
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.run, listener)
        stream = await anyio.connect_unix(short_tmp / "c.sock")
        await stream.send(
            b'{"jsonrpc":"2.0","method":"slow","id":1}\n{"jsonrpc":"2.0","method":"ping","id":2}\n'
        )
        buf = b""
        while b"\n" not in buf:
            buf += await stream.receive()
        first = json.loads(buf.split(b"\n")[0])
        assert first == {"jsonrpc": "2.0", "result": "pong", "id": 2}
        release.set()
        buf = buf.split(b"\n", 1)[1]
        while b"\n" not in buf:
            buf += await stream.receive()
        assert json.loads(buf.split(b"\n")[0])["result"] == "slow-done"
        await stream.aclose()
        server.request_stop()


async def test_unexpected_exception_hides_its_text(short_tmp: Path) -> None:
    """A crashing handler gives -32603 with a log reference, never the exception text."""

    async def boom(params: NoParams, peer: object) -> str:
        raise RuntimeError("secret memory content")

    dispatcher = Dispatcher({"boom": MethodSpec("boom", NoParams, str, "test")}, {"boom": boom})
    reply = await dispatcher.dispatch(b'{"jsonrpc":"2.0","method":"boom","id":1}', None)
    assert reply is not None
    body = json.loads(reply)
    assert body["error"]["code"] == -32603
    assert len(body["error"]["data"]["ref"]) == 12
    assert b"secret" not in reply


async def test_a_method_that_is_not_a_string_is_an_invalid_request() -> None:
    """A method given as an array or an object (unhashable) is -32600, alone or in a
    batch: never an internal error."""

    async def ping(params: NoParams, peer: object) -> str:
        return "pong"

    dispatcher = Dispatcher({"ping": MethodSpec("ping", NoParams, str, "test", inline=True)}, {"ping": ping})
    for method in ("[1]", '{"a":1}'):
        single = b'{"jsonrpc":"2.0","method":%s,"id":1}' % method.encode()
        reply = await dispatcher.dispatch(single, None)
        assert reply is not None
        assert json.loads(reply)["error"]["data"]["kind"] == "invalid_request"
        batch = b"[" + single + b',{"jsonrpc":"2.0","method":"ping","id":2}]'
        replies = await dispatcher.dispatch(batch, None)
        assert replies is not None
        assert [r.get("result") or r["error"]["code"] for r in json.loads(replies)] == [-32600, "pong"]
