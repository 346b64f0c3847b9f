"""A ledger written by the released makad opens in place and answers as it did.

``fixtures/ledger-v5.sqlite3.gz`` was built by the release's own code (three sessions,
English, Chinese and mixed text, settings); ``ledger-v5.json`` holds what that code's
recall search answered for a few queries, with a ceiling on one session's live part.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from makad.core.types import EventInput
from makad.store.ledger import Ledger
from makad.store.ledger.schema import SCHEMA_VERSION, user_version

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def released(tmp_path: Path) -> Path:
    """A copy of the released ledger, unpacked where the test may change it."""
    path = tmp_path / "ledger.sqlite3"
    with gzip.open(FIXTURES / "ledger-v5.sqlite3.gz", "rb") as src:
        path.write_bytes(src.read())
    return path


def _expected() -> dict[str, list[list[object]]]:
    found: dict[str, list[list[object]]] = json.loads((FIXTURES / "ledger-v5.json").read_text("utf-8"))[
        "search"
    ]
    return found


def test_the_released_ledger_opens_and_answers_as_it_did(released: Path) -> None:
    """Opened by this code, the release's ledger is at the current schema, its chains verify,
    its recall searches return what the release returned, and it takes appends."""
    ledger = Ledger(released)
    try:
        with ledger.snapshot() as conn:
            assert user_version(conn) == SCHEMA_VERSION
        for session in ledger.list_sessions():
            assert ledger.verify_chain(session.session_id) == (True, None)
        for query, hits in _expected().items():
            found = ledger.search_events_ranked(query, limit=10, max_seq_by_session={"fixture-mixed": 60})
            assert [[h.event.session_id, h.event.seq] for h in found] == hits, query
        ledger.append_events("fixture-en", [EventInput(type="note", text="a kumquat at the crossing")])
        assert [h.event.seq for h in ledger.search_history("kumquat", session_id="fixture-en")] == [121]
    finally:
        ledger.close()


_HANGING_MIGRATION = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from makad.store.ledger import schema
    def hang(conn):
        conn.execute("CREATE TABLE half_done (x INTEGER)")
        conn.execute("INSERT INTO half_done VALUES (1)")
        conn.execute("INSERT INTO events_fts (events_fts) VALUES ('delete-all')")
        Path(sys.argv[2]).write_text("in")
        time.sleep(60)
    schema.MIGRATIONS = (*schema.MIGRATIONS, hang)
    schema.migrate.__defaults__ = (schema.MIGRATIONS,)
    from makad.store.ledger import Ledger
    Ledger(Path(sys.argv[1]))
    """
)


def test_a_migration_killed_midway_leaves_the_released_ledger_as_it_was(
    released: Path, tmp_path: Path
) -> None:
    """kill -9 in the middle of a migration step (tables made, the index emptied) leaves the
    release's ledger at its version, openable, every event and search as before."""
    marker = tmp_path / "in-migration"
    proc = subprocess.Popen([sys.executable, "-c", _HANGING_MIGRATION, str(released), str(marker)])
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, "the migrating process ended early"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    ledger = Ledger(released)
    try:
        with ledger.snapshot() as conn:
            assert user_version(conn) == SCHEMA_VERSION
            assert (
                conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'").fetchone()[0] == 0
            )
            assert conn.execute("SELECT count(*) FROM events").fetchone()[0] == 360
        for query, hits in _expected().items():
            found = ledger.search_events_ranked(query, limit=10, max_seq_by_session={"fixture-mixed": 60})
            assert [[h.event.session_id, h.event.seq] for h in found] == hits, query
    finally:
        ledger.close()
