"""Dates typed by hand into a metadata comment, and the Unix milliseconds they likely mean.

``createdAt=`` and ``updatedAt=`` are Unix milliseconds. A person typing a date writes an
ISO date (``2024-01-01``), Unix seconds (what ``date +%s`` prints), a slashed date
(``12/04/2026``, day or month first) or microseconds; these guesses turn each into the
milliseconds meant, for the metadata warnings' "did you mean". Pure.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final
from urllib.parse import unquote

from makad.core.types import MAX_INT64

DATE_KEYS: Final = ("createdAt", "updatedAt")
# Unix seconds of 2001-09-09 to the year 5138 read as milliseconds of 1970 to 1973; past
# the year 5138 milliseconds are microseconds or nanoseconds. Smaller numbers (1, 2) are
# left alone: no one types them as a date.
SECONDS_FROM: Final = 10**9
PLAUSIBLE_FROM: Final = 10**11
PLAUSIBLE_UNTIL: Final = 10**14
EXAMPLE_MS: Final = 1_764_547_200_000
_SLASHED: Final = re.compile(r"([0-9]{1,2})[/.]([0-9]{1,2})[/.]([0-9]{4})")


def day(ms: int) -> str:
    """The UTC day ``ms`` falls on (``2024-12-06``), or "a year past 9999"."""
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).date().isoformat()
    except (ValueError, OverflowError, OSError):
        return "a year past 9999"


FORMAT_EXAMPLE: Final = f"makad reads Unix milliseconds ({EXAMPLE_MS} is {day(EXAMPLE_MS)})"


def unit_mistake(ms: int) -> tuple[str, int] | None:
    """The unit ``ms`` was likely typed in, and the milliseconds meant, when it is no
    plausible date in milliseconds: seconds, microseconds or nanoseconds."""
    if SECONDS_FROM <= ms < PLAUSIBLE_FROM:
        return "seconds", ms * 1000
    if ms >= PLAUSIBLE_UNTIL:
        for unit, per_ms in (("microseconds", 1000), ("nanoseconds", 1_000_000)):
            if PLAUSIBLE_FROM <= ms // per_ms < PLAUSIBLE_UNTIL:
                return unit, ms // per_ms
    return None


def meant(value: str) -> list[int]:
    """The milliseconds ``value`` likely means: an ISO date's (UTC when no zone), a number's
    in the unit it was likely typed in, both readings of a slashed date; [] for none."""
    text = unquote(value).strip("\"'")
    if text.isdigit() and len(text) <= 19 and int(text) <= MAX_INT64:
        mistake = unit_mistake(int(text))
        return [mistake[1] if mistake else int(text)]
    iso = _iso(text)
    if iso is not None:
        return [iso]
    found = _SLASHED.fullmatch(text)
    if found is None:
        return []
    first, second, year = (int(part) for part in found.groups())
    readings = {_date(year, month, day_) for day_, month in ((first, second), (second, first))}
    return sorted(ms for ms in readings if ms is not None)


def _iso(text: str) -> int | None:
    try:
        moment = datetime.fromisoformat(text)
    except (ValueError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return _in_range(moment)


def _date(year: int, month: int, day_: int) -> int | None:
    try:
        return _in_range(datetime(year, month, day_, tzinfo=UTC))
    except ValueError:
        return None


def _in_range(moment: datetime) -> int | None:
    try:
        ms = int(moment.timestamp() * 1000)
    except (ValueError, OverflowError, OSError):
        return None
    return ms if 0 <= ms <= MAX_INT64 else None
