"""Clients that send most of a large message and stop: what the daemon holds for them is
bounded by a few messages, not by the connection cap, and nobody is locked out."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from makad.rpc.large_messages import large_slots
from makad.settings import DEFAULT_MAX_MESSAGE_BYTES
from tests.support import DaemonProcess, RawConnection, ping_ok

# A ping padded with 4 MiB of blanks inside the object: valid JSON, answered with pong.
PAD_BYTES = 4 * 1024 * 1024


def _ping_parts(request_id: int) -> tuple[bytes, bytes]:
    """(all of a padded ping but its end, its end)."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"ping"' % request_id
    return head + b" " * PAD_BYTES, b"}\n"


class _Sender:
    """A connection that sends the bulk of a padded ping from a thread (its sendall blocks
    while the daemon does not read it); ``sent`` is set once all of it was taken."""

    def __init__(self, path: Path, request_id: int) -> None:
        self.id = request_id
        self.conn = RawConnection(path, timeout=120)
        self.bulk, self.tail = _ping_parts(request_id)
        self.sent = threading.Event()
        self.thread = threading.Thread(target=self._send, daemon=True)
        self.thread.start()

    def _send(self) -> None:
        try:
            self.conn.sock.sendall(self.bulk)
        except OSError:
            return
        self.sent.set()

    def finish(self) -> object:
        """Send the end of the ping (once the bulk is taken) and read the reply."""
        assert self.sent.wait(120), f"the daemon never read connection {self.id}'s message"
        self.conn.send_raw(self.tail)
        return self.conn.recv_message()


def test_connections_stalled_in_large_messages_hold_a_few_slots_and_all_are_answered(
    daemon: DaemonProcess,
) -> None:
    """More connections than there are slots each send 4 MiB of a message and stop: the
    daemon reads on for the slots' holders only (the others' bytes stay unread, so memory
    is bounded by the slots, not by the connection cap), a ping from another connection
    is answered meanwhile, and once the holders finish, every waiting one is read and
    answered in turn."""
    slots = large_slots(DEFAULT_MAX_MESSAGE_BYTES)
    senders = [_Sender(daemon.socket, i) for i in range(slots + 6)]
    try:
        deadline = time.monotonic() + 120
        while sum(s.sent.is_set() for s in senders) < slots and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ping_ok(daemon.socket)
        holders = [s for s in senders if s.sent.is_set()]
        waiting = [s for s in senders if not s.sent.is_set()]
        assert len(holders) == slots, f"{len(holders)} connections were read whole, not {slots}"
        answers = {s.id: s.finish() for s in holders}
        answers |= {s.id: s.finish() for s in waiting}
        assert answers == {s.id: {"jsonrpc": "2.0", "id": s.id, "result": "pong"} for s in senders}
    finally:
        for sender in senders:
            sender.conn.close()
            sender.thread.join(10)


def test_a_connection_holding_a_slot_too_long_while_others_wait_is_closed(short_tmp: Path) -> None:
    """With two slots and a one-second hold limit, two connections that send most of a large
    message and stop are closed once a third waits for a slot; the third is then read and
    answered, and a lone holder nobody waits behind is left alone."""
    cap = 128 * 1024 * 1024  # 256 MiB over the cap: the fewest slots there are
    assert large_slots(cap) == 2
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_MESSAGE_BYTES": str(cap), "MAKAD_LARGE_MESSAGE_HOLD_S": "1"})
    d.start()
    senders: list[_Sender] = []
    try:
        lone = _Sender(d.socket, 0)
        senders.append(lone)
        assert lone.sent.wait(60)
        time.sleep(3)  # past the hold limit, but nobody waits: it keeps its slot
        assert _still_open(lone.conn)
        senders += [_Sender(d.socket, i) for i in (1, 2)]
        late = next(s for s in senders[1:] if s.sent.wait(60))  # the other slot
        waiting = next(s for s in senders[1:] if s is not late)
        assert waiting.sent.wait(60), "the waiting connection was never read"
        assert _everything_until_closed(lone.conn) == b""  # ended, unanswered
        assert waiting.finish() == {"jsonrpc": "2.0", "id": waiting.id, "result": "pong"}
        assert ping_ok(d.socket)
    finally:
        for sender in senders:
            sender.conn.close()
            sender.thread.join(10)
        d.stop()


def test_blanks_before_a_first_message_in_many_reads_are_skipped(daemon: DaemonProcess) -> None:
    """A connection that starts with 2 MiB of blanks (spaces, tabs, CRs, newlines) sent in
    small pieces, then a request, in either framing: the request is answered; blanks past
    the message cap close the connection unanswered."""
    for framing in ("ndjson", "lsp"):
        with RawConnection(daemon.socket, framing=framing) as conn:
            for _ in range(512):
                conn.send_raw(b" \t\r\n" * 1024)
            reply = conn.request({"jsonrpc": "2.0", "id": framing, "method": "ping"})
            assert reply == {"jsonrpc": "2.0", "id": framing, "result": "pong"}
    with RawConnection(daemon.socket, timeout=60) as conn:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.send_raw(
                b" " * (DEFAULT_MAX_MESSAGE_BYTES + 64 * 1024) + b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'
            )
        assert _everything_until_closed(conn) == b""
    assert ping_ok(daemon.socket)


def _everything_until_closed(conn: RawConnection) -> bytes:
    """What the daemon writes on ``conn`` before closing it (a reset ends it too)."""
    got = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := conn.sock.recv(65536):
            got += chunk
    return got


def _still_open(conn: RawConnection) -> bool:
    """Whether the daemon has neither closed ``conn`` nor written on it."""
    conn.sock.setblocking(False)
    try:
        conn.sock.recv(1)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        conn.sock.setblocking(True)
    return False
