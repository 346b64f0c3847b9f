"""clients/python/README.md's examples run as written against a real daemon, and its first
one type-checks under mypy --strict as the README says ("typed")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import DaemonProcess

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "clients" / "python" / "README.md"


def example(starting: str) -> str:
    """The README's python block whose text starts with ``starting``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    found = [b for b in blocks if b.startswith(starting)]
    assert len(found) == 1, f"one python block starts with {starting!r}"
    return found[0]


def run(d: DaemonProcess, code: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter on the daemon's socket (the default one, via
    MAKAD_SOCKET), with the placeholder paths pointing at real ones."""
    script = tmp / "example.py"
    script.write_text(code.replace("/home/me/project", str(d.workspace)), encoding="utf-8")
    env = {**os.environ, "MAKAD_SOCKET": str(d.socket), "PYTHONPATH": str(ROOT / "clients" / "python")}
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, env=env, cwd=tmp
    )


def test_first_example_runs_and_type_checks(shared_daemon: DaemonProcess, short_tmp: Path) -> None:
    """The opening example (sync and async client) runs to the end and passes mypy --strict."""
    result = run(shared_daemon, example("import anyio"), short_tmp)
    assert result.returncode == 0, result.stderr
    assert "makad " in result.stdout
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(short_tmp / "example.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "MYPYPATH": str(ROOT / "clients" / "python")},
    )
    assert checked.returncode == 0, checked.stdout


def test_import_progress_example_collects_the_notifications(
    shared_daemon: DaemonProcess, short_tmp: Path
) -> None:
    """The on_notification example, given an export and a workspace, collects import_progress."""
    export = short_tmp / "CLAUDE.md"
    export.write_text("- Deploys happen on Tuesdays.\n- Staging runs Postgres 16.\n", encoding="utf-8")
    code = example("seen = []").replace("/abs/export.json", str(export))
    prelude = f"from maka import Client\nws = {str(shared_daemon.workspace)!r}\n"
    result = run(shared_daemon, prelude + code + "print([n['method'] for n in seen])\n", short_tmp)
    assert result.returncode == 0, result.stderr
    assert "'import_progress'" in result.stdout
