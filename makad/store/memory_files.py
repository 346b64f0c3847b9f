"""Memory files on disk: guarded reads, atomic writes, and rolling backups.

Writes go to a unique temp file in the same directory, are fsynced, swapped
with the target (``makad.store.file_swap``: a save that lands meanwhile is
never destroyed) and the directory is fsynced, so a crash leaves the old file
or the new one, never half of either. Nothing is written outside the memory directory,
and symlinks there are refused.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Unpack

from makad.core.types import BackupInfo
from makad.errors import DISK_FULL_ERRNOS, InvalidWorkspace, IOFailure
from makad.private_files import (
    make_dirs,
    open_folder,
    read_if_regular,
    read_regular,
    write_private,
)
from makad.store.file_swap import (
    DEFAULT_WAITS,
    Replaced,
    SaveWaits,
    Signature,
    SwapTerms,
    read_settled,
    replace_verified,
    signature_of,
)

MAX_BACKUPS = 20
_BACKUP_NAME = re.compile(r"^(\d{13})-(\d{6})-(MEMORY|PENDING)\.md$")


@dataclass(frozen=True)
class FileRead:
    """One read of a memory file."""

    text: str | None  # None when missing or too large
    sha256: str | None
    size: int
    missing: bool = False
    too_large: bool = False
    signature: Signature | None = None
    mtime_ns: int = 0


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def generalize(
    exc: OSError, file: str, doing: str = "read or written", label: str | None = None
) -> IOFailure:
    """The IOFailure the wire shows for ``exc``: ``data.file`` is the name of the file or
    directory (never its full path, which may hold private words), ``data.osError`` the
    system's reason and ``data.errno`` its symbol; ``label`` names it in the message."""
    code = exc.errno or 0
    why = os.strerror(code) if code else "unknown error"
    detail = {"file": file, "osError": why, "errno": errno.errorcode.get(code, "")}
    name = label or file
    if code in DISK_FULL_ERRNOS:
        return IOFailure(f"the disk is full: {name} could not be written", reason="disk_full", **detail)
    if code in (errno.EACCES, errno.EPERM, errno.EROFS):
        return IOFailure(f"{name} could not be {doing}: {why}", reason="permission_denied", **detail)
    if code == errno.EISDIR:
        return IOFailure(f"{name} is a directory, not a file", reason="not_a_file", **detail)
    return IOFailure(f"{name} could not be {doing}: {why}", reason="io_error", **detail)


