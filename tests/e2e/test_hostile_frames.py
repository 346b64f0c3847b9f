"""Bad bytes get an error or a close, and the daemon keeps serving new connections."""

from __future__ import annotations

import contextlib
import json

import pytest

from tests.support import DaemonProcess, RawConnection, ping_ok


def test_garbage_bytes_get_parse_error(shared_daemon: DaemonProcess) -> None:
    """Random non-JSON bytes get -32700; a new connection still gets pong."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send_raw(b"\x00\x01garbage\xfe\xff\n")
        assert conn.recv_message()["error"]["code"] == -32700
    assert ping_ok(shared_daemon.socket)


def test_invalid_utf8_gets_parse_error(shared_daemon: DaemonProcess) -> None:
    """A JSON string holding invalid UTF-8 is a parse error, not a crash."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send_raw(b'{"jsonrpc":"2.0","method":"ping\xff","id":1}\n')
        assert conn.recv_message()["error"]["code"] == -32700
        assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 2})["result"] == "pong"


def test_deeply_nested_json(shared_daemon: DaemonProcess) -> None:
    """100,000 levels of nesting get an error reply; the daemon survives."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send_raw(b"[" * 100_000 + b"]" * 100_000 + b"\n")
        reply = conn.recv_message()
        assert reply["error"]["code"] == -32700
        assert reply["error"]["data"]["kind"] == "too_deep"
    assert ping_ok(shared_daemon.socket)


def test_oversized_line_gets_error_then_close(shared_daemon: DaemonProcess) -> None:
    """A 20 MiB line (over the 16 MiB cap) gets a too_large error and the connection closes."""
    with RawConnection(shared_daemon.socket, timeout=30) as conn:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            conn.send_raw(b'{"jsonrpc":"2.0","method":"ping","params":{"x":"' + b"a" * (20 << 20))
        reply = conn.recv_message()
        assert reply["error"]["data"]["kind"] == "too_large"
        assert conn.at_eof()
    assert ping_ok(shared_daemon.socket)


def test_oversized_lsp_frame_is_refused_from_its_header(shared_daemon: DaemonProcess) -> None:
    """A Content-Length over the cap is refused before its body is read."""
    with RawConnection(shared_daemon.socket, "lsp") as conn:
        conn.send_raw(b"Content-Length: %d\r\n\r\n" % (64 << 20))
        assert conn.recv_message()["error"]["data"]["kind"] == "too_large"
        assert conn.at_eof()
    assert ping_ok(shared_daemon.socket)


def test_bad_lsp_header_closes(shared_daemon: DaemonProcess) -> None:
    """A Content-Length header that is not a number gets bad_frame and a close."""
    with RawConnection(shared_daemon.socket, "lsp") as conn:
        conn.send_raw(b"Content-Length: many\r\n\r\n{}")
        assert conn.recv_message()["error"]["data"]["kind"] == "bad_frame"
    assert ping_ok(shared_daemon.socket)


@pytest.mark.parametrize(
    "frame",
    [
        b'Content-Length: 40\r\nContent-Length: 5\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"ping"}',
        b'Content-Length: 4_0\r\n\r\n{"jsonrpc":"2.0","id":1,"method":"ping"}',
        b'Content-Length: 40\n\n{"jsonrpc":"2.0","id":1,"method":"ping"}',
    ],
    ids=["length_twice", "underscore", "bare_newlines"],
)
def test_ambiguous_lsp_header_closes(shared_daemon: DaemonProcess, frame: bytes) -> None:
    """A header block readers could frame differently (two lengths, `4_0`, bare newlines) gets
    bad_frame with id null and a close, never a reply to the request inside it."""
    with RawConnection(shared_daemon.socket, "lsp") as conn:
        conn.send_raw(frame)
        reply = conn.recv_message()
        assert reply["id"] is None and reply["error"]["code"] == -32600
        assert reply["error"]["data"]["kind"] == "bad_frame"
        assert conn.at_eof()
    assert ping_ok(shared_daemon.socket)


def test_close_mid_message_is_not_an_error(daemon: DaemonProcess) -> None:
    """A client that hangs up mid-message leaves no error in the log."""
    with RawConnection(daemon.socket) as conn:
        conn.send_raw(b'{"jsonrpc":"2.0","method":"pi')
    assert ping_ok(daemon.socket)
    assert '"level": "error"' not in daemon.log_text()


def test_many_requests_in_one_write_all_answered(shared_daemon: DaemonProcess) -> None:
    """Pipelined requests in one write are all answered with their own ids."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send_raw(
            b"".join(
                json.dumps({"jsonrpc": "2.0", "method": "ping", "id": i}).encode() + b"\n" for i in range(200)
            )
        )
        ids = {conn.recv_message()["id"] for _ in range(200)}
    assert ids == set(range(200))


def test_huge_id_is_echoed(shared_daemon: DaemonProcess) -> None:
    """A very long string id comes back unchanged."""
    big = "i" * 100_000
    with RawConnection(shared_daemon.socket) as conn:
        assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": big})["id"] == big
