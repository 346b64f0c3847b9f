"""ChatGPT saved memories, copied from Settings → Personalization → Manage memories.

ChatGPT has no memory export button; the list is copied by hand or asked for
("list my saved memories with their dates"), which yields one memory a line as
``[2024-05-12] - text`` (also numbered or bulleted, with ``.``/``:``/``—`` after the date).
Copied from Settings → Personalization → Manage memories, it is one memory a line
with no dates at all.
"""

from __future__ import annotations

import re
from typing import Final

from makad.core.entry_text import text_lines
from makad.core.importers.collect import Collector
from makad.core.importers.records import ImportResult, ItemProblem
from makad.core.importers.timestamps import to_epoch_ms

LINE: Final = re.compile(
    r"^\s*(?:[-*+•]\s+|\d+[.)]\s+)?\[(?P<date>[^\]\n]{4,40})\]\s*(?:[-–—:.]\s*)?(?P<text>\S.*)$"
)


def dated_line(line: str) -> tuple[int, str] | None:
    """``(created_at_ms, text)`` for a ``[date] - text`` line whose date parses."""
    match = LINE.match(line)
    if match is None:
        return None
    created = to_epoch_ms(match.group("date"))
    return (created, match.group("text")) if created is not None else None


_LIST_MARK: Final = re.compile(r"^\s*(?:[-*+•]\s+|\d+[.)]\s+)")


def parse_chatgpt(text: str) -> ImportResult:
    """Dated lines when the list has any (other lines are then errors: a header, a stray
    remark); a plain list pasted from "Manage memories" has none, and every line is one."""
    out = Collector("chatgpt")
    lines = [(n, line) for n, line in enumerate(text_lines(text), start=1) if line.strip()]
    dated = any(dated_line(line) is not None for _, line in lines)
    for number, line in lines:
        reader = _line_item if dated else _plain_item
        out.read(f"line {number}", reader, out, number, line)
    return out.result()


def parse_text(text: str) -> ImportResult:
    """Plain text (a ``.txt`` note, a list pasted from anywhere): every non-blank line is
    one memory, a leading bullet or number removed."""
    out = Collector("text")
    for number, line in enumerate(text_lines(text), start=1):
        if line.strip():
            out.read(f"line {number}", _plain_item, out, number, line)
    return out.result()


def _plain_item(out: Collector, number: int, line: str) -> None:
    out.item(f"line {number}", _LIST_MARK.sub("", line, count=1))


def _line_item(out: Collector, number: int, line: str) -> None:
    parsed = dated_line(line)
    if parsed is None:
        reason = "date not recognised" if LINE.match(line) else "not a '[date] - text' line"
        raise ItemProblem(reason)
    created, body = parsed
    out.item(f"line {number}", body, created=created)
