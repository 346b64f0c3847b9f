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

from makad.core.levels import USER_LEVEL
from makad.core.peer import Peer
from makad.core.redaction import redact_tree
from makad.core.switches import derive
from makad.errors import Conflict, Disabled, IncognitoBlocked, InvalidParams, IOFailure, MakadError
from makad.faults import Faults
from makad.service.embeddings import SemanticChannel
from makad.service.identifiers import Identifiers
from makad.service.written_files import note_revision
from makad.settings import DaemonSettings
from makad.store.ledger.records import RequestRecord
from makad.store.ledger.recovery import FILE_HASH_KEYS, REVISION_KEY
from makad.store.workspaces import Workspace, WorkspaceRegistry, short_hash
from makad.wire.base import Handler, Warning
from makad.wire.memory import ChangeNotification, Settings

T = TypeVar("T")
R = TypeVar("R")
log = structlog.get_logger("makad.service")

Channel = Literal["memory_changed", "proposals_changed", "settings_changed"]
Cause = Literal["external_edit", "daemon", "settings"]


def handlers_of(service: object, names: str) -> dict[str, Handler]:
    """A service's RPC handlers: each method named in ``names`` (space-separated) under
    its own name, which is the RPC method's."""
    return {name: getattr(service, name) for name in names.split()}


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


async def _nothing_to_wait_for() -> None:
    return None


