"""remove_outside_text: the lines above MEMORY.md's first entry, once their memory is
elsewhere (``makad.core.outside_text`` decides which)."""

from __future__ import annotations

from dataclasses import replace

from makad.core import memory_format as fmt
from makad.core import outside_text as outside
from makad.core.canonical import content_hash
from makad.core.entries import clean_entry
from makad.core.peer import Peer
from makad.errors import Conflict, InvalidParams, MakadError, check_revision
from makad.service.common import WorkspaceAccess, handlers_of, in_thread
from makad.service.memory import Change, MemoryWriter
from makad.service.written_files import reports_memory_written
from makad.store.ledger import Ledger
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.memory import RemoveOutsideTextParams, RemoveOutsideTextResult


def import_digest(content: str) -> str | None:
    """The canonical hash an import gives this content (None: the import refuses it)."""
    try:
        _, cleaned, _ = clean_entry("-", content)
    except MakadError:
        return None
    return content_hash(cleaned)


class OutsideTextService:
    def __init__(self, ctx: WorkspaceAccess, writer: MemoryWriter) -> None:
        self._ctx = ctx
        self._files = writer

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "remove_outside_text")

    @reports_memory_written
    async def remove_outside_text(
        self, params: RemoveOutsideTextParams, peer: Peer
    ) -> RemoveOutsideTextResult:
        ws = await self._ctx.workspace(params.workspace)
        if not params.dry_run:
            await self._ctx.require_writable(ws)
        async with ws.lock:
            await self._files.refresh(ws)
            if not params.dry_run:
                # Checked here too: a call with nothing to remove writes nothing, and a stale
                # revision is a conflict whatever the call would have changed.
                await self._check_revision(ws, params.expected_revision)
            preamble = ws.memory.doc.preamble
            planned = await in_thread(self._plan, ws.memory.doc, ws.pending.doc, preamble, ws.ledger)
            chosen = planned.removable
            if params.lines is not None:
                wanted = set(params.lines)
                unknown = sorted(wanted - {line.line for line in chosen})
                if unknown:
                    raise InvalidParams(
                        "these lines are not lines outside any entry whose memory is elsewhere",
                        path="$.lines",
                        lines=unknown,
                    )
                chosen = [line for line in chosen if line.line in wanted]
            kept = [*planned.kept, *(line for line in planned.removable if line not in chosen)]
            kept.sort(key=lambda line: line.line)
            if chosen and not params.dry_run:
                numbers = {line.line for line in chosen}

                def op(doc: fmt.MemoryDocument) -> Change:
                    if doc.preamble != preamble:  # the user saved meanwhile: their file wins
                        raise Conflict("MEMORY.md's preamble changed meanwhile; nothing was removed")
                    return Change(
                        replace(doc, preamble=outside.without_lines(preamble, numbers)), frozenset()
                    )

                await self._files.write(ws, "memory", op, expected_revision=params.expected_revision)
            revision = await self._ctx.revision(ws)
        return RemoveOutsideTextResult(removed=chosen, kept=kept, dry_run=params.dry_run, revision=revision)

    async def _check_revision(self, ws: Workspace, expected: int | None) -> None:
        check_revision(expected, await self._ctx.revision(ws))

    @staticmethod
    def _plan(
        memory: fmt.MemoryDocument, pending: fmt.MemoryDocument, preamble: str, ledger: Ledger
    ) -> outside.Plan:
        """Which stray lines can go, knowing where each memory is now (by canonical content
        hash: rejected, waiting in PENDING.md, or in MEMORY.md; the later ones win).
        Blocking: a ledger read, and parsing every stray bullet."""
        if not outside.stray_lines(preamble):
            return outside.Plan(removable=[], kept=[])
        digests = [d for d in outside.bullet_digests(preamble, import_digest) if d is not None]
        rejected = ledger.find_rejections(digests) if digests else set()
        known: dict[str, tuple[str, str | None]] = dict.fromkeys(rejected, ("rejected", None))
        known.update({content_hash(e.content): ("pending", e.id) for e in fmt.entries(pending)})
        known.update({content_hash(e.content): ("memory", e.id) for e in fmt.entries(memory)})
        return outside.plan(preamble, known, import_digest)
