"""Synchronous client: one socket, calls in sequence, notifications queued."""

from __future__ import annotations

import collections
import socket
from collections.abc import Iterator
from typing import Any

from maka.codec import Codec, default_socket_path, is_notification, unwrap
from maka.errors import DaemonUnavailable, ProtocolError


class Client:
    """``Client().call("ping")`` → ``"pong"``. Reconnects on the next call after a restart."""

    def __init__(self, socket_path: str | None = None, timeout: float | None = 30.0) -> None:
        self.socket_path = socket_path or default_socket_path()
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._codec = Codec()
        self._notifications: collections.deque[dict[str, Any]] = collections.deque()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._codec.reset()

    def _connect(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.socket_path)
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                sock.close()
                raise DaemonUnavailable(self.socket_path, type(exc).__name__) from None
            except OSError as exc:
                sock.close()
                raise DaemonUnavailable(self.socket_path, exc.strerror or str(exc)) from None
            self._sock = sock
        return self._sock

    def call(self, method: str, params: dict[str, Any] | None = None, **kw: Any) -> Any:
        """Call a method with by-name params (a dict and/or keywords) and return its result."""
        if kw:
            params = {**(params or {}), **kw}
        request_id, payload = self._codec.request(method, params)
        try:
            self._connect().sendall(payload)
        except (BrokenPipeError, ConnectionResetError):
            # The daemon restarted since our last call: the request never reached it.
            self.close()
            self._connect().sendall(payload)
        while True:
            for message in self._read():
                if is_notification(message):
                    self._notifications.append(message)
                elif message.get("id") == request_id:
                    return unwrap(message)

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification: no reply comes back."""
        self._connect().sendall(self._codec.notification(method, params))

    def _read(self) -> list[dict[str, Any]]:
        sock = self._connect()
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            raise
        except OSError as exc:
            self.close()
            raise ProtocolError(f"connection lost: {exc}") from None
        if not data:
            self.close()
            raise ProtocolError("the daemon closed the connection")
        return self._codec.feed(data)

    def notifications(self) -> Iterator[dict[str, Any]]:
        """Yield daemon notifications (after ``subscribe``), blocking for the next one."""
        while True:
            while self._notifications:
                yield self._notifications.popleft()
            for message in self._read():
                if is_notification(message):
                    self._notifications.append(message)
