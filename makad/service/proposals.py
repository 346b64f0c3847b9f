"""The approval gate: propose into PENDING.md, approve into MEMORY.md, reject, lineage.

Approval is crash-safe: the whole plan (new entry ids and content, what is
superseded) is recorded in the ledger as an intent *before* MEMORY.md is
written, then PENDING.md, then the intent is closed. After a crash an open
intent is completed from its record, and every step is idempotent (upsert by
the planned id, remove by proposal id), so each approved proposal ends up in
MEMORY.md exactly once and out of PENDING.md.
"""

from __future__ import annotations

import contextlib
import os
import signal
from typing import Any, cast

import anyio
import msgspec
import structlog
from msgspec import UNSET

from makad.core import importers
from makad.core import memory_format as fmt
from makad.core.canonical import content_hash, similar_ids
from makad.core.entry_comment import ORIGINS
from makad.core.redaction import redact
from makad.core.save_merge import note_of
from makad.core.types import Entry, Origin
from makad.errors import (
    Conflict,
    GateClosed,
    IncognitoBlocked,
    InvalidParams,
    MakadError,
    NotFound,
    TooLarge,
)
from makad.service import file_warnings
from makad.service.common import Context, in_limited_thread, in_thread, now_ms
from makad.service.import_source import read_import_source
from makad.service.memory import (
    Change,
    MemoryFiles,
    MemoryService,
    default_decay_ms,
    normalize_tags,
    redact_all,
)
from makad.service.peer import Peer
from makad.store.tracked import TrackedFile
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.proposals import (
    Approved,
    ApproveParams,
    ApproveResult,
    ExportParams,
    ExportResult,
    HistoryParams,
    HistoryResult,
    ImportParams,
    ImportResultWire,
    ListProposalsParams,
    ProposalsResult,
    ProposalView,
    ProposeParams,
    ProposeResult,
    RejectionInfo,
    RejectParams,
    RejectResult,
)

log = structlog.get_logger("makad.proposals")

OPEN_STATUSES = ("review_required", "draft")
IMPORT_THREADS = 4


