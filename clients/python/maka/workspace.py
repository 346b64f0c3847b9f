"""Which workspace a command means, found the way git finds its repository."""

from __future__ import annotations

import logging
import os
import pwd
import shlex
from pathlib import Path

WORKSPACE_ENV = "MAKA_WORKSPACE"
MEMORY_FILES = ("MEMORY.md", "PENDING.md")

log = logging.getLogger("maka.workspace")
# Folders already said to be walked past (a command may walk up more than once).
_said_foreign: set[Path] = set()


def is_workspace_root(directory: Path) -> bool:
    """A folder whose ``memory/`` holds MEMORY.md or PENDING.md, or a git work tree's top,
    when the folder and that marker are this user's (or root's).

    An empty or unrelated ``memory/`` (a source package of that name) does not count. Nor
    does one that another user made, or one in another user's folder (like git's
    ``safe.directory``): in a shared folder such as /tmp anyone can plant a ``memory/`` or a
    ``.git`` above where the user works, and adopting it would feed the agent that user's
    memory and put the user's own in their folder. Such a folder is named once on the
    ``maka.workspace`` log (warning).
    """
    memory = directory / "memory"
    if any((memory / name).is_file() for name in MEMORY_FILES):
        marker = memory
    elif (directory / ".git").exists():  # a directory, or a file in worktrees and submodules
        marker = directory / ".git"
    else:
        return False
    for path in (directory, marker):
        owner = os.stat(path, follow_symlinks=path is directory).st_uid
        if owner not in (os.geteuid(), 0):
            _say_foreign(directory, path, owner)
            return False
    return True


def _say_foreign(directory: Path, owned: Path, owner: int) -> None:
    if directory in _said_foreign:
        return
    _said_foreign.add(directory)
    try:
        name = f"{pwd.getpwuid(owner).pw_name} (uid {owner})"
    except KeyError:
        name = f"uid {owner}"
    log.warning(
        "not using %s as the workspace: %s belongs to %s, not to you; -w %s uses it anyway",
        directory,
        "that folder" if owned == directory else f"its {owned.name}{'/' if owned.is_dir() else ''}",
        name,
        shlex.quote(str(directory)),
    )


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
