"""How one token budget is shared between the kinds of context.

In order:

1. **Minimum** — the newest user message (with its per-message overhead). When
   it alone exceeds the budget, assembly fails with ``too_large``.
2. **History floor** — history reserves ``history_floor_share`` % of the budget
   (40 % by default), or less when the live history is smaller, and never less
   than the minimum. Segments cannot take that share away.
3. **Segments, by priority** — working_state, then summary, then memory, then
   recall. Each may use up to its cap, ``min(share % of the budget, max
   tokens)``, and no more than is left after the reservation and the kinds
   before it; it uses only what its content needs. Default caps:
   working_state 15 % / 2,000, summary 20 % / 4,000, memory 20 % / 5,000,
   recall 15 % / 3,000. Segments have no floor: a tight budget leaves them out.
   When ``include`` asks for one segment kind alone, the split between kinds
   has nothing to balance: that kind may use everything history does not
   reserve (its share and max tokens do not apply).
4. **History** — gets everything the segments did not use.
"""

from __future__ import annotations

from makad.core.context_types import ContextLimits, SegmentKind


def share(budget: int, percent: int) -> int:
    return budget * percent // 100


def segment_cap(kind: SegmentKind, budget: int, limits: ContextLimits, *, alone: bool = False) -> int:
    """The most a segment kind may use of ``budget`` (before what others took)."""
    if alone:
        return budget
    if kind == "working_state":
        return min(share(budget, limits.working_state_share), limits.working_state_max_tokens)
    if kind == "summary":
        return min(share(budget, limits.summary_share), limits.summary_max_tokens)
    if kind == "memory":
        return min(share(budget, limits.memory_share), limits.memory_max_tokens)
    return min(share(budget, limits.recall_share), limits.recall_max_tokens)


def history_reserve(budget: int, minimum: int, history_tokens: int, limits: ContextLimits) -> int:
    """What history holds back from the segments (step 2 above).

    ``history_tokens`` may be a partial count, as long as it is complete up to
    the floor (``PreparedHistory.tokens_up_to(floor)``).
    """
    floor = share(budget, limits.history_floor_share)
    return min(budget, max(minimum, min(floor, history_tokens)))