class ProposalService:
    def __init__(self, ctx: Context, memory_files: MemoryFiles, memory: MemoryService) -> None:
        self._ctx = ctx
        self._files = memory_files
        self._memory = memory
        # Imports read and parse off the event loop, but never on more than a few of
        # the worker threads every other call needs.
        self._import_readers = anyio.CapacityLimiter(IMPORT_THREADS)

    def handlers(self) -> dict[str, Handler]:
        return {
            "propose": self.propose,
            "list_proposals": self.list_proposals,
            "approve": self.approve,
            "reject": self.reject,
            "memory_history": self.memory_history,
            "import_memories": self.import_memories,
            "export_memories": self.export_memories,
        }

    # --- faults (tests only) --------------------------------------------------------

    def _fault(self, point: str) -> None:
        if self._ctx.settings.fault_point == point:
            log.warning("fault_injected", point=point)
            os.kill(os.getpid(), signal.SIGKILL)

    # --- propose ------------------------------------------------------------------------

    async def propose(self, params: ProposeParams, peer: Peer) -> ProposeResult:
        ws = await self._ctx.workspace(params.workspace)

        async def run() -> ProposeResult:
            settings = await self._ctx.require_writable(ws)
            if params.session_id and params.session_id in self._ctx.incognito_sessions(ws):
                raise IncognitoBlocked("the session is incognito: nothing is written")
            # propose is the agent's path, whatever origin it claims: the gate comes first.
            if not settings.extract_tool_effective:
                raise GateClosed(
                    "agent proposals need extractToolEnabled and agentReadEnabled",
                    extractToolEnabled=settings.extract_tool_enabled,
                    agentReadEnabled=settings.agent_read_enabled,
                )
            if params.origin != "extracted":
                raise InvalidParams(
                    "propose is the agent's path and its origin is extracted: the user's own "
                    "entries go through add_entry, other tools' memories through import_memories",
                    path="$.origin",
                    allowed=["extracted"],
                )
            title, content, redactions = MemoryService.clean(params.title, params.content)
            if params.scope == "session" and not params.session_id:
                raise InvalidParams("a session-scoped proposal needs sessionId", path="$.sessionId")
            if params.consolidates is not None:
                await self._ctx.check_consolidation(ws, params.consolidates, params.session_id)
            digest = content_hash(content)
            rejection = await in_thread(ws.ledger.find_rejection, digest)
            if rejection is not None:
                return ProposeResult(
                    proposal=None,
                    queued=False,
                    redactions=redactions,
                    previously_rejected=RejectionInfo(
                        proposal_id=rejection.proposal_id or "",
                        reason=rejection.reason or None,
                        rejected_at=rejection.ts,
                    ),
                    revision=await self._ctx.revision(ws),
                )
            async with ws.lock:
                await self._files.refresh(ws)
                active = [e for e in fmt.entries(ws.memory.doc) if e.status == "active"]
                open_ = [e for e in fmt.entries(ws.pending.doc) if e.status in OPEN_STATUSES]
                for existing in [*active, *open_]:
                    if content_hash(existing.content) == digest:
                        return ProposeResult(
                            proposal=existing,
                            queued=False,
                            duplicate_of=existing.id,
                            redactions=redactions,
                            revision=await self._ctx.revision(ws),
                        )
                now = now_ms()
                proposal = Entry(
                    id=fmt.new_entry_id(content, now),
                    title=title,
                    content=content,
                    origin=params.origin,
                    created_at=now,
                    updated_at=now,
                    status="draft" if params.draft else "review_required",
                    tags=normalize_tags(params.tags),
                    decay_ttl_ms=params.decay_ttl_ms,
                    scope=params.scope,
                    session_id=params.session_id,
                    source_refs=self._ctx.identifiers.scrub_refs(params.source_refs),
                    supersedes=params.supersedes,
                )
                similar = similar_ids(content, [*active, *open_])

                def op(doc: fmt.MemoryDocument) -> Change:
                    return Change(fmt.upsert(doc, proposal), frozenset({proposal.id}))

                await self._files.write(ws, "pending", op)
                if params.consolidates is not None:
                    await self._ctx.consolidation_queued(ws, params.consolidates, proposal.id)
                revision = await self._ctx.revision(ws)
            await in_thread(
                ws.ledger.append_memory_event,
                action="proposed",
                actor="agent",
                proposal_id=proposal.id,
                data={
                    "origin": params.origin,
                    "sourceRefs": proposal.source_refs,
                    "redactions": redactions,
                    "similarTo": similar,
                },
            )
            return ProposeResult(
                proposal=proposal, queued=True, similar_to=similar, redactions=redactions, revision=revision
            )

        return await self._ctx.idempotent(ws, params.request_id, "propose", ProposeResult, run)

    async def list_proposals(self, params: ListProposalsParams, peer: Peer) -> ProposalsResult:
        ws = await self._ctx.workspace(params.workspace)
        async with ws.lock:
            await self._files.refresh(ws)
        active = [e for e in fmt.entries(ws.memory.doc) if e.status == "active"]
        open_ = [e for e in fmt.entries(ws.pending.doc) if e.status in OPEN_STATUSES]
        views = [
            ProposalView(
                proposal=s.entry,
                similar_to=similar_ids(s.entry.content, [*active, *open_], exclude=s.entry.id),
                note=note_of(s),
            )
            for s in ws.pending.doc.sections
            if s.entry.status in OPEN_STATUSES
        ]
        return ProposalsResult(
            proposals=views,
            revision=await self._ctx.revision(ws),
            warnings=file_warnings.not_utf8(ws.pending.text, "PENDING.md"),
        )

    # --- approve ------------------------------------------------------------------------

    async def approve(self, params: ApproveParams, peer: Peer) -> ApproveResult:
        ws = await self._ctx.workspace(params.workspace)
        if not params.ids:
            raise InvalidParams("ids must name at least one proposal", path="$.ids")
        unknown_edits = set(params.edits) - set(params.ids)
        if unknown_edits:
            raise InvalidParams("edits name proposals not being approved", path="$.edits")

        intent_id = None if params.request_id is None else f"approve:{params.request_id}"

        async def run() -> ApproveResult:
            settings = await self._ctx.require_writable(ws)
            if intent_id is not None:
                earlier = await in_thread(ws.ledger.get_intent, intent_id)
                if earlier is not None and earlier.state != "aborted":
                    # A retry of an approval a crash interrupted (and recovery finished):
                    # answer from its recorded plan; completing it again changes nothing.
                    async with ws.lock:
                        approved = await self._complete(ws, earlier.payload)
                        await in_thread(ws.ledger.finish_intent, intent_id)
                        revision = await self._ctx.revision(ws)
                    return ApproveResult(
                        approved=approved,
                        revision=revision,
                        redactions=int(earlier.payload.get("redactions", 0)),
                    )
            async with ws.lock:
                await self._files.refresh(ws)
                revision = await self._ctx.revision(ws)
                if params.expected_revision is not None and params.expected_revision != revision:
                    raise Conflict("the workspace changed since that revision", currentRevision=revision)
                origins = await in_thread(_recorded_origins, ws, params.ids)
                plan, redactions = self._plan(ws, params, origins, default_decay_ms(settings))
                plan["redactions"] = redactions
                intent = await in_thread(ws.ledger.begin_intent, "approve", plan, intent_id=intent_id)
                self._fault("approve_after_intent")
                try:
                    approved = await self._complete(ws, plan)
                except MakadError:
                    await in_thread(ws.ledger.finish_intent, intent.id, state="aborted")
                    raise
                await in_thread(ws.ledger.finish_intent, intent.id)
                revision = await self._ctx.revision(ws)
            return ApproveResult(approved=approved, revision=revision, redactions=redactions)

        return await self._ctx.idempotent(ws, params.request_id, "approve", ApproveResult, run)

    def _plan(
        self, ws: Workspace, params: ApproveParams, origins: dict[str, Origin], default_decay_ms: int | None
    ) -> tuple[dict[str, Any], int]:
        """The full approval, decided up front so a crash can finish it from the record.

        An entry's origin is what the ledger recorded when it was queued (``extracted``
        for the agent, ``imported`` for an import), not what PENDING.md says now; its
        decay is its own, else the workspace's ``defaultDecayDays``.
        """
        pending = {s.entry.id: s.entry for s in ws.pending.doc.sections}
        missing = [i for i in params.ids if i not in pending or pending[i].status not in OPEN_STATUSES]
        if missing:
            raise NotFound("no open proposal with that id", ids=missing)
        now = now_ms()
        items: list[dict[str, Any]] = []
        redactions = 0
        used: set[str] = set()
        # The same content is never approved twice: a proposal whose canonical content is
        # already active (or earlier in this batch) resolves to that entry.
        active: dict[str, Entry] = {}
        for existing in fmt.entries(ws.memory.doc):
            if existing.status == "active":
                active.setdefault(content_hash(existing.content), existing)
        for offset, proposal_id in enumerate(dict.fromkeys(params.ids)):
            proposal = pending[proposal_id]
            edit = params.edits.get(proposal_id)
            title = proposal.title
            content = proposal.content
            tags = proposal.tags
            supersedes = proposal.supersedes
            if edit is not None:
                title = title if edit.title is UNSET else edit.title
                content = content if edit.content is UNSET else edit.content
                tags = tags if edit.tags is UNSET else normalize_tags(edit.tags)
                if edit.supersedes is not UNSET:
                    supersedes = _replaceable(ws, proposal_id, edit.supersedes)
            # The user may have edited PENDING.md by hand: redact what is approved, again.
            title, content, count = MemoryService.clean(title, content)
            redactions += count
            same = active.get(content_hash(content))
            if same is not None:
                items.append(
                    {
                        "proposalId": proposal_id,
                        "entry": msgspec.to_builtins(same),
                        "edited": edit is not None,
                        "duplicateOf": same.id,
                    }
                )
                continue
            created = now + offset
            entry_id = fmt.new_entry_id(content, created)
            while entry_id in used:
                created += 1
                entry_id = fmt.new_entry_id(content, created)
            used.add(entry_id)
            scrub = self._ctx.identifiers
            entry = Entry(
                id=entry_id,
                title=title,
                content=content,
                origin=origins.get(proposal_id, proposal.origin),
                created_at=created,
                updated_at=created,
                status="active",
                tags=redact_all(tags),
                decay_ttl_ms=(default_decay_ms if proposal.decay_ttl_ms is None else proposal.decay_ttl_ms),
                scope=proposal.scope,
                session_id=scrub.scrub_optional(proposal.session_id),
                source_refs=scrub.scrub_refs(proposal.source_refs),
                supersedes=scrub.scrub_optional(supersedes),
            )
            items.append(
                {"proposalId": proposal_id, "entry": msgspec.to_builtins(entry), "edited": edit is not None}
            )
            active[content_hash(content)] = entry
        return {"items": items, "at": now}, redactions

    async def _complete(self, ws: Workspace, plan: dict[str, Any]) -> list[Approved]:
        """Carry out a planned approval; every step may be repeated safely."""
        items = [
            (i["proposalId"], msgspec.convert(i["entry"], Entry), bool(i.get("edited")))
            for i in plan["items"]
        ]
        duplicates = {i["proposalId"]: str(i["duplicateOf"]) for i in plan["items"] if i.get("duplicateOf")}
        at = int(plan["at"])
        superseded: dict[str, str] = {}

        def memory_op(doc: fmt.MemoryDocument) -> Change:
            touched: set[str] = set()
            for proposal_id, entry, _ in items:
                if proposal_id in duplicates:  # already active: nothing to write
                    continue
                doc = fmt.upsert(doc, entry)
                touched.add(entry.id)
                target = fmt.find(doc, entry.supersedes) if entry.supersedes else None
                if target is not None and target.entry.status == "active":
                    doc = fmt.upsert(
                        doc, msgspec.structs.replace(target.entry, status="archived", updated_at=at)
                    )
                    touched.add(target.entry.id)
                    superseded[entry.id] = target.entry.id
            return Change(doc, frozenset(touched))

        await self._files.write(ws, "memory", memory_op)
        self._fault("approve_after_memory")

        def pending_op(doc: fmt.MemoryDocument) -> Change:
            for proposal_id, _, _ in items:
                doc = fmt.remove(doc, proposal_id)
            return Change(doc, frozenset())

        await self._files.write(ws, "pending", pending_op)
        self._fault("approve_after_pending")

        def record() -> None:
            for proposal_id, entry, edited in items:
                history = ws.ledger.memory_history(proposal_id)
                # (Only this proposal's own approval counts: an entry a save dropped is
                # queued again under its entry id, whose first approval was another's.)
                if any(e.action == "approved" and e.proposal_id == proposal_id for e in history):
                    continue
                if edited:
                    ws.ledger.append_memory_event(
                        action="edited", actor="user", proposal_id=proposal_id, entry_id=entry.id
                    )
                data: dict[str, Any] = {"sourceRefs": entry.source_refs}
                if proposal_id in duplicates:
                    data["duplicateOf"] = duplicates[proposal_id]
                ws.ledger.append_memory_event(
                    action="approved", actor="user", proposal_id=proposal_id, entry_id=entry.id, data=data
                )
                if entry.id in superseded:
                    ws.ledger.append_memory_event(
                        action="archived",
                        actor="user",
                        entry_id=superseded[entry.id],
                        data={"supersededBy": entry.id},
                    )

        await in_thread(record)
        await self._ctx.approved(ws, [(p, e) for p, e, _ in items])
        return [
            Approved(proposal_id=p, entry=e, superseded=superseded.get(e.id), duplicate_of=duplicates.get(p))
            for p, e, _ in items
        ]

    async def recover(self, ws: Workspace) -> None:
        """Finish approvals a crash interrupted (called once per workspace, under ws.lock)."""
        for intent in await in_thread(ws.ledger.open_intents):
            if intent.kind != "approve":
                continue
            try:
                await self._complete(ws, intent.payload)
            except MakadError as exc:
                log.warning("approval_recovery_failed", workspace_id=ws.id, kind=exc.kind)
                await in_thread(ws.ledger.finish_intent, intent.id, state="aborted")
                continue
            await in_thread(ws.ledger.finish_intent, intent.id)
            log.info("approval_recovered", workspace_id=ws.id, intent=intent.id)

    # --- reject ------------------------------------------------------------------------

    async def reject(self, params: RejectParams, peer: Peer) -> RejectResult:
        ws = await self._ctx.workspace(params.workspace)
        if not params.ids:
            raise InvalidParams("ids must name at least one proposal", path="$.ids")
        reason = redact(params.reason).text if params.reason else ""

        intent_id = None if params.request_id is None else f"reject:{params.request_id}"

        async def run() -> RejectResult:
            await self._ctx.require_writable(ws)
            rejected: list[Entry] = []
            earlier = None if intent_id is None else await in_thread(ws.ledger.get_intent, intent_id)
            if earlier is not None:
                rejected.extend(msgspec.convert(earlier.payload["rejected"], list[Entry]))

            def op(doc: fmt.MemoryDocument) -> Change:
                if earlier is not None:
                    # A retry whose first attempt may have reached PENDING.md: finish it.
                    for entry in rejected:
                        doc = fmt.remove(doc, entry.id)
                    return Change(doc, frozenset())
                rejected.clear()
                for proposal_id in dict.fromkeys(params.ids):
                    section = fmt.find(doc, proposal_id)
                    if section is None or section.entry.status not in OPEN_STATUSES:
                        raise NotFound("no open proposal with that id", ids=[proposal_id])
                    rejected.append(section.entry)
                    doc = fmt.remove(doc, proposal_id)
                return Change(doc, frozenset(e.id for e in rejected))

            async def plan(_: Change) -> None:
                if intent_id is None or earlier is not None:
                    return
                with contextlib.suppress(Conflict):  # recorded by an attempt redone above
                    await in_thread(
                        ws.ledger.begin_intent,
                        "request",
                        {"rejected": msgspec.to_builtins(rejected)},
                        intent_id=intent_id,
                    )

            async with ws.lock:
                await self._files.write(
                    ws, "pending", op, expected_revision=params.expected_revision, before_write=plan
                )
                revision = await self._ctx.revision(ws)

            def record() -> None:
                for entry in rejected:
                    digest = content_hash(entry.content)
                    if ws.ledger.find_rejection(digest) is None:
                        ws.ledger.record_rejection(digest, reason=reason, proposal_id=entry.id)
                    if earlier is None or earlier.state == "open":
                        ws.ledger.append_memory_event(
                            action="rejected",
                            actor="user",
                            proposal_id=entry.id,
                            data={"reason": reason or None},
                        )

            await in_thread(record)
            await self._ctx.rejected(ws, [e.id for e in rejected])
            if intent_id is not None:
                await in_thread(ws.ledger.finish_intent, intent_id)
            return RejectResult(rejected=[e.id for e in rejected], revision=revision)

        return await self._ctx.idempotent(ws, params.request_id, "reject", RejectResult, run)

    # --- lineage ------------------------------------------------------------------------

    async def memory_history(self, params: HistoryParams, peer: Peer) -> HistoryResult:
        ws = await self._ctx.workspace(params.workspace)
        events = await in_thread(ws.ledger.memory_history, params.id)
        async with ws.lock:
            await self._files.refresh(ws)
        section = fmt.find(ws.memory.doc, params.id) or fmt.find(ws.pending.doc, params.id)
        if not events and section is None:
            raise NotFound("no entry or proposal with that id", id=params.id)
        approved = next((e for e in events if e.action == "approved"), None)
        proposal_id = (
            approved.proposal_id if approved else next((e.proposal_id for e in events if e.proposal_id), None)
        )
        entry = section.entry if section else None
        refs = list(entry.source_refs) if entry else []
        if not refs:
            for event in events:
                data_refs = (event.data or {}).get("sourceRefs")
                if isinstance(data_refs, list) and data_refs:
                    refs = [str(r) for r in data_refs]
                    break
        return HistoryResult(
            id=params.id,
            entry=entry,
            proposal_id=proposal_id,
            source_refs=refs,
            approved_by=approved.actor if approved else None,
            approved_at=approved.ts if approved else None,
            events=events,
        )

    # --- import / export ------------------------------------------------------------------

    async def import_memories(self, params: ImportParams, peer: Peer) -> ImportResultWire:
        ws = await self._ctx.workspace(params.workspace)
        if (params.path is None) == (params.data is None):
            raise InvalidParams("give exactly one of path or data", path="$")

        async def run() -> ImportResultWire:
            await self._ctx.require_writable(ws)
            data, files_, filename = await in_limited_thread(
                self._import_readers, read_import_source, params.path, params.data
            )
            fmt_name = params.format
            if fmt_name is not None and fmt_name not in importers.FORMATS:
                raise InvalidParams(
                    "unknown import format", path="$.format", formats=sorted(importers.FORMATS)
                )
            chosen: importers.FormatName
            if fmt_name is not None:
                chosen = fmt_name
            elif files_ is not None:
                chosen = "claude_code"
            else:
                chosen = importers.sniff(data, filename)
            parsed = await in_limited_thread(
                self._import_readers, importers.parse, data, chosen, files=files_
            )
            if not parsed.items:
                raise nothing_found(parsed, "$.path" if params.path is not None else "$.data")
            progress = ImportProgress(peer, str(ws.path), len(parsed.items)) if params.progress else None
            # Redaction and the canonical form, off the event loop: the heavy part of an import.
            cleaned = await in_limited_thread(self._import_readers, _clean_items, parsed, progress)
            rejected = await in_thread(ws.ledger.find_rejections, [digest for _, _, _, digest in cleaned])
            async with ws.lock:
                await self._files.refresh(ws)
                known = {
                    content_hash(e.content)
                    for e in [*fmt.entries(ws.memory.doc), *fmt.entries(ws.pending.doc)]
                }
                now = now_ms()
                new: list[Entry] = []
                duplicates = 0
                for offset, (item, title, content, digest) in enumerate(cleaned):
                    if digest in known or digest in rejected:
                        duplicates += 1
                        continue
                    known.add(digest)
                    created = item.created_at_ms or now + offset
                    new.append(
                        Entry(
                            id=fmt.new_entry_id(content, created),
                            title=title,
                            content=content,
                            origin="imported",
                            created_at=created,
                            updated_at=item.updated_at_ms or created,
                            status="review_required",
                            tags=normalize_tags(item.tags),
                            source_refs=[redact(f"import:{parsed.format}:{item.source_id}").text],
                        )
                    )
                fitting = fitting_count(ws.pending, new, self._ctx.settings.memory_max_bytes)
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

            await in_thread(
                ws.ledger.append_memory_events,
                [
                    {
                        "action": "imported",
                        "actor": "import",
                        "proposal_id": entry.id,
                        "data": {"format": parsed.format, "sourceRefs": entry.source_refs},
                    }
                    for entry in queued
                ],
            )
            if progress is not None:
                progress.finish()
            return ImportResultWire(
                format=parsed.format,
                imported=[e.id for e in queued],
                duplicates=duplicates,
                errors=parsed.errors,
                skipped=parsed.skipped,
                revision=revision,
                deferred=len(deferred),
            )

        return await self._ctx.idempotent(ws, params.request_id, "import_memories", ImportResultWire, run)

    async def export_memories(self, params: ExportParams, peer: Peer) -> ExportResult:
        ws = await self._ctx.workspace(params.workspace)
        settings = await self._ctx.load_settings(ws)
        if settings.incognito:
            raise IncognitoBlocked("incognito is on: memory is not read")
        async with ws.lock:
            await self._files.refresh(ws, "memory")
        chosen = [e for e in fmt.entries(ws.memory.doc) if e.status == "active" or params.include_archived]
        if params.format == "json":
            data = msgspec.json.format(msgspec.json.encode({"entries": chosen}), indent=2).decode()
        else:
            doc = fmt.new_document()
            for entry in chosen:
                doc = fmt.upsert(doc, entry)
            data = fmt.render(doc)
        return ExportResult(format=params.format, data=data, count=len(chosen))


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
        note = {"workspace": self._workspace, "done": done, "total": self._total}
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
            title, content, _ = MemoryService.clean(item.title or "Imported memory", item.content)
        except MakadError as exc:
            parsed.errors.append(importers.ItemError(locator=item.locator, reason=exc.message))
            continue
        finally:
            if progress is not None:
                progress.step(done)
        out.append((item, title, content, content_hash(content)))
    return out


