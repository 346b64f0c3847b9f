"""Wire types of MEMORY.md, settings, backups and subscriptions."""

from __future__ import annotations

from typing import Annotated, Literal

from msgspec import UNSET, Meta, UnsetType

from makad import errors as err
from makad.core.confidence import Confidence
from makad.core.outside_text import OutsideLine
from makad.core.types import BackupInfo, ContextStrategy, Entry

# A record the layers below the wire share: defined once, in core.
from makad.core.types import Settings as Settings
from makad.wire.base import DecayTtlMs, MethodSpec, Result, Warning, WorkspaceParams

MemoryStatus = Literal["ok", "disabled", "incognito_blocked", "safe_mode", "error"]


class GetSettingsParams(WorkspaceParams):
    pass


class SetSettingsParams(WorkspaceParams):
    """Patch semantics: only the fields given change."""

    enabled: bool | UnsetType = UNSET
    agent_read_enabled: bool | UnsetType = UNSET
    default_decay_days: Annotated[
        float | UnsetType | None,
        Meta(
            description="A length of time in days, fractional, from 1 ms (1.2e-8) to 106751991167; "
            "null: no default decay."
        ),
    ] = UNSET
    extract_tool_enabled: bool | UnsetType = UNSET
    incognito: bool | UnsetType = UNSET
    history_recall_enabled: bool | UnsetType = UNSET
    context_strategy: ContextStrategy | UnsetType = UNSET
    attention_enabled: bool | UnsetType = UNSET


class ReadStateParams(WorkspaceParams):
    """``includeConfidence`` (with ``includeEntries``): also each entry's confidence.

    ``ifRevision``: a conditional read. When the workspace's revision is still this one
    (nothing in MEMORY.md, PENDING.md or the settings changed, the files re-checked on
    disk first), the reply is ``{notModified: true, revision}`` without the state.
    Revisions are unique across the workspaces of a data directory: one held for another
    folder (a symlink since repointed) never matches.
    ``includeContent: false`` leaves MEMORY.md's text (``content``) out of the state.
    """

    include_entries: bool = False
    include_archived: bool = False
    include_confidence: bool = False
    include_content: bool = True
    if_revision: int | None = None


class LocalMemoryState(Result, kw_only=True):
    """The contract's LocalMemoryState plus revision, sha256, pendingCount, entries, warnings.

    ``warnings`` tells what the read found without failing: ``not_utf8`` names each line of
    MEMORY.md that is not valid UTF-8 (status stays ``ok``; those bytes are shown as cp1252
    and kept on disk), and PENDING.md's in one warning without a line; ``new_workspace``:
    the folder at this path is not the one the daemon knew (settings start at their
    defaults); ``ledger_reset``: the ledger was corrupt (or written by a newer makad: the
    message says so), moved aside and started over (privacy switches at their defaults);
    ``ledger_read_only``: the data directory's disk is full, the ledger is read as it was
    and every write fails with ``disk_full`` until space is freed; ``pinned_over_share``: a
    pinned entry (on its line) that a 1,500-token context pack has no room for, counting in
    a workspace the user level's pinned entries its packs show too (one of those: by title,
    without a line);
    ``text_outside_entries``, ``misplaced_file``, ``not_a_proposal``: text the daemon does
    not read as a memory; ``not_a_heading``: a ``##Title`` line (no space) or a ``# Title``
    line (one ``#``) inside an entry, read as part of it; ``pending_safe_mode``: PENDING.md
    is over the size cap, so none of its proposals is read (``pendingCount`` 0) until it is
    shrunk. About metadata comments
    typed by hand, on the comment's line, the token kept as written and the entry read as
    without it: ``unknown_value`` (a known key with a value this version does not
    understand: ``status=actve``, ``createdAt=2024-01-01``, ``confidence=1.5``),
    ``unknown_key`` (a key close to a known one: ``stauts=``, ``tag=``), ``bad_metadata``
    (no closing ``-->``, text after it, a token without ``=``, or ``maka-memory:`` misspelt
    or left out, so the comment is the entry's first line of content), ``duplicate_key`` (a key
    twice in one comment), ``duplicate_id`` (an id an earlier entry has), ``unlikely_date``
    (a ``createdAt``/``updatedAt`` read, but in seconds or microseconds:
    ``createdAt=1733500000`` reads as 1970-01-21); each message names the entry, the
    token, what it reads as and the likely spelling (a date in milliseconds).
    ``confidence`` (asked with ``includeConfidence``): entry id → how far it can be trusted
    and why, derived from who wrote it, its source refs and its age (or set by the user).
    """

    path: str
    enabled: bool
    agent_read_enabled: bool
    status: MemoryStatus
    # Left out when asked with ``includeContent: false``.
    content: str | UnsetType = UNSET
    entry_count: int
    latest_entry: Entry | None
    reason: str | None
    revision: int
    sha256: str | None
    pending_count: int
    entries: list[Entry] | None = None
    warnings: list[Warning] = []
    confidence: dict[str, Confidence] | None = None


