"""Async client (anyio): concurrent calls on one connection, notifications as a stream."""

from __future__ import annotations

import math
from typing import Any

import anyio
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from maka.codec import Codec, default_socket_path, is_notification, unwrap
from maka.errors import DaemonUnavailable, ProtocolError


class AsyncClient:
    """``async with AsyncClient() as c: await c.call("ping")``."""

    def __init__(self, socket_path: str | None = None, timeout: float | None = 30.0) -> None:
        self.socket_path = socket_path or default_socket_path()
        self.timeout = timeout
        self._stream: SocketStream | None = None
        self._codec = Codec()
        self._waiters: dict[int, MemoryObjectSendStream[dict[str, Any]]] = {}
        self._send_lock = anyio.Lock()
        self._connect_lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        notes: tuple[MemoryObjectSendStream[dict[str, Any]],
                     MemoryObjectReceiveStream[dict[str, Any]]] = (
            anyio.create_memory_object_stream[dict[str, Any]](math.inf))
        self._note_send, self.notifications = notes

    async def __aenter__(self) -> AsyncClient:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None

    async def aclose(self) -> None:
        if self._stream is not None:
            await self._stream.aclose()
            self._stream = None

    async def _ensure(self) -> SocketStream:
        async with self._connect_lock:
            if self._stream is None:
                if self._tg is None:
                    raise RuntimeError("use `async with AsyncClient(...)`")
                try:
                    self._stream = await anyio.connect_unix(self.socket_path)
                except OSError as exc:
                    raise DaemonUnavailable(self.socket_path, type(exc).__name__) from None
                self._codec.reset()
                self._tg.start_soon(self._reader, self._stream)
            return self._stream

    async def _reader(self, stream: SocketStream) -> None:
        try:
            while True:
                data = await stream.receive(1 << 20)
                for message in self._codec.feed(data):
                    if is_notification(message):
                        await self._note_send.send(message)
                        continue
                    waiter = self._waiters.pop(message.get("id"), None)  # type: ignore[arg-type]
                    if waiter is not None:
                        await waiter.send(message)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        finally:
            if self._stream is stream:
                self._stream = None
            for waiter in self._waiters.values():
                await waiter.aclose()
            self._waiters.clear()

    async def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        if kw:
            params = {**(params or {}), **kw}
        request_id, payload = self._codec.request(method, params)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._waiters[request_id] = send
        stream = await self._ensure()
        try:
            async with self._send_lock:
                await stream.send(payload)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._stream = None
            stream = await self._ensure()
            async with self._send_lock:
                await stream.send(payload)
        with anyio.fail_after(self.timeout if self.timeout is not None else math.inf):
            try:
                message = await receive.receive()
            except anyio.EndOfStream:
                raise ProtocolError("the daemon closed the connection") from None
        return unwrap(message)
