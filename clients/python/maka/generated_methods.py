"""The daemon's methods as typed functions, generated from protocol/openrpc.json: do not
edit. Regenerate with ``.venv/bin/python clients/python/scripts/gen_types.py``.

Apart from the TypedDicts they name (``maka.generated``) because building those is most
of what importing the types costs, which every ``maka`` command would pay at start-up.
"""
# ruff: noqa: E501

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Unpack, cast

if TYPE_CHECKING:
    from maka.generated import (
        AddEntryArgs,
        AppendEventsArgs,
        AppendEventsResult,
        ApproveArgs,
        ApproveResult,
        ArchiveEntryArgs,
        AttentionResult,
        BackupsResult,
        BuildContextArgs,
        CandidatesResult,
        Checkpoint,
        CheckpointsResult,
        CloseSessionArgs,
        CompactArgs,
        ConsolidateArgs,
        ConsolidationCandidatesArgs,
        ContextPack,
        DeleteEntryArgs,
        DeleteSessionArgs,
        DeleteSessionResult,
        DismissSuggestionArgs,
        DismissSuggestionResult,
        EntryResult,
        ExportMemoriesArgs,
        ExportResult,
        GetAttentionArgs,
        GetCheckpointArgs,
        GetManifestArgs,
        GetSettingsArgs,
        GetWorkingStateArgs,
        HistoryResult,
        ImportMemoriesArgs,
        ImportResultWire,
        ListBackupsArgs,
        ListCheckpointsArgs,
        ListEpisodesArgs,
        ListEpisodesResult,
        ListProposalsArgs,
        ListSessionsArgs,
        LocalMemoryState,
        Manifest,
        MemoryHistoryArgs,
        OpenSessionArgs,
        PinEntryArgs,
        ProposalsResult,
        ProposeArgs,
        ProposeResult,
        ReadEventsArgs,
        ReadEventsResult,
        ReadStateArgs,
        RecordEpisodeArgs,
        RecordEpisodeResult,
        RejectArgs,
        RejectResult,
        RemoveOutsideTextArgs,
        RemoveOutsideTextResult,
        RestoreBackupArgs,
        RestoreBackupResult,
        RestoreEntryArgs,
        RetrieveArgs,
        RetrieveResult,
        SearchHistoryArgs,
        SearchHistoryResult,
        SessionsResult,
        SessionView,
        SetSettingsArgs,
        Settings,
        SetWorkingStateArgs,
        SetWorkingStateResult,
        ShutdownResult,
        StateNotModified,
        StatusResult,
        SubscribeArgs,
        SubscribeResult,
        SuggestArgs,
        SuggestResult,
        UnsubscribeArgs,
        UpdateEntryArgs,
        WorkingState,
    )

Call = Callable[[str, dict[str, Any] | None], Any]
AsyncCall = Callable[[str, dict[str, Any] | None], Awaitable[Any]]


