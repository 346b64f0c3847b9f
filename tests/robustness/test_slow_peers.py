"""Peers that stop reading: they hold up nobody but themselves ."""

from __future__ import annotations

import json
import socket
from typing import Any

from tests.support import DaemonProcess, RawConnection

# rpc.discover answers the whole OpenRPC document (tens of KiB): a few unread replies
# fill any socket buffer, so the daemon's writes to that peer block for good.
UNREAD_DISCOVERS = 60


def stalled_subscriber(daemon: DaemonProcess) -> RawConnection:
    """A connection with a tiny receive buffer that subscribes, then asks for far more
    than its buffers hold and never reads again."""
    conn = RawConnection.__new__(RawConnection)
    conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    conn.sock.settimeout(30)
    conn.sock.connect(str(daemon.socket))
    conn.framing = "ndjson"
    conn.buffer = b""
    reply = conn.request(
        {"jsonrpc": "2.0", "id": "sub", "method": "subscribe", "params": {"workspace": str(daemon.workspace)}}
    )
    assert reply["result"]["revision"] >= 0
    conn.send_raw(
        b"".join(
            json.dumps({"jsonrpc": "2.0", "id": f"d{i}", "method": "rpc.discover"}).encode() + b"\n"
            for i in range(UNREAD_DISCOVERS)
        )
    )
    return conn


