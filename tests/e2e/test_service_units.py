"""The service definitions: systemd user units verify clean, the launchd agent runs makad."""

from __future__ import annotations

import os
import plistlib
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import ping_ok

ROOT = Path(__file__).resolve().parents[2]
UNITS = ROOT / "systemd"
PLIST = ROOT / "launchd" / "local.makad.plist"


def installed_makad() -> Path:
    """The makad entry point of the environment running the tests."""
    found = Path(sys.executable).parent / "makad"
    if not found.exists():
        pytest.skip("no makad script beside the test interpreter (not an installed environment)")
    return found


def fake_home(root: Path) -> Path:
    """A home directory whose ~/.local/bin/makad is the makad under test (as pipx puts it)."""
    home = root / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "makad").symlink_to(installed_makad())
    return home


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_systemd_units_verify_clean(short_tmp: Path) -> None:
    """systemd-analyze verify --user finds nothing to say about makad.socket and makad.service."""
    units = short_tmp / "units"
    shutil.copytree(UNITS, units)
    runtime = short_tmp / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(fake_home(short_tmp)), "XDG_RUNTIME_DIR": str(runtime)}
    result = subprocess.run(
        ["systemd-analyze", "verify", "--user", "makad.socket", "makad.service"],
        cwd=units,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "Failed to initialize manager" in result.stderr:
        pytest.skip(f"systemd-analyze cannot run a user manager here: {result.stderr.strip()}")
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_service_hardening_leaves_workspaces_anywhere_writable() -> None:
    """No PrivateTmp and no ProtectSystem=strict: workspaces outside the home directory work."""
    service = (UNITS / "makad.service").read_text()
    settings = [line for line in service.splitlines() if line and not line.startswith("#")]
    assert "PrivateTmp=yes" not in settings and "ProtectSystem=strict" not in settings
    assert "ProtectSystem=full" in settings and not any(s.startswith("ReadWritePaths=") for s in settings)


def test_launchd_agent_matches_the_systemd_units() -> None:
    """The launchd agent runs ~/.local/bin/makad at login, restarts it on failure only, umask 077."""
    agent = plistlib.loads(PLIST.read_bytes())
    assert agent["Label"] == "local.makad" and agent["RunAtLoad"] is True
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["Umask"] == 0o077 and agent["ExitTimeOut"] == 15
    assert '"$HOME/.local/bin/makad" --log-format json' in agent["ProgramArguments"][2]


def test_launchd_agent_command_starts_a_daemon_on_the_default_socket(short_tmp: Path) -> None:
    """The agent's command, run as launchd would (a shell, no ~ expansion by launchd), serves
    on makad's default socket, logs under ~/Library/Logs/maka and exits 0 on SIGTERM."""
    agent = plistlib.loads(PLIST.read_bytes())
    home = fake_home(short_tmp)
    runtime = short_tmp / "run"
    runtime.mkdir(mode=0o700)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        "XDG_DATA_HOME": str(short_tmp / "data"),
    }
    proc = subprocess.Popen(agent["ProgramArguments"], env=env, stdout=subprocess.DEVNULL)
    socket_path = runtime / "maka" / "makad.sock"
    try:
        deadline = time.monotonic() + 20
        while not socket_path.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert ping_ok(socket_path)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=15)
    assert code == 0
    assert '"event": "listening"' in (home / "Library" / "Logs" / "maka" / "makad.log").read_text()


DROP_IN = UNITS / "makad.service.d" / "curator.conf"
SERVICE_DOC = ROOT / "docs" / "SERVICE.md"


def systemd_env(root: Path) -> dict[str, str]:
    runtime = root / "run"
    runtime.mkdir(mode=0o700, exist_ok=True)
    return {**os.environ, "HOME": str(fake_home(root)), "XDG_RUNTIME_DIR": str(runtime)}


def analyze(args: list[str], units: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        ["systemd-analyze", *args], cwd=units, env=env, capture_output=True, text=True, timeout=60
    )
    if "Failed to initialize manager" in result.stderr:
        pytest.skip(f"systemd-analyze cannot run a user manager here: {result.stderr.strip()}")
    if "unrecognized option" in result.stderr:  # --offline came with systemd 250
        pytest.skip(f"this systemd-analyze is too old: {result.stderr.strip()}")
    return result


def sh_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.S)


def test_the_curator_drop_in_is_the_one_documented() -> None:
    """docs/SERVICE.md shows the shipped drop-in's settings, line for line."""
    shipped = [line for line in DROP_IN.read_text().splitlines() if line and not line.startswith("#")]
    shown = re.findall(r"```ini\n(.*?)```", SERVICE_DOC.read_text(), flags=re.S)[0].splitlines()
    assert shipped == shown
    assert "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" in shipped
    assert "IPAddressAllow=localhost" in shipped and "IPAddressDeny=any" in shipped


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed here")
def test_documented_install_of_the_curator_drop_in_verifies(short_tmp: Path) -> None:
    """The install commands of docs/SERVICE.md, run as written (systemctl recorded, not run),
    leave units that verify clean, an environment file only the user reads, and a sandbox
    that allows internet sockets to localhost only; without the drop-in it allows none."""
    env = systemd_env(short_tmp)
    home = Path(env["HOME"])
    units = home / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    for unit in ("makad.socket", "makad.service"):
        shutil.copy(UNITS / unit, units / unit)
    stub = short_tmp / "bin"
    stub.mkdir()
    (stub / "systemctl").write_text(f'#!/bin/sh\necho "$@" >> {short_tmp / "systemctl.log"}\n')
    (stub / "systemctl").chmod(0o755)
    (install,) = [b for b in sh_blocks(SERVICE_DOC.read_text()) if "makad.service.d" in b]
    done = subprocess.run(
        ["bash", "-eo", "pipefail", "-c", install],
        cwd=ROOT,
        env={**env, "PATH": f"{stub}{os.pathsep}{env['PATH']}"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert (short_tmp / "systemctl.log").read_text().splitlines() == [
        "--user daemon-reload",
        "--user restart makad.service",
    ]
    settings = home / ".config" / "maka" / "makad.env"
    assert settings.stat().st_mode & 0o777 == 0o600
    assert all(line.startswith("MAKAD_CURATOR_") for line in settings.read_text().splitlines())
    verified = analyze(["verify", "--user", "makad.socket", "makad.service"], units, env)
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, "")
    with_drop_in = analyze(["security", "--user", "--offline=yes", "makad.service"], units, env).stdout
    assert "Service may allocate Internet sockets" in with_drop_in
    assert "IP address allow list with only localhost entries" in with_drop_in
    shutil.rmtree(units / "makad.service.d")
    without = analyze(["security", "--user", "--offline=yes", "makad.service"], units, env).stdout
    assert "Service cannot allocate Internet sockets" in without
