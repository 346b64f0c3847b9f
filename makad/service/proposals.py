"""The approval gate: propose into PENDING.md, approve into MEMORY.md, reject, lineage.

The rules are ``makad.core.proposals``; this shell loads the files, calls them,
writes and records. Approval is crash-safe: the whole plan (new entry ids and
content, what is superseded) is recorded in the ledger as an intent *before*
MEMORY.md is written, then PENDING.md, then the lineage and the intent's close
(one transaction). After a crash an open intent is completed from its record,
and every step is idempotent (upsert by the planned id, remove by proposal id),
so each approved proposal ends up in MEMORY.md exactly once and out of
PENDING.md.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Protocol

import msgspec
import structlog

from makad.core import memory_format as fmt
from makad.core import proposals as rules
from makad.core.canonical import MAX_SIMILAR, content_hash, similar_ids, similar_ids_each
from makad.core.entries import clean_entry, is_open
from makad.core.file_warnings import not_proposals, not_utf8, pending_over_cap
from makad.core.levels import USER_ID_PREFIX, USER_LEVEL, level_scope, user_level_id
from makad.core.peer import Peer
from makad.core.redaction import redact
from makad.core.refs import (
    MAX_RETRIEVE_EVENTS,
    SourceRef,
    check_ref_count,
    parse_source_refs,
    unresolved_ref,
)
from makad.core.save_merge import note_of
from makad.core.semantic import entry_text, union_similar
from makad.core.switches import agent_proposes, default_decay_ms
from makad.core.types import ConsolidationState, Entry, NewMemoryEvent, Origin, Scope
from makad.errors import (
    Conflict,
    Disabled,
    GateClosed,
    IncognitoBlocked,
    InvalidParams,
    MakadError,
    NotFound,
    TooLarge,
    check_revision,
)
from makad.service import entry_dates
from makad.service.attention import retract
from makad.service.common import Request, WorkspaceAccess, handlers_of, in_thread, now_ms
from makad.service.memory import Change, MemoryWriter
from makad.service.written_files import reports_memory_written
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.memory import Settings
from makad.wire.proposals import (
    Approved,
    ApproveParams,
    ApproveResult,
    Consolidates,
    HistoryParams,
    HistoryResult,
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
# A rejection reason: a sentence or two, kept in the proposal's lineage.
MAX_REASON_CHARS = 2_000


class EvidenceGate(Protocol):
    """What a profile proposal (one that ``consolidates`` episodes) answers to: checked
    before it is queued, told once it is, settled when the user decides
    (``makad.service.episodes.Evidence``)."""

    async def check(self, ws: Workspace, consolidates: Consolidates) -> None: ...

    async def queued(self, ws: Workspace, consolidates: Consolidates, proposal_id: str) -> None: ...

    async def settle(
        self, ws: Workspace, outcomes: Mapping[str, tuple[ConsolidationState, str | None]]
    ) -> None: ...


@dataclass(frozen=True)
class ProposalDraft:
    """A proposal the agent's path queues (``propose``, ``consolidate``): not yet cleaned,
    checked or deduplicated; its origin is ``extracted``."""

    title: str
    content: str
    tags: list[str] = field(default_factory=list)
    scope: Scope = "workspace"
    session_id: str | None = None
    source_refs: list[str] = field(default_factory=list)
    supersedes: str | None = None
    decay_ttl_ms: int | None = None
    draft: bool = False
    consolidates: Consolidates | None = None


class ProposalService:
    def __init__(self, ctx: WorkspaceAccess, writer: MemoryWriter, gate: EvidenceGate) -> None:
        self._ctx = ctx
        self._files = writer
        self._gate = gate

    async def take_in_saves(self, ws: Workspace) -> None:
        """A user's save of the memory files the watcher has not taken in yet, taken in
        (``MemoryWriter.take_in_saves``): what they deleted by hand is known as taken back."""
        await self._files.take_in_saves(ws)

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "propose list_proposals approve reject memory_history")

    # --- propose ------------------------------------------------------------------------

    @reports_memory_written
    async def propose(self, params: ProposeParams, peer: Peer) -> ProposeResult:
        ws = await self._ctx.workspace(params.workspace)
        draft = ProposalDraft(
            title=params.title,
            content=params.content,
            tags=params.tags,
            scope=params.scope,
            session_id=params.session_id,
            source_refs=params.source_refs,
            supersedes=params.supersedes,
            decay_ttl_ms=params.decay_ttl_ms,
            draft=params.draft,
            consolidates=params.consolidates,
        )
        if ws.level == "user":
            scope = level_scope(ws.level, params.scope, params.session_id)
            return await self.queue_proposal(ws, replace(draft, scope=scope), request_id=params.request_id)
        if params.scope != "global":
            return await self.queue_proposal(ws, draft, request_id=params.request_id)
        if params.consolidates is not None:
            raise InvalidParams(
                "a profile proposal consolidates this workspace's episodes: its scope is the workspace",
                path="$.scope",
            )
        # The user level's queue; the gate, the session and the lineage are the workspace's.
        return await self.queue_proposal(
            await self._ctx.user_level(), draft, request_id=params.request_id, origin=ws
        )

    async def queue_proposal(
        self,
        ws: Workspace,
        draft: ProposalDraft,
        *,
        request_id: str | None,
        origin: Workspace | None = None,
    ) -> ProposeResult:
        """Queue ``draft`` in PENDING.md unless it is refused, was rejected before, or its
        content is already active or waiting (then that entry is the answer).

        ``origin``: the workspace the agent proposed from, when ``ws`` is the user level
        (``scope: "global"``). The agent's gate and its session are checked there (an
        incognito session or workspace writes nothing, here either); the proposal carries
        no session (sessions stay in their workspace) and its lineage, in the user
        level's ledger, records where it came from. Its requestId is kept per origin, so
        two workspaces' retries never answer each other."""
        lineage: dict[str, object] = {}
        if origin is not None:
            lineage = {
                "originWorkspace": redact(str(origin.path)).text,
                "originWorkspaceId": origin.id,
                "originSessionId": self._ctx.identifiers.scrub_optional(draft.session_id),
            }
            if request_id is not None:
                request_id = f"{origin.id}:{request_id}"

        async def run(request: Request) -> ProposeResult:
            if origin is None:
                self._check_agent_may_propose(ws, await self._ctx.require_writable(ws), draft)
            else:
                self._check_agent_may_propose(origin, await self._ctx.require_writable(origin), draft)
                await self._require_user_level_writable(ws)
            title, content, redactions = clean_entry(draft.title, draft.content)
            if draft.scope == "session" and not draft.session_id:
                raise InvalidParams("a session-scoped proposal needs sessionId", path="$.sessionId")
            check_ref_count(draft.source_refs)
            source_refs = await in_thread(self._ctx.identifiers.scrub_refs, draft.source_refs)
            await self._check_source_refs(ws if origin is None else origin, source_refs)
            if draft.consolidates is not None:
                await self._gate.check(ws, draft.consolidates)
            target = rules.replacement_target(draft.supersedes, user_level=ws.level == "user")
            if target is not None and target.startswith(USER_ID_PREFIX):
                await self._check_user_level_target(target)
            async with ws.lock:
                # Under the lock: a rejection records its content before it lets go, so a
                # proposal of that content sees it either open in PENDING.md or rejected.
                rejection = await in_thread(ws.ledger.find_rejection, content_hash(content))
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
                await self._files.refresh(ws)
                if target is not None:
                    if not target.startswith(USER_ID_PREFIX):
                        rules.replaceable_entry(
                            ws.memory.doc,
                            target,
                            session_id=draft.session_id,
                            scope=draft.scope,
                            session_of=self._ctx.identifiers.scrub,
                        )
                    rules.check_open_replacements(ws.pending.doc, target, user_level=ws.level == "user")
                known = rules.candidates(ws.memory.doc, ws.pending.doc)
                same = rules.same_content(content, known)
                if same is not None:
                    return ProposeResult(
                        proposal=same,
                        queued=False,
                        duplicate_of=same.id,
                        redactions=redactions,
                        revision=await self._ctx.revision(ws),
                    )
                # Its tags and refs are redacted: off the event loop.
                proposal = await in_thread(
                    rules.new_proposal,
                    title,
                    content,
                    origin="extracted",
                    tags=draft.tags,
                    scope=draft.scope,
                    session_id=draft.session_id if origin is None else None,
                    source_refs=source_refs,
                    supersedes=target,
                    decay_ttl_ms=draft.decay_ttl_ms,
                    draft=draft.draft,
                    now=now_ms(),
                )
                await self._files.write(ws, "pending", lambda doc: _upserted(doc, proposal))
                if draft.consolidates is not None:
                    await self._gate.queued(ws, draft.consolidates, proposal.id)
                revision = await self._ctx.revision(ws)
            similar = await self._similar(ws, title, content, known)
            self._ctx.semantic.proposed(ws, proposal)
            result = ProposeResult(
                proposal=proposal, queued=True, similar_to=similar, redactions=redactions, revision=revision
            )
            # (A crash before this commit leaves the proposal in PENDING.md: the retry
            # finds it there and answers with it as the duplicate, queueing nothing.)
            await in_thread(
                ws.ledger.append_memory_event,
                action="proposed",
                actor="agent",
                proposal_id=proposal.id,
                data={
                    "origin": "extracted",
                    "sourceRefs": proposal.source_refs,
                    "redactions": redactions,
                    "similarTo": similar,
                    **({"supersedes": target} if target is not None else {}),
                    **lineage,
                },
                request=request.record(result),
            )
            return result

        return await self._ctx.idempotent(ws, request_id, "propose", ProposeResult, run)

    async def _check_source_refs(self, src: Workspace, refs: list[str]) -> None:
        """Every source ref (scrubbed) names something of ``src``, the workspace the agent
        proposes from: an ``event:`` ref a session of its ledger and seqs up to the last
        recorded, a ``checkpoint:`` or ``episode:`` ref one of its ledger, a ``memory:`` ref
        an entry of its MEMORY.md (any status; ``@user/<id>``: of the user level's) or of
        its lineage (deleted since). Else ``invalid_params`` at ``$.sourceRefs[i]`` for the
        first that does not, and nothing is written. One ledger read for all of them."""
        if not refs:
            return
        parsed = await in_thread(parse_source_refs, refs)
        unresolved = await self._resolve(src, parsed)
        if unresolved:
            raise _unresolved(*unresolved[0])

    async def _resolve(self, src: Workspace, parsed: list[SourceRef]) -> list[tuple[SourceRef, int | None]]:
        """The refs among ``parsed`` that name nothing ``src`` stores (``memory:`` refs are
        looked for in the files first, the rest in one ledger read), each with its session's
        last seq where that is why."""
        in_files = await self._entries_in_files(src, [r for r in parsed if r.kind == "memory"])
        rest = [r for r in parsed if r.position not in in_files]
        return await in_thread(src.ledger.unresolved_refs, rest)

    async def _entries_in_files(self, src: Workspace, refs: list[SourceRef]) -> set[int]:
        """The indexes of the ``memory:`` refs among ``refs`` naming an entry of MEMORY.md
        (``src``'s, or the user level's for ``@user/<id>``), whatever its status."""
        found: set[int] = set()
        mine = [r for r in refs if not r.target.startswith(USER_ID_PREFIX)]
        users = [r for r in refs if r.target.startswith(USER_ID_PREFIX)]
        if mine:
            async with src.lock:
                await self._files.refresh(src)
                doc = src.memory.doc
            found.update(await in_thread(_in_doc, doc, [(r.position, r.target) for r in mine]))
        user = None if not users else await self._ctx.user_level_if_any()
        if user is not None:
            async with user.lock:
                await self._files.refresh(user)
                doc = user.memory.doc
            named = [(r.position, r.target.removeprefix(USER_ID_PREFIX)) for r in users]
            found.update(await in_thread(_in_doc, doc, named))
        return found

    async def _similar(
        self,
        ws: Workspace,
        title: str,
        content: str,
        known: list[Entry],
        exclude: str | None = None,
        fuzzy: list[str] | None = None,
    ) -> list[str]:
        """The fuzzy matches of ``content`` among ``known`` (``fuzzy`` when they are found
        already), then (with the semantic channel) the entries whose meaning is near the
        proposal's, its title and content embedded as an entry's are (``makad.core.semantic``)."""
        if fuzzy is None:
            fuzzy = await in_thread(similar_ids, content, known, exclude=exclude)
        semantic = self._ctx.semantic
        if not semantic.ready:
            return fuzzy
        text = entry_text(Entry(id="", title=title, content=content))
        dense = await in_thread(semantic.similar, ws, text, known, exclude)
        return union_similar(fuzzy, dense, MAX_SIMILAR)

    async def _check_user_level_target(self, target: str) -> None:
        """A workspace proposal naming a user-level entry (``@user/<id>``) overrides it in
        this workspace (``makad.core.levels``): that entry must be active at the user level."""
        user = await self._ctx.user_level_if_any()
        if user is None:
            raise rules.no_replaceable(target)
        async with user.lock:
            await self._files.refresh(user)
            rules.replaceable_entry(
                user.memory.doc, target.removeprefix(USER_ID_PREFIX), session_id=None, scope="workspace"
            )

    async def _replaced(self, ws: Workspace, proposals: list[Entry]) -> dict[str, Entry]:
        """Proposal id → the entry its ``supersedes`` names, as it is now (any status; a
        user-level one under its ``@user/`` id), for the proposals that name one that exists."""
        found: dict[str, Entry] = {}
        user_doc: fmt.MemoryDocument | None = None
        for proposal in proposals:
            target = rules.replacement_target(proposal.supersedes, user_level=ws.level == "user")
            if target is None:
                continue
            if ws.level != "user" and target.startswith(USER_ID_PREFIX):
                if user_doc is None:
                    user = await self._ctx.user_level_if_any()
                    if user is None:
                        continue
                    async with user.lock:
                        await self._files.refresh(user)
                    user_doc = user.memory.doc
                section = fmt.find(user_doc, target.removeprefix(USER_ID_PREFIX))
                if section is not None:
                    found[proposal.id] = msgspec.structs.replace(
                        section.entry, id=user_level_id(section.entry.id)
                    )
                continue
            section = fmt.find(ws.memory.doc, target)
            if section is not None:
                found[proposal.id] = section.entry
        return found

    async def _require_user_level_writable(self, user: Workspace) -> None:
        try:
            await self._ctx.require_writable(user)
        except Disabled:
            raise Disabled(
                f'the user-level memory ("{USER_LEVEL}") is disabled: set_settings on it turns it on'
            ) from None
        except IncognitoBlocked:
            raise IncognitoBlocked(
                f'the user-level memory ("{USER_LEVEL}") is incognito: nothing is written'
            ) from None

    def _check_agent_may_propose(self, ws: Workspace, settings: Settings, draft: ProposalDraft) -> None:
        """The agent's path: the gate comes first."""
        if draft.session_id and draft.session_id in self._ctx.incognito_sessions(ws):
            raise IncognitoBlocked("the session is incognito: nothing is written")
        if not agent_proposes(settings):
            raise GateClosed(
                "agent proposals need extractToolEnabled and agentReadEnabled",
                extractToolEnabled=settings.extract_tool_enabled,
                agentReadEnabled=settings.agent_read_enabled,
            )

    async def list_proposals(self, params: ListProposalsParams, peer: Peer) -> ProposalsResult:
        ws = await self._ctx.workspace(params.workspace)
        async with ws.lock:
            await self._files.refresh(ws)
        # What the answer says about the files, taken before the first await below: a
        # proposal queued meanwhile is listed next time, under a newer revision.
        revision = await self._ctx.revision(ws)
        warnings = [
            *not_utf8(ws.pending.text, "PENDING.md"),
            *not_proposals(ws.pending.doc),
            *pending_over_cap(ws.pending.too_large, ws.pending.size, self._ctx.settings.memory_max_bytes),
        ]
        known = rules.candidates(ws.memory.doc, ws.pending.doc)
        open_sections = [s for s in ws.pending.doc.sections if is_open(s.entry)]
        replaced = await self._replaced(ws, [s.entry for s in open_sections])
        # Every open proposal against every entry and proposal: off the event loop.
        targets = [(s.entry.content, s.entry.id) for s in open_sections]
        fuzzy = await in_thread(similar_ids_each, targets, known)
        views = [
            ProposalView(
                proposal=s.entry,
                similar_to=await self._similar(
                    ws, s.entry.title, s.entry.content, known, exclude=s.entry.id, fuzzy=found
                ),
                note=note_of(s),
                replaces=replaced.get(s.entry.id),
            )
            for s, found in zip(open_sections, fuzzy, strict=True)
        ]
        return ProposalsResult(proposals=views, revision=revision, warnings=warnings)

    # --- approve ------------------------------------------------------------------------

    @reports_memory_written
    async def approve(self, params: ApproveParams, peer: Peer) -> ApproveResult:
        ws = await self._ctx.workspace(params.workspace)
        if not params.ids:
            raise InvalidParams("ids must name at least one proposal", path="$.ids")
        if set(params.edits) - set(params.ids):
            raise InvalidParams("edits name proposals not being approved", path="$.edits")
        intent_id = None if params.request_id is None else f"approve:{params.request_id}"

        async def run(request: Request) -> ApproveResult:
            settings = await self._ctx.require_writable(ws)
            earlier = None if intent_id is None else await in_thread(ws.ledger.get_intent, intent_id)
            if earlier is not None and earlier.state != "aborted":
                # A retry of an approval a crash interrupted (and recovery finished):
                # answer from its recorded plan; completing it again changes nothing.
                recorded = rules.ApprovalPlan.from_payload(earlier.payload)
                async with ws.lock:
                    return await self._complete(ws, recorded, earlier.id, request)
            async with ws.lock:
                await self._files.refresh(ws)
                revision = await self._ctx.revision(ws)
                check_revision(params.expected_revision, revision)
                origins, returned = await in_thread(_recorded_origins, ws, params.ids)
                plan = await in_thread(  # edits are cleaned and redacted: off the event loop
                    rules.plan_approval,
                    ws.pending.doc,
                    ws.memory.doc,
                    params.ids,
                    params.edits,
                    origins=origins,
                    default_decay_ms=default_decay_ms(settings),
                    now=now_ms(),
                    scrub=self._ctx.identifiers,
                    scope="global" if ws.level == "user" else None,
                    returned=returned,
                )
                intent = await in_thread(
                    ws.ledger.begin_intent, "approve", plan.to_payload(), intent_id=intent_id
                )
                self._ctx.faults.crash("approve_after_intent")
                try:
                    return await self._complete(ws, plan, intent.id, request)
                except MakadError:
                    await in_thread(ws.ledger.finish_intent, intent.id, state="aborted")
                    raise

        return await self._ctx.idempotent(ws, params.request_id, "approve", ApproveResult, run)

    async def _complete(
        self, ws: Workspace, plan: rules.ApprovalPlan, intent_id: str, request: Request | None = None
    ) -> ApproveResult:
        """Carry out a planned approval and close its intent; every step may be repeated.
        The lineage, the intent's close and the request record are one transaction."""
        superseded: dict[str, str] = {}
        corrected: list[tuple[Entry, Entry | None]] = []

        def memory_op(doc: fmt.MemoryDocument) -> Change:
            applied = rules.approve_into(doc, plan)
            superseded.clear()
            superseded.update(applied.superseded)
            corrected.clear()
            for new_id, old_id in applied.superseded.items():
                old, new = fmt.find(doc, old_id), fmt.find(applied.doc, new_id)
                if old is not None:
                    corrected.append((old.entry, None if new is None else new.entry))
            return Change(applied.doc, applied.touched)

        await self._files.write(ws, "memory", memory_op)
        self._ctx.faults.crash("approve_after_memory")
        await self._files.write(
            ws, "pending", lambda doc: Change(rules.remove_approved(doc, plan), frozenset())
        )
        self._ctx.faults.crash("approve_after_pending")
        # Settled before the intent closes: a crash in between settles them again (a no-op).
        await self._gate.settle(ws, {item.proposal_id: ("approved", item.entry.id) for item in plan.items})
        approved = [
            Approved(
                proposal_id=item.proposal_id,
                entry=item.entry,
                superseded=superseded.get(item.entry.id),
                duplicate_of=item.duplicate_of,
            )
            for item in plan.items
        ]
        result = ApproveResult(
            approved=approved, revision=await self._ctx.revision(ws), redactions=plan.redactions
        )
        record = None if request is None else request.record(result)

        def commit() -> None:
            recorded = {
                item.proposal_id
                for item in plan.items
                if rules.was_approved(item.proposal_id, ws.ledger.memory_history(item.proposal_id))
            }
            events = rules.approval_events(plan, superseded, recorded)
            ws.ledger.record_lineage(events, finish_intent=intent_id, request=record)

        await in_thread(commit)
        # An approved correction takes back what the entry it supersedes said, as
        # update_entry does: the attention state, episodes and consolidations leave it out.
        await retract(self._ctx, ws, corrected)
        return result

    async def recover(self, ws: Workspace) -> None:
        """Finish approvals a crash interrupted (called once per workspace, under ws.lock)."""
        for intent in await in_thread(ws.ledger.open_intents):
            if intent.kind != "approve":
                continue
            try:
                await self._complete(ws, rules.ApprovalPlan.from_payload(intent.payload), intent.id)
            except MakadError as exc:
                log.warning("approval_recovery_failed", workspace_id=ws.id, kind=exc.kind)
                await in_thread(ws.ledger.finish_intent, intent.id, state="aborted")
                continue
            log.info("approval_recovered", workspace_id=ws.id, intent=intent.id)

    # --- reject ------------------------------------------------------------------------

    @reports_memory_written
    async def reject(self, params: RejectParams, peer: Peer) -> RejectResult:
        ws = await self._ctx.workspace(params.workspace)
        if not params.ids:
            raise InvalidParams("ids must name at least one proposal", path="$.ids")
        if params.reason is not None and len(params.reason) > MAX_REASON_CHARS:
            # Before the redactor reads it: every memory_history of the proposal carries it.
            raise TooLarge(
                f"reason is over {MAX_REASON_CHARS} characters",
                field="reason",
                limit=MAX_REASON_CHARS,
                actual=len(params.reason),
            )
        reason = (await in_thread(redact, params.reason)).text if params.reason else ""
        intent_id = None if params.request_id is None else f"reject:{params.request_id}"

        async def run(request: Request) -> RejectResult:
            await self._ctx.require_writable(ws)
            earlier = None if intent_id is None else await in_thread(ws.ledger.get_intent, intent_id)
            # A retry whose first attempt may have reached PENDING.md finishes that one.
            rejected = [] if earlier is None else msgspec.convert(earlier.payload["rejected"], list[Entry])

            def op(doc: fmt.MemoryDocument) -> Change:
                if earlier is not None:
                    return Change(rules.without(doc, [e.id for e in rejected]), frozenset())
                doc, rejected[:] = rules.reject_from(doc, params.ids)
                return Change(doc, frozenset(e.id for e in rejected))

            async def plan(_: Change) -> None:
                if intent_id is None or earlier is not None:
                    return
                with contextlib.suppress(Conflict):  # recorded by an attempt redone above
                    payload = {"rejected": msgspec.to_builtins(rejected)}
                    await in_thread(ws.ledger.begin_intent, "request", payload, intent_id=intent_id)

            async with ws.lock:
                await self._files.write(
                    ws, "pending", op, expected_revision=params.expected_revision, before_write=plan
                )
                revision = await self._ctx.revision(ws)
                await self._gate.settle(ws, {e.id: ("rejected", None) for e in rejected})
                result = RejectResult(rejected=[e.id for e in rejected], revision=revision)
                contents: dict[str, str] = {}
                for entry in rejected:
                    contents.setdefault(content_hash(entry.content), entry.id)
                events = []
                if earlier is None or earlier.state == "open":  # else its first attempt recorded them
                    events = [
                        NewMemoryEvent(
                            action="rejected",
                            actor="user",
                            proposal_id=e.id,
                            # The title: what the attention state's "Do not re-propose" names.
                            data={"reason": reason or None, "title": e.title},
                        )
                        for e in rejected
                    ]
                # Recorded before the lock is let go: a proposal of the same content, waiting
                # on the lock, must find the rejection once the proposal left PENDING.md.
                await in_thread(
                    ws.ledger.record_lineage,
                    events,
                    rejected=contents,
                    reason=reason,
                    finish_intent=intent_id,
                    request=request.record(result),
                )
            self._ctx.changed(ws)  # the rejections are recorded now (after the bump)
            return result

        return await self._ctx.idempotent(ws, params.request_id, "reject", RejectResult, run)

    # --- lineage ------------------------------------------------------------------------

    async def memory_history(self, params: HistoryParams, peer: Peer) -> HistoryResult:
        ws = await self._ctx.workspace(params.workspace)
        async with ws.lock:
            await self._files.refresh(ws)
        wanted = await self._history_id(ws, params.id)
        events = await in_thread(ws.ledger.memory_history, wanted)
        in_memory = fmt.find(ws.memory.doc, wanted)
        section = in_memory or fmt.find(ws.pending.doc, wanted)
        if not events and section is None:
            raise NotFound("no entry or proposal with that id", id=params.id)
        approved = next((e for e in events if e.action == "approved"), None)
        proposal_id = (
            approved.proposal_id if approved else next((e.proposal_id for e in events if e.proposal_id), None)
        )
        entry = section.entry if section else None
        if in_memory is not None:  # with the dates the daemon keeps for an entry typed by hand
            entry = entry_dates.dated_entry(ws, in_memory.entry)
        source_refs = rules.lineage_refs(entry, events)
        return HistoryResult(
            id=wanted,
            entry=entry,
            proposal_id=proposal_id,
            source_refs=source_refs,
            approved_by=approved.actor if approved else None,
            approved_at=approved.ts if approved else None,
            events=events,
            unresolved_refs=[] if ws.level == "user" else await self._unresolved_refs(ws, source_refs),
        )

    async def _unresolved_refs(self, ws: Workspace, refs: list[str]) -> list[str]:
        """The refs among ``refs`` (as a file holds them) naming nothing ``ws`` stores now
        (the first ``MAX_RETRIEVE_EVENTS`` judged); a ref of another form (``import:…``, free
        text) is not judged, and none is refused."""
        if not refs:
            return []
        scrub = self._ctx.identifiers.scrub_refs
        parsed = await in_thread(
            lambda: [
                p for p in map(_lenient_ref, enumerate(scrub(refs[:MAX_RETRIEVE_EVENTS]))) if p is not None
            ]
        )
        return [refs[ref.position] for ref, _ in await self._resolve(ws, parsed)]

    async def _history_id(self, ws: Workspace, given: str) -> str:
        """``given`` when it is an id of the files or the lineage, else the one such id it is
        a unique prefix of (the short ids lists print); an entry typed by hand (``h-…``) by
        its hex part too. A prefix of several ids is invalid_params naming them."""
        in_files = [s.entry.id for doc in (ws.memory.doc, ws.pending.doc) for s in doc.sections]
        if given in in_files or not given:
            return given
        prefixes = [given, fmt.DERIVED_ID_PREFIX + given]
        in_lineage = await in_thread(ws.ledger.lineage_ids_starting, prefixes)
        if given in in_lineage:
            return given
        known = dict.fromkeys([*in_files, *in_lineage])
        matches = [k for k in known if any(k.startswith(p) for p in prefixes)]
        if len(matches) > 1:
            raise InvalidParams(
                "that id prefix starts several ids; give more of it",
                path="$.id",
                reason="ambiguous_id",
                candidates=matches[:10],
            )
        return matches[0] if matches else given


