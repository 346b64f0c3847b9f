"""build_context: fetch candidates from the stores, let the pure core assemble, record it.

The strategy (``makad.core.strategies``) is the call's ``strategy`` or the
workspace's ``contextStrategy`` setting. The curator strategies build the
deterministic pack first; when no kind is under pressure
(``makad.core.strategies.curator``) that is the answer, in the same single
worker-thread hop. Otherwise they take a second hop around the model's answer
(``makad.service.curator``): the curated pack and the manifest; the HTTP
exchange runs on the event loop under its deadline.

The service only gathers bounded inputs — the top memory candidates by BM25
plus the most recent, the tail of the live history that can matter for this
budget, recall hits with their neighbours — so the cost does not grow with the
size of the workspace. ``makad.core.assembly`` makes every choice.
"""

from __future__ import annotations

import hashlib
import heapq
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal

import msgspec

from makad.core import levels
from makad.core.attention import AttentionLine
from makad.core.bridge import BRIDGED_WEIGHT, bridged_terms, query_words
from makad.core.cjk import query_head
from makad.core.confidence import user_values
from makad.core.context_check import assemble_checked
from makad.core.context_types import (
    SEGMENT_KINDS,
    AttentionReason,
    ContextInputs,
    ContextLimits,
    ContextPack,
    FillOrder,
    MemorySnapshot,
    RecallHit,
    SegmentKind,
    Skipped,
)
from makad.core.empty_pack import empty_reason
from makad.core.history import message_tokens
from makad.core.levels import user_level_id
from makad.core.memory_segment import shown_prefix
from makad.core.memory_select import fill_key, fill_order, is_pinned
from makad.core.peer import Peer
from makad.core.redaction import redact_entry
from makad.core.refs import MEMORY_PREFIX, memory_ref
from makad.core.render import entry_hash
from makad.core.strategies import Pool, strategy
from makad.core.strategies import curator as curator_core
from makad.core.switches import agent_reads, attention_reason
from makad.core.tokens import HeuristicCounter
from makad.core.types import Checkpoint, ContextStrategy, CuratorTrace, Entry, Event
from makad.errors import InvalidParams, IOFailure
from makad.service import curator as curator_http
from makad.service import entry_dates, unrecorded
from makad.service.attention import cached_state
from makad.service.common import WorkspaceAccess, handlers_of, in_thread, now_ms
from makad.service.embeddings import Dense, MemoryCosines
from makad.service.identifiers import Identifiers
from makad.service.memory import MemoryWriter
from makad.service.sessions import Sessions
from makad.settings import CuratorSettings
from makad.store import attention_store, recall_source
from makad.store.ledger import Ledger
from makad.store.ledger.shown_cache import ShownView
from makad.store.session_store import SessionStore
from makad.store.workspace_state import LevelView, Overrides
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.context import MAX_BUDGET_TOKENS, BuildContextParams
from makad.wire.system import ContextPaths

# Memory candidates: the pinned entries, then with a query the best FTS matches (an entry
# past the 100th match rarely reaches the top 10). The other entries come in fill order
# (``ContextInputs.memory_fill``) as far as there is room. The recency strategies choose
# among the most recent entries instead.
MEMORY_BM25_CANDIDATES = 100
MEMORY_NO_QUERY_CANDIDATES = 200
# Pinned entries are a few by design (read_state warns past a dozen one-liners): past this
# many per level only the most trusted and most recent are candidates, so a file pinned
# wholesale cannot make every pack's trace list all of it.
MEMORY_PINNED_CANDIDATES = 200
# History tail to read: events covering this multiple of the budget (older ones cannot fit).
HISTORY_TAIL_FACTOR = 2
HISTORY_FIRST_READ = 256
HISTORY_MIN_READ = 64
# Sessions whose first build_context call is remembered (the attention segment's).
MAX_FIRST_CALLS = 10_000
# Workspaces whose build_context paths ``status`` counts: the ones that built a pack most
# recently (a daemon serving thousands of folders does not keep a count for each forever).
MAX_PATH_COUNTS = 256


@dataclass
class _Gathered:
    """What the first hop of a call found: the inputs, the call's identity, and (for the
    curator strategies) the deterministic pack."""

    inputs: ContextInputs
    call_id: str
    since: int
    pack: ContextPack | None = None


