"""Keeps each workspace's behavior records and attention state, off the request path.

One task (``AttentionKeeper.start``) wakes when something changed (a session closed or
deleted, memory, PENDING.md or the settings changed: ``changed``; a burst of changes is
let settle for ``SETTLE_S``) and at least every ``tick`` otherwise. For each open
workspace that allows it (``attentionEnabled`` on, incognito off) and has something for it
(``_wanted``: its ledger written since it was opened, a change reported, sessions an
earlier run left unread, its attention asked for, or looked at before) it:

1. **extracts** the sessions that are closed, or idle for ``idle_ms`` (15 minutes by
   default, ``MAKAD_BEHAVIOR_IDLE_MS``), and have events their records have not read:
   in a worker thread, ``READ_PAGE`` events at a time, each step's records written in
   one transaction with the session's new offset (``attention_store.commit_step``).
   No record is dated after the moment it is written (events a client stamped ahead of
   this machine's clock happened, at the latest, when they were read).
   A kill at any point (fault points ``behaviors_after_read``,
   ``behaviors_before_commit``, ``behaviors_after_commit``) leaves the offset with the
   records it covers: the next run goes on from there, repeating nothing. A session
   closed, or its working state set, after its last segment was recorded (it went idle),
   with no event since, has that segment's records **made again** (``remake``): under
   the same keys, replaced in one transaction together with what they were made from
   (the close, the working state's revision); what is due is read from the ledger, so a
   kill before or after (fault points ``behaviors_before_remake``,
   ``behaviors_after_remake``) is made good by the next run;
2. **derives** the attention state again (``makad.core.attention.derive``) when a
   record was written, an input changed, or the stored state is older than
   ``REFRESH_MS`` (its sections speak of ages), and stores it (fault point
   ``attention_before_commit``).

``build_context`` and ``get_attention`` only read the stored state (cached on
``ws.state``), first taking in a user's save of MEMORY.md or PENDING.md the watcher has not
taken in yet (``take_in``): a proposal deleted by hand no longer waits, text deleted by hand
is never said again, from the moment the save is on disk. Incognito sessions never reach
the ledger, so nothing is derived from them; while the workspace is incognito nothing is
derived at all. ``attentionEnabled`` off drops every record, offset and state
(``attention_store.purge``). ``get_attention``, ``suggest`` and a pack that may show the
state first wait, at most ``CLOSE_WAIT_S``, for the round that takes in the sessions
closed since the keeper last looked (``caught_up``): a host that closes a session and
opens the next at once. A workspace only read so far (any number of them: a daemon that
read 200 folders) costs the keeper nothing, its ledger left closed, until one of those
calls asks for its attention: that round is its first look. One whose ledger held, when it
was opened, sessions an earlier run left unread is looked at at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from makad.core import attention as core
from makad.core import behaviors
from makad.core.entries import is_open
from makad.core.peer import Peer
from makad.core.types import Entry
from makad.errors import IOFailure, MakadError, NotFound
from makad.faults import Faults
from makad.service import unrecorded
from makad.service.common import WorkspaceAccess, in_thread, now_ms
from makad.store import attention_store
from makad.store.workspaces import Workspace
from makad.wire.base import Handler
from makad.wire.context import AttentionResult, GetAttentionParams

log = structlog.get_logger("makad.attention")
READ_PAGE = 500
REFRESH_MS = 3_600_000
DEFAULT_IDLE_MS = 15 * 60_000
MAX_TICK_S = 60.0
# How long a pack that may show the state waits for the round taking in a just-closed
# session (one derivation: a call waiting cuts the settling short); past it, the pack shows
# the state stored.
CLOSE_WAIT_S = 5.0
# How long a change waits before the state is derived again: writes in a burst (an import,
# a tour of add_entry) cost one derivation, not one each.
SETTLE_S = 0.25


TakeIn = Callable[[Workspace], Awaitable[None]]


async def _nothing_to_take_in(ws: Workspace) -> None:
    return None


class AttentionKeeper:
    def __init__(
        self, ctx: WorkspaceAccess, idle_ms: int = DEFAULT_IDLE_MS, take_in: TakeIn = _nothing_to_take_in
    ) -> None:
        self._ctx = ctx
        self._take_in = take_in
        self._idle_ms = max(idle_ms, 0)
        self._tick = min(max(self._idle_ms / 4000, 0.2), MAX_TICK_S)
        self._dirty: set[str] = set()
        # Workspace id → set once the round that takes in the sessions closed so far is over:
        # waiting (``closes``) for a round to begin, then (``closing``) while it runs.
        self._closes: dict[str, anyio.Event] = {}
        self._closing: dict[str, anyio.Event] = {}
        self._wake = anyio.Event()
        self._hurry = anyio.Event()  # a call waits for the round (``caught_up``): settle no more
        self._idle = anyio.Event()
        self._idle.set()
        self._started = False

    def handlers(self) -> dict[str, Handler]:
        return {"get_attention": self.get_attention}

    def start(self, tg: TaskGroup) -> None:
        self._started = True
        tg.start_soon(self._run)

    # --- triggers (on the loop, arithmetic only) -----------------------------------------

    def changed(self, ws: Workspace) -> None:
        """An input of the workspace's attention changed: derive it again soon."""
        self._dirty.add(ws.id)
        if self._started:
            self._idle = anyio.Event() if self._idle.is_set() else self._idle
            self._wake.set()

    async def session_closed(self, ws: Workspace, session_id: str) -> None:
        if self._started and ws.id not in self._closes:
            self._closes[ws.id] = anyio.Event()
        self.changed(ws)

    async def caught_up(self, ws: Workspace, timeout_s: float = CLOSE_WAIT_S) -> None:
        """Wait, at most ``timeout_s``, until the sessions of ``ws`` closed so far are in its
        records and state (at once when none was closed since the keeper last looked). A
        workspace the keeper has not looked at yet is looked at first: what an earlier run
        left unread (its sessions' events, a state due a refresh) is taken in."""
        if self._started and not ws.state.attention_looked and ws.id not in self._closing:
            self._closes.setdefault(ws.id, anyio.Event())
            self.changed(ws)
        done = self._closes.get(ws.id) or self._closing.get(ws.id)
        if done is not None:
            self._hurry.set()
            with anyio.move_on_after(timeout_s):
                await done.wait()

    async def session_deleted(self, ws: Workspace, session_id: str) -> None:
        """The session's records and the state went with it (same transaction)."""
        forget_cached(ws)
        self.changed(ws)

    async def settled(self) -> None:
        """Wait until every change so far has been handled (tests)."""
        await self._idle.wait()

    # --- the worker ------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            with anyio.move_on_after(self._tick):
                await self._wake.wait()
            if self._wake.is_set():  # a burst of writes is one change: let it settle first
                with anyio.move_on_after(SETTLE_S):
                    await self._hurry.wait()
            self._wake = anyio.Event()
            self._hurry = anyio.Event()
            for ws in list(self._ctx.registry.all()):
                dirty = ws.id in self._dirty
                self._dirty.discard(ws.id)
                closes = self._closes.pop(ws.id, None)
                if closes is not None:
                    self._closing[ws.id] = closes
                try:
                    if _wanted(ws, dirty) and (dirty or _due(ws)):
                        await self.process(ws, dirty=dirty)
                except MakadError as exc:
                    log.info("attention_skipped", kind=exc.kind)
                except Exception:
                    log.exception("attention_failed")
                finally:
                    if closes is not None:
                        del self._closing[ws.id]
                        closes.set()
            # A workspace released meanwhile has no round to wait for.
            for gone in set(self._closes) - {ws.id for ws in self._ctx.registry.all()}:
                self._closes.pop(gone).set()
            if not self._dirty:
                self._idle.set()

    def quiet(self, ws: Workspace) -> bool:
        """Whether the keeper has nothing to do for ``ws`` but refresh its stored state
        (which a later call reads, or the keeper derives, as at the daemon's start): no
        change reported, no session waiting to go idle, no write since it last looked (or,
        not looked at yet, none since it was opened)."""
        if ws.id in self._dirty:
            return False
        return ws.state.attention_quiet_writes == ws.ledger.write_count or not _wanted(ws, False)

    async def process(self, ws: Workspace, *, dirty: bool = False) -> None:
        ws.state.attention_looked = True
        ws.state.attention_next_at = None  # set again only when the round below completes
        ws.state.attention_quiet_writes = -1
        writes = ws.ledger.write_count
        if ws.level == "user":
            ws.state.attention_quiet_writes = writes
            return
        settings = await self._ctx.load_settings(ws)
        if not settings.attention_enabled:
            if dirty or ws.state.attention is not None or not ws.state.attention_purged:
                await in_thread(attention_store.purge, ws.ledger)
                forget_cached(ws)
                ws.state.attention_purged = True
            ws.state.attention_quiet_writes = writes
            return
        ws.state.attention_purged = False
        if settings.incognito:
            ws.state.attention_quiet_writes = writes
            return
        now = now_ms()
        idle_before = now - self._idle_ms
        faults = self._ctx.faults
        writes_seen = ws.ledger.write_count  # before reading: a write meanwhile is seen next round
        due = await in_thread(attention_store.due_sessions, ws.ledger, idle_before)
        # ``own``: the write transactions of this round's own (``quiet``)
        wrote, own, finished = await _steps(
            extract, ws, [session_id for session_id, _, _ in due], faults, now
        )
        complete = finished and len(due) < attention_store.DUE_PAGE
        again = await in_thread(attention_store.remakes, ws.ledger)
        wrote_again, own_again, finished = await _steps(remake, ws, again, faults, now)
        wrote, own = wrote or wrote_again, own + own_again
        complete = complete and finished and len(again) < attention_store.DUE_PAGE
        stored = await in_thread(cached_state, ws)
        newest = await in_thread(attention_store.newest_record, ws.ledger)
        stale = (
            stored is None
            or ws.state.attention_unstored
            or now - stored.computed_at >= REFRESH_MS
            or stored.records_upto != newest
        )
        computed_at = now if stored is None else stored.computed_at
        if wrote or dirty or stale:
            bound = ws.identity is not None  # else the state is not stored: nothing written
            state, saved = await self.derive(ws, now)
            computed_at = state.computed_at
            own += 1 if bound and saved else 0  # one transaction
        if complete and not ws.state.attention_unstored:
            await self._sleep_until_due(ws, computed_at + REFRESH_MS, writes_seen, own)

    async def _sleep_until_due(self, ws: Workspace, refresh_at: int, writes_seen: int, own: int) -> None:
        """Leave ``ws`` alone until a session of it goes idle or its state is due a refresh
        at ``refresh_at``, unless its ledger is written or one of its inputs changes first.
        ``own``: the write transactions this round made (the workspace is quiet while no
        other has been made since)."""
        next_at = refresh_at
        idle_from = await in_thread(attention_store.next_idle_ts, ws.ledger)
        if idle_from is not None:
            next_at = min(next_at, idle_from + self._idle_ms)
        ws.state.attention_next_at = next_at
        ws.state.attention_seen_writes = writes_seen
        if idle_from is None:
            ws.state.attention_quiet_writes = writes_seen + own

    async def derive(self, ws: Workspace, now: int) -> tuple[core.AttentionState, bool]:
        """The state derived now, and whether it was stored (not on a full disk: it is then
        kept in memory only, and derived and stored again at the next chance)."""
        pending = [
            core.Pending(proposal_id=s.entry.id, title=s.entry.title, created_at=_created(s.entry))
            for s in ws.pending.doc.sections
            if is_open(s.entry)
        ][:50]
        epoch = ws.state.attention_epoch
        state, stored = await in_thread(_derive_stored, ws, now, pending, self._ctx.faults)
        if ws.state.attention_epoch == epoch:  # else a forget or a retraction came meanwhile
            ws.state.attention = state
            ws.state.attention_loaded = True
            ws.state.attention_unstored = not stored
        return state, stored

    # --- get_attention -------------------------------------------------------------------

    async def get_attention(self, params: GetAttentionParams, peer: Peer) -> AttentionResult:
        ws = await self._ctx.session_workspace(params.workspace)
        settings = await self._ctx.load_settings(ws)
        if not settings.attention_enabled or settings.incognito:
            return AttentionResult(enabled=False, computed_at=0, sections=[])
        await self._take_in(ws)
        await self.caught_up(ws)  # a session closed just before: its records and the state
        state = await in_thread(cached_state, ws)
        stored = not ws.state.attention_unstored
        if state is None or not stored:
            state, stored = await self.derive(ws, now_ms())
            # Derived from PENDING.md as it was when the derivation began: one settled
            # meanwhile no longer waits (as ``cached_state`` reads it).
            state = core.without_settled(state, _open_ids(ws))
        warnings = [] if stored else [unrecorded.not_recorded(unrecorded.ATTENTION_NOT_STORED)]
        return AttentionResult(
            enabled=True, computed_at=state.computed_at, sections=state.sections, warnings=warnings
        )


