"""The single write path for MEMORY.md and PENDING.md, and how the user's saves are taken in.

Every daemon write (``MemoryWriter.write``), under the workspace lock:

1. take in whatever the user saved since the daemon last looked (``refresh``):
   the save is merged against the last versions the daemon knows
   (``makad.core.save_merge``), so a buffer that predates a daemon write does not
   delete what that write added -- those entries are written again, or, where a
   deliberate deletion cannot be ruled out, queued in PENDING.md with a note;
2. apply the operation to the file as it is now; refuse with ``conflict`` when it
   touches an entry the user has just changed;
3. back up the old text and replace the file (``makad.store.file_swap``): a save
   that lands between the read and the rename is never destroyed -- it is backed
   up, put back in place, and the operation is redone on top of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import anyio
import msgspec
import structlog

from makad.core import memory_format as fmt
from makad.core import save_merge
from makad.core.entries import is_open
from makad.core.types import Entry, NewMemoryEvent
from makad.errors import Conflict, IOFailure, MakadError, SafeMode, TooLarge, check_revision
from makad.service import entry_dates
from makad.service.attention import retract
from makad.service.backup_scrub import scrub_removed_secrets
from makad.service.common import Channel, WorkspaceAccess, in_thread
from makad.service.written_files import note_written
from makad.store import memory_files as files
from makad.store.file_swap import ChangedUnderfoot, Replaced, SaveWaits
from makad.store.tracked import TrackedFile, unchanged_in
from makad.store.workspaces import Workspace, short_hash

log = structlog.get_logger("makad.memory")

# Which of the two memory files: memory/MEMORY.md or memory/PENDING.md.
MemoryFile = Literal["memory", "pending"]
MEMORY_FILES: Final[tuple[MemoryFile, ...]] = ("memory", "pending")

MAX_WRITE_ATTEMPTS: Final = 5
MAX_RECORDED_EDITS: Final = 200


@dataclass(frozen=True)
class Change:
    """What an operation did to a document: the new document and the ids it touched."""

    doc: fmt.MemoryDocument
    touched: frozenset[str]


BeforeWrite = Callable[[Change], Awaitable[None]]


def changed_ids(before: fmt.MemoryDocument, after: fmt.MemoryDocument) -> set[str]:
    """Ids whose section bytes differ between two documents (added, removed or edited)."""
    old = {s.entry.id: s.raw for s in before.sections}
    new = {s.entry.id: s.raw for s in after.sections}
    return {i for i in old.keys() | new.keys() if old.get(i) != new.get(i)}


def with_returned(
    doc: fmt.MemoryDocument, sections: tuple[fmt.Section, ...], which: MemoryFile
) -> fmt.MemoryDocument:
    """PENDING.md with the entries a save of ``which`` dropped back in it, noted."""
    for section in sections:
        entry = section.entry
        status = entry.status if which == "pending" and is_open(entry) else "review_required"
        returned = msgspec.structs.replace(entry, status=status)
        doc = fmt.put_raw(doc, entry.id, save_merge.returned_section(returned, doc.newline))
    return doc


class MemoryWriter:
    """The single write path for MEMORY.md and PENDING.md, and ingestion of user edits."""

    def __init__(self, ctx: WorkspaceAccess) -> None:
        self._ctx = ctx

    def _tracked(self, ws: Workspace, which: MemoryFile) -> tuple[TrackedFile, Path, Channel]:
        if which == "memory":
            return ws.memory, ws.memory_path, "memory_changed"
        return ws.pending, ws.pending_path, "proposals_changed"

    # --- taking in the user's saves -------------------------------------------------------

    async def refresh(
        self, ws: Workspace, *which: MemoryFile, depth: int = 0
    ) -> dict[MemoryFile, frozenset[str]]:
        """Under ws.lock: take in a user's save of the files (default both), if any.

        Returns, per file that changed, the ids the user's save changed. Never cancelled
        halfway: once a save is read, the files' state holds it, and a cancellation before
        the revision moved (a watch restarting, a call given up) would lose the change —
        no later read sees it as new."""
        with anyio.CancelScope(shield=True):
            changed = await self._refresh(ws, *which, depth=depth)
        return changed

    async def take_in_saves(self, ws: Workspace) -> None:
        """A user's save of MEMORY.md or PENDING.md not taken in yet (the watcher's batch is
        still to come) taken in now, as the watcher would: what a read derives from the
        files -- the attention state's waiting proposals, text the user took back -- then
        holds what the user saved. Stat signatures first, on a worker thread: mostly that
        is all. Not while memory is off or incognito (nothing is taken in then). A take-in
        under way (the watcher's: the files already read, what it took back not recorded
        yet) or a write is waited for."""
        if await in_thread(unchanged_in, ws.memory_dir_name, ws.memory_files) and not ws.lock.locked():
            return
        settings = await self._ctx.load_settings(ws)
        if not settings.enabled or settings.incognito:
            return
        async with ws.lock:
            await self.refresh_quietly(ws)

    async def refresh_quietly(self, ws: Workspace, *which: MemoryFile) -> None:
        """Under ws.lock: ``refresh`` for a read that goes on with the files as last read
        when they cannot be read now (logged, as the watcher's take-in is)."""
        try:
            await self.refresh(ws, *which)
        except MakadError as exc:
            log.warning("take_in_failed", workspace_id=ws.id, kind=exc.kind)

    async def _refresh(
        self, ws: Workspace, *which: MemoryFile, depth: int
    ) -> dict[MemoryFile, frozenset[str]]:
        names = which or MEMORY_FILES
        cap = self._ctx.settings.memory_max_bytes
        waits = self._waits()
        tracked = [self._tracked(ws, name) for name in names]
        before = [(t.doc, t.text) for t, _, _ in tracked]

        def check() -> list[bool]:  # one worker-thread hop for all files
            ws.typed_ids.load()  # before MEMORY.md is parsed: its hand-typed entries' ids
            changed = [t.refresh(path, cap, waits) for t, path, _ in tracked]
            ws.typed_ids.save()
            return changed

        if ws.revision is None:  # the hashes stored with it, to compare the first read with
            await self._ctx.revision(ws)
        results = await in_thread(check)
        user_changed: dict[MemoryFile, frozenset[str]] = {}
        released = ws.hashes_unwatched
        for name, (t, _, channel), (old_doc, old_text), changed in zip(
            names, tracked, before, results, strict=True
        ):
            earlier, t.before = t.before, None
            if changed and earlier is not None:
                user_changed[name] = await self._take_in(ws, name, earlier, old_text, depth)
            elif released is not None and t.loaded and released.pop(name, now := short_hash(t.sha256)) != now:
                # The first read since the daemon started or the registry let go of this
                # folder's state: a version other than the one the stored revision knew was
                # saved meanwhile, and the revision must say so (a conditional read would
                # be told nothing changed).
                await self._bump_taken_in(ws, channel)
            if name == "memory":  # what the file went from and to, merged saves included
                await entry_dates.observe(ws, old_doc, t.doc)
        return user_changed

    async def _take_in(
        self,
        ws: Workspace,
        which: MemoryFile,
        earlier: TrackedFile,
        old_text: str | None,
        depth: int,
    ) -> frozenset[str]:
        """A save was just read: merge it, write what it lacked, record and notify."""
        tracked, _, channel = self._tracked(ws, which)
        if tracked.too_large:  # unreadable for now: nothing is known to have changed
            await self._bump_taken_in(ws, channel)
            return frozenset()
        history = tuple(earlier.history)
        merge = save_merge.merge_save(history, tracked.doc, tracked.mtime_ns or None)
        if merge.lacking and tracked.missing and not await in_thread(ws.memory_dir.is_dir):
            # memory/ itself deleted: the user wiped this workspace's memory, and the folder
            # is a new workspace from now on (docs/WORKSPACES.md): nothing it held is
            # brought back, nor the folder made again to hold it.
            merge = dataclasses.replace(merge, document=tracked.doc, reapplied=(), returned=())
        if merge.lacking and not await self._writable(ws):
            # Memory is off or incognito: nothing may be written, so the save is not taken
            # in yet -- the first read once writes are allowed merges it.
            tracked.restore(earlier)
            return frozenset()
        if merge.lacking:
            # The version the save lacks things of is the daemon's, never backed up yet (a
            # save, not a daemon write, replaced it): kept, whatever becomes of the merge.
            latest = history[-1].doc
            try:
                if latest is not None:
                    await in_thread(files.save_backup, ws.backups_dir, _kind(which), fmt.render(latest))
            except IOFailure:
                tracked.restore(earlier)  # taken in at a later read, once the disk allows
                raise
        if self._must_write(merge, which) and self._over_cap(merge, which):
            if which == "memory":
                # Re-applied, the file would pass its cap: what it would get back waits in
                # PENDING.md instead, and the save stays as it is.
                merge = save_merge.returned_instead(merge, history, tracked.doc)
            else:  # PENDING.md itself is full: the save stays, what it lacked is in the backup
                log.warning("stale_save_over_cap", workspace_id=ws.id, file=which)
                merge = dataclasses.replace(merge, document=tracked.doc, reapplied=(), returned=())
        await self._record_user_edits(ws, which, merge)
        if which == "memory" and merge.base is not None and merge.user_changed:
            await self._retract_user_edits(ws, history[merge.base].doc, tracked.doc, merge)
        landed = True
        if self._must_write(merge, which):
            landed = await self._rewrite(ws, which, merge)
        if not landed:
            # Another save landed on top of this one: take that in, against the same versions.
            more = await self.refresh(ws, which, depth=depth + 1) if depth < MAX_WRITE_ATTEMPTS else {}
            await scrub_removed_secrets(ws, [old_text])
            return merge.user_changed | more.get(which, frozenset())
        returned = [s.entry.id for s in merge.returned]
        if merge.lacking:
            log.info(
                "stale_save",
                workspace_id=ws.id,
                file=which,
                reapplied=len(merge.reapplied),
                returned=len(returned),
            )
        await self._record_merge(ws, which, merge)
        await self._bump_taken_in(ws, channel, reapplied=list(merge.reapplied), returned=returned)
        await scrub_removed_secrets(ws, [old_text])
        if merge.returned and which == "memory":
            await self._return_to_pending(ws, merge.returned)
        return merge.user_changed

    async def _bump_taken_in(
        self,
        ws: Workspace,
        channel: Channel,
        *,
        reapplied: list[str] | None = None,
        returned: list[str] | None = None,
    ) -> None:
        """``bump`` for a save taken in. When only the ledger's record of the new revision
        failed (the disk: it is kept for the ledger's next write), the revision moved and
        subscribers were told: the take-in goes on, and a read serves the save."""
        before = ws.revision
        try:
            await self._ctx.bump(ws, channel, "external_edit", reapplied=reapplied, returned=returned)
        except IOFailure as exc:
            if ws.revision == before:
                raise
            log.warning("revision_kept_for_next_write", workspace_id=ws.id, reason=exc.details.get("reason"))

    async def _writable(self, ws: Workspace) -> bool:
        settings = await self._ctx.load_settings(ws)
        return settings.enabled and not settings.incognito

    @staticmethod
    def _must_write(merge: save_merge.SaveMerge, which: MemoryFile) -> bool:
        """Whether the merged save differs from the save (what PENDING.md lacked goes back in it)."""
        return bool(merge.reapplied or (which == "pending" and merge.returned))

    def _merged_text(self, merge: save_merge.SaveMerge, which: MemoryFile) -> str:
        doc = merge.document
        if which == "pending":
            doc = with_returned(doc, merge.returned, which)
        return fmt.render(doc)

    def _over_cap(self, merge: save_merge.SaveMerge, which: MemoryFile) -> bool:
        size = len(self._merged_text(merge, which).encode("utf-8", "surrogateescape"))
        return size > self._ctx.settings.memory_max_bytes

    async def _rewrite(self, ws: Workspace, which: MemoryFile, merge: save_merge.SaveMerge) -> bool:
        """Write the merged save over the save; False when yet another save got there first."""
        tracked, path, _ = self._tracked(ws, which)
        text = self._merged_text(merge, which)
        kind = _kind(which)
        expect = None if tracked.missing else tracked.sha256
        doc = await in_thread(fmt.parse, text, tracked.parsed)  # the save's sections: not read again
        try:
            written = await in_thread(self._replace, ws, kind, path, text, expect, tracked.text)
        except ChangedUnderfoot:
            tracked.history.pop()  # the save is not the version that stays: merge the next one
            return False
        if written.displaced is not None:
            log.info("save_displaced", workspace_id=ws.id, file=path.name)
            await in_thread(self._put_back, ws, kind, path, written)
            tracked.forget_signature()
            tracked.history.pop()
            return False
        tracked.remember(text, written, doc)
        note_written(path.name)
        await self._keep_typed_ids(ws)
        self._ctx.on_access(ws)
        return True

    async def _return_to_pending(self, ws: Workspace, sections: tuple[fmt.Section, ...]) -> None:
        """Queue in PENDING.md the entries a save of MEMORY.md dropped (with the note)."""

        def op(doc: fmt.MemoryDocument) -> Change:
            return Change(with_returned(doc, sections, "memory"), frozenset())

        try:
            # Its notification names them: a subscriber tells them from new proposals.
            await self.write(ws, "pending", op, returned=[s.entry.id for s in sections])
        except MakadError as exc:  # PENDING.md full, the disk: the read goes on, the backup holds them
            log.warning(
                "returned_entries_kept_in_backup", workspace_id=ws.id, kind=exc.kind, count=len(sections)
            )

    async def _record_user_edits(self, ws: Workspace, which: MemoryFile, merge: save_merge.SaveMerge) -> None:
        """The user's own changes, relative to the version their save was made from.

        One commit without an fsync of its own: the revision the take-in bumps next is
        committed durably, which fsyncs these too, before ``memory_changed`` goes out (an
        fsync less between a save and its notification)."""
        ids = sorted(merge.user_changed)[:MAX_RECORDED_EDITS]
        if not ids:
            return
        events = [
            NewMemoryEvent(
                action=_user_action(entry_id, merge),
                actor="user",
                entry_id=entry_id,
                data={"file": which, "via": "external_edit"},
            )
            for entry_id in ids
        ]
        await self._record_or_keep(ws, events)

    async def _record_or_keep(self, ws: Workspace, events: list[NewMemoryEvent]) -> None:
        """Record a take-in's lineage steps; when the disk has no room for them, keep them for
        the ledger's next write (the save is taken in all the same: reads serve it at a new
        revision, and a later read would not see it as new)."""
        try:
            await in_thread(ws.ledger.record_lineage, events, relaxed=True)
        except IOFailure as exc:
            log.warning("lineage_kept_for_next_write", workspace_id=ws.id, reason=exc.details.get("reason"))
            ws.ledger.record_lineage_with_next_write(events)

    async def _retract_user_edits(
        self,
        ws: Workspace,
        base: fmt.MemoryDocument | None,
        saved: fmt.MemoryDocument,
        merge: save_merge.SaveMerge,
    ) -> None:
        """Entries the user deleted or edited by hand: what they took back is not said again
        (``makad.service.attention.retract``)."""
        if base is None:
            return
        changes: list[tuple[Entry, Entry | None]] = []
        for entry_id in sorted(merge.user_changed - merge.user_added)[:MAX_RECORDED_EDITS]:
            old = fmt.find(base, entry_id)
            if old is None:
                continue
            new = None if entry_id in merge.user_deleted else fmt.find(saved, entry_id)
            changes.append((old.entry, None if new is None else new.entry))
        if changes:
            await retract(self._ctx, ws, changes)

    async def _record_merge(self, ws: Workspace, which: MemoryFile, merge: save_merge.SaveMerge) -> None:
        """What the daemon did about a save that lacked something: re-applied, or returned."""
        if not merge.lacking:
            return
        in_memory = which == "memory"
        events = [
            NewMemoryEvent(
                action="reapplied",
                actor="daemon",
                entry_id=entry_id if in_memory else None,
                proposal_id=None if in_memory else entry_id,
                data={"file": which, "via": "stale_save"},
            )
            for entry_id in merge.reapplied[:MAX_RECORDED_EDITS]
        ]
        events += [
            NewMemoryEvent(
                action="returned",
                actor="daemon",
                entry_id=section.entry.id,
                proposal_id=section.entry.id,
                data={"file": which, "reason": save_merge.RETURNED_NOTE, "origin": section.entry.origin},
            )
            for section in merge.returned[:MAX_RECORDED_EDITS]
        ]
        await self._record_or_keep(ws, events)

    # --- the daemon's writes ------------------------------------------------------------

    async def write(
        self,
        ws: Workspace,
        which: MemoryFile,
        op: Callable[[fmt.MemoryDocument], Change],
        *,
        expected_revision: int | None = None,
        bump: bool = True,
        before_write: BeforeWrite | None = None,
        returned: list[str] | None = None,
    ) -> Change:
        """Apply ``op`` to the current file and write it; caller holds ``ws.lock``.

        If the user saves the file between our read and our rename, their save is put
        back and the write is redone on top of it (a few times at most). ``returned``:
        the entries a save dropped that this write queues again (its notification says).
        """
        if ws.ledger.read_only_since is not None:
            # A ledger a full disk left read-only could not record the write: refused before
            # the file changes (``disk_full`` while there is still no room).
            await in_thread(ws.ledger.leave_read_only)
        for _attempt in range(MAX_WRITE_ATTEMPTS):
            try:
                return await self._write_once(ws, which, op, expected_revision, bump, before_write, returned)
            except ChangedUnderfoot:
                continue
        _, path, _ = self._tracked(ws, which)
        raise Conflict(
            f"{path.name} kept changing while the daemon wrote it: the user's saves were kept, "
            "nothing of this call was written",
            currentRevision=await self._ctx.revision(ws),
        )

    async def _write_once(
        self,
        ws: Workspace,
        which: MemoryFile,
        op: Callable[[fmt.MemoryDocument], Change],
        expected_revision: int | None,
        bump: bool,
        before_write: BeforeWrite | None = None,
        returned: list[str] | None = None,
    ) -> Change:
        tracked, path, channel = self._tracked(ws, which)
        user_changed = (await self.refresh(ws, which)).get(which, frozenset())
        revision = await self._ctx.revision(ws)
        check_revision(expected_revision, revision)
        if tracked.too_large:
            raise SafeMode(
                f"{path.name} is over the {self._ctx.settings.memory_max_bytes}-byte "
                "cap; shrink it before the daemon writes to it"
            )
        current = tracked.doc
        if tracked.missing or fmt.is_empty(current):
            current = fmt.new_document(current.newline, header_of(which))
        # An operation reads through the whole document at least once (and rendering it is a
        # pass of its own): on a MEMORY.md of thousands of entries, done off the event loop.
        change, text = await in_thread(_applied, op, current)
        both = change.touched & user_changed
        if both:
            raise Conflict(
                "the user changed the same entry; their version was kept",
                ids=sorted(both),
                currentRevision=revision,
            )
        if len(text.encode("utf-8", "surrogateescape")) > self._ctx.settings.memory_max_bytes:
            raise TooLarge(
                f"the write would take {path.name} over its size cap",
                capBytes=self._ctx.settings.memory_max_bytes,
            )
        if text == (tracked.text or "") and not tracked.missing:
            return change
        old_text = tracked.text
        expect = None if tracked.missing else tracked.sha256
        kind = _kind(which)
        if before_write is not None:
            await before_write(change)
        # What stayed of the version read is not read again: a file of thousands of entries
        # that one write changed is one section read (the whole file: seconds).
        doc = await in_thread(fmt.parse, text, None if tracked.missing else tracked.parsed)
        written = await in_thread(self._replace, ws, kind, path, text, expect, old_text)
        if written.displaced is not None:
            # A save landed between our read and our rename: it is backed up; put it back
            # and redo the operation on top of it.
            log.info("save_displaced", workspace_id=ws.id, file=path.name)
            await in_thread(self._put_back, ws, kind, path, written)
            tracked.forget_signature()
            raise ChangedUnderfoot(path.name)
        tracked.remember(text, written, doc)
        note_written(path.name)
        await self._keep_typed_ids(ws)
        await scrub_removed_secrets(ws, [old_text])
        self._ctx.on_access(ws)
        if bump:
            await self._ctx.bump(ws, channel, "daemon", returned=returned)
        return change

    @staticmethod
    async def _keep_typed_ids(ws: Workspace) -> None:
        """Save what a write changed in the records of hand-typed entries (their places)."""
        if ws.typed_ids.unsaved:
            await in_thread(ws.typed_ids.save)

    def _waits(self) -> SaveWaits:
        """How long a file caught half-way through a save is given (``MAKAD_*_SAVE_WAIT_MS``)."""
        settings = self._ctx.settings
        return SaveWaits(settings.empty_save_wait_ms * 1_000_000, settings.missing_save_wait_ms * 1_000_000)

    # --- in a worker thread -------------------------------------------------------------

    def _keep(self, ws: Workspace, kind: str) -> Callable[[bytes], None]:
        def keep(data: bytes) -> None:
            files.save_backup(ws.backups_dir, kind, data.decode("utf-8", "surrogateescape"))

        return keep

    def _replace(
        self, ws: Workspace, kind: str, path: Path, text: str, expect: str | None, old_text: str | None
    ) -> Replaced:
        if old_text is not None:
            files.save_backup(ws.backups_dir, kind, old_text)
        return files.write_memory_file(
            path,
            text,
            expect_sha=expect,
            max_bytes=self._ctx.settings.memory_max_bytes,
            keep=self._keep(ws, kind),
            before_rename=self._ctx.faults.before_rename(path),
            waits=self._waits(),
        )

    def _put_back(self, ws: Workspace, kind: str, path: Path, written: Replaced) -> None:
        """Put a displaced save back in place of the daemon's version (its mtime too)."""
        for _ in range(MAX_WRITE_ATTEMPTS):
            displaced = written.displaced
            if displaced is None:
                return
            try:
                written = files.write_memory_file(
                    path,
                    displaced.data.decode("utf-8", "surrogateescape"),
                    expect_sha=written.sha256,
                    max_bytes=self._ctx.settings.memory_max_bytes,
                    keep=self._keep(ws, kind),
                    mtime_ns=displaced.mtime_ns,
                    waits=self._waits(),
                )
            except ChangedUnderfoot:  # the file went or came meanwhile: the save is backed up
                log.warning("displaced_save_not_put_back", workspace_id=ws.id, file=path.name)
                return
        log.warning("displaced_save_not_put_back", workspace_id=ws.id, file=path.name)


def _user_action(entry_id: str, merge: save_merge.SaveMerge) -> str:
    """What the user's save did to an entry: typed it in, edited it, or deleted it."""
    if entry_id in merge.user_deleted:
        return "deleted"
    return "added" if entry_id in merge.user_added else "edited"


def _kind(which: MemoryFile) -> str:
    return "MEMORY" if which == "memory" else "PENDING"


def header_of(which: MemoryFile) -> str:
    """The title a new MEMORY.md or PENDING.md starts with."""
    return fmt.HEADER if which == "memory" else fmt.PENDING_HEADER


def _applied(op: Callable[[fmt.MemoryDocument], Change], current: fmt.MemoryDocument) -> tuple[Change, str]:
    """``op``'s change to ``current`` and the text of the document it makes (pure, CPU-bound)."""
    change = op(current)
    return change, fmt.render(change.doc)
