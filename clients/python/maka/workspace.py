"""Which workspace a command means, found the way git finds its repository."""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_ENV = "MAKA_WORKSPACE"
MEMORY_FILES = ("MEMORY.md", "PENDING.md")


def is_workspace_root(directory: Path) -> bool:
    """A folder whose ``memory/`` holds MEMORY.md or PENDING.md, or a git work tree's top.

    An empty or unrelated ``memory/`` (a source package of that name) does not count.
    """
    memory = directory / "memory"
    if any((memory / name).is_file() for name in MEMORY_FILES):
        return True
    return (directory / ".git").exists()  # a directory, or a file in worktrees and submodules


def find_workspace(
    start: str | os.PathLike[str] | None = None, *, home: str | os.PathLike[str] | None = None
) -> str:
    """The nearest folder at or above ``start`` (default: the current directory) that is a
    workspace root; the walk stops at the home directory (which is still looked at) and at
    the filesystem root. With no root found, ``start`` itself. Always absolute; symlinks
    are kept as given, since the daemon names a workspace by its path.
    """
    here = Path(os.path.abspath(os.path.expanduser(os.fspath(start) if start is not None else os.getcwd())))
    stop = Path(os.path.abspath(os.path.expanduser(os.fspath(home) if home is not None else "~")))
    for directory in (here, *here.parents):
        try:
            if is_workspace_root(directory):
                return str(directory)
        except OSError:
            pass  # an unreadable folder on the way up is not a root
        if directory == stop:
            break
    return str(here)


def resolve_workspace(explicit: str | None = None) -> str:
    """``explicit`` (``--workspace``), else ``$MAKA_WORKSPACE``, else ``find_workspace()``."""
    chosen = explicit or os.environ.get(WORKSPACE_ENV)
    if chosen:
        return os.path.abspath(os.path.expanduser(chosen))
    return find_workspace()
