"""Requests framed before a malformed frame in the same write are answered, in order,
before the error that closes the connection."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import DaemonProcess, RawConnection, daemon_in_tmp, ping_ok

CAP = 4096


@pytest.fixture(scope="module")
def capped_daemon() -> Iterator[DaemonProcess]:
    """A daemon whose message cap is small enough to pass in one write."""
    yield from daemon_in_tmp({"MAKAD_MAX_MESSAGE_BYTES": str(CAP)})


def _requests(workspace: Path) -> list[bytes]:
    """A ping answered in place and a read that goes to a worker thread."""
    return [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
        json.dumps(
            {"jsonrpc": "2.0", "id": 2, "method": "read_state", "params": {"workspace": str(workspace)}}
        ).encode(),
    ]


def _replies_until_eof(conn: RawConnection) -> list[Any]:
    replies: list[Any] = []
    while True:
        try:
            replies.append(conn.recv_message())
        except EOFError:
            return replies


def _lsp(payload: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n%s" % (len(payload), payload)


@pytest.mark.parametrize(
    "bad",
    [b"Content-Length: many\r\n\r\n{}", b"Content-Length: 40\n\n{}", b"Content-Length: 9999999\r\n\r\n"],
    ids=["not_a_number", "bare_newlines", "over_the_cap"],
)
def test_lsp_frames_before_a_bad_header_are_answered(
    capped_daemon: DaemonProcess, tmp_path: Path, bad: bytes
) -> None:
    """LSP: the valid frames written with a malformed header block get their replies, then the
    error (id null) comes last and the connection closes."""
    with RawConnection(capped_daemon.socket, "lsp") as conn:
        conn.send_raw(b"".join(_lsp(r) for r in _requests(tmp_path)) + bad)
        replies = _replies_until_eof(conn)
    assert sorted(r["id"] for r in replies[:2]) == [1, 2]
    assert all("result" in r for r in replies[:2])
    assert len(replies) == 3
    assert replies[2]["id"] is None and replies[2]["error"]["code"] == -32600
    assert replies[2]["error"]["data"]["kind"] == ("too_large" if b"9999999" in bad else "bad_frame")
    assert ping_ok(capped_daemon.socket)


@pytest.mark.parametrize("newline", [b"\n", b""], ids=["whole_line", "unfinished_line"])
def test_ndjson_lines_before_an_oversized_line_are_answered(
    capped_daemon: DaemonProcess, tmp_path: Path, newline: bytes
) -> None:
    """NDJSON: the lines written before a line over the cap get their replies, then too_large
    (id null) comes last and the connection closes."""
    oversized = b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"x":"' + b"a" * (2 * CAP) + b'"}}'
    with RawConnection(capped_daemon.socket) as conn:
        conn.send_raw(b"".join(r + b"\n" for r in _requests(tmp_path)) + oversized + newline)
        replies = _replies_until_eof(conn)
    assert sorted(r["id"] for r in replies[:2]) == [1, 2]
    assert all("result" in r for r in replies[:2])
    assert len(replies) == 3
    assert replies[2]["id"] is None and replies[2]["error"]["data"]["kind"] == "too_large"
    assert ping_ok(capped_daemon.socket)


def test_ndjson_bad_json_line_does_not_close(capped_daemon: DaemonProcess, tmp_path: Path) -> None:
    """NDJSON: a line that is not JSON between valid ones is a parse error for that line
    alone; the lines around it are answered and the connection stays open."""
    first, second = _requests(tmp_path)
    with RawConnection(capped_daemon.socket) as conn:
        conn.send_raw(first + b"\n{not json\n" + second + b"\n")
        replies = [conn.recv_message() for _ in range(3)]
        assert conn.request({"jsonrpc": "2.0", "id": 9, "method": "ping"})["result"] == "pong"
    assert sorted(str(r["id"]) for r in replies) == ["1", "2", "None"]
    assert next(r for r in replies if r["id"] is None)["error"]["code"] == -32700