def _wanted(ws: Workspace, dirty: bool) -> bool:
    """Whether ``ws`` can have something for the keeper: a change reported (``dirty``), its
    ledger written since it was opened (sessions and events go in without a report),
    sessions an earlier run left unread (seen as it was opened), or looked at before. A
    workspace only read has none, and its ledger is not opened for it; one asked for its
    attention is reported changed (``caught_up``)."""
    state = ws.state
    return dirty or state.attention_looked or state.attention_work_left or ws.ledger.write_count > 0


def _due(ws: Workspace) -> bool:
    """Whether the keeper's round must look at ``ws`` though no input was reported changed."""
    next_at = ws.state.attention_next_at
    return next_at is None or ws.ledger.write_count != ws.state.attention_seen_writes or now_ms() >= next_at


def _created(entry: Entry) -> int:
    return entry.created_at or entry.updated_at


def forget_cached(ws: Workspace) -> None:
    ws.state.forget_attention()


def cached_state(ws: Workspace) -> core.AttentionState | None:
    """(worker thread) The stored state, read once and then kept on ``ws.state``, as it
    reads now: a proposal settled since it was derived no longer waits on the user."""
    if ws.state.attention_loaded:
        state = ws.state.attention
    else:
        epoch = ws.state.attention_epoch
        state = attention_store.load_state(ws.ledger)
        if ws.state.attention_epoch == epoch:
            ws.state.attention = state
            ws.state.attention_loaded = True
    return None if state is None else core.without_settled(state, _open_ids(ws))