class StateNotModified(Result, kw_only=True):
    """The answer to ``read_state {ifRevision}`` when nothing changed since that revision."""

    not_modified: Literal[True]
    revision: int


class AddEntryParams(WorkspaceParams):
    title: str
    content: str
    tags: list[str] = []
    scope: Literal["workspace", "session", "global"] = "workspace"
    session_id: str | None = None
    decay_ttl_ms: DecayTtlMs = None
    expected_revision: int | None = None
    request_id: str | None = None


class UpdateEntryParams(WorkspaceParams):
    id: str
    title: str | UnsetType = UNSET
    content: str | UnsetType = UNSET
    tags: list[str] | UnsetType = UNSET
    expected_revision: int | None = None
    request_id: str | None = None


class PinEntryParams(WorkspaceParams):
    """``pinned: true`` adds the ``pinned`` tag (the entry is then always a candidate of
    build_context, first in its memory segment); ``false`` removes it in any spelling. The
    other tags and the entry's dates stay as they are; an entry already so is not written."""

    id: str
    pinned: bool = True
    expected_revision: int | None = None
    request_id: str | None = None


class EntryIdParams(WorkspaceParams):
    id: str
    expected_revision: int | None = None
    request_id: str | None = None


class EntryResult(Result):
    entry: Entry
    revision: int
    redactions: int = 0


class ListBackupsParams(WorkspaceParams):
    pass


class RemoveOutsideTextParams(WorkspaceParams):
    """``dryRun``: only say what would go. ``lines``: only these of the removable lines
    (file line numbers, as ``text_outside_entries`` names them). ``expectedRevision``:
    refuse with ``conflict`` when the workspace moved on since it was read."""

    dry_run: bool = False
    lines: list[Annotated[int, Meta(ge=1)]] | None = None
    expected_revision: int | None = None


class RemoveOutsideTextResult(Result):
    """``removed``: the lines taken out (with ``dryRun``: the ones that would be), each
    with ``where`` its memory is now (``memory``, ``pending`` or ``rejected``) and that
    entry's or proposal's ``id``; ``kept``: the other lines outside any entry
    (``where: not_imported``), which stay until they are imported or given a heading."""

    removed: list[OutsideLine]
    kept: list[OutsideLine]
    dry_run: bool
    revision: int


class BackupsResult(Result):
    backups: list[BackupInfo]


class RestoreBackupParams(WorkspaceParams):
    backup_id: str
    expected_revision: int | None = None


class RestoreBackupResult(Result):
    revision: int
    restored: str
    # The backup holding what the restore replaced: restore it to undo.
    undo_backup_id: str | None


class SubscribeParams(WorkspaceParams):
    pass


class SubscribeResult(Result):
    workspace: str
    revision: int


