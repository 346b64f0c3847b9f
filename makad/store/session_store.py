"""The one contract of a session store, kept by the workspace ledger and by the incognito
sessions in memory (``makad.store.ephemeral``).

The services ask ``Sessions.store(ws, session_id)`` for the store that holds a session and
call it, whichever it is; the store tests run the same cases against both. Every method is
synchronous (the ledger's block on SQLite: callers hop to a worker thread for them, which
``in_memory`` tells them they need not do for the other).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Protocol, TypedDict, Unpack

from makad.core import types as t
from makad.core.working_state import WorkingStateChange
from makad.store.ledger.records import RequestRecord


class AppendOptions(TypedDict, total=False):
    """How an append is checked and replayed (``append_events``)."""

    expected_seq: int | None  # the session's last seq, else Conflict (currentSeq)
    request_id: str | None  # seen before: the first result back, nothing appended
    redactions: int  # how many secrets the caller took out, kept with the result


class HistoryScope(TypedDict, total=False):
    """Which events a history search looks at, and how many hits it returns."""

    session_id: str | None
    limit: int
    before: int | None  # ts strictly below
    after: int | None  # ts strictly above


class SessionStore(Protocol):
    """Sessions and their hash-chained events, working state, manifests and checkpoints."""

    # True: the store lives in memory and never blocks (no worker thread needed).
    in_memory: ClassVar[bool]

    def open_session(self, session_id: str | None = None, *, title: str | None = None) -> t.SessionInfo: ...
    def get_session(self, session_id: str) -> t.SessionInfo: ...
    def close_session(self, session_id: str) -> t.SessionInfo: ...
    def last_seq(self, session_id: str) -> int: ...
    def append_events(
        self, session_id: str, events: Sequence[t.EventInput], **options: Unpack[AppendOptions]
    ) -> t.AppendResult: ...
    def read_events(
        self, session_id: str, *, after_seq: int = 0, limit: int | None = None
    ) -> list[t.Event]: ...
    def retrieve(self, refs: Sequence[str]) -> list[t.RefResult]: ...
    def get_working_state(self, session_id: str) -> t.WorkingState: ...
    def set_working_state(self, session_id: str, **change: Unpack[WorkingStateChange]) -> t.WorkingState: ...
    def get_manifest(self, session_id: str, call_id: str | None = None) -> t.Manifest: ...
    def add_checkpoint(
        self, checkpoint: t.Checkpoint, *, request: RequestRecord | None = None
    ) -> t.Checkpoint: ...
    def latest_checkpoint(self, session_id: str) -> t.Checkpoint | None: ...
    def list_checkpoints(self, session_id: str) -> list[t.Checkpoint]: ...
    def search_history(self, query: str, **scope: Unpack[HistoryScope]) -> list[t.SearchHit]: ...
