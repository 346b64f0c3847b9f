"""How one token budget is shared between the kinds of context.

In order:

1. **Minimum** — the newest user message (with its per-message overhead). When
   it alone exceeds the budget, assembly fails with ``too_large``.
2. **History floor** — history reserves ``history_floor_share`` % of the budget
   (40 % by default), or less when the live history is smaller, and never less
   than the minimum. Segments cannot take that share away.
3. **Shares, by priority** — working_state, then summary, then memory, then
   attention, then recall. Each may use up to its cap and no more than is left after the
   reservation and the kinds before it; it uses only what its content needs.
   A cap scales with the budget: ``share % of the budget``, raised to the floor
   (``segment_floor_tokens``, 200) and lowered to the kind's ceiling
   (``*_max_tokens``). Defaults: working_state 15 % / ceiling 14,000, summary
   20 % / 12,500, memory 20 % / 16,000, attention 5 % / 1,500, recall 15 % / 8,000. The floor is a
   floor of the cap, not a reservation: a tight budget still leaves a segment
   out when the kinds before it took the room. Memory's cap grows to the
   small-memory share (``makad.core.memory_select``) when its entries all fit
   there (the segment measured as rendered), or to hold its pinned entries; here
   memory packs its pinned entries and those matching the query only
   (``makad.core.memory_segment``).
4. **Flow of unused shares** — what the kinds left unused goes, in the order
   working_state, summary, memory, attention, **history**, recall, to each kind that still
   has candidates it left out for lack of room (a cut working state or summary,
   pinned or matching memory entries or recall events dropped for ``budget``,
   live history beyond its reserve), up to that kind's ceiling. The session's
   own state and durable memory come first, then the live conversation, then
   excerpts of other sessions: in a fresh session (little history) recall gets
   what is unused, in a long one the conversation does. Right after memory's
   turn, what is left of memory's own cap goes to its entries that only fill
   (those past ``memory_top_k`` and those matching nothing); they never ask for
   more than that cap. Before recall's turn, they may grow memory up to the
   small-memory share (within memory's ceiling) with what history does not
   want: the memory the user keeps comes before more excerpts of other sessions
   than recall's own cap holds.
5. **History** — gets everything the segments did not use.
6. **What is still unused** — when history could not use it all (it was short,
   or its next whole turn did not fit), memory's entries left out for room take
   it, up to memory's ceiling: no token goes unused while an entry could show.

When ``include`` asks for one segment kind alone, the split between kinds has
nothing to balance: that kind may use everything history does not reserve (its
share, floor and ceiling do not apply).
"""

from __future__ import annotations

from makad.core.context_types import ContextLimits, SegmentKind


def share(budget: int, percent: int) -> int:
    return budget * percent // 100


def ceiling(kind: SegmentKind, budget: int, limits: ContextLimits, *, alone: bool = False) -> int:
    """The most a segment kind may ever use of ``budget``, flow included."""
    if alone:
        return budget
    if kind == "working_state":
        return limits.working_state_max_tokens
    if kind == "summary":
        return limits.summary_max_tokens
    if kind == "memory":
        return limits.memory_max_tokens
    if kind == "attention":
        return limits.attention_max_tokens
    return limits.recall_max_tokens


def segment_cap(kind: SegmentKind, budget: int, limits: ContextLimits, *, alone: bool = False) -> int:
    """A segment kind's own cap of ``budget`` (step 3, before what others took)."""
    if alone:
        return budget
    percent = {
        "working_state": limits.working_state_share,
        "summary": limits.summary_share,
        "memory": limits.memory_share,
        "attention": limits.attention_share,
        "recall": limits.recall_share,
    }[kind]
    top = ceiling(kind, budget, limits)
    return min(max(share(budget, percent), limits.segment_floor_tokens), top, budget)


def history_reserve(budget: int, minimum: int, history_tokens: int, limits: ContextLimits) -> int:
    """What history holds back from the segments (step 2 above).

    ``history_tokens`` may be a partial count, as long as it is complete up to
    the floor (``PreparedHistory.tokens_up_to(floor)``).
    """
    floor = share(budget, limits.history_floor_share)
    return min(budget, max(minimum, min(floor, history_tokens)))
