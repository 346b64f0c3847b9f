"""A client that fails the same way over and over (a loop retrying a stale id, broken
frames on connection after connection) costs the daemon's log a line a second for each
kind of failure, with how many there were, not a line each: an autostarted daemon's log
is rotated only when a daemon starts, so a line each would grow it without bound."""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.support import DaemonProcess, RawConnection

REQUESTS = 300
CONNECTIONS = 120


def log_events(d: DaemonProcess, event: str) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in d.log_text().splitlines() if line.startswith("{"))
    return [line for line in lines if line.get("event") == event]


def test_repeated_failing_requests_are_logged_once_a_second_with_their_count(daemon: DaemonProcess) -> None:
    """300 requests failing with the same kind are answered each, and logged as a few
    request_failed lines whose counts add up to no more than 300."""
    request = {
        "jsonrpc": "2.0",
        "method": "memory_history",
        "params": {"workspace": str(daemon.workspace), "id": "no-such-entry"},
    }
    with RawConnection(daemon.socket, timeout=120) as conn:
        conn.send_raw(b"".join(json.dumps({**request, "id": i}).encode() + b"\n" for i in range(REQUESTS)))
        replies = [conn.recv_message() for _ in range(REQUESTS)]
    assert all(r["error"]["data"]["kind"] == "not_found" for r in replies)
    lines = log_events(daemon, "request_failed")
    assert lines, "a failure is still logged"
    assert len(lines) < REQUESTS // 10
    assert lines[0]["method"] == "memory_history" and lines[0]["kind"] == "not_found"
    assert sum(line["times"] for line in lines) <= REQUESTS


def test_broken_frames_on_many_connections_are_logged_once_a_second(daemon: DaemonProcess) -> None:
    """120 connections each closed for a broken frame get their error line each, and the
    log has a few connection_closed_bad_frame lines, not one a connection."""
    for _ in range(CONNECTIONS):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(str(daemon.socket))
            sock.sendall(b"Content-Length: many\r\n\r\n")
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
            assert b'"bad_frame"' in reply
    lines = log_events(daemon, "connection_closed_bad_frame")
    assert lines, "a broken frame is still logged"
    assert len(lines) < CONNECTIONS // 4
    assert sum(line["times"] for line in lines) <= CONNECTIONS
