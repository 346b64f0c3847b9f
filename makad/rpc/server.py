"""Connections on the Unix socket: peer check, framing, concurrent requests, shutdown.

One task reads each connection; every framed message is dispatched in its own
task (bounded per connection) so a slow call never holds up a ``ping`` behind
it. Replies and daemon notifications share one write lock per connection.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
from typing import Any

import anyio
import msgspec
import structlog
from anyio.abc import SocketAttribute, SocketListener, SocketStream

from makad.rpc.dispatch import Dispatcher, Prepared, error_response
from makad.rpc.framing import Decoder, FrameError, Framing, detect, encode, make_decoder

log = structlog.get_logger("makad.server")
_encoder = msgspec.json.Encoder()
_ids = itertools.count(1)

# Below glibc's pinned mmap threshold (makad.heap): each recv allocates this much and
# shrinks it to what arrived; a larger size cost an mmap and munmap per read.
READ_CHUNK = 64 * 1024
MAX_IN_FLIGHT_PER_CONNECTION = 64


def peer_uid(stream: SocketStream) -> int | None:
    """The connecting process's uid (SO_PEERCRED), or None where the OS cannot say."""
    raw: socket.socket = stream.extra(SocketAttribute.raw_socket)
    try:
        creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


class Connection:
    """One client connection: its framing, its write lock and its close hooks."""

    def __init__(self, stream: SocketStream) -> None:
        self.id = next(_ids)
        self._stream = stream
        self._lock = anyio.Lock()
        self.framing: Framing = "ndjson"
        self.closed = False
        self._close_hooks: list[Any] = []

    def on_close(self, hook: Any) -> None:
        self._close_hooks.append(hook)

    async def send(self, payload: bytes) -> None:
        if self.closed:
            return
        try:
            self._lock.acquire_nowait()  # no scheduling round trip when uncontended
        except anyio.WouldBlock:
            await self._lock.acquire()
        try:
            await self._stream.send(encode(self.framing, payload))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            self.closed = True
        finally:
            self._lock.release()

    async def notify(self, method: str, params: Any) -> None:
        """Send a JSON-RPC notification (no id) to this client."""
        await self.send(_encoder.encode({"jsonrpc": "2.0", "method": method, "params": params}))

    def run_close_hooks(self) -> None:
        self.closed = True
        for hook in self._close_hooks:
            hook(self)
        self._close_hooks.clear()


class Server:
    """Accepts connections and serves them until asked to stop."""

    def __init__(self, dispatcher: Dispatcher, max_message_bytes: int, grace_s: float) -> None:
        self._dispatcher = dispatcher
        self._max = max_message_bytes
        self._grace = grace_s
        self._uid = os.getuid()
        self._stop = anyio.Event()
        self._in_flight = 0
        # Created only while shutdown waits for in-flight requests (not per request).
        self._idle: anyio.Event | None = None
        self.connections: set[Connection] = set()

    def request_stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    async def run(self, listener: SocketListener) -> None:
        async with anyio.create_task_group() as tg:
            accept_scope = anyio.CancelScope()
            accept_done = anyio.Event()

            async def accept_loop() -> None:
                try:
                    await _accept_forever()
                finally:
                    accept_done.set()

            async def _accept_forever() -> None:
                with accept_scope:
                    while True:
                        try:
                            stream = await listener.accept()
                        except (anyio.BrokenResourceError, OSError) as exc:
                            log.warning("accept_failed", error=type(exc).__name__)
                            await anyio.sleep(0.05)
                            continue
                        tg.start_soon(self._serve_connection, stream)

            tg.start_soon(accept_loop)
            await self._stop.wait()
            accept_scope.cancel()
            await accept_done.wait()
            await listener.aclose()
            log.info("stopping", in_flight=self._in_flight)
            with anyio.move_on_after(self._grace):
                if self._in_flight:
                    self._idle = anyio.Event()
                    await self._idle.wait()
            tg.cancel_scope.cancel()

    async def _serve_connection(self, stream: SocketStream) -> None:
        async with stream:
            uid = peer_uid(stream)
            if uid is not None and uid != self._uid:
                log.warning("connection_refused", reason="peer uid differs")
                return
            conn = Connection(stream)
            self.connections.add(conn)
            try:
                await self._read_loop(conn, stream)
            finally:
                self.connections.discard(conn)
                conn.run_close_hooks()

    async def _read_loop(self, conn: Connection, stream: SocketStream) -> None:
        decoder: Decoder | None = None
        pending = b""
        limiter = anyio.Semaphore(MAX_IN_FLIGHT_PER_CONNECTION)
        async with anyio.create_task_group() as tg:
            while not self._stop.is_set():
                try:
                    chunk = await stream.receive(READ_CHUNK)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError,
                        OSError):
                    if decoder is not None and decoder.has_partial():
                        log.debug("client_closed_mid_message", conn=conn.id)
                    break
                if decoder is None:
                    pending += chunk
                    framing = detect(pending)
                    if framing is None:
                        if len(pending) > self._max:
                            break
                        continue
                    conn.framing = framing
                    decoder = make_decoder(framing, self._max)
                    chunk, pending = pending, b""
                try:
                    messages = decoder.feed(chunk)
                except FrameError as exc:
                    await conn.send(_encoder.encode(error_response(
                        -32600, "Invalid Request", {"kind": exc.kind, "reason": exc.reason})))
                    log.info("connection_closed_bad_frame", conn=conn.id, kind=exc.kind)
                    break
                for message in messages:
                    prepared = self._dispatcher.prepare(message)
                    if isinstance(prepared, bytes):
                        await conn.send(prepared)
                        continue
                    self._begin()
                    if prepared.inline:
                        # No IO behind it: answering in place beats spawning a task, and
                        # the reader itself is the bound on how many run at once.
                        await self._handle(conn, prepared, None)
                        continue
                    try:
                        limiter.acquire_nowait()  # no scheduling round trip when free
                    except anyio.WouldBlock:
                        await limiter.acquire()
                    tg.start_soon(self._handle, conn, prepared, limiter)
            # Leaving the task group lets the requests already read finish; on shutdown
            # Server.run cancels whatever outlives the grace period.

    def _begin(self) -> None:
        self._in_flight += 1

    def _end(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0 and self._idle is not None:
            self._idle.set()

    async def _handle(self, conn: Connection, prepared: Prepared,
                      limiter: anyio.Semaphore | None) -> None:
        try:
            reply = await self._dispatcher.run(prepared, conn)
            if reply is not None:
                await conn.send(reply)
        finally:
            self._end()
            if limiter is not None:
                limiter.release()