def _open_ids(ws: Workspace) -> set[str]:
    return {s.entry.id for s in ws.pending.doc.sections if is_open(s.entry)}


def extract(ws: Workspace, session_id: str, faults: Faults, now: int) -> tuple[bool, int]:
    """(worker thread) The session's unread events turned into records, a step at a time
    (see module doc); whether any record was written, and how many write transactions
    committed (one per step, whatever it found)."""
    ledger = ws.ledger
    expected, carry = attention_store.offset(ledger, session_id)
    try:
        info = ledger.get_session(session_id)
    except NotFound:
        return False, 0
    working = ledger.get_working_state(session_id)
    wrote = False
    commits = 0
    while True:
        page = ledger.read_events(session_id, after_seq=expected, limit=READ_PAGE)
        faults.crash("behaviors_after_read")
        closed, carry = behaviors.gather(session_id, carry, page)
        records = [r for c in closed for r in behaviors.records(session_id, c, closed=False, working=None)]
        last_page = len(page) < READ_PAGE
        to_seq = page[-1].seq if page else expected
        # The last segment recorded, made again when the session is closed or its working
        # state set later (``remake``): this step's cut, or none once a later one began.
        last: attention_store.Last | Literal["keep"] | None = (
            None if closed or not carry.empty() else attention_store.KEEP
        )
        if last_page and not carry.empty():
            done = info.closed_at is not None
            records.extend(behaviors.records(session_id, carry, closed=done, working=working))
            last = attention_store.Last(carry, done, working.revision)
            carry = behaviors.continued(carry)
        records = [_not_after(record, now) for record in records]
        faults.crash("behaviors_before_commit")
        stepped = attention_store.commit_step(ledger, session_id, expected, records, to_seq, carry, now, last)
        commits += 1
        if not stepped:
            return wrote, commits
        faults.crash("behaviors_after_commit")
        wrote |= bool(records)
        expected = to_seq
        if last_page:
            return wrote, commits


