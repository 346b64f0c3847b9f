"""Text above MEMORY.md's first entry that is no memory, and taking it out once it is one.

Before the first ``## `` entry a file may hold its ``# `` title, blank lines and HTML
comments. Anything else there (a CLAUDE.md-style list of bullets, a paragraph) is kept
but never read as memory: ``stray_lines`` finds it (``read_state`` warns
``text_outside_entries`` for each line). ``maka import memory/MEMORY.md --format markdown``
queues those bullets as proposals; once a bullet's memory is in MEMORY.md, waiting in
PENDING.md or rejected, its lines are only noise above the entries, and ``plan`` says
which lines can go (each bullet with its indented continuation lines, matched the way
the import matched it: its canonical content). ``without_lines`` takes them out.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final

import msgspec

from makad.core import importers
from makad.core.entry_text import split_lines, strip_eol
from makad.core.importers.markdown import BULLET
from makad.core.undecodable import display

# A level-1 heading (the file's title) and blank lines are expected before the first entry.
_TITLE_LINE: Final = re.compile(r"^ {0,3}#(?:[ \t]|$)")
_COMMENT_OPEN: Final = "<!--"
_COMMENT_CLOSE: Final = "-->"


def stray_lines(preamble: str) -> list[int]:
    """Numbers (from 1) of the lines of ``preamble`` that are not blank, the file's ``# ``
    title or an HTML comment."""
    stray: list[int] = []
    in_comment = False
    for number, line in enumerate(_lines(preamble), start=1):
        rest = line
        if in_comment:
            if _COMMENT_CLOSE not in rest:
                continue
            rest = rest.split(_COMMENT_CLOSE, 1)[1]
            in_comment = False
        while _COMMENT_OPEN in rest:
            before, _, after = rest.partition(_COMMENT_OPEN)
            if _COMMENT_CLOSE not in after:
                in_comment = True
                rest = before
                break
            rest = before + after.split(_COMMENT_CLOSE, 1)[1]
        if rest.strip() and not _TITLE_LINE.match(rest):
            stray.append(number)
    return stray


class OutsideLine(msgspec.Struct, frozen=True, rename="camel"):
    """One stray line; ``where`` says where its memory is now (``memory``, ``pending``,
    ``rejected``), with the entry's or proposal's ``id``, or why it stays (``not_imported``)."""

    line: int
    text: str
    where: str
    id: str | None = None


class Plan(msgspec.Struct, frozen=True):
    """Stray lines whose memory is elsewhere now (``removable``), and the ones that stay."""

    removable: list[OutsideLine]
    kept: list[OutsideLine]


# Where a memory is now, by its canonical content hash: ("memory" | "pending" | "rejected", id).
Known = Mapping[str, tuple[str, str | None]]


def plan(preamble: str, known: Known, digest: Callable[[str], str | None]) -> Plan:
    """Which stray lines of ``preamble`` can go: every line of each bullet whose content
    (``digest``: the canonical hash the import would give it, None when the import would
    refuse it) is ``known``. Bytes that are not UTF-8 are read as everywhere else
    (``display``): so each line's ``text`` can be sent, and a bullet matches what the
    import of the file made of it."""
    lines = _shown_lines(preamble)
    stray = stray_lines(preamble)
    placed: dict[int, tuple[str, str | None]] = {}
    for span, hashed in _bullets(lines, stray, digest):
        found = known.get(hashed) if hashed is not None else None
        if found is not None:
            placed.update(dict.fromkeys(span, found))
    removable, kept = [], []
    for number in stray:
        text = lines[number - 1]
        if number in placed:
            where, found_id = placed[number]
            removable.append(OutsideLine(line=number, text=text, where=where, id=found_id))
        else:
            kept.append(OutsideLine(line=number, text=text, where="not_imported"))
    return Plan(removable=removable, kept=kept)


def bullet_digests(preamble: str, digest: Callable[[str], str | None]) -> list[str | None]:
    """The ``digest`` of each bullet among the stray lines (what ``plan`` looks up)."""
    return [hashed for _, hashed in _bullets(_shown_lines(preamble), stray_lines(preamble), digest)]


def _bullets(
    lines: list[str], stray: list[int], digest: Callable[[str], str | None]
) -> list[tuple[list[int], str | None]]:
    """Each bullet's stray lines and the digest of its content, read alone as the import
    read it within the file (None when it holds no memory)."""
    out: list[tuple[list[int], str | None]] = []
    for span in _bullet_spans(lines, set(stray)):
        items = importers.parse("\n".join(lines[n - 1] for n in span), "markdown").items
        out.append((span, digest(items[0].content) if len(items) == 1 else None))
    return out


def without_lines(preamble: str, numbers: set[int]) -> str:
    """``preamble`` without the lines ``numbers``; blank lines left doubled by the removal
    are merged (each kept line keeps its own line ending)."""
    out: list[str] = []
    removed_before = False
    for number, line in enumerate(split_lines(preamble), start=1):
        if number in numbers:
            removed_before = True
            continue
        blank = not line.strip()
        if blank and removed_before and (not out or not out[-1].strip()):
            continue  # the blank line after a removed block, where one is already there
        removed_before = removed_before and blank
        out.append(line)
    return "".join(out)


def _lines(text: str) -> list[str]:
    """The lines as an editor numbers them (CRLF, CR, LF), without their endings."""
    return [strip_eol(line) for line in split_lines(text)]


def _shown_lines(text: str) -> list[str]:
    """``_lines`` as the import and the replies show them (one character per undecodable
    byte, so the numbering is the same)."""
    return [display(line) for line in _lines(text)]


def _bullet_spans(lines: list[str], stray: set[int]) -> list[list[int]]:
    """The stray lines of each top-level bullet: the bullet and the indented lines that
    continue it (blank lines between them allowed), as the import reads it."""
    spans: list[list[int]] = []
    current: list[int] | None = None
    for number, line in enumerate(lines, start=1):
        if number not in stray:
            if line.strip():
                current = None
            continue
        if current is not None and line.startswith(("  ", "\t")):
            current.append(number)
        elif BULLET.match(line):
            current = [number]
            spans.append(current)
        else:
            current = None
    return spans
