"""Folders that are the system's, never a project's: the filesystem root and the kernel's
folders. Neither a workspace (``makad.store.workspaces.reserved_folder``) nor the user
level (``--user-memory``, checked at start-up) may be one: a ``memory/`` folder there
would be made where nothing of a project's belongs. Only ``os.stat``: start-up imports it.
"""

from __future__ import annotations

import os
import stat as stat_mod
from pathlib import Path

# The kernel's folders: views of its state (/proc, /sys) and the device nodes (/dev), each
# a filesystem of its own where it is mounted. A memory/ folder there is nothing a project
# keeps: /proc refuses one, a cgroup folder in /sys makes a cgroup of it, /dev lets root
# make it. /proc/self would name the daemon's own process, another folder after a restart.
_KERNEL_FOLDERS = ("/proc", "/sys", "/dev")


def system_folder(path: Path) -> str | None:
    """What of the system's ``path`` (resolved) is — the filesystem root (a ``/memory``
    folder would be the nearest workspace of every folder on the machine), or a kernel
    folder — else None; a workspace or the user level there is refused. Blocking: a few
    ``stat`` calls."""
    own = dir_key(path)
    if own is not None and own == dir_key(Path("/")):
        return "the filesystem root"
    kernel = _kernel_folder(path, own)
    return None if kernel is None else f"this folder, in {kernel} (the kernel's own),"


def _kernel_folder(path: Path, own: tuple[int, int] | None) -> str | None:
    """The kernel folder ``path`` (resolved; ``own``: its ``dir_key``) is or is inside,
    else None. Below /dev only the device folder's own filesystem counts, not a tmpfs
    mounted in it (/dev/shm). A folder of one of those names on the root's filesystem (no
    kernel mounted there) is an ordinary folder."""
    root = dir_key(Path("/"))
    for name in _KERNEL_FOLDERS:
        top = dir_key(Path(name))
        if top is None or root is None or top[0] == root[0]:
            continue
        if name == "/dev":
            inside = own is not None and own[0] == top[0]
        else:
            inside = path == Path(name) or Path(name) in path.parents
        if inside:
            return name
    return None


def dir_key(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of a directory, following symlinks; None when there is none."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino) if stat_mod.S_ISDIR(st.st_mode) else None
