"""Time expressions in a query, as the periods of time they name (pure, no clock reads).

``query_periods`` finds calendar dates and relative expressions in English
text and turns each into a ``Period`` of Unix milliseconds (UTC):

- a day — ``8 May 2023``, ``May 8, 2023``, ``the 8th of May 2023``;
- a month — ``May 2023``, ``in June`` (no year: that month of any year);
- a year — ``2023`` (1900–2099);
- relative to ``now_ms`` — ``today``, ``yesterday``, ``this/last week``,
  ``this/last month``, ``this/last year``, ``N days/weeks/months ago``.

People talk about an event after it happens, so a period also covers
``slack_ms`` after its end (two weeks by default; a day is widened by a day
before it). A bare ``May`` is skipped: it is far more often the modal verb.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

DAY_MS: Final = 86_400_000
DEFAULT_SLACK_MS: Final = 14 * DAY_MS
MAX_PERIODS: Final = 8

_MONTHS: Final = {
    name: number
    for number, full in enumerate(calendar.month_name)
    if full
    for name in {full.lower(), full[:3].lower()}
}
_MONTHS["sept"] = 9
_MON: Final = r"(?P<mon>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY: Final = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR: Final = r"(?P<year>(?:19|20)\d\d)"
_ABSOLUTE: Final = tuple(
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        rf"\b(?:the\s+)?{_DAY}\s+(?:of\s+)?{_MON}\b,?(?:\s*{_YEAR}\b)?",
        rf"\b{_MON}\s+{_DAY}\b(?!:),?(?:\s*{_YEAR}\b)?",
        rf"\b{_MON}\b,?(?:\s*{_YEAR}\b)?",
        rf"\b{_YEAR}\b",
    )
)
_RELATIVE: Final = re.compile(
    r"\b(?:(?P<day>today|yesterday)"
    r"|(?P<which>this|last|past|previous)\s+(?P<unit>week|month|year)"
    r"|(?P<count>\d{1,3}|a|an|one|two|three|four|five|six)\s+(?P<units>day|week|month|year)s?\s+ago)\b",
    re.IGNORECASE,
)
_COUNTS: Final = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_UNIT_DAYS: Final = {"day": 1, "week": 7, "month": 30, "year": 365}


@dataclass(frozen=True, slots=True)
class Period:
    """``start_ms <= ts < end_ms``; a month of any year when ``month`` is set instead."""

    start_ms: int = 0
    end_ms: int = 0
    month: int | None = None


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# The first and last millisecond a datetime holds (years 1 to 9999).
_FIRST_MS: Final = -62_135_596_800_000
_LAST_MS: Final = 253_402_300_799_999


def utc_moment(ts_ms: float) -> datetime:
    """The UTC moment of a time in Unix ms, held to the years 1 to 9999: a client may stamp
    an event with any 64-bit ``ts``, and no reader of it (a date in a pack, a weekday in the
    attention state) may fail on one past what a datetime holds."""
    return _EPOCH + timedelta(milliseconds=min(max(ts_ms, _FIRST_MS), _LAST_MS))


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _absolute(match: re.Match[str], slack_ms: int) -> Period | None:
    parts = match.groupdict()
    month = _MONTHS.get((parts.get("mon") or "").lower().rstrip("."))
    year = int(parts["year"]) if parts.get("year") else None
    day = int(parts["day"]) if parts.get("day") else None
    if month is None:
        if year is None:
            return None
        start = datetime(year, 1, 1, tzinfo=UTC)
        return Period(_ms(start), _ms(datetime(year + 1, 1, 1, tzinfo=UTC)) + slack_ms)
    if year is None:
        if day is None and (parts.get("mon") or "").lower() == "may":
            return None
        return Period(month=month)
    if day is not None:
        try:
            start = datetime(year, month, day, tzinfo=UTC)
        except ValueError:
            return None
        return Period(_ms(start) - DAY_MS, _ms(start) + DAY_MS + slack_ms // 2)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return Period(_ms(datetime(year, month, 1, tzinfo=UTC)), _ms(end) + slack_ms)


def _relative(match: re.Match[str], now_ms: int) -> Period:
    now = utc_moment(now_ms)
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if match["day"]:
        start = today - timedelta(days=1 if match["day"].lower() == "yesterday" else 0)
        return Period(_ms(start), _ms(start + timedelta(days=1)))
    if match["unit"]:
        days = _UNIT_DAYS[match["unit"].lower()]
        back = days if match["which"].lower() == "this" else 2 * days
        return Period(_ms(today - timedelta(days=back)), now_ms + 1)
    count = _COUNTS.get(match["count"].lower()) or int(match["count"])
    days = count * _UNIT_DAYS[match["units"].lower()]
    centre = today - timedelta(days=days)
    spread = timedelta(days=max(1, days // 4))
    return Period(_ms(centre - spread), _ms(centre + spread + timedelta(days=1)))


def query_periods(query: str, now_ms: int, *, slack_ms: int = DEFAULT_SLACK_MS) -> list[Period]:
    """The periods a query names (see module doc), at most ``MAX_PERIODS``."""
    periods: list[Period] = []
    taken: list[tuple[int, int]] = []
    for pattern in _ABSOLUTE:
        for match in pattern.finditer(query):
            if any(a < match.end() and match.start() < b for a, b in taken):
                continue
            taken.append(match.span())
            period = _absolute(match, slack_ms)
            if period is not None:
                periods.append(period)
    for match in _RELATIVE.finditer(query):
        periods.append(_relative(match, now_ms))
    return list(dict.fromkeys(periods))[:MAX_PERIODS]


def in_periods(ts_ms: int, periods: list[Period], *, slack_ms: int = DEFAULT_SLACK_MS) -> bool:
    """Whether a moment falls in any of the periods (a month of any year counts its slack too)."""
    for period in periods:
        if period.month is None:
            if period.start_ms <= ts_ms < period.end_ms:
                return True
            continue
        moment = utc_moment(ts_ms)
        earlier = utc_moment(ts_ms - slack_ms)
        if period.month in (moment.month, earlier.month):
            return True
    return False