@dataclass
class WorkspaceAccess:
    """What the domain services share to reach a workspace: open and settle it, its
    settings, revisions, notifications and idempotency (not build_context's context)."""

    settings: DaemonSettings
    registry: WorkspaceRegistry
    # Called whenever a workspace is used (the watcher starts watching it).
    on_access: Callable[[Workspace], None] = lambda ws: None
    # Awaited before a workspace is used: the request-only libraries are loaded (makad.warmup).
    ready: Callable[[], Awaitable[None]] = field(default=_nothing_to_wait_for)
    # Run once per workspace, under its lock, before its first use (crash recovery).
    recovery: list[Callable[[Workspace], Awaitable[None]]] = field(default_factory=list)
    # The test-armed failure points (inert in a real run: makad.faults).
    faults: Faults = field(default_factory=Faults)
    # Stand-ins for client-chosen identifiers that hold a secret (keyed per data dir).
    identifiers: Identifiers = field(default_factory=lambda: Identifiers(os.urandom(32)))
    # The optional semantic channel (off unless a model is configured: makad.service.embeddings).
    semantic: SemanticChannel = field(default_factory=lambda: SemanticChannel(None))
    # Called (on the loop) after each revision bump: memory, PENDING.md or settings changed.
    on_change: list[Callable[[Workspace], None]] = field(default_factory=list)

    # Set once ``ready`` has returned: later calls skip it (every request comes here).
    _ready: bool = field(default=False, init=False)
    # The requestIds being run now, by workspace: a copy of one waits for it (``idempotent``).
    _in_flight: dict[tuple[str, str], _InFlight] = field(default_factory=dict, init=False)

    async def workspace_at_hand(self, raw: str, also: Callable[[Workspace], T]) -> tuple[Workspace, T] | None:
        """``workspace(raw)`` with ``also(workspace)`` run in the spelling check's worker-thread
        hop, when the spelling is known and the workspace ready and settled; else None (then
        ``workspace``): a cheap read's stats and the check in one hop."""
        if not self._ready:
            return None
        found = await self.registry.known_and(raw, also)
        if found is None or found[0].state.settled != found[0].ledger.generation:
            return None
        self._use(found[0])
        return found

    def adopt_at_hand(self, ws: Workspace) -> bool:
        """Whether ``ws``, which ``registry.known_now`` found on a worker thread, can be used
        as it is (the daemon ready, the workspace settled), as ``workspace_at_hand`` would."""
        if not self._ready or ws.state.settled != ws.ledger.generation:
            return False
        self._use(ws)
        return True

    async def workspace(self, raw: str) -> Workspace:
        ws = await self.registry.known(raw)
        before = None
        if ws is None:
            before = self.registry.named(raw)
            ws = await self.registry.get(raw)
        if not self._ready:
            await self.ready()
            self._ready = True
        if ws.state.settled != ws.ledger.generation:
            await self._settle(ws)
        if before is not None and before.path != ws.path:
            await self._follow_spelling(raw, before, ws)
        self._use(ws)
        return ws

    def _use(self, ws: Workspace) -> None:
        """A call is using ``ws``: the registry holds it again if it had let go of it, and
        it counts as used now (``makad.service.idle_workspaces``)."""
        self.registry.keep(ws)
        self.on_access(ws)

    async def _follow_spelling(self, raw: str, before: Workspace, now: Workspace) -> None:
        """``raw`` names another folder than at its last call (a symlink repointed, the user
        level's folder changed): who subscribed under that name follows it to the folder it
        names now, and hears of the change (settings_changed, with that folder's revision:
        revisions are unique across workspaces, so a client comparing them sees a change)."""
        moved: dict[Peer, set[str]] = {}
        for peer, names in list(before.subscribers.items()):
            if raw not in names:
                continue
            names.discard(raw)
            if not names:
                self.unsubscribe(before, peer)
            self.subscribe(now, peer, raw)
            moved[peer] = {raw}
        if moved:
            revision = await self.revision(now)
            self.notify_subscribers(now, "settings_changed", revision, "settings", only=moved)

    async def session_workspace(self, raw: str) -> Workspace:
        """A workspace that can hold sessions: any but the user level."""
        ws = await self.workspace(raw)
        if ws.level == "user":
            raise InvalidParams(
                f'"{USER_LEVEL}" holds the user-level memory and has no sessions: sessions, history '
                'and context belong to a workspace (propose with scope "global" from there)',
                path="$.workspace",
            )
        return ws

    async def user_level(self) -> Workspace:
        """The user-level memory (workspace "@user")."""
        return await self.workspace(USER_LEVEL)

    async def user_level_if_any(self) -> Workspace | None:
        """The user level, unless it was never used (its folder does not exist yet): a
        read never makes it."""
        if not self.registry.user_level_known() and not await in_thread(self.registry.user_dir.is_dir):
            return None
        return await self.user_level()

    async def _settle(self, ws: Workspace) -> None:
        """Once per workspace, and again after each ledger reset: crash recovery (first
        time), then, when the workspace replaced another (or the user level's folder
        changed) or its ledger started over, forget what was cached from the old ledger and
        record a new revision (a settings change: the privacy switches are back at their
        defaults; the revision clock puts it past every revision handed out)."""
        async with ws.lock:
            settled = ws.state.settled
            generation = ws.ledger.generation
            if settled == generation:
                return
            if settled is None:
                await self._recover(ws)
            if settled is not None or generation or ws.notices:
                ws.state.forget_ledger_caches()
                for notice in ws.warnings():
                    log.warning("workspace_notice", workspace_id=ws.id, kind=notice.kind)
                await self.bump(ws, "settings_changed", "settings")
            ws.state.settled = generation

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
        return ws.state.incognito_sessions

    # --- settings -------------------------------------------------------------

    async def load_settings(self, ws: Workspace) -> Settings:
        cached = ws.state.settings
        if cached is not None:
            return cached
        raw = await in_thread(ws.ledger.get_settings_json)
        fields = {k: v for k, v in raw.items() if not k.startswith("__")}
        try:
            settings = msgspec.convert(fields, Settings)
        except msgspec.ValidationError:
            log.warning("settings_unreadable", workspace_id=ws.id)
            settings = Settings()
        settings = derive(settings)
        if ws.revision is None:
            if ws.hashes_unwatched is None:
                ws.hashes_unwatched = stored_file_hashes(raw)
            stored = raw.get(REVISION_KEY)
            revision = await self._adopt_revision(stored)
            if ws.revision is None:  # (a call that loaded them meanwhile set it first)
                ws.revision = revision
                if revision != stored:
                    await self._keep_revision(ws, stored, revision)
        # Cached only once the revision is known (``revision`` relies on it), and never
        # over settings a call stored while this one waited.
        if ws.state.settings is None:
            ws.state.settings = settings
        return ws.state.settings

    async def _adopt_revision(self, stored: object) -> int:
        """The revision a workspace opens with: the one it stored, when the revision clock
        issued it; else (never written, or stored before the clock) a new one (no two
        workspaces share a revision), which ``_keep_revision`` stores. Opening is a read: on
        a full disk the new one is handed out once the wall clock covers it
        (``RevisionClock.reserve_or_cover``)."""
        clock = self.registry.clock
        if clock.issued(stored):
            assert isinstance(stored, int)
            clock.observe(stored)
            return stored
        revision = clock.next_after(None)
        if not clock.reserved(revision):
            await in_thread(clock.reserve_or_cover, revision)
        return revision

    async def _keep_revision(self, ws: Workspace, stored: object, revision: int) -> None:
        """Store the revision a workspace was given in place of ``stored``, so that a restart
        with nothing changed hands out the same one (a conditional read stays notModified,
        an ``expectedRevision`` still matches, and a restart on a full disk needs no new
        one). Only while the ledger still holds ``stored`` (a change that stored a later one
        meanwhile stands). For a folder not bound yet (no ``memory/``: a read creates
        nothing in the user's folder), and when the ledger cannot be written now (a full
        disk), it is stored with the ledger's next write, whatever that is (a session
        opened, an event appended); kept in memory until then."""
        if ws.identity is not None:
            try:
                await in_thread(ws.ledger.put_setting_if, REVISION_KEY, stored, revision)
                return
            except IOFailure:
                log.warning("revision_not_kept", workspace_id=ws.id)
        ws.ledger.put_setting_if_with_next_write(REVISION_KEY, stored, revision)

    async def store_settings(self, ws: Workspace, settings: Settings) -> Settings:
        settings = derive(settings)
        values = msgspec.to_builtins(settings)
        values.pop("extractToolEffective", None)
        await in_thread(ws.ledger.put_settings_json, values)
        ws.state.settings = settings
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
        may hold the workspace lock).

        The change it counts has happened (a file written, settings stored, a user's save
        read): when the ledger then fails to store the revision, the revision moves on all
        the same, and the failure is raised after — else a client polling with
        ``ifRevision`` would be told nothing changed. The ledger stores it with its next
        write. On a full disk the clock cannot reserve it either: it is used once the wall
        clock covers it (``RevisionClock.reserve_or_cover``), else that failure is raised
        and the revision stays."""
        clock = self.registry.clock
        revision = clock.next_after(await self.revision(ws))
        # The files as this revision knows them, so the next open can tell a save made
        # while nothing watched them (``stored_file_hashes``).
        values: dict[str, object] = {REVISION_KEY: revision}
        for name, tracked in (("memory", ws.memory), ("pending", ws.pending)):
            if tracked.loaded:
                values[FILE_HASH_KEYS[name]] = short_hash(tracked.sha256)

        def store() -> MakadError | None:
            clock.reserve_or_cover(revision)  # its failure is raised: the value must not be used
            try:
                ws.ledger.put_settings_json(values)
            except MakadError as exc:
                ws.ledger.put_settings_with_next_write(values)
                return exc
            return None

        unstored = await in_thread(store)
        ws.revision = revision
        note_revision(revision)
        self.changed(ws)
        if ws.subscribers:
            self.notify_subscribers(
                ws, channel, revision, cause, reapplied=reapplied or [], returned=returned or []
            )
        if unstored is not None:
            raise unstored
        return revision

    def changed(self, ws: Workspace) -> None:
        """Tell the ``on_change`` listeners that something derived from ``ws`` is out of date."""
        for listener in self.on_change:
            listener(ws)

    def notify_subscribers(
        self,
        ws: Workspace,
        channel: Channel,
        revision: int,
        cause: Cause,
        *,
        reapplied: list[str] | None = None,
        returned: list[str] | None = None,
        only: dict[Peer, set[str]] | None = None,
    ) -> None:
        """Tell each subscriber (or those of ``only``), under each name it subscribed with."""
        notes: dict[str, ChangeNotification] = {}
        for peer, names in list((ws.subscribers if only is None else only).items()):
            for name in list(names):
                note = notes.get(name)
                if note is None:
                    note = notes[name] = ChangeNotification(
                        workspace=name,
                        revision=revision,
                        cause=cause,
                        reapplied=reapplied or [],
                        returned=returned or [],
                    )
                _notify(peer, channel, note, (ws.id, name))

    def subscribe(self, ws: Workspace, peer: Peer, name: str) -> None:
        """Follow ``ws`` as ``name`` (the spelling the client used: its notifications carry
        it, so they match the subscription whatever the client called the workspace)."""
        peer.subscriptions.add(ws.id)
        names = ws.subscribers.get(peer)
        if names is not None:
            names.add(name)
            return
        ws.subscribers[peer] = {name}
        hooked = ws.state.close_hooked
        if peer.id not in hooked:  # once per connection, however often it resubscribes
            hooked.add(peer.id)

            def forget(closed: Any) -> None:
                ws.subscribers.pop(closed, None)
                hooked.discard(peer.id)

            peer.on_close(forget)

    def unsubscribe(self, ws: Workspace, peer: Peer) -> None:
        """Stop following ``ws``, under every name the connection subscribed with."""
        ws.subscribers.pop(peer, None)
        peer.subscriptions.discard(ws.id)

    # --- idempotency -------------------------------------------------------------------

    async def idempotent(
        self,
        ws: Workspace,
        request_id: str | None,
        method: str,
        result_type: type[R],
        run: Callable[[Request], Awaitable[R]],
    ) -> R:
        """Run once per requestId: a retry gets the first result back.

        ``run`` hands ``request.record(result)`` to the ledger write that ends its effect,
        so the record commits in that write's transaction: a crash leaves both or
        neither. A call whose answer took no write of its own (a duplicate, a refusal
        from what is recorded) has its record stored alone after it. Effects on
        MEMORY.md or PENDING.md cannot share a SQLite transaction: those calls record
        an intent before the file write, and a retry finishes from the intent.
        (Appends, working states and episodes replay inside the ledger the same way,
        keyed by their requestId.)
        """
        request = Request(None if request_id is None else f"{method}:{request_id}", method)
        if request.key is None:
            return await run(request)
        # A retry can come while the first attempt still runs (its client timed out): it
        # waits for that attempt and is answered from its record, never runs beside it.
        key = (ws.id, request.key)
        flight = self._in_flight.get(key)
        if flight is None:
            flight = self._in_flight[key] = _InFlight()
        flight.calls += 1
        try:
            async with flight.lock:
                return await self._once(ws, request, result_type, run)
        finally:
            flight.calls -= 1
            if not flight.calls:
                del self._in_flight[key]

    async def _once(
        self, ws: Workspace, request: Request, result_type: type[R], run: Callable[[Request], Awaitable[R]]
    ) -> R:
        """``idempotent``'s body, for one requestId at a time."""
        assert request.key is not None
        stored = await in_thread(ws.ledger.get_request_result, request.key)
        if stored is not None:
            return msgspec.json.decode(stored.result, type=result_type)
        try:
            result = await run(request)
        except Conflict as exc:
            if exc.details.get("reason") != "duplicate":
                raise
            # A call with the same requestId committed first, in the same moment: its answer.
            stored = await in_thread(ws.ledger.get_request_result, request.key)
            if stored is None:
                raise
            return msgspec.json.decode(stored.result, type=result_type)
        if not request.done:
            await in_thread(ws.ledger.put_request_result, request.key, request.method, request.encode(result))
        return result


