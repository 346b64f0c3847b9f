"""What every domain service shares: worker threads, revisions, notifications, idempotency."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, TypeVar

import anyio
import anyio.to_thread
import msgspec
import structlog

from makad.core.redaction import redact_tree
from makad.errors import Disabled, IncognitoBlocked, InsufficientEvidence, MakadError
from makad.service.identifiers import Identifiers
from makad.service.peer import Peer
from makad.settings import DaemonSettings
from makad.store.ledger.recovery import REVISION_KEY
from makad.store.workspaces import Workspace, WorkspaceRegistry
from makad.wire.base import Warning
from makad.wire.memory import ChangeNotification, Settings

T = TypeVar("T")
R = TypeVar("R")
log = structlog.get_logger("makad.service")

Channel = Literal["memory_changed", "proposals_changed", "settings_changed"]
Cause = Literal["external_edit", "daemon", "settings"]


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run blocking IO (SQLite, files) off the event loop."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs))


async def in_limited_thread(
    limiter: anyio.CapacityLimiter, fn: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """``in_thread`` on at most ``limiter``'s share of the worker threads."""
    return await anyio.to_thread.run_sync(partial(fn, *args, **kwargs), limiter=limiter)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Hooks:
    """Default domain hooks: no evidence gate, nothing to propagate."""

    async def check_consolidation(self, ws: Workspace, consolidates: Any, session_id: str | None) -> None:
        raise InsufficientEvidence("consolidation is not available")

    async def consolidation_queued(self, ws: Workspace, consolidates: Any, proposal_id: str) -> None:
        return None

    async def approved(self, ws: Workspace, items: list[tuple[str, Any]]) -> None:
        return None

    async def rejected(self, ws: Workspace, proposal_ids: list[str]) -> None:
        return None

    async def deleted(self, ws: Workspace, entry_id: str) -> None:
        return None

    async def session_closed(self, ws: Workspace, session_id: str) -> None:
        return None


