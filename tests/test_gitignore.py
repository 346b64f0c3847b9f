"""What the README's commands leave in a checkout is ignored by git, so `git status` stays clean."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
@pytest.mark.parametrize(
    "made",
    [
        ".venv/bin/python",  # scripts/run, scripts/test
        "clients/node/node_modules/x/index.js",  # npm ci
        "clients/node/dist/esm/index.js",  # npm run build
        "clients/node/makad-client-0.1.0.tgz",  # npm pack
    ],
)
def test_what_the_readme_commands_make_is_ignored(tmp_path: Path, made: str) -> None:
    """A file the README's set-up, build or pack commands write is ignored by the repository's .gitignore."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    done = subprocess.run(["git", "-C", str(tmp_path), "check-ignore", "--no-index", "-q", made], check=False)
    assert done.returncode == 0, f"{made} is not ignored"
