"""Another local user (``nobody``) as a client of our daemon: by default it cannot reach
the socket at all; where the user has opened the socket up, the daemon still serves it
nothing (SO_PEERCRED), and a flood of its connections costs a log line a second, not one
a connection."""

from __future__ import annotations

import errno
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.impostor import NOBODY, interpreter, needs_nobody
from tests.support import DaemonProcess, ping_ok

# Run as nobody: connect to the socket ``argv[2]`` times, ask each connection for the
# daemon's status, and print how many connects failed (and why) and how many bytes came back.
CLIENT = r"""
import errno, socket, sys
path, times = sys.argv[1], int(sys.argv[2])
failed, why, received = 0, "", 0
for _ in range(times):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    try:
        sock.connect(path)
    except OSError as exc:
        failed, why = failed + 1, errno.errorcode.get(exc.errno, "")
        sock.close()
        continue
    try:
        sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += len(chunk)
    except OSError:
        pass
    sock.close()
print(failed, why or "-", received, flush=True)
"""

CONNECTIONS = 200


def as_nobody(socket: Path, times: int) -> tuple[int, str, int]:
    """Connect as nobody ``times`` times: (connects that failed, the errno's name, bytes
    received on the others)."""
    assert NOBODY is not None
    done = subprocess.run(
        [interpreter(), "-I", "-c", CLIENT, str(socket), str(times)],
        user=NOBODY.pw_uid,
        group=NOBODY.pw_gid,
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
        check=True,
    )
    failed, why, received = done.stdout.split()
    return int(failed), why, int(received)


def open_up(d: DaemonProcess) -> None:
    """What a user who shares the socket on purpose (or by mistake) does: every folder
    above it searchable by others, the socket writable by all."""
    for folder in (d.root, *d.root.parents):
        if folder != Path("/"):
            os.chmod(folder, os.stat(folder).st_mode | 0o011)
    os.chmod(d.socket, 0o666)


@needs_nobody
def test_another_user_cannot_reach_the_socket(daemon: DaemonProcess) -> None:
    """As made (a 0600 socket in a 0700 folder), nobody's connect fails with EACCES and the
    daemon logs nothing about it."""
    failed, why, received = as_nobody(daemon.socket, 3)
    assert (failed, why, received) == (3, errno.errorcode[errno.EACCES], 0)
    assert ping_ok(daemon.socket)
    assert '"connection_refused"' not in daemon.log_text()


@needs_nobody
def test_another_users_connections_are_served_nothing_and_logged_once_a_second(short_tmp: Path) -> None:
    """With the socket opened up to all, nobody's connections (each sending a request) are
    closed with not a byte written to them, our own pings answered meanwhile; the refusals
    are logged at most once a second with their count (a line per connection let another
    user fill the log)."""
    d = DaemonProcess(short_tmp)
    d.start()
    try:
        open_up(d)
        started = time.monotonic()
        failed, _why, received = as_nobody(d.socket, CONNECTIONS)
        elapsed = time.monotonic() - started
        assert (failed, received) == (0, 0)
        assert ping_ok(d.socket)
        lines = [line for line in d.log_text().splitlines() if '"peer uid differs"' in line]
        assert lines and f'"uid": {NOBODY.pw_uid}' in lines[0]  # type: ignore[union-attr]
        assert len(lines) <= elapsed + 2, f"{len(lines)} lines in {elapsed:.1f} s"
    finally:
        d.stop()


# Run as nobody: connect to the socket ``argv[2]`` (and close at once) until ``argv[3]``
# exists, from ``argv[4]`` processes; print how many connects there were.
FLOOD = r"""
import os, socket, sys
path, stop, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
for _ in range(workers - 1):
    if os.fork() == 0:
        break
count = 0
while not os.path.exists(stop):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.setblocking(False)
    try:
        sock.connect(path)
        count += 1
    except OSError:
        pass
    sock.close()
print(count, flush=True)
"""

FLOOD_WORKERS = 2
PINGS_DURING_FLOOD = 20


@pytest.mark.slow
@needs_nobody
def test_a_flood_of_another_users_connects_fails_none_of_our_calls(short_tmp: Path) -> None:
    """With the socket opened up, another user connecting (and hanging up) as fast as two
    processes can keeps the daemon's listen queue full; our clients' calls made meanwhile
    wait their turn and are all answered, none fails with EAGAIN."""
    assert NOBODY is not None
    d = DaemonProcess(short_tmp)
    d.start()
    stop = short_tmp / "stop-flood"
    flood = None
    try:
        open_up(d)
        flood = subprocess.Popen(
            [interpreter(), "-I", "-c", FLOOD, str(d.socket), str(stop), str(FLOOD_WORKERS)],
            user=NOBODY.pw_uid,
            group=NOBODY.pw_gid,
            stdout=subprocess.PIPE,
            text=True,
            cwd="/",
        )
        d.wait_for_log("connection_refused")
        answered = []
        for _ in range(PINGS_DURING_FLOOD):
            with d.client(timeout=60) as client:
                answered.append(client.call("ping"))
        assert answered == ["pong"] * PINGS_DURING_FLOOD
    finally:
        stop.touch()
        if flood is not None:
            flood.communicate(timeout=60)
        d.stop()
