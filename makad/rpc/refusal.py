"""Refusing a connection over the cap in a way the client can read.

A client usually writes its first request as soon as it is connected, often before the
refusal line arrives. Closing a socket whose receive buffer still holds that request
makes the kernel reset the connection, and the client then sees the reset instead of
the line. So the refusal ends only the daemon's side of the connection (SHUT_WR: the
client reads the line, then EOF) and keeps reading, discarding what comes, until the
client closes; it closes sooner once the client has sent ``DRAIN_MAX_BYTES`` or taken
``LINGER_S``. How many refused connections linger at once is bounded by the server:
they are refused because there are too many already.
"""

from __future__ import annotations

import socket

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketStream

from makad.errors import TooManyConnections
from makad.rpc.dispatch import error_response

LINGER_S = 1.0
DRAIN_MAX_BYTES = 256 * 1024
DRAIN_CHUNK = 16 * 1024

_encoder = msgspec.json.Encoder()


def refusal_line(limit: int) -> bytes:
    return (
        _encoder.encode(
            error_response(
                TooManyConnections.code,
                "Too many connections",
                {"kind": TooManyConnections.kind, "limit": limit},
            )
        )
        + b"\n"
    )


def send_refusal(stream: SocketStream, limit: int) -> bool:
    """Write the refusal line without waiting (a fresh socket has room for it) and end
    the daemon's side of the connection; False when the client is already gone."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    try:
        raw.send(refusal_line(limit))
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        return False
    return True


async def drain_then_close(stream: SocketStream) -> None:
    """Discard what the client sends until it closes, ``DRAIN_MAX_BYTES`` have come or
    ``LINGER_S`` have passed; then close."""
    try:
        with anyio.move_on_after(LINGER_S):
            drained = 0
            while drained < DRAIN_MAX_BYTES:
                drained += len(await stream.receive(DRAIN_CHUNK))
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass
    finally:
        await stream.aclose()


async def end_then_drain(stream: SocketStream) -> None:
    """End the daemon's side (the client reads what was sent, then EOF), then discard what
    the client still sends, as ``drain_then_close`` does, and close."""
    raw: socket.socket | None = stream.extra(SocketAttribute.raw_socket, None)
    try:
        if raw is not None:
            raw.shutdown(socket.SHUT_WR)
    except OSError:
        await stream.aclose()
        return
    await drain_then_close(stream)
