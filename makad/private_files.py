"""Folders and files that are the daemon's alone, made so that nobody else can redirect them.

Another local user who can write to a folder on the daemon's way can plant a symlink
where the daemon writes (the write then lands in a file of their choosing: truncated,
re-moded, overwritten), a FIFO where it reads (the read never returns), a hard link to
one of the user's files, or a folder of their own in place of the daemon's (and later a
socket of their own in it). So:

- a folder the daemon keeps its socket or its data in is checked from ``/`` down, on
  descriptors opened without following symlinks (``secure_folder``): every folder on
  the way is owned by this uid or root and writable by nobody else (a sticky folder such
  as ``/tmp`` excepted: nobody can rename or delete another's entries there); the
  folder itself is owned by this uid; the folders it creates are made 0700;
- a file it creates is created exclusively (``O_CREAT|O_EXCL``, which never follows a
  symlink) and its mode set on the descriptor (``fchmod``), never by path
  (``create_private``, ``write_private``); one it keeps opening (the instance lock) is
  opened with ``O_NOFOLLOW|O_NONBLOCK`` and must be a regular file of this uid with no
  other hard link (``open_private``);
- a file it reads is opened with ``O_NOFOLLOW|O_NONBLOCK`` and read only when it is a
  regular file (``read_regular``): a FIFO or a device planted there is refused at once;
- the data directory and everything in it are made owner-only when found looser
  (``tighten_tree``), again never through a symlink.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import secrets
import stat
from pathlib import Path
from typing import Final

PRIVATE_DIR_MODE: Final = 0o700
PRIVATE_FILE_MODE: Final = 0o600
# Permission bits anyone but the owner has.
NOT_OWNER: Final = 0o077
# Bits that let someone else add, rename or remove a folder's entries.
OTHERS_WRITE: Final = stat.S_IWGRP | stat.S_IWOTH
MAX_SYMLINK_HOPS: Final = 40

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO (or a device) returns at once instead of waiting for a writer.
_NO_WAIT: Final = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
_READ_FLAGS: Final = os.O_RDONLY | _NO_WAIT
# O_PATH (Linux): a folder to look names up in, which needs no right to list it.
_LOOKUP_FLAGS: Final = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | getattr(os, "O_PATH", os.O_RDONLY)
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class NotPrivate(Exception):
    """A folder or file the daemon would use is not safely its own; the message names it,
    says what is wrong and how to fix it."""

    def __init__(self, path: Path | str, problem: str, fix: str) -> None:
        super().__init__(f"{os.fsdecode(path)} {problem}: {fix}")
        self.path = os.fsdecode(path)
        self.problem = problem
        self.fix = fix


class NotRegularFile(OSError):
    """A path the daemon reads or writes holds a FIFO, device, socket or folder."""

    def __init__(self, path: Path | str) -> None:
        super().__init__(errno.EINVAL, "not a regular file", os.fsdecode(path))


def user_name(uid: int) -> str:
    """``uid 1000 (alice)``, or ``uid 1000`` where the account has no name."""
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


# ---------------------------------------------------------------- folders ---


def secure_folder(path: Path, *, what: str, elsewhere: str, tighten: bool = False) -> None:
    """Make ``path`` and any missing folder above it (mode 0700), and check that nobody but
    this uid and root can change it or a folder above it (``NotPrivate`` otherwise).

    ``what`` names the folder in the error ("the socket folder"); ``elsewhere`` says how to
    choose another. ``tighten``: the folder itself, when it is ours but open to others,
    is made owner-only (the data directory) instead of refused (the socket's folder, where
    someone else may already have put something of theirs).
    """
    _Walk(os.geteuid(), what, elsewhere, tighten).run(Path(os.path.abspath(path)))


class _Walk:
    """One ``secure_folder`` check: the folders from ``/`` down, each opened relative to
    the one above it without following a symlink, so what is checked is what is used."""

    def __init__(self, uid: int, what: str, elsewhere: str, tighten: bool) -> None:
        self.uid = uid
        self.what = what
        self.elsewhere = elsewhere
        self.tighten = tighten

    def refuse(self, here: Path, problem: str, fix: str) -> NotPrivate:
        return NotPrivate(here, problem, f"{fix} ({self.elsewhere})")

    def run(self, path: Path, hops: int = 0) -> None:
        parts = path.parts
        fd = os.open("/", _DIR_FLAGS)
        try:
            self._check(fd, Path("/"), last=len(parts) == 1, created=False)
            here = Path("/")
            for index, name in enumerate(parts[1:], start=1):
                last = index == len(parts) - 1
                here = here / name
                try:
                    st: os.stat_result | None = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if st is not None and stat.S_ISLNK(st.st_mode):
                    self._check_link(st, here, last, hops)
                    # The link sits in a folder checked above; where it leads is checked next.
                    self.run(Path(os.path.realpath(here)).joinpath(*parts[index + 1 :]), hops + 1)
                    return
                if st is None:
                    with contextlib.suppress(FileExistsError):  # made meanwhile: checked below
                        os.mkdir(name, PRIVATE_DIR_MODE, dir_fd=fd)
                child = self._open(fd, name, here)
                os.close(fd)
                fd = child
                self._check(fd, here, last=last, created=st is None)
        finally:
            os.close(fd)

    def _check_link(self, st: os.stat_result, here: Path, last: bool, hops: int) -> None:
        if st.st_uid not in (self.uid, 0):
            # In a sticky folder (/tmp) the link's owner may repoint it at will.
            raise self.refuse(
                here,
                f"is a symlink of {user_name(st.st_uid)}",
                "its owner could point it elsewhere; choose a folder of your own",
            )
        if last:
            problem = f"(the {self.what}) is a symlink"
            raise self.refuse(here, problem, "makad does not follow one there; name the real folder")
        if hops >= MAX_SYMLINK_HOPS:
            raise self.refuse(here, "is one symlink too many", "name the real folder")

    def _open(self, parent: int, name: str, here: Path) -> int:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symlink appeared since the look above
                raise self.refuse(here, "changed into a symlink", "choose a folder of your own") from None
            if exc.errno == errno.ENOTDIR:
                raise self.refuse(here, "is not a folder", "remove it or choose another folder") from None
            raise

    def _check(self, fd: int, here: Path, *, last: bool, created: bool) -> None:
        st = os.fstat(fd)
        mode = stat.S_IMODE(st.st_mode)
        if created and st.st_uid == self.uid and mode != PRIVATE_DIR_MODE:
            os.fchmod(fd, PRIVATE_DIR_MODE)  # exactly 0700, whatever the umask took away
            return
        role = f"(the {self.what})" if last else f"(a folder above the {self.what})"
        if st.st_uid != self.uid and (last or st.st_uid != 0):
            raise self.refuse(
                here,
                f"{role} belongs to {user_name(st.st_uid)}; makad runs as {user_name(self.uid)}",
                "its owner could replace what makad keeps there (the socket, the data) with their "
                "own; choose a folder of your own",
            )
        if not mode & OTHERS_WRITE:
            if last and self.tighten and mode & NOT_OWNER:
                os.fchmod(fd, mode & ~NOT_OWNER)
            return
        if last and self.tighten:
            os.fchmod(fd, mode & ~NOT_OWNER)
            return
        if not last and mode & stat.S_ISVTX:
            return  # sticky (like /tmp): nobody can rename or delete another's entries
        if not last and not mode & stat.S_IWOTH and private_group(st.st_gid, st.st_uid, self.uid):
            return  # e.g. ~/.local made under umask 002 where each user has a group of their own
        raise self.refuse(
            here,
            f"{role} is writable by {_who_writes(mode)} (mode {mode:04o})",
            "someone else could put a server or a file of theirs there; make it private "
            f"(chmod go-w {os.fsdecode(here)}) or choose another folder",
        )


def private_group(gid: int, owner: int, uid: int) -> bool:
    """Whether group ``gid`` is the user-private group of ``owner`` (this uid, not root):
    named after the owner, with no member but the owner. Writable by that group is
    writable by the owner alone (Debian and Red Hat give each user such a group, with a
    umask of 002)."""
    if owner != uid or owner == 0:
        return False
    try:
        name = pwd.getpwuid(owner).pw_name
        group = grp.getgrgid(gid)
    except KeyError:
        return False
    return group.gr_name == name and set(group.gr_mem) <= {name}


def _who_writes(mode: int) -> str:
    both = mode & stat.S_IWGRP and mode & stat.S_IWOTH
    return "its group and others" if both else "its group" if mode & stat.S_IWGRP else "others"


def make_dirs(path: Path) -> None:
    """``mkdir -p`` where every folder it creates is exactly 0700 (``Path.mkdir(parents=True)``
    gives the parents the umask's mode); a folder that exists is left as it is. A symlink
    where a folder is missing is followed only if it leads to a folder (``mkdir`` would)."""
    missing: list[Path] = []
    probe = path
    while not os.path.lexists(probe):
        missing.append(probe)
        if probe.parent == probe:
            break
        probe = probe.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile (another thread or daemon): left as it is
        fd = os.open(folder, _DIR_FLAGS)
        try:
            os.fchmod(fd, PRIVATE_DIR_MODE)
        finally:
            os.close(fd)
    if not os.path.isdir(path):
        raise NotADirectoryError(errno.ENOTDIR, "not a folder", os.fsdecode(path))


# ------------------------------------------------------------------ files ---


def check_own_file(fd: int, path: Path | str) -> os.stat_result:
    """The stat of an open file that makad may write: a regular file of this uid with no
    other hard link (one would make the write change another file); ``NotPrivate`` else."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise NotPrivate(path, "is not a regular file (a FIFO, device, socket or folder)", "remove it")
    if st.st_uid != os.geteuid():
        raise NotPrivate(path, f"belongs to {user_name(st.st_uid)}, not to you", "remove it")
    if st.st_nlink != 1:
        others = st.st_nlink - 1
        problem = (
            f"has {others} other hard link{'' if others == 1 else 's'}: writing it would change another file"
        )
        raise NotPrivate(path, problem, "remove it")
    return st


def open_private(path: Path | str, flags: int = os.O_RDWR) -> int:
    """Open for writing (``flags``) a file of ours that may be there already (the instance
    lock, the autostart log, an export), creating it exclusively (mode 0600) when missing:
    never through a symlink, never waiting on a FIFO; it must be a regular file of this uid
    with no other hard link (``NotPrivate``), and is made 0600 on its descriptor (which is
    left in blocking mode)."""
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL | _NO_WAIT, PRIVATE_FILE_MODE)
        except FileExistsError:
            fd = os.open(path, flags | _NO_WAIT)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotPrivate(path, "is a symlink", "makad does not write through one; remove it") from None
        if exc.errno in (errno.EISDIR, errno.ENXIO, errno.ENODEV):
            raise NotPrivate(path, "is not a regular file", "remove it") from None
        raise
    return _checked(fd, path)


