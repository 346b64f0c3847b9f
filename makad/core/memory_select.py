"""What memory always shows, and the order the other entries fill leftover room in.

- **Pinned.** An entry tagged ``pinned`` (``tags=pinned`` in its metadata comment,
  any case, among other tags) is always a candidate and comes first in the memory
  segment: those matching the query first, each group in fill order (below), so
  the order depends on the entries alone, never on where they were read. It
  still passes every gate: agent reads, scope, status, decay, a workspace entry
  overriding a user-level one, and ``already_shown`` (a session is not shown an
  unchanged entry twice between compactions).
- **The small-memory share** of a budget: ``min(memory_small_max_tokens,
  memory_small_share % of the budget)`` — by default min(2,000, 50 %). When every
  entry that could be shown fits in it (the segment holding them measured as it is
  rendered), memory's own cap grows to hold them all,
  query or not; pinned entries may grow it up to the same share. Ten one-line
  entries cost about 400 tokens in a pack while fresh and 660 once older than a day
  (the ref line then carries the age and a staleness caveat), 24 such entries about
  1,500: a 1,500-token pack holds the ten whole, a 4,000-token one the 24, while
  history keeps its 40 % floor and the session's working state and summary are
  served first.
- **Fill order.** Entries that match nothing fill what is left of memory's room by
  confidence (``makad.core.confidence.score``) highest first, then most recently
  updated, then by their place in their file (the top first: entries a user typed in
  one save share their dates, and the order they were written in is the one they
  expect, where an id derived from the text would be arbitrary), then by id. The order
  changes with time only when an entry crosses an age threshold of its confidence, so
  it is worked out once and kept until then (``FillOrder.valid_until_ms``).
- **Over-pinning.** ``pinned_overflow`` says which pinned entries of a file do not fit
  in the small-memory share of a ``PINNED_WARN_BUDGET`` pack (1,500 tokens, the
  budget of the documented prompt hooks: 750 tokens): ``read_state`` warns about
  them, since such packs leave them out (the trace says when one did: the entry's
  row is ``pinned`` and left out for ``budget``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from makad.core import confidence
from makad.core.budget import share
from makad.core.context_types import ContextLimits, FillKey, FillOrder
from makad.core.levels import Level
from makad.core.render import BLOCK_SEPARATOR_TOKENS, memory_block, memory_text
from makad.core.tokens import TokenCounter
from makad.core.types import Entry

PINNED_TAG: Final = "pinned"
# read_state warns when the pinned entries do not fit in this budget's small-memory share.
PINNED_WARN_BUDGET: Final = 1_500


def is_pinned(entry: Entry) -> bool:
    """Whether the entry carries the ``pinned`` tag (whatever its case or spacing)."""
    return any(tag.strip().casefold() == PINNED_TAG for tag in entry.tags)


def with_pin(tags: Sequence[str], pinned: bool) -> list[str]:
    """``tags`` with the ``pinned`` tag added (at the end) or every spelling of it removed."""
    kept = [tag for tag in tags if tag.strip().casefold() != PINNED_TAG]
    return [*kept, PINNED_TAG] if pinned else kept


def small_share(budget: int, limits: ContextLimits) -> int:
    """The small-memory share of ``budget`` (see module doc)."""
    return max(min(limits.memory_small_max_tokens, share(budget, limits.memory_small_share)), 0)


def fill_key(entry: Entry, now_ms: int, user_set: str | None, place: int) -> FillKey:
    """Sorts best first: the highest confidence, then the latest update, then the place in
    the file (``place``: 0 for the top entry), then the id."""
    return (
        -confidence.score(entry, now_ms, user_set),
        -(entry.updated_at or entry.created_at),
        place,
        entry.id,
    )


def fill_order(
    entries: Iterable[Entry], now_ms: int, user_confidence: Mapping[str, str], *, user_level: bool = False
) -> FillOrder:
    """``entries`` (in the order of their file) in fill order at ``now_ms``, and until when
    that order holds."""
    keyed: list[tuple[FillKey, Entry]] = []
    until: int | None = None
    for place, entry in enumerate(entries):
        user_set = user_confidence.get(entry.id)
        keyed.append((fill_key(entry, now_ms, user_set, place), entry))
        change = confidence.changes_after(entry, now_ms, user_set)
        if change is not None and (until is None or change < until):
            until = change
    keyed.sort(key=lambda pair: pair[0])
    return FillOrder(keyed, until, user_level, {entry.id: at for at, (_, entry) in enumerate(keyed)})


@dataclass(frozen=True, slots=True)
class PinnedOverflow:
    """The pinned entries of a file, what they cost in a pack, and those past the limit."""

    pinned: int
    tokens: int
    limit: int
    past: list[Entry]
    # How many of ``pinned`` are the user level's (``other`` below).
    others: int = 0


@dataclass(frozen=True, slots=True)
class OtherLevelPins:
    """The pinned entries another level adds to the same packs (the user level's, under
    ``@user/`` ids), with its confidence values under the same ids."""

    level: Level
    entries: Sequence[Entry]
    user_confidence: Mapping[str, str]


def pinned_overflow(
    entries: Iterable[Entry],
    now_ms: int,
    limits: ContextLimits,
    counter: TokenCounter,
    level: Level | None = None,
    user_confidence: Mapping[str, str] | None = None,
    other: OtherLevelPins | None = None,
) -> PinnedOverflow:
    """The active pinned ``entries`` (with ``other``'s: a pack holds both levels' pinned
    entries in one memory segment), what they cost as the memory segment renders them,
    and those that do not fit in a ``PINNED_WARN_BUDGET`` pack's small-memory share when
    packed as a pack without a query packs them: in fill order, one that does not fit
    passed over."""
    limit = small_share(PINNED_WARN_BUDGET, limits)
    used = needed = counter.count(memory_text([]))
    values = user_confidence or {}
    pinned = [
        (e, level, values.get(e.id), place)
        for place, e in enumerate(entries)
        if e.status == "active" and is_pinned(e)
    ]
    theirs = []
    if other is not None:
        theirs = [
            (e, other.level, other.user_confidence.get(e.id), place)
            for place, e in enumerate(other.entries)
            if e.status == "active" and is_pinned(e)
        ]
    pinned += theirs
    pinned.sort(key=lambda item: fill_key(item[0], now_ms, item[2], item[3]))
    past: list[Entry] = []
    for entry, its_level, user_set, _ in pinned:
        trust = confidence.derive(entry, now_ms, user_set)
        cost = counter.count(memory_block(entry, now_ms, limits, trust, its_level)) + BLOCK_SEPARATOR_TOKENS
        needed += cost
        if used + cost > limit:  # the next, smaller one may still fit
            past.append(entry)
        else:
            used += cost
    return PinnedOverflow(len(pinned), needed if pinned else 0, limit, past, len(theirs))
