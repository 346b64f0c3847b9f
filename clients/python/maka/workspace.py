"""Which workspace a command means, found the way git finds its repository."""

from __future__ import annotations

import os
from pathlib import Path

WORKSPACE_ENV = "MAKA_WORKSPACE"
MEMORY_FILES = ("MEMORY.md", "PENDING.md")


def is_workspace_root(directory: Path) -> bool:
    """A folder whose ``memory/`` holds MEMORY.md or PENDING.md, or a git work tree's top,
    when the folder and that marker are this user's (or root's).

    An empty or unrelated ``memory/`` (a source package of that name) does not count. Nor
    does one that another user made, or one in another user's folder (like git's
    ``safe.directory``): in a shared folder such as /tmp anyone can plant a ``memory/`` or a
    ``.git`` above where the user works, and adopting it would feed the agent that user's
    memory and put the user's own in their folder.
    """
    memory = directory / "memory"
    if any((memory / name).is_file() for name in MEMORY_FILES):
        return _ours(directory) and _ours(memory, follow=False)
    git = directory / ".git"  # a directory, or a file in worktrees and submodules
    return git.exists() and _ours(directory) and _ours(git, follow=False)


def _ours(path: Path, *, follow: bool = True) -> bool:
    """Whether ``path`` belongs to this user or to root (who could change anything anyway)."""
    owner = os.stat(path, follow_symlinks=follow).st_uid
    return owner in (os.geteuid(), 0)


def find_workspace(
    start: str | os.PathLike[str] | None = None, *, home: str | os.PathLike[str] | None = None
) -> str:
    """The nearest folder at or above ``start`` (default: the current directory) that is a
    workspace root of this user's (``is_workspace_root``); the walk stops at the home
    directory (which is still looked at) and at the filesystem root. With no root found,
    ``start`` itself. Always absolute; symlinks are kept as given, since the daemon names a
    workspace by its path.
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
