"""The connection's read path in process: requests that arrive while it waits, in pieces,
and its end — answered the same, without formatting a socket's repr per wait."""

from __future__ import annotations

import socket

import anyio
import pytest

from tests.service.conftest import InProcessDaemon

pytestmark = pytest.mark.anyio

PING = b'{"jsonrpc":"2.0","method":"ping","id":%d}\n'


async def _read_line(stream: anyio.abc.ByteStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        data += await stream.receive()
    return data


async def test_requests_after_a_wait_get_answers_without_a_socket_repr(
    served: InProcessDaemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ping sent after the reader went to wait (and one split over two writes) is
    answered, and no socket's repr is built (asyncio's selector formats one — a getsockname
    and a getpeername — when the socket object, not its descriptor, is waited on)."""
    reprs = []
    original = socket.socket.__repr__

    def counting_repr(self: socket.socket) -> str:
        if self.fileno() != client_fd:  # the test's own client waits through anyio
            reprs.append(self.fileno())
        return original(self)

    async with await anyio.connect_unix(str(served.socket)) as stream:
        client_fd = stream.extra(anyio.abc.SocketAttribute.raw_socket).fileno()
        await stream.send(PING % 0)
        assert b'"result":"pong"' in await _read_line(stream)
        monkeypatch.setattr(socket.socket, "__repr__", counting_repr)
        for i in range(1, 4):
            await anyio.sleep(0.02)  # the daemon's reader is waiting now
            await stream.send(PING % i)
            assert b'"id":%d' % i in await _read_line(stream)
        half = PING % 9
        await stream.send(half[:10])
        await anyio.sleep(0.02)
        await stream.send(half[10:])
        assert b'"id":9' in await _read_line(stream)
    assert reprs == []


async def test_a_client_that_closes_mid_message_ends_only_its_connection(served: InProcessDaemon) -> None:
    """End of stream after half a request closes that connection; another is served."""
    async with await anyio.connect_unix(str(served.socket)) as stream:
        await stream.send(b'{"jsonrpc":"2.0","meth')
        await stream.send_eof()
        with pytest.raises(anyio.EndOfStream):
            await stream.receive()
    async with served.client() as c:
        assert await c.call("ping") == "pong"
