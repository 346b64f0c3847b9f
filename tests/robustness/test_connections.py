"""Cheap denial of service: idle connections, the connection cap,
the open-file limit, and imports pointed at whole trees."""

from __future__ import annotations

import json
import os
import resource
import select
import socket
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from maka import AsyncClient
from maka.errors import TooManyConnections
from makad.service.import_source import MAX_DIR_ENTRIES
from tests.support import DaemonProcess, RawConnection, ping_ok

FIXTURES = Path(__file__).resolve().parents[1] / "core" / "fixtures" / "import"


def request(method: str, id_: Any = 1, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}


def test_past_the_cap_a_connection_gets_one_error_line_then_idle_ones_time_out(short_tmp: Path) -> None:
    """Cap 8: the 9th connection reads one too_many_connections error (id null) and EOF;
    the 8 idle ones are closed after the idle timeout, and a new client is then served."""
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_CONNECTIONS": "8", "MAKAD_IDLE_TIMEOUT_S": "1"})
    d.start()
    idle = [RawConnection(d.socket, timeout=30) for _ in range(8)]
    try:
        with RawConnection(d.socket, timeout=30) as refused:
            error = refused.recv_message()
            assert refused.at_eof()
        assert error["id"] is None and error["error"]["code"] == -32014
        assert error["error"]["data"] == {"kind": "too_many_connections", "limit": 8}
        for conn in idle:
            assert conn.at_eof(), "an idle connection outlived the idle timeout"
        assert ping_ok(d.socket)
        assert '"connection_refused"' in d.log_text()
    finally:
        for conn in idle:
            conn.close()
        d.stop()


def read_until_eof(conn: RawConnection) -> list[dict[str, Any]]:
    """Every message the daemon sends on ``conn`` until it closes it."""
    messages = []
    while True:
        try:
            messages.append(conn.recv_message())
        except EOFError:
            return messages


def test_a_refused_client_that_writes_at_once_still_reads_the_refusal(short_tmp: Path) -> None:
    """At the cap, 50 clients in turn each write a ping the moment they connect, and every
    one reads the too_many_connections line and then EOF (no reset, no broken pipe)."""
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_CONNECTIONS": "1"})
    d.start()
    try:
        with RawConnection(d.socket, timeout=30) as held:
            assert held.request(request("ping"))["result"] == "pong"
            for i in range(50):
                with RawConnection(d.socket, timeout=30) as refused:
                    refused.send(json.dumps(request("ping", i)))
                    messages = read_until_eof(refused)
                assert [m["error"]["data"] for m in messages] == [
                    {"kind": "too_many_connections", "limit": 1}
                ]
            assert held.request(request("ping", 2))["result"] == "pong"
    finally:
        d.stop()


def test_a_refused_client_that_keeps_writing_is_closed(short_tmp: Path) -> None:
    """At the cap, a client that reads the refusal and then writes a steady stream is
    closed by the daemon all the same (what it sends after the refusal is not waited on)."""
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_CONNECTIONS": "1"})
    d.start()
    try:
        with RawConnection(d.socket, timeout=30) as held:
            assert held.request(request("ping"))["result"] == "pong"
            with RawConnection(d.socket, timeout=30) as refused:
                assert refused.recv_message()["error"]["data"]["kind"] == "too_many_connections"
                line = json.dumps(request("ping")).encode() + b"\n"
                with pytest.raises((BrokenPipeError, ConnectionResetError)):
                    for _ in range(1_000_000):
                        refused.send_raw(line * 100)
            assert held.request(request("ping", 2))["result"] == "pong"
    finally:
        d.stop()


