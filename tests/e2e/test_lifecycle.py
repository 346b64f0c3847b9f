"""Socket lifecycle: single instance, stale sockets, signals, modes, systemd activation."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from maka import Client
from maka.errors import DaemonUnavailable, RemoteError
from tests.support import DaemonProcess, RawConnection, ping_ok, wait_listening


def test_socket_and_dirs_are_private(daemon: DaemonProcess) -> None:
    """The socket is mode 0600 and the data directory 0700."""
    assert stat.S_IMODE(daemon.socket.stat().st_mode) == 0o600
    assert stat.S_IMODE(daemon.data_dir.stat().st_mode) == 0o700


def test_second_instance_is_refused(daemon: DaemonProcess) -> None:
    """A second makad on the same socket exits non-zero naming the running pid; the first serves on."""
    second = subprocess.run(daemon.command(), capture_output=True, text=True, timeout=20)
    assert second.returncode != 0
    assert daemon.proc is not None
    assert f"pid {daemon.proc.pid}" in second.stderr
    assert ping_ok(daemon.socket)


def test_a_second_daemon_on_the_same_data_directory_is_refused(daemon: DaemonProcess) -> None:
    """A makad on another socket (another MAKAD_SOCKET or XDG_RUNTIME_DIR) but the same
    data directory exits 1 naming the running pid and the data directory, binds nothing,
    and the first serves on; once the first is stopped, it starts."""
    other = daemon.root / "other.sock"
    command = [*daemon.command()]
    command[command.index("--socket") + 1] = str(other)
    second = subprocess.run(command, capture_output=True, text=True, timeout=20)
    assert second.returncode == 1 and daemon.proc is not None
    assert f"pid {daemon.proc.pid}" in second.stderr and str(daemon.data_dir) in second.stderr
    assert not other.exists() and ping_ok(daemon.socket)
    assert daemon.stop() == 0
    later = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_listening(later)
        assert ping_ok(other)
    finally:
        later.terminate()
        assert later.wait(timeout=15) == 0
        assert later.stdout is not None
        later.stdout.close()


def test_a_second_daemon_on_the_same_data_directory_is_told_the_first_ones_socket(
    daemon: DaemonProcess,
) -> None:
    """The refusal of a second makad on the data directory names the socket the first one
    serves and the commands that reach and stop it there."""
    command = [*daemon.command()]
    command[command.index("--socket") + 1] = str(daemon.root / "other.sock")
    second = subprocess.run(command, capture_output=True, text=True, timeout=20)
    assert second.returncode == 1
    assert f"on {daemon.socket}" in second.stderr
    assert f"maka --socket {daemon.socket} stop" in second.stderr
    assert f"MAKAD_SOCKET={daemon.socket}" in second.stderr
    assert ping_ok(daemon.socket)


def test_stale_socket_is_recovered(short_tmp: Path) -> None:
    """A socket file left by a kill -9'd daemon does not stop the next one."""
    first = DaemonProcess(short_tmp)
    first.start()
    first.kill9()
    assert first.socket.exists()
    second = DaemonProcess(short_tmp)
    second.start()
    try:
        assert ping_ok(second.socket)
    finally:
        second.stop()


def test_sigterm_with_client_connected_exits_zero(daemon: DaemonProcess) -> None:
    """SIGTERM while a client is connected stops the daemon with exit status 0."""
    with RawConnection(daemon.socket) as conn:
        assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 1})["result"] == "pong"
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(timeout=15) == 0
    assert not daemon.socket.exists()


def test_sighup_stops_the_daemon_as_sigterm_does(daemon: DaemonProcess) -> None:
    """SIGHUP (the terminal makad runs in closed) stops it cleanly, as SIGTERM does: exit
    status 0, its socket file removed, memory as written, and a new daemon serves it."""
    w = str(daemon.workspace)
    daemon.call("add_entry", {"workspace": w, "title": "Build", "content": "use make"})
    memory = (daemon.workspace / "memory" / "MEMORY.md").read_bytes()
    with RawConnection(daemon.socket) as conn:
        assert conn.request({"jsonrpc": "2.0", "method": "ping", "id": 1})["result"] == "pong"
        assert daemon.proc is not None
        daemon.proc.send_signal(signal.SIGHUP)
        assert daemon.proc.wait(timeout=15) == 0
    assert not daemon.socket.exists()
    assert '"SIGHUP"' in daemon.log_text() and '"stopped"' in daemon.log_text()
    assert (daemon.workspace / "memory" / "MEMORY.md").read_bytes() == memory
    daemon.restart()
    assert daemon.call("read_state", {"workspace": w})["entryCount"] == 1