class ContextService:
    def __init__(
        self,
        ctx: WorkspaceAccess,
        writer: MemoryWriter,
        sessions: Sessions,
        curator: CuratorSettings | None = None,
        attention_caught_up: Callable[[Workspace], Awaitable[None]] | None = None,
    ) -> None:
        self._ctx = ctx
        self._files = writer
        self._sessions = sessions
        self._attention_caught_up = attention_caught_up
        self._limits = ContextLimits(memory_session_cap_bytes=ctx.settings.session_memory_cap_bytes)
        self._curator = curator if curator is not None else ctx.settings.curator
        # workspace path → how many packs took each trace.path (for ``status``), the
        # MAX_PATH_COUNTS that built one most recently, least recent first.
        self._paths: OrderedDict[str, Counter[str]] = OrderedDict()

    def path_counts(self) -> list[ContextPaths]:
        """Per workspace, how many build_context calls took each path since the daemon started
        (the ``MAX_PATH_COUNTS`` workspaces that built a pack most recently)."""
        return [
            ContextPaths(
                workspace=workspace,
                fast=counts["fast"],
                bounded=counts["bounded"],
                slow=counts["slow"],
                fallback=counts["fallback"],
            )
            for workspace, counts in sorted(self._paths.items())
        ]

    def _count_path(self, workspace: str, path: str) -> None:
        counts = self._paths.pop(workspace, None)
        if counts is None:
            counts = Counter()
            while len(self._paths) >= MAX_PATH_COUNTS:
                self._paths.popitem(last=False)
        self._paths[workspace] = counts
        counts[path] += 1

    def handlers(self) -> dict[str, Handler]:
        return handlers_of(self, "build_context")

    async def build_context(self, params: BuildContextParams, peer: Peer) -> ContextPack:
        if params.budget_tokens < 0 or params.budget_tokens > MAX_BUDGET_TOKENS:
            raise InvalidParams(
                f"budgetTokens must be between 0 and {MAX_BUDGET_TOKENS}", path="$.budgetTokens"
            )
        ws = await self._ctx.session_workspace(params.workspace)
        # The revision before the settings and memory are read: a change landing meanwhile
        # makes the pack look older than what it shows (a client builds again), never newer.
        revision = await self._ctx.revision(ws)
        settings = await self._ctx.load_settings(ws)
        sid = params.session_id
        incognito = sid is not None and self._sessions.is_incognito(ws, sid)
        include = frozenset(params.include) if params.include is not None else frozenset(SEGMENT_KINDS)
        query = query_head(params.query or "").strip() or None
        name: ContextStrategy = params.strategy or settings.context_strategy
        pool = strategy(name).pool
        reads_ok = agent_reads(settings, incognito_session=incognito)
        # The attention state: in a session's first pack, when include names it, or in any
        # call without a session (no session could have been shown it: each such call is a
        # first look at what the workspace is in the middle of).
        attention = reads_ok and settings.attention_enabled and "attention" in include
        asked = sid is None or (params.include is not None and "attention" in params.include)
        memory_ok = reads_ok and "memory" in include
        # The attention lines are read against PENDING.md's open proposals: a user's save of
        # it the watcher has not taken in yet is taken in first, with MEMORY.md's.
        snapshot = await self._snapshot(ws, pending=attention) if memory_ok else None
        if attention and not memory_ok:
            await self._files.take_in_saves(ws)
        may_show = attention and (asked or (sid is not None and sid not in ws.state.first_calls))
        if may_show and self._attention_caught_up is not None:
            # A session closed just before (the host opened this one at once): its records
            # and the state derived from them, before a pack that shows it.
            await self._attention_caught_up(ws)
        user = await self._user_level() if snapshot is not None else None
        recall_ok = settings.history_recall_enabled and "recall" in include and not incognito
        plan = _Plan(
            sid=sid,
            incognito=incognito,
            include=include,
            query=query,
            budget=params.budget_tokens,
            snapshot=snapshot,
            recall=bool(recall_ok and (query or pool == "newest") and pool != "none"),
            revision=revision,
            workspace=str(ws.path),
            strategy=name,
            pool=pool,
            user=user,
            attention="asked" if attention and asked else "first" if attention and sid else None,
            attention_reason=attention_reason(
                settings,
                incognito_session=incognito,
                included="attention" in include,
                session=sid is not None,
                asked=asked,
            ),
            read_only=settings.incognito,
        )
        source: SessionStore | None = None
        if sid is not None:
            source = self._sessions.store(ws, sid)
        if name in ("curator", "curator_shadow"):
            pack = await self._curate(ws, plan, source, gated=not reads_ok)
        else:
            # One worker-thread hop gathers every input, assembles and records the manifest:
            # hops are not free.
            pack = await in_thread(self._gather_and_assemble, ws, plan, source)
        self._count_path(plan.workspace, pack.trace.path)
        if not pack.segments and not pack.messages:
            entries = (len(snapshot.by_id) if snapshot is not None else 0) + (
                len(user.view.snapshot.by_id) if user is not None else 0
            )
            reason = empty_reason(
                pack,
                reads_off=not (settings.enabled and settings.agent_read_enabled),
                incognito=settings.incognito or incognito,
                memory_entries=entries,
                memory_asked="memory" in include,
            )
            trace = msgspec.structs.replace(pack.trace, empty_reason=reason)
            pack = msgspec.structs.replace(pack, trace=trace)
        return pack

    def _gather_and_assemble(self, ws: Workspace, plan: _Plan, source: SessionStore | None) -> ContextPack:
        gathered = self._gather(ws, plan, source)
        build = strategy(plan.strategy).build
        checked = assemble_checked(gathered.inputs, None if plan.incognito else ws.ledger.unverified, build)
        return self._record(ws, plan, gathered, checked, None)

    async def _curate(
        self, ws: Workspace, plan: _Plan, source: SessionStore | None, *, gated: bool
    ) -> ContextPack:
        """The curator strategies: the deterministic pack, and when a kind is under pressure
        the model's pick among it, within the timeout; any failure (or a gate) gives the
        deterministic pack (see module doc). Without pressure the model is not asked and
        the call takes one worker-thread hop, as the deterministic strategy does."""
        first = await in_thread(self._curate_first, ws, plan, source, gated)
        if isinstance(first, ContextPack):
            return first
        gathered, offered, record = first
        answer: curator_core.Answer | None = None
        try:
            completion = await curator_http.complete(self._curator, curator_core.prompt(plan.query, offered))
            record.prompt_tokens = completion.prompt_tokens
            record.completion_tokens = completion.completion_tokens
            record.latency_ms = completion.latency_ms
            answer = curator_core.read_answer(completion.content, offered)
            record.selected, record.ignored = answer.selected, answer.ignored
        except curator_http.CuratorFailed as exc:
            record.status, record.reason, record.latency_ms = "failed", exc.reason, exc.latency_ms
        except curator_core.BadAnswer as exc:
            record.status, record.reason, record.ignored = "failed", exc.reason, exc.ignored
        return await in_thread(self._finish_curated, ws, plan, gathered, answer, record)

    def _curate_first(
        self, ws: Workspace, plan: _Plan, source: SessionStore | None, gated: bool
    ) -> ContextPack | tuple[_Gathered, list[curator_core.Offer], CuratorTrace]:
        """The first hop: the inputs and the deterministic pack; the finished pack when the
        model need not or cannot be asked, else what to ask it."""
        gathered = self._gather(ws, plan, source)
        build = strategy(plan.strategy).build
        pack = assemble_checked(gathered.inputs, None if plan.incognito else ws.ledger.unverified, build)
        gathered.pack = pack
        config = self._curator
        shadow = plan.strategy == "curator_shadow"
        record = CuratorTrace(model=config.model, shadow=shadow, status="ok")
        pressure = [] if gated else curator_core.pressured(pack)
        offered = curator_core.offers(gathered.inputs, pack, pressure) if pressure else []
        record.pressure, record.offered = pressure, len(offered)
        if gated:
            record.status, record.reason = "gated", "private"
        elif not pressure:
            record.status, record.reason = "skipped", "fits"
        elif not config.configured:
            record.status, record.reason = "unconfigured", "unconfigured"
        elif not offered:
            record.status, record.reason = "failed", "no_candidates"
        else:
            return gathered, offered, record
        return self._finish_curated(ws, plan, gathered, None, record)

    def _finish_curated(
        self,
        ws: Workspace,
        plan: _Plan,
        gathered: _Gathered,
        answer: curator_core.Answer | None,
        record: CuratorTrace,
    ) -> ContextPack:
        deterministic = gathered.pack
        assert deterministic is not None
        pack = deterministic
        if record.shadow:
            path = deterministic.trace.path
        elif record.status == "skipped":
            path = "fast"
        else:
            path = "fallback"
        if answer is not None:
            chosen = answer
            trimmed: list[int | None] = []

            def build(inputs: ContextInputs) -> ContextPack:
                result = curator_core.curated(inputs, deterministic, chosen)
                trimmed.append(None if result is None else result.trimmed)
                return deterministic if result is None else result.pack

            picked = assemble_checked(
                gathered.inputs, None if plan.incognito else ws.ledger.unverified, build
            )
            if trimmed[-1] is None:
                record.status, record.reason = "failed", "would_drop_fitting"
            else:
                record.trimmed = trimmed[-1]
                record.packed = curator_core.shown_refs(picked)
                record.overlap = curator_core.overlap(record.packed, curator_core.shown_refs(deterministic))
                if not record.shadow:
                    pack, path = picked, "slow"
        trace = msgspec.structs.replace(pack.trace, path=path, strategy=plan.strategy, curator=record)
        return self._record(ws, plan, gathered, msgspec.structs.replace(pack, trace=trace), record)

    def _record(
        self,
        ws: Workspace,
        plan: _Plan,
        gathered: _Gathered,
        checked: ContextPack,
        curator: CuratorTrace | None,
    ) -> ContextPack:
        pack = msgspec.structs.replace(checked, call_id=gathered.call_id, revision=plan.revision)
        if plan.sid is not None and not plan.incognito and not plan.read_only:
            items, memory_bytes = _manifest(pack)
            try:
                ws.ledger.record_manifest(
                    plan.sid,
                    pack.call_id,
                    items,
                    memory_bytes=memory_bytes,
                    since=gathered.since,
                    curator=msgspec.json.encode(curator) if curator is not None else None,
                )
            except IOFailure as exc:
                if not unrecorded.disk_full(exc):
                    raise
                # Served all the same (makad.service.unrecorded): a later pack that does not
                # know this one showed an entry shows it again.
                warning = unrecorded.not_recorded(unrecorded.PACK_NOT_RECORDED)
                pack = msgspec.structs.replace(pack, warnings=[*pack.warnings, warning])
        return pack

    def _dense(
        self, ws: Workspace, plan: _Plan, ceilings: dict[str, int] | None
    ) -> Future[Dense | None] | None:
        """The semantic channel's search for the query (its vector, each memory level's
        entries nearest it, and the events nearest it when the call recalls history), under
        way on the channel's threads, when the channel is ready and the ranking uses it."""
        semantic = self._ctx.semantic
        if not semantic.ready or not plan.query or plan.pool != "ranked":
            return None
        levels: list[tuple[Workspace, Mapping[str, Entry]]] = []
        if plan.snapshot is not None:
            levels.append((ws, plan.snapshot.by_id))
            if plan.user is not None:
                levels.append((plan.user.ws, plan.user.view.by_id))
        return semantic.search_soon(ws, plan.query, ceilings, plan.recall, levels)

    def _nearest(
        self, by_id: dict[str, Entry], entries: list[Entry], cosines: MemoryCosines | None
    ) -> tuple[list[Entry], dict[str, float], list[tuple[str, float]]]:
        """``entries`` and the level's entries nearest the query after them, with their
        cosines; and the level's entries nearest the query whatever their cosine, with it
        (``makad.core.semantic.memory_nearest`` over the channel's ``cosines``)."""
        if cosines is None:
            return entries, {}, []
        found, near = cosines.nearest(len(entries))
        chosen = {entry.id: entry for entry in entries}
        for entry_id, _ in found:
            chosen.setdefault(entry_id, by_id[entry_id])
        return list(chosen.values()), dict(found), near

    def _gather(self, ws: Workspace, plan: _Plan, source: SessionStore | None) -> _Gathered:
        sid = plan.sid
        checkpoint: Checkpoint | None = None
        history: list[Event] = []
        live_tokens: int | None = None
        last_seq = 0
        working_state = None
        if sid is not None and source is not None:
            # The checkpoint first: one committed meanwhile (with the appends before it)
            # cannot then reach past the last seq read, which would hide its live events.
            checkpoint = source.latest_checkpoint(sid)
            last_seq = source.last_seq(sid)  # raises NotFound for an unknown session
        # Recall sees this session's compacted part only.
        ceiling = {sid: checkpoint.coverage.to_seq if checkpoint else 0} if sid else None
        # The optional semantic channel embeds the query and searches the history's vectors
        # on a thread of its own meanwhile (makad.service.embeddings); None without it.
        dense = self._dense(ws, plan, ceiling)
        if sid is not None and source is not None:
            history, live_tokens = _history_tail(source, sid, checkpoint, last_seq, plan.budget)
            if "working_state" in plan.include:
                working_state = source.get_working_state(sid)
        now = now_ms()
        recall: list[RecallHit] = []
        if plan.recall:
            recall = _recall(ws, plan.query or "", sid, checkpoint, now, plan.pool, plan.budget)
        entries: list[Entry] = []
        bm25: dict[str, float] = {}
        similarity: dict[str, float] = {}
        near: list[tuple[str, float]] = []
        hashes: dict[str, str] = {}
        confidence: dict[str, str] = {}
        overridden: dict[str, str] = {}
        user_from: int | None = None
        fill: list[FillOrder] = []
        if plan.snapshot is not None:
            entries, bm25 = _memory_candidates(ws, plan.snapshot, plan.query, plan.pool)
            found = _done(dense)
            if found is not None:
                entries, similarity, near = self._nearest(plan.snapshot.by_id, entries, found.memory[0])
            hashes = _hashes(plan.snapshot, entries)
            confidence = plan.snapshot.user_confidence
            if plan.pool == "ranked":
                fill.append(_fill(plan.snapshot, plan.snapshot.by_id.values(), confidence, now))
            if plan.user is not None:
                view = plan.user.view
                user_entries, user_bm25 = _user_candidates(plan.user, plan.query, plan.pool)
                if found is not None:
                    user_entries, user_similar, user_near = self._nearest(
                        view.by_id, user_entries, found.memory[1]
                    )
                    similarity = {**similarity, **user_similar}
                    near = sorted([*near, *user_near], key=lambda pair: (-pair[1], pair[0]))
                if user_entries:
                    user_from = len(entries)
                    # The candidates' hashes only: the snapshot's cache grows with every call.
                    hashes = {e.id: hashes[e.id] for e in entries}
                    hashes.update(_level_hashes(view, user_entries))
                    entries = entries + user_entries
                    bm25 = {**bm25, **user_bm25}
                if view.by_id:
                    confidence = {**confidence, **view.confidence}
                    overridden = _overrides(ws, plan.snapshot, view.snapshot)
                    if plan.pool == "ranked":
                        fill.append(_fill(view, view.by_id.values(), view.confidence, now, user_level=True))
        places: dict[str, int] = {}
        if plan.snapshot is not None:
            user_places = plan.user.view.places if plan.user is not None else {}
            own_places = plan.snapshot.places
            places = {e.id: own_places.get(e.id, user_places.get(e.id, 0)) for e in entries}
        found = _done(dense)
        if plan.recall and found is not None:
            recall = self._ctx.semantic.join(ws, recall, found.events, ceiling)
        call_id = _call_id(
            plan.workspace,
            plan.revision,
            sid,
            last_seq,
            plan.budget,
            plan.query,
            plan.include,
            plan.strategy,
            None if plan.user is None else plan.user.revision,
        )
        already_shown: dict[str, str] = {}
        shown_view: ShownView | None = None
        session_bytes = 0
        since = checkpoint.created_at if checkpoint else 0
        if sid is not None and not plan.incognito and plan.snapshot is not None and (entries or fill):
            # With a fill order any entry may be reached: what the session was shown, all of it.
            shown_view = ws.ledger.shown_since(sid, since, call_id)
            already_shown = shown_view.hashes if fill else _among(shown_view.hashes, entries)
            if hashes is plan.snapshot.hashes:
                _shown_hashes(plan.snapshot, shown_view)
            session_bytes = ws.ledger.session_memory_bytes(sid, since, call_id)
        snapshot = plan.snapshot
        lines = _attention_lines(ws, plan, call_id)
        inputs = ContextInputs(
            attention=lines or [],
            attention_reason="later_pack" if lines is None else plan.attention_reason,
            budget_tokens=plan.budget,
            now_ms=now,
            session_id=sid,
            query=plan.query,
            include=plan.include,
            memory_enabled=snapshot is not None,
            memory_entries=entries,
            memory_bm25=bm25,
            memory_similarity=similarity,
            memory_near=[entry_id for entry_id, _ in near],
            memory_fill=fill,
            already_shown=already_shown,
            memory_confidence=confidence,
            memory_places=places,
            memory_hashes=hashes,
            memory_session_bytes=session_bytes,
            memory_skipped=snapshot.skipped if snapshot is not None else None,
            memory_user_from=user_from,
            memory_overridden=overridden,
            working_state=working_state,
            checkpoint=checkpoint,
            history=history,
            live_history_tokens=live_tokens,
            recall_hits=recall,
            limits=self._limits,
        )
        if shown_view is not None and snapshot is not None and len(fill) == 1 and fill[0] is snapshot.fill:
            inputs.memory_fill_shown = _fill_cursor(shown_view, fill[0], snapshot, inputs)
        return _Gathered(inputs, call_id, since)

    async def _user_level(self) -> _UserLevel | None:
        """The user level's entries for this call, when it exists and allows agent reads."""
        try:
            uws = await self._ctx.user_level_if_any()
            if uws is None:
                return None
            revision = await self._ctx.revision(uws)  # first, as build_context's
            settings = await self._ctx.load_settings(uws)
        except IOFailure as exc:
            # A user level whose ledger a full disk keeps from being made: its switches
            # live there, so agents may not read it; the workspace's pack is served.
            if not unrecorded.disk_full(exc):
                raise
            return None
        if not agent_reads(settings):
            return None
        snap = await self._snapshot(uws)
        if snap.skipped is not None:
            return None
        view = uws.state.level_view
        if view is None or view.snapshot is not snap:
            by_id = {key: msgspec.structs.replace(e, id=user_level_id(e.id)) for key, e in snap.by_id.items()}
            prefixed = {user_level_id(key): value for key, value in snap.user_confidence.items()}
            places = {user_level_id(key): at for key, at in snap.places.items()}
            view = LevelView(snap, by_id, prefixed, {}, [by_id[e.id] for e in snap.pinned], places)
            uws.state.level_view = view
        return _UserLevel(uws, view, revision)

    async def _snapshot(self, ws: Workspace, *, pending: bool = False) -> MemorySnapshot:
        """MEMORY.md's snapshot as the file is now (and, with ``pending``, PENDING.md taken
        in as it is now too)."""
        current = await _current_snapshot(ws, pending=pending)
        if current is not None:
            return current
        try:
            async with ws.lock:
                await self._files.refresh(ws, "memory")
                if pending:  # else the attention lines are read against it as last read
                    await self._files.refresh_quietly(ws, "pending")
        except IOFailure as exc:
            return MemorySnapshot(
                None,
                {},
                [],
                skipped=Skipped(
                    source="memory",
                    reason="unreadable",
                    message=f"MEMORY.md could not be read ({exc.message}); no entries were used",
                ),
            )
        if ws.memory.too_large:
            return MemorySnapshot(
                None,
                {},
                [],
                skipped=Skipped(
                    source="memory",
                    reason="safe_mode",
                    message=f"MEMORY.md is {ws.memory.size} bytes, over the "
                    f"{self._ctx.settings.memory_max_bytes}-byte cap: no entries were used "
                    "until it is shrunk",
                ),
            )
        sha = ws.memory.sha256
        snap = ws.state.memory_snapshot
        if (
            snap is not None
            and snap.sha == sha
            and snap.skipped is None
            and snap.index_generation == ws.ledger.index_generation
        ):
            return snap
        sections = [s for s in ws.memory.doc.sections if s.entry.status == "active"]
        dated = entry_dates.dated(ws, [s.entry for s in sections])
        active, indexed = await in_thread(_index_redacted, ws.ledger, dated, self._ctx.identifiers)
        recent = sorted(active, key=lambda e: (-e.updated_at, e.id))
        snap = MemorySnapshot(
            sha=sha,
            by_id={e.id: e for e in active},
            recent=recent,
            user_confidence=user_values(ws.memory.doc),
            index_generation=ws.ledger.index_generation,
            pinned=[e for e in active if is_pinned(e)],
            places={e.id: at for at, e in enumerate(active)},
        )
        if indexed:  # else built again (and indexed) by the next call, once the disk allows
            ws.state.memory_snapshot = snap
        return snap