def _checked(fd: int, path: Path | str) -> int:
    try:
        check_own_file(fd, path)
        os.fchmod(fd, PRIVATE_FILE_MODE)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_companion(path: Path | str) -> None:
    """A file another program creates beside one of ours (SQLite's ``-wal``): absent, or a
    regular file of this uid with no other hard link (``NotPrivate``); never opened."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise NotPrivate(path, "is a symlink", "makad does not write through one; remove it")
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_nlink != 1:
        raise NotPrivate(path, "is not a regular file of yours with one link", "remove it")


def create_private(path: Path | str) -> int:
    """A new file at ``path`` (``FileExistsError`` when anything is there, a dangling symlink
    too), mode exactly 0600, open for writing."""
    fd = os.open(path, _CREATE_FLAGS, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_private(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data`` whole (mode 0600): written and fsynced under a new
    name beside it, then renamed over it (a rename replaces a symlink, it never writes
    through one), so a crash leaves the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = create_private(tmp)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir:
        with contextlib.suppress(OSError):
            fsync_dir(path.parent)


def write_private_in(folder: int, name: str, data: bytes) -> None:
    """``write_private`` of the file ``name`` in the folder open as ``folder``
    (``open_folder``): the temp file, the rename and the sync all stay in that folder."""
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, _CREATE_FLAGS, PRIVATE_FILE_MODE, dir_fd=folder)
    try:
        try:
            os.fchmod(fd, PRIVATE_FILE_MODE)
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        raise
    with contextlib.suppress(OSError):
        os.fsync(folder)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, _DIR_FLAGS)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_regular(path: Path | str, limit: int = -1, *, dir_fd: int | None = None) -> bytes:
    """The bytes of the regular file at ``path`` (at most ``limit``; -1: all), never through
    a symlink (``OSError`` ELOOP) and never waiting on a FIFO or device
    (``NotRegularFile``). ``dir_fd``: ``path`` is a name in that folder."""
    fd = os.open(path, _READ_FLAGS, dir_fd=dir_fd)
    try:
        return read_open(fd, path, limit)
    finally:
        os.close(fd)


def read_if_regular(path: Path | str, limit: int = -1, *, dir_fd: int | None = None) -> bytes | None:
    """``read_regular``, or None when there is no regular file at ``path`` (missing, a
    symlink, a FIFO, a folder …); any other failure (a permission, the disk) is raised."""
    try:
        return read_regular(path, limit, dir_fd=dir_fd)
    except (FileNotFoundError, NotRegularFile):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise


def read_open(fd: int, path: Path | str, limit: int = -1) -> bytes:
    """``read_regular`` on a descriptor opened with ``O_NONBLOCK`` (``open_regular``)."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise NotRegularFile(path)
    chunks: list[bytes] = []
    left = limit
    while left != 0:
        chunk = os.read(fd, 1 << 20 if left < 0 else min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        if left > 0:
            left -= len(chunk)
    return b"".join(chunks)


def open_regular(path: Path | str, *, dir_fd: int | None = None) -> int:
    """A read-only descriptor of ``path`` opened without following a symlink or waiting on a
    FIFO; check it with ``os.fstat`` (or read it with ``read_open``)."""
    return os.open(path, _READ_FLAGS, dir_fd=dir_fd)


def open_folder(path: Path | str, *, lookup_only: bool = False) -> int:
    """A descriptor of the folder at ``path``, never through a symlink there (``OSError``
    ELOOP or ENOTDIR): names looked up relative to it stay in that folder even when
    someone who can write the folder above renames it away and puts a symlink in its place.
    ``lookup_only``: for reads by name only (no fsync, no listing), so a folder this uid
    may search but not list still serves (``O_PATH`` where there is one)."""
    return os.open(path, _LOOKUP_FLAGS if lookup_only else _DIR_FLAGS)


def regular_file_stat(path: Path | str) -> os.stat_result | None:
    """``lstat(path)`` when it is a regular file, else None (missing, a symlink, anything else)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None


# -------------------------------------------------------------- tightening ---


MAX_TIGHTEN_DEPTH: Final = 64


def tighten_tree(root: Path) -> int:
    """Take group and other permissions away from ``root`` and everything under it; returns
    how many modes changed. Never follows a symlink (symlinks are left alone, and so is
    anything they lead to); files of another uid, with other hard links, or that are not
    regular files are left as they are. Whatever vanishes meanwhile is skipped. One
    ``stat`` per entry: a folder is read once, relative to its parent's descriptor."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        return _tighten_folder(fd, os.geteuid(), 0)
    finally:
        os.close(fd)


def _tighten_folder(fd: int, uid: int, depth: int) -> int:
    changed = _tighten_fd(fd, uid)
    folders: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):  # gone since the listing
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.name)
                elif entry.is_file(follow_symlinks=False):
                    changed += _tighten_file(fd, entry.name, entry.stat(follow_symlinks=False), uid)
    if depth >= MAX_TIGHTEN_DEPTH:
        return changed
    for name in folders:
        try:
            child = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError:
            continue  # gone, or a symlink now
        try:
            changed += _tighten_folder(child, uid, depth + 1)
        finally:
            os.close(child)
    return changed


def _tighten_file(dir_fd: int, name: str, seen: os.stat_result, uid: int) -> int:
    if seen.st_uid != uid or seen.st_nlink != 1 or not seen.st_mode & NOT_OWNER:
        return 0
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino):
            return 0  # replaced since the look above
        return _tighten_fd(fd, uid)
    finally:
        os.close(fd)


def _tighten_fd(fd: int, uid: int) -> int:
    st = os.fstat(fd)
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid != uid or not mode & NOT_OWNER:
        return 0
    if stat.S_ISREG(st.st_mode) and st.st_nlink != 1:
        return 0
    os.fchmod(fd, mode & ~NOT_OWNER)
    return 1