def read_all(conn: RawConnection, replies: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read until ``replies`` replies have arrived: (replies by id, notifications in order)."""
    got: dict[str, Any] = {}
    notes: list[dict[str, Any]] = []
    while len(got) < replies:
        message = conn.recv_message()
        if "id" in message:
            got[message["id"]] = message
        else:
            notes.append(message)
    return got, notes


def test_a_subscriber_that_never_reads_blocks_no_writer(daemon: DaemonProcess) -> None:
    """With a subscriber stalled on a full socket, other clients' writes and reads of its
    workspace all complete; when it reads again it gets every reply, and notifications
    coalesced to the latest revision, never an older one after a newer one."""
    ws = str(daemon.workspace)
    stalled = stalled_subscriber(daemon)
    last_revision = 0
    # The client timeout only turns a hang (the old behaviour) into a failure.
    with daemon.client(timeout=20) as writer, daemon.client(timeout=20) as reader:
        for i in range(40):
            added = writer.call(
                "add_entry",
                {"workspace": ws, "title": f"T{i}", "content": f"written while a peer is stalled {i}"},
            )
            last_revision = added["revision"]
            state = reader.call("read_state", {"workspace": ws, "includeEntries": True})
            assert state["revision"] >= added["revision"]
        proposals = writer.call("list_proposals", {"workspace": ws})
        assert proposals["proposals"] == []
    replies, notes = read_all(stalled, UNREAD_DISCOVERS)
    stalled.close()
    assert all("result" in replies[f"d{i}"] for i in range(UNREAD_DISCOVERS))
    revisions = [n["params"]["revision"] for n in notes if n["method"] == "memory_changed"]
    assert revisions, notes
    assert revisions == sorted(set(revisions))
    assert revisions[-1] == last_revision
    assert len(revisions) < 40  # coalesced while it was not reading


def test_a_stalled_subscriber_is_not_idle_and_its_workspace_stays_writable(short_tmp: Any) -> None:
    """A stalled subscriber outlives the idle timeout (it follows a workspace), and
    writes keep completing the whole time."""
    # 1 s: long enough that the writer, between two calls, is never idle on a loaded machine.
    d = DaemonProcess(short_tmp, env={"MAKAD_IDLE_TIMEOUT_S": "1.0"})
    d.start()
    try:
        stalled = stalled_subscriber(d)
        with d.client(timeout=20) as writer:
            for i in range(10):
                writer.call(
                    "add_entry",
                    {"workspace": str(d.workspace), "title": f"T{i}", "content": f"still writable {i}"},
                )
                writer.call("ping")
            # A connection that only connects is closed once it has been idle 1 s;
            # by then the stalled subscriber has been silent longer than that.
            with RawConnection(d.socket, timeout=20) as probe:
                assert probe.at_eof(), "an idle connection should have been closed"
        replies, _ = read_all(stalled, UNREAD_DISCOVERS)
        assert len(replies) == UNREAD_DISCOVERS
        stalled.close()
    finally:
        d.stop()


def test_notification_precedes_the_reply_of_the_write_that_caused_it(daemon: DaemonProcess) -> None:
    """On one connection, a write's notification arrives before the write's reply,
    carrying at least the revision the reply reports."""
    ws = str(daemon.workspace)
    with RawConnection(daemon.socket) as conn:
        conn.request({"jsonrpc": "2.0", "id": 1, "method": "subscribe", "params": {"workspace": ws}})
        for i in range(5):
            conn.send(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": f"a{i}",
                        "method": "add_entry",
                        "params": {"workspace": ws, "title": f"T{i}", "content": f"ordered {i}"},
                    }
                )
            )
            seen = 0
            while True:
                message = conn.recv_message()
                if "id" not in message:
                    seen = max(seen, message["params"]["revision"])
                    continue
                assert message["id"] == f"a{i}"
                assert seen >= message["result"]["revision"]
                break


# Below one reply: requests with large replies are built only while their connection
# has little unread, so only a cap below one reply is ever passed by a single client.
UNSENT_CAP = 512 * 1024
BIG_TEXT = "every word of a long transcript " * 3_000  # ~96 KB an event


def big_reads(d: DaemonProcess, count: int) -> bytes:
    """``count`` framed read_events requests (ids 0…count-1) for a session of ten ~96 KB
    events, made in ``d``'s workspace: each reply is about a megabyte."""
    ws = str(d.workspace)
    session = d.call("open_session", {"workspace": ws})["sessionId"]
    events = [{"type": "user_message", "text": f"{BIG_TEXT} {n}"} for n in range(10)]
    d.call("append_events", {"workspace": ws, "sessionId": session, "events": events})
    ask = {"jsonrpc": "2.0", "method": "read_events", "params": {"workspace": ws, "sessionId": session}}
    return b"".join(json.dumps({**ask, "id": n}).encode() + b"\n" for n in range(count))


def test_a_client_that_never_reads_big_replies_is_closed_once_they_take_too_much(short_tmp: Any) -> None:
    """Replies of about 1 MB asked for again and again by a client that never reads them
    stay queued in the daemon until they pass ``MAKAD_MAX_UNSENT_REPLY_BYTES`` and the
    socket has taken none for a while: then that connection is closed (its replies
    dropped) and logged; a client asking the same and reading every reply gets them all,
    and pings are answered throughout."""
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_UNSENT_REPLY_BYTES": str(UNSENT_CAP)})
    d.start()
    try:
        requests = big_reads(d, 40)

        stalled = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
        stalled.connect(str(d.socket))
        stalled.sendall(requests)
        d.wait_for_log("connection_not_reading_closed", timeout=60)
        assert d.call("ping") == "pong"

        with RawConnection(d.socket, timeout=60) as reader:
            reader.send_raw(requests)
            replies = [reader.recv_message() for _ in range(40)]
        assert sorted(r["id"] for r in replies) == list(range(40))
        assert all(len(r["result"]["events"]) == 10 for r in replies)
        assert d.log_text().count('"connection_not_reading_closed"') == 1
        stalled.close()
    finally:
        d.stop()


def test_requests_with_large_replies_run_a_few_at_a_time_server_wide(short_tmp: Any) -> None:
    """Many connections each pipelining requests for about a megabyte of events: only a few
    run at once across the daemon (the rest wait, logged), every reply still arrives whole
    and in full, and pings are answered meanwhile."""
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_REPLY_BYTES": str(128 * 1024 * 1024)})  # 2 slots
    d.start()
    try:
        requests = big_reads(d, 20)
        assert d.call("status")["limits"]["maxReplyBytes"] == 128 * 1024 * 1024
        readers = [RawConnection(d.socket, timeout=60) for _ in range(4)]
        try:
            for reader in readers:
                reader.send_raw(requests)
            assert d.call("ping") == "pong"
            for reader in readers:
                replies = [reader.recv_message() for _ in range(20)]
                assert sorted(r["id"] for r in replies) == list(range(20))
                assert all(len(r["result"]["events"]) == 10 for r in replies)
        finally:
            for reader in readers:
                reader.close()
        assert '"large_replies_waiting"' in d.log_text()
    finally:
        d.stop()
