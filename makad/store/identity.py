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

import contextlib
import errno
import os
import re
import secrets
import stat
import time
from pathlib import Path

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
        fd = os.open(memory_dir / ID_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in _NO_ID:
            return None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, 128)
    finally:
        os.close(fd)
    text = data.decode("ascii", "replace").strip()
    return text if _ID.fullmatch(text) else None


def write_id(memory_dir: Path) -> str:
    """Mint an id and write it to ``memory/.maka-id`` atomically (mode 0600).

    The caller has checked that ``memory_dir`` is a real directory (not a symlink).
    Raises OSError when the directory cannot be written.
    """
    new_id = secrets.token_hex(16)
    write_atomically(memory_dir / ID_FILE, f"{new_id}\n")
    return new_id


def read_binding(data_dir: Path) -> str | None:
    """The id a data directory belongs to; None when it is unbound (new, or made before ids)."""
    try:
        text = (data_dir / BINDING_FILE).read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return text if _ID.fullmatch(text) else None


def write_binding(data_dir: Path, workspace_id: str) -> None:
    write_atomically(data_dir / BINDING_FILE, f"{workspace_id}\n")


def retire(data_root: Path, data_dir: Path) -> Path:
    """Move a data directory out of the way (kept, never deleted); returns where it went."""
    retired = data_root / RETIRED_DIR
    retired.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = retired / f"{data_dir.name}-{time.time_ns() // 1_000_000}"
    suffix = 0
    while target.exists():
        suffix += 1
        target = retired / f"{data_dir.name}-{time.time_ns() // 1_000_000}-{suffix}"
    os.rename(data_dir, target)
    return target


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically and durably (mode 0600, a new file:
    never written through a symlink)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        try:
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
