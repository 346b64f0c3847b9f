"""Synchronous client: one socket, calls in sequence, notifications queued."""

from __future__ import annotations

import collections
import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

from maka import append_parts, autostart
from maka.codec import Codec, default_socket_path, is_notification, unwrap
from maka.dial import connect_waiting
from maka.errors import DaemonUnavailable, ProtocolError, RemoteError
from maka.generated_methods import LIMITS, Methods
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


class Client(autostart.StopAware):
    """``Client().call("ping")`` → ``"pong"``; ``Client().m.status()`` → a typed ``StatusResult``.

    Connects on the first call and reconnects on the next call after the daemon restarted,
    renewing its ``subscribe``s. With ``autostart=True`` a missing daemon is started (see
    ``maka.autostart``); it is off by default because a library is often used next to a
    supervisor (systemd, a test harness, an app) that starts makad itself. A daemon that
    said it stops on purpose (``daemon_stopping``) is never started again by this client:
    ``daemon_stopped`` holds its reason until a daemon answers again.

    The server must run as this process's uid (``maka.server_check``, checked before
    anything is sent; ``UntrustedServer`` otherwise): ``server_uid`` names another uid it
    may run as, or ``"any"``; by default ``$MAKA_SERVER_UID`` does.
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
        # Called with each notification as it is read, also during a call (like the Node
        # client's "notification" event): e.g. import_progress while import_memories runs.
        self.on_notification = on_notification
        self.timeout = timeout
        self.autostart = autostart
        self.reconnect_retries = reconnect_retries
        self.m = Methods(self.call)
        self._sock: socket.socket | None = None
        self._codec = Codec()
        # The daemon's caps as far as known: its byte cap is learned from a refusal.
        self._limits: dict[str, int] = dict(LIMITS)
        self._notifications: collections.deque[Notification] = collections.deque()
        self._subscriptions = Subscriptions()
        self._ever_connected = False
        # The reason of the last ``daemon_stopping`` seen; None once a daemon answers again.
        self.daemon_stopped: str | None = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection and forget its subscriptions; a later call connects anew."""
        self._subscriptions.clear()
        self._drop()

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._codec.reset()

    def _dial(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            connect_waiting(sock, self.socket_path, self.timeout)
            check_server(sock, self.socket_path, self._expected_uid)
        except BaseException:
            sock.close()
            raise
        return sock

    def _open(self) -> socket.socket:
        try:
            sock = self._dial()
        except OSError as exc:
            self._check_may_start(exc)
            sock = autostart.start_and_connect(self.socket_path, self._dial)
        self.daemon_stopped = None
        return sock

    def _take(self, data: bytes) -> list[dict[str, Any]]:
        """Decode what arrived; notifications are seen (``daemon_stopping`` noted, the
        ``on_notification`` callback called) as they are read."""
        messages = self._codec.feed(data)
        for message in messages:
            if is_notification(message):
                self._seen(message)  # type: ignore[arg-type]  # is_notification narrowed it
        return messages

    def _salvage(self) -> dict[str, Any] | None:
        """Read what is still unread on a connection the daemon closed, before it is
        dropped: its notifications are queued (``daemon_stopping`` above all), and its
        error about the connection (null id: a message over the size cap), if it sent one,
        is returned."""
        sock = self._sock
        if sock is None:
            return None
        refusal = None
        with contextlib.suppress(OSError, ProtocolError):
            sock.setblocking(False)
            while data := sock.recv(1 << 20):
                for message in self._take(data):
                    if is_notification(message):
                        self._notifications.append(message)  # type: ignore[arg-type]
                    elif message.get("id") is None and "error" in message:
                        refusal = message
        return refusal

    def _connect(self) -> socket.socket:
        if self._sock is None:
            self._sock = self._open()
            self._codec.reset()
            if self._ever_connected and self._subscriptions:
                self._renew()
            self._ever_connected = True
        assert self._sock is not None
        return self._sock

    def _renew(self) -> None:
        """Subscribe again on a new connection; a refusal becomes a ``subscription_lost``."""
        renewed = []
        for params in self._subscriptions.all():
            try:
                self._roundtrip("subscribe", params)
            except RemoteError as exc:
                self._subscriptions.drop(params)
                self._notifications.append(lost_marker(params, exc))
                continue
            renewed.append(params.get("workspace"))
        self._notifications.append(marker(RECONNECTED, workspaces=renewed))

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """Call a method with by-name params (a dict and/or keywords) and return its result."""
        if kw:
            params = {**(params or {}), **kw}
        if method == append_parts.METHOD and isinstance(params, dict):
            # More events than one message may carry go in parts (maka.append_parts).
            return append_parts.append(self._roundtrip, params, self._limits)
        result = self._roundtrip(method, params)
        self._subscriptions.track(method, params)
        return result

    def _roundtrip(self, method: str, params: dict[str, Any] | None) -> Any:
        request_id, payload = self._codec.request(method, params)
        self._send(payload)
        while True:
            for message in self._read():
                if is_notification(message):
                    self._notifications.append(message)  # type: ignore[arg-type]  # is_notification narrowed it
                elif message.get("id") == request_id:
                    return unwrap(message)
                elif message.get("id") is None and "error" in message:
                    # About the connection (a message over the size cap, a malformed frame,
                    # too many connections): the daemon closes it, and this request failed.
                    self._drop()
                    return unwrap(message)

    def _send(self, payload: bytes) -> None:
        """Send a request. When the connection breaks meanwhile, the daemon either refused
        it before closing (over the size cap: its error is raised) or had restarted since
        our last call (the request never reached it): then it is sent once more. One that
        cannot be written within the timeout raises TimeoutError and closes the connection,
        which may hold part of it (the next call opens another)."""
        for _ in range(2):
            try:
                self._connect().sendall(payload)
                return
            except TimeoutError:
                self._drop()
                raise
            except (BrokenPipeError, ConnectionResetError):
                refusal = self._salvage()
                self._drop()
                if refusal is not None:
                    unwrap(refusal)  # raises its error
        raise ProtocolError("the daemon closed the connection while the request was sent")

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification: no reply comes back."""
        try:
            self._connect().sendall(self._codec.notification(method, params))
        except TimeoutError:
            self._drop()  # part of it may be on the connection
            raise

    def _read(self) -> list[dict[str, Any]]:
        sock = self._connect()
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            raise
        except OSError as exc:
            self._drop()
            raise ProtocolError(f"connection lost: {exc}") from None
        if not data:
            self._drop()
            raise ProtocolError("the daemon closed the connection")
        return self._take(data)

    def wait_closed(self, timeout: float) -> bool:
        """Read until the daemon closes this connection (after ``shutdown``), queueing
        what notifications come: True when it did, False after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        try:
            while self._sock is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._sock.settimeout(remaining)
                try:
                    messages = self._read()
                except TimeoutError:
                    return False
                except ProtocolError:
                    break
                self._notifications.extend(m for m in messages if is_notification(m))  # type: ignore[misc]
            return True
        finally:
            if self._sock is not None:
                self._sock.settimeout(self.timeout)

    def notifications(self) -> Iterator[Notification]:
        """Yield notifications (after ``subscribe``), blocking for the next one.

        A lost connection is re-established with backoff and the subscriptions renewed
        (a ``reconnected`` marker follows); when that fails, a ``subscription_lost`` marker
        per workspace, then ``DaemonUnavailable``. Waiting longer than ``timeout`` raises
        ``TimeoutError``; iterating again goes on waiting.
        """
        while True:
            while self._notifications:
                yield self._notifications.popleft()
            try:
                messages = self._read()
            except ProtocolError:
                if not self._subscriptions:
                    raise
                self._resume()
                continue
            # (is_notification narrows each message; mypy cannot follow it into a generator)
            self._notifications.extend(m for m in messages if is_notification(m))  # type: ignore[misc]

    def drain_notifications(self) -> list[Notification]:
        """The notifications received so far, without waiting for more."""
        out = list(self._notifications)
        self._notifications.clear()
        return out

    def _resume(self) -> None:
        """Reconnect after a loss (with backoff); on failure, every subscription is lost."""
        for attempt in range(self.reconnect_retries + 1):
            try:
                self._connect()
                return
            except (DaemonUnavailable, ProtocolError) as exc:  # gone again while renewing
                if attempt == self.reconnect_retries:
                    self._notifications.extend(self._subscriptions.lost(exc))
                    return
            time.sleep(backoff(attempt))
