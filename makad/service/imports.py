"""import_memories and export_memories: other tools' memories in, MEMORY.md out.

An import queues proposals (origin ``imported``) in PENDING.md for the user to
review, never straight into MEMORY.md; content already in either file, or
rejected before, is skipped (``makad.core.proposals.imported_proposals``).
"""

from __future__ import annotations

import anyio
import msgspec

from makad.core import importers
from makad.core import memory_format as fmt
from makad.core import proposals as rules
from makad.core.canonical import content_hash
from makad.core.entries import clean_entry
from makad.core.peer import Peer
from makad.core.types import Entry, NewMemoryEvent
from makad.errors import IncognitoBlocked, InvalidParams, MakadError, TooLarge
from makad.service import entry_dates
from makad.service.common import Request, WorkspaceAccess, handlers_of, in_limited_thread, in_thread, now_ms
from makad.service.import_source import read_import_source
from makad.service.memory import Change, MemoryWriter
from makad.service.written_files import reports_memory_written
from makad.wire.base import Handler
from makad.wire.proposals import (
    ExportParams,
    ExportResult,
    ImportParams,
    ImportProgressParams,
    ImportResultWire,
)

IMPORT_THREADS = 4


class ImportService:
    def __init__(self, ctx: WorkspaceAccess, writer: MemoryWriter) -> None:
        self._ctx = ctx
        self._files = writer
        # Imports read and parse off the event loop, but never on more than a few of
        # the worker threads every other call needs.
        self._import_readers = anyio.CapacityLimiter(IMPORT_THREADS)

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "import_memories export_memories")

    @reports_memory_written
    async def import_memories(self, params: ImportParams, peer: Peer) -> ImportResultWire:
        ws = await self._ctx.workspace(params.workspace)
        if (params.path is None) == (params.data is None):
            raise InvalidParams("give exactly one of path or data", path="$")

        async def run(request: Request) -> ImportResultWire:
            await self._ctx.require_writable(ws)
            data, files_, filename = await in_limited_thread(
                self._import_readers, read_import_source, params.path, params.data, ws.memory_dir
            )
            where = "$.path" if params.path is not None else "$.data"
            # Checking and recognising the input reads all of it: off the event loop as well.
            parsed, detected = await in_limited_thread(
                self._import_readers, _parse, params.format, data, files_, filename, where
            )
            if not parsed.items:
                raise nothing_found(parsed, where, detected)
            progress = ImportProgress(peer, params.workspace, len(parsed.items)) if params.progress else None
            # Redaction and the canonical form, off the event loop: the heavy part of an import.
            cleaned = await in_limited_thread(self._import_readers, _clean_items, parsed, progress)
            async with ws.lock:
                # Under the lock, as a rejection records its contents before it lets go: an
                # item rejected meanwhile is seen open in PENDING.md or rejected, never neither.
                rejected = await in_thread(ws.ledger.find_rejections, [digest for _, _, _, digest in cleaned])
                await self._files.refresh(ws)
                # A worker thread again: an import may hold a hundred thousand items.
                new, duplicates, fitting = await in_thread(
                    _proposals,
                    [*fmt.entries(ws.memory.doc), *fmt.entries(ws.pending.doc)],
                    cleaned,
                    rejected,
                    parsed.format,
                    (
                        ws.pending.doc.newline if not ws.pending.missing else "\n",
                        ws.pending.text or fmt.PENDING_HEADER,
                    ),
                    self._ctx.settings.memory_max_bytes,
                )
                if new and fitting == 0:
                    raise TooLarge(
                        f"PENDING.md has no room for these {len(new)} memories (its cap is "
                        f"{self._ctx.settings.memory_max_bytes} bytes): approve or reject the "
                        "proposals waiting, then import again",
                        capBytes=self._ctx.settings.memory_max_bytes,
                        waiting=len(new),
                    )
                queued, deferred = new[:fitting], new[fitting:]

                def op(doc: fmt.MemoryDocument) -> Change:
                    for entry in queued:
                        doc = fmt.upsert(doc, entry)
                    return Change(doc, frozenset(e.id for e in queued))

                if queued:
                    await self._files.write(ws, "pending", op)
                revision = await self._ctx.revision(ws)

            events = [
                NewMemoryEvent(
                    action="imported",
                    actor="import",
                    proposal_id=entry.id,
                    data={"format": parsed.format, "sourceRefs": entry.source_refs},
                )
                for entry in queued
            ]
            result = ImportResultWire(
                format=parsed.format,
                imported=[e.id for e in queued],
                duplicates=duplicates,
                errors=parsed.errors,
                skipped=parsed.skipped,
                revision=revision,
                deferred=len(deferred),
            )
            # (A crash before this commit leaves the proposals in PENDING.md: the retry
            # finds their content there and counts them as duplicates.)
            await in_thread(ws.ledger.record_lineage, events, request=request.record(result))
            if progress is not None:
                progress.finish()
            return result

        return await self._ctx.idempotent(ws, params.request_id, "import_memories", ImportResultWire, run)

    async def export_memories(self, params: ExportParams, peer: Peer) -> ExportResult:
        ws = await self._ctx.workspace(params.workspace)
        settings = await self._ctx.load_settings(ws)
        if settings.incognito:
            raise IncognitoBlocked("incognito is on: memory is not read")
        async with ws.lock:
            await self._files.refresh(ws, "memory")
        # With the dates the daemon keeps for entries typed by hand (their comment has none).
        dated = entry_dates.dated(ws, fmt.entries(ws.memory.doc))
        chosen = [e for e in dated if e.status == "active" or params.include_archived]
        # Tens of thousands of entries fit under the file's cap: off the event loop.
        data = await in_thread(_export_text, chosen, ws.level, params.format)
        return ExportResult(format=params.format, data=data, count=len(chosen), level=ws.level)


