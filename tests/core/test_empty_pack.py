"""Why a context pack is empty: one reason code, the first that applies."""

from __future__ import annotations

from typing import Any

import pytest

from makad.core.context_types import ContextPack, ScoreParts, Segment, Skipped, Trace, TraceCandidate
from makad.core.empty_pack import empty_reason


def candidate(reason: str) -> TraceCandidate:
    parts = ScoreParts(bm25=0.0, recency=1.0, tags=0.0)
    return TraceCandidate(
        kind="memory", source_id="memory:a", score=1.0, parts=parts, included=False, reason=reason
    )


def pack(*, segments: bool = False, **trace: Any) -> ContextPack:
    fields: dict[str, Any] = {
        "path": "fast",
        "candidates": [],
        "dropped": {},
        "allocation": [],
        "minimum_tokens": 0,
        "history_dropped": 0,
        "history_repaired": 0,
        "placeholders": [],
        **trace,
    }
    shown = [Segment(kind="memory", text="- x", tokens=2, source_ids=["memory:a"])] if segments else []
    return ContextPack(
        segments=shown,
        messages=[],
        total_tokens=0,
        budget_tokens=100,
        compact_recommended=False,
        trace=Trace(**fields),
    )


UNREADABLE = [Skipped(source="memory", reason="unreadable", message="MEMORY.md could not be read")]


@pytest.mark.parametrize(
    ("built", "switches", "entries", "expected"),
    [
        (pack(segments=True), {}, 1, None),
        (pack(), {"incognito": True, "reads_off": True}, 3, "incognito"),
        (pack(), {"reads_off": True}, 3, "reads_off"),
        (pack(skipped=UNREADABLE), {}, 0, "memory_unavailable"),
        (pack(candidates=[candidate("budget")]), {}, 1, "budget_too_small"),
        (pack(candidates=[candidate("session_cap")]), {}, 1, "budget_too_small"),
        (pack(history_dropped=4), {}, 0, "budget_too_small"),
        (pack(), {}, 2, "budget_too_small"),
        (pack(), {}, 0, "nothing_yet"),
        (pack(), {"memory_not_asked": True}, 0, "not_included"),
        (pack(history_dropped=4), {"memory_not_asked": True}, 0, "budget_too_small"),
        (pack(candidates=[candidate("already_shown")]), {}, 1, "nothing_matched"),
        (pack(candidates=[candidate("expired"), candidate("scope")]), {}, 2, "nothing_matched"),
    ],
)
def test_the_first_reason_that_applies(
    built: ContextPack, switches: dict[str, bool], entries: int, expected: str | None
) -> None:
    """A switch, then an unusable file, then room, then an empty memory, else nothing relevant."""
    reads_off = switches.get("reads_off", False)
    incognito = switches.get("incognito", False)
    asked = not switches.get("memory_not_asked", False)
    assert (
        empty_reason(
            built, reads_off=reads_off, incognito=incognito, memory_entries=entries, memory_asked=asked
        )
        == expected
    )
