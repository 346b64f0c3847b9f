"""Stopping on purpose: the daemon announces it, long-lived clients do not start it again,
and `maka stop` waits for the exit (detachment itself: test_autostart.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from maka import Client
from maka.autostart import process_gone
from maka.errors import DaemonUnavailable
from tests.cli.mcp_session import mcp_host
from tests.client.autostart_support import AutostartHome, wait_gone
from tests.support import DaemonProcess, RawConnection

MAKA = [sys.executable, "-m", "maka.cli"]
WATCH_END_TIMEOUT_S = 30.0


def maka(home: AutostartHome, *args: str, **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MAKA, "--socket", str(home.socket), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


def started_daemon(home: AutostartHome) -> int:
    """Autostart one with `maka status`; its pid."""
    done = maka(home, "--json", "status")
    assert done.returncode == 0, done.stderr
    return int(str(home.status()["pid"]))


def watch(home: AutostartHome) -> subprocess.Popen[str]:
    """`maka watch` (autostart allowed), once it says it is watching."""
    proc = subprocess.Popen(
        [*MAKA, "--socket", str(home.socket), "watch", "-w", str(home.root / "ws")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("watching "), proc.stderr.read()
    return proc


def test_every_connection_hears_the_daemon_stop_on_purpose(daemon: DaemonProcess) -> None:
    """shutdown on one connection: every other open connection, subscribed or not, gets
    daemon_stopping {reason: shutdown} before the daemon closes it."""
    with RawConnection(daemon.socket) as idle, RawConnection(daemon.socket, framing="lsp") as lsp:
        assert idle.request({"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == "pong"
        assert lsp.request({"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == "pong"
        daemon.call("shutdown")
        for conn in (idle, lsp):
            note = conn.recv_message()
            assert note == {"jsonrpc": "2.0", "method": "daemon_stopping", "params": {"reason": "shutdown"}}
            assert conn.at_eof()
    assert daemon.proc is not None and daemon.proc.wait(timeout=20) == 0


def test_sigterm_is_announced_as_a_signal(daemon: DaemonProcess) -> None:
    """SIGTERM (systemctl stop) is an orderly stop too: reason signal."""
    with RawConnection(daemon.socket) as conn:
        assert conn.request({"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == "pong"
        assert daemon.stop() == 0
        assert conn.recv_message()["params"] == {"reason": "signal"}


def test_watch_ends_and_the_daemon_stays_down(autostart_home: AutostartHome) -> None:
    """maka watch running (autostart allowed) + maka stop: the watch reports the stop and
    exits 0, no daemon is started again, and the socket stays silent."""
    pid = started_daemon(autostart_home)
    proc = watch(autostart_home)
    stopped = maka(autostart_home, "stop")
    assert (stopped.returncode, stopped.stdout.strip()) == (0, f"makad (pid {pid}) stopped"), stopped.stderr
    assert process_gone(pid)
    out, err = proc.communicate(timeout=WATCH_END_TIMEOUT_S)
    assert proc.returncode == 0, err
    assert "daemon_stopping    makad is stopping (shutdown)" in out
    assert "makad was stopped (shutdown); watch ends" in err
    assert autostart_home.log.read_text().count("listening on") == 1  # nobody restarted it
    assert not autostart_home.running() and not autostart_home.socket.exists()


def test_a_crashed_daemon_is_still_restarted_by_its_watch(autostart_home: AutostartHome) -> None:
    """The other side of the rule: a daemon that vanished without announcing it (killed)
    is started again by the client's reconnect, and the watch carries on."""
    pid = started_daemon(autostart_home)
    proc = watch(autostart_home)
    try:
        os.kill(pid, 9)
        wait_gone(pid)
        deadline = time.monotonic() + WATCH_END_TIMEOUT_S
        while autostart_home.log.read_text().count("listening on") < 2:
            assert time.monotonic() < deadline, "the watch did not start a daemon again"
            time.sleep(0.05)
        assert autostart_home.running() and proc.poll() is None
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_library_client_does_not_restart_a_stopped_daemon(autostart_home: AutostartHome) -> None:
    """Client(autostart=True) that saw daemon_stopping refuses to start one, says why, and
    connects again by itself once a daemon answers."""
    with Client(str(autostart_home.socket), autostart=True) as client:
        pid = int(client.call("status")["pid"])
        with Client(str(autostart_home.socket)) as other:
            other.call("shutdown")
        wait_gone(pid)
        with pytest.raises(DaemonUnavailable, match=r"stopped on purpose, reason shutdown,"):
            client.call("ping")
        assert client.daemon_stopped == "shutdown"
        assert not autostart_home.running()
        assert started_daemon(autostart_home) != pid  # a new client's first connect starts one
        assert client.call("ping") == "pong" and client.daemon_stopped is None


def test_a_daemon_that_lost_its_socket_file_is_started_again_by_its_client(
    autostart_home: AutostartHome,
) -> None:
    """The daemon's socket file deleted (its runtime folder cleaned at logout): the daemon
    stops (daemon_stopping, reason socket_lost), which is no stop on purpose, so a
    Client(autostart=True) starts a new daemon at its next call."""
    with Client(str(autostart_home.socket), autostart=True) as client:
        pid = int(client.call("status")["pid"])
        autostart_home.socket.unlink()
        wait_gone(pid)
        assert client.call("ping") == "pong"
        assert client.daemon_stopped is None
        assert int(client.call("status")["pid"]) != pid


@pytest.mark.anyio
async def test_mcp_bridge_does_not_restart_a_stopped_daemon(autostart_home: AutostartHome) -> None:
    """maka mcp autostarted the daemon; after maka stop its tools say the daemon was stopped
    on purpose and how to start it, and nothing is started."""
    ws = autostart_home.root / "ws"
    async with mcp_host(autostart_home.socket, workspace=ws) as h:
        is_error, text = await h.tool("memory_list")
        assert not is_error, text
        pid = int(str(autostart_home.status()["pid"]))
        stopped = maka(autostart_home, "stop")
        assert stopped.returncode == 0, stopped.stderr
        is_error, text = await h.tool("memory_list")
        assert is_error and text.startswith("daemon_unavailable"), text
        assert "stopped on purpose" in text and "maka" in text
    assert process_gone(pid) and not autostart_home.running()
    assert autostart_home.log.read_text().count("listening on") == 1


def test_stop_with_nothing_running_starts_nothing(autostart_home: AutostartHome) -> None:
    """maka stop when no daemon runs: says so, exits 0, and starts none."""
    done = maka(autostart_home, "stop")
    assert done.returncode == 0 and "not running" in done.stdout
    assert not autostart_home.socket.exists() and not autostart_home.log.exists()
