"""Replacing a memory file without ever destroying a save the daemon has not seen.

A plain ``rename(temp, MEMORY.md)`` destroys whatever is at MEMORY.md at that
instant: an editor save that lands between the daemon's last check and its
rename is gone. So the daemon *exchanges* the two names instead
(``renameat2(RENAME_EXCHANGE)``, atomic): its new version takes the file's
place and the file it replaced is now under the temp name, where it is read
and compared with the version the daemon based its write on. When they differ,
a save landed meanwhile: its bytes are returned (``Replaced.displaced``) for
the caller to keep in a backup and put back, and nothing of it is lost.

An editor that writes in place (truncate, then write) may still be writing
into the file it had open when the daemon displaced it, so a displaced file
that is not the expected one is read only once it has stopped changing
(``settled_stat``). Reads of a changed file wait the same way, so the daemon
never takes a half-written save for the user's.

Where the filesystem refuses the exchange, the old way is used: compare right
before a plain rename (a window of a few microseconds remains there).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NotRequired, TypedDict

import structlog

from makad.private_files import open_folder, open_regular, read_if_regular, read_open, read_regular

# (st_ino, st_size, st_mtime_ns, st_ctime_ns): what tells one version of a file from the
# next without reading it. The change time is the one a tool cannot put back: `touch -r`,
# `cp -p` and `rsync -t` restore the mtime of a file they rewrote in place, and any
# write or utime moves the ctime (``makad.store.tracked`` reads again a version whose
# ctime was too recent to tell it from a later one).
Signature = tuple[int, int, int, int]

# A file changed less than this long ago may still be being written (in place).
QUIET_NS: Final = 50_000_000
# An empty file that was not empty is most likely an in-place save between its
# truncate and its write: it gets longer to fill (``MAKAD_EMPTY_SAVE_WAIT_MS``).
EMPTY_QUIET_NS: Final = 1_000_000_000
# A file that vanished may be a save that renamed the old one away (vim): it may
# come back this soon (``MAKAD_MISSING_SAVE_WAIT_MS``).
MISSING_GRACE_NS: Final = 500_000_000
# The longest a settle waits, beyond an emptied file's own wait.
MAX_SETTLE_S: Final = 2.0
_NAP_S: Final = 0.01

log = structlog.get_logger("makad.file_swap")

_RENAME_NOREPLACE: Final = 1
_RENAME_EXCHANGE: Final = 2
_UNSUPPORTED: Final = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})


@dataclass(frozen=True)
class SaveWaits:
    """How long a file found emptied (``emptied_ns``, counted from its mtime) is given to
    fill, and one found gone (``missing_ns``, counted from when it was found so) to come
    back, before it is taken as the user's empty or deleted file."""

    emptied_ns: int = EMPTY_QUIET_NS
    missing_ns: int = MISSING_GRACE_NS


DEFAULT_WAITS: Final = SaveWaits()


class ChangedUnderfoot(Exception):
    """The file changed on disk between the daemon's read and its rename; nothing was lost."""


@dataclass(frozen=True)
class Displaced:
    """A save the daemon's rename displaced: its bytes and when they were written."""

    data: bytes
    mtime_ns: int


@dataclass(frozen=True)
class Replaced:
    """One replacement: what was written, and a save it displaced, if any."""

    sha256: str
    signature: Signature
    # time.time_ns() right before the rename: the new version was not visible earlier.
    visible_ns: int
    displaced: Displaced | None = None


