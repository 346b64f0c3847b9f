"""Why a context pack came out empty: one reason code the trace carries and clients show.

A pack with no segment and no message tells the agent, and a person running
``maka context``, nothing at all; the reason separates a switch (reads off, incognito),
a memory file the daemon could not use, a workspace with nothing in it yet, a call
nothing was relevant to, and a budget too small to hold what there was.
"""

from __future__ import annotations

from typing import Final

from makad.core.context_types import ContextPack, EmptyReason

# Candidate reasons that mean "there was no room": a bigger budget would have shown it.
_NO_ROOM: Final = frozenset({"budget", "session_cap"})


def empty_reason(
    pack: ContextPack, *, reads_off: bool, incognito: bool, memory_entries: int, memory_asked: bool = True
) -> EmptyReason | None:
    """Why ``pack`` is empty, or None when it shows something.

    ``reads_off``: memory off or agentReadEnabled off; ``incognito``: the workspace or the
    session asking is incognito; ``memory_entries``: the active entries the agent could
    read (the workspace's and the user level's); ``memory_asked``: ``include`` names
    memory. The first that applies, in this order: a switch, a memory file left out
    (``trace.skipped``), candidates or history left out for lack of room (or entries there
    and none even tried: the budget's share for memory could not hold one), memory left
    out of ``include`` (its entries were not looked at: "nothing in memory" would be a
    guess), nothing in memory at all, else nothing relevant to this call (every candidate
    left out for another reason: already shown, expired, out of scope)."""
    if pack.segments or pack.messages:
        return None
    if incognito:
        return "incognito"
    if reads_off:
        return "reads_off"
    trace = pack.trace
    if trace.skipped:
        return "memory_unavailable"
    if trace.history_dropped or any(c.reason in _NO_ROOM for c in trace.candidates):
        return "budget_too_small"
    if not memory_asked:
        return "not_included"
    if not trace.candidates:
        # Entries there, and not one tried: memory's share could not hold even one.
        return "budget_too_small" if memory_entries else "nothing_yet"
    return "nothing_matched"