def _attention_lines(ws: Workspace, plan: _Plan, call_id: str) -> list[tuple[str, AttentionLine]] | None:
    """(worker thread) The stored attention state's lines, when this call may show them:
    asked for, or the session's first pack (its first recorded call, or this one; a retry of
    that call shows what it showed, though the session's own events were derived since);
    None for a later pack of the session."""
    if plan.attention is None:
        return []
    if plan.attention == "first" and plan.sid is not None:
        first = ws.state.first_calls.get(plan.sid)
        if first is None:
            first = attention_store.first_call(ws.ledger, plan.sid) or call_id
            if len(ws.state.first_calls) >= MAX_FIRST_CALLS:
                ws.state.first_calls.clear()  # read again from the ledger when needed
            ws.state.first_calls[plan.sid] = first
        if first != call_id:
            return None
        shown = ws.state.first_lines.get(plan.sid)
        if shown is not None:
            return shown
    state = cached_state(ws)
    lines = [] if state is None else state.lines()
    if plan.attention == "first" and plan.sid is not None:
        if len(ws.state.first_lines) >= MAX_FIRST_CALLS:
            ws.state.first_lines.clear()
        ws.state.first_lines[plan.sid] = lines
    return lines


async def _current_snapshot(ws: Workspace, *, pending: bool) -> MemorySnapshot | None:
    """The snapshot already built, when MEMORY.md on disk is still the version it was built
    from (one ``lstat``, on a worker thread; with ``pending``, PENDING.md's too, in the same
    hop): then no refresh of the file. Otherwise (changed, or a write of the daemon's own
    under way: the loaded text is newer than the snapshot) None, and ``_snapshot``
    refreshes under the workspace's lock."""
    snap = ws.state.memory_snapshot

    def current() -> bool:
        return ws.memory.looks_current(ws.memory_path) and (
            not pending or ws.pending.looks_current(ws.pending_path)
        )

    if not _snapshot_matches(ws, snap) or not await in_thread(current):
        return None
    return snap if ws.state.memory_snapshot is snap and _snapshot_matches(ws, snap) else None


