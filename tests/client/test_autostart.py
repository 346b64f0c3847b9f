"""Autostart: clients start makad when nothing answers, detached, logged, one daemon only."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from maka import AsyncClient, Client
from maka.errors import DaemonUnavailable
from tests.client.autostart_support import AutostartHome
from tests.support import DaemonProcess

MAKA = [sys.executable, "-m", "maka.cli"]


def maka(home: AutostartHome, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*MAKA, "--socket", str(home.socket), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_library_default_does_not_start_a_daemon(autostart_home: AutostartHome) -> None:
    """Client() without autostart=True says no daemon runs, and starts none."""
    with pytest.raises(DaemonUnavailable, match="start one"):
        Client(str(autostart_home.socket)).call("ping")
    assert not autostart_home.socket.exists() and not autostart_home.log.exists()


def test_client_starts_one_detached_and_logged(autostart_home: AutostartHome) -> None:
    """Client(autostart=True) starts makad on its socket with the default data dir from the
    environment, fully detached — a session of its own, not the client's child, stdin from
    /dev/null, output to the user's log dir — and it outlives the client."""
    with Client(str(autostart_home.socket), autostart=True) as c:
        status = c.call("status")
    assert status["socket"] == str(autostart_home.socket)
    assert status["dataDir"] == str(autostart_home.data_dir)
    pid = int(status["pid"])
    assert os.getsid(pid) == pid != os.getsid(0)  # its own session: no terminal's signals reach it
    parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert parent != os.getpid()  # re-parented: the client never waits for it or reaps it
    assert os.readlink(f"/proc/{pid}/cwd") == "/"
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2") == str(autostart_home.log)
    assert "listening on" in autostart_home.log.read_text()
    assert autostart_home.status()["pid"] == pid  # still serving after the client closed