def check_not_symlink(path: Path, what: str) -> None:
    """Refuse a symlink where the daemon reads or writes memory."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError:
        return
    if stat.S_ISLNK(mode):
        raise InvalidWorkspace(f"the {what} is a symlink; makad refuses to follow it", reason="symlink")


def not_a_directory() -> InvalidWorkspace:
    """What a workspace whose ``memory`` is not a folder (a file put there) gets."""
    return InvalidWorkspace("the memory path is not a directory", reason="not_a_directory")


def lstat_memory_file(path: Path) -> os.stat_result | None:
    """``lstat`` of a memory file, None when it is missing; ``not_a_directory`` when its
    folder is a file, and any other failure generalized (``generalize``)."""
    try:
        return path.lstat()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise not_a_directory() from None
    except OSError as exc:
        raise generalize(exc, path.name, "read") from None


def read_memory_file(
    path: Path,
    max_bytes: int,
    *,
    was_empty: bool = True,
    existed: bool = False,
    waits: SaveWaits = DEFAULT_WAITS,
) -> FileRead:
    """Read a memory file as UTF-8 (undecodable bytes kept as surrogates) once it has
    stopped changing, so a save still being written is never taken for the user's
    (``was_empty``: it held nothing before, so an empty file is no half-done save;
    ``existed``: it was there before, so a moment without it may be a save;
    ``waits``: how long a file found emptied or gone is given to fill or come back)."""
    check_not_symlink(path.parent, "memory directory")
    folder = _open_memory_folder(path.parent)
    try:
        # Read in the folder just opened (never through a symlink put in its place since);
        # a folder missing now may be one being put back: its path is waited on instead.
        name = path.name if folder is not None else path
        settled = read_settled(
            name, max_bytes, was_empty=was_empty, existed=existed, waits=waits, dir_fd=folder
        )
    except FileNotFoundError:
        settled = None
    except NotADirectoryError:
        raise not_a_directory() from None
    except OSError as exc:
        raise generalize(exc, path.name, "read") from None
    finally:
        if folder is not None:
            os.close(folder)
    if settled is None:
        return FileRead(None, None, 0, missing=True)
    st, data = settled
    if stat.S_ISLNK(st.st_mode):
        raise InvalidWorkspace("the memory file is a symlink; makad refuses to follow it", reason="symlink")
    if not stat.S_ISREG(st.st_mode):
        raise IOFailure("a memory file is not a regular file", reason="not_a_file")
    signature = signature_of(st)
    if len(data) > max_bytes:
        return FileRead(None, None, st.st_size, too_large=True, signature=signature, mtime_ns=st.st_mtime_ns)
    if data.startswith(_WIDE_BOMS) or looks_wide(data):
        # Read byte by byte as UTF-8 it holds no entry, and the daemon's UTF-8 writes
        # would make it a mix no editor reads: refused, and left as it is, until saved as UTF-8.
        raise IOFailure(
            f"{path.name} is saved as UTF-16 or UTF-32: save it as UTF-8", reason="utf16", file=path.name
        )
    text = data.decode("utf-8", "surrogateescape")
    return FileRead(
        text, hashlib.sha256(data).hexdigest(), len(data), signature=signature, mtime_ns=st.st_mtime_ns
    )


def _open_memory_folder(memory_dir: Path) -> int | None:
    """A descriptor of ``memory/`` opened without following a symlink (None when it is
    missing); ``symlink`` or ``not_a_directory`` when it is no folder, other failures
    generalized."""
    try:
        return open_folder(memory_dir, lookup_only=True)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            check_not_symlink(memory_dir, "memory directory")
            raise not_a_directory() from None
        raise generalize(exc, memory_dir.name, "read", label="the memory directory") from None


# Byte-order marks of UTF-16 (and so of UTF-32 LE) and UTF-32 BE.
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)
# How much of a file the check for UTF-16 without a mark looks at.
_WIDE_SAMPLE_BYTES = 4096
_NUL_RUN = re.compile(rb"\x00{8,}")


def looks_wide(data: bytes) -> bool:
    """Whether ``data`` is UTF-16 (or UTF-32) text without a byte-order mark: NUL bytes at
    alternating positions — at least every other even or every other odd byte of its
    start is NUL, as the high (or low) half of each ASCII character in UTF-16 is. UTF-8
    text holds no NUL at all, so a few stray ones never pass; nor do runs of NULs (the
    zeroed blocks a crash can leave in a file: no UTF-16 or UTF-32 character is 8 NULs),
    nor a file of an odd number of bytes (no UTF-16 or UTF-32 text is)."""
    if len(data) % 2:
        return False
    sample = data[:_WIDE_SAMPLE_BYTES]
    pairs = len(sample) // 2
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    for run in _NUL_RUN.finditer(sample):
        start, end = run.span()
        at_even = (end + 1) // 2 - (start + 1) // 2
        even -= at_even
        odd -= end - start - at_even
        pairs -= (end - start) // 2
    if pairs <= 0:
        return False
    return max(even, odd) * 2 >= pairs


def ensure_memory_dir(memory_dir: Path) -> None:
    check_not_symlink(memory_dir, "memory directory")
    try:
        memory_dir.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise generalize(exc, memory_dir.name, "created", label="the memory directory") from None
    if not memory_dir.is_dir():
        raise not_a_directory()


def write_memory_file(path: Path, text: str, **terms: Unpack[SwapTerms]) -> Replaced:
    """Replace ``path`` with ``text`` atomically, never over a save not seen (``file_swap``)."""
    ensure_memory_dir(path.parent)
    check_not_symlink(path, "memory file")
    if path.exists() and not path.is_file():
        raise IOFailure("a memory file is not a regular file", reason="not_a_file")
    try:
        return replace_verified(path, text.encode("utf-8", "surrogateescape"), **terms)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # the folder replaced since the checks
            check_not_symlink(path.parent, "memory directory")
            if exc.errno == errno.ENOTDIR:
                raise not_a_directory() from None
        raise generalize(exc, path.name, "written") from None


_TEMP_NAME = re.compile(r"^\.(MEMORY|PENDING)\.md\..+\.tmp$")


def remove_stale_temp_files(memory_dir: Path, keep: Callable[[str, bytes], None], max_bytes: int) -> int:
    """Delete temp files a killed daemon left (before any write of ours starts).

    One may hold a save the daemon displaced just before it died: each that differs
    from its file goes to ``keep`` (file kind, bytes) first, to be backed up. One over
    ``max_bytes`` is no temp file of the daemon's (it writes none that large; a cloned
    repository may carry one): left where it is, never read nor copied. Everything is
    looked up in the folder opened here, never through a symlink put in its place.
    """
    try:
        folder = open_folder(memory_dir)
    except OSError:  # missing, a symlink, not a folder: nothing of ours to clean
        return 0
    removed = 0
    try:
        for entry in os.scandir(folder):
            match = _TEMP_NAME.match(entry.name)
            with contextlib.suppress(OSError):
                if not match or not entry.is_file(follow_symlinks=False):
                    continue
                data = read_regular(entry.name, max_bytes + 1, dir_fd=folder)
                if len(data) > max_bytes:
                    continue
                target = f"{match.group(1)}.md"
                current = read_if_regular(target, max_bytes + 1, dir_fd=folder) or b""
                if data and data != current:
                    keep(match.group(1), data)
                os.unlink(entry.name, dir_fd=folder)
                removed += 1
    finally:
        os.close(folder)
    return removed


def save_backup(backups_dir: Path, file_kind: str, text: str) -> None:
    """Keep a copy of the text being replaced; only the newest MAX_BACKUPS stay."""
    try:
        _save_backup(backups_dir, file_kind, text)
    except OSError as exc:
        raise generalize(exc, backups_dir.name, "written", label=f"a backup of {file_kind}.md") from None


def _save_backup(backups_dir: Path, file_kind: str, text: str) -> None:
    make_dirs(backups_dir)
    existing = sorted(p.name for p in backups_dir.iterdir() if _BACKUP_NAME.match(p.name))
    counter = int(existing[-1].split("-")[1]) + 1 if existing else 1
    name = f"{time.time_ns() // 1_000_000:013d}-{counter % 1_000_000:06d}-{file_kind}.md"
    _write_private(backups_dir, name, text)
    mine = sorted(
        p for p in backups_dir.iterdir() if _BACKUP_NAME.match(p.name) and p.name.endswith(f"-{file_kind}.md")
    )
    for old in mine[:-MAX_BACKUPS]:
        old.unlink(missing_ok=True)


def _write_private(backups_dir: Path, name: str, text: str) -> None:
    """Write a backup file whole (mode 0600): fsynced under a new temp name, then renamed."""
    write_private(backups_dir / name, text.encode("utf-8", "surrogateescape"), sync_dir=False)


def list_backups(backups_dir: Path) -> list[BackupInfo]:
    if not backups_dir.is_dir():
        return []
    out: list[BackupInfo] = []
    for path in sorted(backups_dir.iterdir(), reverse=True):
        match = _BACKUP_NAME.match(path.name)
        if not match:
            continue
        # None: pruned by a concurrent write since the listing, or not a backup (a symlink…)
        data = read_if_regular(path)
        if data is None:
            continue
        out.append(
            BackupInfo(
                backup_id=path.name.removesuffix(".md"),
                file=match.group(3),
                created_at=int(match.group(1)),
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
            )
        )
    return out


def read_backup(backups_dir: Path, backup_id: str) -> tuple[str, str] | None:
    """(file kind, text) of a backup, or None when there is no such backup."""
    name = f"{backup_id}.md"
    match = _BACKUP_NAME.match(name)
    if not match:
        return None
    data = read_if_regular(backups_dir / name)
    if data is None:
        return None
    return match.group(3), data.decode("utf-8", "surrogateescape")


def rewrite_backups(backups_dir: Path, transform: Callable[[str], str]) -> int:
    """Apply ``transform`` to every backup and rewrite (atomically) those it changes."""
    if not backups_dir.is_dir():
        return 0
    rewritten = 0
    for path in sorted(backups_dir.iterdir()):
        if not _BACKUP_NAME.match(path.name):
            continue
        try:
            data = read_if_regular(path)
        except OSError as exc:
            raise generalize(exc, path.name, "read", label=f"the backup {path.name}") from None
        if data is None:  # pruned by a concurrent write since the listing, or not a backup
            continue
        text = data.decode("utf-8", "surrogateescape")
        new = transform(text)
        if new == text:
            continue
        try:
            _write_private(backups_dir, path.name, new)
        except OSError as exc:
            raise generalize(exc, path.name, "written", label=f"the backup {path.name}") from None
        rewritten += 1
    return rewritten
