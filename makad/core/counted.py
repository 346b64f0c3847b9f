"""Counts in the words people read: "1 secret", "2 secrets", never "2 secret(s)"."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun it counts: "1 session", "3 sessions", "1 memory", "2 memories"."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def were(n: int) -> str:
    """The verb after a count of ``n``: "1 secret was", "2 secrets were"."""
    return "was" if n == 1 else "were"
