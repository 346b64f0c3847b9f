"""Async client (anyio): concurrent calls on one connection, notifications as a stream."""

from __future__ import annotations

import contextlib
import math
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.lowlevel
from anyio.abc import SocketAttribute, SocketStream, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from maka import append_parts, autostart
from maka.codec import Codec, default_socket_path, is_notification, unwrap
from maka.dial import connect_waiting_async
from maka.errors import DaemonUnavailable, ProtocolError, RemoteError, UntrustedServer
from maka.generated_methods import LIMITS, AsyncMethods
from maka.notifications import (
    RECONNECT_RETRIES,
    RECONNECTED,
    Notification,
    Subscriptions,
    backoff,
    lost_marker,
    marker,
)
from maka.server_check import ServerUid, check_server, expected_server_uid

Item = Notification | BaseException  # an exception ends the notification stream
# How long a request whose sending failed waits for the daemon's error about it.
LAST_WORDS_S = 1.0


class AsyncClient(autostart.StopAware):
    """``async with AsyncClient() as c: await c.call("ping")`` (or ``await c.m.ping()``).

    Behaves as ``Client`` does: connects on the first call, reconnects after the daemon
    restarted and renews its subscriptions — here without waiting for a call, so
    ``notifications()`` carries on across a restart. ``autostart`` is off by default, as
    for ``Client``, and never starts a daemon that said it stops on purpose
    (``daemon_stopped``); the server's uid is checked as ``Client`` checks it (``server_uid``).
    """

    def __init__(
        self,
        socket_path: str | None = None,
        timeout: float | None = 30.0,
        *,
        autostart: bool = False,
        reconnect_retries: int = RECONNECT_RETRIES,
        on_notification: Callable[[Notification], None] | None = None,
        server_uid: ServerUid | None = None,
    ) -> None:
        self.socket_path = socket_path or default_socket_path()
        # The uid the server must run as (maka.server_check): ours unless told otherwise.
        self.server_uid = server_uid
        self._expected_uid = expected_server_uid(server_uid)
        # Called with each notification as it is read (see Client.on_notification).
        self.on_notification = on_notification
        self.timeout = timeout
        self.autostart = autostart
        self.reconnect_retries = reconnect_retries
        self.m = AsyncMethods(self.call)
        self._stream: SocketStream | None = None
        self._codec = Codec()
        # The daemon's caps as far as known: its byte cap is learned from a refusal.
        self._limits: dict[str, int] = dict(LIMITS)
        self._waiters: dict[int, MemoryObjectSendStream[dict[str, Any]]] = {}
        self._send_lock = anyio.Lock()
        self._connect_lock = anyio.Lock()
        self._tg: TaskGroup | None = None
        self._subscriptions = Subscriptions()
        self._ever_connected = False
        # The reason of the last ``daemon_stopping`` seen; None once a daemon answers again.
        self.daemon_stopped: str | None = None
        self._closing = False
        self._resuming = False
        self._notes_closed = False
        self._note_send, self._note_receive = _notes_stream()

    async def __aenter__(self) -> AsyncClient:
        self._closing = False
        if self._notes_closed:
            self._note_send, self._note_receive = _notes_stream()
            self._notes_closed = False
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None
        self._note_send.close()
        self._note_receive.close()
        self._notes_closed = True

    async def aclose(self) -> None:
        """Close the connection and forget its subscriptions."""
        self._closing = True
        self._subscriptions.clear()
        if self._stream is not None:
            await self._stream.aclose()
            self._stream = None

    async def _dial(self) -> SocketStream:
        stream = await connect_waiting_async(self.socket_path, self.timeout)
        try:
            check_server(stream.extra(SocketAttribute.raw_socket), self.socket_path, self._expected_uid)
        except BaseException:
            await stream.aclose()
            raise
        return stream

    async def _open(self) -> SocketStream:
        try:
            stream = await self._dial()
        except OSError as exc:
            self._check_may_start(exc)
            stream = await autostart.start_and_connect_async(self.socket_path, self._dial)
        self.daemon_stopped = None
        return stream

    async def _ensure(self) -> SocketStream:
        async with self._connect_lock:
            if self._stream is not None:
                return self._stream
            if self._tg is None:
                raise RuntimeError("use `async with AsyncClient(...)`")
            stream = await self._open()
            self._stream = stream
            self._closing = False
            self._codec.reset()
            self._tg.start_soon(self._reader, stream)
            renew = self._ever_connected and bool(self._subscriptions)
            self._ever_connected = True
            if renew:
                try:
                    await self._renew(stream)
                except BaseException:
                    self._stream = None
                    await stream.aclose()
                    raise
            return stream

    async def _renew(self, stream: SocketStream) -> None:
        """Subscribe again on a new connection; a refusal becomes a ``subscription_lost``."""
        renewed = []
        for params in self._subscriptions.all():
            try:
                await self._request(stream, "subscribe", params)
            except RemoteError as exc:
                self._subscriptions.drop(params)
                self._note_send.send_nowait(lost_marker(params, exc))
                continue
            renewed.append(params.get("workspace"))
        self._note_send.send_nowait(marker(RECONNECTED, workspaces=renewed))

    async def _reader(self, stream: SocketStream) -> None:
        try:
            while True:
                data = await stream.receive(1 << 20)
                for message in self._codec.feed(data):
                    if is_notification(message):
                        # (is_notification narrowed the message above)
                        self._seen(message)  # type: ignore[arg-type]
                        self._note_send.send_nowait(message)  # type: ignore[arg-type]
                        continue
                    # A reply's id is one we sent (an int); anything else finds no waiter.
                    request_id = message.get("id")
                    if request_id is None and "error" in message:
                        self._fail_waiting(message)
                        return  # the connection is done for: the next call opens another
                    waiter = self._waiters.pop(request_id, None)  # type: ignore[arg-type]
                    if waiter is not None:
                        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                            waiter.send_nowait(message)  # its caller may have timed out
        except (
            anyio.EndOfStream,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            ProtocolError,
            OSError,
        ):
            pass
        finally:
            lost = self._stream is stream
            if lost:
                self._stream = None
            if self._stream is None:  # else the waiters are the next connection's
                waiting, self._waiters = self._waiters, {}
                for waiter in waiting.values():
                    waiter.close()
            # The reader owns its connection: once it ends, nothing else will close it.
            with anyio.CancelScope(shield=True):
                await _close_after_send(stream, self._send_lock)
            if (
                lost
                and not self._closing
                and not self._resuming
                and self._subscriptions
                and self._tg is not None
            ):
                self._resuming = True
                self._tg.start_soon(self._resume)

    async def _resume(self) -> None:
        """Reconnect after a loss (with backoff); on failure, every subscription is lost."""
        try:
            for attempt in range(self.reconnect_retries + 1):
                if self._closing or not self._subscriptions:
                    return
                try:
                    await self._ensure()
                    return
                except (DaemonUnavailable, ProtocolError, TimeoutError, UntrustedServer) as exc:
                    # Another uid's server on the socket now: no point in trying again.
                    if attempt == self.reconnect_retries or isinstance(exc, UntrustedServer):
                        for note in self._subscriptions.lost(exc):
                            self._note_send.send_nowait(note)
                        self._note_send.send_nowait(exc)
                        return
                await anyio.sleep(backoff(attempt))
        finally:
            self._resuming = False

    def _fail_waiting(self, message: dict[str, Any]) -> None:
        """An error with a null id is about the connection, not one request (a message over
        the size cap, a malformed frame, too many connections): the daemon closes it next,
        so every request waiting on it ends with that error (and the reader stops, so no
        call is sent on it any more)."""
        waiting, self._waiters = self._waiters, {}
        for request_id, waiter in waiting.items():
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                waiter.send_nowait({**message, "id": request_id})

    async def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """Call a method with by-name params (a dict and/or keywords) and return its result."""
        if kw:
            params = {**(params or {}), **kw}
        if method == append_parts.METHOD and isinstance(params, dict):
            # More events than one message may carry go in parts (maka.append_parts).
            return await append_parts.append_async(self._call_once, params, self._limits)
        return await self._call_once(method, params)

    async def _call_once(self, method: str, params: dict[str, Any] | None) -> Any:
        stream = await self._ensure()
        try:
            result = await self._request(stream, method, params)
        except _NotSent:
            # The daemon restarted since our last call: the request never reached it.
            if self._stream is stream:
                self._stream = None
            try:
                result = await self._request(await self._ensure(), method, params)
            except _NotSent:
                raise ProtocolError("the daemon closed the connection while the request was sent") from None
        self._subscriptions.track(method, params)
        return result

    async def _request(self, stream: SocketStream, method: str, params: dict[str, Any] | None) -> Any:
        request_id, payload = self._codec.request(method, params)
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](1)
        self._waiters[request_id] = send
        try:
            try:
                async with self._send_lock:
                    await self._send_whole(stream, payload)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                # The daemon may have refused the request before closing (over the size
                # cap): its error reaches this waiter through the reader. Otherwise the
                # connection was gone (a restart) and the request never arrived.
                with anyio.move_on_after(LAST_WORDS_S), contextlib.suppress(anyio.EndOfStream):
                    return unwrap(await receive.receive())
                raise _NotSent from None
            with anyio.fail_after(self.timeout if self.timeout is not None else math.inf):
                try:
                    message = await receive.receive()
                except anyio.EndOfStream:
                    raise ProtocolError("the daemon closed the connection") from None
        finally:
            self._waiters.pop(request_id, None)
            send.close()
            receive.close()
        return unwrap(message)

    async def _send_whole(self, stream: SocketStream, payload: bytes) -> None:
        """Write one message whole, even when the caller is cancelled meanwhile: half a
        message would be read together with the next one as garbage, failing that one too.
        One that cannot be written within the timeout (a stuck daemon) closes the
        connection instead (the next call opens another) and raises TimeoutError."""
        with anyio.CancelScope(shield=True) as scope:
            if self.timeout is not None:
                scope.deadline = anyio.current_time() + self.timeout
            await stream.send(payload)
        if scope.cancelled_caught:
            with anyio.CancelScope(shield=True):
                await stream.aclose()  # the reader sees it and lets the connection go
            raise TimeoutError(f"could not send the request within {self.timeout:g} s")
        await anyio.lowlevel.checkpoint()  # a cancellation that came meanwhile ends the call here

    async def notifications(self) -> AsyncIterator[Notification]:
        """Notifications (after ``subscribe``), as ``Client.notifications`` yields them:
        ``reconnected`` after a restart, ``subscription_lost`` then ``DaemonUnavailable``
        when the daemon cannot be reached again."""
        async for item in self._note_receive:
            if isinstance(item, BaseException):
                raise item
            yield item

    def drain_notifications(self) -> list[Notification]:
        """The notifications received so far, without waiting for more."""
        out: list[Notification] = []
        while True:
            try:
                item = self._note_receive.receive_nowait()
            except anyio.WouldBlock:
                return out
            if not isinstance(item, BaseException):
                out.append(item)


async def _close_after_send(stream: SocketStream, send_lock: anyio.Lock) -> None:
    """Close ``stream`` once no send is under way on it. A send blocked on a full buffer
    is woken by the shutdown (it fails as the connection ends) and lets go of the lock; a
    close racing a send's wake-up instead makes asyncio fail the loop's callback (anyio's
    raw-socket streams resolve the send's future twice)."""
    with contextlib.suppress(OSError):
        stream.extra(SocketAttribute.raw_socket).shutdown(socket.SHUT_RDWR)
    with anyio.move_on_after(LAST_WORDS_S) as waited:
        await send_lock.acquire()
    try:
        await stream.aclose()
    finally:
        if not waited.cancelled_caught:
            send_lock.release()


class _NotSent(Exception):
    """The request could not be written: it never reached the daemon."""


def _notes_stream() -> tuple[MemoryObjectSendStream[Item], MemoryObjectReceiveStream[Item]]:
    """The unbounded stream notifications wait in until ``notifications()`` takes them."""
    return anyio.create_memory_object_stream[Item](math.inf)
