"""Warnings about what a memory file holds: found on read, reported, never fatal."""

from __future__ import annotations

from typing import Final

from makad.core.undecodable import undecodable_lines
from makad.wire.base import Warning

# One warning per line up to this many; the rest are summed up in one more.
MAX_LINE_WARNINGS: Final = 10


def not_utf8(text: str | None, file_name: str, *, per_line: bool = True) -> list[Warning]:
    """``not_utf8`` warnings naming the lines of ``text`` that are not valid UTF-8.

    With ``per_line`` false (a file other than the one the reply is about) a single
    warning without ``line`` names them in its message.
    """
    lines = undecodable_lines(text) if text else []
    if not lines:
        return []
    shown = ", ".join(map(str, lines[:MAX_LINE_WARNINGS]))
    more = f" and {len(lines) - MAX_LINE_WARNINGS} more" if len(lines) > MAX_LINE_WARNINGS else ""
    if not per_line:
        return [
            Warning(
                kind="not_utf8",
                message=(
                    f"{file_name} is not valid UTF-8 at line(s) {shown}{more}: those bytes are shown as "
                    "cp1252 and kept as they are on disk"
                ),
            )
        ]
    out = [
        Warning(
            kind="not_utf8",
            line=number,
            message=(
                f"{file_name} line {number} is not valid UTF-8: its bytes are shown as cp1252 and kept "
                "as they are on disk until that entry is changed"
            ),
        )
        for number in lines[:MAX_LINE_WARNINGS]
    ]
    if more:
        out.append(
            Warning(
                kind="not_utf8",
                message=(
                    f"{file_name} has {len(lines) - MAX_LINE_WARNINGS} more lines that are not valid UTF-8"
                ),
            )
        )
    return out
