"""Printing for people: tables that fit the terminal, relative ages, entry cards."""

from __future__ import annotations

import json
import shutil
import sys
import time
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, TextIO


def print_json(value: Any, file: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False), file=file or sys.stdout)


def char_width(char: str) -> int:
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Columns the text takes in a terminal (CJK characters take two)."""
    return sum(char_width(c) for c in text)


def one_line(text: str) -> str:
    return " ".join(text.split())


def truncate(text: str, width: int) -> str:
    """The text cut to ``width`` columns, ending in … when cut."""
    if display_width(text) <= width:
        return text
    out: list[str] = []
    used = 0
    for char in text:
        w = char_width(char)
        if used + w > width - 1:
            break
        out.append(char)
        used += w
    return "".join(out) + "…"


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def terminal_width(stream: TextIO | None = None) -> int | None:
    """The width to fit output to, or None when the output is not a terminal (no cutting)."""
    stream = stream or sys.stdout
    if not stream.isatty():
        return None
    return shutil.get_terminal_size((100, 24)).columns


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int | None = None) -> str:
    """Aligned columns; when ``width`` is given the last column is cut to fit it."""
    cells = [[one_line(c) for c in row] for row in rows]
    widths = [display_width(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], display_width(cell))
    lines = []
    for row in [list(headers), *cells]:
        head = "  ".join(pad(c, widths[i]) for i, c in enumerate(row[:-1]))
        last = row[-1]
        if width is not None:
            room = max(8, width - display_width(head) - 2)
            last = truncate(last, room)
        lines.append(f"{head}  {last}".rstrip() if head else last)
    return "\n".join(lines)


def now_ms() -> int:
    return int(time.time() * 1000)


def age(ms: int | None, now: int | None = None) -> str:
    """'just now', '5 min ago', '3 h ago', '2 days ago' — or the date when older than 60 days."""
    if not ms:
        return "-"
    seconds = ((now if now is not None else now_ms()) - ms) // 1000
    if seconds < 0:
        return "in the future"
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{seconds // 60} min ago"
    if seconds < 86400:
        return f"{seconds // 3600} h ago"
    days = seconds // 86400
    if days <= 60:
        return "1 day ago" if days == 1 else f"{days} days ago"
    return time.strftime("%Y-%m-%d", time.localtime(ms / 1000))


def timestamp(ms: int | None) -> str:
    if not ms:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000))


SHORT_ID_CHARS = 12


def short_id(entry_id: str) -> str:
    return entry_id[:SHORT_ID_CHARS]


def short_ids(ids: Iterable[str]) -> dict[str, str]:
    """Each id's shortest prefix of at least SHORT_ID_CHARS that no other id starts with.

    Legacy ``manual-<ms>`` ids share long prefixes, so a fixed cut would collide; an id
    that is itself the start of another (``x`` and ``x~2``) is shown whole (exact ids win).
    """
    pool = sorted(set(ids))
    out: dict[str, str] = {}
    for index, entry_id in enumerate(pool):
        shared = max(
            (_common_prefix(entry_id, pool[j]) for j in (index - 1, index + 1) if 0 <= j < len(pool)),
            default=0,
        )
        out[entry_id] = entry_id[: max(SHORT_ID_CHARS, shared + 1)]
    return out


def _common_prefix(a: str, b: str) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


def entry_card(entry: dict[str, Any], now: int | None = None) -> list[str]:
    """An entry (or proposal) as lines: title, metadata, then its content."""
    meta = [f"id {entry.get('id', '?')}", f"origin {entry.get('origin', 'unknown')}"]
    if entry.get("status") in ("archived", "draft"):
        meta.append(str(entry["status"]))
    if entry.get("scope", "workspace") != "workspace":
        scope = f"scope {entry['scope']}"
        if entry.get("sessionId"):
            scope += f" ({entry['sessionId']})"
        meta.append(scope)
    lines = [str(entry.get("title", "")), "  " + "  ·  ".join(meta)]
    dates = f"  created {age(entry.get('createdAt'), now)}"
    if entry.get("updatedAt") and entry.get("updatedAt") != entry.get("createdAt"):
        dates += f"  ·  updated {age(entry.get('updatedAt'), now)}"
    lines.append(dates)
    if entry.get("tags"):
        lines.append("  tags " + ", ".join(entry["tags"]))
    if entry.get("decayTtlMs"):
        days = entry["decayTtlMs"] / 86_400_000
        lines.append(f"  decays after {days:g} days")
    if entry.get("sourceRefs"):
        lines.append("  sources " + ", ".join(entry["sourceRefs"]))
    if entry.get("supersedes"):
        lines.append(f"  supersedes {entry['supersedes']}")
    lines.append("")
    lines.extend("  " + line for line in str(entry.get("content", "")).splitlines())
    return lines


def side_by_side(left: list[str], right: list[str], width: int, gap: str = " │ ") -> list[str]:
    """Two columns of lines, the left one padded to half the width; long lines are cut."""
    half = (width - display_width(gap)) // 2
    rows = max(len(left), len(right))
    out = []
    for i in range(rows):
        a = truncate(left[i], half) if i < len(left) else ""
        b = truncate(right[i], width - half - display_width(gap)) if i < len(right) else ""
        out.append((pad(a, half) + gap + b).rstrip())
    return out
