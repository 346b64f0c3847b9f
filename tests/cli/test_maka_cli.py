"""The maka CLI against a real daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support import DaemonProcess


def maka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "maka.cli", *args], capture_output=True,
                          text=True, timeout=30)


def test_status_json(daemon: DaemonProcess) -> None:
    """maka --json status prints the daemon's status as JSON."""
    result = maka("--socket", str(daemon.socket), "--json", "status")
    assert result.returncode == 0
    assert json.loads(result.stdout)["socket"] == str(daemon.socket)


def test_status_table(daemon: DaemonProcess) -> None:
    """maka status prints a readable table."""
    result = maka("--socket", str(daemon.socket), "status")
    assert result.returncode == 0 and "version" in result.stdout


def test_call_prints_result(daemon: DaemonProcess) -> None:
    """maka call METHOD prints the result as JSON."""
    result = maka("--socket", str(daemon.socket), "call", "ping", "{}")
    assert result.returncode == 0 and json.loads(result.stdout) == "pong"


def test_call_error_goes_to_stderr(daemon: DaemonProcess) -> None:
    """An error reply is printed on stderr with its kind and a non-zero exit."""
    result = maka("--socket", str(daemon.socket), "call", "nope")
    assert result.returncode == 1
    assert "method_not_found" in result.stderr and result.stdout == ""


def test_bad_params_json_is_usage_error(daemon: DaemonProcess) -> None:
    """PARAMS that are not JSON give exit 2."""
    result = maka("--socket", str(daemon.socket), "call", "ping", "{nope")
    assert result.returncode == 2


def test_no_daemon_says_how_to_start(short_tmp: Path) -> None:
    """Without a daemon maka exits 3 and says how to start one."""
    result = maka("--socket", str(short_tmp / "none.sock"), "status")
    assert result.returncode == 3
    assert "start one" in result.stderr
