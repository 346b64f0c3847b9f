"""read_state's confidence map, worked out once a day per MEMORY.md version.

Deriving it (``makad.core.confidence``) costs microseconds an entry: for a file of
thousands of entries that is done in a worker thread, and kept until the file or
the day changes (age counts in whole days, so within a day only the moment an
entry passes 90 days or a year is late, by less than a day).
"""

from __future__ import annotations

from makad.core.confidence import DAY_MS, Confidence, derive, user_values
from makad.core.types import Entry
from makad.service.common import in_thread, now_ms
from makad.store.workspace_state import ConfidenceCache
from makad.store.workspaces import Workspace


async def confidence_map(ws: Workspace, entries: list[Entry], archived: bool) -> dict[str, Confidence]:
    """Entry id → confidence for ``entries`` of the current MEMORY.md (``archived``: whether
    they include the archived ones, part of what is cached)."""
    doc, now = ws.memory.doc, now_ms()
    cached = ws.state.confidence
    if (
        cached is not None
        and cached.doc is doc
        and cached.day == now // DAY_MS
        and cached.archived == archived
    ):
        return cached.found

    def work() -> dict[str, Confidence]:
        user_set = user_values(doc)
        return {e.id: derive(e, now, user_set.get(e.id)) for e in entries}

    found = await in_thread(work)
    ws.state.confidence = ConfidenceCache(doc, now // DAY_MS, archived, found)
    return found
