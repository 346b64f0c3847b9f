"""Connecting to the daemon's socket, waiting while its listen queue is full."""

from __future__ import annotations

import errno
import socket
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anyio.abc import UNIXSocketStream

# The first wait after a connect refused for a full queue, and the longest.
FIRST_WAIT_S = 0.001
LONGEST_WAIT_S = 0.05


class _Deadline:
    """The wait before the next connect, until ``timeout`` seconds from now have passed."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.at = None if timeout is None else time.monotonic() + timeout
        self.wait = FIRST_WAIT_S

    def next_wait(self) -> float:
        """Seconds to wait before trying again; raises once the time is up."""
        if self.at is not None and time.monotonic() + self.wait > self.at:
            raise BlockingIOError(
                errno.EAGAIN,
                f"the daemon's listen queue stayed full for {self.timeout:g} s "
                "(too many connections waiting)",
            )
        wait, self.wait = self.wait, min(self.wait * 2, LONGEST_WAIT_S)
        return wait


def connect_waiting(sock: socket.socket, path: str, timeout: float | None) -> None:
    """``sock.connect(path)``; when the daemon's listen queue is full (EAGAIN: a burst of
    clients, or another user's flood of connects on a socket opened to others), try again
    until ``timeout`` seconds have passed. A socket with a timeout is non-blocking inside,
    and Linux answers its connect to a full queue with EAGAIN at once: without this wait a
    busy daemon looked like no daemon. Raises ``BlockingIOError`` once the time is up."""
    deadline = _Deadline(timeout)
    while True:
        try:
            sock.connect(path)
            return
        except BlockingIOError:
            time.sleep(deadline.next_wait())


async def connect_waiting_async(path: str, give_up_after: float | None) -> UNIXSocketStream:
    """``anyio.connect_unix(path)`` waiting as ``connect_waiting`` does, for at most
    ``give_up_after`` seconds. (anyio's own retries a full queue at once, without end: a
    loop that took the CPU and outlived any timeout.)"""
    # Here, not at the top: the sync client (every ``maka`` command) never loads anyio.
    import anyio
    from anyio.abc import UNIXSocketStream

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    deadline = _Deadline(give_up_after)
    try:
        while True:
            try:
                sock.connect(path)
                break
            except BlockingIOError:
                await anyio.sleep(deadline.next_wait())
            except OSError as exc:
                if exc.errno != errno.EISCONN:  # (a connect in progress, where there are such)
                    raise
                break
        return await UNIXSocketStream.from_socket(sock)
    except BaseException:
        sock.close()
        raise
