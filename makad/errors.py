"""One exception tree for every error makad can put on the wire.

    MakadError                      (code, kind)
    ├── InvalidParams               -32602 invalid_params
    ├── NotFound                    -32001 not_found
    ├── Conflict                    -32002 conflict
    ├── IncognitoBlocked            -32003 incognito_blocked
    ├── Disabled                    -32004 disabled
    ├── GateClosed                  -32005 gate_closed
    ├── TooLarge                    -32006 too_large
    │   └── ReplyTooLarge           -32006 reply_too_large
    ├── SafeMode                    -32007 safe_mode
    ├── InvalidSummary              -32008 invalid_summary
    ├── IOFailure                   -32009 io_error
    ├── InvalidWorkspace            -32010 invalid_workspace
    ├── InsufficientEvidence        -32011 insufficient_evidence
    ├── CircuitOpen                 -32012 circuit_open
    ├── ShuttingDown                -32013 shutting_down
    └── TooManyConnections          -32014 too_many_connections

The message is written for people and must never contain memory content or
exception text; ``data`` carries machine-readable details (always with ``kind``).
An error repeats no more than ``ECHO_LIMIT`` characters of any string it was given: each
string in its data (the ids, refs and names a caller sent) longer than that is cut to
its first ``ECHO_LIMIT`` characters followed by ``… (N characters)`` (``echoed``).
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar, Final

# The system's "no room to write": the disk is full, or the user's quota on it is spent.
DISK_FULL_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT})

__all__ = [
    "ALL_ERRORS",
    "DISK_FULL_ERRNOS",
    "ECHO_LIMIT",
    "CircuitOpen",
    "Conflict",
    "Disabled",
    "GateClosed",
    "IOFailure",
    "IncognitoBlocked",
    "InsufficientEvidence",
    "InvalidParams",
    "InvalidSummary",
    "InvalidWorkspace",
    "MakadError",
    "NotFound",
    "ReplyTooLarge",
    "SafeMode",
    "ShuttingDown",
    "TooLarge",
    "TooManyConnections",
    "check_revision",
    "echoed",
]

# The most characters of one string an error repeats (see ``echoed``).
ECHO_LIMIT: Final = 200


def echoed(value: str, limit: int = ECHO_LIMIT) -> str:
    """``value`` as an error may repeat it: whole up to ``limit`` characters, else its
    first ``limit`` characters, an ellipsis and its length (``… (100000 characters)``).
    A string it already cut is kept as it is."""
    if len(value) <= limit or _is_cut(value, limit):
        return value
    return f"{value[:limit]}… ({len(value)} characters)"


def _is_cut(value: str, limit: int) -> bool:
    tail = value[limit:]
    return tail.startswith("… (") and tail.endswith(" characters)") and tail[3:-12].isdigit()


def _bounded(node: Any) -> Any:
    """``node`` with every string in it (keys too) ``echoed``."""
    if isinstance(node, str):
        return echoed(node)
    if isinstance(node, list | tuple):
        return [_bounded(item) for item in node]
    if isinstance(node, dict):
        return {_bounded(key): _bounded(value) for key, value in node.items()}
    return node


def _field(schema: str | dict[str, Any], description: str) -> dict[str, Any]:
    """A key of an error's ``data``: its JSON Schema (a type name, or a whole schema) and what it means."""
    return {**({"type": schema} if isinstance(schema, str) else schema), "description": description}


class MakadError(Exception):
    """Base of every error that is reported to a client."""

    code: ClassVar[int] = -32603
    kind: ClassVar[str] = "internal"
    # The keys its ``data`` may carry besides ``kind``, each a JSON Schema with what it means
    # (the OpenRPC document's components.errors lists them as ``x-dataFields``, and the
    # generated clients type an error's ``data`` from them).
    data_fields: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {key: _bounded(value) for key, value in data.items()}

    def data(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.details}


class InvalidParams(MakadError):
    """Raised when params do not fit the method: wrong type, missing field, a value out of range, an
    unknown setting; ``data.path`` names the field where msgspec can.
    """

    code = -32602
    kind = "invalid_params"


class NotFound(MakadError):
    """Raised when the named thing does not exist: an entry, proposal, session, checkpoint, backup or event
    ref.
    """

    code = -32001
    kind = "not_found"
    data_fields = {
        "id": _field("string", "the entry or proposal id asked for"),
        "ids": _field(
            {"type": "array", "items": {"type": "string"}},
            "the ids of those asked for that do not exist (approve, reject: the first 20, each"
            " cut to 200 characters)",
        ),
        "missingCount": _field(
            "integer", "approve, reject: how many ids do not exist, when more than ids lists"
        ),
        "sessionId": _field("string", "the session asked for"),
        "callId": _field({"type": ["string", "null"]}, "get_manifest: the call asked for (null: the latest)"),
        "checkpointId": _field("string", "the checkpoint asked for"),
        "backupId": _field("string", "the backup asked for"),
        "episodeIds": _field(
            {"type": "array", "items": {"type": "string"}}, "the episodes that do not exist"
        ),
        "path": _field("string", "import_memories: the param naming a file that is not there ($.path)"),
        "intentId": _field("string", "a write's recorded intent that is gone"),
    }