def test_the_python_clients_at_the_cap_raise_too_many_connections(short_tmp: Path) -> None:
    """At the cap, each of 20 calls of the Python client, and of 20 of its async client,
    raises TooManyConnections (limit 1), never a lost connection."""
    d = DaemonProcess(short_tmp, env={"MAKAD_MAX_CONNECTIONS": "1"})
    d.start()

    async def async_call() -> None:
        async with AsyncClient(str(d.socket), timeout=30) as client:
            await client.call("ping")

    try:
        with RawConnection(d.socket, timeout=30) as held:
            assert held.request(request("ping"))["result"] == "pong"
            for i in range(40):
                with pytest.raises(TooManyConnections) as refused:
                    if i % 2:
                        anyio.run(async_call)
                    else:
                        with d.client(timeout=30) as client:
                            client.call("ping")
                assert refused.value.data == {"kind": "too_many_connections", "limit": 1}
    finally:
        d.stop()


def test_a_subscriber_is_never_idle(short_tmp: Path) -> None:
    """With a 0.5 s idle timeout, a connection that follows a workspace stays open long
    after a silent one was closed, and still answers."""
    d = DaemonProcess(short_tmp, env={"MAKAD_IDLE_TIMEOUT_S": "0.5"})
    d.start()
    try:
        with RawConnection(d.socket, timeout=30) as sub:
            sub.request(request("subscribe", workspace=str(d.workspace)))
            with RawConnection(d.socket, timeout=30) as silent:
                assert silent.at_eof()
            with RawConnection(d.socket, timeout=30) as silent:
                assert silent.at_eof()
            assert sub.request(request("ping", 2))["result"] == "pong"
    finally:
        d.stop()


