"""Every ``maka`` command starts lean: agent hosts run it in hooks on every turn.

Each command is run in a fresh interpreter, as the console script runs it; afterwards the
top-level packages (and maka's modules) in ``sys.modules`` are listed. ``maka.generated``
builds a TypedDict per schema of the protocol, most of a client's import time; only
``maka settings`` and a ``maka call`` with params read them. The daemon's package (which loads
structlog), the MCP SDK and the async client's anyio are each needed only by some commands
(``maka --version`` reads the version from makad; ``maka mcp`` serves MCP; a client that
starts a daemon runs makad's private-file helpers), so the others never import them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import DaemonProcess

REPO = Path(__file__).resolve().parents[2]
# Runs maka's entry point with the given arguments, then prints the loaded packages.
PROBE = r"""
import json, sys
from maka.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
names = [name for name, m in list(sys.modules.items()) if m is not None]
loaded = sorted({name.split(".")[0] for name in names} | {n for n in names if n.startswith("maka.")})
print("\nLOADED " + json.dumps({"code": code, "loaded": loaded}))
"""
# Not for a client that finds its daemon running.
NEVER = ("makad", "structlog", "mcp", "anyio", "asyncio", "maka.generated")


def loaded_by(argv: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    path = os.pathsep.join([str(REPO), str(REPO / "clients" / "python")])
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path, **(env or {})},
        timeout=60,
        check=False,
    )
    last = run.stdout.rstrip().rsplit("\nLOADED ", 1)[-1]
    report = json.loads(last)
    return report["code"], set(report["loaded"])


@pytest.mark.parametrize("argv", [["--help"], ["call", "--help"], ["context", "--help"]])
def test_help_imports_no_daemon_package_nor_mcp(argv: list[str]) -> None:
    """``maka --help`` and a command's help load neither makad, structlog, mcp nor anyio."""
    code, loaded = loaded_by(argv)
    assert code == 0
    assert loaded.isdisjoint(NEVER), sorted(loaded & set(NEVER))


def test_version_imports_no_mcp_nor_anyio() -> None:
    """``maka --version`` reads makad's version and loads nothing of MCP or the async client."""
    code, loaded = loaded_by(["--version"])
    assert code == 0
    assert loaded.isdisjoint({"mcp", "anyio", "rich"}), sorted(loaded & {"mcp", "anyio", "rich"})


@pytest.mark.parametrize(
    "argv",
    [["call", "ping"], ["status"], ["context", "-q", "x", "-b", "500"]],
)
def test_commands_against_a_running_daemon_import_no_daemon_package(
    shared_daemon: DaemonProcess, argv: list[str]
) -> None:
    """A command served by a running daemon loads neither makad, structlog, mcp nor anyio."""
    code, loaded = loaded_by(
        ["--socket", str(shared_daemon.socket), "-w", str(shared_daemon.workspace), *argv]
    )
    assert code == 0
    assert loaded.isdisjoint(NEVER), sorted(loaded & set(NEVER))
    assert "maka" in loaded  # the probe ran the command in this interpreter


def test_importing_maka_loads_the_async_client_only_when_asked() -> None:
    """``import maka`` leaves anyio unloaded until ``maka.AsyncClient`` is used."""
    path = os.pathsep.join([str(REPO), str(REPO / "clients" / "python")])
    script = (
        "import sys, maka\n"
        "before = 'anyio' in sys.modules\n"
        "from maka import AsyncClient, Client\n"
        "print(before, 'anyio' in sys.modules, AsyncClient.__module__, Client.__module__)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": path},
        timeout=60,
        check=True,
    )
    assert run.stdout.split() == ["False", "True", "maka.aclient", "maka.client"]