def signature_of(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _renameat2() -> Callable[[int, bytes, bytes, int], int] | None:
    try:
        function = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    function.restype = ctypes.c_int

    def call(folder: int, src: bytes, dst: bytes, flags: int) -> int:
        return int(function(folder, src, folder, dst, flags))

    return call


_RENAMEAT2: Final = _renameat2()


def _rename2(folder: int, src: str, dst: str, flags: int) -> bool:
    """renameat2 of two names in ``folder`` with ``flags``; False where the system or
    filesystem does not offer it."""
    if _RENAMEAT2 is None:
        return False
    if _RENAMEAT2(folder, os.fsencode(src), os.fsencode(dst), flags) == 0:
        return True
    code = ctypes.get_errno()
    if code in _UNSUPPORTED:
        return False
    raise OSError(code, os.strerror(code), str(dst))


def _nap(seconds: float) -> None:
    """Every wait of a settle (one place, so a test can act while the daemon waits)."""
    time.sleep(seconds)


def settled_stat(
    path: Path | str,
    *,
    was_empty: bool = False,
    existed: bool = True,
    waits: SaveWaits = DEFAULT_WAITS,
    dir_fd: int | None = None,
) -> os.stat_result | None:
    """``lstat(path)`` once the file has stopped changing (None when it is gone).

    Waits until its mtime is ``QUIET_NS`` old (``waits.emptied_ns`` for an empty file
    where ``was_empty`` is false), and up to ``waits.missing_ns`` for a missing file
    that ``existed`` to come back; never longer than ``MAX_SETTLE_S`` plus the longer
    of the two in all. Each wait for an emptied or a missing file is logged once (rare:
    a save caught half-way; and what makes such a read slow). ``dir_fd``: ``path`` is a
    name in that folder.
    """
    deadline = time.monotonic() + MAX_SETTLE_S + max(waits.emptied_ns, waits.missing_ns) / 1e9
    missing_until = time.monotonic() + (waits.missing_ns / 1e9 if existed else 0.0)
    told = ""
    while True:
        try:
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            if time.monotonic() >= min(missing_until, deadline):
                return None
            if told != "missing":
                told = "missing"
                log.info("waiting_for_missing_file", file=os.path.basename(path))
            _nap(_NAP_S)
            continue
        if not stat.S_ISREG(st.st_mode):
            return st
        emptied = st.st_size == 0 and not was_empty
        wait_ns = st.st_mtime_ns + (waits.emptied_ns if emptied else QUIET_NS) - time.time_ns()
        if wait_ns <= 0 or time.monotonic() >= deadline:
            return st
        if emptied and told != "emptied":
            told = "emptied"
            log.info("waiting_for_emptied_file", file=os.path.basename(path))
        # Short naps: a writer that finishes early is noticed at once.
        _nap(min(wait_ns / 1e9 + 0.001, _NAP_S, max(deadline - time.monotonic(), 0.0)))


def read_settled(
    path: Path | str,
    max_bytes: int,
    *,
    was_empty: bool = False,
    existed: bool = True,
    waits: SaveWaits = DEFAULT_WAITS,
    dir_fd: int | None = None,
) -> tuple[os.stat_result, bytes] | None:
    """The file's stat and bytes (up to ``max_bytes + 1``) once it has stopped changing."""
    last: tuple[os.stat_result, bytes] | None = None
    for _ in range(20):
        st = settled_stat(path, was_empty=was_empty, existed=existed, waits=waits, dir_fd=dir_fd)
        if st is None:
            return None
        if not stat.S_ISREG(st.st_mode):
            return st, b""
        read = _read_now(path, max_bytes + 1, dir_fd)
        if read is None:
            continue  # a symlink now: the next stat says so
        last = read
        if signature_of(read[0]) == signature_of(st):
            break
    if last is None:  # a symlink at every look
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=False), b""
    return last  # (still changing after all that: the last read)