def _snapshot_matches(ws: Workspace, snap: MemorySnapshot | None) -> bool:
    """Whether ``snap`` was built from MEMORY.md as loaded now (no disk access)."""
    return not (
        snap is None
        or snap.skipped is not None
        or ws.memory.too_large
        or snap.sha != ws.memory.sha256
        or snap.index_generation != ws.ledger.index_generation
    )


def _index_redacted(
    ledger: Ledger, entries: list[Entry], identifiers: Identifiers
) -> tuple[list[Entry], bool]:
    """The entries as the agent may see them (a secret the user typed into MEMORY.md is
    redacted; a session id holding one is its stand-in, the id the session is called by),
    indexed for search: the index holds no secret either. And whether they were indexed:
    on a full disk the index stays as it was last written, and a query ranks the entries
    it matches there (the others still fill the room left)."""
    clean = [redact_entry(identifiers.scrub_entry(entry)) for entry in entries]
    try:
        ledger.replace_memory_index(clean)
    except IOFailure as exc:
        if not unrecorded.disk_full(exc):
            raise
        return clean, False
    return clean, True


@dataclass(frozen=True)
class _UserLevel:
    """The user level as one call merges it (``makad.core.levels``)."""

    ws: Workspace
    view: LevelView
    revision: int


@dataclass(frozen=True)
class _Plan:
    """What build_context decided before touching the stores."""

    sid: str | None
    incognito: bool
    include: frozenset[SegmentKind]
    query: str | None
    budget: int
    snapshot: MemorySnapshot | None
    recall: bool
    revision: int
    workspace: str
    strategy: ContextStrategy = "deterministic"
    pool: Pool = "ranked"
    user: _UserLevel | None = None
    # Whether attention may show: "asked" (include names it), "first" (in the session's
    # first pack only), None (never).
    attention: Literal["asked", "first"] | None = None
    # Why it may show or not (``Trace.attention``); "first_pack" until the call is found
    # not to be the session's first.
    attention_reason: AttentionReason | None = None
    # The workspace is incognito: a persistent session is read-only (no manifest).
    read_only: bool = False


