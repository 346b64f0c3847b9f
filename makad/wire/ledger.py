"""Wire types of sessions and their ledger: events, search, retrieval, working state, manifests."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from makad.core.types import (
    MAX_INT64,
    Event,
    EventInput,
    Manifest,
    RefResult,
    SessionInfo,
    UnixMs,
    WorkingState,
)
from makad.errors import (
    Conflict,
    IncognitoBlocked,
    InvalidParams,
    InvalidWorkspace,
    IOFailure,
    NotFound,
    TooLarge,
)
from makad.wire.base import Int64, MethodSpec, Result, WorkspaceParams

MAX_READ_LIMIT = 10_000
MAX_SEARCH_LIMIT = 1_000

ReadLimit = Annotated[int, Meta(ge=1, le=MAX_READ_LIMIT)]
SearchLimit = Annotated[int, Meta(ge=1, le=MAX_SEARCH_LIMIT)]
Seq = Annotated[int, Meta(ge=0, le=MAX_INT64)]


class OpenSessionParams(WorkspaceParams):
    """``incognito`` unset: a new session is incognito while the workspace is."""

    session_id: str | None = None
    title: str | None = None
    incognito: bool | None = None


class SessionParams(WorkspaceParams):
    session_id: str


class ListSessionsParams(WorkspaceParams):
    include_closed: bool = True


class SessionView(SessionInfo):
    """A session's head. ``incognito``: kept in memory only, gone when the daemon stops."""

    incognito: bool


class SessionsResult(Result):
    sessions: list[SessionView]


class DeleteSessionResult(Result):
    session_id: str
    deleted_at: UnixMs
    event_count: int
    incognito: bool


class AppendEventsParams(WorkspaceParams):
    session_id: str
    events: list[EventInput]
    expected_seq: Seq | None = None
    request_id: str | None = None


class AppendEventsResult(Result):
    """``redactions``: secrets replaced in the events' text and meta values."""

    first_seq: int
    last_seq: int
    redactions: int = 0


class ReadEventsParams(WorkspaceParams):
    session_id: str
    after_seq: Seq = 0
    limit: ReadLimit = 1_000


class ReadEventsResult(Result):
    events: list[Event]
    last_seq: Annotated[
        int,
        Meta(
            description="The session's last seq (0 when it has no event), not the last one "
            "returned: page on with afterSeq set to the last returned event's seq."
        ),
    ]
    has_more: Annotated[
        bool,
        Meta(
            description="true: the session has events after the last one returned (limit "
            "reached, or the reply's 8 MiB bound: fewer than limit then); ask again with "
            "afterSeq set to that event's seq."
        ),
    ]


class SearchHistoryParams(WorkspaceParams):
    """Without ``sessionId`` incognito sessions are never searched; with an incognito
    session's id, only that session is. ``query`` is read up to its first 16,384
    characters."""

    query: str
    session_id: str | None = None
    limit: SearchLimit = 20
    before: Annotated[
        Int64 | None,
        Meta(
            description="Unix time in milliseconds (UTC): only events whose ts is before it; null: no bound."
        ),
    ] = None
    after: Annotated[
        Int64 | None,
        Meta(
            description="Unix time in milliseconds (UTC): only events whose ts is after it; null: no bound."
        ),
    ] = None


class HistoryHit(Result, omit_defaults=True):
    """``score``: higher is better (negated BM25; a term count in incognito sessions)."""

    ref: str
    score: float
    event: Event
    text_cut: Annotated[
        bool,
        Meta(
            description="true: the hit alone was over 8 MiB as JSON, so event.text holds only "
            "its start; retrieve with ref (or read_events) returns the whole event."
        ),
    ] = False
    text_chars: Annotated[
        int | None, Meta(description="With textCut: how many characters the whole text has.")
    ] = None


class SearchHistoryResult(Result):
    hits: list[HistoryHit]
    omitted: Annotated[
        int,
        Meta(
            description="Hits found but left out, the lowest ranked, because the reply carries "
            "at most 8 MiB of hits as JSON (one at least); narrow the query, sessionId or "
            "before/after to reach them."
        ),
    ] = 0


class RetrieveParams(WorkspaceParams):
    """``sessionId``: the asking session; refs into an incognito session resolve only
    from that session itself (elsewhere they come back missing)."""

    refs: list[str]
    session_id: str | None = None


class RetrieveResult(Result):
    results: list[RefResult]
    omitted: Annotated[
        list[str],
        Meta(
            description="Refs left out, the last asked for, because the reply carries at most "
            "8 MiB of events as JSON (one event at least): ask again for these. When a range "
            "ref was cut, its result holds the first events and the rest of its range leads."
        ),
    ] = []


class SetWorkingStateParams(WorkspaceParams):
    """Lists given replace the stored ones; ``notes`` merge by section ("" removes one)."""

    session_id: str
    goals: list[str] | None = None
    open_threads: list[str] | None = None
    decisions: list[str] | None = None
    notes: dict[str, str] | None = None
    expected_revision: int | None = None
    request_id: str | None = None


class SetWorkingStateResult(Result):
    goals: list[str]
    open_threads: list[str]
    decisions: list[str]
    notes: dict[str, str]
    revision: int
    redactions: int = 0


class GetManifestParams(WorkspaceParams):
    session_id: str
    call_id: str | None = None


