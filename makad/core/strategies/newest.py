"""The recency baselines: candidates newest first, no relevance ranking.

``recent`` keeps the usual shares of the budget (memory and recall each get
their own share); ``full`` lets memory and recall take up to the whole budget
(what the live history leaves), the "everything that fits, newest kept"
baseline. Both select every candidate, memory by last update and recall by
time, newest first (ties by ref, so the order is a function of the inputs).
"""

from __future__ import annotations

from typing import Literal

import msgspec

from makad.core.assembly import assemble
from makad.core.context_types import ContextInputs, ContextPack
from makad.core.refs import event_ref, memory_ref
from makad.core.tokens import TokenCounter

# ``full`` has no top-k: a bound only so that a huge pool cannot make the trace huge.
FULL_TOP_K = 100_000


def newest_first(inputs: ContextInputs) -> list[str]:
    """Every memory and recall candidate's ref, memory first, each newest first."""
    entries = sorted(inputs.memory_entries, key=lambda e: (-(e.updated_at or e.created_at), e.id))
    events = {(h.event.session_id, h.event.seq): h.event for h in inputs.recall_hits}
    for hit in inputs.recall_hits:
        for near in hit.neighbours:
            events.setdefault((near.session_id, near.seq), near)
    ordered = sorted(events.values(), key=lambda e: (-e.ts, e.session_id, -e.seq))
    refs = [memory_ref(e.id) for e in entries]
    refs.extend(event_ref(e.session_id, e.seq) for e in ordered)
    return list(dict.fromkeys(refs))


class Recent:
    name: Literal["recent"] = "recent"
    pool: Literal["newest"] = "newest"

    def build(self, inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
        pack = assemble(msgspec.structs.replace(inputs, selection=newest_first(inputs)), counter)
        return _named(pack, self.name)


class Full:
    name: Literal["full"] = "full"
    pool: Literal["newest"] = "newest"

    def build(self, inputs: ContextInputs, counter: TokenCounter | None = None) -> ContextPack:
        budget = max(inputs.budget_tokens, 0)
        limits = msgspec.structs.replace(
            inputs.limits,
            memory_max_tokens=budget,
            recall_max_tokens=budget,
            memory_top_k=FULL_TOP_K,
            recall_top_k=FULL_TOP_K,
        )
        wide = msgspec.structs.replace(inputs, selection=newest_first(inputs), limits=limits)
        return _named(assemble(wide, counter), self.name)


def _named(pack: ContextPack, name: str) -> ContextPack:
    return msgspec.structs.replace(pack, trace=msgspec.structs.replace(pack.trace, strategy=name))
