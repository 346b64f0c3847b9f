"""Counts in the words people read: "1 secret", "2 secrets", never "2 secret(s)"."""

from __future__ import annotations


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``n`` and the noun it counts: "1 line", "3 lines", "1 memory", "2 memories"."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def redacted(n: int) -> str:
    """ "1 secret was redacted", "3 secrets were redacted"."""
    return f"{counted(n, 'secret')} {'was' if n == 1 else 'were'} redacted"