class ImportProgress:
    """``import_progress`` notifications to the importing connection (asked with
    ``progress: true``): every 100 items checked, coalesced so a slow reader gets the
    newest count."""

    EVERY = 100

    def __init__(self, peer: Peer, workspace: str, total: int) -> None:
        self._peer = peer
        self._workspace = workspace
        self._total = total
        self._post(0)

    def _post(self, done: int) -> None:
        note = ImportProgressParams(workspace=self._workspace, done=done, total=self._total)
        self._peer.notify("import_progress", note, group=("import_progress", id(self)))

    def step(self, done: int) -> None:
        """From the worker thread: the connection is the event loop's, so post through it."""
        if done % self.EVERY == 0:
            anyio.from_thread.run_sync(self._post, done)

    def finish(self) -> None:
        self._post(self._total)


def _clean_items(
    parsed: importers.ImportResult, progress: ImportProgress | None
) -> list[tuple[importers.ImportItem, str, str, str]]:
    """(item, title, content, canonical hash) of each item the redactor and the format
    checks accept; a refused one becomes an error of that item (blocking)."""
    out = []
    for done, item in enumerate(parsed.items, 1):
        try:
            title, content, _ = clean_entry(item.title or "Imported memory", item.content)
        except MakadError as exc:
            parsed.errors.append(importers.ItemError(locator=item.locator, reason=exc.message))
            continue
        finally:
            if progress is not None:
                progress.step(done)
        out.append((item, title, content, content_hash(content)))
    return out


def accepted() -> str:
    """The formats an import reads, for a message."""
    return ", ".join(importers.FORMATS)


def nothing_found(
    parsed: importers.ImportResult, path: str, detected: importers.FormatName | None = None
) -> InvalidParams:
    """The error for a file in which the chosen format found no memory at all; ``detected``:
    the format the file is detected as, when that one finds memories in it."""
    expected = importers.EXPECTED[parsed.format]
    other = (
        f"it is detected as {detected}, which finds memories in it"
        if detected is not None
        else f"it can be read as another format: {accepted()}"
    )
    extra = {"detected": detected} if detected is not None else {}
    return InvalidParams(
        f"no memories found reading it as {parsed.format}: expected {expected}; {other}",
        path=path,
        reason="no_memories",
        format=parsed.format,
        expected=expected,
        formats=list(importers.FORMATS),
        errors=[msgspec.to_builtins(e) for e in parsed.errors[:20]],
        **extra,
    )