def _history_tail(
    source: SessionStore, sid: str, checkpoint: Checkpoint | None, last: int, budget: int
) -> tuple[list[Event], int | None]:
    """Events after the checkpoint, the newest covering ~2x the budget (or all of them).

    Read newest first in steps sized by what is still missing (at most doubling), each
    step only the events not read yet;
    the second value is None when every live event was read, else a lower bound
    of the live history's size.
    """
    floor = checkpoint.coverage.to_seq if checkpoint else 0
    want = max(budget, 1) * HISTORY_TAIL_FACTOR
    after = last
    step = HISTORY_FIRST_READ
    events: list[Event] = []
    tokens = 0
    while after > floor and tokens < want:
        start = max(floor, after - step)
        older = source.read_events(sid, after_seq=start, limit=after - start)
        events = older + events
        tokens += sum(e.tokens for e in older)
        after = start
        # The next step: about what the events read so far say is missing, a quarter more,
        # and never more than double the last one.
        average = max(tokens / max(len(events), 1), 1.0)
        step = min(step * 2, max(HISTORY_MIN_READ, int((want - tokens) / average * 1.25)))
    if after <= floor:
        return events, None
    # Older events are beyond what could fit; their exact size does not matter.
    return events, tokens + 1


def _memory_candidates(
    ws: Workspace, snap: MemorySnapshot, query: str | None, pool: Pool
) -> tuple[list[Entry], dict[str, float]]:
    """The pinned entries (in file order), then the query's best FTS matches; for the
    recency strategies (pool ``newest``) the most recent entries instead of the matches."""
    bm25: dict[str, float] = {}
    pinned = snap.pinned
    if len(pinned) > MEMORY_PINNED_CANDIDATES:
        now, values = now_ms(), snap.user_confidence
        pinned = heapq.nsmallest(
            MEMORY_PINNED_CANDIDATES,
            pinned,
            key=lambda e: fill_key(e, now, values.get(e.id), snap.places.get(e.id, 0)),
        )
    chosen: dict[str, Entry] = {entry.id: entry for entry in pinned}
    if pool == "newest":
        for entry in snap.recent[:MEMORY_NO_QUERY_CANDIDATES]:
            chosen.setdefault(entry.id, entry)
    elif query:
        for entry_id, score in ws.ledger.search_memory(query, MEMORY_BM25_CANDIDATES):
            found = snap.by_id.get(entry_id)
            if found is not None:
                chosen.setdefault(entry_id, found)
                bm25[entry_id] = -score  # the core expects FTS5's raw (negative) bm25
        _bridged_candidates(ws, snap, query, chosen, bm25)
    return list(chosen.values()), bm25