def nothing_found(parsed: importers.ImportResult, path: str) -> InvalidParams:
    """The error for a file in which the chosen format found no memory at all."""
    expected = importers.EXPECTED[parsed.format]
    return InvalidParams(
        f"no memories found reading it as {parsed.format}: expected {expected}; "
        "pass format to read it as another one",
        path=path,
        format=parsed.format,
        expected=expected,
        formats=list(importers.FORMATS),
        errors=[msgspec.to_builtins(e) for e in parsed.errors[:20]],
    )


def fitting_count(pending: TrackedFile, new: list[Entry], cap: int) -> int:
    """How many of ``new``, in order, PENDING.md can take under ``cap`` bytes (each new
    section's rendered size plus the blank line before it: an upper bound)."""
    used = len((pending.text or fmt.HEADER).encode("utf-8", "surrogateescape"))
    newline = pending.doc.newline if not pending.missing else "\n"
    for count, entry in enumerate(new):
        used += len(fmt.render_entry(entry, (), newline).encode("utf-8")) + 2 * len(newline)
        if used > cap:
            return count
    return len(new)


def _replaceable(ws: Workspace, proposal_id: str, target: str | None) -> str | None:
    """``target`` when it names an active entry of MEMORY.md (what an approval may supersede)."""
    if target is None:
        return None
    section = fmt.find(ws.memory.doc, target)
    if section is None or section.entry.status != "active":
        raise InvalidParams(
            "supersedes must name an active entry of MEMORY.md",
            path=f"$.edits.{proposal_id}.supersedes",
        )
    return target


def _recorded_origins(ws: Workspace, ids: list[str]) -> dict[str, Origin]:
    """The origin each proposal was queued with, from the ledger (blocking)."""
    found: dict[str, Origin] = {}
    for proposal_id in dict.fromkeys(ids):
        for event in ws.ledger.memory_history(proposal_id):
            if event.proposal_id != proposal_id:
                continue
            if event.action == "imported" or (event.action == "proposed" and event.actor == "import"):
                found[proposal_id] = "imported"
                break
            if event.action == "proposed":
                found[proposal_id] = "extracted"
                break
            if event.action == "returned":  # back from MEMORY.md: the origin it had there
                origin = (event.data or {}).get("origin")
                found[proposal_id] = cast(Origin, origin) if origin in ORIGINS else "unknown"
                break
    return found
