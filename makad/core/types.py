"""Plain data shared by the pure core, the stores and the wire.

These Structs carry camelCase names on the wire (``rename="camel"``) so the
service can return them as they are. No IO here.
"""

from __future__ import annotations

from typing import Literal

import msgspec

Origin = Literal["manual", "extracted", "imported", "unknown"]
EntryStatus = Literal["active", "archived", "review_required", "draft"]
Scope = Literal["workspace", "session", "global"]
EventType = Literal["user_message", "assistant_message", "tool_call", "tool_result", "system", "note"]
NOTE_SECTIONS: tuple[str, ...] = (
    "Current State",
    "Task specification",
    "Files and Functions",
    "Workflow",
    "Errors & Corrections",
    "Learnings",
    "Key results",
    "Worklog",
)
# What a working state's notes may hold (set_working_state refuses more).
MAX_NOTE_SECTION_TOKENS = 2_000
MAX_NOTES_TOKENS = 12_000


class Record(msgspec.Struct, kw_only=True, rename="camel", omit_defaults=False):
    """Base of every shared record: camelCase on the wire, keyword-only."""


class Entry(Record):
    """One memory entry (active or archived in MEMORY.md, open in PENDING.md)."""

    id: str
    title: str
    content: str
    origin: Origin = "unknown"
    created_at: int = 0
    updated_at: int = 0
    status: EntryStatus = "active"
    tags: list[str] = []
    decay_ttl_ms: int | None = None
    scope: Scope = "workspace"
    session_id: str | None = None
    source_refs: list[str] = []
    supersedes: str | None = None


class Event(Record):
    """One ledger event as stored: immutable once acknowledged."""

    session_id: str
    seq: int
    ts: int
    type: EventType
    text: str
    tool_call_id: str | None = None
    tool_name: str | None = None
    meta: dict[str, str] | None = None
    tokens: int = 0
    hash: str = ""
    # False when a read found that the event does not chain (it may have been altered
    # on disk): read_events, search_history and retrieve check every event they return.
    # Not part of the hash.
    verified: bool = True


class WorkingState(Record):
    """A session's working state: what the agent is doing right now."""

    goals: list[str] = []
    open_threads: list[str] = []
    decisions: list[str] = []
    notes: dict[str, str] = {}
    revision: int = 0


class Coverage(Record):
    from_seq: int
    to_seq: int


class Checkpoint(Record):
    """What one compaction covers: never deletes the events it summarizes."""

    checkpoint_id: str
    session_id: str
    boundary_seq: int
    coverage: Coverage
    covered_hash: str
    summary: str
    summary_tokens: int
    preserved_from_seq: int
    mode: Literal["semantic", "checkpoint"]
    reason: Literal["manual", "budget", "overflow"]
    created_at: int
