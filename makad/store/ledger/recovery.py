"""A corrupt ledger never blocks a workspace: detect it, move it aside, start a fresh one.

The ledger is the daemon's own bookkeeping; MEMORY.md and PENDING.md are the
user's and do not depend on it. So when SQLite reports the database file
corrupt (``SQLITE_CORRUPT``: "database disk image is malformed", a truncated
file; ``SQLITE_NOTADB``: a garbage header) or a stored record is not valid JSON
any more, the ledger renames its files to ``ledger.sqlite3.corrupt-<unix ms>``
(with ``-wal``/``-shm``), keeps them, opens a fresh database at the same path
and retries the call once on it. That happens at open or at the first call that
runs into the damage, whichever comes first. The reset is recorded
(``Ledger.resets``) for the service to report and to react to: everything the
ledger held — settings included, so privacy switches fall back to their
defaults — is gone from the live workspace.

A ledger whose schema version is past this code's (a newer makad wrote it) is set aside
the same way at open, unchanged, as ``ledger.sqlite3.newer-<unix ms>`` (``LedgerNewer``):
it is not damaged, and the reset says which versions met.

Only corruption (and a newer schema) resets. A full disk, a permission error or any other IO error
is reported as ``io_error`` and nothing is moved: a healthy database must never
be put aside because the disk was briefly unhappy.

Text that is not UTF-8 (a flipped byte inside an event's text) is not a reason
to reset: the ledger switches its connections to a lossy decoder and retries,
and the damaged event then fails its hash check (``makad.core.chain``).
"""

from __future__ import annotations

import contextlib
import errno
import functools
import inspect
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import msgspec

from makad.errors import DISK_FULL_ERRNOS, IOFailure
from makad.store.ledger.schema import NewerLedger, migrate

# The settings key under which the workspace revision is persisted.
REVISION_KEY: Final = "__revision__"
# The settings keys under which the memory files' hashes (``short_hash``) at the stored
# revision are kept: a version found at the next open that differs was saved while the
# daemon did not watch (stopped, or the folder released), and the revision moves.
FILE_HASH_KEYS: Final = {"memory": "__memory_hash__", "pending": "__pending_hash__"}
SQLITE_BUSY: Final = 5
SQLITE_LOCKED: Final = 6
SQLITE_IOERR: Final = 10
SQLITE_CORRUPT: Final = 11
SQLITE_FULL: Final = 13
SQLITE_IOERR_SHMSIZE: Final = 10 | (19 << 8)
SQLITE_NOTADB: Final = 26
SQLITE_CORRUPT_VTAB: Final = SQLITE_CORRUPT | (1 << 8)
# How much room a failed ledger write's folder is asked for, to tell a spent quota apart
# from a failing disk (SQLite reports ENOSPC as SQLITE_FULL, every other errno, EDQUOT
# included, as a plain SQLITE_IOERR): a few of the pages a commit writes.
ROOM_PROBE_BYTES: Final = 64 * 1024
# Primary result codes that say something about the environment, not the file's
# content: at open these are reported (io_error) and the database is left alone.
ENVIRONMENTAL: Final = frozenset(
    {
        3,  # SQLITE_PERM
        5,  # SQLITE_BUSY
        6,  # SQLITE_LOCKED
        7,  # SQLITE_NOMEM
        8,  # SQLITE_READONLY
        9,  # SQLITE_INTERRUPT
        10,  # SQLITE_IOERR
        13,  # SQLITE_FULL
        14,  # SQLITE_CANTOPEN
        15,  # SQLITE_PROTOCOL
        23,  # SQLITE_AUTH
    }
)
MAX_ATTEMPTS: Final = 3
_UNDECODABLE_TEXT: Final = "Could not decode to UTF-8"


class LedgerCorrupt(IOFailure):
    """The database file is damaged; the ledger resets itself when it sees this."""


