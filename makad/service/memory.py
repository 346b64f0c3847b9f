"""MEMORY.md: read_state, settings, the user's own entry operations, backups, subscriptions.

Every daemon write follows one path (``MemoryWriter.write``, in
``makad.service.memory_writes``): take in the user's saves first, apply the
operation to the file as it is now, never replace a save not seen.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from msgspec import UNSET

from makad.core import file_warnings as fw
from makad.core import memory_format as fmt
from makad.core.confidence import user_values
from makad.core.entries import clean_entry, is_open, normalize_tags
from makad.core.levels import USER_LEVEL, Level, level_scope, overridden, user_level_id
from makad.core.memory_select import OtherLevelPins, is_pinned, with_pin
from makad.core.metadata_warnings import metadata
from makad.core.misspelt_comment import misspelt_comments
from makad.core.peer import Peer
from makad.core.switches import DAY_MS, agent_reads, default_decay_ms
from makad.core.types import MAX_INT64, Entry, NewMemoryEvent
from makad.core.undecodable import display
from makad.errors import (
    Conflict,
    InvalidParams,
    InvalidWorkspace,
    IOFailure,
    NotFound,
)
from makad.service import entry_dates
from makad.service.attention import retract
from makad.service.common import Request, WorkspaceAccess, handlers_of, in_thread, now_ms, workspace_warnings
from makad.service.confidence import confidence_map
from makad.service.memory_writes import Change, MemoryFile, MemoryWriter
from makad.service.written_files import reports_memory_written
from makad.store import memory_files as files
from makad.store.tracked import unchanged_in
from makad.store.workspace_state import DerivedEntries, PinnedWarnings, ShownText
from makad.store.workspaces import Workspace
from makad.wire.base import Handler, Warning
from makad.wire.memory import (
    AddEntryParams,
    BackupsResult,
    EntryIdParams,
    EntryResult,
    GetSettingsParams,
    ListBackupsParams,
    LocalMemoryState,
    MemoryStatus,
    PinEntryParams,
    ReadStateParams,
    RestoreBackupParams,
    RestoreBackupResult,
    SetSettingsParams,
    Settings,
    StateNotModified,
    SubscribeParams,
    SubscribeResult,
    UpdateEntryParams,
)

T = TypeVar("T")

__all__ = ["Change", "MemoryService", "MemoryWriter"]


def _root_files(workspace: Path) -> list[str]:
    """(blocking) Which of MEMORY.md and PENDING.md stand at the workspace's top."""
    found = []
    for name in fw.ROOT_FILES:
        try:
            if (workspace / name).is_file():
                found.append(name)
        except OSError:
            pass
    return found


def _decay_due(ws: Workspace, now: int | None = None) -> bool:
    """Whether an active entry of MEMORY.md has outlived its decay (``apply_decay`` would
    archive it)."""
    due = ws.memory.next_expiry
    if due is None or ws.memory.missing or ws.memory.too_large:
        return False
    return (now_ms() if now is None else now) > due


