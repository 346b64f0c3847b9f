"""The ledger's on-disk format: tables, migrations, the records rows become, the hash chain.

Schema versions live in ``PRAGMA user_version``; ``MIGRATIONS[i]`` takes a
database from version ``i`` to ``i + 1``. Add a step, never edit a shipped one.
``migrate`` applies every pending step in one ``BEGIN IMMEDIATE`` transaction
(SQLite DDL is transactional), so a crash mid-migration leaves the old version.

Event hash chain::

    hash(event) = sha256_hex(utf8(previous_hash + canonical(event)))

``previous_hash`` is the hash of the session's previous event, ``""`` for seq 1.
``canonical(event)`` is the event as compact JSON without its ``hash``: camelCase
keys sorted, no whitespace, non-ASCII written as UTF-8, absent optional fields
written as ``null`` (keys: meta, seq, sessionId, text, tokens, toolCallId,
toolName, ts, type).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import msgspec

from makad.core.tokens import estimate_tokens
from makad.core.types import Event, EventType, Record
from makad.errors import InvalidParams, IOFailure, TooLarge

FTS_TOKENIZE: Final = "porter unicode61 remove_diacritics 2"
# Bump when makad.core.cjk.index_text changes: the ledger then rebuilds its
# search index, whose rows must equal what index_text produces today.
SEARCH_TEXT_VERSION: Final = "1"

MAX_APPEND_EVENTS: Final = 10_000
MAX_RETRIEVE_EVENTS: Final = 10_000
EVENT_TYPES: Final[frozenset[str]] = frozenset(get_args(EventType))
SESSION_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
EVENT_REF: Final = re.compile(r"event:(?P<session>[^:]+):(?P<first>\d+)(?:-(?P<last>\d+))?")

MemoryAction = Literal[
    "proposed",
    "approved",
    "edited",
    "rejected",
    "archived",
    "restored",
    "deleted",
    "imported",
    "decayed",
    "added",
    "updated",
    "consolidated",
    "reapplied",
    "returned",
]
MemoryActor = Literal["user", "agent", "import", "daemon"]
MEMORY_ACTIONS: Final[frozenset[str]] = frozenset(get_args(MemoryAction))
MEMORY_ACTORS: Final[frozenset[str]] = frozenset(get_args(MemoryActor))

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
    """CREATE TRIGGER events_append_only BEFORE UPDATE ON events
        BEGIN SELECT RAISE(ABORT, 'ledger events are append-only'); END""",
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
    """CREATE TRIGGER memory_events_append_only BEFORE UPDATE ON memory_events
        BEGIN SELECT RAISE(ABORT, 'memory events are append-only'); END""",
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

# The daemon's own bookkeeping behind the pack (``makad.store.pack_state``): when it
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

Migration = Sequence[str] | Callable[[sqlite3.Connection], None]
MIGRATIONS: Final[tuple[Migration, ...]] = (_V1, _V2, _V3, _V4)
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
            raise IOFailure(
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


# --------------------------------------------------------------------------- records


class NewEvent(Record):
    """An event as a client appends it: the ledger assigns seq, hash and missing ts/tokens."""

    type: EventType
    text: str
    ts: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    meta: dict[str, str] | None = None
    tokens: int | None = None


class SessionInfo(Record):
    """One session's row: its chain head and counters."""

    session_id: str
    title: str | None
    created_at: int
    closed_at: int | None
    event_count: int
    last_seq: int
    last_hash: str


class AppendResult(Record):
    """The seqs an append was given; ``redactions`` is what the caller redacted from it."""

    first_seq: int
    last_seq: int
    redactions: int = 0


class SearchHit(Record):
    """An event matching a query; ``score`` is the negated FTS5 bm25, higher is better."""

    event: Event
    score: float


class RefResult(Record):
    """The events one ``event:`` ref names, and whether they verify against the chain.

    ``mismatched_seqs``: rows whose stored hash does not match their content.
    ``chain_intact``: the range's last event links to its successor (or is the
    session head); false when a row's hash was rewritten to match new content,
    or when the next event was altered — the two look the same from here.
    """

    ref: str
    session_id: str
    from_seq: int
    to_seq: int
    events: list[Event]
    ok: bool
    chain_intact: bool = True
    mismatched_seqs: list[int] = msgspec.field(default_factory=list)
    missing_seqs: list[int] = msgspec.field(default_factory=list)