class Methods:
    """One typed function per method: ``client.m.read_state(workspace=ws)``."""

    __slots__ = ("_call",)

    def __init__(self, call: Call) -> None:
        self._call = call

    def ping(self) -> str:
        """Liveness check: answers "pong"."""
        return cast("str", self._call("ping", None))

    def status(self) -> StatusResult:
        """Daemon version, pid, uptime, socket, data directory, open connections, warnings (a corrupt ledger reset, a workspace replaced, a ledger read-only on a full disk), the caps it enforces on messages (limits), and, when a model is configured, how far the semantic channel's indexing has got."""
        return cast("StatusResult", self._call("status", None))

    def rpc_discover(self) -> dict[str, Any]:
        """This daemon's OpenRPC document (protocol/openrpc.json)."""
        return cast("dict[str, Any]", self._call("rpc.discover", None))

    def shutdown(self) -> ShutdownResult:
        """Stop accepting connections, let in-flight requests finish, exit 0. Every open connection gets a daemon_stopping notification ({reason: "shutdown"}) first: clients that start makad on demand do not start it again after it.

        Errors: shutting_down.
        """
        return cast("ShutdownResult", self._call("shutdown", None))

    def get_settings(self, **params: Unpack[GetSettingsArgs]) -> Settings:
        """A workspace's settings.

        Errors: invalid_workspace.
        """
        return cast("Settings", self._call("get_settings", dict(params)))

    def set_settings(self, **params: Unpack[SetSettingsArgs]) -> Settings:
        """Change some of a workspace's settings (patch); returns all of them.

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("Settings", self._call("set_settings", dict(params)))

    def read_state(self, **params: Unpack[ReadStateArgs]) -> LocalMemoryState | StateNotModified:
        """The state of MEMORY.md: status, content, counts, revision and (optionally) its entries. disabled and incognito_blocked read nothing. With ifRevision, {notModified: true, revision} when nothing changed since that revision.

        Errors: invalid_workspace, io_error.
        """
        return cast("LocalMemoryState | StateNotModified", self._call("read_state", dict(params)))

    def add_entry(self, **params: Unpack[AddEntryArgs]) -> EntryResult:
        """The user's own new entry (origin manual, active at once, secrets redacted).

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("EntryResult", self._call("add_entry", dict(params)))

    def update_entry(self, **params: Unpack[UpdateEntryArgs]) -> EntryResult:
        """Change an entry's title, content or tags.

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", self._call("update_entry", dict(params)))

    def pin_entry(self, **params: Unpack[PinEntryArgs]) -> EntryResult:
        """Pin an entry (always in build_context's memory, first) or unpin it: its `pinned` tag.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", self._call("pin_entry", dict(params)))

    def archive_entry(self, **params: Unpack[ArchiveEntryArgs]) -> EntryResult:
        """Archive an entry.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", self._call("archive_entry", dict(params)))

    def restore_entry(self, **params: Unpack[RestoreEntryArgs]) -> EntryResult:
        """Make an archived entry active again.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", self._call("restore_entry", dict(params)))

    def delete_entry(self, **params: Unpack[DeleteEntryArgs]) -> EntryResult:
        """Remove an entry from MEMORY.md and every index; returns what was deleted.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", self._call("delete_entry", dict(params)))

    def remove_outside_text(self, **params: Unpack[RemoveOutsideTextArgs]) -> RemoveOutsideTextResult:
        """Take out of MEMORY.md the lines above its first entry (text_outside_entries) whose memory is in MEMORY.md, waiting in PENDING.md or was rejected: bullets imported with import_memories and decided. Other lines stay. The preamble's title, comments and every entry are untouched; a backup is kept as for every write.

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("RemoveOutsideTextResult", self._call("remove_outside_text", dict(params)))

    def list_backups(self, **params: Unpack[ListBackupsArgs]) -> BackupsResult:
        """The last 20 versions of MEMORY.md and PENDING.md kept before each daemon write.

        Errors: invalid_workspace.
        """
        return cast("BackupsResult", self._call("list_backups", dict(params)))

    def restore_backup(self, **params: Unpack[RestoreBackupArgs]) -> RestoreBackupResult:
        """Put a backup back in place (the replaced text is itself backed up).

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("RestoreBackupResult", self._call("restore_backup", dict(params)))

    def subscribe(self, **params: Unpack[SubscribeArgs]) -> SubscribeResult:
        """Receive memory_changed, proposals_changed and settings_changed notifications for a workspace on this connection.

        Errors: invalid_workspace.
        """
        return cast("SubscribeResult", self._call("subscribe", dict(params)))

    def unsubscribe(self, **params: Unpack[UnsubscribeArgs]) -> SubscribeResult:
        """Stop notifications for a workspace on this connection.

        Errors: invalid_workspace.
        """
        return cast("SubscribeResult", self._call("unsubscribe", dict(params)))

    def propose(self, **params: Unpack[ProposeArgs]) -> ProposeResult:
        """The agent's path: queue a memory for the user's approval in PENDING.md (never writes MEMORY.md). An origin other than extracted is invalid_params as the params are read, before any gate; then the gates in order: disabled, incognito_blocked, gate_closed (extractToolEnabled && agentReadEnabled), too_large. scope "global" queues in the user level's PENDING.md (workspace "@user", which must be enabled) with this workspace recorded in its lineage; the gates and the session are this workspace's. supersedes: the entry the proposal corrects or replaces (its id or memory:<id>), archived when the user approves; it must be active and visible to the proposing session (else invalid_params at $.supersedes), at most one open proposal replaces an entry, and at most 20 replacements wait at once (too_large).

        Each sourceRefs item must name what the workspace (the proposing one for scope global) stores: event:<sessionId>:<seq> or <from>-<to> a recorded session and seqs up to its last, memory:<id> an entry, checkpoint:<id> a checkpoint, episode:<id> an episode; else invalid_params at $.sourceRefs[i] with data.ref and data.reason (not_a_source_ref, unknown_session, past_last_seq with data.lastSeq, unknown_entry, unknown_checkpoint, unknown_episode), nothing queued. More than 10,000 refs is too_large.

        Errors: conflict, disabled, gate_closed, incognito_blocked, insufficient_evidence, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("ProposeResult", self._call("propose", dict(params)))

    def list_proposals(self, **params: Unpack[ListProposalsArgs]) -> ProposalsResult:
        """Open proposals with the ids of similar entries and, for a replacement, the entry it replaces as it is now (replaces).

        Errors: invalid_workspace, io_error.
        """
        return cast("ProposalsResult", self._call("list_proposals", dict(params)))

    def approve(self, **params: Unpack[ApproveArgs]) -> ApproveResult:
        """Activate proposals (optionally edited) in MEMORY.md and remove them from PENDING.md; a supersedes target is archived in the same write.

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("ApproveResult", self._call("approve", dict(params)))

    def reject(self, **params: Unpack[RejectArgs]) -> RejectResult:
        """Reject proposals: removed from PENDING.md, recorded so the same one is not queued again.

        A reason is at most 2,000 characters (too_large, data.field reason).

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("RejectResult", self._call("reject", dict(params)))

    def memory_history(self, **params: Unpack[MemoryHistoryArgs]) -> HistoryResult:
        """Why do you believe this? The lineage of an entry or proposal.

        id is whole or a unique prefix of an entry's or proposal's id (the short ids lists print; an entry typed by hand, h-…, by its hex part too); the result's id is the whole one. A prefix of several ids is invalid_params with data.reason ambiguous_id and data.candidates (up to 10 ids); one of none is not_found.

        Errors: invalid_params, invalid_workspace, not_found.
        """
        return cast("HistoryResult", self._call("memory_history", dict(params)))

    def import_memories(self, **params: Unpack[ImportMemoriesArgs]) -> ImportResultWire:
        """Import memories from another tool into PENDING.md (origin imported); re-importing adds nothing. A binary or empty file is invalid_params (data.reason) and nothing is queued; a file in which nothing is found is invalid_params naming what the format expects; every such error lists data.formats; memories past PENDING.md's cap are deferred (or too_large when none fits).

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("ImportResultWire", self._call("import_memories", dict(params)))

    def export_memories(self, **params: Unpack[ExportMemoriesArgs]) -> ExportResult:
        """Export active (and optionally archived) entries as JSON or Markdown.

        Errors: incognito_blocked, invalid_workspace, io_error.
        """
        return cast("ExportResult", self._call("export_memories", dict(params)))

    def build_context(self, **params: Unpack[BuildContextArgs]) -> ContextPack:
        """What the model should see this turn, within budgetTokens: memory, working state, summary and recall segments plus the live history, with a trace of every choice.

        totalTokens never exceeds budgetTokens; when even the newest user message cannot fit, a too_large error carries budgetTokens and minimumTokens. Each kind gets its share of the budget, then what the others left unused flows to the kinds that still have candidates, in priority order (PROTOCOL.md). The memory segment exists only when enabled && agentReadEnabled && !incognito (workspace and session); recall only with historyRecallEnabled and a query (the recency strategies need none). strategy (or the workspace's contextStrategy) picks deterministic (default), full, recent, summary, curator or curator_shadow; every strategy keeps the budget, tool adjacency and the gates. The same inputs (revision, last seq, budget, query, include, strategy) give byte-identical output for every strategy but curator.

        Errors: invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("ContextPack", self._call("build_context", dict(params)))

    def get_attention(self, **params: Unpack[GetAttentionArgs]) -> AttentionResult:
        """What the user is in the middle of in this workspace: active and abandoned threads, focus, proposals waiting, rejections cooling down, rhythm — each line with its refs.

        Derived without a model from the behavior records of past sessions (written when a session is closed or idle), PENDING.md and recent rejections, off the request path; this reads the stored state. Incognito sessions contribute nothing; with attentionEnabled off or the workspace incognito the reply is enabled: false and empty. A thread a later session resolved is not listed (makad's docs/ATTENTION.md).

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("AttentionResult", self._call("get_attention", dict(params)))

    def suggest(self, **params: Unpack[SuggestArgs]) -> SuggestResult:
        """What is worth offering the user unasked — a thread to resume, a failure still standing, proposals waiting for review — each with a score, the reason and its refs; often nothing.

        Scored without a model from the stored attention state and behavior records (makad's docs/ATTENTION.md): only candidates scoring at least threshold, not dismissed, one per session, at most 3. The asking session's own threads are not suggested back. Nothing is suggested (enabled: false, silenced says why) with attentionEnabled off, agentReadEnabled off, or the workspace or the session incognito. Nothing is derived on the request path. A sessionId the workspace does not hold is not_found (data.sessionId).

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("SuggestResult", self._call("suggest", dict(params)))

    def dismiss_suggestion(self, **params: Unpack[DismissSuggestionArgs]) -> DismissSuggestionResult:
        """Hide a suggestion for forMs (default the daemon's cooldown, MAKAD_SUGGESTION_COOLDOWN_MS, 3 days); 0 brings it back.

        Kept in the workspace ledger (the id only, a digest: no text), so it survives a restart. A malformed id or a forMs below 0 or above a year is invalid_params; while the workspace is incognito nothing is written (incognito_blocked).

        Errors: incognito_blocked, invalid_params, invalid_workspace, io_error.
        """
        return cast("DismissSuggestionResult", self._call("dismiss_suggestion", dict(params)))

    def compact(self, **params: Unpack[CompactArgs]) -> Checkpoint:
        """Checkpoint a session: a summary (semantic: written by the client's model; checkpoint: built without a model) replaces the covered events in build_context. Nothing is deleted: every event stays reachable through retrieve and search_history.

        A semantic summary must hold the sections '# Current Goal', '# Current State' and '# Next Step' (any heading level), be at most 12,000 tokens and contain no secret, else invalid_summary with data.problems. The preserved suffix keeps at least keepRecentTokens (default 10,000, held between 1,000 and 40,000; halved for reason overflow) and 5 text messages (2 for overflow), never splitting a tool call from its result; a history that fits it has nothing to compact yet (invalid_params, data.reason nothing_to_compact, data.liveTokens and data.keptTokens; data.path $.keepRecentTokens when the caller gave it, else $.sessionId). After 3 consecutive failed automatic compactions (reason budget or overflow) of a session, circuit_open until a manual compaction succeeds.

        Errors: circuit_open, conflict, incognito_blocked, invalid_params, invalid_summary, invalid_workspace, io_error, not_found.
        """
        return cast("Checkpoint", self._call("compact", dict(params)))

    def list_checkpoints(self, **params: Unpack[ListCheckpointsArgs]) -> CheckpointsResult:
        """A session's checkpoints, oldest first.

        Errors: invalid_params, invalid_workspace, not_found.
        """
        return cast("CheckpointsResult", self._call("list_checkpoints", dict(params)))

    def get_checkpoint(self, **params: Unpack[GetCheckpointArgs]) -> Checkpoint:
        """One checkpoint by id.

        Errors: invalid_params, invalid_workspace, not_found.
        """
        return cast("Checkpoint", self._call("get_checkpoint", dict(params)))

    def open_session(self, **params: Unpack[OpenSessionArgs]) -> SessionView:
        """Create a session (or reopen one by id). Incognito sessions live in memory only.

        A title over 300 characters is kept shortened at a word with an ellipsis; one over 65,536 characters is refused (too_large, data.field title). A persistent session cannot be opened while the workspace is incognito (incognito_blocked); a session keeps the kind it was created with (conflict); a deleted session's id is refused (conflict, reason deleted).

        Errors: conflict, incognito_blocked, invalid_params, invalid_workspace, io_error, too_large.
        """
        return cast("SessionView", self._call("open_session", dict(params)))

    def list_sessions(self, **params: Unpack[ListSessionsArgs]) -> SessionsResult:
        """The workspace's sessions, newest first (incognito ones flagged).

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("SessionsResult", self._call("list_sessions", dict(params)))

    def close_session(self, **params: Unpack[CloseSessionArgs]) -> SessionView:
        """Close a session: appends are refused until it is opened again.

        Errors: incognito_blocked, invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("SessionView", self._call("close_session", dict(params)))

    def delete_session(self, **params: Unpack[DeleteSessionArgs]) -> DeleteSessionResult:
        """Forget a session: its events, working state, manifests and checkpoints are erased; a tombstone (id, time, count, last hash) remains.

        Always allowed, also while the workspace is incognito or disabled.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("DeleteSessionResult", self._call("delete_session", dict(params)))

    def append_events(self, **params: Unpack[AppendEventsArgs]) -> AppendEventsResult:
        """Append up to 10,000 events atomically; secrets are redacted first. Acknowledged means durable.

        expectedSeq not the session's last seq: conflict with data.currentSeq. A closed session: conflict, reason closed. While the workspace is incognito, a persistent session is not written (incognito_blocked). An event over 8 MiB as JSON, as sent or once its secrets are redacted: too_large with data.index, nothing appended.

        Errors: conflict, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("AppendEventsResult", self._call("append_events", dict(params)))

    def read_events(self, **params: Unpack[ReadEventsArgs]) -> ReadEventsResult:
        """A session's events after afterSeq, in order.

        Each event is checked against the hash chain: verified is false when it does not chain (altered on disk). A reply carries as many events as fit in 8 MiB as JSON, one at least: fewer than limit then, with hasMore.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("ReadEventsResult", self._call("read_events", dict(params)))

    def search_history(self, **params: Unpack[SearchHistoryArgs]) -> SearchHistoryResult:
        """BM25 search over session events (Chinese and Japanese included).

        A reply carries the best hits that fit in 8 MiB as JSON, one at least (its text cut, textCut, when it alone is over): fewer than limit then, with omitted counting the rest.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("SearchHistoryResult", self._call("search_history", dict(params)))

    def retrieve(self, **params: Unpack[RetrieveArgs]) -> RetrieveResult:
        """The exact events named by event: refs, each verified against the hash chain.

        ok is false when an event is missing or its stored hash does not match its content (mismatchedSeqs, chainIntact). A reply carries the events that fit in 8 MiB as JSON, one at least, in the order asked: the refs left out (or the rest of a cut range) are listed in omitted. More refs than 10,000 (the events a call returns at most) is too_large with data.count the number of refs, before any is read.

        Errors: invalid_params, invalid_workspace, io_error, too_large.
        """
        return cast("RetrieveResult", self._call("retrieve", dict(params)))

    def get_working_state(self, **params: Unpack[GetWorkingStateArgs]) -> WorkingState:
        """A session's working state: goals, open threads, decisions, notes.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("WorkingState", self._call("get_working_state", dict(params)))

    def set_working_state(self, **params: Unpack[SetWorkingStateArgs]) -> SetWorkingStateResult:
        """Change a session's working state (goals <= 8, open threads <= 12, decisions <= 20, each at most 2,000 characters; notes <= 2,000 tokens a section and 12,000 in all).

        Past ~10,000 tokens of events, and every ~5,000 after, the daemon writes the note sections it derives itself (Current State, Task specification, Files and Functions, Errors & Corrections, Learnings, Key results, Worklog), marked as derived; a section a client writes is never overwritten (write "" to hand it back). Workflow is the client's alone. Lists over their cap and unknown note sections are refused before any text is read; the invalid_params for unknown sections names the first 20 (data.sections, sorted) and counts them all (data.unknownCount).

        Errors: conflict, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("SetWorkingStateResult", self._call("set_working_state", dict(params)))

    def get_manifest(self, **params: Unpack[GetManifestArgs]) -> Manifest:
        """What one build_context call sent (the session's latest without callId): each memory entry with the hash of the text shown, the sources of the other segments and the ref of every history message, and the curator's part when a curator strategy built it (in shadow mode, what the curator would have shown). A session keeps its latest 64 calls' manifests.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("Manifest", self._call("get_manifest", dict(params)))

    def record_episode(self, **params: Unpack[RecordEpisodeArgs]) -> RecordEpisodeResult:
        """Record an episode: a one-line, redacted summary of something that happened in a session, with tags and the events it came from.

        sourceRefs must name stored events of non-incognito sessions (invalid_params at $.sourceRefs[i] with data.ref and data.reason otherwise: not_an_event_ref, unknown_session, past_last_seq with data.lastSeq, incognito_session, not_intact). Refused while the workspace or the session is incognito.

        Errors: incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("RecordEpisodeResult", self._call("record_episode", dict(params)))

    def list_episodes(self, **params: Unpack[ListEpisodesArgs]) -> ListEpisodesResult:
        """Episodes, oldest first, filtered by tag, session, time or id.

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("ListEpisodesResult", self._call("list_episodes", dict(params)))

    def consolidation_candidates(self, **params: Unpack[ConsolidationCandidatesArgs]) -> CandidatesResult:
        """Tags whose episodes since their last consolidation reach the threshold (default 5 episodes from 2 sessions), with those episodes.

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("CandidatesResult", self._call("consolidation_candidates", dict(params)))

    def consolidate(self, **params: Unpack[ConsolidateArgs]) -> ProposeResult:
        """Propose the digest of a tag's evidence (origin extracted, consolidating the episodes); the user approves or rejects it like any proposal.

        Errors: disabled, gate_closed, incognito_blocked, insufficient_evidence, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("ProposeResult", self._call("consolidate", dict(params)))


class AsyncMethods:
    """One typed function per method: ``await client.m.read_state(workspace=ws)``."""

    __slots__ = ("_call",)

    def __init__(self, call: AsyncCall) -> None:
        self._call = call

    async def ping(self) -> str:
        """Liveness check: answers "pong"."""
        return cast("str", await self._call("ping", None))

    async def status(self) -> StatusResult:
        """Daemon version, pid, uptime, socket, data directory, open connections, warnings (a corrupt ledger reset, a workspace replaced, a ledger read-only on a full disk), the caps it enforces on messages (limits), and, when a model is configured, how far the semantic channel's indexing has got."""
        return cast("StatusResult", await self._call("status", None))

    async def rpc_discover(self) -> dict[str, Any]:
        """This daemon's OpenRPC document (protocol/openrpc.json)."""
        return cast("dict[str, Any]", await self._call("rpc.discover", None))

    async def shutdown(self) -> ShutdownResult:
        """Stop accepting connections, let in-flight requests finish, exit 0. Every open connection gets a daemon_stopping notification ({reason: "shutdown"}) first: clients that start makad on demand do not start it again after it.

        Errors: shutting_down.
        """
        return cast("ShutdownResult", await self._call("shutdown", None))

    async def get_settings(self, **params: Unpack[GetSettingsArgs]) -> Settings:
        """A workspace's settings.

        Errors: invalid_workspace.
        """
        return cast("Settings", await self._call("get_settings", dict(params)))

    async def set_settings(self, **params: Unpack[SetSettingsArgs]) -> Settings:
        """Change some of a workspace's settings (patch); returns all of them.

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("Settings", await self._call("set_settings", dict(params)))

    async def read_state(self, **params: Unpack[ReadStateArgs]) -> LocalMemoryState | StateNotModified:
        """The state of MEMORY.md: status, content, counts, revision and (optionally) its entries. disabled and incognito_blocked read nothing. With ifRevision, {notModified: true, revision} when nothing changed since that revision.

        Errors: invalid_workspace, io_error.
        """
        return cast("LocalMemoryState | StateNotModified", await self._call("read_state", dict(params)))

    async def add_entry(self, **params: Unpack[AddEntryArgs]) -> EntryResult:
        """The user's own new entry (origin manual, active at once, secrets redacted).

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("EntryResult", await self._call("add_entry", dict(params)))

    async def update_entry(self, **params: Unpack[UpdateEntryArgs]) -> EntryResult:
        """Change an entry's title, content or tags.

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", await self._call("update_entry", dict(params)))

    async def pin_entry(self, **params: Unpack[PinEntryArgs]) -> EntryResult:
        """Pin an entry (always in build_context's memory, first) or unpin it: its `pinned` tag.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", await self._call("pin_entry", dict(params)))

    async def archive_entry(self, **params: Unpack[ArchiveEntryArgs]) -> EntryResult:
        """Archive an entry.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", await self._call("archive_entry", dict(params)))

    async def restore_entry(self, **params: Unpack[RestoreEntryArgs]) -> EntryResult:
        """Make an archived entry active again.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", await self._call("restore_entry", dict(params)))

    async def delete_entry(self, **params: Unpack[DeleteEntryArgs]) -> EntryResult:
        """Remove an entry from MEMORY.md and every index; returns what was deleted.

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("EntryResult", await self._call("delete_entry", dict(params)))

    async def remove_outside_text(self, **params: Unpack[RemoveOutsideTextArgs]) -> RemoveOutsideTextResult:
        """Take out of MEMORY.md the lines above its first entry (text_outside_entries) whose memory is in MEMORY.md, waiting in PENDING.md or was rejected: bullets imported with import_memories and decided. Other lines stay. The preamble's title, comments and every entry are untouched; a backup is kept as for every write.

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("RemoveOutsideTextResult", await self._call("remove_outside_text", dict(params)))

    async def list_backups(self, **params: Unpack[ListBackupsArgs]) -> BackupsResult:
        """The last 20 versions of MEMORY.md and PENDING.md kept before each daemon write.

        Errors: invalid_workspace.
        """
        return cast("BackupsResult", await self._call("list_backups", dict(params)))

    async def restore_backup(self, **params: Unpack[RestoreBackupArgs]) -> RestoreBackupResult:
        """Put a backup back in place (the replaced text is itself backed up).

        Errors: conflict, disabled, incognito_blocked, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("RestoreBackupResult", await self._call("restore_backup", dict(params)))

    async def subscribe(self, **params: Unpack[SubscribeArgs]) -> SubscribeResult:
        """Receive memory_changed, proposals_changed and settings_changed notifications for a workspace on this connection.

        Errors: invalid_workspace.
        """
        return cast("SubscribeResult", await self._call("subscribe", dict(params)))

    async def unsubscribe(self, **params: Unpack[UnsubscribeArgs]) -> SubscribeResult:
        """Stop notifications for a workspace on this connection.

        Errors: invalid_workspace.
        """
        return cast("SubscribeResult", await self._call("unsubscribe", dict(params)))

    async def propose(self, **params: Unpack[ProposeArgs]) -> ProposeResult:
        """The agent's path: queue a memory for the user's approval in PENDING.md (never writes MEMORY.md). An origin other than extracted is invalid_params as the params are read, before any gate; then the gates in order: disabled, incognito_blocked, gate_closed (extractToolEnabled && agentReadEnabled), too_large. scope "global" queues in the user level's PENDING.md (workspace "@user", which must be enabled) with this workspace recorded in its lineage; the gates and the session are this workspace's. supersedes: the entry the proposal corrects or replaces (its id or memory:<id>), archived when the user approves; it must be active and visible to the proposing session (else invalid_params at $.supersedes), at most one open proposal replaces an entry, and at most 20 replacements wait at once (too_large).

        Each sourceRefs item must name what the workspace (the proposing one for scope global) stores: event:<sessionId>:<seq> or <from>-<to> a recorded session and seqs up to its last, memory:<id> an entry, checkpoint:<id> a checkpoint, episode:<id> an episode; else invalid_params at $.sourceRefs[i] with data.ref and data.reason (not_a_source_ref, unknown_session, past_last_seq with data.lastSeq, unknown_entry, unknown_checkpoint, unknown_episode), nothing queued. More than 10,000 refs is too_large.

        Errors: conflict, disabled, gate_closed, incognito_blocked, insufficient_evidence, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("ProposeResult", await self._call("propose", dict(params)))

    async def list_proposals(self, **params: Unpack[ListProposalsArgs]) -> ProposalsResult:
        """Open proposals with the ids of similar entries and, for a replacement, the entry it replaces as it is now (replaces).

        Errors: invalid_workspace, io_error.
        """
        return cast("ProposalsResult", await self._call("list_proposals", dict(params)))

    async def approve(self, **params: Unpack[ApproveArgs]) -> ApproveResult:
        """Activate proposals (optionally edited) in MEMORY.md and remove them from PENDING.md; a supersedes target is archived in the same write.

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("ApproveResult", await self._call("approve", dict(params)))

    async def reject(self, **params: Unpack[RejectArgs]) -> RejectResult:
        """Reject proposals: removed from PENDING.md, recorded so the same one is not queued again.

        A reason is at most 2,000 characters (too_large, data.field reason).

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, safe_mode, too_large.
        """
        return cast("RejectResult", await self._call("reject", dict(params)))

    async def memory_history(self, **params: Unpack[MemoryHistoryArgs]) -> HistoryResult:
        """Why do you believe this? The lineage of an entry or proposal.

        id is whole or a unique prefix of an entry's or proposal's id (the short ids lists print; an entry typed by hand, h-…, by its hex part too); the result's id is the whole one. A prefix of several ids is invalid_params with data.reason ambiguous_id and data.candidates (up to 10 ids); one of none is not_found.

        Errors: invalid_params, invalid_workspace, not_found.
        """
        return cast("HistoryResult", await self._call("memory_history", dict(params)))

    async def import_memories(self, **params: Unpack[ImportMemoriesArgs]) -> ImportResultWire:
        """Import memories from another tool into PENDING.md (origin imported); re-importing adds nothing. A binary or empty file is invalid_params (data.reason) and nothing is queued; a file in which nothing is found is invalid_params naming what the format expects; every such error lists data.formats; memories past PENDING.md's cap are deferred (or too_large when none fits).

        Errors: conflict, disabled, incognito_blocked, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("ImportResultWire", await self._call("import_memories", dict(params)))

    async def export_memories(self, **params: Unpack[ExportMemoriesArgs]) -> ExportResult:
        """Export active (and optionally archived) entries as JSON or Markdown.

        Errors: incognito_blocked, invalid_workspace, io_error.
        """
        return cast("ExportResult", await self._call("export_memories", dict(params)))

    async def build_context(self, **params: Unpack[BuildContextArgs]) -> ContextPack:
        """What the model should see this turn, within budgetTokens: memory, working state, summary and recall segments plus the live history, with a trace of every choice.

        totalTokens never exceeds budgetTokens; when even the newest user message cannot fit, a too_large error carries budgetTokens and minimumTokens. Each kind gets its share of the budget, then what the others left unused flows to the kinds that still have candidates, in priority order (PROTOCOL.md). The memory segment exists only when enabled && agentReadEnabled && !incognito (workspace and session); recall only with historyRecallEnabled and a query (the recency strategies need none). strategy (or the workspace's contextStrategy) picks deterministic (default), full, recent, summary, curator or curator_shadow; every strategy keeps the budget, tool adjacency and the gates. The same inputs (revision, last seq, budget, query, include, strategy) give byte-identical output for every strategy but curator.

        Errors: invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("ContextPack", await self._call("build_context", dict(params)))

    async def get_attention(self, **params: Unpack[GetAttentionArgs]) -> AttentionResult:
        """What the user is in the middle of in this workspace: active and abandoned threads, focus, proposals waiting, rejections cooling down, rhythm — each line with its refs.

        Derived without a model from the behavior records of past sessions (written when a session is closed or idle), PENDING.md and recent rejections, off the request path; this reads the stored state. Incognito sessions contribute nothing; with attentionEnabled off or the workspace incognito the reply is enabled: false and empty. A thread a later session resolved is not listed (makad's docs/ATTENTION.md).

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("AttentionResult", await self._call("get_attention", dict(params)))

    async def suggest(self, **params: Unpack[SuggestArgs]) -> SuggestResult:
        """What is worth offering the user unasked — a thread to resume, a failure still standing, proposals waiting for review — each with a score, the reason and its refs; often nothing.

        Scored without a model from the stored attention state and behavior records (makad's docs/ATTENTION.md): only candidates scoring at least threshold, not dismissed, one per session, at most 3. The asking session's own threads are not suggested back. Nothing is suggested (enabled: false, silenced says why) with attentionEnabled off, agentReadEnabled off, or the workspace or the session incognito. Nothing is derived on the request path. A sessionId the workspace does not hold is not_found (data.sessionId).

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("SuggestResult", await self._call("suggest", dict(params)))

    async def dismiss_suggestion(self, **params: Unpack[DismissSuggestionArgs]) -> DismissSuggestionResult:
        """Hide a suggestion for forMs (default the daemon's cooldown, MAKAD_SUGGESTION_COOLDOWN_MS, 3 days); 0 brings it back.

        Kept in the workspace ledger (the id only, a digest: no text), so it survives a restart. A malformed id or a forMs below 0 or above a year is invalid_params; while the workspace is incognito nothing is written (incognito_blocked).

        Errors: incognito_blocked, invalid_params, invalid_workspace, io_error.
        """
        return cast("DismissSuggestionResult", await self._call("dismiss_suggestion", dict(params)))

    async def compact(self, **params: Unpack[CompactArgs]) -> Checkpoint:
        """Checkpoint a session: a summary (semantic: written by the client's model; checkpoint: built without a model) replaces the covered events in build_context. Nothing is deleted: every event stays reachable through retrieve and search_history.

        A semantic summary must hold the sections '# Current Goal', '# Current State' and '# Next Step' (any heading level), be at most 12,000 tokens and contain no secret, else invalid_summary with data.problems. The preserved suffix keeps at least keepRecentTokens (default 10,000, held between 1,000 and 40,000; halved for reason overflow) and 5 text messages (2 for overflow), never splitting a tool call from its result; a history that fits it has nothing to compact yet (invalid_params, data.reason nothing_to_compact, data.liveTokens and data.keptTokens; data.path $.keepRecentTokens when the caller gave it, else $.sessionId). After 3 consecutive failed automatic compactions (reason budget or overflow) of a session, circuit_open until a manual compaction succeeds.

        Errors: circuit_open, conflict, incognito_blocked, invalid_params, invalid_summary, invalid_workspace, io_error, not_found.
        """
        return cast("Checkpoint", await self._call("compact", dict(params)))

    async def list_checkpoints(self, **params: Unpack[ListCheckpointsArgs]) -> CheckpointsResult:
        """A session's checkpoints, oldest first.

        Errors: invalid_params, invalid_workspace, not_found.
        """
        return cast("CheckpointsResult", await self._call("list_checkpoints", dict(params)))

    async def get_checkpoint(self, **params: Unpack[GetCheckpointArgs]) -> Checkpoint:
        """One checkpoint by id.

        Errors: invalid_params, invalid_workspace, not_found.
        """
        return cast("Checkpoint", await self._call("get_checkpoint", dict(params)))

    async def open_session(self, **params: Unpack[OpenSessionArgs]) -> SessionView:
        """Create a session (or reopen one by id). Incognito sessions live in memory only.

        A title over 300 characters is kept shortened at a word with an ellipsis; one over 65,536 characters is refused (too_large, data.field title). A persistent session cannot be opened while the workspace is incognito (incognito_blocked); a session keeps the kind it was created with (conflict); a deleted session's id is refused (conflict, reason deleted).

        Errors: conflict, incognito_blocked, invalid_params, invalid_workspace, io_error, too_large.
        """
        return cast("SessionView", await self._call("open_session", dict(params)))

    async def list_sessions(self, **params: Unpack[ListSessionsArgs]) -> SessionsResult:
        """The workspace's sessions, newest first (incognito ones flagged).

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("SessionsResult", await self._call("list_sessions", dict(params)))

    async def close_session(self, **params: Unpack[CloseSessionArgs]) -> SessionView:
        """Close a session: appends are refused until it is opened again.

        Errors: incognito_blocked, invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("SessionView", await self._call("close_session", dict(params)))

    async def delete_session(self, **params: Unpack[DeleteSessionArgs]) -> DeleteSessionResult:
        """Forget a session: its events, working state, manifests and checkpoints are erased; a tombstone (id, time, count, last hash) remains.

        Always allowed, also while the workspace is incognito or disabled.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("DeleteSessionResult", await self._call("delete_session", dict(params)))

    async def append_events(self, **params: Unpack[AppendEventsArgs]) -> AppendEventsResult:
        """Append up to 10,000 events atomically; secrets are redacted first. Acknowledged means durable.

        expectedSeq not the session's last seq: conflict with data.currentSeq. A closed session: conflict, reason closed. While the workspace is incognito, a persistent session is not written (incognito_blocked). An event over 8 MiB as JSON, as sent or once its secrets are redacted: too_large with data.index, nothing appended.

        Errors: conflict, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("AppendEventsResult", await self._call("append_events", dict(params)))

    async def read_events(self, **params: Unpack[ReadEventsArgs]) -> ReadEventsResult:
        """A session's events after afterSeq, in order.

        Each event is checked against the hash chain: verified is false when it does not chain (altered on disk). A reply carries as many events as fit in 8 MiB as JSON, one at least: fewer than limit then, with hasMore.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("ReadEventsResult", await self._call("read_events", dict(params)))

    async def search_history(self, **params: Unpack[SearchHistoryArgs]) -> SearchHistoryResult:
        """BM25 search over session events (Chinese and Japanese included).

        A reply carries the best hits that fit in 8 MiB as JSON, one at least (its text cut, textCut, when it alone is over): fewer than limit then, with omitted counting the rest.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("SearchHistoryResult", await self._call("search_history", dict(params)))

    async def retrieve(self, **params: Unpack[RetrieveArgs]) -> RetrieveResult:
        """The exact events named by event: refs, each verified against the hash chain.

        ok is false when an event is missing or its stored hash does not match its content (mismatchedSeqs, chainIntact). A reply carries the events that fit in 8 MiB as JSON, one at least, in the order asked: the refs left out (or the rest of a cut range) are listed in omitted. More refs than 10,000 (the events a call returns at most) is too_large with data.count the number of refs, before any is read.

        Errors: invalid_params, invalid_workspace, io_error, too_large.
        """
        return cast("RetrieveResult", await self._call("retrieve", dict(params)))

    async def get_working_state(self, **params: Unpack[GetWorkingStateArgs]) -> WorkingState:
        """A session's working state: goals, open threads, decisions, notes.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("WorkingState", await self._call("get_working_state", dict(params)))

    async def set_working_state(self, **params: Unpack[SetWorkingStateArgs]) -> SetWorkingStateResult:
        """Change a session's working state (goals <= 8, open threads <= 12, decisions <= 20, each at most 2,000 characters; notes <= 2,000 tokens a section and 12,000 in all).

        Past ~10,000 tokens of events, and every ~5,000 after, the daemon writes the note sections it derives itself (Current State, Task specification, Files and Functions, Errors & Corrections, Learnings, Key results, Worklog), marked as derived; a section a client writes is never overwritten (write "" to hand it back). Workflow is the client's alone. Lists over their cap and unknown note sections are refused before any text is read; the invalid_params for unknown sections names the first 20 (data.sections, sorted) and counts them all (data.unknownCount).

        Errors: conflict, incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("SetWorkingStateResult", await self._call("set_working_state", dict(params)))

    async def get_manifest(self, **params: Unpack[GetManifestArgs]) -> Manifest:
        """What one build_context call sent (the session's latest without callId): each memory entry with the hash of the text shown, the sources of the other segments and the ref of every history message, and the curator's part when a curator strategy built it (in shadow mode, what the curator would have shown). A session keeps its latest 64 calls' manifests.

        Errors: invalid_params, invalid_workspace, io_error, not_found.
        """
        return cast("Manifest", await self._call("get_manifest", dict(params)))

    async def record_episode(self, **params: Unpack[RecordEpisodeArgs]) -> RecordEpisodeResult:
        """Record an episode: a one-line, redacted summary of something that happened in a session, with tags and the events it came from.

        sourceRefs must name stored events of non-incognito sessions (invalid_params at $.sourceRefs[i] with data.ref and data.reason otherwise: not_an_event_ref, unknown_session, past_last_seq with data.lastSeq, incognito_session, not_intact). Refused while the workspace or the session is incognito.

        Errors: incognito_blocked, invalid_params, invalid_workspace, io_error, not_found, too_large.
        """
        return cast("RecordEpisodeResult", await self._call("record_episode", dict(params)))

    async def list_episodes(self, **params: Unpack[ListEpisodesArgs]) -> ListEpisodesResult:
        """Episodes, oldest first, filtered by tag, session, time or id.

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("ListEpisodesResult", await self._call("list_episodes", dict(params)))

    async def consolidation_candidates(self, **params: Unpack[ConsolidationCandidatesArgs]) -> CandidatesResult:
        """Tags whose episodes since their last consolidation reach the threshold (default 5 episodes from 2 sessions), with those episodes.

        Errors: invalid_params, invalid_workspace, io_error.
        """
        return cast("CandidatesResult", await self._call("consolidation_candidates", dict(params)))

    async def consolidate(self, **params: Unpack[ConsolidateArgs]) -> ProposeResult:
        """Propose the digest of a tag's evidence (origin extracted, consolidating the episodes); the user approves or rejects it like any proposal.

        Errors: disabled, gate_closed, incognito_blocked, insufficient_evidence, invalid_params, invalid_workspace, io_error, safe_mode, too_large.
        """
        return cast("ProposeResult", await self._call("consolidate", dict(params)))


#: Method names in document order.
METHOD_NAMES = ("ping", "status", "rpc.discover", "shutdown", "get_settings", "set_settings", "read_state", "add_entry", "update_entry", "pin_entry", "archive_entry", "restore_entry", "delete_entry", "remove_outside_text", "list_backups", "restore_backup", "subscribe", "unsubscribe", "propose", "list_proposals", "approve", "reject", "memory_history", "import_memories", "export_memories", "build_context", "get_attention", "suggest", "dismiss_suggestion", "compact", "list_checkpoints", "get_checkpoint", "open_session", "list_sessions", "close_session", "delete_session", "append_events", "read_events", "search_history", "retrieve", "get_working_state", "set_working_state", "get_manifest", "record_episode", "list_episodes", "consolidation_candidates", "consolidate")

#: Domain error kinds (``error.data.kind``) and their codes.
DOMAIN_ERROR_CODES = {
    "invalid_params": -32602,
    "not_found": -32001,
    "conflict": -32002,
    "incognito_blocked": -32003,
    "disabled": -32004,
    "gate_closed": -32005,
    "too_large": -32006,
    "reply_too_large": -32006,
    "safe_mode": -32007,
    "invalid_summary": -32008,
    "io_error": -32009,
    "invalid_workspace": -32010,
    "insufficient_evidence": -32011,
    "circuit_open": -32012,
    "shutting_down": -32013,
    "too_many_connections": -32014,
}

#: The caps on one message and on append_events (x-limits; maxMessageBytes is the
#: default of the daemon's --max-message-bytes).
LIMITS = {
    "maxMessageBytes": 16777216,
    "maxMessageValues": 100000,
    "maxAppendEvents": 10000,
    "maxEventBytes": 8388608,
}
