"""The records the ledger's own tables become (the ones the wire shows live in
``makad.core.types``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

from makad.core.types import EpisodeRecord, Record

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
    "pinned",
    "unpinned",
    "consolidated",
    "reapplied",
    "returned",
]
MemoryActor = Literal["user", "agent", "import", "daemon"]
MEMORY_ACTIONS: Final[frozenset[str]] = frozenset(get_args(MemoryAction))
MEMORY_ACTORS: Final[frozenset[str]] = frozenset(get_args(MemoryActor))


class Tombstone(Record):
    """What remains of a session the user deleted."""

    session_id: str
    ts: int
    event_count: int
    last_hash: str


@dataclass(frozen=True)
class ShownMemory:
    """The memory entries a session was shown since a time, and its latest call."""

    latest_call_id: str | None
    latest_call_ref: int | None
    # source id → (content hash, the call that last showed it)
    items: dict[str, tuple[str, int]]


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


class AddedEpisode(Record):
    """What ``add_episode`` did: ``created`` is false when the same remark was recorded."""

    episode: EpisodeRecord
    created: bool
