"""The workspace ledger: sessions, their hash-chained events, and the daemon's own tables.

A synchronous IO shell over one SQLite file per workspace; the async service
calls it from worker threads. ``Ledger`` is one class composed of one area per
module, each a mixin over the connection/transaction helper ``LedgerBase``:

- ``base``: the two connections, their locks, ``BEGIN IMMEDIATE`` transactions,
  durability, and recovery from a damaged file (``recovery``);
- ``schema``: the tables and their migrations; ``rows``/``records``: what rows become;
- ``sessions``: sessions and events — append, read, retrieve, verify, forget;
- ``group_commit``: concurrent appends share one transaction and one fsync;
- ``search``: BM25 over the events and the memory index;
- ``turns``: working state, build_context manifests, compaction checkpoints;
- ``lineage``: memory lineage, rejections, intents, request records;
- ``episodes``: episodes and their consolidations;
- ``pack_state``: the pack's bookkeeping — entry dates, memory shown per session,
  the derived notes' progress;
- ``renames``: the one-time rename of sessions stored under an id holding a secret.

The pure rules the rows obey live in ``makad.core``: the hash chain
(``core.chain``), session ids and refs (``core.refs``), working-state patches
(``core.working_state``).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from makad.faults import UNARMED, Faults
from makad.store.ledger.base import Synchronous, now_ms
from makad.store.ledger.episodes import EpisodesArea
from makad.store.ledger.group_commit import GroupCommitArea
from makad.store.ledger.lineage import LineageArea
from makad.store.ledger.pack_state import PackStateArea
from makad.store.ledger.pool import LedgerPool
from makad.store.ledger.recovery import recovering
from makad.store.ledger.renames import RenamesArea
from makad.store.ledger.rows import BOUNDED_FROM_KEY
from makad.store.ledger.schema import SEARCH_TEXT_VERSION
from makad.store.ledger.search import SearchArea
from makad.store.ledger.turns import TurnsArea

__all__ = ["Ledger", "Synchronous", "now_ms"]


def _upsert_settings(conn: sqlite3.Connection, rows: list[tuple[str, str]]) -> None:
    conn.executemany("INSERT OR REPLACE INTO settings (key, value) VALUES (?, ?)", rows)


def _put_setting_if(conn: sqlite3.Connection, key: str, expected: Any, value: Any) -> bool:
    """Set one setting to ``value`` while it holds ``expected`` (None: while it is absent)."""
    encoded = msgspec.json.encode(value).decode()
    if expected is None:
        cursor = conn.execute("INSERT OR IGNORE INTO settings (key, value) VALUES (?, ?)", (key, encoded))
    else:
        cursor = conn.execute(
            "UPDATE settings SET value = ? WHERE key = ? AND value = ?",
            (encoded, key, msgspec.json.encode(expected).decode()),
        )
    return cursor.rowcount == 1


@recovering(skip=frozenset({"close", "append_many"}))  # append_many recovers per call
class Ledger(GroupCommitArea, SearchArea, TurnsArea, LineageArea, EpisodesArea, PackStateArea, RenamesArea):
    """One workspace's SQLite ledger. Thread-safe; every method is blocking IO.

    A corrupt database is moved aside and replaced by a fresh one, at open or at
    the first call that meets the damage (``makad.store.ledger.recovery``);
    ``resets`` lists those, ``generation`` counts them.
    ``before_first_write`` runs (under the write lock) before the first write
    until it returns True: the workspace binds its identity there.
    ``faults`` (armed by tests only, ``makad.faults``) may kill the process between the
    steps of ``group_commit``.
    """

    in_memory: ClassVar[bool] = False  # (makad.store.session_store: it blocks on SQLite)

    def __init__(
        self,
        path: Path,
        *,
        synchronous: Synchronous = "FULL",
        before_first_write: Callable[[], bool] | None = None,
        faults: Faults = UNARMED,
        pool: LedgerPool | None = None,
    ) -> None:
        super().__init__(
            path, synchronous=synchronous, before_first_write=before_first_write, faults=faults, pool=pool
        )
        self.refresh_search_text()

    def refresh_search_text(self) -> None:
        """Rebuild the search index when it was built by another search-text version.

        Public so that it is guarded like every other call: damage met while reading the
        version (a page the header check could not see) resets the ledger instead of
        escaping the constructor."""
        if self._meta("search_text_version") != SEARCH_TEXT_VERSION:
            self.rebuild_search_index()
        if self._meta(BOUNDED_FROM_KEY) is None:  # kept by a release that indexed events whole
            with self._writing() as conn:
                conn.execute(
                    "INSERT OR IGNORE INTO meta (key, value) SELECT ?, coalesce(max(id), 0) + 1 FROM events",
                    (BOUNDED_FROM_KEY,),
                )

    def get_settings_json(self) -> dict[str, Any]:
        """The workspace's persisted settings, key → decoded JSON value."""
        with self._reading() as conn:
            rows = conn.execute("SELECT key, value FROM settings ORDER BY key").fetchall()
        return {key: msgspec.json.decode(value) for key, value in rows}

    def put_settings_json(self, values: Mapping[str, Any], *, replace: bool = False) -> None:
        """Upsert settings (``replace=True`` drops every key not given)."""
        rows = [(key, msgspec.json.encode(value).decode()) for key, value in values.items()]
        with self._writing() as conn:
            if replace:
                conn.execute("DELETE FROM settings")
            _upsert_settings(conn, rows)

    def put_setting_if(self, key: str, expected: Any, value: Any) -> bool:
        """Set one setting to ``value`` only while it still holds ``expected`` (None: while it
        is absent); whether it did. A write that raced it and won is left as it is."""
        with self._writing() as conn:
            return _put_setting_if(conn, key, expected, value)

    def put_settings_with_next_write(self, values: Mapping[str, Any]) -> None:
        """``put_settings_json`` (an upsert) as part of the ledger's next write, whichever it
        is; a later call replaces an earlier one's values."""
        rows = [(key, msgspec.json.encode(value).decode()) for key, value in values.items()]
        self.with_next_write("settings", functools.partial(_upsert_settings, rows=rows))

    def put_setting_if_with_next_write(self, key: str, expected: Any, value: Any) -> None:
        """``put_setting_if`` as part of the ledger's next write, whichever it is (none is
        made for it)."""
        self.with_next_write(
            f"setting:{key}", functools.partial(_put_setting_if, key=key, expected=expected, value=value)
        )
