"""A request whose writing is cut short (a timeout, a cancellation) never leaves half a
message on the connection: the client's next call is answered normally."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import pytest

from maka import AsyncClient, Client
from tests.support import DaemonProcess

pytestmark = pytest.mark.anyio
BIG_TEXT = "word " * 1_000_000  # far more than a socket buffer holds: the write blocks midway


@contextmanager
def stuck(d: DaemonProcess, resume_after_s: float | None = None) -> Iterator[None]:
    """The daemon stopped (SIGSTOP): it reads nothing until resumed (SIGCONT), on leaving
    or after ``resume_after_s``."""
    assert d.proc is not None
    pid = d.proc.pid
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(resume_after_s, os.kill, (pid, signal.SIGCONT)) if resume_after_s else None
    if timer is not None:
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.join()
        os.kill(pid, signal.SIGCONT)


def big_append(session: str) -> dict[str, object]:
    return {"sessionId": session, "events": [{"type": "user_message", "text": BIG_TEXT}]}


def test_sync_call_that_times_out_while_sending(shared_daemon: DaemonProcess) -> None:
    """The sync client: a call whose request cannot be written within the timeout raises
    TimeoutError, and the same client's next call works."""
    ws = str(shared_daemon.workspace)
    session = shared_daemon.call("open_session", {"workspace": ws})["sessionId"]
    with Client(str(shared_daemon.socket), timeout=1.0) as c:
        with stuck(shared_daemon), pytest.raises(TimeoutError):
            c.call("append_events", {"workspace": ws, **big_append(session)})
        c.timeout = 30.0
        result = c.call(
            "append_events", workspace=ws, sessionId=session, events=[{"type": "note", "text": "after"}]
        )
    assert result["lastSeq"] >= 1


async def test_async_call_cancelled_while_sending(shared_daemon: DaemonProcess) -> None:
    """The async client: a call cancelled while its request is being written ends, and the
    same client's next call works."""
    ws = str(shared_daemon.workspace)
    async with AsyncClient(str(shared_daemon.socket)) as c:
        session = (await c.call("open_session", workspace=ws))["sessionId"]
        with stuck(shared_daemon, resume_after_s=1.0):
            with anyio.move_on_after(0.5) as scope:
                await c.call("append_events", {"workspace": ws, **big_append(session)})
        assert scope.cancelled_caught
        result = await c.call(
            "append_events", workspace=ws, sessionId=session, events=[{"type": "note", "text": "after"}]
        )
    assert result["lastSeq"] >= 1