def connect_patiently(path: Path) -> RawConnection:
    """Connect, retrying while the listen backlog is full (EAGAIN) — a burst, not a refusal."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return RawConnection(path, timeout=30)
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_a_client_that_stops_reading_and_sending_is_closed_after_the_idle_timeout(short_tmp: Path) -> None:
    """A client that asked for more than its buffers hold and then neither reads nor
    sends is closed once idle (what it was owed is dropped), while it follows nothing."""
    d = DaemonProcess(short_tmp, env={"MAKAD_IDLE_TIMEOUT_S": "0.5"})
    d.start()
    try:
        with RawConnection(d.socket, timeout=30) as stalled:
            stalled.send_raw(
                b"".join(json.dumps(request("rpc.discover", i)).encode() + b"\n" for i in range(60))
            )
            # Wait (without reading) for the daemon to hang up on it.
            poller = select.poll()
            poller.register(stalled.sock, select.POLLRDHUP)
            assert poller.poll(30_000), "the stalled connection was never closed"
            replies = 0
            try:
                while True:
                    stalled.recv_message()
                    replies += 1
            except (EOFError, ConnectionResetError):
                pass
            assert replies < 60
        assert ping_ok(d.socket)
    finally:
        d.stop()


class LowNofileDaemon(DaemonProcess):
    """A daemon started with a soft open-file limit of 1024 (a common default)."""

    def command(self) -> list[str]:
        return ["sh", "-c", 'ulimit -Sn 1024 && exec "$@"', "sh", *super().command()]


def open_file_limits(pid: int) -> tuple[int, int]:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            soft, hard = line.split()[3:5]
            return int(soft), int(hard)
    raise AssertionError("no open-file limit")


def test_1100_idle_connections_do_not_lock_out_a_new_client(short_tmp: Path) -> None:
    """Started with a soft limit of 1024 descriptors, the daemon lifts it to the hard
    limit; with 1,100 idle connections open a new client is still served (no EMFILE
    lock-out), and so is each of the idle ones."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1400:
        pytest.skip(f"the hard open-file limit ({hard}) leaves no room for 1,100 connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    d = LowNofileDaemon(short_tmp)
    d.start()
    conns: list[RawConnection] = []
    try:
        assert d.proc is not None
        daemon_soft, daemon_hard = open_file_limits(d.proc.pid)
        assert daemon_soft == daemon_hard > 1024
        conns = [connect_patiently(d.socket) for _ in range(1100)]
        with d.client(timeout=30) as client:
            assert client.call("ping") == "pong"
            assert client.call("status")["connections"] >= 1101
        for conn in (conns[0], conns[549], conns[-1]):
            assert conn.request(request("ping"))["result"] == "pong"
    finally:
        for conn in conns:
            conn.close()
        d.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_45_imports_of_the_root_are_refused_at_once_and_the_daemon_stays_responsive(
    daemon: DaemonProcess,
) -> None:
    """45 concurrent import_memories {path: "/"}: each is too_large (more entries than
    a memory directory holds) without walking the tree; meanwhile another client's
    reads are answered, and afterwards a real memory directory still imports."""
    ws = str(daemon.workspace)
    answered: list[str] = []

    def reader() -> None:
        with daemon.client(timeout=60) as client:
            for _ in range(20):
                answered.append(client.call("read_state", {"workspace": ws})["status"])

    with RawConnection(daemon.socket, timeout=120) as conn:
        conn.send_raw(
            b"".join(
                json.dumps(request("import_memories", i, workspace=ws, path="/")).encode() + b"\n"
                for i in range(45)
            )
        )
        thread = threading.Thread(target=reader)
        thread.start()
        replies = [conn.recv_message() for _ in range(45)]
        thread.join()
    assert sorted(r["id"] for r in replies) == list(range(45))
    for reply in replies:
        assert reply["error"]["data"]["kind"] == "too_large", reply
        assert reply["error"]["data"]["limit"] == MAX_DIR_ENTRIES
    assert answered == ["ok"] * 20
    imported = daemon.call("import_memories", {"workspace": ws, "path": str(FIXTURES / "claude_code")})
    assert imported["imported"] and imported["errors"] == []


def test_imports_of_oversized_files_and_directories_are_refused_before_reading(
    daemon: DaemonProcess, short_tmp: Path
) -> None:
    """A 17 MiB (sparse) file, and a directory whose Markdown files add up past 16 MiB:
    too_large, and no proposal is queued."""
    ws = str(daemon.workspace)
    big = short_tmp / "big.md"
    with open(big, "wb") as handle:
        handle.truncate(17 * 1024 * 1024)
    folder = short_tmp / "memdir"
    folder.mkdir()
    (folder / "MEMORY.md").write_text("# Memory\n")
    for name in ("a.md", "b.md"):
        with open(folder / name, "wb") as handle:
            handle.truncate(9 * 1024 * 1024)
    with RawConnection(daemon.socket) as conn:
        for i, path in enumerate((big, folder)):
            reply = conn.request(request("import_memories", i, workspace=ws, path=str(path)))
            assert reply["error"]["data"]["kind"] == "too_large", reply
    assert not (daemon.workspace / "memory" / "PENDING.md").exists()
    assert os.path.exists(big)


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not hasattr(resource, "prlimit"), reason="needs prlimit (Linux)")
def test_out_of_descriptors_the_daemon_waits_quietly_and_serves_once_clients_leave(
    daemon: DaemonProcess,
) -> None:
    """The open-file limit cut under a running daemon and 80 connections piled up: every
    accept fails (EMFILE) while they stay, yet the daemon neither spins nor floods its log
    (a line a second at most, counting the failures), and once the clients leave it
    accepts and serves again on the same socket."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (64, 64))
    piled: list[socket.socket] = []
    try:
        for _ in range(80):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.connect(str(daemon.socket))  # the backlog takes it; accept fails
            piled.append(sock)
        daemon.wait_for_log("accept_failed")
        lines_before = daemon.log_text().count('"accept_failed"')
        cpu_before = cpu_seconds(pid)
        time.sleep(3)
        assert cpu_seconds(pid) - cpu_before < 1.0  # a busy loop would take about 3 s
        assert daemon.log_text().count('"accept_failed"') - lines_before <= 6  # not ~60
    finally:
        for sock in piled:
            sock.close()
    assert '"failures"' in daemon.log_text()
    state = daemon.call("read_state", {"workspace": w}, timeout=30)
    assert state["entryCount"] == 1
    daemon.call("add_entry", {"workspace": w, "title": "Style", "content": "4 spaces"})
    assert ping_ok(daemon.socket)