class Tombstone(Record):
    """What remains of a session the user deleted."""

    session_id: str
    ts: int
    event_count: int
    last_hash: str


class ManifestItem(Record):
    source_id: str
    tokens: int
    content_hash: str


class Manifest(Record):
    """What one build_context call put in front of the model: each memory entry it
    sent (with the hash of the text shown) and the sources of its other segments."""

    session_id: str
    call_id: str
    created_at: int
    items: list[ManifestItem]


@dataclass(frozen=True)
class ShownMemory:
    """The memory entries a session was shown since a time, and its latest call."""

    latest_call_id: str | None
    latest_call_ref: int | None
    # source id → (content hash, the call that last showed it)
    items: dict[str, tuple[str, int]]


class MemoryEvent(Record):
    """One step in the lineage of a memory entry or proposal."""

    id: int
    ts: int
    action: str
    actor: str
    entry_id: str | None = None
    proposal_id: str | None = None
    data: dict[str, Any] | None = None


class Rejection(Record):
    content_hash: str
    proposal_id: str | None
    reason: str
    ts: int


class StoredRequest(Record):
    """The first result of an idempotent request, replayed to its retries."""

    request_id: str
    method: str
    result: bytes
    ts: int


class RequestRecord(Record):
    """An idempotency result to store in the same transaction as the write it guards."""

    request_id: str
    method: str
    result: bytes


class Intent(Record):
    """A multi-step operation that must be finished or undone after a crash."""

    id: str
    kind: str
    payload: dict[str, Any]
    state: str
    ts: int
    finished_at: int | None = None


EpisodeKind = Literal["client", "session_close"]
ConsolidationState = Literal["queued", "approved", "rejected", "deleted"]


class NewEpisode(Record):
    """An episode to record; its text is already redacted and its tags normalized."""

    episode_id: str
    session_id: str
    kind: EpisodeKind
    summary: str
    tags: list[str]
    source_refs: list[str]
    at: int


class ConsolidationMark(Record):
    """A consolidation that cited an episode: the proposal, its tag and what became of it."""

    proposal_id: str
    tag: str
    state: ConsolidationState
    entry_id: str | None = None


class EpisodeRecord(Record):
    """One stored episode. ``ordinal`` is the recording order the tag offsets count on;
    a deleted session's episodes keep only their id, session and times."""

    episode_id: str
    session_id: str
    kind: EpisodeKind
    summary: str
    tags: list[str]
    source_refs: list[str]
    at: int
    created_at: int
    ordinal: int
    deleted_at: int | None = None
    consolidations: list[ConsolidationMark] = msgspec.field(default_factory=list)


class AddedEpisode(Record):
    """What ``add_episode`` did: ``created`` is false when the same remark was recorded."""

    episode: EpisodeRecord
    created: bool


# --------------------------------------------------------------------------- hash chain


class _Canonical(msgspec.Struct, rename="camel"):
    """An event's hashed fields, declared in the sorted order of their keys."""

    meta: dict[str, str] | None
    seq: int
    session_id: str
    text: str
    tokens: int
    tool_call_id: str | None
    tool_name: str | None
    ts: int
    type: str


# Sorting also orders meta's keys; a Struct encodes ~40% faster than the equivalent dict,
# which matters to reads that verify every event they return.
_CANONICAL = msgspec.json.Encoder(order="sorted")


def canonical_event(event: Event) -> bytes:
    """The bytes an event's hash covers (see the module docstring)."""
    return _CANONICAL.encode(
        _Canonical(
            event.meta,
            event.seq,
            event.session_id,
            event.text,
            event.tokens,
            event.tool_call_id,
            event.tool_name,
            event.ts,
            event.type,
        )
    )


def event_hash(previous_hash: str, event: Event) -> str:
    """Chain ``event`` onto ``previous_hash``."""
    return hashlib.sha256(previous_hash.encode("utf-8") + canonical_event(event)).hexdigest()


