"""Keeps each session's derived notes (``makad.core.session_notes``) up to date.

The trigger costs an append almost nothing: ``appended`` adds the batch's size
to a per-session running count (the events' ``tokens`` when given, else a
quarter of their characters — no text is scanned) and, only when the count
crosses the session's next threshold (10,000 tokens, then every 5,000), queues
the session for the worker. The first append to a session after the daemon
starts queues it once, so the worker can learn where it stands.

The worker (one task, ``start``) takes queued sessions one at a time. In a
worker thread it reads the events the notes have not read yet, gathers them,
and when an update is due writes the derived sections into the working state
with compare-and-swap: a client's own section is never overwritten, and a
client write that races ours wins (we re-read and try again). What it gathered
is kept in the ledger (``session_notes``), so the next update reads only new
events and compaction changes nothing: the notes live in the working state,
which compaction keeps. Incognito sessions are handled the same way in memory
only; while the workspace is incognito persistent sessions are not written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import msgspec
import structlog
from anyio.abc import TaskGroup

from makad.core import session_notes as notes
from makad.core.types import EventInput, WorkingState
from makad.errors import Conflict, MakadError
from makad.service.common import WorkspaceAccess, in_thread
from makad.service.sessions import Sessions
from makad.store.session_store import SessionStore
from makad.store.workspaces import Workspace

log = structlog.get_logger("makad.session_notes")
READ_PAGE = 2_000
WRITE_ATTEMPTS = 3
MAX_TRACKED_SESSIONS = 10_000
_NEVER = 1 << 62


@dataclass(slots=True)
class _Progress:
    tokens: int  # an estimate of the session's size, for the trigger only
    threshold: int  # queue the session when ``tokens`` reaches it


class SessionNotesKeeper:
    def __init__(self, ctx: WorkspaceAccess, sessions: Sessions) -> None:
        self._ctx = ctx
        self._sessions = sessions
        self._progress: dict[tuple[str, str], _Progress] = {}
        self._queued: dict[tuple[str, str], Workspace] = {}
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._idle.set()
        self._started = False

    def start(self, tg: TaskGroup) -> None:
        self._started = True
        tg.start_soon(self._run)

    # --- the append path: arithmetic only ----------------------------------------------

    def appended(self, ws: Workspace, session_id: str, events: Sequence[EventInput]) -> None:
        key = (ws.id, session_id)
        added = sum(e.tokens if e.tokens is not None else len(e.text) // 4 + 1 for e in events)
        progress = self._progress.get(key)
        if progress is None:
            if len(self._progress) >= MAX_TRACKED_SESSIONS:
                self._progress.clear()
            self._progress[key] = _Progress(added, _NEVER)  # the worker sets the threshold
            self._queue(key, ws)
            return
        progress.tokens += added
        if progress.tokens >= progress.threshold:
            progress.threshold = _NEVER
            self._queue(key, ws)

    def _queue(self, key: tuple[str, str], ws: Workspace) -> None:
        if not self._started:
            return
        self._queued[key] = ws
        self._idle = anyio.Event() if self._idle.is_set() else self._idle
        self._wake.set()

    def queued(self, ws: Workspace) -> bool:
        """Whether a session of ``ws`` waits for its notes to be updated."""
        return any(key[0] == ws.id for key in self._queued)

    async def settled(self) -> None:
        """Wait until every queued session has been handled (tests, shutdown)."""
        await self._idle.wait()

    # --- the worker -----------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._queued:
                key = next(iter(self._queued))
                ws = self._queued.pop(key)
                try:
                    await self.update(ws, key[1])
                except MakadError as exc:  # deleted, closed ledger, incognito…: nothing to do
                    log.info("session_notes_skipped", kind=exc.kind)
                    self._retry_later(key)
                except Exception:
                    log.exception("session_notes_failed")
                    self._retry_later(key)
            self._idle.set()

    def _retry_later(self, key: tuple[str, str]) -> None:
        """After a failed update, try again once the session has grown by another step."""
        progress = self._progress.get(key)
        if progress is not None:
            progress.threshold = progress.tokens + notes.UPDATE_EVERY_TOKENS

    async def update(self, ws: Workspace, session_id: str) -> None:
        """Read what is new in the session; write the notes when an update is due.

        A persistent session's update is two worker-thread calls (read and gather; write
        and save): under a steady stream of appends each hop to a thread is contended
        for the GIL with the appends' group commits."""
        incognito = self._sessions.is_incognito(ws, session_id)
        if not incognito and (await self._ctx.load_settings(ws)).incognito:
            return
        if incognito:
            gathered = self._memory_state(ws).get(session_id, notes.Gathered())
            while True:
                page = await self._sessions.read_events(
                    ws, session_id, after_seq=gathered.last_seq, limit=READ_PAGE
                )
                gathered = await in_thread(notes.gather, gathered, page)
                if len(page) < READ_PAGE:
                    break
            if notes.due(gathered):
                _write_notes(self._sessions.ephemeral(ws), session_id, gathered)
                gathered.rendered_at_tokens = gathered.tokens
            self._memory_state(ws)[session_id] = gathered
        else:
            gathered = await in_thread(_gather_stored, ws, session_id)
            await in_thread(_write_stored, ws, session_id, gathered)
        progress = self._progress.get((ws.id, session_id))
        if progress is not None:
            progress.tokens = max(progress.tokens, gathered.tokens)
            progress.threshold = notes.next_threshold(gathered)

    @staticmethod
    def _memory_state(ws: Workspace) -> dict[str, notes.Gathered]:
        return ws.state.session_notes


def _changed_notes(gathered: notes.Gathered, session_id: str, state: WorkingState) -> dict[str, str]:
    """The derived sections whose text differs from the working state's."""
    writable = notes.sections_to_write(state.notes)
    texts = notes.render(gathered, session_id, state, notes.allowance(state.notes, writable))
    return {s: t for s, t in texts.items() if state.notes.get(s) != t}


def _gather_stored(ws: Workspace, session_id: str) -> notes.Gathered:
    """(worker thread) What the notes gathered so far, with the events since read in."""
    stored = ws.ledger.load_notes_state(session_id)
    gathered = msgspec.json.decode(stored[1], type=notes.Gathered) if stored is not None else notes.Gathered()
    while True:
        page = ws.ledger.read_events(session_id, after_seq=gathered.last_seq, limit=READ_PAGE)
        gathered = notes.gather(gathered, page)
        if len(page) < READ_PAGE:
            return gathered


def _write_notes(store: SessionStore, session_id: str, gathered: notes.Gathered) -> None:
    """The derived sections that changed written, compare-and-swap on the working state
    (a client's write meanwhile wins: derive again)."""
    for _ in range(WRITE_ATTEMPTS):
        state = store.get_working_state(session_id)
        changed = _changed_notes(gathered, session_id, state)
        if not changed:
            return
        try:
            store.set_working_state(session_id, notes=changed, expected_revision=state.revision)
            return
        except Conflict:
            continue


def _write_stored(ws: Workspace, session_id: str, gathered: notes.Gathered) -> None:
    """(worker thread) The notes written when due, then what was gathered saved."""
    if notes.due(gathered):
        _write_notes(ws.ledger, session_id, gathered)
        gathered.rendered_at_tokens = gathered.tokens
    ws.ledger.save_notes_state(session_id, gathered.last_seq, msgspec.json.encode(gathered))