class Conflict(MakadError):
    """Raised when a compare-and-swap fails (``expectedRevision``, ``expectedSeq``) or a user edit of the
    same entry would be overwritten; nothing was written.
    """

    code = -32002
    kind = "conflict"
    data_fields = {
        "currentRevision": _field(
            "integer",
            "the revision now, when an expectedRevision did not match or the user changed the same "
            "entry (set_working_state: the working state's revision): retry from it",
        ),
        "expectedRevision": _field("integer", "the expectedRevision the call sent"),
        "currentSeq": _field("integer", "append_events: the session's last seq now"),
        "expectedSeq": _field("integer", "append_events: the expectedSeq the call sent"),
        "ids": _field(
            {"type": "array", "items": {"type": "string"}},
            "the entries the user changed meanwhile: their version was kept",
        ),
        "reason": _field(
            "string",
            "closed (append_events to a closed session), deleted (open_session of a deleted id), "
            "duplicate (the requestId's call was already applied)",
        ),
        "sessionId": _field("string", "the session the conflict is about"),
        "incognito": _field("boolean", "open_session: the kind the existing session has"),
        "requestId": _field("string", "a requestId already used, by this or another method"),
        "checkpointId": _field("string", "compact: a checkpoint with this id exists"),
        "toSeq": _field("integer", "compact: the ledger moved on past the checkpoint's range"),
        "intentId": _field("string", "a write's recorded intent with this id exists"),
    }


def check_revision(expected: int | None, current: int) -> None:
    """Raise ``Conflict`` when a write's ``expectedRevision`` is given and is not ``current``."""
    if expected is not None and expected != current:
        raise Conflict(
            "the workspace changed since that revision", currentRevision=current, expectedRevision=expected
        )


class IncognitoBlocked(MakadError):
    """Raised when incognito is on and the call would read or write persistent memory (fails closed)."""

    code = -32003
    kind = "incognito_blocked"
    data_fields = {"sessionId": _field("string", "the incognito session, or the persistent one not written")}


class Disabled(MakadError):
    """Raised when a memory write is asked of a workspace whose memory is switched off (``enabled:
    false``).
    """

    code = -32004
    kind = "disabled"


class GateClosed(MakadError):
    """Raised when ``propose`` is called while the extract gate is closed (``extractToolEnabled &&
    agentReadEnabled && !incognito`` is false).
    """

    code = -32005
    kind = "gate_closed"
    data_fields = {
        "extractToolEnabled": _field("boolean", "the workspace's extractToolEnabled setting"),
        "agentReadEnabled": _field("boolean", "the workspace's agentReadEnabled setting"),
    }


class TooLarge(MakadError):
    """Raised when a message, a batch, an entry, an import or a file passes its size cap."""

    code = -32006
    kind = "too_large"
    data_fields = {
        "limit": _field(
            "integer", "the cap passed, in the unit the message names (bytes, characters, items)"
        ),
        "actual": _field("integer", "the size sent, in the limit's unit"),
        "count": _field("integer", "how many were sent (events, the events refs name, list items)"),
        "index": _field("integer", "which element is over (an event of append_events, a list item)"),
        "field": _field("string", "the param or list over its cap (title, reason, goals …)"),
        "section": _field("string", "set_working_state: the notes section over its token cap"),
        "tokens": _field("integer", "with section: its tokens"),
        "path": _field("string", "the param at fault ($.path)"),
        "capBytes": _field("integer", "import_memories: PENDING.md's size cap"),
        "waiting": _field("integer", "import_memories: the new memories none of which fits"),
        "budgetTokens": _field("integer", "build_context: the budget asked for"),
        "minimumTokens": _field("integer", "build_context: what the newest user message alone needs"),
        "reason": _field("string", "a message over the size cap (code -32600): what it exceeded"),
        "cap": _field(
            "string",
            "a message over a cap (code -32600): which of status.limits it passed "
            "(maxMessageBytes, maxMessageValues)",
        ),
    }


class ReplyTooLarge(TooLarge):
    """Written by the dispatcher when a reply would pass the reply cap (never raised by handlers)."""

    kind = "reply_too_large"
    data_fields = {
        "limit": _field("integer", "the reply cap in bytes (--max-reply-bytes)"),
        "ran": _field(
            "boolean",
            "true: the method ran and its result was dropped; false: a batch element not run",
        ),
    }


class SafeMode(MakadError):
    """Raised when the daemon would write to a memory file that is over its size cap (safe mode: the user
    shrinks it first).
    """

    code = -32007
    kind = "safe_mode"