# Every method here is a session's: "@user" names no sessions (invalid_params).
_WS = (InvalidWorkspace, InvalidParams)
_READ = (*_WS, NotFound, IOFailure)
_WRITE = (*_WS, NotFound, IncognitoBlocked, IOFailure)

METHODS: list[MethodSpec] = [
    MethodSpec(
        "open_session",
        OpenSessionParams,
        SessionView,
        "Create a session (or reopen one by id). Incognito sessions live in memory only.",
        errors=(*_WS, Conflict, IncognitoBlocked, IOFailure, TooLarge),
        description="A title over 300 characters is kept shortened at a word with an "
        "ellipsis; one over 65,536 characters is refused (too_large, data.field title). "
        "A persistent session cannot be opened while the workspace is "
        "incognito (incognito_blocked); a session keeps the kind it was "
        "created with (conflict); a deleted session's id is refused "
        "(conflict, reason deleted).",
    ),
    MethodSpec(
        "list_sessions",
        ListSessionsParams,
        SessionsResult,
        "The workspace's sessions, newest first (incognito ones flagged).",
        errors=(*_WS, IOFailure),
        large_reply=True,
    ),
    MethodSpec(
        "close_session",
        SessionParams,
        SessionView,
        "Close a session: appends are refused until it is opened again.",
        errors=_WRITE,
    ),
    MethodSpec(
        "delete_session",
        SessionParams,
        DeleteSessionResult,
        "Forget a session: its events, working state, manifests and checkpoints are "
        "erased; a tombstone (id, time, count, last hash) remains.",
        errors=(*_WS, NotFound, IOFailure),
        description="Always allowed, also while the workspace is incognito or disabled.",
    ),
    MethodSpec(
        "append_events",
        AppendEventsParams,
        AppendEventsResult,
        "Append up to 10,000 events atomically; secrets are redacted first. Acknowledged means durable.",
        errors=(*_WRITE, Conflict, TooLarge),
        description="expectedSeq not the session's last seq: conflict with "
        "data.currentSeq. A closed session: conflict, reason closed. While "
        "the workspace is incognito, a persistent session is not written "
        "(incognito_blocked). An event over 8 MiB as JSON, as sent or once its "
        "secrets are redacted: too_large with data.index, nothing appended.",
    ),
    MethodSpec(
        "read_events",
        ReadEventsParams,
        ReadEventsResult,
        "A session's events after afterSeq, in order.",
        errors=_READ,
        description="Each event is checked against the hash chain: verified is false "
        "when it does not chain (altered on disk). A reply carries as many events as fit "
        "in 8 MiB as JSON, one at least: fewer than limit then, with hasMore.",
        large_reply=True,
    ),
    MethodSpec(
        "search_history",
        SearchHistoryParams,
        SearchHistoryResult,
        "BM25 search over session events (Chinese and Japanese included).",
        errors=_READ,
        description="A reply carries the best hits that fit in 8 MiB as JSON, one at least "
        "(its text cut, textCut, when it alone is over): fewer than limit then, with omitted "
        "counting the rest.",
        large_reply=True,
    ),
    MethodSpec(
        "retrieve",
        RetrieveParams,
        RetrieveResult,
        "The exact events named by event: refs, each verified against the hash chain.",
        errors=(*_WS, TooLarge, IOFailure),
        description="ok is false when an event is missing or its stored hash does "
        "not match its content (mismatchedSeqs, chainIntact). A reply carries the events "
        "that fit in 8 MiB as JSON, one at least, in the order asked: the refs left out "
        "(or the rest of a cut range) are listed in omitted. More refs than 10,000 (the "
        "events a call returns at most) is too_large with data.count the number of refs, "
        "before any is read.",
        large_reply=True,
    ),
    MethodSpec(
        "get_working_state",
        SessionParams,
        WorkingState,
        "A session's working state: goals, open threads, decisions, notes.",
        errors=_READ,
    ),
    MethodSpec(
        "set_working_state",
        SetWorkingStateParams,
        SetWorkingStateResult,
        "Change a session's working state (goals <= 8, open threads <= 12, decisions "
        "<= 20, each at most 2,000 characters; notes <= 2,000 tokens a section and 12,000 in all).",
        errors=(*_WRITE, Conflict, TooLarge),
        description="Past ~10,000 tokens of events, and every ~5,000 after, the daemon "
        "writes the note sections it derives itself (Current State, Task specification, "
        "Files and Functions, Errors & Corrections, Learnings, Key results, Worklog), "
        'marked as derived; a section a client writes is never overwritten (write "" '
        "to hand it back). Workflow is the client's alone. Lists over their cap and unknown "
        "note sections are refused before any text is read; the invalid_params for unknown "
        "sections names the first 20 (data.sections, sorted) and counts them all "
        "(data.unknownCount).",
    ),
    MethodSpec(
        "get_manifest",
        GetManifestParams,
        Manifest,
        "What one build_context call sent (the session's latest without callId): each "
        "memory entry with the hash of the text shown, the sources of the other "
        "segments and the ref of every history message, and the curator's part when a "
        "curator strategy built it (in shadow mode, what the curator would have shown). A "
        "session keeps its latest 64 calls' manifests.",
        errors=_READ,
    ),
]
