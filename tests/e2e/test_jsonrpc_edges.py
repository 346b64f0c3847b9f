"""JSON-RPC 2.0 corners on a real socket: ids of every type, the version member, notifications
that would fail, and NDJSON bytes a client may send (CRLF, a BOM, a message in pieces)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support import DaemonProcess, RawConnection

PING = b'{"jsonrpc":"2.0","id":%s,"method":"ping"}'


@pytest.mark.parametrize(
    "id_",
    ["0", '"a"', '""', "null", "1.5", "-7", "123456789012345678901234567890", "-9223372036854775809"],
)
def test_every_valid_id_comes_back_as_sent(shared_daemon: DaemonProcess, id_: str) -> None:
    """A string, null, fractional, negative or arbitrarily large integer id is answered with that id."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send(PING % id_.encode())
        reply = conn.recv_message()
    assert reply == {"jsonrpc": "2.0", "result": "pong", "id": json.loads(id_)}


@pytest.mark.parametrize("id_", ["true", "{}", "[1]"])
def test_an_id_of_another_type_is_invalid_with_a_null_id(shared_daemon: DaemonProcess, id_: str) -> None:
    """A boolean, object or array id is -32600 answered with id null (the id cannot be echoed)."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send(PING % id_.encode())
        reply = conn.recv_message()
    assert reply["id"] is None and reply["error"]["data"]["kind"] == "invalid_request"


@pytest.mark.parametrize("version", [None, "1.0", 2, "2.0 "])
def test_jsonrpc_member_must_be_exactly_2_0(shared_daemon: DaemonProcess, version: Any) -> None:
    """A request without "jsonrpc", or with another value, is -32600 carrying the request's id; nothing runs."""
    request: dict[str, Any] = {"id": 4, "method": "ping"}
    if version is not None:
        request["jsonrpc"] = version
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request(request)
    assert reply["id"] == 4 and reply["error"]["code"] == -32600
    assert reply["error"]["data"]["kind"] == "invalid_request"


@pytest.mark.parametrize(
    "notification",
    [
        {"jsonrpc": "2.0", "method": "no_such_method"},
        {"jsonrpc": "2.0", "method": "read_state", "params": [1]},
        {"jsonrpc": "2.0", "method": "read_state", "params": {"workspace": "relative"}},
    ],
    ids=["unknown_method", "positional", "failing"],
)
def test_a_failing_notification_gets_no_reply(
    shared_daemon: DaemonProcess, notification: dict[str, Any]
) -> None:
    """A notification is never answered, not even with an error: the next reply is the next call's."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send(json.dumps(notification))
        assert conn.request({"jsonrpc": "2.0", "id": "after", "method": "ping"})["id"] == "after"


def test_a_nested_batch_is_one_invalid_element(shared_daemon: DaemonProcess) -> None:
    """A batch holding a batch answers that element -32600, in an array."""
    with RawConnection(shared_daemon.socket) as conn:
        reply = conn.request([[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]])
    assert [(r["id"], r["error"]["code"]) for r in reply] == [(None, -32600)]


def test_crlf_line_endings_are_accepted(shared_daemon: DaemonProcess) -> None:
    """NDJSON lines ended by \\r\\n (a Windows client, telnet) are answered like \\n ones."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send_raw(PING % b"1" + b"\r\n" + PING % b"2" + b"\r\n")
        assert [conn.recv_message()["result"] for _ in range(2)] == ["pong", "pong"]


def test_a_byte_order_mark_is_a_parse_error_and_the_connection_goes_on(shared_daemon: DaemonProcess) -> None:
    """A UTF-8 BOM before a message is not JSON: -32700 with id null, and the next line is served."""
    with RawConnection(shared_daemon.socket) as conn:
        conn.send_raw(b"\xef\xbb\xbf" + PING % b"1" + b"\n")
        reply = conn.recv_message()
        assert reply["id"] is None and reply["error"]["data"]["kind"] == "parse_error"
        assert conn.request({"jsonrpc": "2.0", "id": 2, "method": "ping"})["result"] == "pong"


@pytest.mark.parametrize("framing", ["ndjson", "lsp"])
def test_a_message_sent_in_pieces_is_answered_once_whole(shared_daemon: DaemonProcess, framing: str) -> None:
    """A message written a few bytes at a time (headers cut too) is answered once, when it is complete."""
    payload = PING % b"9"
    data = b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload) if framing == "lsp" else payload + b"\n"
    with RawConnection(shared_daemon.socket, framing) as conn:
        for start in range(0, len(data), 7):
            conn.send_raw(data[start : start + 7])
            time.sleep(0.002)  # separate writes, so the daemon reads them apart
        assert conn.recv_message() == {"jsonrpc": "2.0", "result": "pong", "id": 9}


def test_two_lsp_frames_in_one_write_are_both_answered(shared_daemon: DaemonProcess) -> None:
    """Two Content-Length frames in one write (no separator) get one reply each."""
    frames = b"".join(b"Content-Length: %d\r\n\r\n%s" % (len(PING % i), PING % i) for i in (b"1", b"2"))
    with RawConnection(shared_daemon.socket, "lsp") as conn:
        conn.send_raw(frames)
        assert sorted(conn.recv_message()["id"] for _ in range(2)) == [1, 2]