def _read_now(path: Path | str, limit: int, dir_fd: int | None) -> tuple[os.stat_result, bytes] | None:
    """The file's stat and bytes, opened without following a symlink (None: it is one now)
    or waiting on a FIFO put there since the caller's stat (its stat, no bytes)."""
    try:
        fd = open_regular(path, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        return None
    try:
        after = os.fstat(fd)
        return after, read_open(fd, path, limit) if stat.S_ISREG(after.st_mode) else b""
    finally:
        os.close(fd)


class SwapTerms(TypedDict):
    """What a verified replace checks and does besides writing (``replace_verified``)."""

    expect_sha: str | None
    max_bytes: int
    keep: Callable[[bytes], None]
    mtime_ns: NotRequired[int | None]
    before_rename: NotRequired[Callable[[], None] | None]
    waits: NotRequired[SaveWaits]


def replace_verified(
    path: Path,
    data: bytes,
    *,
    expect_sha: str | None,
    max_bytes: int,
    keep: Callable[[bytes], None],
    mtime_ns: int | None = None,
    before_rename: Callable[[], None] | None = None,
    waits: SaveWaits = DEFAULT_WAITS,
) -> Replaced:
    """Put ``data`` at ``path``, which must hold the bytes whose sha256 is ``expect_sha``
    (None: no file at all).

    Raises ``ChangedUnderfoot`` when the file appeared or vanished since (nothing
    changed on disk). When another save was there instead, ``keep`` gets its bytes
    (to back them up) before its file goes, and it is returned as ``displaced``.
    ``mtime_ns`` gives the new file that mtime (a save put back keeps its own);
    ``before_rename`` runs right before the rename (the fault seam: ``makad.faults``);
    ``waits``: how long a displaced file found emptied is given to fill.
    """
    # Every name is looked up in the folder opened here, never through a symlink: one put
    # in the folder's place meanwhile (by someone who can write the folder above) cannot
    # lead the write, or the removal of the temp file, into another folder.
    folder = open_folder(path.parent)
    name = path.name
    tmp: str | None = None
    fd = -1  # open until the file is in place: its signature is taken there (``_in_place``)
    try:
        tmp = f".{name}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, _CREATE_TEMP, 0o600, dir_fd=folder)
        os.fchmod(fd, 0o600)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if mtime_ns is not None:
            os.utime(fd, ns=(time.time_ns(), mtime_ns))
        os.fsync(fd)
        written = os.fstat(fd)
        sha = hashlib.sha256(data).hexdigest()
        if before_rename is not None:
            before_rename()
        visible_ns = time.time_ns()
        if expect_sha is None:
            _create(folder, tmp, name, path)
            tmp = None
            os.fsync(folder)
            return Replaced(sha, _in_place(fd, written), visible_ns)
        if not _exchange(folder, tmp, name, path, expect_sha, max_bytes):
            tmp = None  # renamed over the file the old way
            os.fsync(folder)
            return Replaced(sha, _in_place(fd, written), visible_ns)
        os.fsync(folder)
        signature = _in_place(fd, written)
        displaced = _displaced(folder, tmp, expect_sha, max_bytes, waits)
        if displaced is not None:
            keep(displaced.data)
        return Replaced(sha, signature, visible_ns, displaced)
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
        os.close(folder)


_CREATE_TEMP: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _in_place(fd: int, written: os.stat_result) -> Signature:
    """The new file's signature at its place: the rename moved its ctime, so it is taken
    again through the descriptor of the file written. When more than the ctime moved (a
    save went into it already), the signature from before the rename, which the next
    check tells from the file (and the daemon then reads what was saved)."""
    now = os.fstat(fd)
    if (now.st_ino, now.st_size, now.st_mtime_ns) == (written.st_ino, written.st_size, written.st_mtime_ns):
        return signature_of(now)
    return signature_of(written)


def _create(folder: int, tmp: str, name: str, path: Path) -> None:
    """Rename ``tmp`` to ``name`` only if nothing is there (else ChangedUnderfoot)."""
    try:
        if _rename2(folder, tmp, name, _RENAME_NOREPLACE):
            return
        # Fails rather than replace, like RENAME_NOREPLACE.
        os.link(tmp, name, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
    except FileExistsError:
        raise ChangedUnderfoot(str(path)) from None
    os.unlink(tmp, dir_fd=folder)


def _exchange(folder: int, tmp: str, name: str, path: Path, expect_sha: str, max_bytes: int) -> bool:
    """Swap ``tmp`` and ``name``; False when it fell back to compare-then-rename."""
    try:
        if _rename2(folder, tmp, name, _RENAME_EXCHANGE):
            return True
    except FileNotFoundError:
        raise ChangedUnderfoot(str(path)) from None
    try:
        current = read_regular(name, max_bytes + 1, dir_fd=folder)
    except FileNotFoundError:
        raise ChangedUnderfoot(str(path)) from None
    if hashlib.sha256(current).hexdigest() != expect_sha:
        raise ChangedUnderfoot(str(path))
    os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    return False


def _displaced(folder: int, tmp: str, expect_sha: str, max_bytes: int, waits: SaveWaits) -> Displaced | None:
    """What the exchange put under the temp name, if it is not the expected version."""
    data = read_if_regular(tmp, max_bytes + 1, dir_fd=folder)
    if data is None:
        return None  # not a file (a symlink swapped in): nothing of the user's to keep
    if hashlib.sha256(data).hexdigest() == expect_sha:
        return None
    # An in-place save may still be writing into it: read it once it is done.
    settled = read_settled(tmp, max_bytes, waits=waits, dir_fd=folder)
    if settled is None:
        return None
    st, data = settled
    if hashlib.sha256(data).hexdigest() == expect_sha:
        return None
    return Displaced(data, st.st_mtime_ns)