def _bridged_candidates(
    ws: Workspace, snap: MemorySnapshot, query: str, chosen: dict[str, Entry], bm25: dict[str, float]
) -> None:
    """Add the entries only the bridge's words find (``makad.core.bridge``), each scored
    ``BRIDGED_WEIGHT`` of the best direct match times its share of the best bridged one, so
    it ranks below the direct matches of the same strength."""
    words = bridged_terms(query_words(query))
    room = MEMORY_BM25_CANDIDATES - len(bm25)
    if not words or room <= 0:
        return
    found = [
        (entry_id, score)
        for entry_id, score in ws.ledger.search_memory(query, MEMORY_BM25_CANDIDATES, words=words)
        if entry_id not in bm25 and entry_id in snap.by_id
    ][:room]
    if not found:
        return
    best_bridged = max(score for _, score in found)
    best_direct = max((-raw for raw in bm25.values()), default=1.0)
    if best_bridged <= 0:
        return
    scale = BRIDGED_WEIGHT * best_direct / best_bridged
    for entry_id, score in found:
        chosen.setdefault(entry_id, snap.by_id[entry_id])
        bm25[entry_id] = -score * scale


def _user_candidates(user: _UserLevel, query: str | None, pool: Pool) -> tuple[list[Entry], dict[str, float]]:
    """The user level's candidates, chosen as a workspace's are, under ``@user/`` ids."""
    found, bm25 = _memory_candidates(user.ws, user.view.snapshot, query, pool)
    by_id = user.view.by_id
    return [by_id[e.id] for e in found], {user_level_id(key): score for key, score in bm25.items()}