@pytest.mark.parametrize("broken", ["stdout", "stderr", "both"])
def test_output_nobody_reads_does_not_stop_the_daemon(short_tmp: Path, broken: str) -> None:
    """stdout or stderr a pipe whose reader is gone (`makad | head -1`, a launcher that
    exited, a log pipe killed): the daemon starts, serves, logs into the void, and still
    exits 0 on SIGTERM, instead of dying of EPIPE at its first line."""
    sock = short_tmp / "s.sock"
    read_end, write_end = os.pipe()
    os.close(read_end)
    live = subprocess.PIPE
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "makad",
            "--socket",
            str(sock),
            "--data-dir",
            str(short_tmp / "d"),
            "--log-format",
            "json",
        ],
        stdout=write_end if broken in ("stdout", "both") else live,
        stderr=write_end if broken in ("stderr", "both") else live,
        text=True,
    )
    os.close(write_end)
    try:
        # No "listening on" line to wait for where stdout is the broken pipe.
        _serves_and_logs(proc, sock, short_tmp / "ws")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=20)


def _serves_and_logs(proc: subprocess.Popen[Any], sock: Path, ws: Path) -> None:
    """Wait until the daemon accepts on ``sock``, then write, fail (a failure is logged)
    and read through it."""
    deadline = time.monotonic() + 20
    while True:
        assert proc.poll() is None, f"makad exited with {proc.returncode}"
        assert time.monotonic() < deadline, "makad did not answer"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            if probe.connect_ex(str(sock)) == 0:
                break
        time.sleep(0.05)
    ws.mkdir()
    with Client(str(sock), timeout=30) as client:
        assert client.call("ping") == "pong"
        client.call("add_entry", {"workspace": str(ws), "title": "Build", "content": "use make"})
        with pytest.raises(RemoteError):
            client.call("read_state", {"workspace": "relative"})  # a failure is logged
        assert client.call("read_state", {"workspace": str(ws)})["entryCount"] == 1


@pytest.mark.parametrize("closed", ["0", "1", "2"])
def test_a_daemon_started_with_a_standard_stream_closed_serves(short_tmp: Path, closed: str) -> None:
    """makad started with stdin, stdout or stderr closed (`makad 2>&-`): it serves, and
    the first file it opens does not take that descriptor's number (a log line would then
    land in a lock file or a ledger): its lock files hold its pid (the data directory's,
    its socket too) and nothing else."""
    sock = short_tmp / "s.sock"
    data = short_tmp / "d"
    command = [sys.executable, "-m", "makad", "--socket", str(sock), "--data-dir", str(data)]
    proc = subprocess.Popen(
        ["sh", "-c", f'exec "$@" {closed}>&-', "sh", *command],
        stdout=subprocess.DEVNULL if closed != "1" else None,
        stderr=subprocess.DEVNULL if closed != "2" else None,
    )
    try:
        _serves_and_logs(proc, sock, short_tmp / "ws")
        assert (short_tmp / "s.sock.lock").read_text() == str(proc.pid)
        assert (data / "makad.lock").read_text() == f"{proc.pid}\n{sock}"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)


def test_shutdown_method_exits_zero(daemon: DaemonProcess) -> None:
    """The shutdown method answers, then the daemon exits 0."""
    assert daemon.call("shutdown") == {"stopping": True}
    assert daemon.proc is not None
    assert daemon.proc.wait(timeout=15) == 0


def test_too_long_socket_path_is_a_clear_error(short_tmp: Path) -> None:
    """A socket path over the AF_UNIX limit fails before bind with a clear message."""
    long_path = short_tmp / ("x" * 120) / "s.sock"
    result = subprocess.run(
        [sys.executable, "-m", "makad", "--socket", str(long_path), "--data-dir", str(short_tmp / "d")],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 1
    assert "AF_UNIX" in result.stderr and "shorter" in result.stderr


def test_a_default_socket_path_too_long_says_which_setting_to_shorten(short_tmp: Path) -> None:
    """No --socket, and an XDG_RUNTIME_DIR deep enough that the default socket path is over
    the AF_UNIX limit: makad exits 1 before making anything there, naming the path's
    length and every way to choose it (--socket, MAKAD_SOCKET, XDG_RUNTIME_DIR)."""
    runtime = short_tmp / ("r" * 100)
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "MAKAD_SOCKET"}
    result = subprocess.run(
        [sys.executable, "-m", "makad", "--data-dir", str(short_tmp / "d")],
        capture_output=True,
        text=True,
        timeout=20,
        env={**env, "XDG_RUNTIME_DIR": str(runtime)},
    )
    assert result.returncode == 1
    length = len(os.fsencode(runtime / "maka" / "makad.sock"))
    assert f"{length} bytes" in result.stderr and "AF_UNIX" in result.stderr
    for setting in ("--socket", "MAKAD_SOCKET", "XDG_RUNTIME_DIR"):
        assert setting in result.stderr, setting
    assert not (runtime / "maka").exists()


