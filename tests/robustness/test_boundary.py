"""No exception in one request or connection ends the daemon (the server's
half): an unencodable reply is -32603 on that request, an exception outside any
request closes that connection alone; everyone goes on."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from tests.support import DaemonProcess, RawConnection, ping_ok


def test_an_unencodable_reply_is_an_internal_error_and_nothing_else(short_tmp: Path) -> None:
    """With ``status`` forced to answer a lone surrogate: that request gets -32603 with
    data.kind and a ref found in the log; the same connection, a batch and another
    connection keep being served; SIGTERM still exits 0."""
    d = DaemonProcess(short_tmp, env={"MAKAD_FAULT_POINT": "unencodable_reply"})
    d.start()
    try:
        with RawConnection(d.socket) as conn, RawConnection(d.socket) as other:
            reply = conn.request({"jsonrpc": "2.0", "id": 7, "method": "status"})
            assert reply["id"] == 7 and reply["error"]["code"] == -32603
            assert reply["error"]["data"]["kind"] == "internal"
            ref = reply["error"]["data"]["ref"]
            assert re.fullmatch(r"[0-9a-f]{12}", ref)
            assert conn.request({"jsonrpc": "2.0", "id": 8, "method": "ping"})["result"] == "pong"
            batch = conn.request(
                [
                    {"jsonrpc": "2.0", "id": 1, "method": "status"},
                    {"jsonrpc": "2.0", "id": 2, "method": "ping"},
                ]
            )
            assert [r.get("result") for r in batch] == [None, "pong"]
            assert batch[0]["error"]["data"]["kind"] == "internal"
            assert other.request({"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == "pong"
        assert d.proc is not None and d.proc.poll() is None
        assert ref in d.log_text()
        with RawConnection(d.socket, "lsp") as lsp:
            framed = lsp.request({"jsonrpc": "2.0", "id": "l", "method": "status"})
            assert framed["error"]["data"]["kind"] == "internal"
    finally:
        code = d.stop()
    assert code == 0


def test_an_exception_outside_any_request_ends_that_connection_only(short_tmp: Path) -> None:
    """With a connection's reader forced to fail outside any request (fault point
    ``connection_crash``): that connection alone is closed and logged with a ref; a
    subscriber on another connection keeps its notifications, new connections are
    served, the same fault a second time changes nothing, and SIGTERM still exits 0."""
    d = DaemonProcess(short_tmp, env={"MAKAD_FAULT_POINT": "connection_crash"})
    d.start()
    ws = str(d.workspace)
    try:
        with RawConnection(d.socket) as subscriber:
            subscriber.request(
                {"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"workspace": ws}}
            )
            for attempt in range(2):
                doomed = RawConnection(d.socket)
                doomed.request({"jsonrpc": "2.0", "id": 1, "method": "ping"})
                doomed.send_raw(
                    b'{"jsonrpc":"2.0","id":2,"method":"ping","params":"crash-this-connection"}\n'
                )
                doomed.sock.settimeout(10)
                assert doomed.sock.recv(65536) == b"", "the crashed connection should be closed"
                doomed.close()
                with d.client() as writer:
                    writer.call(
                        "add_entry", {"workspace": ws, "title": f"T{attempt}", "content": f"after {attempt}"}
                    )
                note = subscriber.recv_message()
                assert note["method"] == "memory_changed"
                assert subscriber.request({"jsonrpc": "2.0", "id": 3, "method": "ping"})["result"] == "pong"
        assert ping_ok(d.socket)
        assert d.proc is not None and d.proc.poll() is None
        crashes = [line for line in d.log_text().splitlines() if '"connection_crashed"' in line]
        assert len(crashes) == 2 and all(re.search(r'"ref": "[0-9a-f]{12}"', line) for line in crashes)
    finally:
        code = d.stop()
    assert code == 0


def test_a_socket_path_in_a_legacy_encoding_does_not_kill_the_daemon(short_tmp: Path) -> None:
    """A socket in a directory whose name is not UTF-8 (``status`` echoes the path — this
    ended makad with exit 1): the call is answered, as a result or as -32603, and the
    daemon goes on serving."""
    root = os.fsencode(short_tmp) + b"/s\xff"
    os.mkdir(root, 0o700)
    sock_path = root + b"/s.sock"
    proc = subprocess.Popen(
        [
            os.fsencode(sys.executable),
            b"-m",
            b"makad",
            b"--socket",
            sock_path,
            b"--data-dir",
            os.fsencode(short_tmp) + b"/data",
            b"--log-format",
            b"json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        assert b"listening on" in proc.stdout.readline()
        for _ in range(2):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(20)
            sock.connect(sock_path)
            with sock:
                sock.sendall(
                    b'{"jsonrpc":"2.0","id":1,"method":"status"}\n{"jsonrpc":"2.0","id":2,"method":"ping"}\n'
                )
                data = b""
                while data.count(b"\n") < 2:
                    chunk = sock.recv(65536)
                    assert chunk, "the daemon closed the connection"
                    data += chunk
            status, pong = (json.loads(line) for line in data.splitlines())
            assert "result" in status or status["error"]["code"] == -32603
            assert pong["result"] == "pong"
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        if proc.stdout:
            proc.stdout.close()


def test_subscribers_that_vanish_mid_write_disturb_nobody(daemon: DaemonProcess) -> None:
    """Subscribers that close while their write and its notification are on the way
    (close hooks run with output queued) leave the daemon serving, nothing crashed."""
    ws = str(daemon.workspace)
    for i in range(10):
        conn = RawConnection(daemon.socket)
        conn.request({"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"workspace": ws}})
        conn.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "add_entry",
                    "params": {
                        "workspace": ws,
                        "title": f"T{i}",
                        "content": f"written as its caller vanished {i}",
                    },
                }
            )
        )
        conn.close()
    with daemon.client() as client:
        state = client.call("read_state", {"workspace": ws, "includeEntries": True})
    assert state["status"] == "ok"
    assert ping_ok(daemon.socket)
    assert daemon.proc is not None and daemon.proc.poll() is None
    log = daemon.log_text()
    assert '"connection_crashed"' not in log and '"request_crashed"' not in log