def test_a_relative_model_path_is_the_clients(
    autostart_home: AutostartHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MAKAD_EMBEDDING_MODEL naming a folder relative to the client's directory names that
    folder in the daemon it starts (which runs in /), not one relative to /."""
    (autostart_home.root / "models" / "mine").mkdir(parents=True)
    monkeypatch.chdir(autostart_home.root)
    monkeypatch.setenv("MAKAD_EMBEDDING_MODEL", "models/mine")
    with Client(str(autostart_home.socket), autostart=True) as c:
        semantic = c.call("status")["semantic"]
    assert semantic["model"] == str(autostart_home.root / "models" / "mine")


def test_async_client_starts_one(autostart_home: AutostartHome) -> None:
    """AsyncClient(autostart=True) starts makad the same way."""

    async def go() -> str:
        async with AsyncClient(str(autostart_home.socket), autostart=True) as c:
            result: str = await c.call("ping")
            return result

    assert anyio.run(go) == "pong"
    assert autostart_home.running()


def test_environment_refuses(autostart_home: AutostartHome, monkeypatch: pytest.MonkeyPatch) -> None:
    """MAKA_NO_AUTOSTART=1 wins over autostart=True, and the error says autostart is off."""
    monkeypatch.setenv("MAKA_NO_AUTOSTART", "1")
    with pytest.raises(DaemonUnavailable, match="autostart is off"):
        Client(str(autostart_home.socket), autostart=True).call("ping")
    assert not autostart_home.log.exists()


def test_the_cli_says_autostart_is_off_in_one_pair_of_parentheses(autostart_home: AutostartHome) -> None:
    """`maka status` with MAKA_NO_AUTOSTART=1 and no daemon exits 3 saying why, its
    parentheses not nested."""
    env = {**os.environ, "MAKA_NO_AUTOSTART": "1"}
    done = subprocess.run(
        [*MAKA, "--socket", str(autostart_home.socket), "status"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 3
    message = done.stderr.strip()
    assert message == (
        f"maka: no makad is running on {autostart_home.socket} (no socket there; autostart is off: "
        "MAKA_NO_AUTOSTART is set); start one with `makad` or `scripts/run`, or pass --socket / set "
        "MAKAD_SOCKET"
    )
    assert "((" not in message and "))" not in message and not autostart_home.log.exists()


def test_stale_socket_is_replaced(autostart_home: AutostartHome) -> None:
    """A socket file left by a killed daemon counts as no daemon: a new one is started."""
    d = DaemonProcess(autostart_home.root)
    d.socket = autostart_home.socket
    d.socket.parent.mkdir(mode=0o700, exist_ok=True)
    d.start()
    d.kill9()
    assert d.socket.exists()
    with Client(str(autostart_home.socket), autostart=True) as c:
        assert c.call("ping") == "pong"


def test_a_daemon_that_cannot_start_is_reported(
    autostart_home: AutostartHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the started makad exits with an error, the client says so, with the daemon's
    own words (here: a file where its data folder should be, exit 78) and the log."""
    blocker = autostart_home.root / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MAKAD_DATA_DIR", str(blocker / "data"))
    with pytest.raises(DaemonUnavailable) as info:
        Client(str(autostart_home.socket), autostart=True).call("ping")
    message = str(info.value)
    # Detached, it is not the client's child: its exit status is unknown, its last words are not.
    assert message.startswith(f"could not start makad on {autostart_home.socket}: ")
    assert "exited at once" in message and f"its log: {autostart_home.log}" in message
    assert f"{blocker} is not a folder" in message


def test_cli_reports_a_failed_start_as_a_failure(autostart_home: AutostartHome) -> None:
    """`maka status` whose autostarted makad exits at once says it failed, why and where the
    log is, exit 3, and never that it "started one"."""
    blocker = autostart_home.root / "file"
    blocker.write_text("not a directory")
    env = {**os.environ, "MAKAD_DATA_DIR": str(blocker / "data")}
    done = subprocess.run(
        [*MAKA, "--socket", str(autostart_home.socket), "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert "started one" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"maka: could not start makad on {autostart_home.socket}: ")
    assert f"{blocker} is not a folder" in line and line.endswith(f"its log: {autostart_home.log}")


def test_cli_autostarts_and_says_so(autostart_home: AutostartHome) -> None:
    """A maka command with no daemon running starts one and says so on stderr."""
    proc = maka(autostart_home, "--json", "status")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    pid = json.loads(out)["pid"]
    assert f"started one (pid {pid}" in err and str(autostart_home.log) in err


def test_cli_no_autostart_flag(autostart_home: AutostartHome) -> None:
    """maka --no-autostart exits 3 without starting anything."""
    proc = maka(autostart_home, "--no-autostart", "status")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3 and "start one" in err
    assert not autostart_home.socket.exists()


def test_two_clients_at_once_get_one_daemon(autostart_home: AutostartHome) -> None:
    """Several maka commands starting at the same moment all reach one and the same daemon;
    the extra makad processes exit because the first holds the lock, and every command that
    says it started one names the pid of the daemon that serves, never one that exited."""
    procs = [maka(autostart_home, "--json", "status") for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in results]
    pids = {json.loads(out)["pid"] for out, _ in results}
    assert len(pids) == 1
    (winner,) = pids
    said = [line for _, err in results for line in err.splitlines() if "started one" in line]
    assert said
    assert all(f"(pid {winner}," in line for line in said), said
    # the makad processes that lost run detached and may log a moment after maka exits
    deadline = time.monotonic() + 20
    while autostart_home.log.read_text().count("already serving") < len(said) - 1:
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    log = autostart_home.log.read_text()
    assert log.count("listening on") == 1
    assert log.count("already serving") == len(said) - 1


def test_log_never_follows_a_symlink(autostart_home: AutostartHome) -> None:
    """A symlink planted at the log's path is refused (a DaemonUnavailable naming the log),
    not written through: the file it leads to keeps its bytes and mode."""
    target = autostart_home.root / "victim"
    target.write_text("keep me")
    target.chmod(0o644)
    autostart_home.log.parent.mkdir(parents=True)
    autostart_home.log.symlink_to(target)
    with pytest.raises(DaemonUnavailable, match=f"its log {autostart_home.log} is a symlink"):
        Client(str(autostart_home.socket), autostart=True).call("ping")
    assert target.read_text() == "keep me" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not Path(autostart_home.socket).exists()