def test_a_regular_file_at_the_socket_path_is_not_replaced(short_tmp: Path) -> None:
    """makad refuses to delete a non-socket file sitting at its socket path."""
    target = short_tmp / "s.sock"
    target.write_text("precious")
    result = subprocess.run(
        [sys.executable, "-m", "makad", "--socket", str(target), "--data-dir", str(short_tmp / "d")],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 1
    assert target.read_text() == "precious"


def test_version_flag() -> None:
    """makad --version prints the version."""
    result = subprocess.run(
        [sys.executable, "-m", "makad", "--version"], capture_output=True, text=True, timeout=20
    )
    assert result.returncode == 0 and result.stdout.startswith("makad ")


def test_environment_fallbacks(short_tmp: Path) -> None:
    """MAKAD_SOCKET and MAKAD_DATA_DIR are used when no flags are given."""
    env = {
        **os.environ,
        "MAKAD_SOCKET": str(short_tmp / "env.sock"),
        "MAKAD_DATA_DIR": str(short_tmp / "envdata"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "makad"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        wait_listening(proc)
        with Client(str(short_tmp / "env.sock")) as client:
            status = client.call("status")
        assert status["dataDir"] == str(short_tmp / "envdata")
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0
        assert proc.stdout is not None
        proc.stdout.close()


def test_socket_activation(short_tmp: Path) -> None:
    """A pre-bound socket handed over through LISTEN_FDS/LISTEN_PID is served."""
    path = short_tmp / "act.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(16)
    fd = listener.fileno()

    def as_fd3() -> None:
        os.dup2(fd, 3)
        os.set_inheritable(3, True)

    env = {**os.environ, "LISTEN_FDS": "1"}
    script = 'LISTEN_PID=$$ exec "$0" -m makad --data-dir "$1" --socket "$2"'
    proc = subprocess.Popen(
        ["sh", "-c", script, sys.executable, str(short_tmp / "d"), str(short_tmp / "unused.sock")],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        preexec_fn=as_fd3,
        pass_fds=(fd, 3),
    )
    listener.close()
    try:
        line = wait_listening(proc)
        assert "systemd" in line and str(path) in line
        assert ping_ok(path)
        assert not (short_tmp / "unused.sock").exists()
        with Client(str(path)) as client:
            status = client.call("status")  # the socket systemd bound, not --socket
        assert status["socket"] == str(path) and status["socketActivated"] is True
    finally:
        proc.terminate()
        assert proc.wait(timeout=15) == 0
        assert proc.stdout is not None
        proc.stdout.close()


def test_sd_notify_ready_and_stopping(short_tmp: Path) -> None:
    """Under NOTIFY_SOCKET the daemon sends READY=1 once listening and STOPPING=1 on stop."""
    notify_path = short_tmp / "notify"
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(notify_path))
    receiver.settimeout(15)
    d = DaemonProcess(short_tmp, env={"NOTIFY_SOCKET": str(notify_path)})
    d.start()
    try:
        assert receiver.recv(256) == b"READY=1"
    finally:
        d.stop()
    assert receiver.recv(256) == b"STOPPING=1"
    receiver.close()


SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.mark.skipif(
    os.getuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="needs root (to act as another uid) and a system python3",
)
def test_other_uid_is_refused(daemon: DaemonProcess) -> None:
    """A connection from another uid is closed without an answer (SO_PEERCRED)."""
    os.chmod(daemon.socket.parent, 0o755)
    os.chmod(daemon.socket, 0o666)
    code = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
        "try:\n"
        '    s.sendall(b\'{"jsonrpc":"2.0","method":"ping","id":1}\\n\')\n'
        "    data=s.recv(100)\n"
        "except (ConnectionResetError, BrokenPipeError):\n"
        "    data=b''\n"
        "sys.exit(0 if data==b'' else 3)\n"
    )
    result = subprocess.run(
        [SYSTEM_PYTHON, "-c", code, str(daemon.socket)],
        user=65534,
        group=65534,
        capture_output=True,
        timeout=20,
    )
    assert result.returncode == 0, result.stderr
    assert ping_ok(daemon.socket)


def test_client_reports_no_daemon(short_tmp: Path) -> None:
    """The client says clearly that no daemon runs on the socket."""
    with pytest.raises(DaemonUnavailable) as info:
        Client(str(short_tmp / "none.sock")).call("ping")
    assert "start one" in str(info.value)


def test_client_reconnects_after_restart(daemon: DaemonProcess) -> None:
    """A client's next call after a daemon restart reconnects transparently."""
    with daemon.client() as client:
        first = client.call("status")["pid"]
        daemon.restart()
        assert client.call("status")["pid"] != first


def test_the_first_request_of_a_fresh_daemon_may_be_any_method(short_tmp: Path) -> None:
    """Sent the moment the socket accepts (before the services are loaded), a batch of a
    workspace method, rpc.discover and ping is answered in full: nothing is refused as
    unknown while the daemon loads its services (makad.daemon.Composition)."""
    proc = DaemonProcess(short_tmp)
    proc.start()
    try:
        ws = str(proc.workspace)
        with RawConnection(proc.socket) as conn:
            conn.send(
                b'[{"jsonrpc":"2.0","method":"get_settings","params":{"workspace":"%s"},"id":1},'
                b'{"jsonrpc":"2.0","method":"rpc.discover","id":2},'
                b'{"jsonrpc":"2.0","method":"ping","id":3}]' % ws.encode()
            )
            settings, discover, pong = conn.recv_message()
        assert "result" in settings and settings["result"]["agentReadEnabled"] in (True, False)
        assert len(discover["result"]["methods"]) > 30
        assert pong["result"] == "pong"
    finally:
        assert proc.stop() == 0


def test_a_daemon_that_cannot_load_its_services_exits_one(short_tmp: Path) -> None:
    """When building the services fails after the socket listens (here the identifier key
    is a directory), the daemon logs why, says so on stderr, and exits 1 (as before
    listening), and a request for a method it could not load is -32603, not hung."""
    (short_tmp / "data").mkdir(mode=0o700)
    (short_tmp / "data" / "identifier.key").mkdir()
    proc = DaemonProcess(short_tmp)
    proc.start()
    assert proc.proc is not None
    try:
        with RawConnection(proc.socket) as conn:
            conn.send(b'{"jsonrpc":"2.0","method":"get_settings","params":{"workspace":"/x"},"id":1}')
            reply = conn.recv_message()
            if "id" not in reply:  # the stop is announced to every connection, maybe first
                assert reply == {
                    "jsonrpc": "2.0",
                    "method": "daemon_stopping",
                    "params": {"reason": "start_failed"},
                }
                reply = conn.recv_message()
        assert reply["error"]["code"] == -32603 and reply["error"]["data"]["kind"] == "internal"
    except (OSError, EOFError):
        pass  # the daemon had stopped before the request could be read: also fine
    assert proc.proc.wait(timeout=15) == 1
    proc.stop()
    log = proc.log_text()
    assert "start_failed" in log and "could not start" in log and "IsADirectoryError" in log


def test_a_mistyped_flag_names_the_closest(short_tmp: Path) -> None:
    """makad --sokcet PATH is a usage error (exit 2) that names the flag meant, and starts nothing."""
    result = subprocess.run(
        [sys.executable, "-m", "makad", "--sokcet", str(short_tmp / "s.sock")],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 2
    assert "did you mean '--socket'?" in result.stderr
    assert not (short_tmp / "s.sock").exists()


def test_a_second_daemon_on_the_same_socket_says_how_to_stop_the_first(daemon: DaemonProcess) -> None:
    """A makad started on a socket another makad serves exits 1 naming that one's pid and
    the maka command (with that socket) that stops it; the first keeps serving."""
    assert daemon.proc is not None
    result = subprocess.run(
        [sys.executable, "-m", "makad", "--socket", str(daemon.socket), "--data-dir", str(daemon.data_dir)],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert result.returncode == 1
    assert f"another makad (pid {daemon.proc.pid}) is already serving {daemon.socket}" in result.stderr
    assert f"maka --socket {daemon.socket} stop" in result.stderr
    assert daemon.call("ping") == "pong"
