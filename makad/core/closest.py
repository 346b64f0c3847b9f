"""The valid spelling closest to a mistyped one: the rule ``maka`` uses for "did you mean"."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(given: str, choices: Iterable[str]) -> str | None:
    """The choice equal to ``given`` but for case, else the closest by difflib's ratio
    (0.6 at least), if any."""
    pool = list(choices)
    folded = {choice.casefold(): choice for choice in pool}
    if given.casefold() in folded:
        return folded[given.casefold()]
    close = difflib.get_close_matches(given, pool, n=1, cutoff=0.6)
    return close[0] if close else None
