"""The daemon's dates for hand-written entries (``makad.core.entry_dates``), kept in the ledger.

``observe`` runs under the workspace lock each time MEMORY.md is (re-)read and
records first sightings and hand edits (``entry_dates`` in
``makad.store.ledger.pack_state``); the dates are cached on the workspace for
``known_dates``, which build_context and read_state apply.
"""

from __future__ import annotations

import structlog

from makad.core import memory_format as fmt
from makad.core.entry_dates import EntryDates, changes, effective, effective_all
from makad.core.types import Entry
from makad.errors import IOFailure
from makad.service.common import in_thread, now_ms
from makad.store.workspaces import Workspace

log = structlog.get_logger("makad.entry_dates")


async def _known(ws: Workspace) -> dict[str, EntryDates]:
    cached = ws.state.entry_dates
    if cached is not None:
        return cached
    try:
        loaded = await in_thread(ws.ledger.load_entry_dates)
    except IOFailure:
        return {}  # tried again on the next read
    ws.state.entry_dates = loaded
    return loaded


async def observe(ws: Workspace, before: fmt.MemoryDocument, after: fmt.MemoryDocument) -> None:
    """Under ws.lock, after MEMORY.md was (re-)read: record first sightings and hand edits."""
    if before is after:
        return
    known = await _known(ws)
    changed, removed = changes(before, after, known, now_ms())
    if not changed and not removed:
        return
    try:
        await in_thread(ws.ledger.save_entry_dates, changed, removed)
    except IOFailure:  # the dates are a courtesy: a failing ledger must not stop a read
        log.warning("entry_dates_not_saved", count=len(changed))
    known.update(changed)
    for entry_id in removed:
        known.pop(entry_id, None)


def _loaded(ws: Workspace) -> dict[str, EntryDates]:
    """The dates loaded so far (``observe`` loads them with the file)."""
    return ws.state.entry_dates or {}


def dated(ws: Workspace, entries: list[Entry]) -> list[Entry]:
    """The entries with the daemon's dates where their own are missing or older."""
    return effective_all(entries, _loaded(ws))


def dated_entry(ws: Workspace, entry: Entry) -> Entry:
    return effective(entry, _loaded(ws))