class InvalidSummary(MakadError):
    """Raised when a compaction summary is empty, oversized, lacks a required section or holds a secret."""

    code = -32008
    kind = "invalid_summary"
    data_fields = {
        "problems": _field(
            {"type": "array", "items": {"type": "string"}},
            "why: empty, too_long, missing_sections, empty_sections, contains_secret",
        ),
        "summaryTokens": _field("integer", "with too_long: the summary's tokens"),
        "maxTokens": _field("integer", "with too_long: the most a summary may have"),
        "missingSections": _field(
            {"type": "array", "items": {"type": "string"}}, "with missing_sections: the headings missing"
        ),
        "emptySections": _field(
            {"type": "array", "items": {"type": "string"}}, "with empty_sections: the headings with no text"
        ),
        "secretCount": _field("integer", "with contains_secret: how many secrets were found"),
    }


class IOFailure(MakadError):
    """Raised when the disk fails the daemon: full, read-only, permission denied, a file that is not a
    regular file; ``data.reason`` says which.
    """

    code = -32009
    kind = "io_error"
    data_fields = {
        "reason": _field(
            "string",
            "what failed, generalized: disk_full, permission_denied, not_a_file, ledger_busy, "
            "utf16, io_error ...",
        ),
        "file": _field(
            "string", "the memory file or backup the failure is about, by name (MEMORY.md), never a path"
        ),
        "osError": _field("string", "with file: the system's reason (Permission denied)"),
        "errno": _field(
            "string",
            "with file: the reason's symbol (EACCES); a ledger write or open that found no room"
            " left by an I/O error: ENOSPC or EDQUOT",
        ),
        "memoryWritten": _field(
            "boolean",
            "true when the call had already written a memory file when it failed (a ledger write "
            "after it did not go through): the change is in the file, so a retry without "
            "requestId would make it again",
        ),
        "written": _field(
            {"type": "array", "items": {"type": "string"}},
            "with memoryWritten: the names of the files written (MEMORY.md, PENDING.md)",
        ),
        "revision": _field(
            "integer", "with memoryWritten: the revision the change got (read_state is at it)"
        ),
    }


class InvalidWorkspace(MakadError):
    """Raised when a workspace path is not usable: empty, relative, missing, not a directory, or a memory
    folder or file that is a symlink.
    """

    code = -32010
    kind = "invalid_workspace"
    data_fields = {
        "reason": _field(
            "string",
            "symlink (a symlinked memory folder or file), not_a_directory (a memory that is a "
            "file), reserved (the data directory, the user level's folders, a memory folder), "
            "too_long (no room under the path limit, or spelled past it); absent: not absolute, "
            "not a directory",
        ),
    }


class InsufficientEvidence(MakadError):
    """Raised when a profile proposal or a consolidation has too little evidence behind it (fewer than 5
    episodes from 2 sessions, or none since the last consolidation).
    """

    code = -32011
    kind = "insufficient_evidence"
    data_fields = {
        "reason": _field(
            "string", "no_episodes, unknown_episodes, foreign_tag, already_consolidated, below_threshold"
        ),
        "tag": _field("string", "the tag consolidated"),
        "episodeIds": _field(
            {"type": "array", "items": {"type": "string"}},
            "the episodes at fault (unknown, without the tag, or consolidated already; 20 at most)",
        ),
        "episodes": _field("integer", "below_threshold: the episodes cited"),
        "sessions": _field("integer", "below_threshold: the sessions they come from"),
        "minEpisodes": _field("integer", "below_threshold: the episodes needed"),
        "minSessions": _field("integer", "below_threshold: the sessions needed"),
    }


class CircuitOpen(MakadError):
    """Raised when compaction of a session has failed three times in a row: it stops until one succeeds."""

    code = -32012
    kind = "circuit_open"
    data_fields = {
        "sessionId": _field("string", "the session whose automatic compactions stopped"),
        "consecutiveFailures": _field("integer", "how many failed in a row"),
        "threshold": _field("integer", "the failures in a row that open the circuit"),
    }


class ShuttingDown(MakadError):
    """Raised when a request arrives while the daemon is draining after SIGTERM or ``shutdown``."""

    code = -32013
    kind = "shutting_down"


class TooManyConnections(MakadError):
    """Written once to a connection refused because the connection cap is reached (id null)."""

    code = -32014
    kind = "too_many_connections"
    data_fields = {"limit": _field("integer", "the connection cap (--max-connections)")}


ALL_ERRORS: tuple[type[MakadError], ...] = (
    InvalidParams,
    NotFound,
    Conflict,
    IncognitoBlocked,
    Disabled,
    GateClosed,
    TooLarge,
    ReplyTooLarge,
    SafeMode,
    InvalidSummary,
    IOFailure,
    InvalidWorkspace,
    InsufficientEvidence,
    CircuitOpen,
    ShuttingDown,
    TooManyConnections,
)
