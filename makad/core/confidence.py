"""How far a memory entry can be trusted: derived from what is known, never invented.

The score starts from who wrote the entry, gains from the evidence behind it and
loses with age (all in ``derive``):

- author: typed by the user (``manual``, or ``unknown`` — an entry written by
  hand in MEMORY.md) 0.9; an approved agent proposal (``extracted``) 0.55;
  an import 0.5;
- evidence: +0.1 for each source ref that points at something the daemon keeps
  (``event:``, ``episode:``, ``checkpoint:``, ``memory:``), at most +0.2 — an
  ``import:`` ref names where a memory came from, not evidence for it;
- age, from the last update: unknown −0.1, over 90 days −0.15, over a year −0.3.

The level is ``high`` from 0.8, ``medium`` from 0.45, else ``low``. A user who
writes ``confidence=high|medium|low`` (or a number in [0, 1]) into the entry's
metadata comment overrides all of that; V0.1 readers ignore the field.
"""

from __future__ import annotations

from typing import Final, Literal

import msgspec

from makad.core import memory_format as fmt
from makad.core.types import Entry

Level = Literal["high", "medium", "low"]
DAY_MS: Final = 86_400_000
AUTHORS: Final[dict[str, tuple[float, str]]] = {
    "manual": (0.9, "typed by the user"),
    "unknown": (0.9, "written by hand in MEMORY.md"),
    "extracted": (0.55, "approved agent proposal"),
    "imported": (0.5, "imported"),
}
EVIDENCE_PREFIXES: Final = ("event:", "episode:", "checkpoint:", "memory:")
EVIDENCE_STEP: Final = 0.1
EVIDENCE_MAX: Final = 0.2
OLD_DAYS: Final = 90
VERY_OLD_DAYS: Final = 365
HIGH: Final = 0.8
MEDIUM: Final = 0.45
USER_LEVELS: Final[dict[str, float]] = {"high": 0.9, "medium": 0.6, "low": 0.3}
USER_FIELD: Final = "confidence"


class Confidence(msgspec.Struct, kw_only=True, rename="camel"):
    """``level`` for people and models, ``score`` in [0, 1], ``reason`` says why."""

    level: Level
    score: float
    reason: str


def level_of(score: float) -> Level:
    return "high" if score >= HIGH else "medium" if score >= MEDIUM else "low"


def user_value(unknown_fields: tuple[str, ...] | list[str]) -> str | None:
    """The raw ``confidence=`` value a user wrote into an entry's comment, if any."""
    for token in unknown_fields:
        key, sep, value = token.partition("=")
        if sep and key == USER_FIELD and value:
            return value
    return None


def user_values(doc: fmt.MemoryDocument) -> dict[str, str]:
    """Entry id → the ``confidence=`` its comment carries, for the entries that have one."""
    return {
        s.entry.id: value
        for s in doc.sections
        if s.unknown_fields and (value := user_value(s.unknown_fields)) is not None
    }


def understood_user_value(value: str) -> bool:
    """Whether ``confidence=value`` overrides the derived confidence (else it is ignored)."""
    return _user_score(value) is not None


def _user_score(value: str) -> float | None:
    lowered = value.strip().lower()
    if lowered in USER_LEVELS:
        return USER_LEVELS[lowered]
    try:
        number = float(lowered)
    except ValueError:
        return None
    return number if 0.0 <= number <= 1.0 else None


def _age_loss(updated: int, now_ms: int) -> tuple[float, str | None]:
    """What the entry's age takes off its score, and why (None: nothing)."""
    if updated <= 0:
        return 0.1, "age unknown"
    days = (now_ms - updated) // DAY_MS
    if days > VERY_OLD_DAYS:
        return 0.3, "not updated for over a year"
    if days > OLD_DAYS:
        return 0.15, f"not updated for {days} days"
    return 0.0, None


def _derived_score(entry: Entry, now_ms: int) -> tuple[float, int, float, str | None]:
    """(score, evidence refs, age loss, why the loss) as ``derive`` works them out."""
    base, _ = AUTHORS.get(entry.origin, AUTHORS["imported"])
    evidence = sum(1 for ref in entry.source_refs if ref.startswith(EVIDENCE_PREFIXES))
    loss, why = _age_loss(entry.updated_at or entry.created_at, now_ms)
    score = round(min(max(base + min(evidence * EVIDENCE_STEP, EVIDENCE_MAX) - loss, 0.05), 1.0), 2)
    return score, evidence, loss, why


def score(entry: Entry, now_ms: int, user_set: str | None = None) -> float:
    """``derive(...).score`` without the reason: what ordering many entries needs."""
    if user_set is not None:
        value = _user_score(user_set)
        if value is not None:
            return round(value, 2)
    return _derived_score(entry, now_ms)[0]


def changes_after(entry: Entry, now_ms: int, user_set: str | None = None) -> int | None:
    """The first moment after ``now_ms`` at which the entry's score changes by age alone
    (it crosses 90 days or a year without an update), or None when it never will."""
    if user_set is not None and _user_score(user_set) is not None:
        return None
    updated = entry.updated_at or entry.created_at
    if updated <= 0:
        return None
    for days in (OLD_DAYS, VERY_OLD_DAYS):
        # ``(now - updated) // DAY_MS > days`` turns true at this instant.
        at = updated + (days + 1) * DAY_MS
        if at > now_ms:
            return at
    return None


def derive(entry: Entry, now_ms: int, user_set: str | None = None) -> Confidence:
    """The entry's confidence at ``now_ms`` (see module doc)."""
    if user_set is not None:
        value = _user_score(user_set)
        if value is not None:
            return Confidence(level=level_of(value), score=round(value, 2), reason="set by the user")
    value, evidence, _, why = _derived_score(entry, now_ms)
    reasons = [AUTHORS.get(entry.origin, AUTHORS["imported"])[1]]
    if evidence:
        reasons.append(f"{evidence} source ref{'s' if evidence != 1 else ''}")
    if why is not None:
        reasons.append(why)
    return Confidence(level=level_of(value), score=value, reason="; ".join(reasons))
