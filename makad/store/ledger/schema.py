"""The ledger's on-disk format: tables and migrations.

Schema versions live in ``PRAGMA user_version``; ``MIGRATIONS[i]`` takes a
database from version ``i`` to ``i + 1``. Add a step, never edit a shipped one.
``migrate`` applies every pending step in one ``BEGIN IMMEDIATE`` transaction
(SQLite DDL is transactional), so a crash mid-migration leaves the old version.

The hash chain the ``events`` rows carry is ``makad.core.chain``'s.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Sequence
from typing import Final

from makad.errors import IOFailure

FTS_TOKENIZE: Final = "porter unicode61 remove_diacritics 2"
# Bump when makad.core.cjk.index_text changes: the ledger then rebuilds its
# search index, whose rows must equal what index_text produces today.
SEARCH_TEXT_VERSION: Final = "1"

# The triggers that keep the two logs append-only (dropped and made again, unchanged, only
# by the one-time rename of session ids: ``makad.store.ledger.renames``).
EVENTS_APPEND_ONLY: Final = """CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'ledger events are append-only'); END"""
MEMORY_EVENTS_APPEND_ONLY: Final = """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events
        BEGIN SELECT RAISE(ABORT, 'memory events are append-only'); END"""
# Set by the step that adds ``session_chain_ids``; the daemon, which holds the identifier
# key, renames the sessions stored under an id holding a secret and removes it.
RENAME_PENDING_KEY: Final = "rename_secret_session_ids"

_V1: Final[tuple[str, ...]] = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    """CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        title TEXT,
        created_at INTEGER NOT NULL,
        closed_at INTEGER,
        event_count INTEGER NOT NULL DEFAULT 0,
        last_seq INTEGER NOT NULL DEFAULT 0,
        last_hash TEXT NOT NULL DEFAULT ''
    ) WITHOUT ROWID""",
    # `id` is the FTS rowid: an explicit INTEGER PRIMARY KEY survives VACUUM.
    """CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts INTEGER NOT NULL,
        type TEXT NOT NULL,
        text TEXT NOT NULL,
        tool_call_id TEXT,
        tool_name TEXT,
        meta TEXT,
        tokens INTEGER NOT NULL,
        hash TEXT NOT NULL,
        UNIQUE (session_id, seq)
    )""",
    EVENTS_APPEND_ONLY,
    """CREATE TRIGGER events_forget_only BEFORE DELETE ON events
        WHEN NOT EXISTS (SELECT 1 FROM meta WHERE key = 'forgetting' AND value = old.session_id)
        BEGIN SELECT RAISE(ABORT, 'ledger events are removed only by delete_session'); END""",
    # Contentless: the text lives once, in `events`; the index holds tokens only.
    f"""CREATE VIRTUAL TABLE events_fts USING fts5(
        body, content='', tokenize='{FTS_TOKENIZE}')""",
    """CREATE TABLE tombstones (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        ts INTEGER NOT NULL,
        event_count INTEGER NOT NULL,
        last_hash TEXT NOT NULL
    )""",
    """CREATE TABLE working_state (
        session_id TEXT PRIMARY KEY,
        state BLOB NOT NULL,
        revision INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE manifest_calls (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        call_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        UNIQUE (session_id, call_id)
    )""",
    """CREATE TABLE manifest_items (
        call_ref INTEGER NOT NULL REFERENCES manifest_calls (id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        source_id TEXT NOT NULL,
        tokens INTEGER NOT NULL,
        content_hash TEXT NOT NULL,
        PRIMARY KEY (call_ref, position)
    ) WITHOUT ROWID""",
    """CREATE TABLE checkpoints (
        id INTEGER PRIMARY KEY,
        checkpoint_id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        boundary_seq INTEGER NOT NULL,
        from_seq INTEGER NOT NULL,
        to_seq INTEGER NOT NULL,
        covered_hash TEXT NOT NULL,
        summary TEXT NOT NULL,
        summary_tokens INTEGER NOT NULL,
        preserved_from_seq INTEGER NOT NULL,
        mode TEXT NOT NULL,
        reason TEXT NOT NULL,
        created_at INTEGER NOT NULL
    )""",
    "CREATE INDEX checkpoints_by_session ON checkpoints (session_id, id)",
    """CREATE TABLE memory_events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        ts INTEGER NOT NULL,
        entry_id TEXT,
        action TEXT NOT NULL,
        actor TEXT NOT NULL,
        proposal_id TEXT,
        data TEXT
    )""",
    "CREATE INDEX memory_events_by_entry ON memory_events (entry_id)",
    "CREATE INDEX memory_events_by_proposal ON memory_events (proposal_id)",
    MEMORY_EVENTS_APPEND_ONLY,
    """CREATE TABLE rejections (
        content_hash TEXT PRIMARY KEY,
        proposal_id TEXT,
        reason TEXT NOT NULL,
        ts INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE requests (
        request_id TEXT PRIMARY KEY,
        method TEXT NOT NULL,
        result BLOB NOT NULL,
        ts INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX requests_by_ts ON requests (ts)",
    """CREATE TABLE intents (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        payload TEXT NOT NULL,
        state TEXT NOT NULL,
        ts INTEGER NOT NULL,
        finished_at INTEGER
    ) WITHOUT ROWID""",
    "CREATE INDEX intents_by_state ON intents (state)",
    f"""CREATE VIRTUAL TABLE memory_fts USING fts5(
        entry_id UNINDEXED, title, content, tags, tokenize='{FTS_TOKENIZE}')""",
    "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    f"INSERT INTO meta (key, value) VALUES ('search_text_version', '{SEARCH_TEXT_VERSION}')",
    # Every event's index text is made bounded (makad.store.ledger.rows.BOUNDED_FROM_KEY).
    "INSERT INTO meta (key, value) VALUES ('index_bounded_from', '0')",
)

# Episodes and the evidence behind profile proposals. ``episodes.id`` is the
# recording order; a tag's offset (``consolidation_offsets.after_episode``) is the
# last episode id already consolidated for that tag. ``summary_key`` makes one
# remark one episode per session; it is cleared with the summary when the session
# is deleted (the episode is then a tombstone: id, session, times only).
_V2: Final[tuple[str, ...]] = (
    """CREATE TABLE episodes (
        id INTEGER PRIMARY KEY,
        episode_id TEXT NOT NULL UNIQUE,
        session_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        summary TEXT NOT NULL,
        summary_key TEXT UNIQUE,
        at INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        deleted_at INTEGER
    )""",
    "CREATE INDEX episodes_by_session ON episodes (session_id)",
    "CREATE INDEX episodes_by_at ON episodes (at, id)",
    """CREATE TABLE episode_tags (
        tag TEXT NOT NULL,
        episode_ref INTEGER NOT NULL REFERENCES episodes (id),
        position INTEGER NOT NULL,
        PRIMARY KEY (tag, episode_ref)
    ) WITHOUT ROWID""",
    "CREATE INDEX episode_tags_by_episode ON episode_tags (episode_ref)",
    """CREATE TABLE episode_refs (
        episode_ref INTEGER NOT NULL REFERENCES episodes (id),
        position INTEGER NOT NULL,
        ref TEXT NOT NULL,
        session_id TEXT NOT NULL,
        PRIMARY KEY (episode_ref, position)
    ) WITHOUT ROWID""",
    "CREATE INDEX episode_refs_by_session ON episode_refs (session_id)",
    """CREATE TABLE consolidation_offsets (
        tag TEXT PRIMARY KEY,
        after_episode INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE consolidations (
        proposal_id TEXT PRIMARY KEY,
        tag TEXT NOT NULL,
        state TEXT NOT NULL,
        entry_id TEXT,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    "CREATE INDEX consolidations_by_entry ON consolidations (entry_id)",
    """CREATE TABLE consolidation_episodes (
        proposal_id TEXT NOT NULL REFERENCES consolidations (proposal_id),
        episode_ref INTEGER NOT NULL REFERENCES episodes (id),
        PRIMARY KEY (proposal_id, episode_ref)
    ) WITHOUT ROWID""",
    "CREATE INDEX consolidation_episodes_by_episode ON consolidation_episodes (episode_ref)",
)

# What each session has been shown of memory: one row per entry, its latest shown
# version. build_context reads it to avoid repeats; writing a call touches only the
# entries that call sent, so the cost does not grow with the session's length.
# Filled from each session's latest manifest, which carried everything shown.
_V3: Final[tuple[str, ...]] = (
    """CREATE TABLE manifest_shown (
        session_id TEXT NOT NULL,
        source_id TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        call_ref INTEGER NOT NULL,
        shown_at INTEGER NOT NULL,
        PRIMARY KEY (session_id, source_id)
    ) WITHOUT ROWID""",
    """INSERT INTO manifest_shown (session_id, source_id, content_hash, call_ref, shown_at)
        SELECT c.session_id, i.source_id, i.content_hash, c.id, c.created_at
        FROM manifest_calls AS c JOIN manifest_items AS i ON i.call_ref = c.id
        WHERE i.content_hash != ''
          AND c.id = (SELECT max(id) FROM manifest_calls WHERE session_id = c.session_id)""",
    "DELETE FROM manifest_items WHERE tokens = 0",
    "CREATE INDEX manifest_calls_by_session ON manifest_calls (session_id, id)",
)

# The daemon's own bookkeeping behind the pack (``makad.store.ledger.pack_state``): when it
# first saw a hand-written entry and saw it edited by hand, how much memory each
# session was shown since its last compaction, and how far its derived session
# notes have read.
_V4: Final[tuple[str, ...]] = (
    """CREATE TABLE entry_dates (
        entry_id TEXT PRIMARY KEY,
        first_seen INTEGER NOT NULL,
        edited_at INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
    """CREATE TABLE memory_session_totals (
        session_id TEXT PRIMARY KEY,
        since INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        last_call_id TEXT NOT NULL,
        last_call_bytes INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE session_notes (
        session_id TEXT PRIMARY KEY,
        derived_to_seq INTEGER NOT NULL,
        state BLOB NOT NULL
    ) WITHOUT ROWID""",
)

# The LLM curator's part of a build_context call (``makad.core.context_types.CuratorTrace``
# as JSON), kept with the call's manifest: what a shadow curator would have shown beside
# what was shown, so an A/B can be recomputed later. Dropped with its manifest.
_V5: Final[tuple[str, ...]] = (
    """CREATE TABLE manifest_curator (
        call_ref INTEGER PRIMARY KEY REFERENCES manifest_calls (id) ON DELETE CASCADE,
        record BLOB NOT NULL
    )""",
)

# The ids of entries typed by hand into MEMORY.md (``makad.store.typed_ids``): the id
# each keeps across the user's edits, the id its text derives now, digests of its title
# and content, its place in the file, and when it left the file (0 while it is there).
_V6: Final[tuple[str, ...]] = (
    """CREATE TABLE typed_entries (
        entry_id TEXT PRIMARY KEY,
        text_id TEXT NOT NULL,
        title TEXT NOT NULL,
        body TEXT NOT NULL,
        position INTEGER NOT NULL,
        gone_at INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID""",
)

# The semantic channel's vectors (``makad.store.ledger.vectors``): one per event and one
# per memory-entry text, each tagged with the model that made it. They are derived data
# (recomputed when lost); an event's vector goes with the event when it is forgotten.
_SEMANTIC_VECTORS: Final[tuple[str, ...]] = (
    """CREATE TABLE event_vectors (
        event_id INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        vec BLOB NOT NULL
    )""",
    """CREATE TABLE entry_vectors (
        text_hash TEXT NOT NULL,
        model TEXT NOT NULL,
        vec BLOB NOT NULL,
        PRIMARY KEY (text_hash, model)
    ) WITHOUT ROWID""",
    """CREATE TRIGGER event_vectors_forget AFTER DELETE ON events
        BEGIN DELETE FROM event_vectors WHERE event_id = old.id; END""",
)

# Behaviors and attention (``makad.store.attention_store``): per session, the records
# derived from its events (``makad.core.behaviors``) and how far they have read
# (``behavior_offsets.to_seq``, committed with the records it covers, with the segment
# still open); per workspace, the attention state last derived from them
# (``makad.core.attention``); and word-shingle digests of memory text the user deleted
# or corrected, which nothing derived afterwards may bring back.
_ATTENTION: Final[tuple[str, ...]] = (
    """CREATE TABLE behaviors (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL,
        from_seq INTEGER NOT NULL,
        to_seq INTEGER NOT NULL,
        ended_at INTEGER NOT NULL,
        record BLOB NOT NULL,
        UNIQUE (session_id, from_seq)
    )""",
    "CREATE INDEX behaviors_by_end ON behaviors (ended_at, id)",
    """CREATE TABLE behavior_offsets (
        session_id TEXT PRIMARY KEY,
        to_seq INTEGER NOT NULL,
        carry BLOB NOT NULL,
        updated_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE attention_state (
        key TEXT PRIMARY KEY,
        state BLOB NOT NULL,
        computed_at INTEGER NOT NULL
    ) WITHOUT ROWID""",
    """CREATE TABLE retracted_text (
        digest TEXT PRIMARY KEY,
        ts INTEGER NOT NULL
    ) WITHOUT ROWID""",
)

# Suggestions the user dismissed (``makad.store.suggestion_store``): a suggestion's stable
# id (``makad.core.suggestions``, a digest: no text of the user's), until when it stays
# dismissed, and when it was dismissed. Bounded: expired rows are pruned on each write,
# and only the newest ``MAX_DISMISSED`` are kept.
_SUGGESTIONS: Final[tuple[str, ...]] = (
    """CREATE TABLE dismissed_suggestions (
        id TEXT PRIMARY KEY,
        until INTEGER NOT NULL,
        at INTEGER NOT NULL
    ) WITHOUT ROWID""",
)


# Session ids screened for secrets (``makad.store.ledger.renames``): a session stored
# under an id holding one, by a makad that did not screen them, is renamed to the id's
# stand-in once, and its events keep the hashes they were given: ``hashed_id`` is the id
# they were hashed with, up to ``through_seq`` (``makad.core.chain``). Never returned.
_SESSION_CHAIN_IDS: Final[tuple[str, ...]] = (
    """CREATE TABLE session_chain_ids (
        session_id TEXT PRIMARY KEY,
        hashed_id TEXT NOT NULL,
        through_seq INTEGER NOT NULL
    ) WITHOUT ROWID""",
    # Only a ledger that holds sessions already can hold one under a raw id: a new one gets
    # no marker, so its first use writes nothing (a workspace's first write binds its folder).
    f"INSERT OR REPLACE INTO meta (key, value) SELECT '{RENAME_PENDING_KEY}', '1'"
    " WHERE EXISTS (SELECT 1 FROM sessions) OR EXISTS (SELECT 1 FROM tombstones)",
    # A deleted session is looked up by id on every manifest and session open: one lookup,
    # not a scan of every session ever deleted.
    "CREATE INDEX IF NOT EXISTS tombstones_by_session ON tombstones (session_id)",
)


# The last segment a session's records were made from (``behavior_offsets.segment``, its
# ``Carry`` as it was cut), kept while no later segment has begun, with what its records
# were made with: whether the session was closed and its working state's revision. A close
# or a working state set after the cut, with no new event, makes them again
# (``attention_store.remake_step``); a row of an older ledger has none, and is left as it is.
_LAST_SEGMENT: Final[tuple[str, ...]] = (
    "ALTER TABLE behavior_offsets ADD COLUMN segment BLOB",
    "ALTER TABLE behavior_offsets ADD COLUMN made_closed INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE behavior_offsets ADD COLUMN made_revision INTEGER NOT NULL DEFAULT 0",
)


class NewerLedger(IOFailure):
    """The ledger carries a schema version past this code's: a newer makad wrote it."""


Migration = Sequence[str] | Callable[[sqlite3.Connection], None]
MIGRATIONS: Final[tuple[Migration, ...]] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _SEMANTIC_VECTORS,
    _ATTENTION,
    _SUGGESTIONS,
    _SESSION_CHAIN_IDS,
    _LAST_SEGMENT,
)
SCHEMA_VERSION: Final = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the database file."""
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0])


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the database to ``len(migrations)`` in one transaction; return the old version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). A database
    newer than this code is refused rather than guessed at.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = user_version(conn)
        if found > len(migrations):
            raise NewerLedger(
                "the ledger was written by a newer makad",
                userVersion=found,
                supported=len(migrations),
            )
        for version in range(found, len(migrations)):
            step = migrations[version]
            if callable(step):
                step(conn)
            else:
                for statement in step:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return found


def episode_summary_key(session_id: str, summary: str) -> str:
    """What makes two episodes one remark: the session and the summary, case and spacing aside."""
    normalized = " ".join(summary.casefold().split())
    return hashlib.sha256(f"{session_id}\n{normalized}".encode("utf-8", "surrogatepass")).hexdigest()