def new_session_id(at_ms: int) -> str:
    """A time-sortable session id: 12 hex digits of milliseconds, 20 random hex digits."""
    return f"{at_ms:012x}{secrets.token_hex(10)}"


def prepare_event(new: NewEvent, at: int) -> Event:
    """Validate an incoming event and fill in ts (``at``) and tokens; seq and hash come later."""
    if new.type not in EVENT_TYPES:
        raise InvalidParams("unknown event type", type=new.type, allowed=sorted(EVENT_TYPES))
    if new.tokens is not None and new.tokens < 0:
        raise InvalidParams("tokens must not be negative")
    return Event(
        session_id="",
        seq=0,
        ts=at if new.ts is None else new.ts,
        type=new.type,
        text=new.text,
        tool_call_id=new.tool_call_id,
        tool_name=new.tool_name,
        meta=new.meta,
        tokens=estimate_tokens(new.text) if new.tokens is None else new.tokens,
    )


def checked_session_id(session_id: str) -> str:
    if not SESSION_ID.fullmatch(session_id):
        raise InvalidParams(
            "a session id is 1-128 letters, digits, '.', '_' or '-'",
            pattern=SESSION_ID.pattern,
        )
    return session_id


def first_bad_seq(events: Iterable[Event], last_seq: int, last_hash: str) -> int | None:
    """The first seq where a session's chain breaks (gap, bad hash, head mismatch), else None."""
    expected_seq, chain = 1, ""
    for event in events:
        if event.seq != expected_seq or event_hash(chain, event) != event.hash:
            return expected_seq
        expected_seq, chain = expected_seq + 1, event.hash
    if expected_seq - 1 != last_seq:
        return expected_seq
    if chain != last_hash:
        return max(last_seq, 1)
    return None


def episode_summary_key(session_id: str, summary: str) -> str:
    """What makes two episodes one remark: the session and the summary, case and spacing aside."""
    normalized = " ".join(summary.casefold().split())
    return hashlib.sha256(f"{session_id}\n{normalized}".encode("utf-8", "surrogatepass")).hexdigest()


def parse_event_refs(refs: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """``(ref, session_id, from_seq, to_seq)`` for each ``event:`` ref, within the size cap."""
    spans: list[tuple[str, str, int, int]] = []
    for ref in refs:
        match = EVENT_REF.fullmatch(ref)
        if match is None:
            raise InvalidParams("not an event ref", ref=ref)
        first = int(match["first"])
        last = first if match["last"] is None else int(match["last"])
        if first < 1 or last < first:
            raise InvalidParams("an event ref needs 1 <= from <= to", ref=ref)
        spans.append((ref, match["session"], first, last))
    total = sum(last - first + 1 for _, _, first, last in spans)
    if total > MAX_RETRIEVE_EVENTS:
        raise TooLarge("refs name too many events", limit=MAX_RETRIEVE_EVENTS, count=total)
    return spans


def verify_span(
    span: tuple[str, str, int, int],
    by_seq: Mapping[int, Event],
    head: tuple[int, str] | None,
) -> RefResult:
    """Check a ref's events against the chain (see ``RefResult``).

    ``by_seq`` holds the stored events from ``from - 1`` to ``to + 1``; ``head``
    is the session's ``(last_seq, last_hash)``.
    """
    ref, session_id, first, last = span
    events = [by_seq[seq] for seq in range(first, last + 1) if seq in by_seq]
    missing = [seq for seq in range(first, last + 1) if seq not in by_seq]
    mismatched: list[int] = []
    for event in events:
        before = by_seq.get(event.seq - 1)
        previous = "" if event.seq == 1 else None if before is None else before.hash
        if previous is None or event_hash(previous, event) != event.hash:
            mismatched.append(event.seq)
    intact = True
    if events and head is not None:
        tail = events[-1]
        successor = by_seq.get(tail.seq + 1)
        if successor is not None:
            intact = event_hash(tail.hash, successor) == successor.hash
        else:
            intact = (tail.seq, tail.hash) == head
    return RefResult(
        ref=ref,
        session_id=session_id,
        from_seq=first,
        to_seq=last,
        events=events,
        ok=intact and not mismatched and not missing,
        chain_intact=intact,
        mismatched_seqs=mismatched,
        missing_seqs=missing,
    )
