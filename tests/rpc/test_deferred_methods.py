"""Methods registered after the daemon listens (``Dispatcher.defer_rest``): a request for
one that arrives first waits for it and is answered, never refused as unknown."""

from __future__ import annotations

import json

import anyio
import pytest

from makad.rpc.dispatch import Dispatcher
from makad.wire.base import MethodSpec
from makad.wire.system import NoParams

pytestmark = pytest.mark.anyio


async def ping(params: NoParams, peer: object) -> str:
    return "pong"


async def later(params: NoParams, peer: object) -> str:
    return "later-done"


PING = {"ping": MethodSpec("ping", NoParams, str, "test", inline=True)}
REST = {**PING, "later": MethodSpec("later", NoParams, str, "test")}


def request(method: str, id_: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "method": method, "id": id_}).encode()


async def test_a_request_for_a_deferred_method_waits_for_it() -> None:
    """Sent before the method is registered, the request is answered once it is (and a
    ping meanwhile at once)."""
    dispatcher = Dispatcher(PING, {"ping": ping})
    dispatcher.defer_rest()
    replies: list[bytes | None] = []

    async def ask() -> None:
        replies.append(await dispatcher.dispatch(request("later"), None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        assert replies == []  # waiting, not answered -32601
        assert json.loads(await dispatcher.dispatch(request("ping", 2), None) or b"")["result"] == "pong"
        dispatcher.add_rest(REST, {"ping": ping, "later": later})
    assert [json.loads(r or b"") for r in replies] == [{"jsonrpc": "2.0", "result": "later-done", "id": 1}]


async def test_an_unknown_method_is_refused_once_the_rest_is_registered() -> None:
    """After ``add_rest`` a method that is in no catalogue is -32601 at once, as before."""
    dispatcher = Dispatcher(PING, {"ping": ping})
    dispatcher.defer_rest()
    dispatcher.add_rest(REST, {"ping": ping, "later": later})
    body = json.loads(await dispatcher.dispatch(request("nope"), None) or b"")
    assert body["error"]["code"] == -32601 and body["error"]["data"]["kind"] == "method_not_found"
    body = json.loads(await dispatcher.dispatch(request("later"), None) or b"")
    assert body["result"] == "later-done"


async def test_waiting_requests_get_an_internal_error_when_the_rest_never_comes() -> None:
    """When loading the rest fails, the requests waiting for it (in a batch too) are answered
    -32603 with the failure's log ref; the early methods still answer."""
    dispatcher = Dispatcher(PING, {"ping": ping})
    dispatcher.defer_rest()
    replies: list[bytes | None] = []

    async def ask() -> None:
        batch = b"[" + request("later", 1) + b"," + request("ping", 2) + b"]"
        replies.append(await dispatcher.dispatch(batch, None))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        dispatcher.rest_failed("abcdef123456")
    first, second = json.loads(replies[0] or b"")
    assert first["error"]["code"] == -32603
    assert first["error"]["data"] == {"kind": "internal", "ref": "abcdef123456"}
    assert second["result"] == "pong"


async def test_a_dispatcher_without_deferred_methods_refuses_unknown_ones_at_once() -> None:
    """The default: no ``defer_rest``, an unknown method is -32601 without waiting."""
    dispatcher = Dispatcher(PING, {"ping": ping})
    with anyio.fail_after(1):
        body = json.loads(await dispatcher.dispatch(request("later"), None) or b"")
    assert body["error"]["code"] == -32601
