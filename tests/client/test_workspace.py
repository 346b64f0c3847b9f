"""find_workspace: the nearest workspace root at or above a folder, found like git's."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from maka.workspace import find_workspace, resolve_workspace
from tests.support import short_temp_dir

MARKERS = ("memory/MEMORY.md", "memory/PENDING.md", ".git/", ".git", "memory/", "memory/notes.txt")
COUNTS = {"memory/MEMORY.md", "memory/PENDING.md", ".git/", ".git"}


def plant(directory: Path, marker: str) -> None:
    target = directory / marker.rstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if marker.endswith("/"):
        target.mkdir(exist_ok=True)
    else:
        target.write_text("gitdir: elsewhere\n" if marker == ".git" else "x")


@settings(max_examples=60, deadline=None)
@given(
    depth=st.integers(1, 6),
    planted=st.dictionaries(st.integers(0, 6), st.sampled_from(MARKERS), max_size=4),
    home_level=st.integers(-1, 6),
)
def test_nearest_root_wins(depth: int, planted: dict[int, str], home_level: int) -> None:
    """The deepest folder on the way up holding memory/MEMORY.md, memory/PENDING.md or .git is
    chosen; an empty or unrelated memory/ is not a root; nothing above home is looked at;
    with no root, the start folder itself."""
    root = short_temp_dir("mkws")
    try:
        chain = [root]
        for i in range(depth):
            chain.append(chain[-1] / f"d{i}")
        chain[-1].mkdir(parents=True)
        for level, marker in planted.items():
            if level <= depth:
                plant(chain[level], marker)
        home = chain[home_level] if 0 <= home_level <= depth else None
        found = find_workspace(chain[-1], home=home or "/nonexistent-home")
        lowest = min(home_level, depth) if home is not None else 0
        expected = chain[-1]
        for level in range(depth, lowest - 1, -1):
            if planted.get(level) in COUNTS:
                expected = chain[level]
                break
        assert found == str(expected)
    finally:
        shutil.rmtree(root)


def test_symlinked_start_is_kept_as_given(short_tmp: Path) -> None:
    """A path through a symlink is walked as given (the daemon names workspaces by path)."""
    real = short_tmp / "real"
    (real / "sub").mkdir(parents=True)
    plant(real, "memory/MEMORY.md")
    link = short_tmp / "link"
    link.symlink_to(real)
    assert find_workspace(link / "sub", home=short_tmp) == str(link)


def test_explicit_then_environment_then_walk(short_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--workspace wins, then $MAKA_WORKSPACE, then the walk from the current directory."""
    plant(short_tmp, ".git/")
    (short_tmp / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(short_tmp / "a" / "b")
    monkeypatch.delenv("MAKA_WORKSPACE", raising=False)
    assert resolve_workspace() == str(short_tmp)
    monkeypatch.setenv("MAKA_WORKSPACE", str(short_tmp / "a"))
    assert resolve_workspace() == str(short_tmp / "a")
    assert resolve_workspace("~") == str(Path.home())