def _fill(
    holder: MemorySnapshot | LevelView,
    entries: Iterable[Entry],
    confidence: dict[str, str],
    now: int,
    *,
    user_level: bool = False,
) -> FillOrder:
    """The level's entries in fill order, kept on ``holder`` while the order holds (called
    in the worker thread: two calls may both work it out, and either result is right)."""
    order = holder.fill
    if order is None or not order.valid_at(now):
        order = fill_order(entries, now, confidence, user_level=user_level)
        holder.fill = order
    return order


def _level_hashes(view: LevelView, entries: list[Entry]) -> dict[str, str]:
    """The user-level candidates' content hashes, each computed once per snapshot."""
    known = _known_hashes(view.hashes, entries)
    return {entry.id: known[entry.id] for entry in entries}


def _overrides(ws: Workspace, own: MemorySnapshot, user: MemorySnapshot) -> dict[str, str]:
    """The user-level entries the workspace's active entries override, once per pair of
    snapshots (blocking: called in the worker thread)."""
    cached = ws.state.overrides
    if cached is not None and cached.workspace is own and cached.user is user:
        return cached.found
    found = levels.overridden(own.recent, user.recent)
    ws.state.overrides = Overrides(own, user, found)
    return found


def _hashes(snap: MemorySnapshot, entries: list[Entry]) -> dict[str, str]:
    """The candidates' content hashes, each computed once per MEMORY.md version."""
    return _known_hashes(snap.hashes, entries)