def remake(ws: Workspace, session_id: str, faults: Faults, now: int) -> tuple[bool, int]:
    """(worker thread) The records of the session's last segment made again, when it was
    closed or its working state set since they were made and no event came after them;
    whether a record changed, and how many write transactions committed."""
    ledger = ws.ledger
    found = attention_store.last_segment(ledger, session_id)
    if found is None:
        return False, 0
    expected, was = found
    try:
        info = ledger.get_session(session_id)
        working = ledger.get_working_state(session_id)
    except NotFound:
        return False, 0
    if info.last_seq != expected:
        return False, 0  # events not read yet: the next extraction reads them first
    # A close speaks for the segment once made: reopening the session takes nothing back.
    done = was.closed or info.closed_at is not None
    if (done, working.revision) == (was.closed, was.revision):
        return False, 0
    records = behaviors.records(session_id, was.carry, closed=done, working=working)
    records = [_not_after(record, now) for record in records]
    faults.crash("behaviors_before_remake")
    made = attention_store.Last(was.carry, done, working.revision)
    changed = attention_store.remake_step(ledger, session_id, expected, was, records, made)
    faults.crash("behaviors_after_remake")
    return changed, 1


async def _steps(
    step: Callable[[Workspace, str, Faults, int], tuple[bool, int]],
    ws: Workspace,
    session_ids: list[str],
    faults: Faults,
    now: int,
) -> tuple[bool, int, bool]:
    """``extract`` or ``remake`` for each session in turn: whether any wrote records, the
    write transactions they made, and whether all ran (False once the disk is full: the
    records wait for space, and the state is derived from those stored)."""
    wrote, commits = False, 0
    for session_id in session_ids:
        try:
            wrote_records, made = await in_thread(step, ws, session_id, faults, now)
        except IOFailure as exc:
            if not unrecorded.disk_full(exc):
                raise
            return wrote, commits, False
        wrote, commits = wrote or wrote_records, commits + made
    return wrote, commits, True


