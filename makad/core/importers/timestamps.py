"""Source timestamps (ISO strings, dates, epoch seconds or milliseconds) to unix milliseconds."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)
# Numbers at or above this are milliseconds (1973 in ms; year 5138 in seconds).
_MS_THRESHOLD: Final = 100_000_000_000
_NUMBER: Final = re.compile(r"[0-9]{1,17}(?:\.[0-9]+)?")
_TEXT_FORMATS: Final = ("%Y/%m/%d", "%B %d, %Y", "%b %d, %Y", "%d %B %Y", "%d %b %Y")


def to_epoch_ms(value: object) -> int | None:
    """Milliseconds since the epoch, or ``None`` when the value is missing or not a time."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        try:
            return _from_number(float(value))
        except OverflowError:
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if _NUMBER.fullmatch(text):
        return _from_number(float(text))
    return _from_text(text)


def _from_number(number: float) -> int | None:
    if not 0 < number < 1e17 or number != number:
        return None
    return int(number) if number >= _MS_THRESHOLD else int(number * 1000)


def _from_text(text: str) -> int | None:
    moment: datetime | None = None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        for fmt in _TEXT_FORMATS:
            try:
                moment = datetime.strptime(text, fmt)
                break
            except ValueError:
                continue
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        ms = (moment - _EPOCH) // _MS
    except OverflowError:
        return None
    return ms if ms > 0 else None
