"""scripts/run's first-use set-up (scripts/_venv.sh) says what it is doing before the slow install."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Stands in for python3 and for the virtualenv's python: `-m venv DIR` makes DIR/bin with
# this script as its python and a makad that prints "serving"; `-m pip …` succeeds at once.
FAKE_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin" && cp "$0" "$3/bin/python"
  printf '#!/bin/sh\\necho serving\\n' > "$3/bin/makad" && chmod +x "$3/bin/makad"
fi
exit 0
"""


def run_script(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    python = tmp_path / "python3"
    python.write_text(FAKE_PYTHON)
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    env = {**os.environ, "PYTHON": str(python), "MAKAD_VENV": str(tmp_path / "venv")}
    return subprocess.run(
        [str(ROOT / "scripts" / "run")], capture_output=True, text=True, timeout=60, env=env
    )


def test_first_use_says_it_installs_and_how_long_it_takes(tmp_path: Path) -> None:
    """The first scripts/run says on stderr that it is installing into the virtualenv and
    that it takes a minute or two, then starts makad; the next run says nothing of it."""
    first = run_script(tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"installing makad and its dependencies into {tmp_path / 'venv'}" in first.stderr
    assert "a minute or two" in first.stderr
    assert first.stdout == "serving\n"
    again = run_script(tmp_path)
    assert again.returncode == 0 and again.stdout == "serving\n"
    assert "installing" not in again.stderr


def test_it_says_how_another_terminal_reaches_maka(tmp_path: Path) -> None:
    """scripts/run names, on stderr, the PATH line a new terminal (which starts elsewhere than
    the clone) needs for `maka`, with the virtualenv's absolute path, and `maka status`."""
    ran = run_script(tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert f'export PATH="{tmp_path / "venv"}/bin:$PATH"' in ran.stderr
    assert "maka status" in ran.stderr
