"""The services behind every method: settings → registry → services → handlers.

``makad.daemon`` listens and answers ``ping``, ``status`` and ``shutdown`` before this
module is loaded (its imports are most of the daemon's start-up), then loads it in a
worker thread and adds every other method; a request for one of them that arrives in
the meantime waits for it (``Dispatcher.defer_rest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from makad import openrpc as openrpc_doc
from makad.core.episodes import Threshold
from makad.faults import Faults
from makad.service import curator
from makad.service.attention import AttentionKeeper
from makad.service.common import WorkspaceAccess
from makad.service.compaction import CompactionService
from makad.service.context import ContextService
from makad.service.embeddings import SemanticChannel
from makad.service.episodes import EpisodeService, Evidence
from makad.service.identifiers import Identifiers, load_or_create_key
from makad.service.idle_workspaces import IdleWorkspaces
from makad.service.imports import ImportService
from makad.service.ledger import LedgerService
from makad.service.memory import MemoryService, MemoryWriter
from makad.service.outside_text import OutsideTextService
from makad.service.proposals import ProposalService
from makad.service.session_notes import SessionNotesKeeper
from makad.service.sessions import Sessions
from makad.service.suggestions import SuggestionService
from makad.service.system import DaemonInfo, SystemService, inject_faults, registry_warnings
from makad.store.ledger.pool import ledger_cap
from makad.store.workspaces import Workspace, WorkspaceRegistry
from makad.warmup import Warmup
from makad.watcher import Watcher
from makad.wire.base import Handler
from makad.wire.catalogue import CATALOGUE

__all__ = ["App", "build_app", "load_or_create_key", "openrpc_document"]


@dataclass
class App:
    """Everything the composition root builds before serving."""

    handlers: dict[str, Handler]
    registry: WorkspaceRegistry
    watcher: Watcher
    notes: SessionNotesKeeper
    faults: Faults
    # The optional semantic channel: started here when a model is configured, stopped by
    # the composition root before the registry closes.
    semantic: SemanticChannel
    attention: AttentionKeeper
    idle: IdleWorkspaces


def openrpc_document() -> dict[str, Any]:
    return openrpc_doc.generate(CATALOGUE)


def build_app(
    info: DaemonInfo,
    system: SystemService | None = None,
    faults: Faults | None = None,
    key: bytes | None = None,
) -> App:
    """Every service and the handler of every method in ``CATALOGUE``. The daemon passes
    what it made before: its ``system`` service (already serving), its ``faults``, and the
    identifier ``key`` it read in a worker thread (else read here)."""
    settings = info.settings
    # The one fault seam: armed by the test environment only (makad.faults).
    if faults is None:
        faults = Faults(
            point=settings.fault_point,
            disk_full=settings.fault_disk_full,
            busy_timeout_ms=settings.fault_busy_timeout_ms,
        )
    registry = WorkspaceRegistry(
        settings.data_dir,
        faults=faults,
        user_dir=settings.user_memory_dir,
        max_open=ledger_cap(settings.max_open_workspaces),
    )
    info.warnings = lambda: registry_warnings(registry)
    semantic = SemanticChannel(settings.embedding_model)
    ctx = WorkspaceAccess(
        settings=settings,
        registry=registry,
        faults=faults,
        identifiers=Identifiers(key if key is not None else load_or_create_key(settings.data_dir)),
        semantic=semantic,
    )
    info.semantic = semantic.status
    semantic.start()
    writer = MemoryWriter(ctx)
    memory = MemoryService(ctx, writer)
    evidence = Evidence(ctx.faults, Threshold())
    proposals = ProposalService(ctx, writer, evidence)
    ctx.recovery.append(memory.clean_temp_files)
    ctx.recovery.append(proposals.recover)
    sessions = Sessions(ctx)
    ctx.recovery.append(sessions.rename_secret_ids)
    notes = SessionNotesKeeper(ctx, sessions)
    attention = AttentionKeeper(ctx, settings.behavior_idle_ms, writer.take_in_saves)
    context = ContextService(ctx, writer, sessions, attention_caught_up=attention.caught_up)
    info.context_paths = context.path_counts
    if settings.curator.configured:
        curator.prepare_in_background()
    compaction = CompactionService(ctx, sessions)
    episodes = EpisodeService(ctx, sessions, proposals, evidence)
    ctx.on_change.append(attention.changed)

    async def closed(ws: Workspace, session_id: str) -> None:
        await episodes.session_closed(ws, session_id)
        await attention.session_closed(ws, session_id)

    watcher = Watcher(memory.ingest, memory.to_ingest, settings.watch_debounce_ms)
    warmup = Warmup()

    def on_access(ws: Workspace) -> None:
        watcher.ensure(ws)
        semantic.touch(ws)

    ctx.on_access = on_access if semantic.enabled else watcher.ensure
    idle = IdleWorkspaces(
        ctx,
        settings.workspace_release_ms,
        busy=[lambda ws: not attention.quiet(ws), notes.queued, semantic.busy],
        released=[watcher.forget, semantic.forget],
    )
    ctx.ready = warmup.ensure  # request-only libraries, once a workspace is in use
    services: list[Any] = [
        system or SystemService(info, openrpc_document),
        memory,
        proposals,
        ImportService(ctx, writer),
        OutsideTextService(ctx, writer),
        context,
        compaction,
        LedgerService(ctx, sessions, notes, on_close=closed, on_delete=attention.session_deleted),
        episodes,
        attention,
        SuggestionService(
            ctx, sessions, writer.take_in_saves, settings.suggestion_cooldown_ms, attention.caught_up
        ),
    ]
    handlers: dict[str, Handler] = {}
    for service in services:
        handlers.update(service.handlers())
    inject_faults(ctx.faults, handlers)
    handlers = ctx.identifiers.wrap(CATALOGUE, handlers)
    return App(
        handlers=handlers,
        registry=registry,
        watcher=watcher,
        notes=notes,
        faults=ctx.faults,
        semantic=semantic,
        attention=attention,
        idle=idle,
    )
