"""A daemon whose listen queue is full (a burst of clients, or another user's flood of
connects on a socket opened to others) is busy, not gone: the Python client waits for room
within its timeout instead of failing at once, and says so when the time runs out."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from maka import AsyncClient, Client
from maka.errors import DaemonUnavailable


class QueueFiller:
    """A server socket whose listen queue is full of connections it has not accepted yet;
    ``open_up`` accepts them all and answers every request on them with ``"pong"``."""

    def __init__(self, path: Path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(0)
        self.waiting: list[socket.socket] = []
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                sock.connect(str(path))
            except BlockingIOError:
                sock.close()
                break
            self.waiting.append(sock)
        self.threads: list[threading.Thread] = []

    def open_up(self) -> None:
        thread = threading.Thread(target=self._accept_all, daemon=True)
        thread.start()
        self.threads.append(thread)

    def _accept_all(self) -> None:
        for sock in self.waiting:
            sock.close()
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            thread.start()
            self.threads.append(thread)

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        with conn:
            buffered = b""
            while chunk := conn.recv(65536):
                buffered += chunk
                while b"\n" in buffered:
                    line, buffered = buffered.split(b"\n", 1)
                    reply = {"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": "pong"}
                    conn.sendall(json.dumps(reply).encode() + b"\n")

    def close(self) -> None:
        for sock in self.waiting:
            sock.close()
        self.server.shutdown(socket.SHUT_RDWR)
        self.server.close()


@pytest.fixture
def full_queue(short_tmp: Path) -> Iterator[QueueFiller]:
    filler = QueueFiller(short_tmp / "busy.sock")
    try:
        yield filler
    finally:
        filler.close()


def test_a_full_listen_queue_is_waited_out(short_tmp: Path, full_queue: QueueFiller) -> None:
    """A call made while the queue is full is answered once the server takes connections again."""
    assert full_queue.waiting, "the queue should be full"
    timer = threading.Timer(0.3, full_queue.open_up)
    timer.start()
    try:
        with Client(str(short_tmp / "busy.sock"), timeout=60) as client:
            assert client.call("ping") == "pong"
    finally:
        timer.join()


def test_a_queue_full_for_the_whole_timeout_says_the_daemon_is_busy(
    short_tmp: Path, full_queue: QueueFiller
) -> None:
    """When the queue stays full for the client's whole timeout, the error says the daemon is
    busy (its listen queue full), never that no daemon runs, and no daemon is started."""
    with (
        pytest.raises(DaemonUnavailable) as caught,
        Client(str(short_tmp / "busy.sock"), timeout=0.3) as client,
    ):
        client.call("ping")
    message = str(caught.value)
    assert "listen queue" in message and "no makad is running" not in message


@pytest.mark.anyio
async def test_the_async_client_waits_out_a_full_queue_too(short_tmp: Path, full_queue: QueueFiller) -> None:
    """AsyncClient (maka mcp's) waits for room as Client does, and is answered."""
    timer = threading.Timer(0.3, full_queue.open_up)
    timer.start()
    try:
        async with AsyncClient(str(short_tmp / "busy.sock"), timeout=60) as client:
            assert await client.call("ping") == "pong"
    finally:
        timer.join()


@pytest.mark.anyio
async def test_the_async_client_gives_up_on_a_queue_full_for_its_whole_timeout(
    short_tmp: Path, full_queue: QueueFiller
) -> None:
    """AsyncClient stops trying when its timeout is up (anyio's connect tried without end)
    and says the daemon is busy."""
    with anyio.fail_after(30):
        with pytest.raises(DaemonUnavailable) as caught:
            async with AsyncClient(str(short_tmp / "busy.sock"), timeout=0.3) as client:
                await client.call("ping")
    assert "listen queue" in str(caught.value)