def _known_hashes(known: dict[str, str], entries: list[Entry]) -> dict[str, str]:
    """``known`` (a snapshot's cache of content hashes) with the entries' added."""
    for entry in entries:
        if entry.id not in known:
            known[entry.id] = entry_hash(entry)
    return known


def _shown_hashes(snap: MemorySnapshot, view: ShownView) -> None:
    """Adds the hashes of the entries the session was shown to the snapshot's, each computed
    once per MEMORY.md version: the fill compares every one of them with what was shown.
    A view made from one already done for this snapshot only adds the entries it added."""
    refs = view.added if view.hashed is snap else view.hashes
    start = len(MEMORY_PREFIX)
    entries = [entry for ref in refs if (entry := snap.by_id.get(ref[start:])) is not None]
    _known_hashes(snap.hashes, entries)
    view.hashed = snap


@dataclass(frozen=True)
class _FillCursor:
    """How far a fill order runs through entries a session was shown as they are
    (``makad.core.memory_segment.shown_prefix``), noted on the session's shown view."""

    order: FillOrder
    length: int
    until: int | None


def _fill_cursor(view: ShownView, order: FillOrder, snap: MemorySnapshot, inputs: ContextInputs) -> int:
    """The fill order's prefix the session was shown as it is: from the view's note when it
    is about this order and still holds, extended as far as it now goes (the view may have
    added entries), and noted again. The view is never changed once made, so a note about
    it holds while the order does (an entry that expires ends it: ``until``)."""
    cursor = view.cursor
    start = 0
    if (
        isinstance(cursor, _FillCursor)
        and cursor.order is order
        and (cursor.until is None or inputs.now_ms <= cursor.until)
    ):
        start = cursor.length
    known = snap.hashes

    def digest(entry: Entry) -> str:
        found = known.get(entry.id)
        if found is None:
            found = known[entry.id] = entry_hash(entry)
        return found

    length, until = shown_prefix(inputs, order, start, digest)
    before = cursor.until if start and isinstance(cursor, _FillCursor) else None
    if before is not None:
        until = before if until is None else min(until, before)
    view.cursor = _FillCursor(order, length, until)
    return length


def _among(shown: dict[str, str], entries: list[Entry]) -> dict[str, str]:
    """What ``shown`` holds of ``entries``."""
    found: dict[str, str] = {}
    for entry in entries:
        ref = memory_ref(entry.id)
        digest = shown.get(ref)
        if digest is not None:
            found[ref] = digest
    return found


def _done(dense: Future[Dense | None] | None) -> Dense | None:
    """What the semantic channel found (waiting for it), None without it."""
    return None if dense is None else dense.result()


def _recall(
    ws: Workspace,
    query: str,
    sid: str | None,
    checkpoint: Checkpoint | None,
    now: int,
    pool: Pool,
    budget: int,
) -> list[RecallHit]:
    """Events of other sessions and of this session's compacted part: the query's ranked
    hits, or (pool ``newest``) the newest ones covering the budget."""
    max_seq = {sid: checkpoint.coverage.to_seq if checkpoint else 0} if sid else None
    if pool == "newest":
        return recall_source.newest_hits(ws.ledger, budget, max_seq_by_session=max_seq)
    return recall_source.recall_hits(ws.ledger, query, now_ms=now, max_seq_by_session=max_seq)


def _manifest(pack: ContextPack) -> tuple[list[tuple[str, int, str]], int]:
    """Every source the model saw — memory entries (with the hash of the text shown), the
    other segments' sources, then each history message's ref — and the memory's bytes."""
    items: dict[str, tuple[str, int, str]] = {}
    memory_bytes = 0
    for candidate in pack.trace.candidates:
        if candidate.kind == "memory" and candidate.included and candidate.content_hash:
            items[candidate.source_id] = (
                candidate.source_id,
                max(candidate.tokens, 1),
                candidate.content_hash,
            )
            memory_bytes += candidate.bytes
    for segment in pack.segments:
        if segment.kind != "memory":
            for source in segment.source_ids:
                items.setdefault(source, (source, segment.tokens, ""))
    counter = HeuristicCounter()
    for message in pack.messages:
        items.setdefault(message.source_id, (message.source_id, message_tokens(message, counter), ""))
    return list(items.values()), memory_bytes


def _call_id(
    workspace: str,
    revision: int,
    sid: str | None,
    last_seq: int,
    budget: int,
    query: str | None,
    include: frozenset[str],
    name: ContextStrategy = "deterministic",
    user_revision: int | None = None,
) -> str:
    # The deterministic strategy keeps the key it always had (the same call, the same id);
    # a call that merges the user level names its revision too.
    extra: list[object] = [] if name == "deterministic" else [name]
    if user_revision is not None:
        extra.append(["@user", user_revision])
    key = msgspec.json.encode([workspace, revision, sid, last_seq, budget, query, sorted(include), *extra])
    return hashlib.sha256(key).hexdigest()[:24]
