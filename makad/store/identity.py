"""What makes a workspace the same workspace: its resolved path and the id file in ``memory/``.

A workspace's data directory (``<data>/workspaces/<sha256(path)[:16]>/``: ledger,
backups, settings) belongs to one directory on disk, not to whatever directory
later appears at that path. The directory is recognised by a random id the
daemon writes to ``<workspace>/memory/.maka-id`` and records in the data
directory (``identity``) the first time anything is written for the workspace.

Why an id file and not the directory's inode: on ext4 a directory deleted and
created again at the same path usually gets the *same* inode number back, and
device numbers of some filesystems (btrfs, network mounts) change across
reboots. The id file disappears with the folder (or with ``memory/``), stays with
the folder across ``mv`` and editor saves, and survives reboots. The path is part
of the identity too (the data directory is keyed by it), so a copied or cloned
project that carries the file is still a different workspace at its own path.

When the data directory is bound to an id and the directory at its path has a
different id or none, the data directory is *retired* — renamed to
``<data>/retired/<name>-<unix ms>/``, never deleted — and the workspace starts
fresh: settings at their defaults (privacy switches off), no sessions.

A data directory made before this existed (no ``identity`` file) is adopted by
the directory at its path.
"""

from __future__ import annotations

import errno
import os
import re
import secrets
import stat
import time
from pathlib import Path

from makad.private_files import (
    NotRegularFile,
    make_dirs,
    open_folder,
    read_regular,
    write_private,
    write_private_in,
)

ID_FILE = ".maka-id"
BINDING_FILE = "identity"
RETIRED_DIR = "retired"
_ID = re.compile(r"[0-9a-f]{32}")
# Reasons opening the id file fails that mean "this folder has no id": missing, memory/ not
# a directory, the id file a symlink (O_NOFOLLOW), a FIFO or device that is not a file.
_NO_ID = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENXIO})

# (st_dev, st_ino) of the workspace directory, then (st_ino, st_mtime_ns) of its id file.
Stamp = tuple[int, int, int, int]
NO_ID_FILE = (0, 0)


def id_path(workspace: str | os.PathLike[str]) -> str:
    """Where a workspace's id file is, through whatever spelling ``workspace`` uses."""
    return os.path.join(workspace, "memory", ID_FILE)


def stamp(path: str | os.PathLike[str], id_file: str | None = None) -> Stamp | None:
    """What changes when the directory at ``path`` is no longer the same one.

    A symlink repointed changes the directory's (dev, ino); a folder deleted and
    created again changes its id file (gone, or another inode and mtime), even
    when the filesystem hands the directory its old inode. ``None`` when
    ``path`` is not a directory. ``id_file``: ``id_path(path)``, if known.
    """
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    found = id_stamp(id_file if id_file is not None else id_path(path))
    return (st.st_dev, st.st_ino, *(found or NO_ID_FILE))


def id_stamp(id_file: str) -> tuple[int, int] | None:
    """(st_ino, st_mtime_ns) of an id file, None when there is none. One ``stat``: for a
    bound workspace this alone tells a spelling still names it (see ``WorkspaceRegistry``)."""
    try:
        st = os.stat(id_file)
    except (OSError, ValueError):
        return None
    return (st.st_ino, st.st_mtime_ns)


def read_id(memory_dir: Path) -> str | None:
    """The id in ``memory/.maka-id``; None when there is none: no file, a symlink, not a
    regular file, or not an id. Any other failure to read it (a permission, the disk) is
    raised: not knowing the id must never be taken for a folder without one."""
    try:
        data = read_regular(memory_dir / ID_FILE, 128)
    except NotRegularFile:
        return None
    except OSError as exc:
        if exc.errno in _NO_ID:
            return None
        raise
    text = data.decode("ascii", "replace").strip()
    return text if _ID.fullmatch(text) else None


def write_id(memory_dir: Path) -> str:
    """Mint an id and write it to ``memory/.maka-id`` atomically (mode 0600).

    Written in the folder the caller checked even if it is swapped for a symlink meanwhile
    (``open_folder``: a symlink there by now is refused). Raises OSError when the folder
    cannot be written.
    """
    new_id = secrets.token_hex(16)
    folder = open_folder(memory_dir)
    try:
        write_private_in(folder, ID_FILE, f"{new_id}\n".encode("ascii"))
    finally:
        os.close(folder)
    return new_id


def read_binding(data_dir: Path) -> str | None:
    """The id a data directory belongs to; None when it is unbound (new, or made before ids)."""
    try:
        text = read_regular(data_dir / BINDING_FILE, 128).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text if _ID.fullmatch(text) else None


def write_binding(data_dir: Path, workspace_id: str) -> None:
    _write_atomically(data_dir / BINDING_FILE, f"{workspace_id}\n")


def retire(data_root: Path, data_dir: Path) -> Path:
    """Move a data directory out of the way (kept, never deleted); returns where it went."""
    retired = data_root / RETIRED_DIR
    make_dirs(retired)
    target = retired / f"{data_dir.name}-{time.time_ns() // 1_000_000}"
    suffix = 0
    while os.path.lexists(target):
        suffix += 1
        target = retired / f"{data_dir.name}-{time.time_ns() // 1_000_000}-{suffix}"
    os.rename(data_dir, target)
    return target


def _write_atomically(path: Path, text: str) -> None:
    write_private(path, text.encode("ascii"))