class LedgerNewer(LedgerCorrupt):
    """The database carries a schema version past this code's (a newer makad wrote it, and
    this one is older: a downgrade). Not damage: it is set aside unchanged, under a name
    that says so, and its versions are reported."""

    def versions(self) -> tuple[int, int]:
        """(the file's schema version, the newest this code reads)."""
        return int(self.details["userVersion"]), int(self.details["supported"])


class LedgerUndecodable(IOFailure):
    """A text column holds bytes that are not UTF-8."""


class LedgerIndexDamaged(IOFailure):
    """A full-text index is damaged: it is a projection, rebuilt from the events."""


class LedgerOutOfMemory(IOFailure):
    """SQLite ran out of memory: a damaged record can claim a size no allocation meets
    (SQLITE_NOMEM), so the ledger checks itself before calling it damage."""


@dataclass(frozen=True)
class LedgerReset:
    """One corrupt ledger moved aside: when, and where its files went."""

    at: int
    moved_to: str  # the file name, next to the ledger
    cause: str  # "corrupt_at_open" | "corrupt" | "newer_at_open"
    # "newer_at_open": the file's schema version and the newest this code reads.
    versions: tuple[int, int] | None = None


def is_busy(exc: sqlite3.Error) -> bool:
    """Whether SQLite gave up waiting for a lock another connection holds (SQLITE_BUSY,
    SQLITE_LOCKED): another process in a transaction on the file."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (SQLITE_BUSY, SQLITE_LOCKED)


def failure(exc: sqlite3.Error, message: str) -> IOFailure:
    """The error a SQLite failure becomes: corruption and undecodable text are told apart,
    and so are a lock another process holds and a full disk."""
    code = getattr(exc, "sqlite_errorcode", None)
    if is_busy(exc):
        return IOFailure(
            "the ledger is locked by another process: try again once it lets go", reason="ledger_busy"
        )
    if isinstance(code, int) and (code & 0xFF == SQLITE_FULL or code == SQLITE_IOERR_SHMSIZE):
        # SHMSIZE: no room for the shared-memory index a WAL ledger is opened with.
        return IOFailure(f"the disk is full: {message}", reason="disk_full")
    if isinstance(exc, sqlite3.OperationalError) and str(exc).startswith(_UNDECODABLE_TEXT):
        return LedgerUndecodable("the ledger holds text that is not UTF-8", reason="not_utf8")
    if code == SQLITE_CORRUPT_VTAB or "fts5" in str(exc):
        return LedgerIndexDamaged("the ledger's search index is damaged", reason="index_damaged")
    if isinstance(code, int) and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return LedgerCorrupt("the ledger database is corrupt", reason="ledger_corrupt")
    return IOFailure(message)


def write_failure(exc: sqlite3.Error, folder: Path) -> IOFailure:
    """What a failed ledger write in ``folder`` means (blocking): as ``failure`` says, but an
    I/O error while the folder's disk has no room left for this user (a quota spent, which
    SQLite cannot tell from a failing disk) is ``disk_full``, as ENOSPC is."""
    found = failure(exc, "the ledger write failed")
    code = getattr(exc, "sqlite_errorcode", None)
    if type(found) is IOFailure and isinstance(code, int) and code & 0xFF == SQLITE_IOERR:
        spent = no_room(folder)
        if spent is not None:
            return IOFailure("the disk is full: the ledger write failed", reason="disk_full", errno=spent)
    return found


def no_room(folder: Path) -> str | None:
    """``ENOSPC`` or ``EDQUOT`` when ``folder``'s disk has no room for ``ROOM_PROBE_BYTES``
    more for this user, else None (blocking). Asked with an unnamed file (``O_TMPFILE``),
    so nothing is left behind; where there is none, with a named one removed at once."""
    name: Path | None = None
    try:
        if hasattr(os, "O_TMPFILE"):
            fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, 0o600)
        else:  # pragma: no cover - macOS
            name = folder / f".room-{os.getpid()}-{os.urandom(4).hex()}"
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return errno.errorcode[exc.errno] if exc.errno in DISK_FULL_ERRNOS else None
    try:
        os.posix_fallocate(fd, 0, ROOM_PROBE_BYTES)
    except OSError as exc:
        return errno.errorcode[exc.errno] if exc.errno in DISK_FULL_ERRNOS else None
    finally:
        os.close(fd)
        if name is not None:
            with contextlib.suppress(OSError):
                os.unlink(name)
    return None


def open_failure(exc: BaseException, folder: Path | None = None) -> IOFailure:
    """What an error while opening a ledger means.

    At open the daemon has written nothing yet, so any failure that is not about
    the environment means the file cannot serve as a ledger: a damaged page or
    schema, a header that is not SQLite's, a schema version no makad wrote, an
    unreadable settings record. Those are ``LedgerCorrupt`` (the file is moved
    aside); the environmental ones stay plain ``IOFailure`` (``disk_full`` for no room,
    a spent quota told by ``folder``'s lack of room as ``write_failure`` does).
    """
    if isinstance(exc, OSError):
        if exc.errno in DISK_FULL_ERRNOS:
            return IOFailure("the disk is full: the ledger could not be created", reason="disk_full")
        return IOFailure("the ledger database could not be opened")
    if isinstance(exc, NewerLedger):
        return LedgerNewer(exc.message, reason="newer_ledger", **exc.details)
    if isinstance(exc, sqlite3.Error) and not isinstance(failure(exc, ""), LedgerUndecodable):
        code = getattr(exc, "sqlite_errorcode", None)
        if not isinstance(code, int) or code & 0xFF in ENVIRONMENTAL:
            said = failure(exc, "the ledger database could not be opened")
            if said.details.get("reason") in ("ledger_busy", "disk_full"):
                return said
            spent = None if folder is None or code is None or code & 0xFF != SQLITE_IOERR else no_room(folder)
            if spent is not None:
                return IOFailure(
                    "the disk is full: the ledger could not be opened", reason="disk_full", errno=spent
                )
            return IOFailure("the ledger database could not be opened")
    return LedgerCorrupt("the ledger database is unusable", reason="ledger_corrupt")


def check_schema(conn: sqlite3.Connection) -> None:
    """Raise ``LedgerCorrupt`` unless the schema is the one the migrations build and the
    small tables read back (settings are decoded: the privacy switches live there).

    Every table must be there, and every table, index and trigger there must be defined
    exactly as a freshly migrated ledger defines it: a flipped byte in the stored schema
    (a renamed column, say) would otherwise fail every later statement that uses it. A
    missing trigger or index is not damage to the data and is not a reason to start over.
    """
    expected = _expected_schema()
    found = dict(conn.execute(_SCHEMA_QUERY).fetchall())
    tables = {
        name
        for name, sql in expected.items()
        if sql.startswith("CREATE TABLE") or sql.startswith("CREATE VIRTUAL TABLE")
    }
    if not tables <= found.keys() or any(
        sql != expected[name] for name, sql in found.items() if name in expected
    ):
        raise LedgerCorrupt("the ledger schema is damaged", reason="ledger_corrupt")
    for (value,) in conn.execute("SELECT value FROM settings"):
        msgspec.json.decode(value)
    conn.execute("SELECT count(*) FROM meta").fetchone()
    conn.execute("SELECT count(*) FROM sessions").fetchone()


_MAGIC: Final = b"SQLite format 3\x00"


def check_header(header: bytes) -> None:
    """Raise ``LedgerCorrupt`` when the file's header (its first 100 bytes) is not one
    SQLite can write.

    A flipped bit in the read/write version bytes makes SQLite open the file
    read-only (every write then fails as if the disk were read-only) instead of
    reporting damage; an empty file is a new database.
    """
    if not header:
        return
    if (
        len(header) < 100
        or not header.startswith(_MAGIC)
        or header[18] not in (1, 2)
        or header[19] not in (1, 2)
    ):
        raise LedgerCorrupt("the ledger header is damaged", reason="ledger_corrupt")


_SCHEMA_QUERY: Final = "SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"


def schema_statement(name: str) -> str:
    """The statement that creates schema object ``name`` in a freshly migrated ledger."""
    return _expected_schema()[name]


@functools.cache
def _expected_schema() -> dict[str, str]:
    """Name → definition of each schema object a freshly migrated ledger has."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        migrate(conn)
        return dict(conn.execute(_SCHEMA_QUERY).fetchall())
    finally:
        conn.close()


def lossy_text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def move_aside(path: Path, at: int, label: str = "corrupt") -> Path:
    """Rename the database and its ``-wal``/``-shm`` files to ``<name>.<label>-<at>``
    (``label``: ``corrupt``, or ``newer`` for a ledger a newer makad wrote)."""
    target = path.with_name(f"{path.name}.{label}-{at}")
    suffix = 0
    while os.path.lexists(target):
        suffix += 1
        target = path.with_name(f"{path.name}.{label}-{at}-{suffix}")
    for extension in ("-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}{extension}", f"{target}{extension}")
    os.rename(path, target)
    return target


class Recoverable(Protocol):
    generation: int

    def recover(self, failure: IOFailure, generation: int) -> None: ...


L = TypeVar("L")
_F = TypeVar("_F", bound=Callable[..., Any])


def recovering(*, skip: frozenset[str]) -> Callable[[type[L]], type[L]]:
    """Class decorator: every public method recovers from corruption and retries.

    A call that meets a corrupt database asks the object to ``recover`` (reset,
    rebuild a damaged search index, or switch to lossy text) and runs again, at most ``MAX_ATTEMPTS`` times in
    all. ``generation`` tells a recovery already done by a concurrent call from
    one still to do. Any other SQLite error becomes ``IOFailure``.
    """

    def decorate(cls: type[L]) -> type[L]:
        # The class may be composed of mixins: every public method it has, wherever it
        # is defined, is guarded on the class itself (the mixins stay as they are).
        for name in dir(cls):
            member = inspect.getattr_static(cls, name)
            if name.startswith("_") or name in skip or not inspect.isfunction(member):
                continue
            setattr(cls, name, _guard(member))
        return cls

    return decorate


def _guard(method: _F) -> _F:
    @functools.wraps(method)
    def guarded(self: Recoverable, *args: Any, **kwargs: Any) -> Any:
        for attempt in range(MAX_ATTEMPTS):
            generation = self.generation
            try:
                return method(self, *args, **kwargs)
            except Exception as exc:
                found = damage(exc)
                if found is None:
                    if isinstance(exc, sqlite3.Error):
                        raise failure(exc, "the ledger failed") from exc
                    raise
                if attempt == MAX_ATTEMPTS - 1:
                    raise found from exc
                self.recover(found, generation)
        raise AssertionError("unreachable")

    return guarded  # type: ignore[return-value]  # functools.wraps keeps the signature mypy cannot see


def damage(exc: BaseException) -> IOFailure | None:
    """The damage a failed ledger call met, to ``recover`` from before running it again;
    None when the error is not one (a refusal, a bug, the environment)."""
    if isinstance(exc, LedgerCorrupt | LedgerUndecodable | LedgerIndexDamaged):
        return exc
    if isinstance(exc, MemoryError):
        return LedgerOutOfMemory("the ledger ran out of memory", reason="out_of_memory")
    if isinstance(exc, sqlite3.Error):
        found = failure(exc, "the ledger failed")
        return found if isinstance(found, LedgerCorrupt | LedgerUndecodable | LedgerIndexDamaged) else None
    if isinstance(exc, msgspec.ValidationError):
        return None  # well-formed JSON of another shape is a bug, not damage
    if isinstance(exc, msgspec.DecodeError | UnicodeDecodeError):
        # Not JSON any more, or SQLite describing a damaged schema in bytes that are
        # not UTF-8 (the sqlite3 module then fails to decode its message).
        return LedgerCorrupt("a ledger record is unreadable", reason="ledger_corrupt")
    return None
