"""The connection/transaction helper every area of the ledger is built on.

Threads: one writer connection (every write is one ``BEGIN IMMEDIATE``
transaction under a lock) and one reader connection with its own lock. In WAL
mode the reader sees the last committed state, so a slow search never holds up
an append, and a write never blocks a read.

Durability: WAL with ``synchronous=FULL``. ``NORMAL`` already survives
``kill -9`` of the daemon (a committed transaction is in the WAL file and the OS
page cache); ``FULL`` also fsyncs the WAL at every commit, so an acknowledged
append survives power loss too. Measured on the development VM (2 vCPU,
virtio disk, ~200-character events), idle / with a neighbour loading the disk:
100-event batches 26k / 16k events/s with FULL vs 30k / 23k with NORMAL;
one-event transactions 2.9k / 0.3k per second vs 7.5k / 3.6k. An agent appends
a turn at a time, at most a few per second, so FULL's fsync per commit is
affordable; ``synchronous="NORMAL"`` is a constructor option for bulk imports.
Concurrent appends share one commit and its fsync (``group_commit``).

A corrupt database is moved aside and replaced by a fresh one, at open or at
the first call that meets the damage (``makad.store.ledger.recovery``).

A full disk at open (no room for the shared-memory index WAL needs) opens the file
read-only instead, when the file alone is the whole ledger (``_open_read_only``): reads
are served, every write is refused with ``disk_full`` until an open for writing works.

Resting (``makad.store.ledger.pool``): a ledger not in use may have its connections closed
to bound the descriptors and memory of many workspaces; its next read or write opens them
again as a first open does (the file claimed, checked and recovered the same way).
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, Literal
from urllib.parse import quote

from makad import heap
from makad.errors import IOFailure, MakadError
from makad.faults import UNARMED, Faults
from makad.private_files import (
    NotPrivate,
    check_companion,
    check_own_file,
    create_private,
    make_dirs,
    open_regular,
)
from makad.store.ledger.pool import LedgerPool
from makad.store.ledger.recovery import (
    LedgerCorrupt,
    LedgerIndexDamaged,
    LedgerNewer,
    LedgerOutOfMemory,
    LedgerReset,
    LedgerUndecodable,
    check_header,
    check_schema,
    failure,
    is_busy,
    lossy_text,
    move_aside,
    open_failure,
    schema_statement,
    write_failure,
)
from makad.store.ledger.rows import reindex_events
from makad.store.ledger.schema import MIGRATIONS, migrate, user_version
from makad.store.ledger.shown_cache import ShownCache

# SQLite's page caches: up to this much per connection (two per workspace), and
# all of SQLite's memory in the process held near the soft limit (SQLite then
# recycles cache pages instead of growing). Without the process-wide limit the
# caches grew with every workspace opened and every MB its ledger gained; reads
# past the cache come from the OS page cache, which build_context barely notices
# (measured at 100,000 events).
CACHE_KIB_PER_CONNECTION: Final = 8192
SQLITE_SOFT_HEAP_LIMIT_BYTES: Final = 8 << 20
# How long a write waits for another process's lock on the file (a `sqlite3` shell in a
# transaction) before it fails with ``ledger_busy``. For as long again after one write
# waited that long in vain, writes try only briefly: a crowd queued behind it is answered
# in about one timeout, not one timeout each in turn.
BUSY_TIMEOUT_MS: Final = 10_000
BUSY_RETRY_MS: Final = 100
_UNSAFE: Final = (
    "a ledger file is a symlink, a FIFO, a hard link or not yours: makad does not open it "
    "(remove it from the workspace's data directory)"
)

Synchronous = Literal["FULL", "NORMAL"]
# A WAL file this long or shorter holds no frame (its header is 32 bytes).
WAL_HEADER_BYTES: Final = 32
# While the ledger is read-only, reads try to open it for writing this often at most
# (writes try at every call): freed space is noticed without a write.
READ_ONLY_RETRY_S: Final = 5.0


def now_ms() -> int:
    """Wall-clock time in Unix milliseconds."""
    return time.time_ns() // 1_000_000


class LedgerBase:
    """One workspace's SQLite file: its two connections, their locks and transactions,
    and recovery from a damaged file. The areas of ``Ledger`` build on this.

    ``resets`` lists the corrupt files moved aside, ``generation`` counts them.
    ``before_first_write`` runs (under the write lock) before the first write
    until it returns True: the workspace binds its identity there.
    ``faults`` (armed by tests only, ``makad.faults``) may shorten the busy timeout.
    """

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "FULL",
        before_first_write: Callable[[], bool] | None = None,
        faults: Faults = UNARMED,
        pool: LedgerPool | None = None,
    ) -> None:
        self.path = path
        self._faults = faults
        # How long a write waits for another process's lock (shortened by tests only).
        self._busy_timeout_ms = faults.busy_timeout_ms or BUSY_TIMEOUT_MS
        self._pool = pool
        # Connections closed by the pool, opened again by the next read or write; the
        # file as they left it (closing the last connection checkpoints the WAL into it).
        self._resting = False
        self._rested_as: tuple[int, int, int, int] | None = None
        make_dirs(path.parent)
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        # Search term document frequencies (the search area): valid for this file only.
        # term → (matches, newest event id then, whether the count is whole): see search.py
        self._df_cache: dict[str, tuple[int, int, bool]] = {}
        # What each session was shown of memory (the turns area): see shown_cache.py.
        self._shown_cache = ShownCache()
        heap.track_cache("shown_memory", self._shown_cache)
        # Run after the current write transaction committed, under the write lock.
        self._on_commit: list[Callable[[], None]] = []
        self._synchronous = synchronous
        self._before_first_write = before_first_write
        # Statements made part of the next write transaction, whichever it is, by key (a
        # later one replaces an earlier one): see ``with_next_write``.
        self._with_next_write: dict[str, Callable[[sqlite3.Connection], object]] = {}
        self._riders_lock = threading.Lock()  # held only to change or copy that dict
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        # When a write last waited the whole busy timeout in vain (``_begin_write``).
        self._busy_at: float | None = None
        # Committed write transactions since the ledger was made, derived ones (vectors) left
        # out (read without a lock: an int, only ever increased under the write lock).
        self.write_count = 0
        self.generation = 0
        # Bumped when a damaged search index was rebuilt (the memory index is then empty).
        self.index_generation = 0
        self.resets: list[LedgerReset] = []
        # When (Unix ms) the file was opened read-only for want of disk space, else None.
        self.read_only_since: int | None = None
        self._read_only_tried = 0.0  # time.monotonic() of the last try to leave it
        self._first_open()
        if pool is not None:
            pool.used(self)

    def _first_open(self) -> None:
        """Open the file as the daemon's start does: a damaged or newer one moved aside, a
        full disk served read-only when it can be."""
        try:
            self._open()
        except LedgerNewer as exc:
            self._replace("newer_at_open", label="newer", versions=exc.versions())
        except LedgerCorrupt:
            self._replace("corrupt_at_open")
        except IOFailure as exc:
            if exc.details.get("reason") != "disk_full" or not self._open_read_only():
                raise

    def rest(self) -> bool:
        """Close both connections if no thread is using the ledger (never waits), to be
        opened again by the next read or write; whether it did. A ledger open read-only
        (a full disk) is left as it is."""
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            if not self._read_lock.acquire(blocking=False):
                return False
            try:
                if self._resting or self.read_only_since is not None or self._writer is None:
                    return False
                for conn in (self._reader, self._writer):
                    if conn is not None:
                        with contextlib.suppress(sqlite3.Error):
                            conn.close()
                self._reader = self._writer = None
                self._shown_cache.clear()
                self._rested_as = _file_version(self.path)
                self._resting = True
                if self._pool is not None:
                    self._pool.forget(self)
                return True
            finally:
                self._read_lock.release()
        finally:
            self._write_lock.release()

    @property
    def resting(self) -> bool:
        return self._resting

    def _wake(self) -> None:
        """Open a resting ledger's connections again (both locks held). The file is the
        one a first open would find: when it is not the file as it was put to rest (deleted,
        replaced or written to meanwhile), what was cached from the old one is dropped and
        ``generation`` moves on, so the service forgets its own caches too."""
        if not self._resting:
            return
        same_file = self._rested_as is not None and _file_version(self.path) == self._rested_as
        generation = self.generation
        self._first_open()
        self._resting = False
        if self.generation == generation and not same_file:
            self._df_cache.clear()
            self._shown_cache.clear()
            self.generation += 1

    def _touch(self) -> None:
        """Tell the pool this ledger is in use (a lock held; it may rest others)."""
        if self._pool is not None:
            self._pool.used(self)

    def _open(self) -> None:
        """Open (creating) the database at ``path``; ``LedgerCorrupt`` when it is unusable."""
        header = self._claim()
        opened: list[sqlite3.Connection] = []
        try:
            check_header(header)
            opened.append(_connect(self.path, self._synchronous, self._busy_timeout_ms))
            migrate(opened[0])
            check_schema(opened[0])
            opened.append(_connect(self.path, self._synchronous, self._busy_timeout_ms))
        except Exception as exc:
            # Nothing is written yet: whatever fails here that is not the environment
            # (open_failure tells them apart) means the file cannot serve as a ledger —
            # including a damaged record that decodes to the wrong type.
            for conn in opened:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            raise open_failure(exc, self.path.parent) from exc
        self._writer, self._reader = opened

    def _open_read_only(self) -> bool:
        """Open the file for reading only, with no shared-memory index (``immutable``): the
        reads a full disk still allows. Only when no WAL frame is outside the file (a clean
        stop checkpoints them all: the file is then the whole ledger) and its schema is this
        code's (nothing can be migrated); else False."""
        try:
            if os.stat(f"{self.path}-wal").st_size > WAL_HEADER_BYTES:
                return False
        except FileNotFoundError:
            pass
        except OSError:
            return False
        try:
            conn = sqlite3.connect(
                f"file:{quote(os.fspath(self.path))}?immutable=1",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error:
            return False
        try:
            conn.execute("PRAGMA query_only = ON")
            conn.execute(f"PRAGMA cache_size = -{CACHE_KIB_PER_CONNECTION}")
            conn.execute("PRAGMA temp_store = MEMORY")
            if user_version(conn) != len(MIGRATIONS):
                raise LedgerCorrupt("a schema this code does not read as it is", reason="ledger_corrupt")
            check_schema(conn)
        except Exception:  # whatever it is, the ledger stays unopened as it was
            conn.close()
            return False
        self._reader = conn
        self.read_only_since = now_ms()
        self._read_only_tried = time.monotonic()
        return True

    def leave_read_only(self) -> None:
        """Open a read-only ledger for writing, or raise why it cannot be (``disk_full``
        while the disk is still full). Nothing to do when it is not read-only."""
        if self.read_only_since is None:
            return
        with self._write_lock, self._read_lock:
            if self.read_only_since is None:
                return
            self._read_only_tried = time.monotonic()
            reader = self._reader
            try:
                self._open()
            except OSError as exc:  # the file itself, before SQLite opens it
                raise open_failure(exc) from exc
            if reader is not None:
                reader.close()
            self.read_only_since = None
            self._df_cache.clear()

    def _claim(self) -> bytes:
        """Make sure what SQLite opens at ``path`` is a regular file of ours (created
        exclusively, mode 0600, when missing), and that its ``-wal``, ``-shm`` and
        ``-journal`` are too or absent: SQLite follows symlinks, so one planted there would
        have it write into another file. Returns the database's header (100 bytes)."""
        try:
            for suffix in ("-wal", "-shm", "-journal"):
                check_companion(f"{self.path}{suffix}")
            with contextlib.suppress(FileExistsError):
                os.close(create_private(self.path))
            fd = open_regular(self.path)
            try:
                st = check_own_file(fd, self.path)
                header = os.pread(fd, 100, 0)
            finally:
                os.close(fd)
        except NotPrivate as exc:
            raise IOFailure(_UNSAFE, reason="unsafe_file", file=os.path.basename(exc.path)) from None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise IOFailure(_UNSAFE, reason="unsafe_file", file=self.path.name) from None
        self._identity = (st.st_dev, st.st_ino)
        return header

    def recover(self, found: IOFailure, generation: int) -> None:
        """Called by a method that met ``found`` (see ``recovering``): reset or decode lossily."""
        with self._write_lock, self._read_lock:
            if generation != self.generation:
                return  # a concurrent call has already reset the ledger
            self._wake()
            if generation != self.generation:
                return  # the file put to rest is no longer there: nothing to repair in it
            if isinstance(found, LedgerUndecodable):
                for conn in (self._writer, self._reader):
                    if conn is not None:
                        conn.text_factory = lossy_text
                return
            if self.read_only_since is not None:
                # Nothing is repaired or moved aside before there is room to start over.
                raise IOFailure("the disk is full: the ledger is open read-only", reason="disk_full")
            if isinstance(found, LedgerOutOfMemory):
                if self._intact():
                    # Not damage: said as it is, and nothing is moved or rebuilt.
                    raise IOFailure("the ledger ran out of memory", reason="out_of_memory")
                found = LedgerIndexDamaged("the ledger's search index is damaged", reason="index_damaged")
            if isinstance(found, LedgerIndexDamaged) and self._rebuild_indexes():
                return
            self._replace("corrupt")

    def _intact(self) -> bool:
        """Whether the pages and both full-text indexes pass SQLite's own checks (locks held)."""
        conn = live(self._writer)
        try:
            if conn.execute("PRAGMA quick_check(1)").fetchall() != [("ok",)]:
                return False
            for name in ("events_fts", "memory_fts"):
                conn.execute(f"INSERT INTO {name} ({name}) VALUES ('integrity-check')")
        except (sqlite3.Error, MemoryError):
            return False
        return True

    def _rebuild_indexes(self) -> bool:
        """Drop and re-create both full-text indexes from the events (locks held); the
        memory index comes back empty and ``index_generation`` tells the service to fill
        it again. False when that fails too: the file is then damaged beyond the index."""
        conn = live(self._writer)
        try:
            conn.execute("BEGIN IMMEDIATE")
            for name in ("events_fts", "memory_fts"):
                conn.execute(f"DROP TABLE IF EXISTS {name}")
                conn.execute(schema_statement(name))
            reindex_events(conn)
            conn.execute("COMMIT")
        except (sqlite3.Error, MemoryError):
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            return False
        self.index_generation += 1
        return True

    def _replace(
        self, cause: str, *, label: str = "corrupt", versions: tuple[int, int] | None = None
    ) -> None:
        """Move the damaged files (or a newer makad's: ``label`` ``newer``) aside, kept, and
        open a fresh database (locks held or init)."""
        for conn in (self._reader, self._writer):
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        self._reader = self._writer = None
        at = now_ms()
        try:
            moved = move_aside(self.path, at, label)
        except OSError as exc:
            raise IOFailure("the corrupt ledger could not be moved aside") from exc
        self._open()
        self._df_cache.clear()
        self._shown_cache.clear()
        with self._riders_lock:
            self._with_next_write.clear()  # they were for the file moved aside
        self.generation += 1
        self.resets.append(LedgerReset(at=at, moved_to=moved.name, cause=cause, versions=versions))

    def close(self) -> None:
        """Close both connections, having written what waits for the next write
        (``with_next_write``) when the disk allows — not when no write has bound the
        ledger yet (a workspace only read: that write would create its ``memory/``); later
        calls fail with IOFailure."""
        if self._with_next_write and self._before_first_write is None:
            with contextlib.suppress(MakadError, sqlite3.Error, OSError), self._writing():
                pass
        with self._write_lock, self._read_lock:
            self._resting = False
            if self._pool is not None:
                self._pool.closed(self)
            for conn in (self._reader, self._writer):
                if conn is not None:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("PRAGMA optimize")
                    conn.close()
            self._reader = self._writer = None
            self._shown_cache.clear()

    def transaction(
        self, *, relaxed: bool = False, derived: bool = False
    ) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A write transaction, for stores that keep their own tables in this ledger.
        ``derived``: it writes only what is computed again from the rest (the semantic
        channel's vectors), so it is not counted in ``write_count``: whoever watches that
        for new input (the attention keeper) has nothing to look at again."""
        return self._writing(relaxed=relaxed, derived=derived)

    def with_next_write(self, key: str, write: Callable[[sqlite3.Connection], object]) -> None:
        """Run ``write`` inside the next write transaction that commits, whichever it is (a
        later one under the same ``key`` replaces it): for a record that must not be a write
        of its own (a read writes nothing) yet should be kept once anything is written.
        A write under way either runs it or leaves it for the next (never waited for)."""
        with self._riders_lock:
            self._with_next_write[key] = write

    def snapshot(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """A read transaction, for stores that keep their own tables in this ledger."""
        return self._reading()

    @contextlib.contextmanager
    def _writing(self, *, relaxed: bool = False, derived: bool = False) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction on the writer, committed on success.

        ``relaxed``: commit without fsyncing the WAL (synchronous=NORMAL) — for records
        that may be lost to a power cut without harm (manifests); the next durable
        commit fsyncs them anyway.
        """
        if self.read_only_since is not None:
            self.leave_read_only()
        with self._write_lock:
            if self._resting:
                with self._read_lock:
                    self._wake()
                if self.read_only_since is not None:
                    raise IOFailure("the disk is full: the ledger is open read-only", reason="disk_full")
            conn = live(self._writer)
            self._touch()
            self._check_file()
            if self._before_first_write is not None and self._before_first_write():
                self._before_first_write = None
            if relaxed:
                conn.execute("PRAGMA synchronous = NORMAL")
            self._on_commit = []
            with self._riders_lock:
                riders = dict(self._with_next_write)
            try:
                self._begin_write(conn)
                for key, rider in riders.items():
                    try:
                        rider(conn)
                    except sqlite3.IntegrityError:  # it can never be written: not tried again
                        with self._riders_lock:
                            if self._with_next_write.get(key) is rider:
                                del self._with_next_write[key]
                yield conn
                conn.execute("COMMIT")
                if not derived:
                    self.write_count += 1
                self._busy_at = None
                with self._riders_lock:
                    for key, rider in riders.items():
                        if self._with_next_write.get(key) is rider:
                            del self._with_next_write[key]
                for hook in self._on_commit:
                    hook()
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error) and is_busy(exc) and not self._recently_busy():
                    self._busy_at = time.monotonic()
                if isinstance(exc, sqlite3.Error):
                    found = write_failure(exc, self.path.parent)
                    if type(found) is IOFailure and _damaged(conn, exc):
                        found = LedgerCorrupt("the ledger database is corrupt", reason="ledger_corrupt")
                    raise found from exc
                raise
            finally:
                if relaxed:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute(f"PRAGMA synchronous = {self._synchronous}")

    def _check_file(self) -> None:
        """Refuse to write when the database file was deleted or replaced under us.

        SQLite would go on writing to the unlinked inode: every acknowledged write
        would then vanish at the next start. Refusing is what a user can act on.
        """
        try:
            st = os.stat(self.path)
        except OSError:
            raise IOFailure("the ledger file is missing", reason="ledger_missing") from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise IOFailure("the ledger file was replaced", reason="ledger_replaced")

    def _recently_busy(self) -> bool:
        at = self._busy_at
        return at is not None and time.monotonic() - at < self._busy_timeout_ms / 1000

    def _begin_write(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, waiting the busy timeout for another process's lock, or
        only ``BUSY_RETRY_MS`` soon after a write waited that long in vain (write lock held)."""
        if not self._recently_busy():
            conn.execute("BEGIN IMMEDIATE")
            return
        conn.execute(f"PRAGMA busy_timeout = {BUSY_RETRY_MS}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """One read transaction (a consistent snapshot) on the reader."""
        if self.read_only_since is not None and time.monotonic() - self._read_only_tried > READ_ONLY_RETRY_S:
            with contextlib.suppress(IOFailure):
                self.leave_read_only()
        with self._read_lock_awake():
            conn = live(self._reader)
            try:
                conn.execute("BEGIN")
                yield conn
            except sqlite3.Error as exc:
                raise failure(exc, "the ledger read failed") from exc
            finally:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def _read_lock_awake(self) -> Iterator[None]:
        """The reader lock, held with the ledger open (woken first when resting: that takes
        the writer lock too, which is always taken before the reader's)."""
        while True:
            self._read_lock.acquire()
            if not self._resting:
                break
            self._read_lock.release()
            with self._write_lock, self._read_lock:
                self._wake()
        try:
            self._touch()
            yield
        finally:
            self._read_lock.release()

    def _meta(self, key: str) -> str | None:
        with self._reading() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _purge_forgotten(self) -> None:
        """Leave no trace of deleted rows: merge the deleted tokens out of the index
        (about 1.3 s on a million events), then empty the WAL, which still holds
        the old pages (``secure_delete`` has zeroed them in the database file).
        Best effort: the forget itself is already committed."""
        with contextlib.suppress(IOFailure), self._writing() as conn:
            conn.execute("INSERT INTO events_fts (events_fts) VALUES ('optimize')")
        with self._write_lock, self._read_lock, contextlib.suppress(sqlite3.Error):
            if self._resting:
                return  # closing the connections checkpointed the WAL already
            live(self._writer).execute("PRAGMA wal_checkpoint(TRUNCATE)")


def _connect(path: Path, synchronous: Synchronous, busy_timeout_ms: int) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
    )
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {synchronous}")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB_PER_CONNECTION}")
    conn.execute(f"PRAGMA soft_heap_limit = {SQLITE_SOFT_HEAP_LIMIT_BYTES}")
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _file_version(path: Path) -> tuple[int, int, int, int] | None:
    """(device, inode, change time, size) of a file, None when it cannot be read: a file
    deleted and made again can take the same inode, never the same change time as well."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_size)


def live(conn: sqlite3.Connection | None) -> sqlite3.Connection:
    if conn is None:
        raise IOFailure("the ledger is closed")
    return conn


def _damaged(conn: sqlite3.Connection, exc: sqlite3.Error) -> bool:
    """Whether a write error that names no corruption comes from a damaged file anyway.

    A damaged b-tree can surface as a constraint violation (an autoincrement id that
    collides) and a damaged header as "readonly"; only those errors pay for a check.
    """
    if not isinstance(exc, sqlite3.IntegrityError | sqlite3.OperationalError):
        return False
    if isinstance(exc, sqlite3.OperationalError) and "readonly" not in str(exc):
        return False
    try:
        rows = conn.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error:
        return True
    return rows != [("ok",)]