class ChangeNotification(Result, omit_defaults=True):
    """Params of memory_changed / proposals_changed / settings_changed notifications.

    After a save that lacked entries the daemon had written (an editor buffer older than
    the write), ``reapplied`` lists the ids written back into the file and ``returned``
    those queued in PENDING.md instead, because the save may have deleted them on
    purpose; the ``proposals_changed`` of the write that queues them names them in
    ``returned`` too (only present when not empty).
    """

    workspace: str
    revision: int
    cause: Literal["external_edit", "daemon", "settings"]
    reapplied: list[str] = []
    returned: list[str] = []


_WS = (err.InvalidWorkspace,)
_WRITE = (*_WS, err.Disabled, err.IncognitoBlocked, err.Conflict, err.TooLarge, err.SafeMode, err.IOFailure)

METHODS: list[MethodSpec] = [
    MethodSpec(
        "get_settings", GetSettingsParams, Settings, "A workspace's settings.", errors=_WS, eager=True
    ),
    MethodSpec(
        "set_settings",
        SetSettingsParams,
        Settings,
        "Change some of a workspace's settings (patch); returns all of them.",
        errors=(*_WS, err.IOFailure, err.InvalidParams),
    ),
    MethodSpec(
        "read_state",
        ReadStateParams,
        (LocalMemoryState, StateNotModified),
        "The state of MEMORY.md: status, content, counts, revision and (optionally) "
        "its entries. disabled and incognito_blocked read nothing. With ifRevision, "
        "{notModified: true, revision} when nothing changed since that revision.",
        errors=(*_WS, err.IOFailure),
        eager=True,
    ),
    MethodSpec(
        "add_entry",
        AddEntryParams,
        EntryResult,
        "The user's own new entry (origin manual, active at once, secrets redacted).",
        errors=(*_WRITE, err.InvalidParams),
    ),
    MethodSpec(
        "update_entry",
        UpdateEntryParams,
        EntryResult,
        "Change an entry's title, content or tags.",
        errors=(*_WRITE, err.NotFound, err.InvalidParams),
    ),
    MethodSpec(
        "pin_entry",
        PinEntryParams,
        EntryResult,
        "Pin an entry (always in build_context's memory, first) or unpin it: its `pinned` tag.",
        errors=(*_WRITE, err.NotFound),
    ),
    MethodSpec(
        "archive_entry", EntryIdParams, EntryResult, "Archive an entry.", errors=(*_WRITE, err.NotFound)
    ),
    MethodSpec(
        "restore_entry",
        EntryIdParams,
        EntryResult,
        "Make an archived entry active again.",
        errors=(*_WRITE, err.NotFound),
    ),
    MethodSpec(
        "delete_entry",
        EntryIdParams,
        EntryResult,
        "Remove an entry from MEMORY.md and every index; returns what was deleted.",
        errors=(*_WRITE, err.NotFound),
    ),
    MethodSpec(
        "remove_outside_text",
        RemoveOutsideTextParams,
        RemoveOutsideTextResult,
        "Take out of MEMORY.md the lines above its first entry (text_outside_entries) whose "
        "memory is in MEMORY.md, waiting in PENDING.md or was rejected: bullets imported with "
        "import_memories and decided. Other lines stay. The preamble's title, comments and "
        "every entry are untouched; a backup is kept as for every write.",
        errors=(*_WRITE, err.InvalidParams),
    ),
    MethodSpec(
        "list_backups",
        ListBackupsParams,
        BackupsResult,
        "The last 20 versions of MEMORY.md and PENDING.md kept before each daemon write.",
        errors=_WS,
    ),
    MethodSpec(
        "restore_backup",
        RestoreBackupParams,
        RestoreBackupResult,
        "Put a backup back in place (the replaced text is itself backed up).",
        errors=(*_WRITE, err.NotFound),
    ),
    MethodSpec(
        "subscribe",
        SubscribeParams,
        SubscribeResult,
        "Receive memory_changed, proposals_changed and settings_changed notifications "
        "for a workspace on this connection.",
        errors=_WS,
    ),
    MethodSpec(
        "unsubscribe",
        SubscribeParams,
        SubscribeResult,
        "Stop notifications for a workspace on this connection.",
        errors=_WS,
    ),
]
