"""scripts/test runs the Node client's suite with the whole run, not when pytest is given paths."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Stands in for the virtualenv's python, ruff and mypy: every call succeeds at once.
SUCCEED = "#!/bin/sh\nexit 0\n"
# Stands in for npm: says it ran, so the test sees whether the Node suite was started.
FAKE_NPM = '#!/bin/sh\necho "npm $*" >> "$NPM_CALLS"\nexit 0\n'


def _executable(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def run_test_script(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    for tool in ("python", "ruff", "mypy"):
        _executable(venv / "bin" / tool, SUCCEED)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    (venv / ".makad-installed").write_text(f"{digest}-dev\n")
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir(exist_ok=True)
    _executable(fake_bin / "npm", FAKE_NPM)
    calls = tmp_path / "npm-calls"
    calls.unlink(missing_ok=True)
    env = {
        **os.environ,
        "MAKAD_VENV": str(venv),
        "MAKAD_TEST_SEMANTIC": "0",
        "NPM_CALLS": str(calls),
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        [str(ROOT / "scripts" / "test"), *args], capture_output=True, text=True, timeout=60, env=env
    )
    return done, calls.read_text() if calls.exists() else ""


def test_paths_for_pytest_leave_the_node_suite_out_saying_so(tmp_path: Path) -> None:
    """With test files named, the Node client's suite is not started, and the output says
    how to run it."""
    done, npm_calls = run_test_script(tmp_path, "-n", "0", "tests/test_doc_links.py")
    assert done.returncode == 0, done.stderr
    assert npm_calls == ""
    assert "node client: skipped" in done.stdout
    assert "npm test" in done.stdout


def test_a_whole_run_includes_the_node_suite(tmp_path: Path) -> None:
    """Without paths (CI's run, or options alone such as -k), the Node client's tests run."""
    done, npm_calls = run_test_script(tmp_path, "-k", "ping")
    assert done.returncode == 0, done.stderr
    assert "npm test" in npm_calls