@dataclass
class _InFlight:
    """One requestId being run: its copies queue on ``lock``; ``calls`` counts them all."""

    lock: anyio.Lock = field(default_factory=anyio.Lock)
    calls: int = 0


@dataclass
class Request:
    """One call's idempotency record (``WorkspaceAccess.idempotent``); ``key`` None: no requestId."""

    key: str | None
    method: str
    done: bool = False

    def encode(self, result: object) -> bytes:
        # Stored redacted: a result may quote MEMORY.md, where the user may have typed a secret.
        return msgspec.json.encode(redact_tree(msgspec.to_builtins(result)))

    def record(self, result: object) -> RequestRecord | None:
        """The record to commit with the write that ends the call's effect."""
        if self.key is None:
            return None
        self.done = True
        return RequestRecord(request_id=self.key, method=self.method, result=self.encode(result))

    def forgo(self) -> None:
        """This call leaves no record (an incognito session's: nothing of it is kept)."""
        self.done = True


def workspace_warnings(ws: Workspace) -> list[Warning]:
    return [Warning(kind=notice.kind, message=notice.message) for notice in ws.warnings()]


def _notify(peer: Peer, channel: Channel, note: ChangeNotification, group: tuple[str, str]) -> None:
    try:
        peer.notify(channel, note, group=group)
    except Exception:  # a broken subscriber must not fail the write that notified it
        log.warning("notify_failed", channel=channel, exc_info=True)


def stored_file_hashes(raw: dict[str, object]) -> dict[str, int | None] | None:
    """The memory files' hashes stored with a workspace's revision (``bump``), or None."""
    found: dict[str, int | None] = {}
    for name, key in FILE_HASH_KEYS.items():
        if key in raw:
            value = raw[key]
            if value is None or (isinstance(value, int) and not isinstance(value, bool)):
                found[name] = value
    return found or None