@dataclass
class Context:
    """Dependencies shared by the domain services."""

    settings: DaemonSettings
    registry: WorkspaceRegistry
    # Called whenever a workspace is used (the watcher starts watching it).
    on_access: Callable[[Workspace], None] = lambda ws: None
    # Run once per workspace, under its lock, before its first use (crash recovery).
    recovery: list[Callable[[Workspace], Awaitable[None]]] = field(default_factory=list)
    # Domain hooks other services plug in (episodes and evidence, incognito sessions).
    hooks: Hooks = field(default_factory=lambda: Hooks())
    # Stand-ins for client-chosen identifiers that hold a secret (keyed per data dir).
    identifiers: Identifiers = field(default_factory=lambda: Identifiers(os.urandom(32)))

    async def workspace(self, raw: str) -> Workspace:
        ws = await self.registry.get(raw)
        if ws.extra.get("settled") != ws.ledger.generation:
            await self._settle(ws)
        self.on_access(ws)
        return ws

    async def _settle(self, ws: Workspace) -> None:
        """Once per workspace, and again after each ledger reset: crash recovery (first
        time), then, when the workspace replaced another or its ledger started over,
        forget what was cached from the old ledger and move the revision past the old one
        (a settings change: the privacy switches are back at their defaults)."""
        async with ws.lock:
            settled = ws.extra.get("settled")
            generation = ws.ledger.generation
            if settled == generation:
                return
            if settled is None:
                await self._recover(ws)
            if settled is not None or generation or ws.revision_floor:
                ws.extra.pop("settings", None)
                ws.extra.pop("memory_snapshot", None)
                floor = max([ws.revision_floor, *(r.previous_revision or 0 for r in ws.ledger.resets)])
                ws.revision = max(await self.revision(ws), floor)
                for notice in ws.warnings():
                    log.warning("workspace_notice", workspace_id=ws.id, kind=notice.kind)
                await self.bump(ws, "settings_changed", "settings")
            ws.extra["settled"] = generation

    async def _recover(self, ws: Workspace) -> None:
        for recover in self.recovery:
            try:
                await recover(ws)
            except MakadError:
                raise  # e.g. the disk: tried again at the next call
            except Exception as exc:  # unreadable leftovers must not lock the workspace for good
                log.warning("recovery_failed", workspace_id=ws.id, error=type(exc).__name__)

    def incognito_sessions(self, ws: Workspace) -> set[str]:
        """Ids of this workspace's incognito sessions (kept in memory only)."""
        found = ws.extra.setdefault("incognito_sessions", set())
        assert isinstance(found, set)
        return found

    async def check_consolidation(self, ws: Workspace, consolidates: Any, session_id: str | None) -> None:
        await self.hooks.check_consolidation(ws, consolidates, session_id)

    async def consolidation_queued(self, ws: Workspace, consolidates: Any, proposal_id: str) -> None:
        await self.hooks.consolidation_queued(ws, consolidates, proposal_id)

    async def approved(self, ws: Workspace, items: list[tuple[str, Any]]) -> None:
        await self.hooks.approved(ws, items)

    async def rejected(self, ws: Workspace, proposal_ids: list[str]) -> None:
        await self.hooks.rejected(ws, proposal_ids)

    # --- settings -------------------------------------------------------------

    async def load_settings(self, ws: Workspace) -> Settings:
        cached = ws.extra.get("settings")
        if isinstance(cached, Settings):
            return cached
        raw = await in_thread(ws.ledger.get_settings_json)
        fields = {k: v for k, v in raw.items() if not k.startswith("__")}
        try:
            settings = msgspec.convert(fields, Settings)
        except msgspec.ValidationError:
            log.warning("settings_unreadable", workspace_id=ws.id)
            settings = Settings()
        settings = derive(settings)
        ws.extra["settings"] = settings
        revision = raw.get(REVISION_KEY)
        if ws.revision is None:
            ws.revision = revision if isinstance(revision, int) else 0
        return settings

    async def store_settings(self, ws: Workspace, settings: Settings) -> Settings:
        settings = derive(settings)
        values = msgspec.to_builtins(settings)
        values.pop("extractToolEffective", None)
        await in_thread(ws.ledger.put_settings_json, values)
        ws.extra["settings"] = settings
        return settings

    async def require_writable(self, ws: Workspace) -> Settings:
        """The settings, or the error that forbids any memory write."""
        settings = await self.load_settings(ws)
        if not settings.enabled:
            raise Disabled("memory is disabled for this workspace")
        if settings.incognito:
            raise IncognitoBlocked("incognito is on: nothing is written")
        return settings

    # --- revisions and notifications -----------------------------------------------

    async def revision(self, ws: Workspace) -> int:
        if ws.revision is None:
            await self.load_settings(ws)
        assert ws.revision is not None
        return ws.revision

    async def bump(
        self,
        ws: Workspace,
        channel: Channel,
        cause: Cause,
        *,
        reapplied: list[str] | None = None,
        returned: list[str] | None = None,
    ) -> int:
        """Advance the workspace revision (persisted) and notify subscribers.

        ``reapplied`` and ``returned``: what the daemon did about a save that lacked
        entries (``makad.core.save_merge``). Notifying only queues on each subscriber's
        connection: a subscriber that stops reading never holds up this write (callers
        may hold the workspace lock)."""
        revision = await self.revision(ws) + 1
        await in_thread(ws.ledger.put_settings_json, {REVISION_KEY: revision})
        ws.revision = revision
        note = ChangeNotification(
            workspace=str(ws.path),
            revision=revision,
            cause=cause,
            reapplied=reapplied or [],
            returned=returned or [],
        )
        for peer in list(ws.subscribers):
            _notify(peer, channel, note, ws.id)
        return revision

    def subscribe(self, ws: Workspace, peer: Peer) -> None:
        peer.subscriptions.add(ws.id)
        if peer in ws.subscribers:
            return
        ws.subscribers.add(peer)
        hooked: set[int] = ws.extra.setdefault("close_hooked", set())
        if peer.id not in hooked:  # once per connection, however often it resubscribes
            hooked.add(peer.id)

            def forget(closed: Any) -> None:
                ws.subscribers.discard(closed)
                hooked.discard(peer.id)

            peer.on_close(forget)

    def unsubscribe(self, ws: Workspace, peer: Peer) -> None:
        ws.subscribers.discard(peer)
        peer.subscriptions.discard(ws.id)

    # --- idempotency -------------------------------------------------------------------

    async def idempotent(
        self,
        ws: Workspace,
        request_id: str | None,
        method: str,
        result_type: type[R],
        run: Callable[[], Awaitable[R]],
    ) -> R:
        """Run once per requestId: a retry gets the first result back."""
        if request_id is None:
            return await run()
        key = f"{method}:{request_id}"
        stored = await in_thread(ws.ledger.get_request_result, key)
        if stored is not None:
            return msgspec.json.decode(stored.result, type=result_type)
        result = await run()
        # Stored redacted: a result may quote MEMORY.md, where the user may have typed a secret.
        stored_text = msgspec.json.encode(redact_tree(msgspec.to_builtins(result)))
        await in_thread(ws.ledger.put_request_result, key, method, stored_text)
        return result


def workspace_warnings(ws: Workspace) -> list[Warning]:
    return [Warning(kind=notice.kind, message=notice.message) for notice in ws.warnings()]


def derive(settings: Settings) -> Settings:
    effective = settings.extract_tool_enabled and settings.agent_read_enabled
    if settings.extract_tool_effective == effective:
        return settings
    return msgspec.structs.replace(settings, extract_tool_effective=effective)


def _notify(peer: Peer, channel: Channel, note: ChangeNotification, workspace_id: str) -> None:
    try:
        peer.notify(channel, note, group=workspace_id)
    except Exception:  # a broken subscriber must not fail the write that notified it
        log.warning("notify_failed", channel=channel, exc_info=True)