class MemoryService:
    def __init__(self, ctx: WorkspaceAccess, writer: MemoryWriter) -> None:
        self._ctx = ctx
        self._files = writer

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(
            self,
            "get_settings set_settings read_state add_entry update_entry pin_entry archive_entry"
            " restore_entry delete_entry list_backups restore_backup subscribe unsubscribe",
        )

    # --- settings -----------------------------------------------------------------

    async def get_settings(self, params: GetSettingsParams, peer: Peer) -> Settings:
        ws = await self._ctx.workspace(params.workspace)
        return await self._ctx.load_settings(ws)

    async def set_settings(self, params: SetSettingsParams, peer: Peer) -> Settings:
        ws = await self._ctx.workspace(params.workspace)
        days = params.default_decay_days
        if days is not UNSET and days is not None and not 1 <= days * DAY_MS <= MAX_INT64:
            # An entry's decayTtlMs is whole ms that its metadata can hold: 0 would never
            # decay, a longer one would not read back.
            raise InvalidParams(
                f"defaultDecayDays must be positive (at least 1 ms, at most {MAX_INT64 // DAY_MS} days) "
                "or null",
                path="$.defaultDecayDays",
            )
        async with ws.lock:
            current = await self._ctx.load_settings(ws)
            patch = {
                name: getattr(params, name)
                for name in Settings.__struct_fields__
                if getattr(params, name, UNSET) is not UNSET
            }
            updated = msgspec.structs.replace(current, **patch)
            if updated != current:
                updated = await self._ctx.store_settings(ws, updated)
                await self._ctx.bump(ws, "settings_changed", "settings")
            return updated

    # --- reading ------------------------------------------------------------------

    async def read_state(self, params: ReadStateParams, peer: Peer) -> LocalMemoryState | StateNotModified:
        ctx = self._ctx
        # A known workspace: its memory files' stats in the spelling check's hop, and for a
        # full read the user level's check and stats too (its pinned entries join the
        # warnings); a conditional read mostly answers notModified without them.
        files_unchanged: bool | None = None
        user_at_hand: _UserAtHand | None = None
        full = params.if_revision is None
        registry = ctx.registry

        def stats(ws: Workspace) -> tuple[bool, _UserAtHand | None]:
            user = registry.known_now(USER_LEVEL) if ws.level == "workspace" else None
            return _files_unchanged_now(ws), None if user is None else (user, _files_unchanged_now(user))

        # A conditional read's stats are one function for every call: concurrent reads of
        # the workspace share the hop (``known_and``).
        at_hand = await ctx.workspace_at_hand(params.workspace, stats if full else _own_stats_now)
        if at_hand is not None:
            ws, (files_unchanged, user_at_hand) = at_hand
        else:
            ws = await ctx.workspace(params.workspace)
        settings = ws.state.settings
        if settings is None:
            settings = await ctx.load_settings(ws)
        if params.if_revision is not None:
            locked = ws.lock.locked()
            if locked:  # a write or an ingest is under way: answer after it
                async with ws.lock:
                    pass
                locked = ws.lock.locked()
                files_unchanged = None  # stat'ed before that write: look again
            if not locked and await self._unchanged_since(ws, settings, params.if_revision, files_unchanged):
                return StateNotModified(not_modified=True, revision=params.if_revision)
        notices = workspace_warnings(ws)  # a replaced workspace, a reset ledger
        base: dict[str, Any] = {
            "path": str(ws.memory_path),
            "enabled": settings.enabled,
            "agent_read_enabled": settings.agent_read_enabled,
            "warnings": notices,
        }
        if params.include_content:
            base["content"] = ""  # the ok state's text replaces it
        if not settings.enabled or settings.incognito:
            status: MemoryStatus = "disabled" if not settings.enabled else "incognito_blocked"
            return LocalMemoryState(
                **base,
                status=status,
                entry_count=0,
                latest_entry=None,
                reason="memory is disabled"
                if status == "disabled"
                else "incognito is on: memory is not read",
                revision=await self._ctx.revision(ws),
                sha256=None,
                pending_count=0,
            )
        try:
            # Nothing to take in or archive (and nobody writing): the state at hand is
            # current, and taking the lock would only cost a wait.
            if files_unchanged is None:
                files_unchanged = await self._files_unchanged(ws)
            if ws.lock.locked() or not files_unchanged or _decay_due(ws):
                async with ws.lock:
                    if not await self._files_unchanged(ws):  # else refresh has nothing to do
                        await self._files.refresh(ws)
                    await self.apply_decay(ws)
        except (IOFailure, InvalidWorkspace) as exc:  # the contract's error status
            reason = exc.message
            return LocalMemoryState(
                **base,
                status="error",
                entry_count=0,
                latest_entry=None,
                reason=reason,
                revision=await self._ctx.revision(ws),
                sha256=None,
                pending_count=0,
            )
        revision = await self._ctx.revision(ws)
        if params.if_revision == revision:  # the files were touched, not changed
            return StateNotModified(not_modified=True, revision=revision)
        pending_count = sum(1 for s in ws.pending.doc.sections if is_open(s.entry))
        cap = self._ctx.settings.memory_max_bytes
        pending_warnings = fw.pending_over_cap(ws.pending.too_large, ws.pending.size, cap)
        if ws.memory.too_large:
            return LocalMemoryState(
                **{**base, "warnings": [*notices, *pending_warnings]},
                status="safe_mode",
                entry_count=0,
                latest_entry=None,
                reason=f"MEMORY.md is {ws.memory.size} bytes, over the "
                f"{self._ctx.settings.memory_max_bytes}-byte cap: no entries are read "
                "until it is shrunk",
                revision=revision,
                sha256=None,
                pending_count=pending_count,
            )
        # Everything the answer says about the files, taken before the first await below:
        # a write landing meanwhile must not mix two versions into one answer.
        all_entries, active, latest = self._derived(ws)
        doc, sha256 = ws.memory.doc, ws.memory.sha256
        content, warnings = await self._shown_text(ws)  # of the version taken above
        shown = None
        trust = None
        if params.include_entries:
            shown = all_entries if params.include_archived else active
            if params.include_confidence:
                trust = await confidence_map(ws, shown, params.include_archived)
        if not doc.sections:  # "no entries": say where the memory might be instead
            warnings = [*warnings, *fw.misplaced(await in_thread(_root_files, ws.path), ws.path)]
        warnings = [*warnings, *await self._pinned_warnings(ws, doc, all_entries, user_at_hand)]
        return LocalMemoryState(
            **{
                **base,
                "warnings": [*notices, *warnings, *pending_warnings],
                **({"content": content} if params.include_content else {}),
            },
            status="ok",
            entry_count=len(active),
            latest_entry=latest,
            reason=None,
            revision=revision,
            sha256=sha256,
            pending_count=pending_count,
            entries=shown,
            confidence=trust,
        )

    @staticmethod
    async def _files_unchanged(ws: Workspace) -> bool:
        """Both memory files are surely what was last read (stat signatures, on a worker
        thread: the workspace's disk may be slow or hung)."""
        return await in_thread(_files_unchanged_now, ws)

    async def _unchanged_since(
        self, ws: Workspace, settings: Settings, revision: int, files_unchanged: bool | None = None
    ) -> bool:
        """Whether a conditional read can answer notModified without reading: the
        revision is the one asked about (it moves with every change of MEMORY.md, PENDING.md
        or the settings), no decay is due, and both files still have the stat signature
        last read, so a user's edit the watcher has not ingested yet goes the full way.
        The caller has seen that nothing holds the lock."""
        if ws.revision != revision:
            return False
        if not settings.enabled or settings.incognito:
            return True  # nothing is read in these states; the switches bump the revision
        if files_unchanged is None:
            files_unchanged = await self._files_unchanged(ws)
        if _decay_due(ws) or not files_unchanged:
            return False
        return ws.revision == revision and not ws.lock.locked()  # nothing began meanwhile

    async def _pinned_warnings(
        self,
        ws: Workspace,
        doc: fmt.MemoryDocument,
        entries: list[Entry],
        user_at_hand: _UserAtHand | None = None,
    ) -> list[Warning]:
        """``pinned_over_share`` warnings for ``doc`` (MEMORY.md as read, ``entries`` its
        entries) and, in a workspace, the user level's pinned entries its packs show beside
        them; worked out once a day per version of both files (an entry's block grows once
        it is a day old: its age and a caveat join its ref line)."""
        now = now_ms()
        user_doc, user_entries = (
            await self._user_pinned(user_at_hand) if ws.level == "workspace" else (None, [])
        )
        cached = ws.state.pinned_warnings
        if (
            cached is not None
            and cached.doc is doc
            and cached.user_doc is user_doc
            and cached.day == now // DAY_MS
        ):
            return cached.warnings
        found: list[Warning] = []
        if user_entries or any(is_pinned(entry) for entry in entries):
            found = await in_thread(_pinned_over_share, doc, entries, now, ws.level, user_doc, user_entries)
        ws.state.pinned_warnings = PinnedWarnings(doc, now // DAY_MS, found, user_doc)
        return found

    async def _user_pinned(
        self, user_at_hand: _UserAtHand | None = None
    ) -> tuple[fmt.MemoryDocument | None, list[Entry]]:
        """The user level's MEMORY.md and its active pinned entries, when the user level
        exists and lets agents read it (its entries then join the workspace's packs).
        ``user_at_hand``: the user level and its files' stats, checked in the caller's hop."""
        try:
            # Known already: its memory files' stats in the spelling check's hop.
            files_unchanged: bool | None = None
            at_hand = (
                user_at_hand
                if user_at_hand is not None and self._ctx.adopt_at_hand(user_at_hand[0])
                else None
            )
            if at_hand is None:
                at_hand = await self._ctx.workspace_at_hand(USER_LEVEL, _files_unchanged_now)
            if at_hand is not None:
                uws, files_unchanged = at_hand
            else:
                found = await self._ctx.user_level_if_any()
                if found is None:
                    return None, []
                uws = found
            if not agent_reads(await self._ctx.load_settings(uws)):
                return None, []
            if files_unchanged is None:
                files_unchanged = await self._files_unchanged(uws)
            if uws.lock.locked() or not files_unchanged:
                async with uws.lock:
                    if not await self._files_unchanged(uws):
                        await self._files.refresh(uws)
        except (IOFailure, InvalidWorkspace):  # the workspace's own warnings still hold
            return None, []
        if uws.memory.too_large:
            return None, []
        _, active, _ = self._derived(uws)
        return uws.memory.doc, [entry for entry in active if is_pinned(entry)]

    @staticmethod
    async def _shown_text(ws: Workspace) -> tuple[str, list[Warning]]:
        """MEMORY.md's text as read_state shows it, and the warnings about what the files
        hold, for the versions at hand when it is called. Worked out on a worker thread:
        a file's comments can hold thousands of keys to guess at (a cloned repository's
        MEMORY.md): seconds of work, which no other call waits for."""
        memory, pending = ws.memory, ws.pending
        memory_text, pending_text, memory_doc, pending_doc = (
            memory.text,
            pending.text,
            memory.doc,
            pending.doc,
        )
        cached = ws.state.shown_text
        if cached is not None and cached.memory_text is memory_text and cached.pending_text is pending_text:
            return cached.shown, cached.warnings
        shown, warnings = await in_thread(
            _shown_and_warnings, memory_text, pending_text, memory_doc, pending_doc
        )
        ws.state.shown_text = ShownText(memory_text, pending_text, shown, warnings)
        return shown, warnings

    @staticmethod
    def _derived(ws: Workspace) -> tuple[list[Entry], list[Entry], Entry | None]:
        """(all entries, active ones, the latest active) of MEMORY.md, cached per version."""
        cached = ws.state.derived
        if cached is not None and cached.doc is ws.memory.doc:
            return cached.all_entries, cached.active, cached.latest
        all_entries = entry_dates.dated(ws, fmt.entries(ws.memory.doc))
        active = [e for e in all_entries if e.status == "active"]
        latest = max(active, key=lambda e: (e.updated_at, e.created_at), default=None)
        ws.state.derived = DerivedEntries(ws.memory.doc, all_entries, active, latest)
        return all_entries, active, latest

    async def clean_temp_files(self, ws: Workspace) -> None:
        """Recovery: drop temp files a kill -9 left in the memory directory (one that may
        hold a save the daemon had just displaced is backed up first)."""

        def keep(kind: str, data: bytes) -> None:
            files.save_backup(ws.backups_dir, kind, data.decode("utf-8", "surrogateescape"))

        cap = self._ctx.settings.memory_max_bytes
        await in_thread(files.remove_stale_temp_files, ws.memory_dir, keep, cap)

    async def ingest(self, ws: Workspace) -> None:
        """Pick up whatever changed on disk (the watcher calls this after each batch)."""
        settings = await self._ctx.load_settings(ws)
        if not settings.enabled or settings.incognito:
            return
        async with ws.lock:
            await self._files.refresh(ws)
            await self.apply_decay(ws)

    async def to_ingest(self, wss: list[Workspace]) -> list[Workspace]:
        """Those of ``wss`` that ``ingest`` would find something to do in: a memory file
        changed since it was last read (stat signatures, all in one worker-thread hop), a
        write or take-in under way, an entry due to decay. The watcher reads only these
        when its watch restarts, not every workspace it watches."""

        def changed() -> list[bool]:
            return [not unchanged_in(ws.memory_dir_name, ws.memory_files) for ws in wss]

        flags = await in_thread(changed)
        return [ws for ws, flag in zip(wss, flags, strict=True) if flag or ws.lock.locked() or _decay_due(ws)]

    async def apply_decay(self, ws: Workspace) -> None:
        """Under ws.lock: archive expired entries in place (a write the user sees)."""
        now = now_ms()
        if not _decay_due(ws, now):
            return
        _, expired = fmt.apply_decay(ws.memory.doc, now)
        if not expired:
            return

        def op(doc: fmt.MemoryDocument) -> Change:
            new_doc, _ = fmt.apply_decay(doc, now)
            return Change(new_doc, frozenset())

        await self._files.write(ws, "memory", op)

        def record() -> None:
            for entry_id in expired:
                ws.ledger.append_memory_event(action="decayed", actor="daemon", entry_id=entry_id)

        await in_thread(record)

    # --- the user's own operations ------------------------------------------------------

    @reports_memory_written
    async def add_entry(self, params: AddEntryParams, peer: Peer) -> EntryResult:
        ws = await self._ctx.workspace(params.workspace)

        async def run(request: Request) -> EntryResult:
            settings = await self._ctx.require_writable(ws)
            title, content, redactions = clean_entry(params.title, params.content)
            tags = await in_thread(normalize_tags, params.tags)  # each tag redacted: off the loop
            if params.scope == "session" and not params.session_id:
                raise InvalidParams("a session-scoped entry needs sessionId", path="$.sessionId")
            scope = level_scope(ws.level, params.scope, params.session_id)
            now = now_ms()
            decay = params.decay_ttl_ms if params.decay_ttl_ms is not None else default_decay_ms(settings)
            entry = Entry(
                id=fmt.new_entry_id(content, now),
                title=title,
                content=content,
                origin="manual",
                created_at=now,
                updated_at=now,
                status="active",
                tags=tags,
                decay_ttl_ms=decay,
                scope=scope,
                session_id=params.session_id,
            )

            intent_id = None
            if params.request_id is not None:
                # A retry after a crash between the file write and the stored result must
                # add the very same entry (same id), not a second one.
                intent_id = f"add_entry:{params.request_id}"
                planned = await in_thread(ws.ledger.get_intent, intent_id)
                if planned is not None:
                    entry = msgspec.convert(planned.payload["entry"], Entry)
                else:
                    await in_thread(
                        ws.ledger.begin_intent,
                        "request",
                        {"entry": msgspec.to_builtins(entry)},
                        intent_id=intent_id,
                    )
            planned_entry = entry

            def op(doc: fmt.MemoryDocument) -> Change:
                return Change(fmt.upsert(doc, planned_entry), frozenset({planned_entry.id}))

            async with ws.lock:
                await self._files.write(ws, "memory", op, expected_revision=params.expected_revision)
                revision = await self._ctx.revision(ws)
            result = EntryResult(entry=entry, revision=revision, redactions=redactions)
            added = NewMemoryEvent(
                action="added", actor="user", entry_id=entry.id, data={"redactions": redactions}
            )
            await in_thread(
                ws.ledger.record_lineage, [added], finish_intent=intent_id, request=request.record(result)
            )
            return result

        return await self._ctx.idempotent(ws, params.request_id, "add_entry", EntryResult, run)

    @reports_memory_written
    async def update_entry(self, params: UpdateEntryParams, peer: Peer) -> EntryResult:
        ws = await self._ctx.workspace(params.workspace)
        # Each tag is redacted: off the event loop, before the write (which runs on it).
        new_tags = None if params.tags is UNSET else await in_thread(normalize_tags, params.tags)

        def change(entry: Entry) -> tuple[Entry, int]:
            title = entry.title if params.title is UNSET else params.title
            content = entry.content if params.content is UNSET else params.content
            # A title is required only when one is given: a heading the user left empty stays so.
            title, content, redactions = clean_entry(title, content, title_required=params.title is not UNSET)
            tags = entry.tags if new_tags is None else new_tags
            return msgspec.structs.replace(
                entry, title=title, content=content, tags=tags, updated_at=now_ms()
            ), redactions

        return await self._modify(
            ws, params.id, "update_entry", "updated", change, params.expected_revision, params.request_id
        )

    @reports_memory_written
    async def pin_entry(self, params: PinEntryParams, peer: Peer) -> EntryResult:
        ws = await self._ctx.workspace(params.workspace)
        pinned = params.pinned

        def pin(entry: Entry) -> tuple[Entry, int]:
            # Not an edit of what the entry says: its dates stay.
            return msgspec.structs.replace(entry, tags=with_pin(entry.tags, pinned)), 0

        return await self._modify(
            ws,
            params.id,
            "pin_entry",
            "pinned" if pinned else "unpinned",
            pin,
            params.expected_revision,
            params.request_id,
            already=lambda entry: is_pinned(entry) == pinned,
        )

    @reports_memory_written
    async def archive_entry(self, params: EntryIdParams, peer: Peer) -> EntryResult:
        ws = await self._ctx.workspace(params.workspace)
        return await self._modify(
            ws,
            params.id,
            "archive_entry",
            "archived",
            lambda e: (msgspec.structs.replace(e, status="archived", updated_at=now_ms()), 0),
            params.expected_revision,
            params.request_id,
        )

    @reports_memory_written
    async def restore_entry(self, params: EntryIdParams, peer: Peer) -> EntryResult:
        ws = await self._ctx.workspace(params.workspace)

        def restore(entry: Entry) -> tuple[Entry, int]:
            now = now_ms()
            decay = entry.decay_ttl_ms
            if decay and now > entry.created_at + decay:
                # Past its deadline it would be archived again at once: the clock restarts
                # by lengthening the TTL, so createdAt keeps saying when it was created.
                decay = now - entry.created_at + decay
            return msgspec.structs.replace(entry, status="active", updated_at=now, decay_ttl_ms=decay), 0

        return await self._modify(
            ws, params.id, "restore_entry", "restored", restore, params.expected_revision, params.request_id
        )

    @reports_memory_written
    async def delete_entry(self, params: EntryIdParams, peer: Peer) -> EntryResult:
        ws = await self._ctx.workspace(params.workspace)
        return await self._modify(
            ws, params.id, "delete_entry", "deleted", None, params.expected_revision, params.request_id
        )

    async def _modify(
        self,
        ws: Workspace,
        entry_id: str,
        method: str,
        action: str,
        change: Callable[[Entry], tuple[Entry, int]] | None,
        expected_revision: int | None,
        request_id: str | None,
        already: Callable[[Entry], bool] | None = None,
    ) -> EntryResult:
        """Change one entry under the lock, record it, answer its retries alike. ``already``:
        true when the entry is already as ``change`` would make it (nothing is written)."""

        async def run(request: Request) -> EntryResult:
            await self._ctx.require_writable(ws)
            result: dict[str, Any] = {}
            intent_id = None if request_id is None else f"{method}:{request_id}"
            earlier = None if intent_id is None else await in_thread(ws.ledger.get_intent, intent_id)

            def op(doc: fmt.MemoryDocument) -> Change:
                if earlier is not None:
                    # A retry of a change whose first attempt may have reached the file:
                    # apply the recorded outcome again (a no-op when it is already there).
                    planned = msgspec.convert(earlier.payload["entry"], Entry)
                    result["entry"] = planned
                    result["redactions"] = int(earlier.payload.get("redactions", 0))
                    if change is None:
                        return Change(fmt.remove(doc, entry_id), frozenset())
                    if fmt.find(doc, entry_id) is None:
                        return Change(doc, frozenset())
                    return Change(fmt.upsert(doc, planned), frozenset())
                section = fmt.find(doc, entry_id)
                if section is None:
                    raise NotFound("no entry with that id", id=entry_id)
                result["before"] = section.entry
                if change is None:
                    result["entry"], result["redactions"] = section.entry, 0
                    return Change(fmt.remove(doc, entry_id), frozenset({entry_id}))
                if already is not None and already(section.entry):
                    result["entry"], result["redactions"], result["same"] = section.entry, 0, True
                    return Change(doc, frozenset())
                # Touching an entry writes the dates the daemon kept for it into its comment.
                updated, redactions = change(entry_dates.dated_entry(ws, section.entry))
                result["entry"], result["redactions"] = updated, redactions
                return Change(fmt.upsert(doc, updated), frozenset({entry_id}))

            async def plan(_: Change) -> None:
                if intent_id is None or earlier is not None:
                    return
                payload = {"entry": msgspec.to_builtins(result["entry"]), "redactions": result["redactions"]}
                with contextlib.suppress(Conflict):  # recorded by an attempt redone above
                    await in_thread(ws.ledger.begin_intent, "request", payload, intent_id=intent_id)

            async with ws.lock:
                await self._files.write(
                    ws, "memory", op, expected_revision=expected_revision, before_write=plan
                )
                revision = await self._ctx.revision(ws)
            events = []
            if (earlier is None or earlier.state == "open") and not result.get("same"):
                # Else its first attempt recorded it, or there was nothing to do.
                events.append(NewMemoryEvent(action=action, actor="user", entry_id=entry_id))
                if action == "deleted":  # its consolidations keep their episodes marked
                    await in_thread(ws.ledger.retract_entry, entry_id)
            before = result.get("before")
            if action in ("deleted", "updated") and before is not None:
                # Nothing derived afterwards may say again what the user took back.
                await retract(self._ctx, ws, [(before, None if action == "deleted" else result["entry"])])
            answer = EntryResult(entry=result["entry"], revision=revision, redactions=result["redactions"])
            await in_thread(
                ws.ledger.record_lineage, events, finish_intent=intent_id, request=request.record(answer)
            )
            return answer

        return await self._ctx.idempotent(ws, request_id, method, EntryResult, run)

    # --- backups ---------------------------------------------------------------------

    async def list_backups(self, params: ListBackupsParams, peer: Peer) -> BackupsResult:
        ws = await self._ctx.workspace(params.workspace)
        return BackupsResult(backups=await in_thread(files.list_backups, ws.backups_dir))

    @reports_memory_written
    async def restore_backup(self, params: RestoreBackupParams, peer: Peer) -> RestoreBackupResult:
        ws = await self._ctx.workspace(params.workspace)
        await self._ctx.require_writable(ws)
        found = await in_thread(files.read_backup, ws.backups_dir, params.backup_id)
        if found is None:
            raise NotFound("no backup with that id", backupId=params.backup_id)
        kind, text = found
        which: MemoryFile = "memory" if kind == "MEMORY" else "pending"
        target = await in_thread(fmt.parse, text)

        def op(doc: fmt.MemoryDocument) -> Change:
            return Change(target, frozenset())

        async with ws.lock:
            await self._files.write(ws, which, op, expected_revision=params.expected_revision)
            revision = await self._ctx.revision(ws)
        backups = await in_thread(files.list_backups, ws.backups_dir)
        undo = next((b.backup_id for b in backups if b.file == kind), None)
        return RestoreBackupResult(
            revision=revision,
            restored=params.backup_id,
            undo_backup_id=undo if undo != params.backup_id else None,
        )

    # --- subscriptions -----------------------------------------------------------------

    # Both answer with the workspace as the client named it: the name its notifications say.

    async def subscribe(self, params: SubscribeParams, peer: Peer) -> SubscribeResult:
        ws = await self._ctx.workspace(params.workspace)
        # The files as they are now are what the revision answered stands for: a folder the
        # daemon never read is read here, so a save made after this answer (before the watch
        # covers the folder) is a change the subscriber hears of, not the first version read.
        await self._files.take_in_saves(ws)
        self._ctx.subscribe(ws, peer, params.workspace)
        return SubscribeResult(workspace=params.workspace, revision=await self._ctx.revision(ws))

    async def unsubscribe(self, params: SubscribeParams, peer: Peer) -> SubscribeResult:
        ws = await self._ctx.workspace(params.workspace)
        self._ctx.unsubscribe(ws, peer)
        return SubscribeResult(workspace=params.workspace, revision=await self._ctx.revision(ws))


def _pinned_over_share(
    doc: fmt.MemoryDocument,
    entries: list[Entry],
    now: int,
    level: Level,
    user_doc: fmt.MemoryDocument | None,
    user_entries: list[Entry],
) -> list[Warning]:
    """``pinned_over_share`` for MEMORY.md, counting the user level's pinned entries a
    workspace entry does not override (under ``@user/`` ids, as the packs show them).
    Blocking: compares and renders entries."""
    other = None
    if user_doc is not None and user_entries:
        beaten = overridden((e for e in entries if e.status == "active"), user_entries)
        shown = [
            msgspec.structs.replace(e, id=user_level_id(e.id))
            for e in user_entries
            if user_level_id(e.id) not in beaten
        ]
        values = {user_level_id(key): value for key, value in user_values(user_doc).items()}
        other = OtherLevelPins("user", shown, values)
    return fw.pinned_over_share(doc, entries, now, user_values(doc), level, other=other)


# The user level as a worker thread found it still named, and whether its memory files
# were unchanged then.
_UserAtHand = tuple[Workspace, bool]


def _own_stats_now(ws: Workspace) -> tuple[bool, _UserAtHand | None]:
    """A conditional read's stats in its hop: the workspace's memory files only (blocking)."""
    return _files_unchanged_now(ws), None


def _files_unchanged_now(ws: Workspace) -> bool:
    """Both memory files' stat signatures are what was last read (blocking: a few stats)."""
    return unchanged_in(ws.memory_dir_name, ws.memory_files)


def _shown_and_warnings(
    memory_text: str | None,
    pending_text: str | None,
    memory_doc: fmt.MemoryDocument,
    pending_doc: fmt.MemoryDocument,
) -> tuple[str, list[Warning]]:
    """MEMORY.md's text as shown, and the warnings about both files (pure; CPU-bound)."""
    text = memory_text or ""
    warnings = [
        *fw.not_utf8(text, "MEMORY.md"),
        *fw.not_utf8(pending_text, "PENDING.md", per_line=False),
        *fw.not_proposals(pending_doc, per_line=False),
        *fw.outside_entries(memory_doc.preamble, "MEMORY.md"),
        *metadata(memory_doc),
        *misspelt_comments(memory_doc),
        *fw.unspaced_headings(memory_doc),
    ]
    return display(text), warnings