def _upserted(doc: fmt.MemoryDocument, entry: Entry) -> Change:
    return Change(fmt.upsert(doc, entry), frozenset({entry.id}))


def _recorded_origins(ws: Workspace, ids: list[str]) -> tuple[dict[str, Origin], set[str]]:
    """The origin each proposal was queued with, and those that are entries of MEMORY.md
    a save dropped, from the ledger (blocking)."""
    found: dict[str, Origin] = {}
    returned: set[str] = set()
    waiting = rules.open_ids(ws.pending.doc)
    # Only ids PENDING.md holds open are looked up: the others are refused by the plan,
    # and a call naming many of them must not cost a ledger read each.
    for proposal_id in (i for i in dict.fromkeys(ids) if i in waiting):
        history = ws.ledger.memory_history(proposal_id)
        origin = rules.queued_origin(proposal_id, history)
        if origin is not None:
            found[proposal_id] = origin
        if rules.returned_entry(proposal_id, history):
            returned.add(proposal_id)
    return found, returned


def _unresolved(ref: SourceRef, last_seq: int | None) -> InvalidParams:
    """The refusal of a source ref that names nothing the workspace stores."""
    if ref.kind == "event" and last_seq is None:
        return unresolved_ref(
            ref, "unknown_session", "a source ref names a session this workspace has not recorded"
        )
    if ref.kind == "event":
        return unresolved_ref(
            ref,
            "past_last_seq",
            "a source ref names events past the last one its session recorded",
            lastSeq=last_seq,
        )
    if ref.kind == "checkpoint":
        return unresolved_ref(
            ref, "unknown_checkpoint", "a source ref names a checkpoint this workspace does not have"
        )
    if ref.kind == "episode":
        return unresolved_ref(
            ref, "unknown_episode", "a source ref names an episode this workspace does not have"
        )
    return unresolved_ref(
        ref, "unknown_entry", "a source ref names a memory entry this workspace does not have"
    )


def _lenient_ref(item: tuple[int, str]) -> SourceRef | None:
    """A stored ref at its place, parsed, or None when it is of no form the ledger resolves."""
    position, ref = item
    try:
        (parsed,) = parse_source_refs([ref])
    except InvalidParams:
        return None
    return parsed._replace(position=position)


def _in_doc(doc: fmt.MemoryDocument, wanted: list[tuple[int, str]]) -> set[int]:
    """The positions of the entry ids among ``wanted`` that ``doc`` holds, whatever their status."""
    ids = {section.entry.id for section in doc.sections}
    return {position for position, entry_id in wanted if entry_id in ids}
