"""What the services keep on a workspace between calls: caches and in-memory-only state.

One typed field per thing, so mypy checks every reader and writer. Nothing here is
persisted: a restart starts from the defaults. Caches keyed on a file version hold the
version they were built from (compared by identity or hash by their readers); the two
built from the ledger's contents — ``settings`` and ``memory_snapshot`` — are dropped
together when the ledger starts over (``forget_ledger_caches``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import anyio

from makad.core.attention import AttentionLine, AttentionState
from makad.core.behaviors import Behavior
from makad.core.compaction import BreakerState
from makad.core.confidence import Confidence
from makad.core.context_types import FillOrder, MemorySnapshot
from makad.core.entry_dates import EntryDates
from makad.core.memory_format import MemoryDocument
from makad.core.session_notes import Gathered
from makad.core.types import Entry, Settings, Warning
from makad.store.ephemeral import EphemeralSessions


class ConfidenceCache(NamedTuple):
    """read_state's confidence map for one MEMORY.md version, one day and one ``archived``."""

    doc: MemoryDocument
    day: int
    archived: bool
    found: dict[str, Confidence]


class PinnedWarnings(NamedTuple):
    """read_state's ``pinned_over_share`` warnings for one MEMORY.md version (and one of
    the user level's, whose pinned entries a workspace's packs show too) and one day."""

    doc: MemoryDocument
    day: int
    warnings: list[Warning]
    user_doc: MemoryDocument | None = None


class ShownText(NamedTuple):
    """MEMORY.md as read_state shows it, for one (MEMORY.md, PENDING.md) text pair."""

    memory_text: str | None
    pending_text: str | None
    shown: str
    warnings: list[Warning]


class DerivedEntries(NamedTuple):
    """One MEMORY.md version's entries: all, the active ones and the latest active."""

    doc: MemoryDocument
    all_entries: list[Entry]
    active: list[Entry]
    latest: Entry | None


@dataclass
class LevelView:
    """The user level's snapshot as a workspace's context call sees it: ids ``@user/<id>``
    (``makad.core.levels``), built once per snapshot."""

    snapshot: MemorySnapshot
    by_id: dict[str, Entry]  # stored id → the entry under its ``@user/`` id
    confidence: dict[str, str]
    hashes: dict[str, str]  # ``@user/`` id → entry_hash, filled as entries become candidates
    # The pinned entries under their ``@user/`` ids, in the order of the file.
    pinned: list[Entry] = field(default_factory=list)
    # ``@user/`` id → its place among the active entries of the user's file.
    places: dict[str, int] = field(default_factory=dict)
    # Its entries in fill order (``makad.core.memory_select``), kept while valid.
    fill: FillOrder | None = None


class Overrides(NamedTuple):
    """Which user-level entries this workspace's entries override, for one pair of snapshots."""

    workspace: MemorySnapshot
    user: MemorySnapshot
    found: dict[str, str]


@dataclass
class WorkspaceState:
    """Per-workspace service state (mutated under the workspace's lock, or on the loop)."""

    # The ledger generation the workspace was last settled for (None: never: recover first).
    settled: int | None = None
    # Built from the ledger: dropped together when it starts over.
    settings: Settings | None = None
    memory_snapshot: MemorySnapshot | None = None
    # Incognito sessions live in memory only, by design.
    incognito_sessions: set[str] = field(default_factory=set)
    ephemeral: EphemeralSessions = field(default_factory=EphemeralSessions)
    # Serializes opening sessions (held apart from the workspace lock).
    sessions_lock: anyio.Lock = field(default_factory=anyio.Lock)
    # Ids of the connections whose close already unsubscribes them (carried over on reopen).
    close_hooked: set[int] = field(default_factory=set)
    # Session id → its compaction circuit breaker.
    breakers: dict[str, BreakerState] = field(default_factory=dict)
    # Session id → the session notes gathered so far.
    session_notes: dict[str, Gathered] = field(default_factory=dict)
    # Entry id → the daemon's dates (None: not loaded from the ledger yet).
    entry_dates: dict[str, EntryDates] | None = None
    # Backups: secrets found gone whose scrub failed, and each recent file text's secrets.
    secrets_to_scrub: frozenset[str] = frozenset()
    secrets_by_text: dict[str, frozenset[str]] = field(default_factory=dict)
    confidence: ConfidenceCache | None = None
    pinned_warnings: PinnedWarnings | None = None
    shown_text: ShownText | None = None
    derived: DerivedEntries | None = None
    # The attention state as last stored (``makad.service.attention``); ``attention_loaded``:
    # read from the ledger (None then means there is none); ``attention_purged``: nothing
    # derived is kept (the setting is off). Session id → the id of its first build_context
    # call (attention shows in that pack), and the lines that pack showed: a retry of that
    # call shows them again, though the state was derived anew meanwhile.
    attention: AttentionState | None = None
    attention_loaded: bool = False
    # The cached state was derived but could not be stored (a full disk): derived again,
    # and stored, at the next chance (``makad.service.unrecorded``).
    attention_unstored: bool = False
    attention_purged: bool = False
    # When the keeper must look at this workspace again though nothing changed (a session
    # going idle, the stored state's refresh; None: at its next round), and the ledger's
    # write count it last looked at: a write since makes it look at once. A workspace
    # nobody uses is then never read, so its ledger stays closed.
    attention_next_at: int | None = None
    # Whether the keeper has looked at this workspace since it was opened. Until then a
    # workspace only read (nothing written to its ledger, no change reported, nobody
    # asking for its attention, no work left by an earlier run) is left alone: its
    # ledger is not opened for it.
    attention_looked: bool = False
    # Whether its ledger, when the workspace was opened, held what the keeper has to do
    # (``attention_store.work_left``: sessions an earlier run left unread).
    attention_work_left: bool = False
    attention_seen_writes: int = -1
    # The ledger's write count when the keeper last found nothing left to do here but the
    # state's refresh (no session waiting to go idle): the workspace may then be released
    # (``makad.service.idle_workspaces``) while the count is still that. -1: not so.
    attention_quiet_writes: int = -1
    # Advanced whenever the cached state must not be set from a derivation begun before.
    attention_epoch: int = 0
    # The behavior records suggestions are scored with (``makad.service.suggestions``), and
    # the newest record's id they were read up to; dropped with the attention state.
    suggestion_records: tuple[int, list[Behavior]] | None = None
    first_calls: dict[str, str] = field(default_factory=dict)
    first_lines: dict[str, list[tuple[str, AttentionLine]]] = field(default_factory=dict)
    # The user level only: its snapshot with ``@user/`` ids.
    level_view: LevelView | None = None
    # A workspace: the user-level entries it overrides (makad.core.levels.overridden).
    overrides: Overrides | None = None

    def forget_ledger_caches(self) -> None:
        """Drop what was cached from a ledger that has been replaced or reset."""
        self.settings = None
        self.memory_snapshot = None
        self.forget_attention()
        self.first_calls = {}

    def forget_attention(self) -> None:
        """The cached attention state is out of date: read it again from the ledger."""
        self.attention = None
        self.attention_loaded = False
        self.attention_unstored = False
        self.attention_next_at = None
        self.suggestion_records = None
        self.attention_epoch += 1
        self.first_lines = {}