def not_importable(data: str, files: dict[str, str] | None, path: str) -> InvalidParams | None:
    """The error for input that is no text export at all — binary (any file of a
    directory too), ChatGPT's conversation history, or empty — or None; nothing is
    parsed or queued from it."""
    subject = "the file" if path == "$.path" else "data"
    named = [(subject, data)] if files is None else sorted(files.items())
    for name, text in named:
        reason = importers.binary_reason(text)
        if reason is not None:
            extra = {"file": name} if files is not None else {}
            return _refused(f"{name} is not text: {reason}", path, "binary", aside=False, **extra)
    if files is None and importers.is_chat_history(data):
        return _refused(
            f"{subject} cannot be imported: {importers.CHAT_HISTORY_REASON}", path, "chat_history"
        )
    # (A byte-order mark alone is no text either: str.strip keeps it.)
    if files is None and not data.replace("\ufeff", "").strip():
        return _refused(f"{subject} is empty: there is nothing to import", path, "empty")
    return None


def _refused(said: str, path: str, reason: str, *, aside: bool = True, **extra: str) -> InvalidParams:
    """An import refused before parsing: what is wrong, then what an import reads (in
    parentheses, or after a semicolon)."""
    reads = f"an import reads a text export in one of these formats: {accepted()}"
    return InvalidParams(
        f"{said} ({reads})" if aside else f"{said}; {reads}",
        path=path,
        reason=reason,
        **extra,
        formats=list(importers.FORMATS),
    )


def _parse(
    requested: str | None, data: str, files: dict[str, str] | None, filename: str | None, path: str
) -> tuple[importers.ImportResult, importers.FormatName | None]:
    """What the format (asked for, else detected) reads in ``data``; when an asked format
    finds nothing, also the format ``data`` is detected as if that one finds something."""
    refused = not_importable(data, files, path)
    if refused is not None:
        raise refused
    parsed = importers.parse(data, _format_of(requested, data, files, filename), files=files)
    if parsed.items or requested is None:
        return parsed, None
    try:
        detected = _format_of(None, data, files, filename)
    except InvalidParams:  # JSON no format knows
        return parsed, None
    if detected == parsed.format or not importers.parse(data, detected, files=files).items:
        return parsed, None
    return parsed, detected


def _proposals(
    entries: list[Entry],
    cleaned: list[tuple[importers.ImportItem, str, str, str]],
    rejected: frozenset[str] | set[str],
    source_format: str,
    pending: tuple[str, str],
    cap: int,
) -> tuple[list[Entry], int, int]:
    """The proposals an import queues, how many items it skips as duplicates, and how many
    of the proposals PENDING.md (``(newline, text)``) has room for under ``cap``."""
    known = {content_hash(e.content) for e in entries}
    new, duplicates = rules.imported_proposals(cleaned, known, rejected, source_format, now_ms())
    newline, text = pending
    return new, duplicates, rules.fitting_count(text, newline, new, cap)


def _format_of(
    requested: str | None, data: str, files: dict[str, str] | None, filename: str | None
) -> importers.FormatName:
    """The format asked for, else Claude Code's for a directory, else the one ``data`` looks like."""
    if requested is not None:
        if requested not in importers.FORMATS:
            raise InvalidParams(
                f"unknown import format: it is one of {accepted()}",
                path="$.format",
                reason="unknown_format",
                formats=list(importers.FORMATS),
            )
        return requested
    if files is not None:
        return "claude_code"
    return importers.sniff(data, filename)


def _export_text(chosen: list[Entry], level: str, form: str) -> str:
    """The export's text: JSON (``{"level", "entries"}``, indented) or a memory file."""
    if form == "json":
        body = msgspec.json.encode({"level": level, "entries": chosen})
        return msgspec.json.format(body, indent=2).decode()
    return fmt.render_entries(chosen)