def _not_after(record: behaviors.Behavior, now: int) -> behaviors.Behavior:
    """``record`` with its times no later than ``now``: events a client stamped ahead of
    this machine's clock happened, at the latest, when they were read."""
    if record.ended_at <= now:
        return record
    return msgspec.structs.replace(record, started_at=min(record.started_at, now), ended_at=now)


def _derive_stored(
    ws: Workspace, now: int, pending: list[core.Pending], faults: Faults
) -> tuple[core.AttentionState, bool]:
    """(worker thread) The state derived from what the ledger holds now, stored (in a
    bound folder), and whether it is as stored (not when the disk is full)."""
    ledger = ws.ledger
    records, upto = attention_store.records(ledger)
    rejected = attention_store.rejections(ledger, now - core.COOLDOWN_MS)
    retracted = attention_store.load_retracted(ledger)
    state = core.derive(now, records, pending, rejected, retracted)
    state.records_upto = upto
    faults.crash("attention_before_commit")
    if ws.identity is None:
        # A folder not bound yet (no memory/ there: nothing was ever written to it) holds
        # nothing to derive from, and storing would be its ledger's first write, which
        # binds it: a folder only read would get a memory/ folder. Kept in memory until
        # its first change.
        return attention_store.unstored_state(ledger, state), True
    try:
        return attention_store.save_state(ledger, state), True
    except IOFailure as exc:
        if not unrecorded.disk_full(exc):
            raise
        return attention_store.unstored_state(ledger, state), False


async def retract(ctx: WorkspaceAccess, ws: Workspace, changes: list[tuple[Entry, Entry | None]]) -> None:
    """What deletions (``after`` None) or corrections of memory entries took back, kept as
    digests (``makad.core.attention.retracted_digests``): the attention state, episodes and
    consolidations written afterwards leave it out."""
    digests: set[str] = set()
    for before, after in changes:
        digests |= core.retracted_digests(before.content, after.content if after else "")
        if after is None or after.title != before.title:
            digests |= core.retracted_digests(before.title, after.title if after else "")
    if not digests:
        return
    try:
        await in_thread(attention_store.add_retracted, ws.ledger, digests, now_ms())
    except IOFailure as exc:  # the disk: kept for the ledger's next write
        log.warning("retraction_kept_for_next_write", workspace_id=ws.id, reason=exc.details.get("reason"))
        attention_store.add_retracted_with_next_write(ws.ledger, digests, now_ms())
    ws.state.forget_attention()
    ctx.changed(ws)
