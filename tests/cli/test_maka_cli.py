"""The maka CLI against a real daemon."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from maka.cli import main
from maka.cli.system import DEFAULT_LIMITS
from makad.settings import DEFAULT_MAX_REPLY_BYTES
from tests.support import DaemonProcess

MAKA_ARGS = [sys.executable, "-m", "maka.cli"]


def maka(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MAKA_ARGS, *args], capture_output=True, text=True, timeout=30)


def test_status_json(shared_daemon: DaemonProcess) -> None:
    """maka --json status prints the daemon's status as JSON."""
    result = maka("--socket", str(shared_daemon.socket), "--json", "status")
    assert result.returncode == 0
    assert json.loads(result.stdout)["socket"] == str(shared_daemon.socket)


def test_status_table(shared_daemon: DaemonProcess) -> None:
    """maka status prints a readable table."""
    result = maka("--socket", str(shared_daemon.socket), "status")
    assert result.returncode == 0 and "version" in result.stdout


def test_python_dash_m_maka_runs_the_cli(shared_daemon: DaemonProcess) -> None:
    """`python -m maka` runs the same CLI as `python -m maka.cli` (as `python -m makad` runs the daemon)."""
    result = subprocess.run(
        [sys.executable, "-m", "maka", "--socket", str(shared_daemon.socket), "call", "ping"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == "pong"


def test_status_table_shows_values_for_people(shared_daemon: DaemonProcess) -> None:
    """maka status prints booleans as true/false, the uptime in words, and each per-workspace
    line (contextPaths, warnings) on a line of its own, never a Python repr of a list."""
    shared_daemon.call(
        "build_context", {"workspace": str(shared_daemon.workspace), "query": "x", "budgetTokens": 500}
    )
    result = maka("--socket", str(shared_daemon.socket), "status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "{'" not in result.stdout and "[]" not in result.stdout
    assert re.search(r"^socketActivated\s+false$", result.stdout, re.M)
    assert re.search(r"^uptimeMs\s+\d+ \(.+\)$", result.stdout, re.M)
    at = next(i for i, line in enumerate(lines) if line.startswith("contextPaths"))
    assert any(
        line.startswith(f"  {shared_daemon.workspace}: ") and "bounded" in line for line in lines[at + 1 :]
    )


def test_status_for_people_leaves_out_defaults_that_json_keeps(short_tmp: Path) -> None:
    """Before any pack is built and with the default caps, `maka status` shows neither
    contextPaths nor limits; --json has both, and its limits are the defaults the CLI knows."""
    fresh = DaemonProcess(short_tmp)
    fresh.start()
    try:
        shown = maka("--socket", str(fresh.socket), "status")
        as_json = json.loads(maka("--socket", str(fresh.socket), "--json", "status").stdout)
    finally:
        fresh.stop()
    assert shown.returncode == 0, shown.stderr
    assert "contextPaths" not in shown.stdout and "limits" not in shown.stdout
    assert "maxMessageBytes" not in shown.stdout
    assert as_json["contextPaths"] == [] and as_json["limits"] == DEFAULT_LIMITS
    assert DEFAULT_LIMITS["maxReplyBytes"] == DEFAULT_MAX_REPLY_BYTES


def test_status_for_people_shows_a_cap_that_is_not_the_default(short_tmp: Path) -> None:
    """A daemon started with another --max-reply-bytes: `maka status` lists that cap under
    limits with its default, and no cap left at its default."""
    changed = DaemonProcess(short_tmp, env={"MAKAD_MAX_REPLY_BYTES": "5000000"})
    changed.start()
    try:
        shown = maka("--socket", str(changed.socket), "status")
    finally:
        changed.stop()
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = lines.index("limits")
    assert lines[at + 1] == f"  maxReplyBytes: 5000000 (default {DEFAULT_MAX_REPLY_BYTES})"
    assert "maxMessageBytes" not in shown.stdout


def test_call_prints_result(shared_daemon: DaemonProcess) -> None:
    """maka call METHOD prints the result as JSON."""
    result = maka("--socket", str(shared_daemon.socket), "call", "ping", "{}")
    assert result.returncode == 0 and json.loads(result.stdout) == "pong"


def test_call_error_goes_to_stderr(shared_daemon: DaemonProcess) -> None:
    """An error reply is printed on stderr with its kind and a non-zero exit."""
    result = maka("--socket", str(shared_daemon.socket), "call", "nope")
    assert result.returncode == 1
    assert "method_not_found" in result.stderr and result.stdout == ""


def test_bad_params_json_is_usage_error(shared_daemon: DaemonProcess) -> None:
    """PARAMS that are not JSON give exit 2 and show what well-formed PARAMS look like."""
    result = maka("--socket", str(shared_daemon.socket), "call", "propose", "{title: 1}")
    assert result.returncode == 2
    assert "PARAMS is not valid JSON" in result.stderr
    assert """maka call propose '{"title": "T", "content": "C"}'""" in result.stderr


def test_params_nested_too_deep_are_a_usage_error(shared_daemon: DaemonProcess) -> None:
    """PARAMS nested deeper than the parser takes give exit 2 and a message, no traceback;
    so does a setting's value."""
    deep = "[" * 20_000 + "]" * 20_000
    result = maka("--socket", str(shared_daemon.socket), "call", "ping", deep)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "PARAMS is nested too deep" in result.stderr
    ws = ["-w", str(shared_daemon.workspace)]
    setting = maka("--socket", str(shared_daemon.socket), *ws, "settings", f"contextStrategy={deep}")
    assert setting.returncode == 2 and "Traceback" not in setting.stderr
    assert "is not one of" in setting.stderr


def test_no_daemon_says_how_to_start(short_tmp: Path) -> None:
    """Without a daemon maka exits 3 and says how to start one, and that --no-autostart is
    what kept maka from starting it."""
    env = {k: v for k, v in os.environ.items() if k != "MAKA_NO_AUTOSTART"}
    result = subprocess.run(
        [*MAKA_ARGS, "--socket", str(short_tmp / "none.sock"), "--no-autostart", "status"],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    assert result.returncode == 3
    assert "start one" in result.stderr
    assert "autostart is off (--no-autostart): without it, maka starts makad" in result.stderr


def test_no_daemon_says_what_is_at_the_socket(short_tmp: Path) -> None:
    """Exit 3 says in words whether there is no socket file or a file nobody listens on,
    never a Python exception's name."""
    missing = maka("--no-autostart", "--socket", str(short_tmp / "none.sock"), "ping")
    assert missing.returncode == 3 and "(no socket there" in missing.stderr
    dead = short_tmp / "dead.sock"
    with socket.socket(socket.AF_UNIX) as bound:
        bound.bind(str(dead))  # bound, never listening: a daemon that died
        refused = maka("--no-autostart", "--socket", str(dead), "ping")
    assert refused.returncode == 3 and "nothing listens on it" in refused.stderr
    assert "Error" not in missing.stderr + refused.stderr


def test_a_socket_path_too_long_is_named_as_such(short_tmp: Path) -> None:
    """A --socket path past the Unix limit: exit 3 naming its length and the limit,
    not "no makad is running" with advice to start one; nothing is started."""
    long_path = short_tmp / ("x" * 120) / "m.sock"
    result = maka("--socket", str(long_path), "ping")
    assert result.returncode == 3
    assert f"its path is {len(str(long_path))} bytes" in result.stderr
    assert "no makad is running" not in result.stderr and not long_path.parent.exists()


def test_help_documents_exit_codes() -> None:
    """maka --help ends with the exit-code table."""
    result = maka("--help")
    assert result.returncode == 0
    for line in (
        "0    success",
        "1    the daemon answered",
        "2    usage error",
        "3    no daemon",
        "4    the connection broke",
        "130  interrupted",
    ):
        assert line in result.stdout


def test_json_flag_after_the_command(shared_daemon: DaemonProcess) -> None:
    """--json works after the command name as well as before it."""
    result = maka("--socket", str(shared_daemon.socket), "status", "--json")
    assert result.returncode == 0 and json.loads(result.stdout)["socket"] == str(shared_daemon.socket)


def test_mcp_without_the_extra_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the mcp package, maka mcp exits 2 and names the extra to install."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "mcp" else real(name, *a)
    )
    assert main(["--socket", "/nonexistent.sock", "mcp"]) == 2
    assert "pip install 'makad[mcp]'" in capsys.readouterr().err


def test_a_closed_stdin_or_stdout_is_no_traceback(shared_daemon: DaemonProcess) -> None:
    """Started with stdin closed (`<&-`, as some launchers do) `maka memory add TITLE` says
    stdin was empty (exit 2); with stdout closed `maka memory list` runs (exit 0); neither
    prints a Python traceback."""
    base = f"{shlex.quote(sys.executable)} -m maka.cli --socket {shlex.quote(str(shared_daemon.socket))}"
    ws = f"-w {shlex.quote(str(shared_daemon.workspace))}"
    closed_in = subprocess.run(
        ["sh", "-c", f"exec {base} memory add Title {ws} <&-"], capture_output=True, text=True, timeout=30
    )
    assert closed_in.returncode == 2, closed_in.stderr
    assert "stdin was empty" in closed_in.stderr and "Traceback" not in closed_in.stderr
    closed_out = subprocess.run(
        ["sh", "-c", f"exec {base} memory list {ws} >&-"], capture_output=True, text=True, timeout=30
    )
    assert closed_out.returncode == 0 and "Traceback" not in closed_out.stderr


def test_an_ascii_only_output_gets_no_traceback(shared_daemon: DaemonProcess) -> None:
    """With an output encoding that cannot hold "é" or "…" (PYTHONIOENCODING=ascii, a
    Latin-1 locale) tables print with a stand-in character and --json prints JSON escapes
    that decode to the same text; no traceback."""
    shared_daemon.call(
        "add_entry", {"workspace": str(shared_daemon.workspace), "title": "Café", "content": "Opens at nine…"}
    )
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    args = [*MAKA_ARGS, "--socket", str(shared_daemon.socket), "-w", str(shared_daemon.workspace)]
    listed = subprocess.run([*args, "memory", "list"], capture_output=True, text=True, env=env, timeout=30)
    assert listed.returncode == 0 and "Caf?" in listed.stdout and "Traceback" not in listed.stderr
    exported = subprocess.run(
        [*args, "--json", "memory", "list"], capture_output=True, text=True, env=env, timeout=30
    )
    assert exported.returncode == 0, exported.stderr
    assert [e["title"] for e in json.loads(exported.stdout)["entries"]] == ["Café"]
