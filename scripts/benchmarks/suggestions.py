"""Scoring suggestions in-process (``makad.core.suggestions.candidates``), the work
``suggest`` does on the request path, against a baseline measured in the same run: the
attention derivation (``makad.core.attention.derive``) the keeper does off the path over
the same records. Inputs at the stored bounds: 300 records (``attention_store.MAX_RECORDS``),
each an open thread with a failure, and 20 proposals waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from makad.core.attention import DAY_MS, Pending, derive
from makad.core.behaviors import Behavior, Carry, gather, records
from makad.core.suggestions import candidates
from makad.core.types import Event

NOW = 1_800_000_000_000


def _records(count: int) -> list[Behavior]:
    out = []
    for i in range(count):
        sid = f"s{i}"
        at = NOW - 2 * 3_600_000 - i * 40 * 60_000

        def event(seq: int, kind: str, text: str, **extra: Any) -> Event:
            return Event(session_id=sid, seq=seq, ts=at + seq, type=kind, text=text, tokens=5, **extra)  # noqa: B023

        events = [
            event(1, "user_message", f"Task {i} in src/m{i % 50}.py"),
            event(2, "tool_call", f"pytest tests/t{i % 30}.py", tool_call_id="c", tool_name="bash"),
            event(3, "tool_result", "FAILED x", tool_call_id="c", tool_name="bash", meta={"exit_code": "1"}),
            event(4, "assistant_message", "Looking into it."),
        ]
        _, carry = gather(sid, Carry(), events)
        out.extend(records(sid, carry, closed=False, working=None))
    return out


def _best_ms(action: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        action()
        best = min(best, time.process_time() - start)
    return round(best * 1000, 3)


def run(quick: bool) -> dict[str, Any]:
    records = _records(60 if quick else 300)
    pending = [
        Pending(proposal_id=f"p{i}", title=f"Rule {i}", created_at=NOW - i * DAY_MS) for i in range(20)
    ]
    state = derive(NOW, records, pending)
    repeats = 3 if quick else 30
    score_ms = _best_ms(lambda: candidates(NOW, state, records, session_id="s5"), repeats)
    derive_ms = _best_ms(lambda: derive(NOW, records, pending), repeats)
    return {
        "suggestions": {
            "records": len(records),
            "state_lines": len(state.lines()),
            "score_ms": score_ms,
            "derive_ms": derive_ms,
            "ratio": round(score_ms / derive_ms, 3) if derive_ms else None,
        }
    }
